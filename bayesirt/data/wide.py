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

from bayesirt.data.answer_key import record_key, score_answers
from bayesirt.data.families import OTHER, derive_family
from bayesirt.data.files import NA_TOKENS, TEXT_SUFFIXES, check_text, existing, reading
from bayesirt.data.layout import ORIENTATIONS, Layout, check_orientation, record_layout, warn_layout
from bayesirt.data.reading import warn_dropped
from bayesirt.data.responses import make_responses
from bayesirt.errors import DataError

__all__ = ["ORIENTATIONS", "is_wide_table", "read_wide_csv", "from_dataframe", "wide_parts"]


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


def _share(labels) -> tuple[float, str, str]:
    """The share of ``labels`` that look like model ids, their count (``"k of n"``) and that count with an
    example, for messages."""
    if labels is None or not len(labels):
        return 0.0, "", ""
    like = _model_like(labels)
    count = f"{int(like.sum())} of {len(like)}"
    example = f", e.g. {str(np.asarray(labels, dtype=object)[like][0])!r}" if like.any() else ""
    return float(like.mean()), count, count + example


def _resolve_orientation(orientation: str, row_label: Any, columns: list[str],
                         row_ids=None) -> tuple[Layout, str | None]:
    """The layout by the auto rules (see :func:`read_wide_csv`) or as given, and the doubt to warn of
    (the guess of ``auto``, or evidence against a given layout), None when there is none."""
    orientation = check_orientation(orientation)
    rows = _rows_from_label(row_label)
    cols_like, cols_count, cols_text = _share(columns)
    rows_like, rows_count, rows_text = _share(row_ids)
    if orientation != "auto":
        want = "models" if orientation == "models-rows" else "items"
        if rows is not None and rows != want:
            raise DataError(
                f"the row-id column {row_label!r} names {rows} but orientation={orientation!r}; "
                "drop the orientation option or rename the column"
            )
        doubt = None
        if rows is None and want == "models" and cols_like > rows_like:
            doubt = f"the column headers look like model ids ({cols_text})"
        elif rows is None and want == "items" and rows_like > cols_like:
            doubt = f"the row ids look like model ids ({rows_text})"
        return Layout(orientation, f"given (orientation={orientation!r})"), doubt
    if rows is not None:
        return Layout("models-rows" if rows == "models" else "items-rows", f"the row-id header {row_label!r}"), None
    if cols_like > 0 and cols_like >= rows_like:
        # both sides are labelled: the side whose labels look more like model ids holds the models
        # (an item header such as "philosophy.12" can match a family name by accident)
        doubt = (f"the row ids look like model ids too ({rows_text})" if rows_like
                 else f"only {cols_count} column headers look like model ids" if cols_like < 0.5 else None)
        return Layout("items-rows", f"column headers that look like model ids ({cols_text})"), doubt
    if rows_like > 0:
        doubt = (f"the column headers look like model ids too ({cols_text})" if cols_like
                 else f"only {rows_count} row ids look like model ids" if rows_like < 0.5 else None)
        return Layout("models-rows", f"row ids that look like model ids ({rows_text})"), doubt
    return (Layout("models-rows", "guessed: the psychometric convention (rows = respondents), as nothing in "
                                 "the file tells which side holds the models"),
            "neither the row-id header (model/item) nor the ids (none looks like a model id) tell which side holds "
            "the models, so the psychometric convention rows = respondents was applied")


def _assemble(values: np.ndarray, row_ids: Any, col_ids: list[str], layout: Layout, *, key: Any = None,
              where: Any = None, **attrs: Any) -> xr.Dataset:
    """The response Dataset of a wide table read with ``layout`` (answers scored against ``key``)."""
    n_rows = values.shape[0]
    row_ids = [str(i) for i in range(n_rows)] if row_ids is None else row_ids
    if layout.orientation == "items-rows":
        matrix, items, models = values, row_ids, col_ids
    else:
        matrix, items, models = values.T, col_ids, row_ids
    if key is not None:
        matrix = score_answers(matrix, items, models, key, where)
    ds = record_layout(make_responses(matrix, item_id=items, model_id=models, **attrs), layout)
    warn_dropped(ds)
    return ds if key is None else record_key(ds, key)


def wide_parts(path: Path, orientation: str, id_column: str | None) -> tuple[np.ndarray, Any, list[str], Layout]:
    """Read a wide text table: (values rows x cols, row ids or None, column ids, layout); warns
    (:class:`~bayesirt.data.layout.OrientationWarning`) when the layout is a guess or contradicts the file."""
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
    layout, doubt = _resolve_orientation(orientation, row_label, header, row_ids)
    if doubt:
        warn_layout(path, layout.orientation, body.shape, doubt, given=check_orientation(orientation) != "auto")
    return body, row_ids, header, layout


def read_wide_csv(
    path: str | os.PathLike[str],
    *,
    orientation: str = "auto",
    id_column: str | None = "auto",
    drop_empty: bool = True,
    binarize: float | None = None,
    key: str | os.PathLike[str] | None = None,
) -> xr.Dataset:
    """Read a wide table (one row per item or per model) from CSV/TSV/TXT.

    Cells are 0/1 (``"0"``, ``"1"``, ``"0.0"``, ``"1.0"``), or answers scored with ``key``; empty cells
    (or NA/NaN/null) are missing.

    With ``orientation="auto"`` these rules apply in order:

    a. the first column header (case-insensitive) is ``model``, ``model_id``, ``models``,
       ``respondent`` or ``person``: that column holds model ids and rows are models;
    b. it is ``item``, ``item_id``, ``items`` or ``question``: it holds item ids, rows are items;
    c. the first column is unnamed (empty header): it holds row ids (orientation still open);
    d. otherwise, if any other column header matches a model family
       (:func:`~bayesirt.data.families.derive_family` is not ``"other"``) or contains ``/``,
       columns are models and rows are items; when the rows are labelled too (rule c), only if the
       share of such headers is at least the share of such row ids (an item header like
       ``philosophy.12`` can match a family name by accident);
    e. otherwise, if the row ids look like model ids, rows are models;
    f. otherwise rows are respondents (models) and columns items, the psychometric
       convention (e.g. LSAT6 with columns ``Q1..Q5``).

    Rules d-f warn (:class:`~bayesirt.data.layout.OrientationWarning`, naming the file, the layout
    used, the reason and the flag) when they guess: rule f always, d and e when both sides have
    model-like labels or fewer than half of the deciding labels look like model ids. A given
    orientation is obeyed; a row-id header naming the other side is refused, and model-like labels
    on the other side give the warning. The layout used is kept in ``attrs["orientation"]`` (and what
    decided it in ``attrs["orientation_basis"]``).

    Without a row-id column, row ids are ``"0" .. "n-1"``.

    Parameters
    ----------
    path : path-like
        The file; ``.tsv`` is tab-separated, ``.txt`` is sniffed (comma, tab or semicolon).
    orientation : {"auto", "models-rows", "items-rows"}
        The layout instead of the auto rules (the earlier ``models_by_items`` / ``items_by_models``
        are read too).
    id_column : "auto", None or str
        ``"auto"``: rules a-c; ``None``: no row-id column; a header name: that column holds row ids.
    drop_empty : bool
        Drop items/models with no observed response, naming them in a :class:`~bayesirt.data.reading.DroppedWarning`
        and in ``attrs["dropped_items"]`` / ``attrs["dropped_models"]`` (default, as for every reader and
        :func:`~bayesirt.data.load`); ``False`` refuses such data, naming them.
    binarize : float, optional
        Threshold T for partial-credit cells: score >= T -> 1 (all file readers take it).
    key : path-like, optional
        Answer key CSV (``item_id,key``): cells are multiple-choice answers, scored 1 where they
        equal the item's key (:func:`~bayesirt.data.answer_key.score_answers`); kept in ``attrs["answer_key"]``.

    Returns
    -------
    xarray.Dataset
        A response Dataset (see :func:`~bayesirt.data.responses.make_responses`), with attrs
        ``name`` (file stem), ``source`` (the path) and the layout (above).
    """
    p = existing(path)
    with reading(p):
        try:
            values, row_ids, cols, layout = wide_parts(p, orientation, id_column)
            return _assemble(values, row_ids, cols, layout, key=key, where=p, name=p.stem, source=str(p),
                             drop_empty=drop_empty, binarize=binarize)
        except DataError as err:
            hint = _long_hint(p)
            if hint is None:
                raise
            raise DataError(f"{err}. {hint}") from None


def _long_hint(path: Path) -> str | None:
    """What to do when a file read as wide failed and its header names both a model and an item column: it is
    probably a long table whose columns are not named ``model``, ``item``, ``correct``."""
    with open(path, encoding="utf-8-sig", newline="") as fh:
        first = fh.readline().rstrip("\r\n")
    sep = TEXT_SUFFIXES.get(path.suffix.lower()) or ("\t" if "\t" in first else ",")
    names = {c.strip().strip('"').lower() for c in first.split(sep)}
    if not (names & _MODEL_NAMES and names & _ITEM_NAMES):
        return None
    return ("Its header names a model and an item column, as a long table (one row per model and item) does: "
            "it was read as a wide table because a long table needs the columns model, item and correct; rename "
            "them (or in Python pass load(path, model=..., item=..., correct=...))")


def from_dataframe(df: pd.DataFrame, *, orientation: str = "auto", drop_empty: bool = True) -> xr.Dataset:
    """Build a response Dataset from a wide DataFrame whose index holds the row ids.

    The auto rules of :func:`read_wide_csv` apply with the index name in place of the first
    column header (an unnamed index is a plain row-id column). A DataFrame with a default
    RangeIndex whose first column is named like an id column (``model``, ``item``, ...) uses
    that column as the index.

    Parameters
    ----------
    df : pandas.DataFrame
        Cells 0/1 or missing (NaN, None, pandas.NA).
    orientation : {"auto", "models-rows", "items-rows"}
        The layout instead of the auto rules (a guess warns, as in :func:`read_wide_csv`).
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
    row_ids = None if isinstance(df.index, pd.RangeIndex) else df.index.to_numpy()
    layout, doubt = _resolve_orientation(orientation, df.index.name, cols, row_ids)
    if doubt:
        given = check_orientation(orientation) != "auto"
        warn_layout("the DataFrame", layout.orientation, df.shape, doubt, given=given)
    return _assemble(df.to_numpy(dtype=object), df.index.to_numpy(), cols, layout, drop_empty=drop_empty)


def is_wide_table(path: Path, options: Any) -> bool:
    """A text table (the registry asks the long table first)."""
    return path.is_file() and path.suffix.lower() in TEXT_SUFFIXES
