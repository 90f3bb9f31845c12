"""The compensatory logistic MIRT log-likelihood and its gradient in one pass over the response matrix.

``mirt_loglik_and_gradient(b, z, d, y)`` is the sum over the observed cells of the (item, model) int8
matrix ``y`` (1 correct, 0 wrong, negative missing) of

    y_im * eta_im - softplus(eta_im),   eta_im = sum_k b_ik z_km + d_i,

with its gradient with respect to ``b`` (item, dim), ``z`` (dim, model) and ``d`` (item): the residual
``y - sigmoid(eta)`` of the observed cells, summed against the other factor. Missing cells are masked,
so its cost is that of the dense matrix at any observed share. The direct nutpie model of a MIRT
posterior (:mod:`bayesirt.inference.direct_mirt`) calls it with ``b`` the loadings times the Cholesky
factor of the abilities' correlation and ``z`` the whitened ability deviations; the PyTensor graph of
:func:`bayesirt.models.mirt.build_mirt` stays its oracle (``tests/test_direct_mirt.py``).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["mirt_loglik_and_gradient"]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def mirt_loglik_and_gradient(b, z, d, y):
    """(log-likelihood, d/db (item, dim), d/dz (dim, model), d/dd (item)) over the observed cells of ``y``."""
    n_items, n_models = y.shape
    n_dims = b.shape[1]
    gb, gz, gd = np.zeros((n_items, n_dims)), np.zeros((n_dims, n_models)), np.zeros(n_items)
    eta, residual = np.empty(n_models), np.empty(n_models)
    total = 0.0
    for i in range(n_items):
        yi = y[i]
        for m in range(n_models):
            eta[m] = d[i]
        for k in range(n_dims):
            bik = b[i, k]
            zk = z[k]
            for m in range(n_models):
                eta[m] += bik * zk[m]
        row, g_row = 0.0, 0.0
        for m in range(n_models):
            x = eta[m]
            e = np.exp(-abs(x))
            softplus = max(x, 0.0) + np.log1p(e)
            p = (1.0 if x >= 0.0 else e) / (1.0 + e)  # sigmoid(x)
            observed, correct = yi[m] >= 0, yi[m] > 0
            r = ((1.0 if correct else 0.0) - p) if observed else 0.0
            row += ((x if correct else 0.0) - softplus) if observed else 0.0
            residual[m] = r
            g_row += r
        total += row
        gd[i] = g_row
        for k in range(n_dims):
            bik = b[i, k]
            zk, gzk = z[k], gz[k]
            acc = 0.0
            for m in range(n_models):
                acc += residual[m] * zk[m]
                gzk[m] += residual[m] * bik
            gb[i, k] = acc
    return total, gb, gz, gd
