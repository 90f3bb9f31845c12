"""Reader of Inspect AI eval logs (``.eval`` zip logs and ``.json`` logs).

Logs are read with Inspect's own :func:`inspect_ai.log.read_eval_log` (optional dependency,
``pip install "bayesirt[inspect]"``). Model = ``log.eval.model``, item group = ``log.eval.task``,
item = ``f"{task}/{sample.id}"`` (sample ids restart in every task). Each sample of each epoch is
one record, so ``epochs > 1`` (or two logs of one task and model) give repeated (model, item) records
that need an ``aggregate`` rule; Inspect's own epoch reductions are not used.

The score is that of the scorer named by ``metric=`` (default: the first scorer in the sample's
``scores``), mapped as Inspect's ``value_to_float`` does (``inspect_ai/scorer/_metric.py``):
``"C"`` -> 1, ``"P"`` -> 0.5, ``"I"`` and ``"N"`` (no answer) -> 0, booleans and numbers as
floats, ``"yes"``/``"true"`` -> 1, ``"no"``/``"false"`` -> 0, numeric strings as numbers. Partial
credit (``"P"``, fractions) then needs ``binarize``. Samples without scores (errors) are left missing.
"""

from __future__ import annotations

import os
import re
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import xarray as xr

from bayesirt.data.files import one_line, printable
from bayesirt.data.harness.records import Record, as_paths, build_dataset, check_options
from bayesirt.errors import DataError

__all__ = ["read_inspect", "is_inspect_log", "is_inspect_dir", "log_files", "score_value"]

_CORRECT, _INCORRECT, _PARTIAL, _NOANSWER = "C", "I", "P", "N"
# a JSON log is a serialized EvalLog: its first fields are "version" then "status"
_JSON_HEAD = re.compile(rb'^\s*\{\s*"version"\s*:\s*\d+\s*,\s*"status"\s*:\s*"')
_SKIP_FIELDS = {"messages", "events", "store", "attachments"}
_INSTALL = 'reading Inspect logs needs the inspect_ai package; install it with pip install "bayesirt[inspect]"'


def is_inspect_log(path: str | os.PathLike[str]) -> bool:
    """True for an Inspect ``.eval`` log (zip with ``header.json`` or ``_journal/start.json``) or ``.json`` log."""
    p = Path(path)
    try:
        if not p.is_file():
            return False
        suffix = p.suffix.lower()
        if suffix == ".eval":
            if not zipfile.is_zipfile(p):
                return False
            with zipfile.ZipFile(p) as zf:
                names = set(zf.namelist())
            return "header.json" in names or "_journal/start.json" in names
        if suffix == ".json":
            with open(p, "rb") as fh:
                return bool(_JSON_HEAD.match(fh.read(256)))
    except (OSError, zipfile.BadZipFile):
        return False
    return False


def log_files(path: str | os.PathLike[str]) -> list[Path]:
    """The Inspect logs of a folder (not its subfolders), in name (= start time) order."""
    p = Path(path)
    try:
        return sorted(f for f in p.iterdir() if f.suffix.lower() in (".eval", ".json") and is_inspect_log(f))
    except OSError:
        return []


def is_inspect_dir(path: str | os.PathLike[str]) -> bool:
    """True if a folder directly holds at least one Inspect log."""
    p = Path(path)
    if not p.is_dir():
        return False
    try:
        return any(f.suffix.lower() in (".eval", ".json") and is_inspect_log(f) for f in p.iterdir())
    except OSError:
        return False


def _reader(file: Path) -> Callable[..., Any]:
    """Inspect's log reader; a DataError naming ``file`` (the first log to read) if inspect_ai is absent."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise DataError(f"{file}: {_INSTALL}") from None
    return read_eval_log


def score_value(value: Any) -> float | None:
    """An Inspect score value as a float, as ``value_to_float`` maps it; None if it has no single value."""
    if isinstance(value, str):
        if value == _CORRECT:
            return 1.0
        if value == _PARTIAL:
            return 0.5
        if value in (_INCORRECT, _NOANSWER):
            return 0.0
        low = value.strip().lower()
        if low in ("yes", "true"):
            return 1.0
        if low in ("no", "false"):
            return 0.0
        try:
            return float(low)
        except ValueError:
            return None
    if isinstance(value, (bool, int, float)):
        return float(value)
    return None


def _records(log: Any, file: Path, metric: str | None) -> tuple[list[Record], str | None, int]:
    """(records, scorer used, number of unscored samples) of one log."""
    model, task = str(log.eval.model), str(log.eval.task)
    scorer, unscored, out = metric, 0, []
    for sample in log.samples or []:
        scores = sample.scores or {}
        if not scores:
            unscored += 1
            continue
        if scorer is None:
            scorer = next(iter(scores))
        where = f"{file}: sample {sample.id!r} (epoch {sample.epoch})"
        if scorer not in scores:
            raise DataError(
                f"{where} has no score from scorer {scorer!r} (scorers: {', '.join(map(printable, scores))}); "
                "pass metric= one of them"
            )
        value = scores[scorer].value
        score = score_value(value)
        if score is None:
            raise DataError(
                f"{where}: scorer {scorer!r} gave {str(value)[:60]!r}, not one correct/incorrect value; "
                "pass metric= a scorer with C/I/P/N, boolean or numeric values"
            )
        out.append(Record(model, f"{task}/{sample.id}", task, score))
    return out, scorer, unscored


def read_inspect(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    metric: str | None = None,
    aggregate: str | None = None,
    binarize: float | None = None,
    drop_empty: bool = False,
) -> xr.Dataset:
    """Read Inspect AI eval logs of several models into one response Dataset.

    Parameters
    ----------
    path : path-like or sequence of path-like
        ``.eval`` / ``.json`` log files, or folders holding them (read non-recursively).
    metric : str, optional
        Name of the scorer whose score is used. Default: each log's first scorer.
    aggregate, binarize, drop_empty
        See :func:`~bayesirt.data.harness.records.build_dataset`; epochs are repeats.

    Returns
    -------
    xarray.Dataset
        With attrs ``metric`` (scorers used), ``inspect_logs``, ``inspect_unscored_samples``
        and ``inspect_empty_logs`` (logs without samples, skipped).
    """
    check_options(aggregate, binarize)
    files: list[Path] = []
    paths = as_paths(path)
    for p in paths:
        found = log_files(p) if p.is_dir() else [p]
        if not found:
            raise DataError(f"no Inspect logs (.eval or .json) in folder {p}; pass a log file or the --log-dir folder")
        files += found
    read_eval_log = _reader(files[0])
    records, scorers, unscored, empty = [], [], 0, 0
    for file in files:
        try:
            log = read_eval_log(str(file), exclude_fields=_SKIP_FIELDS)
        except Exception as exc:  # noqa: BLE001 - any failure of Inspect's reader is a bad file
            raise DataError(
                f"cannot read Inspect log {file} ({one_line(exc)}); check that it is a complete .eval or .json log"
            ) from None
        if not log.samples:
            empty += 1
            continue
        recs, scorer, n_unscored = _records(log, file, metric)
        records += recs
        unscored += n_unscored
        if scorer is not None and scorer not in scorers:
            scorers.append(scorer)
    if not records:
        raise DataError(f"the Inspect logs given ({len(files)}) hold no scored samples; pass logs of finished evals")
    return build_dataset(
        records,
        harness="inspect",
        aggregate=aggregate,
        binarize=binarize,
        name=paths[0].stem if len(paths) == 1 else "inspect",
        source=", ".join(map(str, paths)),
        drop_empty=drop_empty,
        attrs={
            "metric": ",".join(scorers),
            "inspect_logs": len(files),
            "inspect_unscored_samples": unscored,
            "inspect_empty_logs": empty,
        },
        repeat_hint=" (epochs > 1, or several logs of one task and model)",
    )
