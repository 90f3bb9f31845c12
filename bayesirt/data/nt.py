"""The input contracts of the NT artifact: an NPZ archive, or a folder with ``responses.npy`` and ``models.csv``
(the layout and the answer key as for any NumPy matrix, :mod:`bayesirt.data.arrays`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.data.arrays import MATRIX_KEYS, from_matrix
from bayesirt.data.files import NPZ_MAGIC, check_text, existing, np_load, parsing, reading
from bayesirt.errors import DataError, warn

__all__ = ["read_nt_npz", "read_nt_dir"]


def _strings(arr: np.ndarray) -> np.ndarray:
    return np.char.decode(arr, "utf-8") if arr.dtype.kind == "S" else arr


def read_nt_npz(
    path: str | os.PathLike[str], *, orientation: str = "auto", key: str | os.PathLike[str] | None = None,
    drop_empty: bool = True, binarize: float | None = None
) -> xr.Dataset:
    """Read an NPZ archive (``np.savez``) of a response matrix, with its ids if any.

    Arrays: ``responses`` (0/1 with NaN or -1 for missing; answers with ``key``); optional
    ``item_id``, ``model_id``, ``item_group``, ``testlet``, ``family``, ``owner`` (other arrays are ignored with
    a warning). Rows are items unless the ids' lengths or ``orientation`` say rows are models
    (:func:`~bayesirt.data.arrays.matrix_layout`; without ids, or square, ``auto`` warns). Without
    ``item_id`` / ``model_id`` the ids are ``"0" .. "n-1"``. Pickled (object) arrays are refused;
    save string arrays as fixed-width unicode (``np.asarray(ids, dtype=str)``). ``drop_empty``
    (default True) drops items/models with no observed response, naming them; False refuses them.
    """
    p = existing(path)
    with reading(p), open(p, "rb") as fh:  # our handle: np.load leaks its own when the zip is corrupt
        if not fh.read(4).startswith(NPZ_MAGIC):  # else np.load reads a .npy, or takes the file for a pickle
            raise DataError(f"{p} is not an NPZ archive (a zip of .npy arrays); write it with np.savez")
        fh.seek(0)
        with parsing(p):
            npz = np.load(fh, allow_pickle=False)
        keys = set(npz.files)
        if "responses" not in keys:
            raise DataError(f"NPZ lacks the array 'responses' (has {sorted(keys)[:8]}); save the matrix as "
                            f"responses=, with optional {', '.join(MATRIX_KEYS[1:])} (np.savez)")
        if keys - set(MATRIX_KEYS):
            warn(f"{p}: arrays {sorted(keys - set(MATRIX_KEYS))[:8]} ignored; bayesirt reads "
                 f"{', '.join(MATRIX_KEYS)}", UserWarning)
        arrays = {name: np_load(p, npz, name) for name in MATRIX_KEYS if name in keys}
        matrix = arrays.pop("responses")
        meta = {k: _strings(v) for k, v in arrays.items()}
        return from_matrix(matrix, meta, where=p, orientation=orientation, key=key, name=p.stem, source=str(p),
                           drop_empty=drop_empty, binarize=binarize)


def read_nt_dir(
    path: str | os.PathLike[str], *, orientation: str = "auto", key: str | os.PathLike[str] | None = None,
    drop_empty: bool = True, binarize: float | None = None
) -> xr.Dataset:
    """Read the NPY+CSV variant of the NT artifact: a folder of files.

    ``responses.npy`` (items x models, or models x items when the number of rows of ``models.csv``
    or ``orientation`` says so; 0/1 with NaN or -1 for missing, answers with ``key``),
    ``models.csv`` (columns ``model_id`` [, ``family``, ``owner``]) and optionally ``items.csv``
    (columns ``item_id`` [, ``item_group``, ``testlet``]), rows in matrix order. ``drop_empty`` (default
    True) drops items/models with no observed response, naming them; False refuses them.
    """
    p = existing(path)
    if not p.is_dir():
        raise DataError(f"{p} is not a folder; read_nt_dir needs a folder with responses.npy and models.csv")
    for needed in ("responses.npy", "models.csv"):
        if not (p / needed).is_file():
            raise DataError(f"folder {p} lacks {needed}; an NT folder needs responses.npy and models.csv")
    with reading(p / "responses.npy"):
        matrix = np_load(p / "responses.npy")
    meta: dict[str, Any] = {}
    tables = (("models.csv", "model_id", ("family", "owner")), ("items.csv", "item_id", ("item_group", "testlet")))
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
        return from_matrix(matrix, meta, where=p, orientation=orientation, key=key, name=p.name, source=str(p),
                           drop_empty=drop_empty, binarize=binarize)
