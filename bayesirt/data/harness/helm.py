"""Reader of HELM run folders (``helm-run`` output: ``benchmark_output/runs/<suite>/<run name>/``).

Layout written by crfm-helm 0.5 (``helm/benchmark/runner.py``): each run folder holds
``run_spec.json`` (the RunSpec: ``name``, ``scenario_spec.class_name``, ``adapter_spec.model``, ...)
and ``per_instance_stats.json``, a list of PerInstanceStats (``helm/benchmark/metrics/metric.py``):
``{instance_id, train_trial_index, perturbation?, stats: [Stat]}``; a Stat
(``helm/benchmark/metrics/statistic.py``) is ``{name: {name, split, sub_split?, perturbation?},
count, sum, sum_squared, min, max, mean, variance, stddev}`` with ``None`` fields dropped.

Rules: model = ``adapter_spec.model``; item group = the run name before ``":"`` (e.g. ``mmlu``);
item = ``f"{run}/{instance_id}"`` where ``run`` is the run name without its ``model=`` /
``model_deployment=`` arguments (instance ids ``id0, id1, ...`` restart in every run); the score is
the ``mean`` (else ``sum / count``) of the unperturbed stat named ``stat`` (default
``exact_match``) of an unperturbed instance. Several ``train_trial_index`` values are repeats.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import xarray as xr

from bayesirt.data.files import printable
from bayesirt.data.harness.records import Record, as_paths, build_dataset, check_options, read_json
from bayesirt.errors import DataError

__all__ = ["read_helm", "is_helm_run", "is_helm_dir", "run_folders"]

_FILES = ("run_spec.json", "per_instance_stats.json")
_MODEL_ARGS = ("model", "model_deployment")


def is_helm_run(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a HELM run folder (``run_spec.json`` and ``per_instance_stats.json``)."""
    p = Path(path)
    return p.is_dir() and all((p / f).is_file() for f in _FILES)


def run_folders(path: str | os.PathLike[str]) -> list[Path]:
    """``[path]`` if it is a run folder, else its direct subfolders that are run folders, by name."""
    p = Path(path)
    if is_helm_run(p):
        return [p]
    try:
        return sorted(d for d in p.iterdir() if is_helm_run(d))
    except OSError:
        return []


def is_helm_dir(path: str | os.PathLike[str]) -> bool:
    """True for a HELM run folder or a folder of them (a suite folder)."""
    p = Path(path)
    if is_helm_run(p):
        return True
    try:
        return p.is_dir() and any(is_helm_run(d) for d in p.iterdir())
    except OSError:
        return False


def _run_key(name: str) -> str:
    """The run name without its model arguments: the same benchmark for every model."""
    head, sep, args = name.partition(":")
    kept = [a for a in args.split(",") if a and a.split("=", 1)[0].strip() not in _MODEL_ARGS]
    return head + (sep + ",".join(kept) if kept else "")


def _spec(run: Path) -> tuple[str, str, str]:
    """(model, item group, run key) of one run folder."""
    file = run / "run_spec.json"
    spec = read_json(file, "a HELM RunSpec")
    adapter = spec.get("adapter_spec") if isinstance(spec, dict) else None
    model = (adapter.get("model") or adapter.get("model_deployment")) if isinstance(adapter, dict) else None
    if not isinstance(model, str) or not model.strip():
        raise DataError(f"{file} has no adapter_spec.model; it is not a HELM run spec (re-run helm-run)")
    name = spec.get("name") if isinstance(spec.get("name"), str) and spec["name"].strip() else run.name
    group = name.partition(":")[0].strip()
    if not group:
        scenario = spec.get("scenario_spec")
        cls = scenario.get("class_name") if isinstance(scenario, dict) else None
        group = str(cls).rsplit(".", 1)[-1] if cls else "all"
    return model.strip(), group, _run_key(name)


def _value(stat: dict[str, Any]) -> float | None:
    """The stat's mean (else sum / count); None if it has none, or none within float range."""
    mean, count, total = stat.get("mean"), stat.get("count"), stat.get("sum")
    try:
        if isinstance(mean, (int, float)) and not isinstance(mean, bool):
            return float(mean)
        if isinstance(count, (int, float)) and count > 0 and isinstance(total, (int, float)):
            return float(total / count)
    except OverflowError:  # JSON integers can be arbitrarily large
        return None
    return None


def _run_records(run: Path, stat: str) -> tuple[list[Record], set[str]]:
    """Records of one run and the unperturbed stat names it has."""
    model, group, key = _spec(run)
    file = run / "per_instance_stats.json"
    entries = read_json(file, "a HELM list of per-instance stats")
    if not isinstance(entries, list):
        raise DataError(f"{file} is not a list of per-instance stats; re-create it with helm-run")
    out, names = [], set()
    for pos, entry in enumerate(entries):
        if not isinstance(entry, dict) or "instance_id" not in entry or not isinstance(entry.get("stats"), list):
            raise DataError(f"{file}: entry {pos} lacks instance_id or a stats list; it is not HELM per-instance stats")
        if entry.get("perturbation") is not None:
            continue
        for s in entry["stats"]:
            metric = s.get("name") if isinstance(s, dict) else None
            if not isinstance(metric, dict) or metric.get("perturbation") is not None:
                continue
            names.add(str(metric.get("name")))
            if metric.get("name") == stat:
                value = _value(s)
                if value is not None and math.isfinite(value):
                    out.append(Record(model, f"{key}/{entry['instance_id']}", group, value))
                break
    return out, names


def read_helm(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    stat: str | None = None,
    aggregate: str | None = None,
    binarize: float | None = None,
    drop_empty: bool = False,
) -> xr.Dataset:
    """Read HELM runs of several models into one response Dataset.

    Parameters
    ----------
    path : path-like or sequence of path-like
        Run folders, or suite folders holding run folders (``benchmark_output/runs/<suite>``).
    stat : str, optional
        Per-instance stat to score by (default ``"exact_match"``); runs without it are skipped
        with a warning (an error if no run has it).
    aggregate, binarize, drop_empty
        See :func:`~bayesirt.data.harness.records.build_dataset`; train trials are repeats.

    Returns
    -------
    xarray.Dataset
        With attrs ``stat``, ``helm_runs`` and ``helm_runs_without_stat``.
    """
    check_options(aggregate, binarize)
    stat = "exact_match" if stat is None else stat
    paths = as_paths(path)
    runs: list[Path] = []
    for p in paths:
        found = run_folders(p)
        if not found:
            raise DataError(f"no HELM run folders (with {' and '.join(_FILES)}) in {p}; pass a run or suite folder")
        runs += found
    records, lacking, seen = [], [], set()
    for run in runs:
        recs, names = _run_records(run, stat)
        records += recs
        seen |= names
        if not recs:
            lacking.append(run)
    if len(lacking) == len(runs):
        if stat in seen:
            raise DataError(f"no HELM run in {paths[0]} has a finite value (mean, or sum and count) of the stat "
                            f"{stat!r}; check its per_instance_stats.json files or pass another stat=")
        shown = ", ".join(map(printable, sorted(seen)[:8])) or "none"
        raise DataError(f"no HELM run in {paths[0]} has the unperturbed stat {stat!r}; pass stat= one of: {shown}")
    if lacking:
        warnings.warn(
            f"{len(lacking)} HELM run(s) have no finite value of the stat {stat!r} and were skipped "
            f"(e.g. {lacking[0].name})",
            RuntimeWarning,
            stacklevel=2,
        )
    return build_dataset(
        records,
        harness="helm",
        aggregate=aggregate,
        binarize=binarize,
        name=paths[0].name if len(paths) == 1 else "helm",
        source=", ".join(map(str, paths)),
        drop_empty=drop_empty,
        attrs={"stat": stat, "helm_runs": len(runs), "helm_runs_without_stat": len(lacking)},
        repeat_hint=" (several train_trial_index values, or one run given twice)",
    )
