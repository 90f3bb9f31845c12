"""Readers of response data (wide CSV, long CSV/Parquet, NT NPZ and NPY+CSV, DataFrame, NetCDF).

Every reader ends in :func:`~bayesirt.data.responses.make_responses`, so validation lives in
one place. Any problem with a file (absent, unknown format, unreadable, corrupt, bad values) is a
:class:`~bayesirt.errors.DataError` whose one-line message names the file.
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.data.populations import OTHER, derive_family
from bayesirt.data.responses import make_responses, validate_responses
from bayesirt.errors import DataError, OutputError

__all__ = ["ORIENTATIONS", "read_wide_csv", "read_long", "read_nt_npz", "read_nt_dir", "from_dataframe", "load",
           "save_responses", "attach_metadata"]

ORIENTATIONS = ("auto", "items_by_models", "models_by_items")
_MODEL_NAMES = {"model", "model_id", "models", "respondent", "person"}
_ITEM_NAMES = {"item", "item_id", "items", "question"}
_NA_TOKENS = {"", "na", "nan", "null", "none", "n/a"}
_TEXT_SUFFIXES = {".csv": ",", ".tsv": "\t", ".txt": None}
_SUPPORTED = "a folder (responses.npy + models.csv), .csv/.tsv/.txt (wide or long), .parquet/.pq (long), .npz, .nc"


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[None]:
    """Turn any failure while reading ``path`` into a one-line DataError naming the file."""
    try:
        yield
    except DataError as exc:
        msg = str(exc)
        raise DataError(msg if str(path) in msg else f"{path}: {msg}") from None
    except (ValueError, OSError, EOFError, KeyError, UnicodeError, csv.Error, zipfile.BadZipFile) as exc:
        # pandas/numpy/pyarrow/h5py errors on a corrupt or malformed file
        detail = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise DataError(
            f"cannot read {path} ({type(exc).__name__}: {detail}); "
            f"check that it is a valid {path.suffix or 'data'} file (text must be UTF-8)"
        ) from None


def _existing(path: str | os.PathLike[str]) -> Path:
    if not (p := Path(path)).exists():
        raise DataError(f"no such file: {p}; check the path")
    return p


def _check_text(path: Path) -> None:
    with open(path, "rb") as fh:
        if b"\x00" in fh.read(8192):
            raise DataError(f"{path} looks like a binary file, not delimited text; pass a CSV/TSV text file")


def _np_load(path: Path, npz: Any = None, key: str | None = None) -> np.ndarray:
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


def _resolve_orientation(orientation: str, row_label: Any, columns: list[str]) -> str:
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
    looks_like_models = (derive_family(columns) != OTHER) | np.array(["/" in c for c in columns], dtype=bool)
    return "items_by_models" if looks_like_models.any() else "models_by_items"


def _assemble(values: np.ndarray, row_ids: Any, col_ids: list[str], orientation: str, **attrs: Any) -> xr.Dataset:
    if orientation == "items_by_models":
        return make_responses(values, item_id=row_ids, model_id=col_ids, **attrs)
    return make_responses(values.T, item_id=col_ids, model_id=row_ids, **attrs)


def _wide_parts(path: Path, orientation: str, id_column: str | None) -> tuple[np.ndarray, Any, list[str], str]:
    """Read a wide text table: (values rows x cols, row ids or None, column ids, orientation)."""
    _check_text(path)
    sep = _TEXT_SUFFIXES.get(path.suffix.lower(), ",")
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
    body[pd.isna(cells) | np.isin(cells, list(_NA_TOKENS))] = np.nan
    return body, row_ids, header, _resolve_orientation(orientation, row_label, header)


def read_wide_csv(
    path: str | os.PathLike[str],
    *,
    orientation: str = "auto",
    id_column: str | None = "auto",
    drop_empty: bool = False,
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
       columns are models and rows are items;
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

    Returns
    -------
    xarray.Dataset
        A response Dataset (see :func:`~bayesirt.data.responses.make_responses`), with attrs
        ``name`` (file stem) and ``source`` (the path).
    """
    p = _existing(path)
    with _reading(p):
        values, row_ids, cols, orient = _wide_parts(p, orientation, id_column)
        return _assemble(values, row_ids, cols, orient, name=p.stem, source=str(p), drop_empty=drop_empty)


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


def _read_table(path: Path) -> pd.DataFrame:
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        return pd.read_parquet(path)
    if suffix in _TEXT_SUFFIXES:
        _check_text(path)
        sep = _TEXT_SUFFIXES[suffix]
        engine = None if sep else "python"
        return pd.read_csv(path, sep=sep, engine=engine, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    raise DataError(f"unsupported long-format file {path.name!r}; use .csv, .tsv, .txt, .parquet or .pq")


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
    drop_empty: bool = False,
) -> xr.Dataset:
    """Read long-format responses: one row per (model, item) with a 0/1 ``correct`` column.

    Combinations absent from the file are missing cells; a row whose ``correct`` is empty is
    missing too. Optional columns ``item_group`` (per item) and ``family``, ``owner`` (per
    model) are used when present and must be constant within their item / model. Items and
    models are ordered by first appearance.

    Parameters
    ----------
    path : path-like
        ``.csv``/``.tsv``/``.txt`` or ``.parquet``/``.pq``.
    model, item, correct : str
        Names of the model-id, item-id and correctness columns.
    drop_empty : bool
        As in :func:`read_wide_csv`.

    Returns
    -------
    xarray.Dataset
        A response Dataset with attrs ``name`` (file stem) and ``source`` (the path).
    """
    p = _existing(path)
    with _reading(p):
        df = _read_table(p)
        absent = [c for c in (model, item, correct) if c not in df.columns]
        if absent:
            raise DataError(
                f"long file lacks column(s) {absent} (has {list(df.columns)[:8]}); "
                "pass model=, item=, correct= with the right column names"
            )
        for key in (model, item):
            blank = df[key].isna() | (df[key].astype(str).str.strip() == "")
            if blank.any():
                row = int(np.flatnonzero(blank)[0]) + 1
                raise DataError(f"column {key!r} has a blank id in data row {row}; fill it in")
            df[key] = df[key].astype(str)
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
        if df[correct].dtype == object or pd.api.types.is_string_dtype(df[correct]):
            words = {"true": 1, "false": 0}
            raw = np.array(
                [None if str(v).strip().lower() in _NA_TOKENS else words.get(str(v).strip().lower(), v) for v in raw],
                dtype=object,
            )
        values[item_codes, model_codes] = raw
        meta: dict[str, Any] = {}
        for col, key, order in (("item_group", item, items), ("family", model, models), ("owner", model, models)):
            if col in df.columns:
                meta[col] = _per_key(df, key, col, order)
        ids = {"item_id": items.to_numpy(), "model_id": models.to_numpy()}
        return make_responses(values, **ids, **meta, name=p.stem, source=str(p), drop_empty=drop_empty)


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


def read_nt_npz(path: str | os.PathLike[str], *, drop_empty: bool = False) -> xr.Dataset:
    """Read an NT-artifact NPZ archive.

    Arrays: ``responses`` (items x models; 0/1 with NaN or -1 for missing) and ``model_id``;
    optional ``item_id``, ``item_group``, ``family``, ``owner``. Pickled (object) arrays are
    refused; save string arrays as fixed-width unicode (``np.asarray(ids, dtype=str)``).
    ``drop_empty=True`` drops items/models with no observed response instead of raising.
    """
    p = _existing(path)
    with _reading(p), np.load(p, allow_pickle=False) as npz:
        keys = set(npz.files)
        for required in ("responses", "model_id"):
            if required not in keys:
                raise DataError(f"NPZ lacks the array {required!r} (has {sorted(keys)}); add it")
        names = ("responses", "model_id", "item_id", "item_group", "family", "owner")
        arrays = {key: _np_load(p, npz, key) for key in names if key in keys}
        matrix = _nt_matrix(arrays.pop("responses"))
        meta = {k: _strings(v) for k, v in arrays.items()}
        return make_responses(matrix, name=p.stem, source=str(p), drop_empty=drop_empty, **meta)


def read_nt_dir(path: str | os.PathLike[str], *, drop_empty: bool = False) -> xr.Dataset:
    """Read the NPY+CSV variant of the NT artifact: a folder of files.

    ``responses.npy`` (items x models; 0/1 with NaN or -1 for missing), ``models.csv``
    (columns ``model_id`` [, ``family``, ``owner``]) and optionally ``items.csv`` (columns
    ``item_id`` [, ``item_group``]), rows in matrix order. ``drop_empty=True`` drops
    items/models with no observed response instead of raising.
    """
    p = _existing(path)
    if not p.is_dir():
        raise DataError(f"{p} is not a folder; read_nt_dir needs a folder with responses.npy and models.csv")
    for needed in ("responses.npy", "models.csv"):
        if not (p / needed).is_file():
            raise DataError(f"folder {p} lacks {needed}; an NT folder needs responses.npy and models.csv")
    with _reading(p / "responses.npy"):
        matrix = _nt_matrix(_np_load(p / "responses.npy"))
    meta: dict[str, Any] = {}
    tables = (("models.csv", "model_id", ("family", "owner")), ("items.csv", "item_id", ("item_group",)))
    for fname, id_col, extra in tables:
        f = p / fname
        if not f.is_file():
            continue
        with _reading(f):
            _check_text(f)
            table = pd.read_csv(f, dtype=str, keep_default_na=False, encoding="utf-8-sig")
            if id_col not in table.columns:
                raise DataError(f"missing column {id_col!r} (has {list(table.columns)}); add it")
            for col in (id_col, *extra):
                if col in table.columns:
                    meta[col] = table[col].to_numpy(dtype=object)
    with _reading(p):
        return make_responses(matrix, name=p.name, source=str(p), drop_empty=drop_empty, **meta)


_METADATA = {"model": ("model_id", ("family", "owner")), "item": ("item_id", ("item_group",))}


def attach_metadata(responses: xr.Dataset, path: str | os.PathLike[str], dim: str = "model") -> xr.Dataset:
    """Replace model (or item) labels with those of a CSV file, matched by id.

    Parameters
    ----------
    responses : xarray.Dataset
        A response Dataset.
    path : path
        CSV with column ``model_id`` and any of ``family``, ``owner`` (``dim="model"``), or
        ``item_id`` and ``item_group`` (``dim="item"``); extra columns are ignored. Every id of the
        Dataset must have a row; rows for other ids are ignored.
    dim : {"model", "item"}

    Returns
    -------
    xarray.Dataset
        A copy with the supplied coordinates replaced.
    """
    id_col, columns = _METADATA[dim]
    p = Path(path)
    if not p.is_file():
        raise DataError(f"no {dim} metadata file at {p}; give a CSV with column {id_col!r}")
    with _reading(p):
        _check_text(p)
        table = pd.read_csv(p, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    if id_col not in table.columns:
        raise DataError(f"{p}: missing column {id_col!r} (has {list(table.columns)}); add it")
    supplied = [c for c in columns if c in table.columns]
    if not supplied:
        raise DataError(f"{p}: none of the columns {list(columns)}; add at least one")
    if table[id_col].duplicated().any():
        raise DataError(f"{p}: {id_col} {table[id_col][table[id_col].duplicated()].iloc[0]!r} appears twice; "
                        "keep one row per id")
    table = table.set_index(id_col)
    ids = responses[id_col].values.astype(str)
    absent = np.setdiff1d(ids, table.index.to_numpy(dtype=str))
    if absent.size:
        raise DataError(f"{p}: {absent.size} {dim} id(s) of the data have no row, e.g. {absent[0]!r}; "
                        "add a row for every id")
    rows = table.loc[ids]
    return responses.assign_coords({c: (dim, rows[c].to_numpy(dtype=str)) for c in supplied})


def _long_header(path: Path, kwargs: dict[str, Any]) -> bool:
    """True if a text file should be read as long format."""
    if {"model", "item", "correct"} & set(kwargs):
        return True
    _check_text(path)
    with open(path, encoding="utf-8-sig", newline="") as fh:
        first = fh.readline()
    sep = _TEXT_SUFFIXES.get(path.suffix.lower()) or ("\t" if "\t" in first else ",")
    cells = [c.strip().strip('"').lower() for c in first.rstrip("\r\n").split(sep)]
    return len(cells) == 3 and set(cells) == {"model", "item", "correct"}


def load(source: str | os.PathLike[str], **kwargs: Any) -> xr.Dataset:
    """Read response data from any supported source.

    Dispatch: an existing folder -> :func:`read_nt_dir`; ``.npz`` -> :func:`read_nt_npz`;
    ``.parquet``/``.pq`` -> :func:`read_long`; ``.csv``/``.tsv``/``.txt`` -> :func:`read_long`
    if the header is exactly ``model, item, correct`` (or long options are given), else
    :func:`read_wide_csv`; ``.nc`` -> a Dataset saved by :func:`save_responses` (re-validated);
    otherwise, a name from :data:`bayesirt.data.datasets.DATASETS` -> that embedded dataset.

    Parameters
    ----------
    source : str or path-like
        File, folder or embedded-dataset name.
    **kwargs
        Options passed to the chosen reader (e.g. ``orientation=``, ``model=``).

    Raises
    ------
    DataError
        No such file, unsupported format, or an unreadable / invalid file (message names it).
    """
    from bayesirt.data.datasets import DATASETS, load_dataset

    p = Path(source)
    if not p.exists():
        if isinstance(source, str) and source in DATASETS:
            if kwargs:
                raise DataError(f"options {sorted(kwargs)} do not apply to the embedded dataset {source!r}; drop them")
            return load_dataset(source)
        raise DataError(
            f"no such file or embedded dataset: {str(source)!r}; "
            f"check the path (embedded datasets: {', '.join(DATASETS)})"
        )
    if p.is_dir():
        return read_nt_dir(p, **kwargs)
    suffix = p.suffix.lower()
    if suffix == ".npz":
        return read_nt_npz(p, **kwargs)
    if suffix in (".parquet", ".pq"):
        return read_long(p, **kwargs)
    if suffix in _TEXT_SUFFIXES:
        with _reading(p):
            is_long = _long_header(p, kwargs)
        return read_long(p, **kwargs) if is_long else read_wide_csv(p, **kwargs)
    if suffix == ".nc":
        if kwargs:
            raise DataError(f"options {sorted(kwargs)} do not apply to a saved .nc response file; drop them")
        with _reading(p):
            with xr.open_dataset(p, engine="h5netcdf") as saved:
                ds = saved.load()
            ds.attrs["source"] = str(p)
            return validate_responses(ds)
    raise DataError(f"unsupported file type {p.suffix or '(no suffix)'!r} for {p}; supported: {_SUPPORTED}")


def save_responses(ds: xr.Dataset, path: str | os.PathLike[str]) -> Path:
    """Save a response Dataset to NetCDF (h5netcdf), atomically.

    The Dataset is validated, written to a temporary file in the destination folder and then
    moved into place with :func:`os.replace`, so readers never see a half-written file. An
    existing file at ``path`` is replaced.

    Returns
    -------
    pathlib.Path
        The written path; read it back with :func:`load`.
    """
    checked = validate_responses(ds)
    p = Path(path)
    if not p.parent.is_dir():
        raise OutputError(f"cannot write {p}: folder {p.parent} does not exist; create it first")
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    os.close(fd)
    try:
        checked.to_netcdf(tmp, engine="h5netcdf")
        os.replace(tmp, p)
    except OSError as exc:
        raise OutputError(f"cannot write {p} ({exc.strerror or exc}); check permissions and free space") from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return p
