"""NumPy matrices into a response Dataset: a bare ``.npy`` file, and the matrix of an NPZ archive or of
the NT folder, with their ids when there are any.

A NumPy matrix is rows = items, columns = models (the layout of bayesirt's own ``responses`` and of
the NT files) unless its ids say otherwise or ``orientation`` is given: ``auto`` reads the layout off
the lengths of the id arrays (``item_id``, ``item_group`` per item; ``model_id``, ``family``,
``owner`` per model) and warns when they cannot tell (no ids, or a square matrix). Missing cells
are NaN or -1; with an answer key the cells are multiple-choice answers
(:mod:`bayesirt.data.answer_key`).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import xarray as xr

from bayesirt.data.answer_key import record_key, score_answers
from bayesirt.data.files import existing, np_load, reading
from bayesirt.data.formats.arrays import MATRIX_KEYS
from bayesirt.data.layout import Layout, check_orientation, record_layout, warn_layout
from bayesirt.data.reading import warn_dropped
from bayesirt.data.responses import make_responses
from bayesirt.errors import DataError

__all__ = ["MATRIX_KEYS", "missing_as_nan", "matrix_layout", "from_matrix", "read_npy"]

_PER_ITEM, _PER_MODEL = ("item_id", "item_group", "testlet"), ("model_id", "family", "owner")


def missing_as_nan(arr: Any) -> np.ndarray:
    """A numeric matrix with NaN (or -1) for missing -> float with NaN; other dtypes as they are."""
    arr = np.asarray(arr)
    if arr.dtype.kind in "iu":
        return np.where(arr == -1, np.nan, arr.astype(np.float64))
    if arr.dtype.kind == "f":
        return np.where(arr == -1, np.nan, arr)
    return arr


def _length(values: Any) -> int | None:
    return len(values) if np.ndim(values) == 1 else None


def _fits(meta: dict[str, Any], n_items: int, n_models: int) -> bool:
    """Every 1-D id or label array has the length of its side when rows are items and columns models."""
    return all(_length(meta[k]) in (None, n) for keys, n in ((_PER_ITEM, n_items), (_PER_MODEL, n_models))
               for k in keys if k in meta)


def matrix_layout(shape: tuple[int, int], meta: dict[str, Any], orientation: str) -> tuple[Layout, str | None]:
    """The layout of a NumPy matrix of ``shape`` with the id arrays ``meta``, and the doubt to warn of."""
    orientation = check_orientation(orientation)
    n_rows, n_cols = shape
    as_items, as_models = _fits(meta, n_rows, n_cols), _fits(meta, n_cols, n_rows)
    named = [k for k in meta if _length(meta[k]) is not None]
    lengths = ", ".join(f"{k} has {_length(meta[k])}" for k in named)
    if orientation != "auto":
        wrong = not (as_items if orientation == "items-rows" else as_models)
        if wrong and (as_models if orientation == "items-rows" else as_items):
            other = "models-rows" if orientation == "items-rows" else "items-rows"
            raise DataError(f"orientation={orientation!r} contradicts the ids of the {n_rows} x {n_cols} matrix "
                            f"({lengths}); pass --orientation {other} or drop it")
        return Layout(orientation, f"given (orientation={orientation!r})"), None
    if as_items != as_models:
        return Layout("items-rows" if as_items else "models-rows", f"the lengths of the ids ({lengths})"), None
    if not as_items:  # the ids fit neither way: make_responses names the one of the wrong length
        return Layout("items-rows", "NumPy matrices are rows = items"), None
    reason = (f"the matrix is square ({n_rows} x {n_cols}), so its ids fit either way" if named
              else "the matrix has no item_id or model_id")
    return (Layout("items-rows", "guessed: NumPy's convention (rows = items)"),
            f"{reason}; NumPy matrices are read as rows = items, the layout of bayesirt's responses and the NT files")


def from_matrix(matrix: Any, meta: dict[str, Any], *, where: Any, orientation: str = "auto", key: Any = None,
                **attrs: Any) -> xr.Dataset:
    """The response Dataset of a NumPy ``matrix`` with the id and label arrays ``meta`` (keys of
    :data:`MATRIX_KEYS`), laid out by :func:`matrix_layout` (``where`` names the file in the warning),
    its answers scored against ``key`` if given; ``attrs`` go to
    :func:`~bayesirt.data.responses.make_responses`."""
    matrix = missing_as_nan(matrix)
    layout = Layout("items-rows", "NumPy matrices are rows = items")
    if matrix.ndim == 2:  # else make_responses refuses it
        layout, doubt = matrix_layout(matrix.shape, meta, orientation)
        if doubt:
            warn_layout(where, layout.orientation, matrix.shape, doubt, given=False)
        if layout.orientation == "models-rows":
            matrix = matrix.T
        if key is not None:
            ids = [meta[k] if _length(meta.get(k)) == n else np.arange(n).astype(str)
                   for k, n in (("item_id", matrix.shape[0]), ("model_id", matrix.shape[1]))]
            matrix = score_answers(matrix, *ids, key, where)
    ds = record_layout(make_responses(matrix, **meta, **attrs), layout)
    warn_dropped(ds)
    return ds if key is None else record_key(ds, key)


def read_npy(path: str | os.PathLike[str], *, orientation: str = "auto", key: str | os.PathLike[str] | None = None,
             drop_empty: bool = True, binarize: float | None = None) -> xr.Dataset:
    """Read a bare ``.npy`` matrix (written with ``np.save``): 0/1 with NaN or -1 for missing (or answers
    with ``key``), no ids (items and models are numbered ``"0" .. "n-1"``).

    It is read as rows = items with a :class:`~bayesirt.data.layout.OrientationWarning` unless
    ``orientation`` says ``"items-rows"`` or ``"models-rows"``."""
    p = existing(path)
    with reading(p):
        return from_matrix(np_load(p), {}, where=p, orientation=orientation, key=key, name=p.stem, source=str(p),
                           drop_empty=drop_empty, binarize=binarize)
