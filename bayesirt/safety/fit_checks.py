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
- **Item fit**: Yen's (1981) Q1: the models are split into ``G`` groups of equal size by point
  ability (10, fewer below 200 models: at least 20 per group), and for each item
  ``Q1 = sum_g n_g (O_g - E_g)^2 / (E_g (1 - E_g))`` with ``O_g`` the observed and ``E_g`` the
  mean model-implied proportion correct of the group's models that answered it; referred to a
  chi-square with ``G - k`` degrees of freedom (``k`` the item's free parameters). An item is
  named when its p-value is below ``0.05 / n_items`` (Bonferroni over the items). The p-values
  are approximate (abilities are estimated from the same responses; conservative on long tests,
  somewhat liberal on short ones). Q1 sees a curve of the wrong shape or direction (e.g. an item
  answered against ability, which a positive slope cannot follow). With thousands of models it
  also flags small departures, so its size is given as well: ``rmsd``, the root mean square of
  ``O_g - E_g`` weighted by ``n_g`` (a difference of proportions), and items are counted as
  **large** misfit when flagged with ``rmsd > 0.1`` (large-scale assessment uses 0.1-0.15). Also reported: outfit (mean
  of ``z^2``, ``z = (x - p) / sqrt(p q)``) and infit (``sum (x - p)^2 / sum p q``) mean squares
  (Wright and Masters 1982), 1 in expectation, and how many lie outside [0.5, 1.5] (Linacre's
  range "productive for measurement"): above, noisier than the curve; below, more deterministic.
- **Ability versus accuracy**: Spearman correlation of point ability and accuracy (share correct
  of observed items), and the models whose two ranks (1 = highest, ties share the lowest rank)
  differ most.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import expit
from scipy.stats import chi2, norm, rankdata, spearmanr

from bayesirt.data.responses import MISSING
from bayesirt.safety.personfit import calibrate_cutoff, check_responses, lz_statistics, misfit_spread

__all__ = ["LZ_CUTOFF", "ITEM_MS_RANGE", "ITEM_ALPHA", "ITEM_RMSD_LARGE", "point_estimates", "item_fit", "rank_disagreement",
           "fit_checks"]

#: Person fit: a model is named when l_z lies below this (the standard normal 1% point).
LZ_CUTOFF = float(norm.ppf(0.01))
#: Item fit: an item is named when its infit or outfit mean square lies outside this range.
ITEM_MS_RANGE = (0.5, 1.5)
#: Item fit: family-wise level of Q1 (Bonferroni over the items).
ITEM_ALPHA = 0.05
#: Item fit: a flagged item's misfit is called large above this RMSD of observed minus implied proportions.
ITEM_RMSD_LARGE = 0.1
_GROUPS, _PER_GROUP = 10, 20
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


def item_fit(y: np.ndarray, est: dict, *, n_parameters: int = 2) -> pd.DataFrame:
    """Yen's Q1 (``q1``, ``q1_df``, ``q1_p``), its ``rmsd``, ``infit`` and ``outfit`` mean squares and
    ``n_observed`` of every item (rows in ``y``'s order); ``n_parameters``: free parameters per
    item (the degrees of freedom are the groups minus it, at least 1)."""
    obs = y != MISSING
    p = _probabilities(est)
    var = p * (1 - p)
    resid = np.where(obs, (y == 1) - p, 0.0)
    n = obs.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        outfit = (resid**2 / var).sum(axis=1) / n
        infit = (resid**2).sum(axis=1) / np.where(obs, var, 0.0).sum(axis=1)
    n_models = y.shape[1]
    groups = max(2, min(_GROUPS, n_models // _PER_GROUP))
    member = np.zeros((n_models, groups))
    for g, idx in enumerate(np.array_split(np.argsort(est["theta"], kind="stable"), groups)):
        member[idx, g] = 1.0
    n_g = obs.astype(float) @ member
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = (obs & (y == 1)).astype(float) @ member / n_g
        expected = np.where(obs, p, 0.0) @ member / n_g
        terms = n_g * (observed - expected) ** 2 / (expected * (1 - expected))
        rmsd = np.sqrt(np.where(n_g > 0, n_g * (observed - expected) ** 2, 0.0).sum(axis=1) / n_g.sum(axis=1))
    q1 = np.where(n_g > 0, terms, 0.0).sum(axis=1)
    df = np.maximum((n_g > 0).sum(axis=1) - n_parameters, 1)
    return pd.DataFrame({"q1": q1, "q1_df": df, "q1_p": chi2.sf(q1, df), "rmsd": rmsd, "infit": infit,
                         "outfit": outfit, "n_observed": n})


def rank_disagreement(theta: np.ndarray, accuracy: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Spearman correlation of ability and accuracy, and both ranks (1 = highest; ties share the
    lowest rank number)."""
    ok = np.isfinite(theta) & np.isfinite(accuracy)
    rho = float(spearmanr(theta[ok], accuracy[ok]).statistic) if ok.sum() > 2 else float("nan")
    return rho, rankdata(-theta, method="min").astype(int), rankdata(-accuracy, method="min").astype(int)


def fit_checks(responses: xr.Dataset, est: dict, *, n_parameters: int = 2, prior_mean: float = 0.0,
               prior_sd: float = 1.0, top: int = 10, evaluated_at: str = "posterior means") -> dict:
    """Person fit, item fit and ability-versus-accuracy order at the point estimates ``est``
    (:func:`point_estimates`, in the responses' item and model order).

    Returns a JSON-ready dict: ``person_fit``, ``item_fit`` and ``ability_vs_accuracy``, each
    with its rule, counts and the ``top`` most extreme models or items (records); ``evaluated_at``
    says which estimates were used. ``n_parameters``: free parameters per item (Q1's degrees of
    freedom); ``prior_mean``, ``prior_sd``: the ability prior (for l_z*)."""
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
    fits = item_fit(y, est, n_parameters=n_parameters).assign(
        item_id=items, proportion_correct=(y == 1).sum(1) / np.maximum(obs.sum(1), 1),
        discrimination=est["discrimination"])
    lo, hi = ITEM_MS_RANGE
    level = ITEM_ALPHA / len(fits)
    named = fits[fits["q1_p"] < level].sort_values(["rmsd", "q1"], ascending=False, kind="stable")
    item = {
        "statistic": "Q1 (Yen 1981): chi-square of observed vs model-implied proportion correct in ability groups",
        "evaluated_at": evaluated_at, "groups": int(fits["q1_df"].max() + n_parameters) if len(fits) else 0,
        "rule": f"Q1 p-value < {ITEM_ALPHA:g} / {len(fits)} items (Bonferroni) = {level:.2g}",
        "n_items": int(len(fits)), "n_flagged": int(len(named)), "share_flagged": float(len(named) / max(len(fits), 1)),
        "rmsd_large": ITEM_RMSD_LARGE, "n_large": int((named["rmsd"] > ITEM_RMSD_LARGE).sum()),
        "median_rmsd": float(fits["rmsd"].median()),
        "mean_square_range": list(ITEM_MS_RANGE),
        "n_mean_square_above": int(((fits["infit"] > hi) | (fits["outfit"] > hi)).sum()),
        "n_mean_square_below": int(((fits["infit"] < lo) | (fits["outfit"] < lo)).sum()),
        "median_infit": float(fits["infit"].median()), "median_outfit": float(fits["outfit"].median()),
        "worst": named[["item_id", "rmsd", "q1", "q1_df", "q1_p", "infit", "outfit", "discrimination", "proportion_correct",
                        "n_observed"]].head(top).to_dict("records"),
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
