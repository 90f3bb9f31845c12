"""The two jobs of evaluating a new model on a few items: ``select`` (a short test from a calibrated bank,
written in the forms harnesses accept) and ``score`` (each model's full-benchmark accuracy with an
interval from a partial run). Each writes one output folder through :mod:`bayesirt.report.bank`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.errors import BayesIRTError, DataError, recorded_warnings
from bayesirt.safety.bank import read_bank
from bayesirt.safety.scoring import (CALIBRATION_RULES, align_responses, at_ceiling, outside_calibration,
                                     person_fit_flags, predict_accuracy)
from bayesirt.safety.short_test import SELECTION_METHODS, default_method, harness_ids, select_items

__all__ = ["run_select_job", "run_score_job", "score_models", "HARNESS_RULE", "INTERVALS"]

#: Interval kinds of ``score``: the Bayesian posterior predictive interval, or the same rescaled to cover
#: ``level`` of the calibration cohort on the same items (:func:`bayesirt.safety.scoring.predict_accuracy`).
INTERVALS = ("calibrated", "model")
#: The default rule of the calibrated interval's factor (:func:`bayesirt.safety.scoring.interval_scale`).
DEFAULT_RULE = "conservative"

#: How item ids become harness (task, document) pairs, as reported in summary.json.
HARNESS_RULE = ("'<task>/<doc>' as written (bayesirt's lm-eval and Inspect ids); '<subject>.<doc>' with an integer "
                "doc -> task '<task option>_<subject>' (or '<subject>'); an integer id -> task = the task option, "
                "else the item's item_group (not the placeholder 'all')")

_METHOD_TEXT = {
    "score": "greedy forward selection of the items that best recover the calibration models' full-benchmark "
             "accuracy (the bank's prediction from the chosen items, squared error over the calibration cohort)",
    "information": "the SAFE static test: the items with the most Fisher information summed over the calibration "
                   "abilities",
}


def run_select_job(bank, out, *, budget: int, method: str | None = None, stratify: bool = False,
                   task: str | None = None, calibration=None, draws: int = 200, seed: int = 0,
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
    method : {"score", "information"}, optional
        Default ``"score"`` when the bank has the calibration responses of at least 200 models, else
        ``"information"``.
    stratify : bool, default False
        Proportional quotas per ``item_group``.
    task : str, optional
        Harness task of plain integer item ids (or prefix of ``subject.doc`` ids).
    calibration : path or Dataset, optional
        The responses an ``mml.nc`` bank was fitted to (for ``method="score"``).
    draws, seed : int
        Item-parameter draws read from the bank and their seed.
    force : bool
    """
    from bayesirt.report.bank import write_selection
    from bayesirt.utils.outputs import check_output

    check_output(out, force=force)
    if method is not None and method not in SELECTION_METHODS:
        raise BayesIRTError(f"The 'method' parameter must be one of {set(SELECTION_METHODS)}. Got {method!r} instead.")
    b = read_bank(bank, draws=draws, seed=seed, calibration=calibration)
    chosen = method or default_method(b)
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
    summary = {"budget": int(budget), "method": chosen, "method_text": _METHOD_TEXT[chosen], "stratify": stratify,
               "task": task, "bank": b.summary(), "harness_rule": HARNESS_RULE, "harness_files": harness is not None,
               "harness_note": note, "items": table["item_id"].tolist()}
    return write_selection(out, table, harness, summary, force=force)


def _load(responses) -> xr.Dataset:
    if isinstance(responses, xr.Dataset):
        return responses
    from bayesirt.data import load

    return load(responses)


#: Calibration models below which ``score`` defaults to the model-based interval (the 90% quantile of
#: fewer would set the rescaling factor on a handful of models).
MIN_CALIBRATED_MODELS = 100


def _interval(interval: str | None, bank) -> str:
    if interval is None:
        ok = bank.calibration is not None and bank.calibration.sizes["model"] >= MIN_CALIBRATED_MODELS
        return "calibrated" if ok else "model"
    if interval not in INTERVALS:
        raise BayesIRTError(f"The 'interval' parameter must be one of {set(INTERVALS)}. Got {interval!r} instead.")
    if interval == "calibrated" and bank.calibration is None:
        raise BayesIRTError("interval='calibrated' needs the bank's calibration responses (a posterior.nc carries them; "
                            "with an mml.nc pass --calibration DATA); or use interval='model'")
    return interval


def score_models(bank, responses, *, task: str | None = None, models=None, level: float = 0.9, fpr: float = 0.1,
                 samples: int = 2000, seed: int = 0, interval: str | None = None,
                 rule: str = DEFAULT_RULE) -> tuple[xr.Dataset, list[str]]:
    """The scores Dataset (dim ``model``) of a response Dataset against a :class:`~bayesirt.safety.bank.Bank`,
    and warnings. ``interval``: see :data:`INTERVALS` (default ``"calibrated"`` when the bank has its
    calibration responses, else ``"model"``)."""
    interval = _interval(interval, bank)
    y, model_ids = align_responses(bank, responses, task=task, models=models)
    pred = predict_accuracy(bank, y, level=level, samples=samples, seed=seed, calibrate=interval == "calibrated",
                            rule=rule)
    fit = person_fit_flags(bank, y, fpr=fpr, seed=seed)
    outside = outside_calibration(bank, y, pred.theta_mean)
    data = {k: ("model", np.asarray(v)) for k, v in pred._asdict().items()}
    data |= {"theta_map": ("model", fit.theta_map), "lz": ("model", fit.lz), "lz_cutoff": ("model", fit.cutoff),
             "person_fit_flag": ("model", fit.flag), "outside_range": ("model", outside),
             "at_ceiling": ("model", at_ceiling(y))}
    ds = xr.Dataset(data, coords={"model": model_ids})
    ds.attrs = {"level": level, "fpr": fpr, "cutoff_method": fit.method, "samples": samples, "seed": seed,
                "interval": interval, "calibration_rule": rule if interval == "calibrated" else "",
                "bank_kind": bank.kind, "bank_items": bank.n_items,
                "accuracy": "proportion correct over all bank items: observed answers plus predicted rest"}
    warnings = []
    if (pred.n_items == 0).any():
        warnings.append(f"{int((pred.n_items == 0).sum())} model(s) ran none of the bank's items: their prediction "
                        "is the calibration population's")
    if outside.any():
        warnings.append(f"{int(outside.sum())} model(s) lie outside the abilities the bank was calibrated on (e.g. "
                        f"{str(model_ids[outside][0])!r}): their intervals rest on extrapolation and are not trusted")
    ceiling = at_ceiling(y)
    if ceiling.any():
        warnings.append(f"{int(ceiling.sum())} model(s) answered every item run correctly (or every one wrongly): the "
                        "test bounds their ability on one side only, and their interval assumes they are no stronger "
                        "(weaker) than the calibration cohort's best (worst); run more or harder (easier) items to check")
    if fit.flag.any():
        warnings.append(f"{int(fit.flag.sum())} model(s) flagged by person fit (l_z at or below the cut-off): their "
                        "answers are not explained by the bank (contamination, sandbagging, a broken run); intervals "
                        "not trusted")
    if bank.calibration is not None:
        seen = np.intersect1d(model_ids, bank.calibration["model"].values.astype(str))
        if seen.size:
            warnings.append(f"{seen.size} scored model(s) were in the bank's calibration cohort (e.g. {str(seen[0])!r}): "
                            "their predictions are not held-out")
    low_ess = pred.draw_ess < 0.1 * bank.n_draws
    if low_ess.any() and bank.n_draws > 1:
        warnings.append(f"{int(low_ess.sum())} model(s) put most posterior weight on few item draws (effective "
                        f"number below 10% of {bank.n_draws}): read the bank with more draws")
    return ds, warnings


def run_score_job(bank, responses, out, *, task: str | None = None, models=None, calibration=None,
                  level: float = 0.9, fpr: float = 0.1, interval: str | None = None, rule: str = DEFAULT_RULE,
                  draws: int = 200, samples: int = 2000, seed: int = 0, force: bool = False) -> Path:
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
    interval : {"calibrated", "model"}, optional
        ``"model"``: the Bayesian posterior predictive interval; ``"calibrated"`` (default when the
        bank has the calibration responses of at least 100 models): its half-widths rescaled so that it covers ``level`` of
        the calibration cohort scored from the same items (on the Open LLM Leaderboard the model
        interval over-covers selected tests, 96-98% at K = 25-100, because the chosen items predict
        the rest better than the unidimensional model assumes; ``benchmarks/README.md``).
    rule : {"conservative", "nearest"}
        How the calibrated interval's factor is chosen (:func:`bayesirt.safety.scoring.interval_scale`):
        at least ``level`` of the calibration cohort covered, or the coverage nearest ``level``.
    draws, samples, seed : int
        Item-parameter draws read from the bank, predictive draws per model, seed.
    force : bool
    """
    from bayesirt.report.bank import write_scores
    from bayesirt.utils.outputs import check_output

    check_output(out, force=force)
    if not 0 < fpr < 1:
        raise BayesIRTError(f"The 'fpr' parameter must be a false-positive rate in (0, 1). Got {fpr!r} instead.")
    if interval is not None and interval not in INTERVALS:
        raise BayesIRTError(f"The 'interval' parameter must be one of {set(INTERVALS)}. Got {interval!r} instead.")
    b = read_bank(bank, draws=draws, seed=seed, calibration=calibration)
    interval = _interval(interval, b)
    data = _load(responses)
    if rule not in CALIBRATION_RULES:
        raise BayesIRTError(f"The 'rule' parameter must be one of {set(CALIBRATION_RULES)}. Got {rule!r} instead.")
    (scores, warnings), messages = recorded_warnings(score_models, b, data, task=task, models=models, level=level,
                                                     fpr=fpr, samples=samples, seed=seed, interval=interval, rule=rule)
    summary = {"level": level, "fpr": fpr, "samples": samples, "seed": seed, "task": task, "interval": interval,
               "calibration_rule": scores.attrs["calibration_rule"],
               "cutoff_method": scores.attrs["cutoff_method"], "bank": b.summary(),
               "responses": str(data.attrs.get("name", responses if not isinstance(responses, xr.Dataset) else "")),
               "models": int(scores.sizes["model"]), "flagged": int(scores["person_fit_flag"].sum()),
               "outside_range": int(scores["outside_range"].sum()), "warnings": warnings + messages}
    return write_scores(out, scores, summary, force=force)
