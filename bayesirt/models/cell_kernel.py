"""The 1PL-4PL log-likelihood and its gradient over the observed cells only (long format), in numba.

    P(y_im = 1) = c_i + (1 - c_i - s_i) * sigmoid(eta_im),   eta_im = a_i * t_m + d_i,

summed over the observed cells of a response matrix held by item: ``start`` (n_items + 1 offsets,
int64), the model index of each observed cell (int32) and its response (int8, 0 or 1), the cells of
item i at ``start[i]:start[i + 1]``. One pass gives the value and its gradient with respect to
``a``, ``t``, ``d`` and the asymptotes ``c`` and ``s`` (probabilities; the transforms are the caller's),
at a cost that scales with the observed cells, where the dense kernel of
:mod:`bayesirt.models.kernels` (no asymptotes) visits every cell of the matrix.

The terms are those of :func:`bayesirt.models.logistic.fused_loglik`, the PyMC graph that is the
oracle (through the direct model: ``tests/test_nutpie_direct.py``): with a lower asymptote log P = log(c + scale * sigmoid(eta)),
without one log(scale) - softplus(-eta); with an upper one log(1 - P) = log(s + scale * sigmoid(-eta)),
without one log(scale) - softplus(eta), where scale = 1 - c - s.
"""

from __future__ import annotations

import numba
import numpy as np

from bayesirt.data.responses import observed_cells

__all__ = ["cell_loglik_and_gradient", "cells_by_item"]


def cells_by_item(y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, model, response) of the observed cells of the (item, model) int8 matrix ``y``: int64 offsets
    of each item's cells, the int32 model index and the int8 response of each cell, item by item."""
    item, model, response = observed_cells(y)
    start = np.zeros(y.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(item, minlength=y.shape[0]), out=start[1:])
    return start, model, response


@numba.njit(nogil=True, error_model="numpy")
def _softplus(x):
    """log(1 + exp(x)), without overflow."""
    return max(x, 0.0) + np.log1p(np.exp(-abs(x)))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def cell_loglik_and_gradient(a, t, d, c, s, start, model, y, has_c, has_s):
    """(log-likelihood, d/da, d/dt, d/dd, d/dc, d/ds) over the observed cells (see the module's docstring).
    ``c`` and ``s`` are read only where ``has_c`` / ``has_s`` (their gradients are then zero)."""
    n_items, n_models = a.size, t.size
    ga, gd, gc, gs = np.zeros(n_items), np.zeros(n_items), np.zeros(n_items), np.zeros(n_items)
    gt = np.zeros(n_models)
    total = 0.0
    for i in range(n_items):
        ai, di = a[i], d[i]
        ci = c[i] if has_c else 0.0
        si = s[i] if has_s else 0.0
        scale = 1.0 - ci - si
        log_scale = np.log(scale)
        g_a = g_d = g_c = g_s = 0.0
        for k in range(start[i], start[i + 1]):
            m = model[k]
            eta = ai * t[m] + di
            e = np.exp(-abs(eta))
            p = 1.0 / (1.0 + e) if eta >= 0.0 else e / (1.0 + e)  # sigmoid(eta)
            q = e / (1.0 + e) if eta >= 0.0 else 1.0 / (1.0 + e)  # sigmoid(-eta)
            if y[k] > 0:
                if has_c:
                    prob = ci + scale * p
                    total += np.log(prob)
                    g = scale * p * q / prob
                    g_c += q / prob
                    g_s -= p / prob
                else:
                    total += log_scale - _softplus(-eta)
                    g = q
                    g_s -= 1.0 / scale
            else:
                if has_s:
                    prob = si + scale * q
                    total += np.log(prob)
                    g = -scale * p * q / prob
                    g_s += p / prob
                    g_c -= q / prob
                else:
                    total += log_scale - _softplus(eta)
                    g = -p
                    g_c -= 1.0 / scale
            g_a += g * t[m]
            g_d += g
            gt[m] += g * ai
        ga[i], gd[i] = g_a, g_d
        gc[i], gs[i] = g_c, g_s
    return total, ga, gt, gd, gc, gs
