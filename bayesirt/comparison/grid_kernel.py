"""The per-point terms of the shared ability grid (:mod:`bayesirt.comparison.grid`), compiled.

For grid points ``theta`` (G,) and items with slope ``a``, intercept ``d``, guessing ``c`` and slip
``s`` (I,), the grid needs ``log q`` and, with asymptotes, ``log p - log q`` at every (point, item),
``p`` the 1PL-4PL response function at ``eta = a theta + d``. These are the values of
:func:`bayesirt.models.response.log_probabilities` at ``np.outer(theta, a) + d`` (the same formulas,
tail forms and caps, cell by cell; ``tests/test_grid.py`` checks them equal to rounding), in one pass
over the cells with one exponential per cell instead of NumPy's dozen temporaries of G x I floats: the
NumPy form was 60% of the CPU time of a 3PL marginal likelihood at 755 x 1,351.

A complete matrix under the 1PL/2PL needs only each point's sum of ``log q`` over the items
(:func:`grid_log_q_sums`): ``-sum_i softplus(eta)`` as the sum of ``max(eta, 0)`` and the log of the
product of the factors ``1 + exp(-|eta|)``, one log per point, with the vectorized exp and the binary
renormalization of the NUTS kernel (:mod:`bayesirt.models.kernels`); at 400 points x 2,854 items 0.8 ms
against 19 ms for :func:`grid_log_terms` and the sum.
"""

from __future__ import annotations

import numba
import numpy as np

from bayesirt.models.kernels import exp_clipped, renormalize
from bayesirt.models.response import TINY

__all__ = ["grid_log_terms", "grid_log_q_sums"]

#: Items between renormalizations of the products in :func:`grid_log_q_sums` (each factor is at most 2).
_RENORM_ITEMS = 512
_LN2 = np.log(2.0)


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _log_expit(x: float, e: float) -> float:
    """log sigmoid(x) given ``e = exp(-|x|)`` (SciPy's ``log_expit``: x - log1p(exp(x)) below 0)."""
    return min(x, 0.0) - np.log1p(e)


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _logaddexp(u: float, v: float) -> float:
    top = max(u, v)
    if top == -np.inf:
        return -np.inf
    return top + np.log1p(np.exp(-abs(u - v)))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def grid_log_terms(theta, a, d, c, s, asymptotes):
    """``(log_ratio, log_q)``: (G, I) arrays of ``log p - log q`` (an empty (0, 0) array when not
    ``asymptotes``: then it is ``eta`` itself) and ``log q``, for float64 ``theta`` (G,) and ``a``, ``d``,
    ``c``, ``s`` (I,); ``asymptotes`` False when every ``c`` and ``s`` is zero (``c``, ``s`` then unread)."""
    n_points, n_items = theta.shape[0], a.shape[0]
    log_q = np.empty((n_points, n_items))
    log_ratio = np.empty((n_points, n_items) if asymptotes else (0, 0))
    for g in range(n_points):
        for i in range(n_items):
            x = a[i] * theta[g] + d[i]
            e = np.exp(-abs(x))
            if not asymptotes:  # log(1 - sigmoid(x)) = log sigmoid(x) - x
                log_q[g, i] = _log_expit(x, e) - x
                continue
            r = 1.0 / (1.0 + e)
            sg, sm = (r, e * r) if x >= 0 else (e * r, r)
            ci, si = c[i], s[i]
            p = max(ci + (1.0 - ci - si) * sg, TINY)
            q = max((1.0 - ci) * sm + si * sg, TINY)
            lp, lq = np.log(p), np.log(q)
            if p <= TINY or q <= TINY:  # exact forms in the tails, as log_probabilities
                lk = np.log(1.0 - ci - si)
                lp = _logaddexp(np.log(ci), lk + _log_expit(x, e))
                lq = _logaddexp(np.log(si), lk + _log_expit(-x, e))
            lp, lq = min(lp, 0.0), min(lq, 0.0)
            log_ratio[g, i] = lp - lq
            log_q[g, i] = lq
    return log_ratio, log_q


@numba.njit(cache=True, nogil=True, error_model="numpy")
def grid_log_q_sums(theta, a, d):
    """``sum_i log q`` at every point of ``theta`` (G,) for the 1PL/2PL, ``q = 1 - sigmoid(a_i theta + d_i)``:
    ``-(sum_i max(eta, 0) + log prod_i (1 + exp(-|eta|)))`` (the module's notes). The loop over points is
    the inner one, so it vectorizes without reordering a sum."""
    n_points = theta.shape[0]
    linear, product = np.zeros(n_points), np.ones(n_points)
    exponent = np.zeros(n_points, dtype=np.int64)
    for i in range(a.shape[0]):
        a_i, d_i = a[i], d[i]
        for g in range(n_points):
            x = a_i * theta[g] + d_i
            linear[g] += max(x, 0.0)
            product[g] *= 1.0 + exp_clipped(-abs(x))
        if i % _RENORM_ITEMS == _RENORM_ITEMS - 1:
            renormalize(product, exponent)
    out = np.empty(n_points)
    for g in range(n_points):
        out[g] = -(linear[g] + (np.log(product[g]) + exponent[g] * _LN2))
    return out
