"""File handling shared by the readers: one-line errors naming the file, text and NumPy checks."""

from __future__ import annotations

import contextlib
import csv
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from bayesirt.errors import DataError

__all__ = ["TEXT_SUFFIXES", "NA_TOKENS", "reading", "one_line", "existing", "check_text", "np_load"]


TEXT_SUFFIXES = {".csv": ",", ".tsv": "\t", ".txt": None}


NA_TOKENS = {"", "na", "nan", "null", "none", "n/a"}


@contextlib.contextmanager
def reading(path: Path) -> Iterator[None]:
    """Turn any failure while reading ``path`` into a one-line DataError naming the file."""
    try:
        yield
    except DataError as exc:
        msg = str(exc)
        raise DataError(msg if str(path) in msg else f"{path}: {msg}") from None
    except (ValueError, OSError, EOFError, KeyError, UnicodeError, csv.Error, zipfile.BadZipFile) as exc:
        # pandas/numpy/pyarrow/h5py errors on a corrupt or malformed file
        raise DataError(
            f"cannot read {path} ({one_line(exc)}); "
            f"check that it is a valid {path.suffix or 'data'} file (text must be UTF-8)"
        ) from None


def one_line(exc: BaseException, limit: int = 200) -> str:
    """An exception as ``Type: message`` on a single line (for DataError messages)."""
    detail = " ".join(str(exc).split())[:limit]
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def existing(path: str | os.PathLike[str]) -> Path:
    if not (p := Path(path)).exists():
        raise DataError(f"no such file or folder: {p}; check the path")
    return p


def check_text(path: Path) -> None:
    with open(path, "rb") as fh:
        if b"\x00" in fh.read(8192):
            raise DataError(f"{path} looks like a binary file, not delimited text; pass a CSV/TSV text file")


def np_load(path: Path, npz: Any = None, key: str | None = None) -> np.ndarray:
    """``np.load`` (or ``npz[key]``) refusing pickled object arrays with a DataError."""
    try:
        return npz[key] if npz is not None else np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "pickle" not in str(exc).lower():
            raise
        raise DataError(
            f"array {key or path.name!r} is a pickled object array and pickled arrays are refused; "
            "save string arrays as fixed-width unicode (np.asarray(ids, dtype=str)) and responses as 0/1/NaN floats"
        ) from None
