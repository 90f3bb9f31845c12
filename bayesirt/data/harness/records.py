"""The step every harness reader shares: long score records -> one binary response Dataset.

A reader turns its files into :class:`Record` rows (model, item, item_group, score). Then
:func:`build_dataset` applies two explicit rules, refusing to guess either:

- *repeats*: several records of one (model, item) pair (Inspect epochs, HELM train trials,
  lm-eval filters or re-runs) are combined only by a named ``aggregate`` rule;
- *partial credit*: a score other than 0 or 1 is used only through a threshold ``binarize=T``
  (score >= T -> 1).

What was done is stored in the Dataset attrs (``harness``, ``aggregate``, ``binarize``,
``repeated_pairs``, ``n_records``) so reports can state it; :class:`Reading` collects what each reader
read, skipped and superseded into one provenance record (``attrs["provenance"]``, JSON).

Shared reading rules:

- *damaged output* (a file or run folder that looks like harness output but cannot be read completely)
  is refused with one line naming it (``on_damaged="error"``, the default) or skipped with a
  :class:`HarnessWarning` naming it (``on_damaged="skip"``); skipped files are in the provenance;
- *reruns* (two runs of one model on one task): the latest readable run wins, the others are named
  as superseded; ``aggregate`` rules (``first``/``last`` in reading order) only combine repeats
  *within* one run (Inspect epochs, HELM train trials, lm-eval records of one document).
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.data.files import existing, one_line, printable
from bayesirt.data.formats.harnesses import AGGREGATES, ON_DAMAGED
from bayesirt.data.responses import make_responses
from bayesirt.errors import DataError, warn

__all__ = ["AGGREGATES", "ON_DAMAGED", "DamagedFile", "HarnessWarning", "Reading", "Record", "build_dataset",
           "check_options", "as_paths", "read_json", "json_problem", "per_task", "check_on_damaged"]

_AGG_FLAG = "--aggregate {mean,majority,first,last}"
_SKIP_HINT = "pass --on-damaged skip (on_damaged='skip') to read the rest without it"
log = logging.getLogger("bayesirt.data.harness")


def _shown(ids: Sequence[str], n: int = 5, width: int = 80) -> str:
    """At most ``n`` ids, each printable and at most ``width`` characters."""
    short = [(t if len(t) <= width else t[: width - 3] + "...") for t in map(printable, ids[:n])]
    return ", ".join(short) + (", ..." if len(ids) > n else "")


class HarnessWarning(RuntimeWarning):
    """Something of the harness output was skipped, superseded or left missing; the message names it."""


def check_on_damaged(on_damaged: str) -> str:
    if on_damaged not in ON_DAMAGED:
        raise DataError(f"unknown on_damaged rule {on_damaged!r}; pass --on-damaged {{error,skip}}")
    return on_damaged


def per_task(value: Any, option: str, what: str = "task") -> tuple[str | None, dict[str, str]]:
    """A reading option given globally and/or per task -> (global value, {task: value}).

    Accepts None, ``"NAME"`` (global), ``"TASK=NAME"`` (one task), a sequence of such strings (the
    repeatable command-line option: at most one global value, one value per task) or a dict
    ``{task: name}``.
    """
    if value is None:
        return None, {}
    if isinstance(value, dict):
        items = [f"{k}={v}" for k, v in value.items()]
        if not all(isinstance(k, str) and isinstance(v, str) and k.strip() and v.strip() for k, v in value.items()):
            raise DataError(f"{option}= as a dict maps {what} names to names (strings), got {value!r}")
    elif isinstance(value, str):
        items = [value]
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        items = list(value)
    else:
        raise DataError(f"{option}= must be a name, TASK=NAME strings or a {{task: name}} dict, got {value!r}")
    glob, tasks = None, {}
    for item in items:
        task, sep, name = item.partition("=")
        task, name = task.strip(), name.strip()
        if not sep:
            if not task:
                raise DataError(f"--{option} is empty; pass --{option} NAME or --{option} {what.upper()}=NAME")
            if glob is not None and glob != task:
                raise DataError(f"--{option} given twice for every {what} ({glob!r}, {task!r}); "
                                f"pass one, and {what.upper()}=NAME for single {what}s")
            glob = task
            continue
        if not task or not name:
            raise DataError(f"--{option} {item!r}: write {what.upper()}=NAME, e.g. --{option} arc_easy=acc_norm")
        if tasks.get(task, name) != name:
            raise DataError(f"--{option} names two values for {what} {task!r} ({tasks[task]!r}, {name!r}); pass one")
        tasks[task] = name
    return glob, tasks


def check_task_names(tasks: dict[str, str], seen: Sequence[str], option: str, where: str, what: str = "task") -> None:
    """Refuse a per-task option naming a task that is not in the output."""
    unknown = [t for t in tasks if t not in seen]
    if unknown:
        raise DataError(f"{where}: --{option} {unknown[0]}=... names no {what} of this output "
                        f"({what}s: {', '.join(map(printable, seen))})")


class Reading:
    """What one read of harness output did, for the provenance record and the summary line.

    ``damaged(path, reason)`` refuses (``on_damaged="error"``) or skips with a :class:`HarnessWarning`;
    ``supersede(old, new)`` names a rerun's older file; ``warn`` emits and records a warning.
    """

    def __init__(self, harness: str, on_damaged: str = "error", paths: Sequence[Path] = ()) -> None:
        self.harness = harness
        self.on_damaged = check_on_damaged(on_damaged)
        self.paths = [str(p) for p in paths]
        self.version: str | None = None
        self.read: list[str] = []
        self.skipped: list[dict[str, str]] = []
        self.superseded: list[dict[str, str]] = []
        self.unfinished: list[dict[str, Any]] = []
        self.tasks: dict[str, dict[str, Any]] = {}
        self.errored: dict[str, list[str]] = {}
        self.runs = 0
        self.notes: list[str] = []
        self.remarks: list[str] = []  # what was read in a way the user should know (in the summary line)
        self.unversioned = "unknown"  # the version record when the output names none
        self.perturbed: dict[str, int] = {}  # records not read because they are perturbed, by perturbation

    def damaged(self, path: Path | str, reason: str) -> None:
        if self.on_damaged == "error":
            raise DataError(f"{path}: {reason}; {_SKIP_HINT}")
        self.skipped.append({"path": str(path), "reason": reason})
        self.warn(f"skipped {path}: {reason}")

    def supersede(self, old: Path | str, new: Path | str) -> None:
        self.superseded.append({"path": str(old), "by": str(new)})

    def warn(self, message: str) -> None:
        self.notes.append(message)
        warn(message, HarnessWarning)

    def finish(self, ds: xr.Dataset, *, aggregate: str | None, threshold: float | None) -> xr.Dataset:
        """Store the provenance record (``attrs["provenance"]``, JSON) and the summary line
        (``attrs["harness_summary"]``, also logged at INFO on ``bayesirt.data.harness``)."""
        if self.superseded:
            shown = "; ".join(f"{s['path']} (by {Path(s['by']).name})" for s in self.superseded[:3])
            more = f" and {len(self.superseded) - 3} more" if len(self.superseded) > 3 else ""
            self.warn(f"{self.harness}: {len(self.superseded)} file(s) of earlier runs superseded by a later run "
                      f"of the same model and task: {shown}{more}")
        dropped_models = json.loads(ds.attrs.get("dropped_models", "[]"))
        dropped_items = json.loads(ds.attrs.get("dropped_items", "[]"))
        if dropped_models or dropped_items:
            parts = [f"{len(v)} {k} without any observed response ({_shown(v)})"
                     for k, v in (("model(s)", dropped_models), ("item(s)", dropped_items)) if v]
            self.warn(f"{self.harness}: dropped " + " and ".join(parts))
        tasks = sorted(self.tasks)
        summary = (f"{self.harness}{' ' + self.version if self.version else ''}: {self.runs} run(s), "
                   f"{ds.sizes['model']} model(s), {len(tasks)} task(s) ({', '.join(tasks[:6])}"
                   f"{', ...' if len(tasks) > 6 else ''}), {ds.sizes['item']} items; {len(self.read)} file(s) read"
                   + (f", {len(self.skipped)} skipped" if self.skipped else "")
                   + (f", {len(self.superseded)} superseded" if self.superseded else "")
                   + (f", {sum(map(len, self.errored.values()))} errored sample(s)" if self.errored else "")
                   + "".join(f"; {r}" for r in self.remarks))
        record = {
            "harness": self.harness,
            "harness_version": self.version or self.unversioned,
            "paths": self.paths,
            "on_damaged": self.on_damaged,
            "files_read": self.read,
            "files_skipped": self.skipped,
            "superseded": self.superseded,
            "unfinished_read": self.unfinished,
            "tasks": {t: self.tasks[t] for t in tasks},
            "aggregate": aggregate or "none",
            "threshold": threshold,
            "errored_samples": self.errored,
            "dropped_models": dropped_models,
            "dropped_items": dropped_items,
            "n_models": int(ds.sizes["model"]),
            "n_items": int(ds.sizes["item"]),
            "warnings": self.notes,
            "remarks": self.remarks,
            "summary": summary,
        }
        ds.attrs.update(provenance=json.dumps(record), harness_summary=summary)
        log.info(summary)
        return ds


class Record(NamedTuple):
    """One scored response: ``model`` answered ``item`` (of ``item_group``) with ``score``."""

    model: str
    item: str
    item_group: str
    score: float


def check_options(aggregate: str | None, binarize: float | None) -> float | None:
    """Validate ``aggregate`` and ``binarize`` before any file is read; returns the threshold.

    Raises
    ------
    DataError
        ``aggregate`` not one of :data:`AGGREGATES`; ``binarize`` not a finite number; or
        ``aggregate="mean"`` without ``binarize`` (a mean of 0/1 records is a fraction).
    """
    if aggregate is not None and aggregate not in AGGREGATES:
        raise DataError(f"unknown aggregate rule {aggregate!r}; pass {_AGG_FLAG}")
    if binarize is None:
        if aggregate == "mean":
            raise DataError(
                "aggregate='mean' gives fractions of correct records; pass --binarize T (binarize=T) "
                "to count a mean >= T as correct, or use --aggregate majority"
            )
        return None
    if isinstance(binarize, bool) or not isinstance(binarize, (int, float, np.integer, np.floating)):
        raise DataError(f"binarize must be a number (the threshold T of score >= T), got {binarize!r}")
    if not math.isfinite(float(binarize)):
        raise DataError(f"binarize must be a finite number, got {binarize!r}; pass e.g. --binarize 0.5")
    return float(binarize)


def as_paths(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[Path]:
    """One path or a sequence of paths -> existing :class:`~pathlib.Path` objects."""
    items = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    if not items:
        raise DataError("no path given; pass a harness output folder or file")
    return [existing(p) for p in items]


def json_problem(exc: ValueError | RecursionError, *, line: bool = True) -> str:
    """Why :mod:`json` refused a text, on one line: the syntax error and where (``line=False``: the
    column only, for one line of a JSONL file), or the parser limit it hit."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno}, column {exc.colno}" if line else f"{exc.msg}, column {exc.colno}"
    if isinstance(exc, RecursionError):
        return "arrays or objects nested too deeply"
    if "digits" in str(exc):  # Python's limit on int("...") (sys.set_int_max_str_digits)
        return f"a number with more than {sys.get_int_max_str_digits()} digits"
    return one_line(exc)


class DamagedFile(DataError):
    """A harness file that is not valid JSON or not UTF-8 text; ``reason`` says which, without the path."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def read_json(path: Path, what: str) -> Any:
    """Parse one JSON file; any failure is a one-line DataError naming the file (a :class:`DamagedFile`
    when the text is not UTF-8 or not valid JSON)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except UnicodeDecodeError:
        raise DamagedFile(f"cannot read {path}: not UTF-8 text; it should be {what}", "not UTF-8 text") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, and the parser's digit and depth limits
        reason = f"not valid JSON ({json_problem(exc)})"
        if path.stat().st_size == 0:
            reason = "empty (0 bytes)"
        raise DamagedFile(
            f"cannot read {path}: {reason}; it should be {what}: re-create or fix it", reason
        ) from None
    except OSError as exc:
        raise DataError(f"cannot read {path} ({one_line(exc)}); check the file") from None


def _example(df: pd.DataFrame, mask: np.ndarray) -> pd.Series:
    return df.iloc[int(np.flatnonzero(mask)[0])]


def build_dataset(
    records: Sequence[Record],
    *,
    harness: str,
    aggregate: str | None = None,
    binarize: float | None = None,
    name: str | None = None,
    source: str | None = None,
    drop_empty: bool = True,
    attrs: dict[str, Any] | None = None,
    repeat_hint: str = "",
    missing: Sequence[tuple[str, str, str]] = (),
) -> xr.Dataset:
    """Combine score records into a validated response Dataset.

    Parameters
    ----------
    records : sequence of Record
        In reading order. Models become columns and items rows, each in order of first appearance.
    harness : str
        Format name stored as ``attrs["harness"]`` (``"lm-eval"``, ``"inspect"``, ``"helm"``).
    aggregate : {"mean", "majority", "first", "last"}, optional
        How to combine several records of one (model, item) pair. ``"first"`` / ``"last"``: the
        first / last record in reading order (epoch, train trial, line of the file). ``"mean"``:
        the mean raw score, then correct if mean >= ``binarize`` (required).
        ``"majority"``: each record is made 0/1 first (by ``binarize`` when given), then the
        pair is correct if at least half of its records are (a tie counts as correct).
        Without a rule, repeats are refused.
    binarize : float, optional
        Threshold T: score >= T -> 1, else 0. Without it any score other than 0/1 (partial
        credit) is refused.
    name, source, drop_empty
        Passed to :func:`~bayesirt.data.responses.make_responses`.
    attrs : dict, optional
        Extra Dataset attrs from the reader (e.g. ``metric``), NetCDF-safe values only.
    repeat_hint : str
        Where repeats come from in this format, appended to the refusal message.
    missing : sequence of (model, item, item_group)
        Cells known to exist but without a score (e.g. errored samples): they make their model and
        item part of the matrix as missing cells, so a model or item with nothing else is dropped
        and listed in ``dropped_models`` / ``dropped_items`` (or refused), never lost silently.

    Returns
    -------
    xarray.Dataset
        The response Dataset with attrs ``harness``, ``aggregate`` (rule or ``"none"``),
        ``binarize`` (T or ``"none"``), ``repeated_pairs`` and ``n_records``.
    """
    threshold = check_options(aggregate, binarize)
    where = source or harness
    if not records:
        raise DataError(f"{where}: no scored records found; check that the {harness} output holds per-item scores")
    df = pd.DataFrame.from_records(list(records), columns=list(Record._fields))
    df["score"] = df["score"].astype(np.float64)
    scores = df["score"].to_numpy()
    holes = pd.DataFrame.from_records(list(missing), columns=["model", "item", "item_group"])
    if not np.isfinite(scores).all():
        row = _example(df, ~np.isfinite(scores))
        raise DataError(
            f"{where}: score {row['score']} for model {row['model']!r}, item {row['item']!r} is not a finite number"
        )
    every = pd.concat([df[["model", "item", "item_group"]], holes], ignore_index=True)
    first_items = every.drop_duplicates("item")
    models = every.drop_duplicates("model")["model"].tolist()
    items, groups = first_items["item"].tolist(), first_items["item_group"].tolist()
    if len(models) < 2 or len(items) < 2:
        raise DataError(
            f"{where}: found {len(items)} item(s) x {len(models)} model(s) ({', '.join(map(printable, models[:3]))}); "
            "IRT needs at least 2 of each: pass the outputs of 2 or more models together"
        )
    n_groups = every.groupby("item", sort=False)["item_group"].nunique()
    if (n_groups > 1).any():
        item = n_groups.index[int(np.flatnonzero(n_groups.to_numpy() > 1)[0])]
        raise DataError(f"{where}: item {item!r} is filed under several item groups; item ids must be unique per group")
    partial = (scores != 0.0) & (scores != 1.0)
    if partial.any() and threshold is None:
        row = _example(df, partial)
        raise DataError(
            f"{where}: {int(partial.sum())} of {len(df)} scores are partial credit, not 0/1 (e.g. {row['score']:g} "
            f"for model {row['model']!r}, item {row['item']!r}); pass --binarize T (binarize=T) to count "
            "score >= T as correct"
        )
    keys = ["model", "item"]
    sizes = df.groupby(keys, sort=False).size()
    repeated = sizes[sizes > 1]
    if len(repeated) and aggregate is None:
        (model, item), k = repeated.index[0], int(repeated.iloc[0])
        raise DataError(
            f"{where}: {len(repeated)} (model, item) pairs have more than one record (e.g. model {model!r}, "
            f"item {item!r} has {k}){repeat_hint}; pass {_AGG_FLAG} (aggregate=...) to say how to combine them"
        )

    def to01(values: pd.Series) -> pd.Series:
        return values if threshold is None else (values >= threshold).astype(np.float64)

    if aggregate == "mean":
        cells = df.groupby(keys, sort=False, as_index=False)["score"].mean()
        cells["score"] = to01(cells["score"])
    elif aggregate == "majority":
        votes = df.assign(score=to01(df["score"]))
        cells = votes.groupby(keys, sort=False, as_index=False)["score"].mean()
        cells["score"] = (cells["score"] >= 0.5).astype(np.float64)
    else:  # "first" / "last", or no repeats at all
        keep = "last" if aggregate == "last" else "first"
        cells = df.drop_duplicates(keys, keep=keep).assign(score=lambda d: to01(d["score"]))
    matrix = np.full((len(items), len(models)), np.nan)
    rows = pd.Index(items).get_indexer(cells["item"])
    cols = pd.Index(models).get_indexer(cells["model"])
    matrix[rows, cols] = cells["score"].to_numpy()
    try:
        ds = make_responses(
            matrix, item_id=items, model_id=models, item_group=groups, name=name, source=source, drop_empty=drop_empty
        )
    except DataError as exc:
        msg = str(exc)
        raise DataError(msg if where in msg else f"{where}: {msg}") from None
    ds.attrs.update(
        harness=harness,
        aggregate=aggregate or "none",
        binarize="none" if threshold is None else threshold,
        repeated_pairs=int(len(repeated)),
        n_records=int(len(df)),
        **(attrs or {}),
    )
    return ds
