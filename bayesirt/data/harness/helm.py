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
``exact_match``; per item group ``"GROUP=STAT"``) of an unperturbed instance. Several
``train_trial_index`` values are repeats, read in trial order (``aggregate="first"``: trial 0). Two run
folders of one (model, run) (e.g. in two suites) are reruns: the one whose ``per_instance_stats.json`` was
written last (file time) wins and the other is named as superseded. A run folder without
``per_instance_stats.json`` (HELM writes it last: the run crashed), or with one that is empty or not JSON,
is damaged: refused, or skipped with a warning by ``on_damaged="skip"``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import xarray as xr

from bayesirt.data.files import one_line, printable
from bayesirt.data.harness.layout import Found, discover
from bayesirt.data.harness.records import (
    Reading,
    DamagedFile,
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

__all__ = ["find", "read_helm", "is_helm_run", "is_helm_dir", "run_folders"]

_FILES = ("run_spec.json", "per_instance_stats.json")
_MODEL_ARGS = ("model", "model_deployment")
# crfm-helm writes no version into its run folders (run_spec.json, per_instance_stats.json, stats.json, ...)
_UNVERSIONED = "not recorded (HELM writes no version into its run folders)"


def find(folder: Path, files: list[str]) -> list[Found]:
    """A HELM run folder (``run_spec.json``, ``per_instance_stats.json``), damaged without the latter (HELM
    writes it last); it holds nothing else to read."""
    names = set(files)
    if not any(f in names for f in _FILES):
        return []
    damage = None
    if "per_instance_stats.json" not in names:
        damage = "HELM run folder without per_instance_stats.json (the run stopped before its last write)"
    elif "run_spec.json" not in names:
        damage = "HELM run folder without run_spec.json"
    return [Found("helm", folder, damage, leaf=True)]


def is_helm_run(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a HELM run folder (``run_spec.json`` and ``per_instance_stats.json``)."""
    p = Path(path)
    return p.is_dir() and all((p / f).is_file() for f in _FILES)


def run_folders(path: str | os.PathLike[str]) -> list[Path]:
    """The complete HELM run folders anywhere under ``path`` (``path`` itself included), by path."""
    return [f.path for f in discover(path) if f.harness == "helm" and f.damage is None]


def is_helm_dir(path: str | os.PathLike[str]) -> bool:
    """True for a HELM run folder or a folder with run folders (possibly damaged) anywhere below it."""
    return Path(path).is_dir() and any(f.harness == "helm" for f in discover(path))


def _run_key(name: str) -> str:
    """The run name without its model arguments: the same benchmark for every model."""
    head, sep, args = name.partition(":")
    kept = [a for a in args.split(",") if a and a.split("=", 1)[0].strip() not in _MODEL_ARGS]
    return head + (sep + ",".join(kept) if kept else "")


def _spec(run: Path) -> tuple[str, str, str, str]:
    """(model, item group, run key, scenario) of one run folder; the scenario (class and arguments) names the
    instances, which two run specs (e.g. two adapter methods) can share."""
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
    scenario = spec.get("scenario_spec")
    return model.strip(), group, _run_key(name), json.dumps(scenario, sort_keys=True, default=str)


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


def _run_records(run: Path, stat_for: Any, reading: Reading) -> tuple[list[Record], set[str], str, str] | None:
    """Records of one run, the unperturbed stat names it has, its item group and the stat used; None if the
    run is damaged and skipped. Perturbed instances are counted in ``reading.perturbed`` (by perturbation)."""
    model, group, key, _ = _spec(run)
    stat = stat_for(group)
    file = run / "per_instance_stats.json"
    try:
        if file.stat().st_size == 0:
            reading.damaged(run, "per_instance_stats.json is empty (0 bytes)")
            return None
        with open(file, encoding="utf-8") as fh:
            entries = json.load(fh)
    except UnicodeDecodeError:
        reading.damaged(run, "per_instance_stats.json is not UTF-8 text")
        return None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, and the parser's digit and depth limits
        ended = isinstance(exc, json.JSONDecodeError) and not exc.doc.rstrip().endswith(("]", "}"))
        cut = " (cut short)" if ended else ""
        reading.damaged(run, f"per_instance_stats.json is not valid JSON ({json_problem(exc)}){cut}")
        return None
    except OSError as exc:
        raise DataError(f"cannot read {file} ({one_line(exc)}); check the file") from None
    if not isinstance(entries, list):
        raise DataError(f"{file} is not a list of per-instance stats; re-create it with helm-run")
    out, names = [], set()
    for pos, entry in enumerate(entries):
        if not isinstance(entry, dict) or "instance_id" not in entry or not isinstance(entry.get("stats"), list):
            raise DataError(f"{file}: entry {pos} lacks instance_id or a stats list; it is not HELM per-instance stats")
        if entry.get("perturbation") is not None:
            kind = entry["perturbation"].get("name") if isinstance(entry["perturbation"], dict) else None
            reading.perturbed[str(kind or "unnamed")] = reading.perturbed.get(str(kind or "unnamed"), 0) + 1
            continue
        for s in entry["stats"]:
            metric = s.get("name") if isinstance(s, dict) else None
            if not isinstance(metric, dict) or metric.get("perturbation") is not None:
                continue
            names.add(str(metric.get("name")))
            if metric.get("name") == stat:
                value = _value(s)
                if value is not None and math.isfinite(value):
                    trial = entry.get("train_trial_index")
                    trial = trial if isinstance(trial, int) and not isinstance(trial, bool) else 0
                    out.append((trial, Record(model, f"{key}/{entry['instance_id']}", group, value)))
                break
    # reading order = train trial order, so aggregate first/last mean the first/last trial, as epochs do
    return [r for _, r in sorted(out, key=lambda t: t[0])], names, group, stat


def _remark(reading: Reading, scenarios: dict[str, set[str]]) -> None:
    """Name what the read left out or doubled: perturbed instances, and instances of one scenario read under
    several run specs (each run spec makes its own items)."""
    if reading.perturbed:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(reading.perturbed.items()))
        reading.remarks.append(f"{sum(reading.perturbed.values())} perturbed instance record(s) not read ({kinds}): "
                               "a perturbation changes the question, so only unperturbed instances are items")
    shared = [sorted(keys) for keys in scenarios.values() if len(keys) > 1]
    if shared:
        shown = "; ".join(" and ".join(keys) for keys in shared[:3]) + (" ..." if len(shared) > 3 else "")
        reading.remarks.append(f"the same scenario instances are read under several run specs ({shown}): each run "
                               "spec makes its own items; pass one run spec's folders to read them once")


def read_helm(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    stat: str | Sequence[str] | dict[str, str] | None = None,
    aggregate: str | None = None,
    binarize: float | None = None,
    drop_empty: bool = True,
    on_damaged: str = "error",
) -> xr.Dataset:
    """Read HELM runs of several models into one response Dataset.

    Parameters
    ----------
    path : path-like or sequence of path-like
        Run folders, or folders holding run folders anywhere below (``benchmark_output/runs``).
    stat : str, "GROUP=STAT" strings or {group: stat}, optional
        Per-instance stat to score by (default ``"exact_match"``), for every run and/or per item
        group (the run name before ``":"``); runs without it are skipped with a warning (an error if
        no run has it).
    aggregate, binarize, drop_empty
        See :func:`~bayesirt.data.harness.records.build_dataset`; train trials are repeats.
    on_damaged : {"error", "skip"}
        A run folder that cannot be read completely is refused, or skipped with a warning.

    Returns
    -------
    xarray.Dataset
        With attrs ``stat``, ``helm_runs``, ``helm_runs_without_stat`` and ``provenance``.
    """
    threshold = check_options(aggregate, binarize)
    stat_all, stat_per = per_task(stat, "stat", "group")
    stat_all = "exact_match" if stat_all is None else stat_all
    paths = as_paths(path)
    reading = Reading("helm", on_damaged, paths)
    reading.unversioned = _UNVERSIONED
    scenarios: dict[str, set[str]] = {}  # scenario -> the run keys that evaluated its instances
    source = ", ".join(map(str, paths))
    runs: list[Path] = []
    for p in paths:
        found = [f for f in discover(p) if f.harness == "helm"]
        if not found:
            raise DataError(f"no HELM run folders (with {' and '.join(_FILES)}) in {p}; pass a run or suite folder")
        for f in found:
            if f.damage:
                reading.damaged(f.path, f.damage)
            elif f.path not in runs:
                runs.append(f.path)
    reading.runs = len(runs)
    # reruns: of several run folders of one (model, run), the last written wins
    latest: dict[tuple[str, str], Path] = {}
    for run in sorted(runs, key=lambda r: ((r / "per_instance_stats.json").stat().st_mtime_ns, str(r))):
        try:
            model, _, key, scenario = _spec(run)
        except DamagedFile as exc:
            reading.damaged(run, f"run_spec.json is {exc.reason}")
            continue
        if (model, key) in latest:
            reading.supersede(latest[model, key] / "per_instance_stats.json", run / "per_instance_stats.json")
        latest[model, key] = run
        scenarios.setdefault(scenario, set()).add(key)
    chosen = set(latest.values())  # (runs with a damaged run_spec.json are not in it)
    runs = [r for r in runs if r in chosen]
    records, lacking, seen, groups = [], [], set(), {}
    for run in runs:
        got = _run_records(run, lambda g: stat_per.get(g, stat_all), reading)
        if got is None:
            continue
        recs, names, group, used = got
        reading.read.append(str(run / "per_instance_stats.json"))
        groups.setdefault(group, used)
        records += recs
        seen |= names
        if not recs:
            lacking.append(run)
    check_task_names(stat_per, list(groups), "stat", source, "group")
    if len(lacking) == len(reading.read):
        wanted = ", ".join(sorted(set(groups.values())))
        if any(s in seen for s in groups.values()):
            raise DataError(f"no HELM run in {paths[0]} has a finite value (mean, or sum and count) of the stat "
                            f"{wanted!r}; check its per_instance_stats.json files or pass another stat=")
        shown = ", ".join(map(printable, sorted(seen)[:8])) or "none"
        raise DataError(f"no HELM run in {paths[0]} has the unperturbed stat {wanted!r}; pass stat= one of: {shown}")
    if lacking:
        reading.warn(
            f"{len(lacking)} HELM run(s) have no finite value of the stat they are read by and were skipped: "
            + ", ".join(str(r) for r in lacking[:3]) + (" ..." if len(lacking) > 3 else "")
        )
        reading.skipped += [{"path": str(r), "reason": "no finite value of the stat"} for r in lacking]
    for group, used in groups.items():
        reading.tasks[group] = {"stat": used}
    _remark(reading, scenarios)
    ds = build_dataset(
        records,
        harness="helm",
        aggregate=aggregate,
        binarize=binarize,
        name=paths[0].name if len(paths) == 1 else "helm",
        source=source,
        drop_empty=drop_empty,
        attrs={"stat": ",".join(dict.fromkeys(groups.values())), "helm_runs": len(reading.read),
               "helm_runs_without_stat": len(lacking)},
        repeat_hint=" (several train_trial_index values)",
    )
    return reading.finish(ds, aggregate=aggregate, threshold=threshold)
