"""Reading response data from any supported source (:func:`load`), saving it (:func:`save_responses`),
and attaching model or item labels from a CSV file (:func:`attach_metadata`).

:func:`load` dispatches through the format registry (:mod:`bayesirt.data.registry`): each format (wide
or long table, NPY, NPZ, NT folder, saved ``.nc``, evaluation-harness output) is one module that says how
it is recognised, read, and which reading options it takes; :data:`READ_OPTIONS` is the union of those.
Every reader ends in :func:`~bayesirt.data.responses.make_responses`, so validation lives in one place.
Any problem with a file (absent, unknown format, unreadable, corrupt, bad values) is a
:class:`~bayesirt.errors.DataError` whose one-line message names the file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from bayesirt.data.datasets import DATASETS, load_dataset
from bayesirt.data.files import read_string_table
from bayesirt.data.registry import Reader, reader_for, readers
from bayesirt.data.responses import testlet_labels, validate_responses
from bayesirt.data.settings import DATA_HELP, READ_OPTIONS
from bayesirt.errors import DataError, OutputError, warn
from bayesirt.utils.outputs import write_netcdf

__all__ = ["load", "save_responses", "attach_metadata", "DATA_HELP", "READ_OPTIONS", "DeprecatedSpellingWarning"]


class DeprecatedSpellingWarning(UserWarning):
    """An option was given by its old spelling, kept for one release; the message names the new one. (A
    UserWarning, not a FutureWarning: the command line shows it, where library FutureWarnings are hidden.)"""


# reading options with the values that mean "not given"
_DEFAULTS = {name: opt.default for name, opt in READ_OPTIONS.items() if name not in ("drop_empty", "keep_empty")}


def _supported() -> str:
    return "; ".join(r.looks_like for r in readers())


def _check_options(reader: Reader, p: Path, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The options a reader takes; reading options left at their defaults are dropped, any other option is
    refused with one line naming it, the input and the formats it is for."""
    given = {k: v for k, v in kwargs.items() if not (k in _DEFAULTS and v == _DEFAULTS[k])}
    if given.get("key") is not None and given.get("binarize") is not None:
        raise DataError(f"key and binarize do not go together for {p}: an answer key scores the answers 0/1; drop "
                        "--binarize")
    extra = [k for k in given if k not in reader.takes]
    if extra:
        meant = list(dict.fromkeys(r.family or r.kind for r in readers() if set(extra) <= set(r.takes)))
        takes = f" (it takes: {', '.join(reader.takes)})" if reader.takes else ""
        article = "an" if reader.kind[0] in "aeiou" else "a"
        raise DataError(f"option(s) {', '.join(extra)} do not apply to {p}, {article} {reader.kind}{takes}; "
                        f"they are for {' or '.join(meant) or 'other inputs'}: drop them")
    return given


_METADATA = {"model": ("model_id", ("family", "owner")), "item": ("item_id", ("item_group", "testlet"))}


def attach_metadata(responses: xr.Dataset, path: str | os.PathLike[str], dim: str = "model") -> xr.Dataset:
    """Replace model (or item) labels with those of a CSV file, matched by id.

    Parameters
    ----------
    responses : xarray.Dataset
        A response Dataset.
    path : path
        CSV with column ``model_id`` and any of ``family``, ``owner`` (``dim="model"``), or
        ``item_id`` and any of ``item_group``, ``testlet`` (``dim="item"``; a blank testlet: the item
        stands alone); extra columns are ignored. Every id of the
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
    out = responses.assign_coords({c: (dim, rows[c].to_numpy(dtype=str)) for c in supplied if c != "testlet"})
    if "testlet" in supplied:
        out = out.assign_coords(testlet=(dim, testlet_labels(rows["testlet"].to_numpy(dtype=object), ids)))
    return out


def load(source: str | os.PathLike[str], *, drop_empty: bool = True, keep_empty: bool = False,
         **kwargs: Any) -> xr.Dataset:
    """Read response data from any supported source.

    Dispatch: the first format of the registry (:func:`bayesirt.data.registry.readers`, in detection
    order) that recognises ``source``: evaluation-harness output (an lm-evaluation-harness
    ``--log_samples`` folder, Inspect AI ``.eval``/``.json`` logs, HELM runs) ->
    :func:`bayesirt.data.harness.read_harness`; another existing folder -> :func:`read_nt_dir`;
    ``.npz`` -> :func:`read_nt_npz`; ``.npy`` -> :func:`read_npy`; ``.nc`` -> a Dataset saved by
    :func:`save_responses` (re-validated); ``.parquet``/``.pq`` -> :func:`read_long`;
    ``.csv``/``.tsv``/``.txt`` -> :func:`read_long` if the header has the columns ``model``, ``item``
    and ``correct`` (the optional ``item_group``, ``family``, ``owner`` beside them; or long options
    are given), else :func:`read_wide_csv`; otherwise, a name from
    :data:`bayesirt.data.datasets.DATASETS` -> that embedded dataset.

    Parameters
    ----------
    source : str or path-like
        File, folder or embedded-dataset name.
    drop_empty : bool
        Drop items and models without a single observed response, naming them in a warning and in the
        Dataset's attrs ``dropped_items`` / ``dropped_models`` (which the report and summary.json show):
        the default of ``load`` and of every reader. ``False`` (``--refuse-empty``) refuses such data.
    keep_empty : bool
        Deprecated spelling of ``drop_empty=False`` (``--keep-empty`` never kept them); warns.
    **kwargs
        Options passed to the chosen reader (:data:`READ_OPTIONS` and the reader's Python-only
        keywords): for harness output ``metric=``, ``stat=``, ``filter=`` (each global and/or per task),
        ``aggregate=``, ``binarize=``, ``on_damaged=``, ``read_unfinished=`` (see
        :func:`~bayesirt.data.harness.read_harness`); for a matrix (wide table, NPY, NPZ, NT folder)
        ``orientation=`` (``"auto"``, ``"models-rows"``, ``"items-rows"``; ``auto`` warns when it
        guesses); for a wide table ``id_column=``; for a long table ``model=``, ``item=``,
        ``correct=``; ``key=`` (an answer key CSV scoring multiple-choice answers, see
        :mod:`bayesirt.data.answer_key`) and ``binarize=`` for every file reader but ``.nc``. An option
        the chosen reader does not take is refused (reading options at their defaults are ignored).

    Raises
    ------
    DataError
        No such file, unsupported format, or an unreadable / invalid file (message names it).
    """
    if keep_empty:
        warn("--keep-empty (keep_empty=True) is deprecated: it never kept models or items without "
             "responses, it refused them; say --refuse-empty (drop_empty=False)", DeprecatedSpellingWarning)
        drop_empty = False
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
    reader = reader_for(p, kwargs)
    if reader is None:
        raise DataError(f"unsupported file type {p.suffix or '(no suffix)'!r} for {p}; supported: {_supported()}")
    return reader.load(p, drop_empty=drop_empty, **_check_options(reader, p, kwargs))


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
