"""The NPZ archive and the NT response folder (:mod:`bayesirt.data.nt`)."""

from pathlib import Path
from typing import Any

from bayesirt.data.formats.arrays import MATRIX_KEYS, MATRIX_OPTIONS
from bayesirt.data.registry import Reader, has_suffix

__all__ = ["READERS"]


def _is_folder(path: Path, options: Any) -> bool:
    return path.is_dir()


READERS = (
    Reader("NPZ archive", f".npz (arrays {', '.join(MATRIX_KEYS)})", "bayesirt.data.nt", "read_nt_npz",
           has_suffix(".npz"), MATRIX_OPTIONS, family="matrix files"),
    Reader("response folder", "a folder (responses.npy + models.csv)", "bayesirt.data.nt", "read_nt_dir", _is_folder,
           MATRIX_OPTIONS, family="matrix files", order=20),  # after harness output, which is a folder too
)
