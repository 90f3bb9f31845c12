"""The scores of models against a calibrated item bank (:func:`score_models`): each model's predicted
full-benchmark accuracy with its interval, person fit and the warnings a reader needs (outside the
calibrated range, at the ceiling, flagged, in the calibration cohort)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from bayesirt.errors import ConfigError
from bayesirt.safety.scoring import align_responses, at_ceiling, outside_calibration, person_fit_flags, predict_accuracy
from bayesirt.safety.settings import DEFAULT_RULE, INTERVALS
from bayesirt.utils.validation import check_choice

__all__ = ["score_models", "INTERVALS", "DEFAULT_RULE", "MIN_CALIBRATED_MODELS"]


#: Calibration models below which ``score`` defaults to the model-based interval (the 90% quantile of
#: fewer would set the rescaling factor on a handful of models).
MIN_CALIBRATED_MODELS = 100


def _interval(interval: str | None, bank) -> str:
    if interval is None:
        ok = bank.calibration is not None and bank.calibration.sizes["model"] >= MIN_CALIBRATED_MODELS
        return "calibrated" if ok else "model"
    check_choice(interval, INTERVALS, name="interval", caller="score_models")
    if interval == "calibrated" and bank.calibration is None:
        raise ConfigError("interval='calibrated' needs the bank's calibration responses (a posterior.nc carries them; "
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
