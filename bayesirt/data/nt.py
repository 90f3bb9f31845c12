"""The input contracts of the NT artifact: an NPZ archive, or a folder with ``responses.npy`` and ``models.csv``."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.data.files import NPZ_MAGIC, check_text, existing, np_load, parsing, reading
from bayesirt.data.responses import make_responses
from bayesirt.errors import DataError

__all__ = ["read_nt_npz", "read_nt_dir"]


def _strings(arr: np.ndarray) -> np.ndarray:
    return np.char.decode(arr, "utf-8") if arr.dtype.kind == "S" else arr


def _nt_matrix(arr: np.ndarray) -> np.ndarray:
    """NT responses: 0/1 with NaN or -1 for missing -> float with NaN."""
    arr = np.asarray(arr)
    if arr.dtype.kind in "iu":
        return np.where(arr == -1, np.nan, arr.astype(np.float64))
    if arr.dtype.kind == "f":
        return np.where(arr == -1, np.nan, arr)
    return arr


def read_nt_npz(
    path: str | os.PathLike[str], *, drop_empty: bool = False, binarize: float | None = None
) -> xr.Dataset:
    """Read an NT-artifact NPZ archive.

    Arrays: ``responses`` (items x models; 0/1 with NaN or -1 for missing) and ``model_id``;
    optional ``item_id``, ``item_group``, ``family``, ``owner``. Pickled (object) arrays are
    refused; save string arrays as fixed-width unicode (``np.asarray(ids, dtype=str)``).
    ``drop_empty=True`` drops items/models with no observed response instead of raising.
    """
    p = existing(path)
    with reading(p), open(p, "rb") as fh:  # our handle: np.load leaks its own when the zip is corrupt
        if not fh.read(4).startswith(NPZ_MAGIC):  # else np.load reads a .npy, or takes the file for a pickle
            raise DataError(f"{p} is not an NPZ archive (a zip of .npy arrays); write it with np.savez")
        fh.seek(0)
        with parsing(p):
            npz = np.load(fh, allow_pickle=False)
        keys = set(npz.files)
        for required in ("responses", "model_id"):
            if required not in keys:
                raise DataError(f"NPZ lacks the array {required!r} (has {sorted(keys)}); add it")
        names = ("responses", "model_id", "item_id", "item_group", "family", "owner")
        arrays = {key: np_load(p, npz, key) for key in names if key in keys}
        matrix = _nt_matrix(arrays.pop("responses"))
        meta = {k: _strings(v) for k, v in arrays.items()}
        return make_responses(matrix, name=p.stem, source=str(p), drop_empty=drop_empty, binarize=binarize, **meta)


def read_nt_dir(
    path: str | os.PathLike[str], *, drop_empty: bool = False, binarize: float | None = None
) -> xr.Dataset:
    """Read the NPY+CSV variant of the NT artifact: a folder of files.

    ``responses.npy`` (items x models; 0/1 with NaN or -1 for missing), ``models.csv``
    (columns ``model_id`` [, ``family``, ``owner``]) and optionally ``items.csv`` (columns
    ``item_id`` [, ``item_group``]), rows in matrix order. ``drop_empty=True`` drops
    items/models with no observed response instead of raising.
    """
    p = existing(path)
    if not p.is_dir():
        raise DataError(f"{p} is not a folder; read_nt_dir needs a folder with responses.npy and models.csv")
    for needed in ("responses.npy", "models.csv"):
        if not (p / needed).is_file():
            raise DataError(f"folder {p} lacks {needed}; an NT folder needs responses.npy and models.csv")
    with reading(p / "responses.npy"):
        matrix = _nt_matrix(np_load(p / "responses.npy"))
    meta: dict[str, Any] = {}
    tables = (("models.csv", "model_id", ("family", "owner")), ("items.csv", "item_id", ("item_group",)))
    for fname, id_col, extra in tables:
        f = p / fname
        if not f.is_file():
            continue
        with reading(f):
            check_text(f)
            table = pd.read_csv(f, dtype=str, keep_default_na=False, encoding="utf-8-sig")
            if id_col not in table.columns:
                raise DataError(f"missing column {id_col!r} (has {list(table.columns)}); add it")
            for col in (id_col, *extra):
                if col in table.columns:
                    meta[col] = table[col].to_numpy(dtype=object)
    with reading(p):
        return make_responses(matrix, name=p.name, source=str(p), drop_empty=drop_empty, binarize=binarize, **meta)
