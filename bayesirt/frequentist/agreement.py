"""Bayes-versus-MML agreement: is a posterior what the classical fit says it should be?

A posterior mean and a marginal ML estimate of the same parameter differ for three honest
reasons and one dishonest one:

- **Monte Carlo error** of the posterior mean (its MCSE);
- **prior shrinkage**: the priors move the estimate; measured exactly by refitting with the same
  priors by MAP-EM (the mode of the same marginal posterior the sampler explores);
- **posterior asymmetry**: mean and mode of a skewed posterior differ, by at most sqrt(3) sd for
  a unimodal distribution (Johnson and Rogers, 1951; MAP-EM gives the joint mode, not each
  marginal's, so the bound is a guide rather than a theorem here). Item slopes at a few hundred models
  reach 0.9 sd: the joint mode of the marginal posterior sits on a slightly smaller latent
  scale than the posterior mean. Difficulties of very easy or hard items are the extreme case, so
  they are compared in slope-intercept form and not flagged here;
- anything else (non-convergence, a bug, a mis-specified model) is **unexplained**.

Per parameter element, with sd the posterior sd and ``k`` = ``threshold_sd``:

- ``unexplained`` when |posterior mean - MAP-EM| > sqrt(3) sd + 3 MCSE: neither asymmetry nor
  Monte Carlo error can produce the gap;
- ``prior`` when it is not unexplained but |MAP-EM - ML| > k sqrt(sd^2 + se_ML^2): the prior
  moves the estimate by more than the sampling uncertainty of the two estimates allows, so the
  prior, not the data, sets the value (a prior in conflict with the data, or too strong for it).
  Against the posterior sd alone, a well-specified prior already moves weakly identified items
  (low discrimination, few models) by about one sd; against the combined uncertainty they stay
  below 0.8 (``tests/test_agreement.py``). An item whose ML slope is about 0 is rightly flagged:
  a log-normal prior excludes the slopes <= 0 the data allow.

Abilities are compared as posterior means with the EAP of the ML (and MAP-EM) item estimates.
"""

from __future__ import annotations

from dataclasses import dataclass

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.errors import DataError
from bayesirt.frequentist.mml import MMLResult
from bayesirt.frequentist.settings import DEFAULT_THRESHOLD_SD

__all__ = ["Agreement", "compare_estimates", "AGREEMENT_PARAMETERS", "DEFAULT_THRESHOLD_SD"]

AGREEMENT_PARAMETERS = ("discrimination", "intercept", "guessing", "slip", "theta")
_SAMPLE = ("chain", "draw")
_UNIMODAL_GAP = float(np.sqrt(3.0))  # max |mean - mode| / sd of a unimodal distribution


@dataclass
class Agreement:
    """Result of :func:`compare_estimates`.

    Attributes
    ----------
    elements : pandas.DataFrame
        One row per parameter element: ``parameter``, ``element`` (item or model id),
        ``posterior_mean``, ``posterior_sd``, ``mcse``, ``ml``, ``ml_se``, ``map``,
        ``diff_ml`` (mean - ML), ``diff_ml_sd``, ``shrinkage_sd`` ((MAP - ML) / sd),
        ``shrinkage_z`` ((MAP - ML) / sqrt(sd^2 + se_ML^2)),
        ``diff_map_sd`` ((mean - MAP) / sd), ``flag`` ("", "prior" or "unexplained").
    summary : pandas.DataFrame
        One row per parameter: ``n``, ``corr_ml``, ``rmse_ml``, ``max_abs_diff_ml``,
        ``median_abs_diff_ml_sd``, ``max_abs_diff_ml_sd``, ``corr_map``, ``rmse_map``,
        ``max_abs_diff_map_sd``, ``max_abs_shrinkage_z``, ``n_prior``, ``n_unexplained``.
    threshold_sd : float
    """

    elements: pd.DataFrame
    summary: pd.DataFrame
    threshold_sd: float

    @property
    def flagged(self) -> pd.DataFrame:
        """The flagged elements, most discrepant first."""
        out = self.elements[self.elements["flag"] != ""]
        return out.reindex(out["diff_ml_sd"].abs().sort_values(ascending=False).index)


def _point_estimates(fit: MMLResult, parameter: str) -> tuple[xr.DataArray, xr.DataArray]:
    if parameter == "theta":
        return fit.abilities["eap"], fit.abilities["eap_sd"]
    return fit.items[parameter], fit.items[f"{parameter}_se"]


def _compared(posterior: xr.Dataset, ml: MMLResult, parameters) -> list[str]:
    out = []
    for name in parameters:
        if name not in posterior:
            continue
        if name != "theta" and not np.isfinite(ml.items[name].values).all():
            continue  # not estimated by this spec (e.g. guessing in a 2PL)
        if name == "discrimination" and ml.spec.discrimination_structure == "fixed":
            continue
        out.append(name)
    return out


def compare_estimates(
    posterior: xr.DataTree | xr.Dataset,
    ml: MMLResult,
    map_fit: MMLResult,
    *,
    threshold_sd: float = DEFAULT_THRESHOLD_SD,
    parameters: tuple[str, ...] = AGREEMENT_PARAMETERS,
) -> Agreement:
    """Align a posterior with the ML and MAP-EM fits of the same spec and flag disagreements.

    Parameters
    ----------
    posterior : DataTree or Dataset
        A :func:`bayesirt.inference.fitting.fit` result (its ``posterior`` group) or the group itself.
    ml, map_fit : MMLResult
        :func:`~bayesirt.frequentist.fit_mml` of the same data and spec with ``priors=False``
        and ``priors=True``.
    threshold_sd : float
        ``k`` of the prior-shrinkage flag (module docstring). Default 1.
    parameters : tuple of str
        Parameters to compare when present (difficulty is deliberately not among the defaults).
    """
    if not threshold_sd > 0:
        raise DataError(f"threshold_sd must be positive; got {threshold_sd!r}")
    post = posterior["posterior"].to_dataset() if isinstance(posterior, xr.DataTree) else posterior
    names = _compared(post, ml, parameters)
    if not names:
        raise DataError("the posterior and the MML fit share no parameter to compare; fit the same spec to the same data")
    mcse = az.mcse(post[names], method="mean")
    mcse = mcse.to_dataset() if isinstance(mcse, xr.DataTree) else mcse
    frames = []
    for name in names:
        mean, sd = post[name].mean(_SAMPLE), post[name].std(_SAMPLE)
        est, se = _point_estimates(ml, name)
        mode, _ = _point_estimates(map_fit, name)
        dim = mean.dims[0] if mean.dims else None
        if dim is not None:
            missing = set(mean[dim].values.tolist()) ^ set(est[dim].values.tolist())
            if missing:
                raise DataError(
                    f"{name}: the posterior and the MML fit cover different {dim}s (e.g. {sorted(map(str, missing))[:3]}); "
                    "fit both to the same data"
                )
            est, se, mode = (v.sel({dim: mean[dim].values}) for v in (est, se, mode))
        frame = pd.DataFrame({
            "parameter": name,
            "element": [str(v) for v in mean[dim].values] if dim else [name],
            "posterior_mean": np.atleast_1d(mean.values), "posterior_sd": np.atleast_1d(sd.values),
            "mcse": np.atleast_1d(mcse[name].values),
            "ml": np.atleast_1d(est.values), "ml_se": np.atleast_1d(se.values), "map": np.atleast_1d(mode.values),
        })
        frames.append(frame)
    el = pd.concat(frames, ignore_index=True)
    el["diff_ml"] = el["posterior_mean"] - el["ml"]
    el["diff_ml_sd"] = el["diff_ml"] / el["posterior_sd"]
    el["shrinkage_sd"] = (el["map"] - el["ml"]) / el["posterior_sd"]
    el["diff_map_sd"] = (el["posterior_mean"] - el["map"]) / el["posterior_sd"]
    unexplained = (el["posterior_mean"] - el["map"]).abs() > _UNIMODAL_GAP * el["posterior_sd"] + 3 * el["mcse"]
    el["shrinkage_z"] = (el["map"] - el["ml"]) / np.hypot(el["posterior_sd"], el["ml_se"])
    prior = ~unexplained & (el["shrinkage_z"].abs() > threshold_sd)
    el["flag"] = np.select([unexplained, prior], ["unexplained", "prior"], "")
    return Agreement(el, _summary(el, names), float(threshold_sd))


def _summary(el: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    rows = []
    for name in names:
        g = el[el["parameter"] == name]
        diff_map = g["posterior_mean"] - g["map"]
        corr = (lambda x, y: float(np.corrcoef(x, y)[0, 1]) if len(g) > 2 else np.nan)  # noqa: E731
        rows.append({
            "parameter": name, "n": len(g),
            "corr_ml": corr(g["posterior_mean"], g["ml"]),
            "rmse_ml": float(np.sqrt(np.mean(g["diff_ml"] ** 2))),
            "max_abs_diff_ml": float(g["diff_ml"].abs().max()),
            "median_abs_diff_ml_sd": float(g["diff_ml_sd"].abs().median()),
            "max_abs_diff_ml_sd": float(g["diff_ml_sd"].abs().max()),
            "corr_map": corr(g["posterior_mean"], g["map"]),
            "rmse_map": float(np.sqrt(np.mean(diff_map**2))),
            "max_abs_diff_map_sd": float(g["diff_map_sd"].abs().max()),
            "max_abs_shrinkage_z": float(g["shrinkage_z"].abs().max()),
            "n_prior": int((g["flag"] == "prior").sum()),
            "n_unexplained": int((g["flag"] == "unexplained").sum()),
        })
    return pd.DataFrame(rows)
