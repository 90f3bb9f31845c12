"""The two jobs of evaluating a new model on a few items: ``select`` (a short test from a calibrated bank,
written in the forms harnesses accept) and ``score`` (each model's full-benchmark accuracy with an
interval from a partial run, :func:`bayesirt.safety.scores.score_models`). Each writes one output
folder through :mod:`bayesirt.report.bank`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bayesirt.data.settings import DATA_HELP
from bayesirt.errors import DataError, recorded_warnings
from bayesirt.safety.settings import (ABILITY_PRIORS, CALIBRATION_RULES, DEFAULT_RULE, EXTRAPOLATION, INTERVALS,
                                      SELECTION_METHOD, SELECTION_METHODS, WIDE_PRIOR_FACTOR)
from bayesirt.utils.options import comma_list, declare, option
from bayesirt.utils.outputs import check_output
from bayesirt.utils.progress import stage

if TYPE_CHECKING:  # annotations only
    import xarray as xr

BANK_HELP = "posterior.nc of `bayesirt fit`, or mml.nc of `bayesirt mml` / `fit --method map`"
"""What a BANK argument may be (command-line help)."""

__all__ = ["run_select_job", "run_score_job", "HARNESS_RULE"]


#: How item ids become harness (task, document) pairs, as reported in summary.json.
HARNESS_RULE = ("'<task>/<doc>' as written (bayesirt's lm-eval and Inspect ids); '<subject>.<doc>' with an integer "
                "doc -> task '<task option>_<subject>' (or '<subject>'); an integer id -> task = the task option, "
                "else the item's item_group (not the placeholder 'all')")

_METHOD_TEXT = {
    "sample": "a stratified random sample: the bank's items sorted by their proportion correct in the calibration "
              "cohort, cut into as many strata as items, one item drawn at random (seed) from each; score recognizes "
              "it and gives the design-based interval, which stays calibrated for models stronger than the cohort",
    "score": "greedy forward selection of the items that best recover the calibration models' full-benchmark "
             "accuracy (the bank's prediction from the chosen items, squared error over the calibration cohort)",
    "information": "the SAFE static test: the items with the most Fisher information summed over the calibration "
                   "abilities",
    "extended": "half the items by score recovery (as 'score'), half with the most Fisher information at abilities "
                "spread from the calibration cohort's 95th percentile to 4 cohort sds above it, so that models "
                "stronger than the cohort are measured too (a cohort-centred test puts them at its ceiling)",
}


@declare(positional={"bank": BANK_HELP}, renamed={"method": "selection_rule"})
def run_select_job(bank, out, *,
                   budget: int = option(None, "items in the test (1 to the bank's size)", type=int, required=True,
                                        low=1),
                   selection_rule: str = option(SELECTION_METHOD, "sample: a stratified random sample of the items, "
                                                "scored design-based (stays calibrated for models unlike the cohort); "
                                                "score: greedy recovery of the calibration models' full accuracy "
                                                "(narrower intervals for models like the cohort); information: SAFE's "
                                                "max-information static test; extended: half score, half items "
                                                "informative above the cohort", choices=SELECTION_METHODS),
                   stratify: bool = option(False, "proportional quotas per item_group"),
                   task: str | None = option(None, "harness task of plain integer item ids (or prefix of subject.doc "
                                                   "ids)", type=str),
                   calibration=option(None, "the responses an mml.nc bank was fitted to", type=str),
                   draws: int = option(200, "item-parameter draws read from the bank", low=1),
                   seed: int = option(0, "seed of the draws and of the selection", low=0),
                   force: bool = False) -> Path:
    """``bayesirt select BANK --budget K --out DIR``: the K-item test and its harness subset files.

    Writes ``test_items.csv`` (``item_id``, ``rank``, ``item_group`` and the bank's mean item
    parameters), ``lm_eval_samples.json`` and ``inspect_sample_ids.json`` (``task -> ids``; only
    when the item ids map to harness tasks, see :func:`bayesirt.safety.short_test.harness_ids`),
    ``summary.json`` and ``report.md``.

    Parameters
    ----------
    bank : path, DataTree, MMLResult or Bank
        ``posterior.nc`` of ``bayesirt fit`` or ``mml.nc`` of ``bayesirt mml`` (MAP-EM).
    out : path
    budget : int
        Items in the test.
    selection_rule : {"sample", "score", "information", "extended"}, default "sample"
        ``"sample"``: one item drawn at random (``seed``) from each of ``budget`` strata of the items'
        proportion correct in the cohort; ``score`` recognizes such a test and gives its design-based
        interval, which stays calibrated for models stronger than the cohort (``benchmarks/score_shift.py``).
        ``"score"``: greedy recovery of the cohort's full accuracy (narrower intervals for models like the
        cohort, invalid for models above it). ``"extended"``: half ``"score"``, half items informative above
        the cohort.
    stratify : bool, default False
        Proportional quotas per ``item_group``.
    task : str, optional
        Harness task of plain integer item ids (or prefix of ``subject.doc`` ids).
    calibration : path or Dataset, optional
        The responses an ``mml.nc`` bank was fitted to (for ``selection_rule="score"``).
    draws, seed : int
        Item-parameter draws read from the bank and their seed.
    force : bool
    """
    check_output(out, force=force)
    # import time: loaded when the job runs, not when the command line lists its options
    import pandas as pd
    from bayesirt.report.bank import write_selection  # import time, as above
    from bayesirt.safety.bank import read_bank  # import time, as above
    from bayesirt.safety.short_test import harness_ids, select_items  # import time, as above

    b = read_bank(bank, draws=draws, seed=seed, calibration=calibration)
    chosen = selection_rule
    notes = [_calibration_note(b)]
    if chosen == "sample" and b.calibration is None:
        notes.append("selection: the strata are of the items' expected proportion correct at the cohort's abilities "
                     "under the bank's mean parameters (no calibration responses to count them); score the run with "
                     "the same --draws and --seed so that it finds the same strata")
    _say_notes(b.notes + notes)
    stage(f"select: choosing {budget} items ({chosen})")
    items = select_items(b, budget, method=chosen, stratify=stratify, seed=seed)
    point = b.point()
    a, d = point.discrimination[items], point.intercept[items]
    table = pd.DataFrame({"item_id": b.item_ids[items], "rank": np.arange(1, items.size + 1),
                          "item_group": b.item_group[items], "discrimination": a, "intercept": d,
                          "difficulty": -d / a})
    harness, note = None, ""
    try:
        harness = harness_ids(b.item_ids[items], b.item_group[items], task=task)
    except DataError as err:
        note = str(err)
    summary = {"budget": int(budget), "selection_rule": chosen, "selection_text": _METHOD_TEXT[chosen], "stratify": stratify,
               "task": task, "bank": b.summary(), "harness_rule": HARNESS_RULE, "harness_files": harness is not None,
               "harness_note": note, "notes": notes, "items": table["item_id"].tolist()}
    return write_selection(out, table, harness, summary, force=force)


def _calibration_note(bank) -> str:
    """Where the bank's calibration responses came from (or that it has none, and what that changes)."""
    if bank.calibration is None:
        return ("calibration responses: none (the bank does not store them: an mml.nc of an earlier version); "
                "pass --calibration DATA, the responses it was fitted to, for a calibrated interval, the 'score' "
                "selection and an empirical person-fit cut-off")
    return (f"calibration responses: {bank.calibration.sizes['model']:,} models, {bank.calibration_origin}")


def _say_notes(notes) -> None:
    """Each note as one console line (always, like a warning: a note says how the numbers were made)."""
    for note in notes:
        print(f"bayesirt: note: {note}", file=sys.stderr, flush=True)


def _load(responses) -> xr.Dataset:
    # import time: loaded when the job runs, not when the command line lists its options
    import xarray as xr
    from bayesirt.data.io import load  # import time, as above

    return responses if isinstance(responses, xr.Dataset) else load(responses)


@declare(positional={"bank": BANK_HELP, "responses": "the partial run: " + DATA_HELP})
def run_score_job(bank, responses, out, *,
                  task: str | None = option(None, "harness task of the bank's plain integer ids (as given to select)",
                                            type=str),
                  models=option(None, "score only these model ids, comma-separated [all]", type=tuple,
                                parse=comma_list),
                  calibration=option(None, "the responses an mml.nc bank was fitted to (empirical cut-off, "
                                           "calibrated interval)", type=str),
                  level: float = option(0.9, "interval probability", low=0, high=1, open=True),
                  fpr: float = option(0.1, "share of the calibration cohort flagged by the person-fit cut-off", low=0,
                                      high=1, open=True),
                  interval: str | None = option(None, "design: the design-based interval of a stratified random "
                                                      "sample (select --selection-rule sample); calibrated: rescaled to cover "
                                                      "the level on the calibration cohort; model: the posterior "
                                                      "predictive interval [design for a sample test, else calibrated "
                                                      "when the bank has calibration responses of >= 100 models]",
                                                type=str, choices=INTERVALS),
                  rule: str = option(DEFAULT_RULE, "how the calibrated interval's factor is chosen",
                                     choices=CALIBRATION_RULES, flag="--interval-rule"),
                  ability_prior: str = option("bank", "ability prior of the scored models: bank: the calibration "
                                                      f"population; wide: its sd x {WIDE_PRIOR_FACTOR:g} (new models "
                                                      "stronger than the cohort)", choices=ABILITY_PRIORS),
                  extrapolation: str = option("envelope", "models outside the bank's support: envelope: widen the "
                                                          "interval to hold the model-based intervals under both "
                                                          "ability priors; none: flag only", choices=EXTRAPOLATION),
                  draws: int = option(200, "item-parameter draws read from the bank", low=1),
                  samples: int = option(2000, "predictive draws per model", low=1),
                  seed: int = option(0, "random seed", low=0),
                  force: bool = False) -> Path:
    """``bayesirt score BANK RESPONSES --out DIR``: each model's full-benchmark accuracy from a partial run.

    Writes ``scores.csv`` (``model, n_items, predicted_accuracy, lower, upper, person_fit_flag``
    first, proportions; then ``n_correct``, ability, l_z, cut-off, ``outside_range``, ...),
    ``scores.nc``, ``summary.json``, ``report.md`` and ``scores.png``.

    Parameters
    ----------
    bank : path, DataTree, MMLResult or Bank
    responses : path, dataset name or xarray.Dataset
        Anything :func:`bayesirt.data.load` reads, including the harness output of the subset run.
        Items are matched to the bank by id (or harness task/doc, see
        :func:`bayesirt.safety.scoring.align_responses`); unknown ids are an error.
    out : path
    task : str, optional
        Harness task of the bank's plain integer ids (as given to ``select``).
    models : sequence of str, optional
        Score only these model ids (unknown ids are an error).
    calibration : path or Dataset, optional
        The responses an ``mml.nc`` bank was fitted to: the person-fit cut-off is then empirical.
    level : float, default 0.9
    fpr : float, default 0.1
        Share of the calibration cohort flagged by the person-fit cut-off.
    interval : {"design", "calibrated", "model"}, optional
        ``"design"`` (default when every model ran a test of ``select --selection-rule sample``): the
        model-assisted estimate with its design-based interval
        (:func:`bayesirt.safety.item_sample.design_estimate`), valid for models unlike the cohort.
        ``"model"``: the Bayesian posterior predictive interval; ``"calibrated"`` (default otherwise when the
        bank has the calibration responses of at least 100 models): its half-widths rescaled so that it covers ``level`` of
        the calibration cohort scored from the same items (on the Open LLM Leaderboard the model
        interval over-covers selected tests, 96-98% at K = 25-100, because the chosen items predict
        the rest better than the unidimensional model assumes; ``benchmarks/README.md``).
    rule : {"conservative", "nearest"}
        How the calibrated interval's factor is chosen (:func:`bayesirt.safety.scoring.interval_scale`):
        at least ``level`` of the calibration cohort covered, or the coverage nearest ``level``.
    ability_prior : {"bank", "wide"}
        The scored models' ability prior: the bank's calibration population, or the same with its sd
        times 3 (for models that may be stronger than the cohort).
    extrapolation : {"envelope", "none"}
        For each model outside the bank's support (``outside_range``): ``"envelope"`` widens its
        interval to hold the model-based interval (never narrowed by a calibration factor below 1)
        and the model-based interval under the other ability prior (column ``extrapolated``);
        ``"none"`` flags it only.
    draws, samples, seed : int
        Item-parameter draws read from the bank, predictive draws per model, seed.
    force : bool

    Every fallback and rescaling (where the calibration responses came from, the interval used and
    why, the factor, the prior, the widening) is a note in the console, ``report.md`` and
    ``summary.json`` (``notes``); ``summary.json`` ``interval`` is the interval used.
    """
    check_output(out, force=force)
    # import time: loaded when the job runs, not when the command line lists its options
    import xarray as xr
    from bayesirt.report.bank import write_scores  # import time, as above
    from bayesirt.safety.bank import read_bank  # import time, as above
    from bayesirt.safety.scores import score_models  # import time, as above

    stage(f"score: reading the bank ({draws} item-parameter draws)")
    b = read_bank(bank, draws=draws, seed=seed, calibration=calibration)
    data = _load(responses)
    _say_notes(b.notes + [_calibration_note(b)])
    stage(f"score: scoring {data.sizes['model']:,} models ({samples:,} predictive draws each)")
    (scores, warnings, notes), messages = recorded_warnings(
        score_models, b, data, task=task, models=models, level=level, fpr=fpr, samples=samples, seed=seed,
        interval=interval, rule=rule, ability_prior=ability_prior, extrapolation=extrapolation, progress=True)
    _say_notes(notes)
    notes = [_calibration_note(b)] + notes
    summary = {"level": level, "fpr": fpr, "samples": samples, "seed": seed, "task": task,
               "interval": scores.attrs["interval"], "interval_requested": interval,
               "interval_text": scores.attrs["interval_text"], "interval_at_edge": scores.attrs["interval_at_edge"],
               "at_edge": int(scores["at_edge"].sum()), "ability_prior": ability_prior,
               "ability_prior_sd": scores.attrs["ability_prior_sd"], "extrapolation": scores.attrs["extrapolation"],
               "extrapolated": int(scores["extrapolated"].sum()), "notes": notes,
               "outside_range_models": scores["model"].values[scores["outside_range"].values].astype(str).tolist(),
               "calibration_rule": scores.attrs["calibration_rule"],
               "cutoff_method": scores.attrs["cutoff_method"], "bank": b.summary(),
               "responses": str(data.attrs.get("name", responses if not isinstance(responses, xr.Dataset) else "")),
               "models": int(scores.sizes["model"]), "flagged": int(scores["person_fit_flag"].sum()),
               "outside_range": int(scores["outside_range"].sum()), "warnings": warnings + messages}
    return write_scores(out, scores, summary, force=force)
