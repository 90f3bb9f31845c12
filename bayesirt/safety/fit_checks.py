"""Fit checks of a fitted 1PL-4PL spec at point estimates: person fit (l_z), item fit (infit and
outfit mean squares) and how far the ability order departs from the accuracy order.

Everything is evaluated at one set of point estimates (posterior means of a sampled fit, or the
MAP estimates of ``fit --method map``), so memory is a few (item x model) arrays whatever the
number of draws.

- **Person fit**: l_z (Drasgow, Levine and Williams 1985; :func:`bayesirt.safety.personfit.lz_statistics`)
  on each model's observed items at its point ability. A model is named when ``l_z`` is below the
  standard normal 1% point (-2.33): under the model fewer than about 1% would be (l_z with an
  estimated ability has variance below 1). The cohort's 10% point (the cut-off that
  ``bayesirt personfit`` calibrates) and whether it shows widespread misfit
  (:func:`bayesirt.safety.personfit.misfit_spread`) are reported too.
- **Item fit**: with standardized residuals ``z = (x - p) / sqrt(p q)`` over the observed
  models, outfit = mean of ``z^2`` and infit = ``sum (x - p)^2 / sum p q`` (the
  information-weighted mean square; Wright and Masters 1982). Both are 1 in expectation under
  the model; an item is named when either lies outside [0.5, 1.5] (Linacre's range "productive
  for measurement"): above, responses are noisier than the curve says (e.g. answered against
  ability); below, more deterministic than the curve (a step the slope does not capture).
- **Ability versus accuracy**: Spearman correlation of point ability and accuracy (share correct
  of observed items), and the models whose two ranks (1 = highest, ties share the lowest rank)
  differ most.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import expit
from scipy.stats import norm, rankdata, spearmanr

from bayesirt.data.responses import MISSING
from bayesirt.safety.personfit import calibrate_cutoff, check_responses, lz_statistics, misfit_spread

__all__ = ["LZ_CUTOFF", "ITEM_MS_RANGE", "point_estimates", "item_fit", "rank_disagreement", "fit_checks"]

#: Person fit: a model is named when l_z lies below this (the standard normal 1% point).
LZ_CUTOFF = float(norm.ppf(0.01))
#: Item fit: an item is named when its infit or outfit mean square lies outside this range.
ITEM_MS_RANGE = (0.5, 1.5)
_FPR = 0.1
_PARAMS = (("discrimination", 1.0), ("intercept", 0.0), ("guessing", 0.0), ("slip", 0.0))
_TINY = 1e-12


def point_estimates(posterior: xr.Dataset) -> dict[str, np.ndarray]:
    """Means over (chain, draw) of ``theta`` and the item parameters (absent ones at their
    neutral value: a = 1, d = c = s = 0), in the posterior's item and model order; a common
    slope is repeated on every item."""
    n_items = posterior.sizes["item"]
    out = {"theta": posterior["theta"].mean(("chain", "draw")).values}
    for name, default in _PARAMS:
        value = posterior[name].mean(("chain", "draw")).values if name in posterior else default
        out[name] = np.broadcast_to(np.asarray(value, dtype=float), (n_items,)).copy()
    return out


def _probabilities(est: dict) -> np.ndarray:
    a, d = est["discrimination"][:, None], est["intercept"][:, None]
    c, s = est["guessing"][:, None], est["slip"][:, None]
    p = c + (1 - c - s) * expit(a * est["theta"][None, :] + d)
    return np.clip(p, _TINY, 1 - _TINY)


def item_fit(y: np.ndarray, est: dict) -> pd.DataFrame:
    """``infit`` and ``outfit`` mean squares and ``n_observed`` of every item (rows in ``y``'s order)."""
    obs = y != MISSING
    p = _probabilities(est)
    var = p * (1 - p)
    sq = np.where(obs, ((y == 1) - p) ** 2, 0.0)
    n = obs.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        outfit = (sq / var).sum(axis=1) / n
        infit = sq.sum(axis=1) / np.where(obs, var, 0.0).sum(axis=1)
    return pd.DataFrame({"infit": infit, "outfit": outfit, "n_observed": n})


def rank_disagreement(theta: np.ndarray, accuracy: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Spearman correlation of ability and accuracy, and both ranks (1 = highest; ties share the
    lowest rank number)."""
    ok = np.isfinite(theta) & np.isfinite(accuracy)
    rho = float(spearmanr(theta[ok], accuracy[ok]).statistic) if ok.sum() > 2 else float("nan")
    return rho, rankdata(-theta, method="min").astype(int), rankdata(-accuracy, method="min").astype(int)


def fit_checks(responses: xr.Dataset, est: dict, *, prior_mean: float = 0.0, prior_sd: float = 1.0,
               top: int = 10, evaluated_at: str = "posterior means") -> dict:
    """Person fit, item fit and ability-versus-accuracy order at the point estimates ``est``
    (:func:`point_estimates`, in the responses' item and model order).

    Returns a JSON-ready dict: ``person_fit``, ``item_fit`` and ``ability_vs_accuracy``, each
    with its rule, counts and the ``top`` most extreme models or items (records); ``evaluated_at``
    says which estimates were used. ``prior_mean``, ``prior_sd``: the ability prior (for l_z*)."""
    da = check_responses(responses)
    y = np.asarray(da.values)
    models, items = da["model"].values.astype(str), da["item"].values.astype(str)
    obs = y != MISSING
    accuracy = np.where(obs.any(0), (y == 1).sum(0) / np.maximum(obs.sum(0), 1), np.nan)
    stats = lz_statistics(y, est["theta"], est["discrimination"], est["intercept"], est["guessing"], est["slip"],
                          prior_mean=prior_mean, prior_sd=prior_sd)
    rho, ability_rank, accuracy_rank = rank_disagreement(est["theta"], accuracy)
    people = pd.DataFrame({"model_id": models, "theta": est["theta"], "accuracy": accuracy, "lz": stats.lz,
                           "ability_rank": ability_rank, "accuracy_rank": accuracy_rank})
    finite = np.isfinite(stats.lz)
    cohort = calibrate_cutoff(stats.lz, fpr=_FPR) if finite.sum() >= 1 / _FPR else float("nan")
    low = people[people["lz"] <= LZ_CUTOFF].sort_values("lz", kind="stable")
    spread = misfit_spread(stats.lz, cohort, fpr=_FPR)
    person = {
        "statistic": "lz", "evaluated_at": evaluated_at, "cutoff": LZ_CUTOFF,
        "rule": f"l_z <= {LZ_CUTOFF:.2f}, the standard normal 1% point",
        "n_models": int(finite.sum()), "n_flagged": int(len(low)), "share_flagged": float(len(low) / max(finite.sum(), 1)),
        "cohort_10pct_point": cohort, "rule_widespread": spread.pop("rule"), **spread,
        "median_lz": float(np.median(stats.lz[finite])) if finite.any() else float("nan"),
        "lowest": low.head(top).to_dict("records"),
    }
    fits = item_fit(y, est).assign(item_id=items, proportion_correct=(y == 1).sum(1) / np.maximum(obs.sum(1), 1))
    lo, hi = ITEM_MS_RANGE
    outside = (fits["infit"] < lo) | (fits["infit"] > hi) | (fits["outfit"] < lo) | (fits["outfit"] > hi)
    worst = np.maximum(np.abs(np.log(fits["infit"])), np.abs(np.log(fits["outfit"])))
    named = fits[outside].assign(_worst=worst[outside]).sort_values("_worst", ascending=False, kind="stable")
    item = {
        "statistics": "infit and outfit mean squares", "evaluated_at": evaluated_at, "range": list(ITEM_MS_RANGE),
        "rule": f"infit or outfit mean square outside [{lo:g}, {hi:g}]",
        "n_items": int(len(fits)), "n_flagged": int(outside.sum()), "share_flagged": float(outside.mean()),
        "n_underfit": int(((fits["infit"] > hi) | (fits["outfit"] > hi)).sum()),
        "n_overfit": int(((fits["infit"] < lo) | (fits["outfit"] < lo)).sum()),
        "median_infit": float(fits["infit"].median()), "median_outfit": float(fits["outfit"].median()),
        "worst": named[["item_id", "infit", "outfit", "proportion_correct", "n_observed"]].head(top).to_dict("records"),
    }
    gap = np.abs(ability_rank - accuracy_rank)
    best = people[accuracy == np.nanmax(accuracy)] if np.isfinite(accuracy).any() else people.iloc[:0]
    order = people.assign(rank_difference=ability_rank - accuracy_rank, _gap=gap) \
        .sort_values(["_gap", "accuracy_rank"], ascending=[False, True], kind="stable")
    ranks = {
        "spearman": rho, "n_models": int(len(people)), "evaluated_at": evaluated_at,
        "median_abs_rank_difference": float(np.median(gap)), "max_abs_rank_difference": int(gap.max()),
        "largest_rank_differences": order.drop(columns="_gap").head(top).to_dict("records"),
        "most_accurate": best.to_dict("records"),
    }
    return {"person_fit": person, "item_fit": item, "ability_vs_accuracy": ranks}
