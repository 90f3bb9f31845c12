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

from bayesirt.models.kernels import exp_clipped

__all__ = ["mirt_loglik_and_gradient", "mirt_cell_loglik_and_gradient"]


#: Rows whose factors 1 + exp(-|eta|), each in (1, 2], are multiplied per model before one log is taken:
#: a product of 512 of them stays below 2^512, far from overflow.
_PRODUCT_ROWS = 512


@numba.njit
def _dot(u, v):
    """sum u * v over float64 vectors, with eight accumulators in a fixed order (a reduction with one
    accumulator does not vectorize without reassociation, which the kernel does not allow). Not inlined by
    numba: LLVM inlines it (as :mod:`bayesirt.models.kernels`' helpers); the confirmatory MIRT direct model at
    200 x 500 then compiled in 5.5-5.8 s against 5.7-7.1 s, logp + gradient 0.196-0.200 ms against 0.191-0.201
    (5 interleaved runs each against 034ca0d, the same values)."""
    n = u.size
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    j = 0
    while j + 8 <= n:
        s0 += u[j] * v[j]
        s1 += u[j + 1] * v[j + 1]
        s2 += u[j + 2] * v[j + 2]
        s3 += u[j + 3] * v[j + 3]
        s4 += u[j + 4] * v[j + 4]
        s5 += u[j + 5] * v[j + 5]
        s6 += u[j + 6] * v[j + 6]
        s7 += u[j + 7] * v[j + 7]
        j += 8
    tail = 0.0
    for k in range(j, n):
        tail += u[k] * v[k]
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)) + tail


@numba.njit(cache=True, nogil=True, error_model="numpy")
def mirt_loglik_and_gradient(b, z, d, y):
    """(log-likelihood, d/db (item, dim), d/dz (dim, model), d/dd (item)) over the observed cells of ``y``.

    Per cell, with e = exp(-|eta|) (:func:`~bayesirt.models.kernels.exp_clipped`, which vectorizes):
    softplus(eta) = max(eta, 0) + log(1 + e) and sigmoid(eta) = (1 or e) / (1 + e). The linear parts are
    summed per model, the logs as the log of per-model products of 1 + e, one log per model every
    :data:`_PRODUCT_ROWS` items, so the loop over a row has no libm call and no reduction and vectorizes;
    the row's sums against the abilities take :func:`_dot`."""
    n_items, n_models = y.shape
    n_dims = b.shape[1]
    gb, gz, gd = np.zeros((n_items, n_dims)), np.zeros((n_dims, n_models)), np.zeros(n_items)
    eta, residual, ones = np.empty(n_models), np.empty(n_models), np.ones(n_models)
    linear, product = np.zeros(n_models), np.ones(n_models)
    log_products = 0.0
    for i in range(n_items):
        yi = y[i]
        for m in range(n_models):
            eta[m] = d[i]
        for k in range(n_dims):
            bik = b[i, k]
            zk = z[k]
            for m in range(n_models):
                eta[m] += bik * zk[m]
        for m in range(n_models):
            x = eta[m]
            e = exp_clipped(-abs(x))
            p = (1.0 if x >= 0.0 else e) / (1.0 + e)  # sigmoid(x)
            observed, correct = yi[m] >= 0, yi[m] > 0
            residual[m] = ((1.0 if correct else 0.0) - p) if observed else 0.0
            linear[m] += ((x if correct else 0.0) - max(x, 0.0)) if observed else 0.0
            product[m] *= (1.0 + e) if observed else 1.0
        if (i + 1) % _PRODUCT_ROWS == 0 or i == n_items - 1:
            for m in range(n_models):
                log_products += np.log(product[m])
                product[m] = 1.0
        gd[i] = _dot(residual, ones)
        for k in range(n_dims):
            bik = b[i, k]
            zk, gzk = z[k], gz[k]
            gb[i, k] = _dot(residual, zk)
            for m in range(n_models):
                gzk[m] += residual[m] * bik
    return _dot(linear, ones) - log_products, gb, gz, gd


@numba.njit(cache=True, nogil=True, error_model="numpy")
def mirt_cell_loglik_and_gradient(b, z, d, start, model, y):
    """:func:`mirt_loglik_and_gradient` over the observed cells only, held by item as
    :func:`bayesirt.models.cell_kernel.cells_by_item` gives them (item i's cells at ``start[i]:start[i + 1]``,
    their model indices ``model`` and responses ``y``): a cost proportional to the observed cells."""
    n_items, n_dims = b.shape
    n_models = z.shape[1]
    zt = np.ascontiguousarray(z.T)  # (model, dim): each cell reads one row
    gb, gzt, gd = np.zeros((n_items, n_dims)), np.zeros((n_models, n_dims)), np.zeros(n_items)
    total = 0.0
    for i in range(n_items):
        bi = b[i]
        g_row = 0.0
        acc = np.zeros(n_dims)
        for c in range(start[i], start[i + 1]):
            m = model[c]
            zm = zt[m]
            x = d[i]
            for k in range(n_dims):
                x += bi[k] * zm[k]
            e = np.exp(-abs(x))
            p = (1.0 if x >= 0.0 else e) / (1.0 + e)
            correct = y[c] > 0
            total += (x if correct else 0.0) - max(x, 0.0) - np.log1p(e)
            r = (1.0 if correct else 0.0) - p
            g_row += r
            gzm = gzt[m]
            for k in range(n_dims):
                acc[k] += r * zm[k]
                gzm[k] += r * bi[k]
        gd[i] = g_row
        for k in range(n_dims):
            gb[i, k] = acc[k]
    return total, gb, np.ascontiguousarray(gzt.T), gd
