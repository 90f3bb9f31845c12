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

Rules: item ``f"{task}/{doc_id}"`` in item group ``task``; every run must have logged the same document
under one (task, doc_id) (compared by ``doc_hash``, else by the ``doc`` itself), else the read is refused
naming the task and doc (a reordered copy of the data under the same task name); the score is the
record's first listed metric unless ``metric=`` names one (globally or per task, ``"TASK=METRIC"``); of
several runs of one (model, task) the latest readable ``date_id`` wins and the others are named as
superseded; a task logged under several filters (gsm8k: ``strict-match``, ``flexible-extract``) needs
``filter=`` (also per task). A samples file that is empty, cut short (a line that is not JSON) or holds
fewer documents than its results file reports (``n-samples``), a results file whose task has no samples
file, a model folder without samples files (no ``--log_samples``) and one without any results file (the model's
name is unknown) are damaged output: refused, or skipped with a warning by ``on_damaged="skip"``. A run made with
``--predict_only`` logged no scores (only lm-eval's ``bypass`` metric): refused at once, naming it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import xarray as xr

from bayesirt.data.files import printable
from bayesirt.data.harness.layout import DATE_ID, RESULTS, SAMPLES, Found, discover
from bayesirt.data.harness.records import (
    DamagedFile,
    Reading,
    Record,
    as_paths,
    build_dataset,
    check_options,
    check_task_names,
    json_problem,
    per_task,
    read_json,
)
from bayesirt.errors import DataError

__all__ = ["find", "read_lm_eval", "is_lm_eval_dir", "model_folders"]

_DATE_ID, _SAMPLES, _RESULTS = DATE_ID, SAMPLES, RESULTS
# lm-eval's GeneralConfigTracker._get_model_name looks these model_args keys up in this order
_NAME_KEYS = ("peft", "delta", "pretrained", "model", "path", "engine")
_LAYOUT = "OUT/<model>/samples_<task>_<timestamp>.jsonl, written by lm_eval --log_samples --output_path OUT"
# the only metric of every record of an ``lm_eval --predict_only`` run (lm-eval's "bypass" metric scores nothing)
_BYPASS = "bypass"
_NO_SAMPLES = "an lm-eval results file but no samples_<task>_<date_id>.jsonl: lm-eval was run without --log_samples"
_NO_RESULTS = ("samples files but no results_<date_id>.json: the run's model name (and owner) is unknown; restore the "
               "results JSON lm-eval wrote beside them (a model id made from the folder name would misname the model)")


def find(folder: Path, files: list[str]) -> list[Found]:
    """A model folder of ``lm_eval --output_path``: samples files, or a results file without them (damaged)."""
    samples = [f for f in files if SAMPLES.match(f)]
    results = [f for f in files if RESULTS.match(f) and not SAMPLES.match(f) and f.startswith("results_")]
    return [Found("lm-eval", folder, None if samples else _NO_SAMPLES)] if samples or results else []


def model_folders(path: str | os.PathLike[str]) -> list[Path]:
    """The folders holding lm-eval samples files anywhere under ``path`` (``path`` included)."""
    return [f.path for f in discover(path) if f.harness == "lm-eval" and f.damage is None]


def is_lm_eval_dir(path: str | os.PathLike[str]) -> bool:
    """True if lm-eval output (a model folder, possibly damaged) is anywhere under the folder ``path``."""
    return Path(path).is_dir() and any(f.harness == "lm-eval" for f in discover(path))


def _name_from_args(model_args: Any) -> str | None:
    if isinstance(model_args, str):
        pairs = dict(part.split("=", 1) for part in model_args.split(",") if "=" in part)
        model_args = {k.strip(): v.strip() for k, v in pairs.items()}
    if isinstance(model_args, dict):
        for key in _NAME_KEYS:
            if isinstance(model_args.get(key), str) and model_args[key].strip():
                return model_args[key].strip()
    return None


def _results_files(folder: Path) -> dict[str, Path]:
    """date_id -> results JSON of the folder (``results_<date>.json``, or ``<stem>_<date>.json``)."""
    out = {}
    for p in sorted(folder.iterdir()):
        m = _RESULTS.match(p.name)
        if m and p.is_file() and not _SAMPLES.match(p.name):
            out.setdefault(m["date"], p)
    return out


def _model_name(folder: Path, data: dict[str, Any]) -> str:
    """``model_name`` of the run's results JSON, else its ``model_args`` name, else the folder name."""
    name = data.get("model_name")
    if isinstance(name, str) and name.strip():
        return name.strip()
    config = data.get("config")
    found = _name_from_args(config.get("model_args")) if isinstance(config, dict) else None
    return found or folder.name


def _results(path: Path) -> dict[str, Any]:
    data = read_json(path, "the results JSON written by lm-eval")
    if not isinstance(data, dict):
        raise DataError(f"{path} is not an lm-eval results file (expected a JSON object); remove or fix it")
    return data


class _Damaged(Exception):
    """A samples file that cannot be read completely (empty, a line that is not JSON)."""


def _lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, record) of a JSONL file; blank lines are skipped. Damage raises _Damaged."""
    out = []
    try:
        if path.stat().st_size == 0:
            raise _Damaged("the samples file is empty (0 bytes)")
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except UnicodeDecodeError:
        raise _Damaged("not UTF-8 text (a damaged lm-eval samples file)") from None
    except OSError as exc:
        raise DataError(f"cannot read {path} ({type(exc).__name__}: {exc.strerror}); check the file") from None
    lines = text.split("\n")
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError) as exc:  # syntax, or the parser's digit and depth limits
            last = all(not rest.strip() for rest in lines[lineno:])
            cut = " (the file is cut short)" if last and not text.endswith("\n") else ""
            raise _Damaged(f"line {lineno} is not valid JSON ({json_problem(exc, line=False)}){cut}") from None
        if not isinstance(rec, dict):
            raise DataError(f"{path}: line {lineno} is not a JSON object; each line must be one sample record")
        out.append((lineno, rec))
    return out


def _score(rec: dict[str, Any], metric: str | None, path: Path, lineno: int, task: str) -> tuple[str, float]:
    """(metric name, float score) of one sample record."""
    if rec.get("metrics") == [_BYPASS] or metric == _BYPASS:
        raise DataError(f"{path}: line {lineno}: the run was made with lm_eval --predict_only: it logged the "
                        f"model's outputs but no scores (metric {_BYPASS!r}); re-run lm_eval without --predict_only "
                        "to score them")
    if metric is None:
        listed = rec.get("metrics")
        if not isinstance(listed, list) or not listed or not isinstance(listed[0], str):
            raise DataError(f"{path}: line {lineno} has no 'metrics' list naming its metrics; pass metric=NAME")
        metric = listed[0]
    if metric not in rec:
        names = rec.get("metrics") if isinstance(rec.get("metrics"), list) else []
        raise DataError(
            f"{path}: line {lineno} has no metric {metric!r} "
            f"(its metrics: {', '.join(map(printable, names)) or 'none'}); pass --metric {task}=NAME "
            f"(metric={{{task!r}: NAME}}) with one of them"
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


def _pick_filters(rows: list[tuple], wanted: str | None, per: dict[str, str]) -> tuple[list[tuple], dict[str, str]]:
    """Keep one filter per task; rows are (model, task, doc_id, filter, score, ...)."""
    by_task: dict[str, list[str]] = {}
    for row in rows:
        seen = by_task.setdefault(row[1], [])
        if row[3] not in seen:
            seen.append(row[3])
    keep: dict[str, str] = {}
    for task, filters in by_task.items():
        want = per.get(task, wanted)
        if len(filters) == 1 and (want is None or (want not in filters and task not in per)):
            keep[task] = filters[0]
        elif want in filters:
            keep[task] = want
        elif want is None:
            raise DataError(
                f"task {task!r} is logged under several lm-eval filters ({', '.join(map(repr, filters))}); "
                f"pass --filter NAME (filter=NAME), or --filter {task}=NAME for this task only"
            )
        else:
            raise DataError(
                f"task {task!r} has no records for filter {want!r} (filters: {', '.join(map(printable, filters))})"
            )
    if wanted is not None and not per and wanted not in keep.values():
        seen = sorted({f for fs in by_task.values() for f in fs})
        raise DataError(f"no task has records for filter {wanted!r}; filters seen: {', '.join(map(printable, seen))}")
    return [r for r in rows if r[3] == keep[r[1]]], keep


def _doc_key(rec: dict[str, Any]) -> tuple[str | None, str]:
    """(lm-eval's doc_hash, a hash of the doc itself) of one sample record."""
    doc_hash = rec.get("doc_hash") if isinstance(rec.get("doc_hash"), str) else None
    content = json.dumps(rec.get("doc"), sort_keys=True, ensure_ascii=False, default=str)
    return doc_hash, hashlib.sha256(content.encode()).hexdigest()


def _same_doc(a: tuple[str | None, str], b: tuple[str | None, str]) -> bool:
    return a[0] == b[0] if a[0] is not None and b[0] is not None else a[1] == b[1]


def _doc_text(rec: dict[str, Any]) -> str:
    text = json.dumps(rec.get("doc"), ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _read_file(file: Path, model: str, task: str, metric: str | None, expected_docs: int | None,
               reading: Reading) -> list[tuple] | None:
    """Rows (model, task, doc_id, filter, score, doc key, doc text, file) of one samples file; None if damaged
    and skipped."""
    try:
        lines = _lines(file)
    except _Damaged as exc:
        reading.damaged(file, str(exc))
        return None
    rows = []
    for lineno, rec in lines:
        if not isinstance(rec.get("doc_id"), (int, str)) or isinstance(rec.get("doc_id"), bool):
            raise DataError(f"{file}: line {lineno} has no scalar 'doc_id'; it is not an lm-eval sample record")
        used, score = _score(rec, metric, file, lineno, task)
        rows.append((model, task, str(rec["doc_id"]), str(rec.get("filter", "none")), score, _doc_key(rec),
                     _doc_text(rec), file, used))
    if not rows:
        reading.damaged(file, "the samples file holds no records")
        return None
    docs = len({r[2] for r in rows})
    if expected_docs is not None and docs < expected_docs:
        reading.damaged(file, f"holds {docs} of the {expected_docs} documents its results file reports "
                              "(n-samples): the file is cut short")
        return None
    return rows


def read_lm_eval(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    metric: str | Sequence[str] | dict[str, str] | None = None,
    filter: str | Sequence[str] | dict[str, str] | None = None,  # noqa: A002 - the lm-eval field name
    aggregate: str | None = None,
    binarize: float | None = None,
    drop_empty: bool = True,
    on_damaged: str = "error",
) -> xr.Dataset:
    """Read lm-eval ``--log_samples`` output into a response Dataset.

    Parameters
    ----------
    path : path-like or sequence of path-like
        The ``--output_path`` folder, a folder above several of them (searched recursively), or model
        folders themselves.
    metric : str, "TASK=METRIC" strings or {task: metric}, optional
        Per-sample metric field to score by, for every task and/or per task. Default: each record's
        first listed metric.
    filter : str, "TASK=FILTER" strings or {task: filter}, optional
        lm-eval filter whose records are read, for tasks logged under several filters.
    aggregate, binarize, drop_empty
        See :func:`~bayesirt.data.harness.records.build_dataset`.
    on_damaged : {"error", "skip"}
        Damaged output (see the module docstring) is refused, or skipped with a warning.

    Returns
    -------
    xarray.Dataset
        Models as named by the results JSON (``model_name``, else the ``model_args`` name,
        else the folder name); attrs also hold ``metric``, ``filter``, ``lm_eval_superseded_files``
        and the provenance record (``provenance``, JSON).
    """
    threshold = check_options(aggregate, binarize)
    paths = as_paths(path)
    reading = Reading("lm-eval", on_damaged, paths)
    metric_all, metric_per = per_task(metric, "metric")
    filter_all, filter_per = per_task(filter, "filter")
    source = ", ".join(map(str, paths))
    folders: list[Path] = []
    for p in paths:
        found = [f for f in discover(p) if f.harness == "lm-eval"]
        if not found:
            kind = "folder" if p.is_dir() else "file, not a folder"
            raise DataError(f"no lm-eval samples files in {p} ({kind}); expected {_LAYOUT}")
        for f in found:
            if f.damage:
                reading.damaged(f.path, f.damage)
            elif f.path not in folders:
                folders.append(f.path)
    # (model, task) -> [(date, samples file, expected docs)], newest first
    runs: dict[tuple[str, str], list[tuple[str, Path, int | None]]] = {}
    versions = set()
    for folder in folders:
        results = _results_files(folder)
        if not results:
            reading.damaged(folder, _NO_RESULTS)
            continue
        by_date: dict[str, dict[str, Path]] = {}
        for file in sorted(folder.iterdir()):
            m = _SAMPLES.match(file.name)
            if m and file.is_file():
                by_date.setdefault(m["date"], {})[m["task"]] = file
        reading.runs += len(by_date)
        for date, tasks in by_date.items():
            source_file = results.get(date) or results[max(results)]
            try:
                data = _results(source_file)
            except DamagedFile as exc:  # the run's model name is unknown: its samples cannot be placed
                reading.damaged(source_file, f"the results file is {exc.reason}, so the run's model is unknown")
                continue
            if isinstance(data.get("lm_eval_version"), str):
                versions.add(data["lm_eval_version"])
            model = _model_name(folder, data)
            counts = data.get("n-samples") if date in results else None
            counts = counts if isinstance(counts, dict) else {}
            if date in results and isinstance(data.get("configs"), dict):
                for task in data["configs"]:
                    if task not in tasks:
                        reading.damaged(results[date], f"lists task {task!r} but the run has no samples_{task}_"
                                                       f"{date}.jsonl (the run stopped before writing it)")
            for task, file in tasks.items():
                n = counts.get(task, {}).get("effective") if isinstance(counts.get(task), dict) else None
                runs.setdefault((model, task), []).append((date, file, n if isinstance(n, int) else None))
        for date in results:
            if date not in by_date and by_date:
                reading.damaged(results[date], "a results file without samples files of its run (lm-eval was run "
                                               "without --log_samples)")
    rows: list[tuple] = []
    for (model, task), files in runs.items():
        chosen = None
        for date, file, n in sorted(files, key=lambda f: f[0], reverse=True):
            if chosen is not None:
                reading.supersede(file, chosen)
                continue
            got = _read_file(file, model, task, metric_per.get(task, metric_all), n, reading)
            if got is not None:
                chosen = file
                reading.read.append(str(file))
                rows += got
    if not rows:
        raise DataError(f"{source}: no readable lm-eval samples files (all {len(reading.skipped)} skipped)")
    try:
        tasks_seen = list(dict.fromkeys(r[1] for r in rows))
        check_task_names(metric_per, tasks_seen, "metric", source)
        check_task_names(filter_per, tasks_seen, "filter", source)
        rows, filters = _pick_filters(rows, filter_all, filter_per)
    except DataError as exc:
        msg = str(exc)
        raise DataError(msg if msg.startswith(source) else f"{source}: {msg}") from None
    docs: dict[tuple[str, str], tuple] = {}
    for row in rows:
        model, task, doc, _, _, key, text, file, _ = row
        first = docs.setdefault((task, doc), row)
        if not _same_doc(first[5], key):
            raise DataError(
                f"task {task!r}, doc_id {doc}: the runs logged different documents ({first[0]} in {first[7]}: "
                f"{first[6]}; {model} in {file}: {text}); the same task name was run on different data, so "
                "doc_id does not identify one item: re-run on the same data, or read the runs separately"
            )
    metrics: dict[str, str] = {}
    for row in rows:
        metrics.setdefault(row[1], row[8])
    for task in tasks_seen:
        reading.tasks[task] = {"metric": metrics.get(task), "filter": filters.get(task)}
    if versions:
        reading.version = ",".join(sorted(versions))
    records = [Record(r[0], f"{r[1]}/{r[2]}", r[1], r[4]) for r in rows]
    ds = build_dataset(
        records,
        harness="lm-eval",
        aggregate=aggregate,
        binarize=binarize,
        name=paths[0].name if len(paths) == 1 else "lm-eval",
        source=source,
        drop_empty=drop_empty,
        attrs={"metric": ",".join(dict.fromkeys(metrics.values())),
               "filter": ",".join(dict.fromkeys(filters.values())),
               "lm_eval_superseded_files": len(reading.superseded)},
        repeat_hint=" (the same doc_id twice in one samples file)",
    )
    return reading.finish(ds, aggregate=aggregate, threshold=threshold)
