"""Marginal likelihood of response patterns for one ability dimension, on shared uniform grids.

The fast path of leave-one-model-out cross-validation at leaderboard size (hundreds of models x
thousands of items x a thousand posterior draws). For a draw phi of the item parameters and model m,

    log p(y_m | phi) = log  integral exp(l_m(theta)) N(theta; mu, sigma^2) d theta,
    l_m(theta) = sum_i y_mi [log p_i(theta) - log q_i(theta)] + o_mi log q_i(theta)

(y: correct and observed, o: observed, q = 1 - p). On grid points theta_1..theta_G the (M, G)
array of l is ``Y (log p - log q)' + O (log q)'``: the logistic functions are evaluated on G x I
values, once for all models, and the rest is a matrix product (for the 1PL/2PL, log p - log q is
the linear predictor, so ``Y (a theta' + d)`` needs two matrix-vector products). Adaptive
Gauss-Hermite (:func:`bayesirt.comparison.marginal.pattern_log_marginal`) needs the logistic
functions at M x Q x I model-specific nodes, which was 97% of the time of a comparison.

Per draw:

1. A coarse pass (81 points over +/- 10 population SDs) locates each model's peak and its width
   (the parabola through the log integrand at the maximum and its neighbours).
2. One fine grid spans every peak +/- ``GRID_REACH`` widths and every coarse point within
   ``NEGLIGIBLE`` nats of a peak (plus one), with spacing ``GRID_SPACING`` of the narrowest width (at most ``GRID_MAX_POINTS`` points); models sorted by peak are cut into bands,
   each multiplied only against the columns it needs.
3. The integral is the trapezoid sum on the fine grid (its ends are negligible), which is
   exponentially accurate for a smooth peak: for a Gaussian of SD w at spacing h the relative
   error is about 2 exp(-2 pi^2 w^2 / h^2).
4. A model is accepted only when, on the fine grid, its maximum is interior, both ends lie
   ``NEGLIGIBLE`` nats below it, the spacing is at most one width (error below 5e-9), and no
   coarse point beyond its band comes within ``NEGLIGIBLE`` nats of its peak (a second mode, e.g.
   from a 3PL floor). The others are returned as unresolved, for adaptive Gauss-Hermite.

``tests/test_grid.py`` checks it against brute-force integration and against adaptive
Gauss-Hermite.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.special import logsumexp

from bayesirt.comparison.marginal import ItemDraws
from bayesirt.comparison.grid_kernel import grid_log_q_sums, grid_log_terms

__all__ = ["Patterns", "grid_log_marginal", "GRID_SPACING", "GRID_REACH", "GRID_MAX_POINTS", "NEGLIGIBLE"]

#: Fine-grid spacing, as a fraction of the narrowest integrand width (SD of its parabola).
GRID_SPACING = 0.75
#: Widths either side of every model's peak covered by the fine grid.
GRID_REACH = 10.0
#: Most fine-grid points in one draw (memory: points x items floats, twice).
GRID_MAX_POINTS = 3000
#: Nats below a model's peak that count as negligible mass (exp(-30) ~ 1e-13).
NEGLIGIBLE = 30.0
_COARSE = np.linspace(-10.0, 10.0, 81)  # first pass, in population SDs around the population mean
_BAND_SLACK = 64  # grid points a band may span beyond what its widest model needs


@dataclass(frozen=True)
class Patterns:
    """Response patterns prepared once for many draws.

    correct : (M, I) float, 1 where observed and correct; observed : (M, I) float, or None when
    every response is observed.
    """

    correct: np.ndarray
    observed: np.ndarray | None

    @classmethod
    def of(cls, y: np.ndarray, observed: np.ndarray) -> Patterns:
        """From 0/1 responses (any value where unobserved) and the observed mask."""
        correct = np.ascontiguousarray(np.where(observed, y, 0.0), dtype=float)
        return cls(correct, None if observed.all() else np.ascontiguousarray(observed, dtype=float))

    def rows(self, index: np.ndarray) -> Patterns:
        return Patterns(self.correct[index], None if self.observed is None else self.observed[index])


@dataclass(frozen=True)
class _Grid:
    """Per-point terms of one draw on a grid: theta (G,), log p - log q (G, I) or None for the
    1PL/2PL, log q (G, I) or None for a complete matrix under the 1PL/2PL, its sums over items (G,) or None
    for a matrix with missing cells, and the log population density (G,)."""

    theta: np.ndarray
    log_ratio: np.ndarray | None
    log_q: np.ndarray | None
    log_q_sum: np.ndarray | None
    log_prior: np.ndarray

    @classmethod
    def of(cls, theta: np.ndarray, draw: ItemDraws, complete: bool) -> _Grid:
        """The terms at ``theta`` for patterns without (``complete``) or with missing cells."""
        n_items = draw.loading.shape[0]
        c = np.broadcast_to(np.asarray(draw.guessing, dtype=float), n_items)
        s = np.broadcast_to(np.asarray(draw.slip, dtype=float), n_items)
        logistic = bool(np.all(c == 0) and np.all(s == 0))
        theta = np.ascontiguousarray(theta, dtype=float)
        a, d = (np.ascontiguousarray(v, dtype=float) for v in (draw.loading[:, 0], draw.intercept))
        log_prior = stats.norm.logpdf(theta, loc=float(draw.mean[0]), scale=float(np.sqrt(draw.covariance[0, 0])))
        if logistic and complete:  # only the sums of log q over items (comparison.grid_kernel)
            return cls(theta, None, None, grid_log_q_sums(theta, a, d), log_prior)
        # models.response.log_probabilities at outer(theta, a) + d, compiled (comparison.grid_kernel)
        log_ratio, log_q = grid_log_terms(theta, a, d, np.ascontiguousarray(c), np.ascontiguousarray(s), not logistic)
        return cls(theta, None if logistic else log_ratio, log_q, log_q.sum(axis=1) if complete else None, log_prior)

    def log_integrand(self, pat: Patterns, draw: ItemDraws, cols: slice = slice(None)) -> np.ndarray:
        """log p(y_m | theta_g, phi) + log N(theta_g) for every model of ``pat`` and point of ``cols``."""
        theta = self.theta[cols]
        if self.log_ratio is None:  # log p - log q = a theta + d
            ll = np.outer(pat.correct @ draw.loading[:, 0], theta) + (pat.correct @ draw.intercept)[:, None]
        else:
            ll = pat.correct @ self.log_ratio[cols].T
        ll += self.log_q_sum[cols][None, :] if pat.observed is None else pat.observed @ self.log_q[cols].T
        return ll + self.log_prior[cols][None, :]


def _peaks(log_f: np.ndarray, step: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: index of the maximum, offset of the vertex of the parabola through it and its
    neighbours, and that parabola's SD (NaN where the maximum is at an end or it opens upwards)."""
    j = np.argmax(log_f, axis=1)
    rows = np.arange(len(j))
    inner = np.clip(j, 1, log_f.shape[1] - 2)
    f0, f1, f2 = (log_f[rows, inner + k] for k in (-1, 0, 1))
    second = f0 - 2 * f1 + f2
    ok = (j == inner) & (second < 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return j, np.where(ok, step * (f0 - f2) / (2 * second), np.nan), np.where(ok, step / np.sqrt(-second), np.nan)


def _bands(first: np.ndarray, last: np.ndarray, order: np.ndarray) -> list[tuple[np.ndarray, slice]]:
    """Cut models (sorted by peak) into bands whose columns span at most the widest model's need
    plus ``_BAND_SLACK`` points; each band is (model indices, column slice)."""
    limit = int((last - first).max()) + _BAND_SLACK
    bands, start, lo, hi = [], 0, first[order[0]], last[order[0]]
    for k in range(1, len(order) + 1):
        if k < len(order):
            m = order[k]
            new_lo, new_hi = min(lo, first[m]), max(hi, last[m])
            if new_hi - new_lo <= limit:
                lo, hi = new_lo, new_hi
                continue
        bands.append((order[start:k], slice(int(lo), int(hi) + 1)))
        if k < len(order):
            start, lo, hi = k, first[order[k]], last[order[k]]
    return bands


def grid_log_marginal(pat: Patterns, draw: ItemDraws) -> tuple[np.ndarray, np.ndarray]:
    """log p(y_m | phi) for every model of ``pat``, one ability dimension (see the module text).

    Returns
    -------
    values : (M,) array, NaN where unresolved
    unresolved : (M,) bool, True for the models to integrate by adaptive Gauss-Hermite
    """
    mu, sd_pop = float(draw.mean[0]), float(np.sqrt(draw.covariance[0, 0]))
    coarse = mu + sd_pop * _COARSE
    complete = pat.observed is None
    log_coarse = _Grid.of(coarse, draw, complete).log_integrand(pat, draw)
    j, vertex, width = _peaks(log_coarse, coarse[1] - coarse[0])
    mode = coarse[j] + vertex
    # support: the coarse points within NEGLIGIBLE nats of the peak, one point more either side
    # (wider than the peak's reach where a 3PL floor makes a long shoulder)
    above = log_coarse >= log_coarse.max(axis=1, keepdims=True) - NEGLIGIBLE
    first_c, last_c = np.argmax(above, axis=1) - 1, len(coarse) - np.argmax(above[:, ::-1], axis=1)
    good = np.isfinite(width) & (first_c >= 0) & (last_c < len(coarse))
    values = np.full(len(width), np.nan)
    if not good.any():
        return values, ~good
    rows = np.flatnonzero(good)
    low = np.minimum(coarse[np.clip(first_c, 0, None)], mode - GRID_REACH * width)
    high = np.maximum(coarse[np.clip(last_c, None, len(coarse) - 1)], mode + GRID_REACH * width)
    lo, hi = float(np.min(low[rows])), float(np.max(high[rows]))
    step = max(GRID_SPACING * float(np.min(width[rows])), (hi - lo) / (GRID_MAX_POINTS - 1))
    n_points = int(np.ceil((hi - lo) / step)) + 1
    fine = _Grid.of(lo + step * np.arange(n_points), draw, complete)
    with np.errstate(invalid="ignore"):
        first = np.clip(np.floor((low - lo) / step), 0, n_points - 1).astype(int, copy=False)
        last = np.clip(np.ceil((high - lo) / step), 0, n_points - 1).astype(int, copy=False)
    for band, cols in _bands(first, last, rows[np.argsort(mode[rows])]):
        log_f = fine.log_integrand(pat.rows(band), draw, cols)
        peak, _, fine_width = _peaks(log_f, step)
        top = log_f[np.arange(len(band)), peak] - NEGLIGIBLE
        outside = (coarse < fine.theta[cols.start]) | (coarse > fine.theta[cols.stop - 1])
        far = log_coarse[band][:, outside].max(axis=1, initial=-np.inf)  # a second mode there would be missed
        ok = (fine_width >= step) & (log_f[:, 0] < top) & (log_f[:, -1] < top) & (far < top)
        values[band[ok]] = logsumexp(log_f[ok], axis=1) + np.log(step)
    return values, ~np.isfinite(values)
