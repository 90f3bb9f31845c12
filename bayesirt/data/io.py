"""Readers of response data (wide CSV, long CSV/Parquet, NPY, NPZ and the NPY+CSV folder, DataFrame, NetCDF).

Every reader ends in :func:`~bayesirt.data.responses.make_responses`, so validation lives in
one place. Any problem with a file (absent, unknown format, unreadable, corrupt, bad values) is a
:class:`~bayesirt.errors.DataError` whose one-line message names the file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.data.arrays import MATRIX_KEYS, read_npy
from bayesirt.data.datasets import DATASETS, load_dataset
from bayesirt.data.files import TEXT_SUFFIXES, check_text, parsing, read_string_table, reading
from bayesirt.data.harness import READING_OPTIONS, is_harness, read_harness
from bayesirt.data.long import has_long_header, read_long
from bayesirt.data.nt import read_nt_dir, read_nt_npz
from bayesirt.data.reading import warn_dropped
from bayesirt.data.responses import validate_responses
from bayesirt.data.settings import DATA_HELP, READ_OPTIONS
from bayesirt.data.wide import read_wide_csv
from bayesirt.errors import DataError, OutputError
from bayesirt.utils.outputs import write_netcdf

__all__ = ["load", "save_responses", "attach_metadata", "DATA_HELP", "READ_OPTIONS"]

_SUPPORTED = ("evaluation-harness output (lm-eval, Inspect AI, HELM), a folder (responses.npy + models.csv), "
              ".csv/.tsv/.txt (wide or long), .parquet/.pq (long), .npy (a matrix), .npz (arrays "
              f"{', '.join(MATRIX_KEYS)}), .nc")


# reading options with the values that mean "not given"
_DEFAULTS = {name: opt.default for name, opt in READ_OPTIONS.items() if name != "drop_empty"}
_HARNESS_DEFAULTS = {name: _DEFAULTS[name] for name in READING_OPTIONS}
# options each other reader takes (beside drop_empty)
_MATRIX = ("orientation", "key", "binarize")
_READER_OPTIONS = {
    "wide table": ("orientation", "id_column", "key", "binarize"),
    "long table": ("model", "item", "correct", "key", "binarize"),
    "response folder": _MATRIX,
    "NPY matrix": _MATRIX,
    "NPZ archive": _MATRIX,
    "saved .nc response file": (),
    "evaluation-harness output": READING_OPTIONS,
}


def _check_options(kind: str, p: Path, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The options a reader takes; reading options left at their defaults are dropped, any other option is
    refused with one line naming it and the input."""
    given = {k: v for k, v in kwargs.items() if not (k in _DEFAULTS and v == _DEFAULTS[k])}
    if given.get("key") is not None and given.get("binarize") is not None:
        raise DataError(f"key and binarize do not go together for {p}: an answer key scores the answers 0/1; drop "
                        "--binarize")
    allowed = _READER_OPTIONS[kind]
    extra = [k for k in given if k not in allowed]
    if extra:
        what = ("evaluation-harness output" if all(k in _HARNESS_DEFAULTS for k in extra)
                else "matrix files" if all(k in _MATRIX for k in extra) else "other inputs")
        takes = f" (it takes: {', '.join(allowed)})" if allowed else ""
        article = "an" if kind[0] in "aeiou" else "a"
        raise DataError(f"option(s) {', '.join(extra)} do not apply to {p}, {article} {kind}{takes}; "
                        f"they are for {what}: drop them")
    return given


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
    table = read_string_table(p, f"no {dim} metadata file at {p}; give a CSV with column {id_col!r}")
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


def load(source: str | os.PathLike[str], *, drop_empty: bool = True, **kwargs: Any) -> xr.Dataset:
    """Read response data from any supported source.

    Dispatch: evaluation-harness output (an lm-evaluation-harness ``--log_samples`` folder, Inspect AI
    ``.eval``/``.json`` logs, HELM runs) -> :func:`bayesirt.data.harness.read_harness`; another
    existing folder -> :func:`read_nt_dir`; ``.npz`` -> :func:`read_nt_npz`; ``.npy`` -> :func:`read_npy`;
    ``.parquet``/``.pq`` -> :func:`read_long`; ``.csv``/``.tsv``/``.txt`` -> :func:`read_long`
    if the header is exactly ``model, item, correct`` (or long options are given), else
    :func:`read_wide_csv`; ``.nc`` -> a Dataset saved by :func:`save_responses` (re-validated);
    otherwise, a name from :data:`bayesirt.data.datasets.DATASETS` -> that embedded dataset.

    Parameters
    ----------
    source : str or path-like
        File, folder or embedded-dataset name.
    drop_empty : bool
        Drop items and models without a single observed response, listing their ids in the
        Dataset's attrs ``dropped_items`` / ``dropped_models`` (default); ``False`` refuses such data.
    **kwargs
        Options passed to the chosen reader: for harness output ``metric=``, ``stat=``, ``filter=``
        (each global and/or per task), ``aggregate=``, ``binarize=``, ``on_damaged=``,
        ``read_unfinished=`` (see :func:`~bayesirt.data.harness.read_harness`); for a matrix (wide
        table, NPY, NPZ, NT folder) ``orientation=`` (``"auto"``, ``"models-rows"``, ``"items-rows"``;
        ``auto`` warns when it guesses); for a wide table ``id_column=``; for a long table ``model=``,
        ``item=``, ``correct=``; ``key=`` (an answer key CSV scoring multiple-choice answers, see
        :mod:`bayesirt.data.answer_key`) and ``binarize=`` for every file reader but ``.nc``. An option
        the chosen reader does not take is refused (reading options at their defaults are ignored).

    Raises
    ------
    DataError
        No such file, unsupported format, or an unreadable / invalid file (message names it).
    """
    p = Path(source)
    if not p.exists():
        if isinstance(source, str) and source in DATASETS:
            given = sorted(k for k, v in kwargs.items() if not (k in _DEFAULTS and v == _DEFAULTS[k]))
            if given:
                raise DataError(f"options {given} do not apply to the embedded dataset {source!r}; drop them")
            return load_dataset(source)
        raise DataError(
            f"no such file or embedded dataset: {str(source)!r}; "
            f"check the path (embedded datasets: {', '.join(DATASETS)})"
        )
    if is_harness(p):  # names what it dropped itself
        return read_harness(p, drop_empty=drop_empty, **_check_options("evaluation-harness output", p, kwargs))
    ds = _read_file(p, drop_empty, kwargs)
    if ds is not None:
        warn_dropped(ds)
        return ds
    raise DataError(f"unsupported file type {p.suffix or '(no suffix)'!r} for {p}; supported: {_SUPPORTED}")


def _read_file(p: Path, drop_empty: bool, kwargs: dict[str, Any]) -> xr.Dataset | None:
    """A response folder or file by its suffix; None for an unsupported suffix."""
    if p.is_dir():
        return read_nt_dir(p, drop_empty=drop_empty, **_check_options("response folder", p, kwargs))
    suffix = p.suffix.lower()
    if suffix == ".npz":
        return read_nt_npz(p, drop_empty=drop_empty, **_check_options("NPZ archive", p, kwargs))
    if suffix == ".npy":
        return read_npy(p, drop_empty=drop_empty, **_check_options("NPY matrix", p, kwargs))
    if suffix in (".parquet", ".pq"):
        return read_long(p, drop_empty=drop_empty, **_check_options("long table", p, kwargs))
    if suffix in TEXT_SUFFIXES:
        with reading(p):
            is_long = has_long_header(p, kwargs)
        if is_long:
            return read_long(p, drop_empty=drop_empty, **_check_options("long table", p, kwargs))
        return read_wide_csv(p, drop_empty=drop_empty, **_check_options("wide table", p, kwargs))
    if suffix == ".nc":
        _check_options("saved .nc response file", p, kwargs)
        with reading(p):
            with parsing(p), xr.open_dataset(p, engine="h5netcdf") as saved:  # h5py raises many types
                ds = saved.load()
            ds.attrs["source"] = str(p)
            return validate_responses(ds)
    return None


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
        write_netcdf(checked, tmp)
        os.replace(tmp, p)
    except OSError as exc:
        raise OutputError(f"cannot write {p} ({exc.strerror or exc}); check permissions and free space") from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return p
