"""Fit checks of a fitted 1PL-4PL spec at point estimates: person fit (l_z), item fit (RMSD of
the item characteristic curve, infit and outfit mean squares) and how far the ability order
departs from the accuracy order.

Everything is evaluated at one set of point estimates (posterior means of a sampled fit, or the
MAP estimates of ``fit --method map``), so memory is a few (item x model) and (model x node)
arrays whatever the number of draws.

- **Person fit**: l_z (Drasgow, Levine and Williams 1985; :func:`bayesirt.safety.personfit.lz_statistics`)
  on each model's observed items at its point ability. A model is named when ``l_z`` is below the
  standard normal 1% point (-2.33): under the model fewer than about 1% would be (l_z with an
  estimated ability has variance below 1). The cohort's 10% point (the cut-off that
  ``bayesirt personfit`` calibrates) and whether it shows widespread misfit
  (:func:`bayesirt.safety.personfit.misfit_spread`) are reported too.
- **Item fit**: the RMSD of the item characteristic curve (the item-fit statistic of PISA and
  PIAAC; von Davier 2017): on a Gauss-Hermite grid ``theta_g`` of the ability prior, each model is
  spread over the nodes by its posterior weights ``pi_mg`` given its responses and the item
  parameters; the observed curve is ``O_ig = sum_m pi_mg x_mi / N_ig`` with
  ``N_ig = sum_m pi_mg`` over the models that answered item ``i``, and
  ``RMSD_i = sqrt(sum_g N_ig (O_ig - P_i(theta_g))^2 / sum_g N_ig)``, a difference of
  proportions. Under the model ``O_ig`` estimates ``P_i(theta_g)``, so RMSD is near 0 (its
  noise shrinks with the number of models); no point ability is used, so short tests are not
  biased upwards the way ability-group chi-squares at point abilities (Yen's Q1) are. The
  pseudo-counts include the item's own responses, and at the marginal ML/MAP estimates EM
  matches them to the curve's moments, so RMSD is conservative, the more so on short tests
  (on LSAT6's 5 items it is 0.002). With few models per item the noise alone passes PISA's cut-off,
  which assumes thousands of respondents: on a 3PL the spec fits, 1,000 items x 200 models at 50%
  missing (about 100 models per item), 668 of the 1,000 items had RMSD > 0.1 (median 0.114). So the
  rule uses the noise-corrected RMSD, ``rmsd_bc = sqrt(max(0, RMSD^2 - E0[RMSD^2]))`` (the bias
  correction of Köhler, Robitzsch and Hartig 2020, with the noise in closed form instead of by a
  parametric bootstrap): given the grid weights, ``O_ig`` has variance
  ``sum_m pi_mg^2 v_mi / N_ig^2`` under the model, ``v_mi = pbar_mi (1 - pbar_mi)`` the Bernoulli
  variance of model m's predictive probability ``pbar_mi = sum_g pi_mg P_i(theta_g)``, so
  ``E0[RMSD^2] = sum_g (sum_m pi_mg^2 v_mi / N_ig) / sum_g N_ig``. An item is named when
  ``rmsd_bc > 0.1`` (PISA's operational range is 0.1-0.12): a curve that does not follow how the
  models answer it, e.g. an item answered against ability, which a positive slope cannot follow.
  The correction takes out the noise's mean, not its spread, so the rule is a size threshold, not a
  test at a stated rate: on the 3PL above it still named 42 of the 1,000 items at the fit's posterior
  means (``bayesirt fit`` with defaults), and on ``tests/test_fit_checks.py``'s 300-item case 7% at
  the true parameters.
  Also reported: outfit (mean of ``z^2``, ``z = (x - p) / sqrt(p q)``) and infit
  (``sum (x - p)^2 / sum p q``) mean squares at the point abilities (Wright and Masters 1982), 1
  in expectation, and how many lie outside [0.5, 1.5] (Linacre's range "productive for
  measurement"): above, noisier than the curve; below, more deterministic.
- **Ability versus accuracy**: Spearman correlation of point ability and accuracy (share correct
  of observed items), and the models whose two ranks (1 = highest, ties share the lowest rank)
  differ most.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import log_softmax
from scipy.stats import norm, rankdata, spearmanr

from bayesirt.data.responses import MISSING
from bayesirt.models.response import probability
from bayesirt.safety.personfit import calibrate_cutoff, check_responses, lz_statistics, misfit_spread

__all__ = ["LZ_CUTOFF", "ITEM_MS_RANGE", "ITEM_RMSD", "BLOCK_CELLS", "point_estimates", "item_fit", "rank_disagreement",
           "fit_checks"]

#: Person fit: a model is named when l_z lies below this (the standard normal 1% point).
LZ_CUTOFF = float(norm.ppf(0.01))
#: Item fit: an item is named when its infit or outfit mean square lies outside this range.
ITEM_MS_RANGE = (0.5, 1.5)
#: Item fit: an item is named when the noise-corrected RMSD of its characteristic curve exceeds this.
ITEM_RMSD = 0.1
_NODES = 61
_FPR = 0.1
_PARAMS = (("discrimination", 1.0), ("intercept", 0.0), ("guessing", 0.0), ("slip", 0.0))
_TINY = 1e-12
#: Cells (items x models) of one block of :func:`item_fit`: a few float64 arrays of a block's size.
BLOCK_CELLS = 4_000_000


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


def _curves(est: dict, theta: np.ndarray) -> np.ndarray:
    """P(correct), shape (items, len(theta)), clipped away from 0 and 1."""
    a, d = est["discrimination"][:, None], est["intercept"][:, None]
    c, s = est["guessing"][:, None], est["slip"][:, None]
    return np.clip(probability(a * theta[None, :] + d, c, s), _TINY, 1 - _TINY)


def item_fit(y: np.ndarray, est: dict, *, prior_mean: float = 0.0, prior_sd: float = 1.0) -> pd.DataFrame:
    """``rmsd`` of each item's characteristic curve (posterior pseudo-counts on a 61-node grid of
    ``Normal(prior_mean, prior_sd)``) and ``rmsd_bc``, the same with the sampling noise under the model
    taken out (module notes), ``infit`` and ``outfit`` mean squares at the point abilities and
    ``n_observed``; rows in ``y``'s order (items x models, ``-1`` missing).

    Two passes over blocks of items (:data:`BLOCK_CELLS`): the models' grid log-likelihoods summed
    over the blocks, then each block's statistics, so memory is bounded by a block, not the matrix."""
    x, w = hermegauss(_NODES)
    nodes = prior_mean + prior_sd * x
    step = max(1, BLOCK_CELLS // max(1, y.shape[1]))
    blocks = [slice(lo, lo + step) for lo in range(0, y.shape[0], step)]
    loglik = np.zeros((y.shape[1], _NODES))  # (models, nodes)
    for rows in blocks:
        obs, hit = (y[rows] != MISSING).astype(float), (y[rows] == 1).astype(float)
        p_nodes = _curves(_rows(est, rows), nodes)
        loglik += hit.T @ np.log(p_nodes) + (obs - hit).T @ np.log1p(-p_nodes)
    post = np.exp(log_softmax(loglik + np.log(w / w.sum()), axis=1))
    return pd.concat([_item_block(y[rows], _rows(est, rows), est["theta"], nodes, post) for rows in blocks],
                     ignore_index=True)


def _rows(est: dict, rows: slice) -> dict:
    """The item parameters of ``est`` for the items ``rows``."""
    return {name: est[name][rows] for name, _ in _PARAMS}


def _item_block(y, est, theta, nodes, post) -> pd.DataFrame:
    """:func:`item_fit`'s statistics of the items (rows) of ``y``, given the models' grid posteriors ``post``."""
    obs, hit = (y != MISSING).astype(float), (y == 1).astype(float)
    p_nodes = _curves(est, nodes)
    weight = obs @ post  # N_ig
    predictive = p_nodes @ post.T  # pbar_mi (items, models)
    spread = (obs * predictive * (1 - predictive)) @ post ** 2  # sum_m pi_mg^2 v_mi
    with np.errstate(invalid="ignore", divide="ignore"):
        curve = (hit @ post) / weight
        square = np.where(weight > 0, weight * (curve - p_nodes) ** 2, 0.0).sum(axis=1) / weight.sum(axis=1)
        noise = np.where(weight > 0, spread / weight, 0.0).sum(axis=1) / weight.sum(axis=1)  # E0[RMSD^2]
    rmsd, rmsd_bc = np.sqrt(square), np.sqrt(np.maximum(square - noise, 0.0))
    p = _curves(est, theta)
    resid = np.where(obs > 0, hit - p, 0.0)
    n = obs.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        outfit = (resid**2 / (p * (1 - p))).sum(axis=1) / n
        infit = (resid**2).sum(axis=1) / (obs * p * (1 - p)).sum(axis=1)
    return pd.DataFrame({"rmsd": rmsd, "rmsd_bc": rmsd_bc, "infit": infit, "outfit": outfit,
                         "n_observed": n.astype(int)})


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
    says which estimates were used. ``prior_mean``, ``prior_sd``: the ability prior (the grid of
    the item-fit RMSD, and l_z*)."""
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
    fits = item_fit(y, est, prior_mean=prior_mean, prior_sd=prior_sd).assign(
        item_id=items, proportion_correct=(y == 1).sum(1) / np.maximum(obs.sum(1), 1),
        discrimination=est["discrimination"])
    lo, hi = ITEM_MS_RANGE
    named = fits[fits["rmsd_bc"] > ITEM_RMSD].sort_values("rmsd_bc", ascending=False, kind="stable")
    item = {
        "statistic": "RMSD of the item characteristic curve: observed (posterior pseudo-counts) minus model-implied "
                     "proportion correct over the ability grid, and rmsd_bc with the sampling noise under the model "
                     "taken out", "evaluated_at": evaluated_at,
        "cutoff": ITEM_RMSD, "rule": f"noise-corrected RMSD > {ITEM_RMSD:g}",
        "n_items": int(len(fits)), "n_flagged": int(len(named)), "share_flagged": float(len(named) / max(len(fits), 1)),
        "median_rmsd": float(fits["rmsd"].median()), "max_rmsd": float(fits["rmsd"].max()),
        "median_rmsd_bc": float(fits["rmsd_bc"].median()), "max_rmsd_bc": float(fits["rmsd_bc"].max()),
        "mean_square_range": list(ITEM_MS_RANGE),
        "n_mean_square_above": int(((fits["infit"] > hi) | (fits["outfit"] > hi)).sum()),
        "n_mean_square_below": int(((fits["infit"] < lo) | (fits["outfit"] < lo)).sum()),
        "median_infit": float(fits["infit"].median()), "median_outfit": float(fits["outfit"].median()),
        "worst": named[["item_id", "rmsd_bc", "rmsd", "infit", "outfit", "discrimination", "proportion_correct",
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
