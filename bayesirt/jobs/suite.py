"""The SAFE pipeline for a set of benchmark files, as one declared analysis (``kind = "safety"``).

Steps, each written to its own subfolder of the output folder by its own job:

- ``information``: item and test information of each item bank (regularized MML 2PL);
- ``cat``: the held-out adaptive-testing study (SAFE Figure 3);
- ``personfit``: l_z with a cut-off calibrated on the genuine cohort;
- ``sandbag``: sandbagging simulation and detection;
- ``factors``: per-benchmark 2PL abilities and their factor structure (needs three or more files);
- ``mirt_mml`` (optional, not in the default steps: SAFE App. C, minutes on a leaderboard cohort):
  the item-level MIRT by marginal ML for D = 1..4 on the sign-aligned composite of all benchmarks
  (the single file with one), written to ``mirt_mml/``.

With several benchmark files, ``factors`` runs first, and each item-level step runs on every item
bank of :func:`bayesirt.safety.scopes.benchmark_scopes`, one subfolder each (``cat/arc/``,
``cat/composite/``, ``cat/ability1/``...): every benchmark alone (its own 2PL, its own item groups
for targeted sandbagging), the sign-aligned composite of all of them (benchmarks of polarity -1
reversed), and each latent ability of the retained (proper) factor solution. The sandbagging ``direction``
is the direction on the aligned ability: a benchmark of polarity -1 is sandbagged the other way
(more refusals on a refusal benchmark are fewer correct answers on an over-refusal one). With one
file the steps write straight into their folders, as before.

Every option of every step is checked before any work (:func:`check_step_options`: names, types,
ranges, choices), and what the data cannot support right after loading (:func:`check_against_data`:
factor counts for the number of benchmarks, budgets and test lengths above the item count). Each
step's folder appears when that step finishes; a step that fails is recorded (``summary.json``,
``report.md``) while the others run on and stay; :class:`StepsFailed` then reports it. ``resume``
reruns only the missing and failed steps, with the settings recorded in ``summary.json``.
"""

from __future__ import annotations

import json
import shutil
import time
import traceback
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from bayesirt.data import load
from bayesirt.errors import BayesIRTError, OutputError, SpecError, did_you_mean
from bayesirt.jobs import frequentist as frequentist_jobs
from bayesirt.jobs import safety as safety_jobs
from bayesirt.jobs import structure as structure_jobs
from bayesirt.report.markdown import markdown_table
from bayesirt.safety.scopes import Scope, benchmark_scopes
from bayesirt.structure.ability_structure import parse_polarity
from bayesirt.structure.factor import check_n_factors
from bayesirt.structure.polarity import loading_clusters
from bayesirt.utils.options import check_options, options_of, renamed_options
from bayesirt.utils.outputs import (
    check_output,
    remove_stale_staging,
    retire,
    staged_output,
    write_json,
    write_text_atomic,
)
from bayesirt.utils.progress import format_duration, stage

__all__ = ["SAFETY_STEPS", "DEFAULT_STEPS", "StepsFailed", "step_options", "check_step_options", "check_against_data", "read_structure",
           "run_safety_suite"]

#: The steps a safety analysis runs when it names none.
DEFAULT_STEPS = ("information", "cat", "personfit", "sandbag", "factors")
#: Every step a safety analysis may name (``mirt_mml`` on request only).
SAFETY_STEPS = (*DEFAULT_STEPS, "mirt_mml")

class StepsFailed(BayesIRTError):
    """Some steps of a multi-step analysis failed; the others finished and are kept.

    ``internal`` is True when a failure was a bug (its traceback is in the step's error log)
    rather than a problem with the input."""

    def __init__(self, message: str, *, internal: bool):
        super().__init__(message)
        self.internal = internal


def _step_jobs() -> dict:
    """The job of each step, looked up when the suite runs (so a replaced job is the one run)."""
    return {"information": safety_jobs.run_information_job, "cat": safety_jobs.run_cat_job,
            "personfit": safety_jobs.run_personfit_job, "sandbag": safety_jobs.run_sandbag_job,
            "factors": structure_jobs.run_factors_job, "mirt_mml": frequentist_jobs.run_mirt_mml_job}


def step_options(step: str) -> dict:
    """The options a ``[safety.<step>]`` table may set, with their defaults: the declared options of
    the step's job (:func:`bayesirt.utils.options.options_of`), so the two never disagree."""
    return {name: opt.default for name, opt in _step_declarations(step).items()}


def _step_declarations(step: str) -> dict:
    return {name: opt for name, opt in options_of(_step_jobs()[step]).items() if opt.toml is None}


def check_step_options(steps, options: dict, where: str = "analysis") -> None:
    """Check the ``steps`` list and every ``[safety.<step>]`` table before any work: unknown steps
    and options (named with the allowed ones and the closest match), types, ranges and choices.
    ``where`` starts each message (the analysis file)."""
    if not isinstance(steps, (list, tuple)) or not steps or not all(isinstance(x, str) for x in steps):
        raise SpecError(f"{where}: [safety] 'steps' must be a non-empty list of step names from {list(SAFETY_STEPS)}")
    for step in [*steps, *options]:
        if step not in SAFETY_STEPS:
            raise SpecError(f"{where}: unknown safety step {step!r}{did_you_mean(step, SAFETY_STEPS)}; the steps are "
                            f"{list(SAFETY_STEPS)}")
    for step, table in options.items():
        if not isinstance(table, dict):
            raise SpecError(f"{where}: [safety.{step}] must be a table of options; got {table!r}")
        allowed = _step_declarations(step)
        renamed = renamed_options(_step_jobs()[step], table, caller=step, where=f"{where}: [safety.{step}]")
        table.clear()
        table.update(renamed)  # the table the suite runs with: old names of renamed options replaced
        for key in table:
            if key not in allowed:
                raise SpecError(f"{where}: [safety.{step}] unknown option {key!r}{did_you_mean(key, allowed)}; "
                                f"allowed: {sorted(allowed)}")
        check_options(_step_jobs()[step], table, caller=step, where=f"{where}: [safety.{step}]", strict=True)


def check_against_data(files: list[str], scopes: list[Scope], steps, options: dict) -> None:
    """What the loaded data cannot support, checked before any step runs: factor counts for the
    number of benchmarks, CAT budgets and sandbagging test lengths above an item bank's size."""
    if "factors" in steps and len(files) >= 3:
        for k in options.get("factors", {}).get("n_factors") or ():
            try:
                check_n_factors(len(files), k)
            except BayesIRTError as err:
                raise SpecError(f"[safety.factors] n_factors: {err}") from None
    if not scopes:
        return
    by_size = sorted(scopes, key=lambda sc: sc.responses.sizes["item"])

    def bank(scope: Scope) -> str:
        n = scope.responses.sizes["item"]
        return f"the {n} items" + (f" of the item bank {scope.name!r}" if len(scopes) > 1 else "")

    smallest, largest = by_size[0], by_size[-1]
    budgets = options.get("cat", {}).get("budgets", step_options("cat")["budgets"]) if "cat" in steps else ()
    over = sorted(b for b in budgets if b > largest.responses.sizes["item"])
    if over:
        raise SpecError(f"[safety.cat] budgets {over} exceed {bank(largest)}; choose budgets of at most "
                        f"{largest.responses.sizes['item']}")
    if budgets and min(budgets) > smallest.responses.sizes["item"]:
        raise SpecError(f"[safety.cat] every budget exceeds {bank(smallest)}; include a budget of at most "
                        f"{smallest.responses.sizes['item']} (a budget above a bank's size is left out for that bank)")
    length = options.get("sandbag", {}).get("test_length", step_options("sandbag")["test_length"])
    if "sandbag" in steps and length > smallest.responses.sizes["item"]:
        raise SpecError(f"[safety.sandbag] test_length {length} exceeds {bank(smallest)}; choose at most "
                        f"{smallest.responses.sizes['item']}")


def _bank_folders(folder: Path) -> dict[str, Path]:
    """Item-bank subfolders of a step's folder (one benchmark: the folder itself)."""
    if (folder / "scopes.csv").is_file():
        return {str(b): folder / str(b) for b in pd.read_csv(folder / "scopes.csv")["scope"]}
    return {"all": folder} if folder.is_dir() else {}


def _summary_lines(out: Path) -> list[str]:
    """SAFE Table 5 across the suite (sign agreement of each composite beside its recovery from 25
    adaptive items) and the sandbagging detectors' AUC per bank, from the finished steps' files."""
    lines = []
    alignment_file = out / "factors" / "alignment.csv"
    cats = _bank_folders(out / "cat")
    if alignment_file.is_file():
        table = pd.read_csv(alignment_file)
        recovery = []
        for bank in table["composite"]:
            curves = cats.get(str(bank), Path("-")) / "cat_curves.csv"
            value = float("nan")
            if curves.is_file():
                c = pd.read_csv(curves)
                hit = c[(c["design"] == "cat") & (c["metric"] == "spearman") & (c["budget"] == 25)]
                value = float(hit["mean"].iloc[0]) if len(hit) else float("nan")
            recovery.append(value)
        table["cat_25_spearman"] = recovery
        lines += ["## Composite alignment and recovery (SAFE Table 5)", "",
                  "Mean signed pairwise ability correlation of each composite's members (after its flips) beside the "
                  "held-out Spearman recovery of its full score from 25 adaptive items (cat step; empty when not run "
                  "or the bank has fewer items).", "", markdown_table(table.round(3)), ""]
    rows = []
    for bank, folder in _bank_folders(out / "sandbag").items():
        detection = folder / "detection.csv"
        if detection.is_file():
            d = pd.read_csv(detection)
            d = d[d["scope"] != "genuine"]
            top = d[d["strength"] == d["strength"].max()]
            rows += [{"bank": bank, "scope": r["scope"], "level": r["strength"], "person fit": r["personfit_rate"],
                      "shift": r["shift_rate"], "either": r["combined_rate"], "l_z AUC": r["auc"]}
                     for r in top.to_dict("records")]
    if rows:
        lines += ["## Sandbagging detectors per bank (largest simulated level)", "",
                  "Flag rates at the operating points and the person-fit ROC AUC (full curves in sandbag/<bank>/roc.csv).",
                  "", markdown_table(pd.DataFrame(rows).round(3)), ""]
    return lines


def _report(files, record: dict, out: Path | None = None) -> str:
    lines = ["# SAFE pipeline", "", f"Benchmarks: {', '.join(Path(f).stem for f in files)}", ""]
    for step, entry in record["steps"].items():
        if entry["status"] == "finished":
            lines.append(f"- [{step}]({step}/report.md)")
        elif entry["status"] == "skipped":
            lines.append(f"- {step}: skipped ({entry['reason']})")
        elif entry["status"] == "failed":
            lines.append(f"- **{step} failed**: {entry['error']}" + (f" (traceback: `{entry['log']}`)"
                                                                         if entry.get("log") else ""))
        else:
            lines.append(f"- {step}: not run yet")
    if out is not None:
        lines += ["", *_summary_lines(Path(out))]
    if any(e["status"] not in ("finished", "skipped") for e in record["steps"].values()):
        lines += ["", "Rerun with `bayesirt run ANALYSIS --resume` to run only the missing and failed steps "
                  "with the settings recorded in summary.json; the finished steps stay."]
    return "\n".join(lines) + "\n"


def _scope_options(step: str, scope: Scope, kw: dict) -> dict:
    """A step's options for one item bank: sandbagging goes the other way on a benchmark of polarity -1."""
    if step != "sandbag" or scope.polarity == 1:
        return kw
    return kw | {"direction": "up" if kw.get("direction", step_options("sandbag")["direction"]) == "down" else "down"}


def _banks_heading(step: str, scopes: list[Scope], no_abilities: str) -> str:
    """The index report's title, naming the kinds of item bank that were built (and why no
    latent-ability bank was, when none was)."""
    abilities = [s.name for s in scopes if s.name.startswith("ability") and s.name[7:].isdigit()]
    parts = ["one item bank per benchmark"] + ["the sign-aligned composite"] * any(s.name == "composite" for s in scopes)
    if abilities:
        parts.append(f"{len(abilities)} latent-ability bank(s) ({', '.join(abilities)})")
    heading = f"# {step}: " + (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0])
    return heading if abilities else heading + f"; no latent-ability bank ({no_abilities or 'none was built'})"


def _run_on_scopes(job, step: str, scopes: list[Scope], folder: Path, kw: dict, *, no_abilities: str = "",
                   progress: bool = True) -> None:
    """Run one item-level step on every item bank: straight into ``folder`` for a single benchmark,
    else one subfolder per bank, with ``scopes.csv`` and an index ``report.md`` (the step's folder
    appears when every bank has finished). ``no_abilities``: why no latent-ability bank was built."""
    if len(scopes) == 1:
        job(scopes[0].responses, folder, force=True, **_scope_options(step, scopes[0], kw))
        return
    rows = []
    with staged_output(folder, force=True) as staging:
        for k, scope in enumerate(scopes, start=1):
            options = _scope_options(step, scope, kw)
            stage(f"{step}: item bank {k} of {len(scopes)}, {scope.name} ({scope.responses.sizes['item']:,} items x "
                  f"{scope.responses.sizes['model']:,} models)", enabled=progress)
            job(scope.responses, staging / scope.name, force=True, **options)
            rows.append({"scope": scope.name, "items": scope.responses.sizes["item"],
                         "models": scope.responses.sizes["model"],
                         "members": " ".join(("-" if s < 0 else "") + n for n, s in scope.members.items()),
                         "polarity": scope.polarity} | ({"direction": options.get("direction", "down")}
                                                         if step == "sandbag" else {}))
        table = pd.DataFrame(rows)
        table.to_csv(staging / "scopes.csv", index=False)
        lines = [_banks_heading(step, scopes, no_abilities), "",
                 "Members marked - are reversed (1 - y) in a pooled bank.", "",
                 "| bank | items | models | members | polarity |" + (" direction |" if step == "sandbag" else ""),
                 "|---|---|---|---|---|" + ("---|" if step == "sandbag" else "")]
        lines += [f"| [{r['scope']}]({r['scope']}/report.md) | {r['items']:,} | {r['models']:,} | {r['members']} | "
                  f"{r['polarity']:+d} |" + (f" {r['direction']} |" if step == "sandbag" else "") for r in rows]
        (staging / "report.md").write_text("\n".join(lines) + "\n")


def run_safety_suite(files: list[str], out, *, steps=DEFAULT_STEPS, options: dict | None = None, force: bool = False,
                     resume: bool = False, progress: bool = True) -> Path:
    """Run the declared SAFE steps on benchmark ``files``; one subfolder per step under ``out``.

    ``options`` maps a step name to the keyword options of its job (e.g. ``{"cat": {"budgets":
    [10, 25]}}``), as the analysis file's ``[safety.<step>]`` tables give them. Every option is
    checked before any work, and what the data cannot support right after loading. Each step's
    folder appears when it finishes; ``summary.json`` records every step's settings and status.
    A failing step does not stop the others: :class:`StepsFailed` is raised at the end, naming it.
    ``resume`` (``out`` must hold an earlier run's summary.json) reruns only the steps that are
    missing or failed there, with the files, steps and options recorded there (the arguments are
    ignored), so the result is the same as an uninterrupted run. ``force`` replaces an existing
    ``out``: the earlier folder is kept aside until every step has run, then removed.
    """
    out = Path(out)
    summary_path = out / "summary.json"
    if resume:
        if not summary_path.is_file():
            raise OutputError(f"nothing to resume in {out}: no summary.json of an earlier run there; run without "
                              "--resume")
        record = json.loads(summary_path.read_text())
        files, steps, options = record["files"], list(record["steps"]), record["options"]
    else:
        check_output(out, force=force)
        options = {k: dict(v) for k, v in (options or {}).items()}
        check_step_options(list(steps), options)
        record = {"files": [str(f) for f in files], "options": options,
                  "steps": {step: {"status": "pending", "settings": options.get(step, {})} for step in steps}}
    names = [Path(f).stem for f in files]
    if len(set(names)) < len(names):
        raise SpecError(f"benchmark files need distinct names (file stems), which label their results; got {names}")

    declared = parse_polarity(options.get("factors", {}).get("polarity"))[0]
    datasets = {n: load(f) for n, f in zip(names, files)} if set(steps) - {"factors"} else {}
    sizes = benchmark_scopes(datasets, read_structure(None, names, declared)[0]) if datasets else []
    check_against_data(files, sizes, steps, options)
    retired = None
    if not resume:
        remove_stale_staging(out)
        if out.exists():  # force: the earlier result is kept aside until this run has run every step
            retired = retire(out)
        out.mkdir(parents=True, exist_ok=True)
        write_json(summary_path, record)  # a run killed in its first step resumes
    jobs = _step_jobs()
    scopes = None
    order = sorted(steps, key=lambda name: name != "factors")  # the item-level steps read its polarity
    for number, step in enumerate(order, start=1):
        entry = record["steps"][step]
        if entry["status"] == "finished" and (out / step).is_dir():
            stage(f"safety step {number} of {len(order)}, {step}: finished in an earlier run, kept", enabled=progress)
            continue
        stage(f"safety step {number} of {len(order)}, {step}: started", enabled=progress)
        started = time.monotonic()
        if step == "factors" and len(files) < 3:  # one file has no factor structure across benchmarks
            record["steps"][step] = {"status": "skipped", "settings": options.get(step, {}),
                                     "reason": f"the factor structure needs three or more benchmark files; got "
                                               f"{len(files)}"}
            write_json(summary_path, record)
            write_text_atomic(out / "report.md", _report(files, record, out))
            stage(f"safety step {number} of {len(order)}, {step}: skipped ({record['steps'][step]['reason']})",
                  enabled=progress)
            continue
        kw = {k: tuple(v) if isinstance(v, list) else v for k, v in options.get(step, {}).items()}
        if step != "information":
            kw["progress"] = progress
        try:
            if step == "factors":
                jobs[step](files, out / step, force=True, **kw)
            else:
                if scopes is None:
                    factors = out / "factors" if (out / "factors").is_dir() else None
                    scopes = benchmark_scopes(datasets, *read_structure(factors, names, declared))
                if step == "mirt_mml":  # one fit on all benchmarks pooled (SAFE App. C), not one per bank
                    pooled = next((sc for sc in scopes if sc.name == "composite"), scopes[0])
                    jobs[step](pooled.responses, out / step, force=True, **kw)
                else:
                    _run_on_scopes(jobs[step], step, scopes, out / step, kw, progress=progress,
                                   no_abilities=_why_no_abilities(out / "factors", len(files)))
            record["steps"][step] = {"status": "finished", "settings": options.get(step, {})}
        except BayesIRTError as err:
            record["steps"][step] = {"status": "failed", "settings": options.get(step, {}), "error": str(err)}
        except Exception as err:  # noqa: BLE001 (a bug in one step: recorded, the others still run)
            log = out / f"{step}.error.log"
            log.write_text(traceback.format_exc())
            first = (str(err).strip().splitlines() or [""])[0]
            record["steps"][step] = {"status": "failed", "settings": options.get(step, {}), "internal": True,
                                     "error": f"internal error ({type(err).__name__}: {first})", "log": log.name}
        write_json(summary_path, record)
        write_text_atomic(out / "report.md", _report(files, record, out))
        stage(f"safety step {number} of {len(order)}, {step}: {record['steps'][step]['status']} after "
              f"{format_duration(time.monotonic() - started)}", enabled=progress)
    if retired is not None:
        shutil.rmtree(retired, ignore_errors=True)
    failed = [s for s, e in record["steps"].items() if e["status"] == "failed"]
    if failed:
        details = "; ".join(f"{s}: {record['steps'][s]['error']}" for s in failed)
        raise StepsFailed(f"{len(failed)} of {len(steps)} safety steps failed ({details}); the finished steps are in "
                          f"{out}; fix the cause and rerun with --resume",
                          internal=any(record["steps"][s].get("internal") for s in failed))
    return out


def _why_no_abilities(factors: Path, n_files: int) -> str:
    """Why :func:`read_structure` gave no latent-ability cluster (said in the banks' index report)."""
    if n_files < 3:
        return "the factor structure needs three or more benchmark files"
    if not (factors / "fit_indices.csv").is_file():
        return "the factors step did not run or failed"
    return ("no proper (non-Heywood) solution of two or more factors within the number that parallel analysis "
            "retains: the benchmarks share one ability or the solutions are improper (see factors/report.md)")


def read_structure(folder: str | Path | None, names: list[str],
                   declared: Mapping[str, int] | None = None) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Polarity of every benchmark and the latent-ability clusters, from a ``factors`` folder.

    Returns ``(polarity, clusters)``: ``polarity`` maps each of ``names`` to +1 or -1 (the
    folder's ``polarity.csv``, else ``declared``, else +1); ``clusters`` maps ``ability1``... to
    ``{benchmark: sign}`` for the solution with as many factors as the minres-matched parallel
    analysis retains (``parallel.csv``), or the largest fitted one below that, leaving out improper
    solutions (:attr:`bayesirt.structure.factor.FactorSolution.heywood`: a uniqueness at its bound or a loading of 1 or more; the ``heywood`` column of ``fit_indices.csv``), when that is two or
    more factors.
    """
    declared = dict(declared or {})
    polarity = {n: int(declared.get(n, 1)) for n in names}
    if folder is None or not (Path(folder) / "polarity.csv").is_file():
        return polarity, {}
    folder = Path(folder)
    table = pd.read_csv(folder / "polarity.csv", index_col="benchmark")
    polarity |= {str(b): int(p) for b, p in table["polarity"].items() if str(b) in polarity}
    parallel = pd.read_csv(folder / "parallel.csv")
    above = (parallel["observed_fa"] > parallel["reference_fa"]).to_numpy()
    retained = int(np.argmin(above)) if not above.all() else int(above.size)
    fits = pd.read_csv(folder / "fit_indices.csv")
    proper = fits.loc[~fits["heywood"].astype(bool), "n_factors"].astype(int)  # an improper solution is no structure
    k = max((f for f in proper if f <= retained and (folder / f"loadings_{f}.csv").is_file()), default=0)
    if k < 2:
        return polarity, {}
    loadings = pd.read_csv(folder / f"loadings_{k}.csv", index_col="benchmark")
    factors = [c for c in loadings.columns if c.startswith("F") and c[1:].isdigit()]
    clusters = loading_clusters(loadings[factors])
    return polarity, clusters
