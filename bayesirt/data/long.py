"""Long tables: one row per (model, item) with a 0/1 ``correct`` column (or answers scored with a key), from
CSV/TSV/TXT or Parquet."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.data.answer_key import record_key, score_answers
from bayesirt.data.files import NA_TOKENS, TEXT_SUFFIXES, check_text, existing, parsing, reading
from bayesirt.data.formats.long import LONG_COLUMNS
from bayesirt.data.reading import warn_dropped
from bayesirt.data.responses import make_responses
from bayesirt.errors import DataError

__all__ = ["read_long", "is_long_table", "has_long_header", "is_long_columns", "LONG_COLUMNS"]

_PARQUET = (".parquet", ".pq")


def _read_table(path: Path) -> pd.DataFrame:
    suffix = path.suffix.lower()
    if suffix in _PARQUET:
        import pyarrow.parquet as pq

        with parsing(path):  # pyarrow raises many exception types on a corrupt file
            table = pq.read_table(path, use_pandas_metadata=True)  # what pd.read_parquet reads
            table.validate(full=True)  # e.g. invalid UTF-8 in a string column, else found only when a value is used
            return table.to_pandas()
    if suffix in TEXT_SUFFIXES:
        check_text(path)
        sep = TEXT_SUFFIXES[suffix]
        engine = None if sep else "python"
        return pd.read_csv(path, sep=sep, engine=engine, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    raise DataError(f"unsupported long-format file {path.name!r}; use .csv, .tsv, .txt, .parquet or .pq")


def _check_scalars(df: pd.DataFrame, columns: list[str]) -> None:
    """The ``columns`` read hold one scalar per cell (Parquet columns can hold lists or structs)."""
    for col in (c for c in columns if df[c].dtype == object):  # text columns have a string dtype
        nested = df[col].map(lambda v: isinstance(v, (list, tuple, dict, set, np.ndarray))).to_numpy(dtype=bool)
        if nested.any():
            row = int(np.flatnonzero(nested)[0]) + 1
            raise DataError(
                f"column {col!r} holds lists or other non-scalar values (data row {row}); "
                "give one plain value per cell"
            )


#: Optional metadata columns of a long file: True per item, False per model.
_META = {"item_group": True, "testlet": True, "family": False, "owner": False}


def _per_key(df: pd.DataFrame, key: str, col: str, order: pd.Index) -> np.ndarray:
    """One value of ``col`` per ``key`` (in ``order``); DataError if it varies within a key."""
    n = df.groupby(key, sort=False)[col].nunique(dropna=False)
    if (n > 1).any():
        bad = n.index[n > 1][0]
        raise DataError(f"column {col!r} varies within {key} {bad!r}; give each {key} a single {col}")
    return df.groupby(key, sort=False)[col].first().reindex(order).to_numpy()


def read_long(
    path: str | os.PathLike[str],
    *,
    model: str = "model",
    item: str = "item",
    correct: str = "correct",
    drop_empty: bool = True,
    binarize: float | None = None,
    key: str | os.PathLike[str] | None = None,
) -> xr.Dataset:
    """Read long-format responses: one row per (model, item) with a 0/1 ``correct`` column.

    Combinations absent from the file are missing cells; a row whose ``correct`` is empty is
    missing too. Optional columns ``item_group``, ``testlet`` (per item; a blank testlet: the item
    stands alone) and ``family``, ``owner`` (per model) are used when present and must be constant
    within their item / model. Items and models are ordered by first appearance.

    Parameters
    ----------
    path : path-like
        ``.csv``/``.tsv``/``.txt`` or ``.parquet``/``.pq``.
    model, item, correct : str
        Names of the model-id, item-id and correctness columns.
    drop_empty : bool
        As in :func:`read_wide_csv`.
    binarize : float, optional
        Threshold T for a partial-credit ``correct`` column: score >= T -> 1.
    key : path-like, optional
        Answer key CSV (``item_id,key``): ``correct`` holds multiple-choice answers, scored 1 where
        they equal the item's key (:func:`~bayesirt.data.answer_key.score_answers`).

    Returns
    -------
    xarray.Dataset
        A response Dataset with attrs ``name`` (file stem) and ``source`` (the path).
    """
    p = existing(path)
    with reading(p):
        df = _read_table(p)
        absent = [c for c in (model, item, correct) if c not in df.columns]
        if absent:
            raise DataError(
                f"long file lacks column(s) {absent} (has {list(df.columns)[:8]}); "
                "pass model=, item=, correct= with the right column names"
            )
        _check_scalars(df, [model, item, correct, *(c for c in _META if c in df.columns)])
        for id_col in (model, item):
            blank = df[id_col].isna() | (df[id_col].astype(str).str.strip() == "")
            if blank.any():
                row = int(np.flatnonzero(blank)[0]) + 1
                raise DataError(f"column {id_col!r} has a blank id in data row {row}; fill it in")
            df[id_col] = df[id_col].astype(str)
        dup = df.duplicated([model, item])
        if dup.any():
            row = df[dup].iloc[0]
            raise DataError(
                f"duplicate rows for model {row[model]!r}, item {row[item]!r}; keep one response per (model, item)"
            )
        item_codes, items = pd.factorize(df[item], sort=False)
        model_codes, models = pd.factorize(df[model], sort=False)
        values = np.full((len(items), len(models)), None, dtype=object)
        raw = df[correct].to_numpy(dtype=object)
        if key is None and (df[correct].dtype == object or pd.api.types.is_string_dtype(df[correct])):
            words = {"true": 1, "false": 0}
            raw = np.array(
                [None if str(v).strip().lower() in NA_TOKENS else words.get(str(v).strip().lower(), v) for v in raw],
                dtype=object,
            )
        values[item_codes, model_codes] = raw
        if key is not None:
            values = score_answers(values, items, models, key, p)
        meta: dict[str, Any] = {}
        for col, per_item in _META.items():
            if col in df.columns:
                meta[col] = _per_key(df, item, col, items) if per_item else _per_key(df, model, col, models)
        ids = {"item_id": items.to_numpy(), "model_id": models.to_numpy()}
        ds = make_responses(values, **ids, **meta, name=p.stem, source=str(p), drop_empty=drop_empty,
                            binarize=binarize)
        warn_dropped(ds)
        return ds if key is None else record_key(ds, key)


def is_long_columns(columns: Any) -> bool:
    """The rule for long format, the same for a text header and a Parquet schema: the columns include
    ``model``, ``item`` and ``correct``; others (the optional ``item_group``, ``testlet``, ``family``, ``owner``, or
    any other) are read or ignored as :func:`read_long` says."""
    return set(LONG_COLUMNS) <= {str(c).strip().strip('"').lower() for c in columns}


def has_long_header(path: Path, kwargs: dict[str, Any]) -> bool:
    """True if a text file should be read as long format (column options given, or :func:`is_long_columns`
    of its header)."""
    if set(LONG_COLUMNS) & set(kwargs):
        return True
    check_text(path)
    with open(path, encoding="utf-8-sig", newline="") as fh:
        first = fh.readline()
    sep = TEXT_SUFFIXES.get(path.suffix.lower()) or ("\t" if "\t" in first else ",")
    return is_long_columns(first.rstrip("\r\n").split(sep))


def is_long_table(path: Path, options: Any) -> bool:
    """Parquet, or a text table with the long header (or column options given)."""
    suffix = path.suffix.lower()
    if not path.is_file() or suffix not in (*_PARQUET, *TEXT_SUFFIXES):
        return False
    if suffix in _PARQUET:
        return True
    with reading(path):
        return has_long_header(path, options)
