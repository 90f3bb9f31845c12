"""The scores of models against a calibrated item bank (:func:`score_models`): each model's predicted
full-benchmark accuracy with its interval, person fit, the warnings a reader needs (outside the
calibrated range, at the ceiling, flagged, in the calibration cohort) and notes stating every
fallback, rescaling and widening that produced the interval shown."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import xarray as xr

from bayesirt.errors import ConfigError, DataError
from bayesirt.safety.item_sample import design_estimate, is_stratified_sample
from bayesirt.safety.scoring import align_responses, at_ceiling, outside_calibration, person_fit_flags, predict_accuracy
from bayesirt.safety.settings import ABILITY_PRIORS, DEFAULT_RULE, EXTRAPOLATION, INTERVALS, WIDE_PRIOR_FACTOR
from bayesirt.utils.validation import check_choice

__all__ = ["score_models", "Scores", "envelope", "INTERVALS", "DEFAULT_RULE", "MIN_CALIBRATED_MODELS",
           "INTERVAL_TEXT", "EDGE", "FLOOR", "ENVELOPE_TEXT", "guessing_floor"]


#: Calibration models below which ``score`` defaults to the model-based interval (the 90% quantile of
#: fewer would set the rescaling factor on a handful of models).
MIN_CALIBRATED_MODELS = 100

#: The edge of the bank's support: a model whose score on its items, or whose ability, fewer than this share
#: of the calibration cohort reaches (either tail) gets the extrapolation envelope.
EDGE = 0.05

#: The accuracy of the weakest tenth of the calibration cohort above which a bank without lower asymptotes
#: (1PL/2PL) is warned about when it scores models above the cohort (:func:`guessing_floor`).
FLOOR = 0.15

#: What the interval of a model at the edge of the support is (``--extrapolation envelope``).
ENVELOPE_TEXT = ("the extrapolation envelope: the smallest interval holding the interval named above, the model-based "
                 "interval under the bank's ability prior and the model-based interval under the wide prior")

#: What each interval kind is, as report.md and summary.json name it.
INTERVAL_TEXT = {
    "calibrated": "the model-based posterior predictive interval with its half-widths rescaled to cover the level "
                  "on the calibration cohort scored from the same items (conformal factor in `scale`; the "
                  "model-based interval is in `model_lower`, `model_upper`)",
    "model": "the model-based posterior predictive interval (ability, item-parameter and binomial uncertainty), "
             "not rescaled",
    "design": "the design-based interval of the model-assisted estimate: the items run are a stratified random "
              "sample of the bank (select --selection-rule sample); the estimate is the observed answers plus the bank's "
              "curves on the rest at the ability whose expected number correct on the items run equals the "
              "observed one, and its variance is the sampling variance of the items' residuals, so the bank's bias "
              "for models unlike its cohort does not carry into it (model-based interval in `model_lower`, "
              "`model_upper`; standard error in `design_se`)",
}


class Scores(NamedTuple):
    """What :func:`score_models` returns: the scores Dataset (dim ``model``), the warnings about models,
    and the notes saying how the intervals were made (fallbacks, rescaling, widening)."""

    data: xr.Dataset
    warnings: list
    notes: list


def _sampled(bank, y) -> np.ndarray:
    """True for each model whose items run are one per stratum of the bank (:func:`is_stratified_sample`)."""
    masks, group = np.unique(y.T >= 0, axis=0, return_inverse=True)
    return np.array([is_stratified_sample(bank, m) for m in masks], dtype=bool)[group.reshape(-1)]


def _interval(interval: str | None, bank, notes: list, sampled: np.ndarray) -> str:
    n_cal = 0 if bank.calibration is None else int(bank.calibration.sizes["model"])
    if interval == "design" and not sampled.all():
        raise DataError(f"interval='design' needs a stratified random sample of the bank's items (select --selection-rule "
                        f"sample), one item per stratum of difficulty; {int((~sampled).sum())} model(s) ran other "
                        "items (or missed some of the sample); use interval='calibrated' or 'model' for them")
    if interval is None:
        if sampled.size and sampled.all():
            notes.append("interval: design-based, because every model ran one item per stratum of the bank's "
                         "difficulty (a test of select --selection-rule sample); it assumes those items were drawn at "
                         "random within their strata")
            return "design"
        if n_cal >= MIN_CALIBRATED_MODELS:
            return "calibrated"
        why = ("the bank has no calibration responses (an mml.nc of an earlier version: pass --calibration DATA, the "
               "responses it was fitted to)" if bank.calibration is None else
               f"the bank has the responses of only {n_cal} calibration models (fewer than {MIN_CALIBRATED_MODELS})")
        notes.append(f"interval: model-based, not calibrated, because {why}")
        return "model"
    check_choice(interval, INTERVALS, name="interval", caller="score_models")
    if interval == "calibrated" and bank.calibration is None:
        raise ConfigError("interval='calibrated' needs the bank's calibration responses (a posterior.nc carries them; "
                          "with an mml.nc pass --calibration DATA); or use interval='model'")
    return interval


def envelope(lower, upper, model_lower, model_upper, other_lower, other_upper):
    """The extrapolation envelope: the smallest interval holding the interval shown, the model-based one
    (so a calibrated factor below 1, fitted inside the bank's support, never narrows it) and the
    model-based interval under the other ability prior. All arrays of one shape; returns (lower, upper)."""
    lo = np.minimum.reduce([np.asarray(lower), np.asarray(model_lower), np.asarray(other_lower)])
    hi = np.maximum.reduce([np.asarray(upper), np.asarray(model_upper), np.asarray(other_upper)])
    return lo, hi


def guessing_floor(bank) -> float | None:
    """The mean accuracy of the weakest tenth of the calibration cohort when the bank has no lower
    asymptotes (all guessing draws 0) and that accuracy is at least :data:`FLOOR`, else None.

    Such a floor (multiple-choice guessing) makes a 1PL/2PL fitted to the cohort flatten the items
    the cohort answers near it, and its predictions for models stronger than the cohort are biased
    low: on the Open LLM Leaderboard's ARC and MMLU, calibrated on the weakest 80% and scoring the
    strongest 20%, -7 to -11 pp, where a 3PL bank is within 1-3 pp (``benchmarks/score_shift.py``).
    """
    if bank.calibration is None or np.any(bank.guessing > 0):
        return None
    y = bank.calibration["responses"].transpose("item", "model").values
    n = (y >= 0).sum(0)
    acc = ((y == 1).sum(0) / np.maximum(n, 1))[n > 0]
    if acc.size < 20:
        return None
    weakest = float(np.sort(acc)[: max(1, acc.size // 10)].mean())
    return weakest if weakest >= FLOOR else None


def score_models(bank, responses, *, task: str | None = None, models=None, level: float = 0.9, fpr: float = 0.1,
                 samples: int = 2000, seed: int = 0, interval: str | None = None, rule: str = DEFAULT_RULE,
                 ability_prior: str = "bank", extrapolation: str = "envelope", progress: bool = False) -> Scores:
    """Score a response Dataset against a :class:`~bayesirt.safety.bank.Bank`.

    ``interval``: see :data:`INTERVALS` (default ``"design"`` when every model ran a stratified random sample
    of the bank's items, :func:`~bayesirt.safety.item_sample.is_stratified_sample`; else ``"calibrated"``
    when the bank has the calibration responses of at least :data:`MIN_CALIBRATED_MODELS` models, else
    ``"model"``, said in the notes). ``"design"``
    (:func:`~bayesirt.safety.item_sample.design_estimate`) replaces ``predicted_accuracy``, ``lower`` and
    ``upper`` by the model-assisted estimate and its design-based interval, which does not rest on the bank's
    curves above the cohort: the extrapolation envelope is then not applied (models outside the support are
    still flagged).
    ``ability_prior``: ``"bank"`` (the calibration population) or ``"wide"`` (its sd times
    :data:`~bayesirt.safety.settings.WIDE_PRIOR_FACTOR`). ``extrapolation``: for every model outside
    the bank's support (:func:`~bayesirt.safety.scoring.outside_calibration`) ``"envelope"`` widens
    the interval to :func:`envelope` (the model-based interval under the other prior computed for
    those models); ``"none"`` only flags them.
    """
    check_choice(ability_prior, ABILITY_PRIORS, name="ability_prior", caller="score_models")
    check_choice(extrapolation, EXTRAPOLATION, name="extrapolation", caller="score_models")
    notes: list[str] = []
    scale_of = {"bank": 1.0, "wide": WIDE_PRIOR_FACTOR}
    y, model_ids = align_responses(bank, responses, task=task, models=models)
    interval = _interval(interval, bank, notes, _sampled(bank, y))
    pred = predict_accuracy(bank, y, level=level, samples=samples, seed=seed, calibrate=interval == "calibrated",
                            rule=rule, prior_scale=scale_of[ability_prior],
                            progress="score: models" if progress else None)
    design_se = np.full(model_ids.size, np.nan)
    if interval == "design":
        est = design_estimate(bank, y, level=level)
        pred = pred._replace(predicted_accuracy=est.estimate, lower=est.lower, upper=est.upper)
        design_se = est.se
        if extrapolation == "envelope":
            notes.append("extrapolation: the design-based interval is not widened for models outside the bank's "
                         "support (it does not rest on the bank's curves above the cohort); they are still flagged")
            extrapolation = "none"
    fit = person_fit_flags(bank, y, fpr=fpr, seed=seed)
    outside = outside_calibration(bank, y, pred.theta_mean)
    edge = outside | outside_calibration(bank, y, pred.theta_mean, tail=EDGE, ability_tail=EDGE)
    lower, upper = pred.lower.copy(), pred.upper.copy()
    widened = np.zeros(model_ids.size, dtype=bool)
    other = "wide" if ability_prior == "bank" else "bank"
    if extrapolation == "envelope" and edge.any():
        alt = predict_accuracy(bank, y[:, edge], level=level, samples=samples, seed=seed,
                               prior_scale=scale_of[other],
                               progress="score: models at the edge of the support, other prior" if progress else None)
        lower[edge], upper[edge] = envelope(lower[edge], upper[edge], pred.model_lower[edge], pred.model_upper[edge],
                                            alt.model_lower, alt.model_upper)
        widened[edge] = (lower[edge] < pred.lower[edge]) | (upper[edge] > pred.upper[edge])
    prior_sd = bank.prior_sd * scale_of[ability_prior]
    notes.append(f"ability prior of the scored models: Normal({bank.prior_mean:g}, {prior_sd:g})"
                 + (f", {WIDE_PRIOR_FACTOR:g} times the bank's population sd" if ability_prior == "wide" else
                    " (the bank's calibration population)"))
    if interval == "calibrated":
        scales = pred.scale[np.isfinite(pred.scale)]
        if scales.size:
            lo_s, hi_s = float(scales.min()), float(scales.max())
            factor = f"{lo_s:.2f}" if np.isclose(lo_s, hi_s) else f"{lo_s:.2f} to {hi_s:.2f}"
            notes.append(f"interval: calibrated, the model-based half-widths multiplied by {factor} to cover "
                         f"{level:.0%} of up to 2,000 calibration models scored from the same items (rule {rule}; "
                         f"calibration responses {bank.calibration_origin})")
    if edge.any() and interval != "design":
        notes.append(f"extrapolation: {int(outside.sum())} model(s) outside the bank's support and "
                     f"{int((edge & ~outside).sum())} more at its edge (a score on these items or an ability "
                     f"reached by fewer than {EDGE:.0%} of the calibration cohort); "
                     + (f"their intervals widened to hold the model-based interval under both ability priors "
                        f"({int(widened.sum())} changed; column `extrapolated`)" if extrapolation == "envelope" else
                        "their intervals left as scored (--extrapolation none)"))
    data = {k: ("model", np.asarray(v)) for k, v in pred._asdict().items()}
    data |= {"lower": ("model", lower), "upper": ("model", upper), "extrapolated": ("model", widened),
             "design_se": ("model", design_se),
             "theta_map": ("model", fit.theta_map), "lz": ("model", fit.lz), "lz_cutoff": ("model", fit.cutoff),
             "person_fit_flag": ("model", fit.flag), "outside_range": ("model", outside),
             "at_edge": ("model", edge), "at_ceiling": ("model", at_ceiling(y))}
    ds = xr.Dataset(data, coords={"model": model_ids})
    ds.attrs = {"level": level, "fpr": fpr, "cutoff_method": fit.method, "samples": samples, "seed": seed,
                "interval": interval, "interval_text": INTERVAL_TEXT[interval],
                "interval_at_edge": ENVELOPE_TEXT if extrapolation == "envelope" else INTERVAL_TEXT[interval],
                "calibration_rule": rule if interval == "calibrated" else "", "ability_prior": ability_prior,
                "ability_prior_sd": prior_sd, "extrapolation": extrapolation,
                "bank_kind": bank.kind, "bank_items": bank.n_items,
                "accuracy": "proportion correct over all bank items: observed answers plus predicted rest"}
    return Scores(ds, _warnings(bank, pred, fit, outside, y, model_ids, edge, interval), notes)


def _warnings(bank, pred, fit, outside, y, model_ids, edge, interval) -> list[str]:
    warnings = []
    if (pred.n_items == 0).any():
        warnings.append(f"{int((pred.n_items == 0).sum())} model(s) ran none of the bank's items: their prediction "
                        "is the calibration population's")
    if outside.any():
        shown = ", ".join(repr(str(m)) for m in model_ids[outside][:5]) + (", ..." if outside.sum() > 5 else "")
        warnings.append(f"{int(outside.sum())} model(s) lie outside the abilities the bank was calibrated on ({shown}; "
                        "column `outside_range`): "
                        + ("the design-based interval does not rest on the bank's curves there, but the bank's person "
                           "fit and ability do" if interval == "design" else
                           "their intervals rest on extrapolation beyond the calibration cohort; calibrate a bank "
                           "that includes models like them, or run a stratified sample (select --selection-rule sample)"))
    near = edge & ~outside
    if near.any():
        shown = ", ".join(repr(str(m)) for m in model_ids[near][:5]) + (", ..." if near.sum() > 5 else "")
        warnings.append(f"{int(near.sum())} more model(s) lie at the edge of the bank's support ({shown}; column "
                        f"`at_edge`: a score on these items or an ability reached by fewer than {EDGE:.0%} of the "
                        "calibration cohort): the bank's fit there rests on few calibration models")
    above = edge & (pred.theta_mean > np.median(bank.abilities))
    floor = guessing_floor(bank) if above.any() else None
    if floor is not None:
        low = ("their design-based estimates keep part of that bias (under the same shift, 200 sample tests: ARC "
               "-1.3 pp, MMLU -3.2 pp with a 2PL bank, 0.0 and -0.4 pp with a 3PL bank; "
               "benchmarks/results/score_shift_draws.md); fit the bank as 3PL (bayesirt mml --model 3pl)"
               if interval == "design" else
               "fit the bank as 3PL (bayesirt mml --model 3pl) and select with --selection-rule extended to score "
               "models stronger than the cohort")
        warnings.append(f"the bank has no lower asymptote but the weakest tenth of its calibration cohort answers "
                        f"{floor:.0%} correctly (a floor such as multiple-choice guessing): a 1PL/2PL bank flattens "
                        f"the items the cohort answers near that floor and predicts the {int(above.sum())} model(s) "
                        f"above the cohort too low (Open LLM Leaderboard ARC/MMLU: -7 to -11 pp); {low}")
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
    return warnings
