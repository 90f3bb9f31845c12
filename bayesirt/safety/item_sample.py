"""A short test drawn as a stratified random sample of the bank's items, and the model-assisted (design-based)
estimate of a model's full-benchmark accuracy from it (issue 46 item 3: scores that stay calibrated when the
scored models are stronger than the bank's cohort).

The full accuracy ``A = (1/N) sum_j y_j`` is a mean over a finite population of ``N`` items, the model's
answers being fixed; the only randomness the estimate needs is the draw of the items. :func:`item_strata`
sorts the items by their proportion correct in the calibration cohort and cuts them into ``K`` strata of
(nearly) equal size; :func:`stratified_sample` draws one item at random from each (``select --selection-rule sample``).

:func:`design_estimate` is the survey statistician's model-assisted estimator (Sarndal, Swensson & Wretman
1992, ch. 6-7): the bank's item curves serve only as the auxiliary variable. The ability ``theta_hat`` solves
``sum_{j in S} P_j(theta) = sum_{j in S} y_j`` (the test characteristic curve of the items run, at the
bank's point estimates), and

    A_hat = (1/N) (sum_{j in S} y_j + sum_{j not in S} P_j(theta_hat)),

which equals the difference (GREG) estimator ``mean_j P_j(theta_hat) + (N - K)/(N K) sum_{j in S} e_j`` since
the residuals ``e_j = y_j - P_j(theta_hat)`` sum to zero over ``S``. It is approximately design-unbiased
whatever the curves' bias for this model (a calibration estimator: at the population level the solution
reproduces ``A`` exactly), where an ability estimate that weights items by their slopes (the EAP of
``score``'s model-based interval) carries the curves' bias for models unlike the cohort. Its variance is
``(1 - K/N) S_e^2 / K`` (the stratification is ignored: conservative), ``S_e^2`` estimated by the larger of
the residual variance over ``S`` and the Bernoulli variance the curves give, ``mean_j P_j (1 - P_j)`` over
all items at the ability of the Agresti-Coull adjusted proportion ``(c + z^2/2) / (K + z^2)`` (so a model at
the test's ceiling, whose residuals are all 0, still gets the width its unseen items' chance of a miss
implies). The interval ``A_hat -+ z se`` is cut to the accuracies the observed answers allow.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import stats

from bayesirt.models.response import probability

__all__ = ["item_strata", "stratified_sample", "is_stratified_sample", "design_estimate", "DesignEstimate"]

_GRID = np.linspace(-12.0, 12.0, 4801)  # ability grid, in the bank's standardized units, of the true-score solve


class DesignEstimate(NamedTuple):
    """Per-model results of :func:`design_estimate`, each of shape ``(n_models,)``."""

    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    se: np.ndarray
    theta: np.ndarray


def _easiness(bank) -> np.ndarray:
    """Each item's proportion correct in the calibration cohort (its answered cells), or without calibration
    responses its expected proportion correct at the cohort's abilities under the bank's mean parameters."""
    if bank.calibration is not None:
        y = bank.calibration["responses"].transpose("item", "model").values
        return (y == 1).sum(1) / np.maximum((y >= 0).sum(1), 1)
    p = bank.point()
    return probability(p.discrimination[:, None] * bank.abilities[None] + p.intercept[:, None], p.guessing[:, None],
                       p.slip[:, None]).mean(axis=1)


def item_strata(bank, k: int) -> np.ndarray:
    """The stratum (0 = hardest .. k - 1 = easiest) of each of the bank's items for a ``k``-item sample:
    items sorted by :func:`_easiness` (ties to the lower index) and cut into ``k`` strata of sizes differing
    by at most one."""
    ranked = np.lexsort((np.arange(bank.n_items), _easiness(bank)))
    stratum = np.empty(bank.n_items, dtype=np.int64)
    for h, part in enumerate(np.array_split(ranked, int(k))):
        stratum[part] = h
    return stratum


def stratified_sample(bank, k: int, *, seed: int = 0) -> np.ndarray:
    """``k`` item indices, one drawn uniformly at random (``seed``) from each stratum of :func:`item_strata`,
    hardest stratum first."""
    stratum = item_strata(bank, k)
    rng = np.random.default_rng(seed)
    return np.array([rng.choice(np.flatnonzero(stratum == h)) for h in range(int(k))], dtype=np.int64)


def is_stratified_sample(bank, mask) -> bool:
    """True when the items of ``mask`` (bank-aligned booleans, at least two) are one per stratum of
    :func:`item_strata` for their number: a test ``select --selection-rule sample`` can have drawn."""
    mask = np.asarray(mask, bool)
    k = int(mask.sum())
    if k < 2 or k >= bank.n_items:
        return False
    return bool(np.array_equal(np.sort(item_strata(bank, k)[mask]), np.arange(k)))


def _solve(curve: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Grid index where the increasing ``curve`` (n_grid, models) first reaches ``target`` (models,)."""
    return np.minimum((curve < target[None, :]).sum(axis=0), curve.shape[0] - 1)


def design_estimate(bank, responses, *, level: float = 0.9) -> DesignEstimate:
    """The model-assisted estimate of each model's full accuracy and its design-based interval (module
    docstring). ``responses``: bank-aligned ``(n_items, n_models)`` with -1 for the items not run; models that
    ran fewer than two items, or every item, get NaN (no design variance; every item: the accuracy is known)."""
    y = np.asarray(responses, dtype=np.int8)
    n_items, n_models = y.shape
    point = bank.point()
    grid = bank.prior_mean + bank.prior_sd * _GRID
    p = probability(point.discrimination[:, None] * grid[None] + point.intercept[:, None], point.guessing[:, None],
                    point.slip[:, None])  # (items, grid)
    z = float(stats.norm.ppf(0.5 + level / 2))
    out = {k: np.full(n_models, np.nan) for k in DesignEstimate._fields}
    obs = y >= 0
    masks, group = np.unique(obs.T, axis=0, return_inverse=True)
    for g, mask in enumerate(masks):
        members = np.flatnonzero(group.reshape(-1) == g)
        k = int(mask.sum())
        if k < 2 or k == n_items:
            continue
        correct = (y[np.ix_(mask, members)] == 1).sum(axis=0).astype(float)
        curve = p[mask].sum(axis=0)  # test characteristic curve of the items run
        at = _solve(curve[:, None], correct)
        fitted = p[:, at]  # (items, members)
        estimate = (correct + fitted[~mask].sum(axis=0)) / n_items
        resid = (y[np.ix_(mask, members)] == 1) - fitted[mask]
        adjusted = _solve(curve[:, None], k * (correct + z**2 / 2) / (k + z**2))
        bernoulli = (p[:, adjusted] * (1 - p[:, adjusted])).mean(axis=0)
        se = np.sqrt((1 - k / n_items) / k * np.maximum(resid.var(axis=0, ddof=1), bernoulli))
        out["estimate"][members] = estimate
        out["se"][members] = se
        out["theta"][members] = grid[at]
        out["lower"][members] = np.maximum(estimate - z * se, correct / n_items)
        out["upper"][members] = np.minimum(estimate + z * se, (correct + n_items - k) / n_items)
    return DesignEstimate(**out)
