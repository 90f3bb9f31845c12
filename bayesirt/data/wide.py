"""Wide tables (one row per item or per model) from CSV/TSV/TXT or a DataFrame, with the orientation rules."""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.data.families import OTHER, derive_family
from bayesirt.data.files import NA_TOKENS, TEXT_SUFFIXES, check_text, existing, reading
from bayesirt.data.responses import make_responses
from bayesirt.errors import DataError

__all__ = ["ORIENTATIONS", "read_wide_csv", "from_dataframe", "wide_parts"]


ORIENTATIONS = ("auto", "items_by_models", "models_by_items")


_MODEL_NAMES = {"model", "model_id", "models", "respondent", "person"}


_ITEM_NAMES = {"item", "item_id", "items", "question"}


def _is_unnamed(header: Any) -> bool:
    text = "" if header is None or (not isinstance(header, str) and pd.isna(header)) else str(header).strip()
    return text == "" or re.fullmatch(r"Unnamed: \d+", text) is not None


def _rows_from_label(label: Any) -> str | None:
    """'models' / 'items' if a row-id header names the rows, else None."""
    text = "" if _is_unnamed(label) else str(label).strip().lower()
    if text in _MODEL_NAMES:
        return "models"
    if text in _ITEM_NAMES:
        return "items"
    return None


def _model_like(labels) -> np.ndarray:
    """Labels that look like model ids: a recognised family, or an ``owner/name`` slash."""
    labels = [str(x) for x in labels]
    return (derive_family(labels) != OTHER) | np.array(["/" in c for c in labels], dtype=bool)


def _resolve_orientation(orientation: str, row_label: Any, columns: list[str], row_ids=None) -> str:
    """Apply the auto rules (see :func:`read_wide_csv`) and check an explicit choice."""
    if orientation not in ORIENTATIONS:
        raise DataError(f"orientation {orientation!r} is not one of {', '.join(ORIENTATIONS)}; pick one of those")
    rows = _rows_from_label(row_label)
    if orientation != "auto":
        want = "models" if orientation == "models_by_items" else "items"
        if rows is not None and rows != want:
            raise DataError(
                f"the row-id column {row_label!r} names {rows} but orientation={orientation!r}; "
                "drop the orientation option or rename the column"
            )
        return orientation
    if rows is not None:
        return "models_by_items" if rows == "models" else "items_by_models"
    looks_like_models = _model_like(columns)
    if row_ids is not None and len(row_ids) and looks_like_models.any():
        # both sides are labelled: the side whose labels look more like model ids holds the models
        # (an item header such as "philosophy.12" can match a family name by accident)
        return "items_by_models" if looks_like_models.mean() >= _model_like(row_ids).mean() else "models_by_items"
    return "items_by_models" if looks_like_models.any() else "models_by_items"


def _assemble(values: np.ndarray, row_ids: Any, col_ids: list[str], orientation: str, **attrs: Any) -> xr.Dataset:
    if orientation == "items_by_models":
        return make_responses(values, item_id=row_ids, model_id=col_ids, **attrs)
    return make_responses(values.T, item_id=col_ids, model_id=row_ids, **attrs)


def wide_parts(path: Path, orientation: str, id_column: str | None) -> tuple[np.ndarray, Any, list[str], str]:
    """Read a wide text table: (values rows x cols, row ids or None, column ids, orientation)."""
    check_text(path)
    sep = TEXT_SUFFIXES.get(path.suffix.lower(), ",")
    if sep is None:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            sample = fh.readline()
        try:
            sep = csv.Sniffer().sniff(sample, delimiters=",\t;").delimiter
        except csv.Error:
            sep = ","
    raw = pd.read_csv(path, sep=sep, header=None, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    header = ["" if _is_unnamed(h) else str(h) for h in raw.iloc[0].tolist()]
    body = raw.iloc[1:].to_numpy(dtype=object)
    if id_column == "auto":
        first = header[0] if header else ""
        id_pos = 0 if (_rows_from_label(first) is not None or first.strip() == "") else None
    elif id_column is None:
        id_pos = None
    elif id_column in header:
        id_pos = header.index(id_column)
    else:
        raise DataError(
            f"id_column {id_column!r} is not a column of {path} (columns start {header[:5]}); pass an existing column name"
        )
    row_label, row_ids = None, None
    if id_pos is not None:
        row_label, row_ids = header[id_pos], body[:, id_pos]
        header = header[:id_pos] + header[id_pos + 1 :]
        body = np.delete(body, id_pos, axis=1)
    cells = pd.DataFrame(body).apply(lambda col: col.str.strip().str.lower()).to_numpy(dtype=object)
    body[pd.isna(cells) | np.isin(cells, list(NA_TOKENS))] = np.nan
    return body, row_ids, header, _resolve_orientation(orientation, row_label, header, row_ids)


def read_wide_csv(
    path: str | os.PathLike[str],
    *,
    orientation: str = "auto",
    id_column: str | None = "auto",
    drop_empty: bool = False,
    binarize: float | None = None,
) -> xr.Dataset:
    """Read a wide table (one row per item or per model) from CSV/TSV/TXT.

    Cells are 0/1 (``"0"``, ``"1"``, ``"0.0"``, ``"1.0"``); empty cells (or NA/NaN/null) are missing.

    With ``orientation="auto"`` these rules apply in order:

    a. the first column header (case-insensitive) is ``model``, ``model_id``, ``models``,
       ``respondent`` or ``person``: that column holds model ids and rows are models;
    b. it is ``item``, ``item_id``, ``items`` or ``question``: it holds item ids, rows are items;
    c. the first column is unnamed (empty header): it holds row ids (orientation still open);
    d. otherwise, if any other column header matches a model family
       (:func:`~bayesirt.data.populations.derive_family` is not ``"other"``) or contains ``/``,
       columns are models and rows are items; when the rows are labelled too (rule c), only if the
       share of such headers is at least the share of such row ids (an item header like
       ``philosophy.12`` can match a family name by accident);
    e. otherwise rows are respondents (models) and columns items, the psychometric
       convention (e.g. LSAT6 with columns ``Q1..Q5``).

    Without a row-id column, row ids are ``"0" .. "n-1"``.

    Parameters
    ----------
    path : path-like
        The file; ``.tsv`` is tab-separated, ``.txt`` is sniffed (comma, tab or semicolon).
    orientation : {"auto", "items_by_models", "models_by_items"}
        Force the layout instead of the auto rules.
    id_column : "auto", None or str
        ``"auto"``: rules a-c; ``None``: no row-id column; a header name: that column holds row ids.
    drop_empty : bool
        Drop items/models with no observed response instead of raising (all readers take it).
    binarize : float, optional
        Threshold T for partial-credit cells: score >= T -> 1 (all file readers take it).

    Returns
    -------
    xarray.Dataset
        A response Dataset (see :func:`~bayesirt.data.responses.make_responses`), with attrs
        ``name`` (file stem) and ``source`` (the path).
    """
    p = existing(path)
    with reading(p):
        values, row_ids, cols, orient = wide_parts(p, orientation, id_column)
        return _assemble(values, row_ids, cols, orient, name=p.stem, source=str(p), drop_empty=drop_empty,
                         binarize=binarize)


def from_dataframe(df: pd.DataFrame, *, orientation: str = "auto", drop_empty: bool = False) -> xr.Dataset:
    """Build a response Dataset from a wide DataFrame whose index holds the row ids.

    The auto rules of :func:`read_wide_csv` apply with the index name in place of the first
    column header (an unnamed index is a plain row-id column). A DataFrame with a default
    RangeIndex whose first column is named like an id column (``model``, ``item``, ...) uses
    that column as the index.

    Parameters
    ----------
    df : pandas.DataFrame
        Cells 0/1 or missing (NaN, None, pandas.NA).
    orientation : {"auto", "items_by_models", "models_by_items"}
        Force the layout instead of the auto rules.
    drop_empty : bool
        As in :func:`read_wide_csv`.
    """
    if not isinstance(df, pd.DataFrame):
        raise DataError(
            f"from_dataframe needs a pandas DataFrame, got {type(df).__name__}; use make_responses for arrays"
        )
    if isinstance(df.index, pd.MultiIndex) or isinstance(df.columns, pd.MultiIndex):
        raise DataError("the DataFrame has a MultiIndex; reset it to one level of row ids and one of column ids")
    if (
        df.index.name is None
        and isinstance(df.index, pd.RangeIndex)
        and len(df.columns)
        and _rows_from_label(df.columns[0]) is not None
    ):
        df = df.set_index(df.columns[0])
    cols = [str(c) for c in df.columns]
    orient = _resolve_orientation(orientation, df.index.name, cols)
    return _assemble(df.to_numpy(dtype=object), df.index.to_numpy(), cols, orient, drop_empty=drop_empty)
