"""Reader of lm-evaluation-harness per-sample logs (``lm_eval --log_samples --output_path OUT``).

Layout written by lm-eval 0.4 (``lm_eval/loggers/evaluation_tracker.py``)::

    OUT/<model_name_sanitized>/results_<date_id>.json
    OUT/<model_name_sanitized>/samples_<task>_<date_id>.jsonl     (one per task)

``model_name_sanitized`` replaces ``"<>:/|\\?*[]`` runs by ``__`` (``org/name`` -> ``org__name``) and
``date_id`` is ``datetime.now().isoformat()`` with ``:`` -> ``-`` (``2024-05-13T12-34-56.789012``).
With ``--output_path file.json`` the results go to ``<dir>/file_<date_id>.json`` beside the samples.
Each JSONL line is one (document, filter) record (``lm_eval/evaluator.py``): ``doc_id``, ``doc``,
``target``, ``arguments``, ``resps``, ``filtered_resps``, ``filter``, ``metrics`` (names), the three
hashes, and one field per metric (``acc``, ``exact_match``, ...).

Rules: item ``f"{task}/{doc_id}"`` in item group ``task``; the score is the record's first listed
metric unless ``metric=`` names one; of several samples files for one (model, task) only the latest
``date_id`` is read (the others are counted in ``attrs["lm_eval_superseded_files"]``); a task logged
under several filters (gsm8k: ``strict-match``, ``flexible-extract``) needs ``filter=``.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import xarray as xr

from bayesirt.data.files import printable
from bayesirt.data.harness.records import Record, as_paths, build_dataset, check_options, json_problem, read_json
from bayesirt.errors import DataError

__all__ = ["read_lm_eval", "is_lm_eval_dir", "model_folders"]

_DATE_ID = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?"
_SAMPLES = re.compile(rf"^samples_(?P<task>.+)_(?P<date>{_DATE_ID})\.jsonl$")
_RESULTS = re.compile(rf"^(?P<stem>.+)_(?P<date>{_DATE_ID})\.json$")
# lm-eval's GeneralConfigTracker._get_model_name looks these model_args keys up in this order
_NAME_KEYS = ("peft", "delta", "pretrained", "model", "path", "engine")
_LAYOUT = "OUT/<model>/samples_<task>_<timestamp>.jsonl, written by lm_eval --log_samples --output_path OUT"


def _samples_files(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if _SAMPLES.match(p.name) and p.is_file())
    except OSError:
        return []


def model_folders(path: str | os.PathLike[str]) -> list[Path]:
    """The folders holding lm-eval samples files: ``path`` itself and/or its direct subfolders."""
    root = Path(path)
    if not root.is_dir():
        return []
    found = [root] if _samples_files(root) else []
    try:
        subdirs = sorted(p for p in root.iterdir() if p.is_dir())
    except OSError:
        return found
    return found + [d for d in subdirs if _samples_files(d)]


def _has_samples(folder: str | os.PathLike[str]) -> bool:
    """True as soon as one ``samples_<task>_<date_id>.jsonl`` file is seen in ``folder``."""
    try:
        with os.scandir(folder) as entries:
            return any(_SAMPLES.match(e.name) and e.is_file() for e in entries)
    except OSError:
        return False


def is_lm_eval_dir(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is an lm-eval output folder or one model folder inside it."""
    if not Path(path).is_dir():
        return False
    if _has_samples(path):
        return True
    try:
        with os.scandir(path) as entries:
            return any(e.is_dir() and _has_samples(e.path) for e in entries)
    except OSError:
        return False


def _name_from_args(model_args: Any) -> str | None:
    if isinstance(model_args, str):
        pairs = dict(part.split("=", 1) for part in model_args.split(",") if "=" in part)
        model_args = {k.strip(): v.strip() for k, v in pairs.items()}
    if isinstance(model_args, dict):
        for key in _NAME_KEYS:
            if isinstance(model_args.get(key), str) and model_args[key].strip():
                return model_args[key].strip()
    return None


def _model_name(folder: Path, date: str) -> str:
    """``model_name`` of the results JSON of the same run (else the latest), else the folder name."""
    results = sorted(
        ((m["date"], p) for p in folder.iterdir() if (m := _RESULTS.match(p.name)) and p.is_file()), reverse=True
    )
    same = [p for d, p in results if d == date]
    chosen = same[0] if same else (results[0][1] if results else None)
    if chosen is None:
        return folder.name
    data = read_json(chosen, "the results JSON written by lm-eval")
    if not isinstance(data, dict):
        raise DataError(f"{chosen} is not an lm-eval results file (expected a JSON object); remove or fix it")
    name = data.get("model_name")
    if isinstance(name, str) and name.strip():
        return name.strip()
    config = data.get("config")
    found = _name_from_args(config.get("model_args")) if isinstance(config, dict) else None
    return found or folder.name


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of a JSONL file; blank lines are skipped."""
    try:
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except (ValueError, RecursionError) as exc:  # syntax, or the parser's digit and depth limits
                    raise DataError(
                        f"{path}: line {lineno} is not valid JSON ({json_problem(exc, line=False)}); "
                        "fix or delete that line (lm-eval writes one JSON record per line)"
                    ) from None
                if not isinstance(rec, dict):
                    raise DataError(f"{path}: line {lineno} is not a JSON object; each line must be one sample record")
                yield lineno, rec
    except UnicodeDecodeError:
        raise DataError(f"cannot read {path}: not UTF-8 text; it should be an lm-eval samples file") from None
    except OSError as exc:
        raise DataError(f"cannot read {path} ({type(exc).__name__}: {exc.strerror}); check the file") from None


def _score(rec: dict[str, Any], metric: str | None, path: Path, lineno: int) -> tuple[str, float]:
    """(metric name, float score) of one sample record."""
    if metric is None:
        listed = rec.get("metrics")
        if not isinstance(listed, list) or not listed or not isinstance(listed[0], str):
            raise DataError(f"{path}: line {lineno} has no 'metrics' list naming its metrics; pass metric=NAME")
        metric = listed[0]
    if metric not in rec:
        names = rec.get("metrics") if isinstance(rec.get("metrics"), list) else []
        raise DataError(
            f"{path}: line {lineno} has no metric {metric!r} "
            f"(its metrics: {', '.join(map(printable, names)) or 'none'}); pass metric= one that every record has"
        )
    value = rec[metric]
    if isinstance(value, bool):
        return metric, float(value)
    if not isinstance(value, (int, float)) or not _finite(value):
        raise DataError(
            f"{path}: line {lineno}: metric {metric!r} is {json.dumps(value)[:40]}, not a finite number "
            "(corpus-level metrics like f1/bleu log raw pairs); pass metric= a per-sample score such as acc"
        )
    return metric, float(value)


def _finite(value: int | float) -> bool:
    """True for a number within float range (JSON integers can be arbitrarily large)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _pick_filters(rows: list[tuple], wanted: str | None) -> tuple[list[tuple], list[str]]:
    """Keep one filter per task; rows are (model, task, doc_id, filter, score)."""
    by_task: dict[str, list[str]] = {}
    for _, task, _, filt, _ in rows:
        seen = by_task.setdefault(task, [])
        if filt not in seen:
            seen.append(filt)
    keep: dict[str, str] = {}
    for task, filters in by_task.items():
        if len(filters) == 1 and (wanted is None or wanted not in filters):
            keep[task] = filters[0]
        elif wanted in filters:
            keep[task] = wanted
        elif wanted is None:
            raise DataError(
                f"task {task!r} is logged under several lm-eval filters ({', '.join(map(repr, filters))}); "
                "pass --filter NAME (filter=NAME) to pick one"
            )
        else:
            raise DataError(
                f"task {task!r} has no records for filter {wanted!r} (filters: {', '.join(map(printable, filters))})"
            )
    if wanted is not None and wanted not in keep.values():
        seen = sorted({f for fs in by_task.values() for f in fs})
        raise DataError(f"no task has records for filter {wanted!r}; filters seen: {', '.join(map(printable, seen))}")
    return [r for r in rows if r[3] == keep[r[1]]], list(dict.fromkeys(keep.values()))


def read_lm_eval(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    metric: str | None = None,
    filter: str | None = None,  # noqa: A002 - the lm-eval field name
    aggregate: str | None = None,
    binarize: float | None = None,
    drop_empty: bool = False,
) -> xr.Dataset:
    """Read lm-eval ``--log_samples`` output into a response Dataset.

    Parameters
    ----------
    path : path-like or sequence of path-like
        The ``--output_path`` folder (one subfolder per model) or model folders themselves.
    metric : str, optional
        Per-sample metric field to score by. Default: each record's first listed metric.
    filter : str, optional
        lm-eval filter whose records are read, for tasks logged under several filters.
    aggregate, binarize, drop_empty
        See :func:`~bayesirt.data.harness.records.build_dataset`.

    Returns
    -------
    xarray.Dataset
        Models as named by the results JSON (``model_name``, else the ``model_args`` name,
        else the folder name); attrs also hold ``metric``, ``filter`` and
        ``lm_eval_superseded_files``.
    """
    check_options(aggregate, binarize)
    paths = as_paths(path)
    runs: dict[tuple[str, str], list[tuple[str, Path]]] = {}
    names: dict[tuple[Path, str], str] = {}
    for p in paths:
        folders = model_folders(p)
        if not folders:
            kind = "folder" if p.is_dir() else "file, not a folder"
            raise DataError(f"no lm-eval samples files in {p} ({kind}); expected {_LAYOUT}")
        for folder in folders:
            for file in _samples_files(folder):
                m = _SAMPLES.match(file.name)
                assert m is not None
                if (folder, m["date"]) not in names:
                    names[folder, m["date"]] = _model_name(folder, m["date"])
                key = (names[folder, m["date"]], m["task"])
                runs.setdefault(key, []).append((m["date"], file))
    rows, metrics = [], []
    for (model, task), files in runs.items():
        file = max(files)[1]
        for lineno, rec in _lines(file):
            if not isinstance(rec.get("doc_id"), (int, str)):
                raise DataError(f"{file}: line {lineno} has no scalar 'doc_id'; it is not an lm-eval sample record")
            used, score = _score(rec, metric, file, lineno)
            if used not in metrics:
                metrics.append(used)
            rows.append((model, task, str(rec["doc_id"]), str(rec.get("filter", "none")), score))
    source = ", ".join(map(str, paths))
    try:
        rows, filters = _pick_filters(rows, filter)
    except DataError as exc:
        raise DataError(f"{source}: {exc}") from None
    records = [Record(model, f"{task}/{doc}", task, score) for model, task, doc, _, score in rows]
    superseded = sum(len(files) - 1 for files in runs.values())
    return build_dataset(
        records,
        harness="lm-eval",
        aggregate=aggregate,
        binarize=binarize,
        name=paths[0].name if len(paths) == 1 else "lm-eval",
        source=source,
        drop_empty=drop_empty,
        attrs={"metric": ",".join(metrics), "filter": ",".join(filters), "lm_eval_superseded_files": superseded},
        repeat_hint=" (the same doc_id twice in one samples file, or one model in several folders)",
    )
