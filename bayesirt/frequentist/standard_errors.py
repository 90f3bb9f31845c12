"""Standard errors of the MML engine: the exact observed information of the marginal log-likelihood
(log posterior when priors are active) in closed form by Louis' identity, and its inverse."""

from __future__ import annotations

import warnings

import numpy as np
from scipy.linalg import lapack

from bayesirt.frequentist.mml_model import (ItemParameters, ParameterLayout, ResponsePatterns, expected_counts,
                                            probability_gradient)
from bayesirt.models.response import curves, derivative, second_derivative

__all__ = ["observed_covariance"]


def _prior_hessian(lay: ParameterLayout, par: ItemParameters):
    """Exact Hessian of the active log priors in natural parameters: per item (n, 4, 4), and the
    second derivative of a shared-slope prior."""
    n = par.d.size
    hess, shared = np.zeros((n, 4, 4)), 0.0
    pr = lay.priors
    if "discrimination" in pr:
        p = pr["discrimination"].params
        a = par.a[:1] if lay.structure == "common" else par.a
        if pr["discrimination"].distribution == "lognormal":  # d/da of -(log a - mu) / (sigma^2 a): log a's density
            h = -(1 - np.log(a) + p["mu"]) / (p["sigma"] ** 2 * a**2)
        else:  # halfnormal, times a (the density of log a)
            h = -p["sigma"] ** -2.0 - 1 / a**2
        if lay.structure == "common":
            shared = float(h[0])
        else:
            hess[:, 0, 0] += h
    if "intercept" in pr:
        hess[:, 1, 1] -= pr["intercept"].params["sigma"] ** -2.0
    if "difficulty" in pr:  # b = -d / a: grad b = (-b / a, -1 / a), d2b/da2 = 2b / a^2, d2b/dadd = 1 / a^2
        mu, sd = pr["difficulty"].params["mu"], pr["difficulty"].params["sigma"]
        b = -par.d / par.a
        jb = np.stack([-b / par.a, -1 / par.a], axis=1)
        hb = np.zeros((n, 2, 2))
        hb[:, 0, 0], hb[:, 0, 1], hb[:, 1, 0] = 2 * b / par.a**2, par.a**-2.0, par.a**-2.0
        hess[:, :2, :2] -= (jb[:, :, None] * jb[:, None, :] + ((b - mu)[:, None, None]) * hb) / sd**2
    for slot, name, x in ((2, "guessing", par.c), (3, "slip", par.s)):
        if name in pr:
            al, be = pr[name].params["alpha"], pr[name].params["beta"]
            hess[:, slot, slot] -= (al - 1) / x**2 + (be - 1) / (1 - x) ** 2
    return hess, shared


def _d2p(par: ItemParameters, nodes: np.ndarray) -> np.ndarray:
    """Second derivatives of P in (a, d, c, s), shape (items, nodes, 4, 4)."""
    _, _, sg, sm = curves(par.a[:, None] * nodes[None, :] + par.d[:, None])
    d1 = derivative(sg, sm)  # sigmoid'
    d2 = second_derivative(derivative(sg, sm, c=par.c[:, None], s=par.s[:, None]), sg, sm)  # (1 - c - s) sigmoid''
    out = np.zeros((*sg.shape, 4, 4))
    out[..., 0, 0], out[..., 1, 1] = d2 * nodes**2, d2
    out[..., 0, 1] = out[..., 1, 0] = d2 * nodes
    for k in (2, 3):
        out[..., 0, k] = out[..., k, 0] = -d1 * nodes
        out[..., 1, k] = out[..., k, 1] = -d1
    return out


def _hessian(lay: ParameterLayout, data: ResponsePatterns, par: ItemParameters, post: np.ndarray) -> np.ndarray:
    """Exact Hessian of the marginal log-likelihood + active log priors in the packed parameters.

    Louis' identity, with ``l_mk`` the complete-data log-likelihood of pattern m at node k, its
    score ``u_mk`` and posterior weights ``pi_mk`` (``post = count * pi``)::

        H = sum_m count_m [ sum_k pi_mk (d2 l_mk + (u_mk - ubar_m) u_mk') ],  ubar_m = sum_k pi_mk u_mk.

    The first term is block diagonal (one block per item). The second couples every pair of
    items: :func:`_louis_by_patterns` or :func:`_louis_by_items`, whichever is cheaper.
    """
    cols = sorted(set(lay.slots) | ({0} if lay.structure == "common" else set()))
    n, k, ns = par.d.size, data.nodes.size, len(cols)
    p, q, dp = probability_gradient(par, data.nodes)
    r, n0 = expected_counts(data, post)
    # Scores of item i's parameters at node k for a correct and a wrong answer (items, nodes, slots).
    dpc = dp[..., cols]
    score1, score0 = dpc / p[..., None], -dpc / q[..., None]
    # Block-diagonal part: sum_k r d2 log P + n0 d2 log Q (d2 log P = d2P / P - score1 score1'),
    # plus the priors' curvature. Ratios are formed before weighting: P or Q can be ~1e-300.
    d2p = _d2p(par, data.nodes)[..., cols, :][..., cols]
    block = np.einsum("ik,ikpq->ipq", r, d2p / p[..., None, None]) - np.einsum("ik,ikpq->ipq", n0, d2p / q[..., None, None]) \
        - np.einsum("ik,ikp,ikq->ipq", r, score1, score1) - np.einsum("ik,ikp,ikq->ipq", n0, score0, score0)
    prior, shared = _prior_hessian(lay, par)
    block += prior[:, cols][:, :, cols]
    # Cross part: sum_m,k W_mk (u_mk - ubar_m) u_mk' with W = post; ubar's item-i part is
    # y1_mi mean1_mi + y0_mi mean0_mi.
    pi = post / data.count[:, None]
    mean1 = (pi @ score1.transpose(1, 0, 2).reshape(k, n * ns)).reshape(-1, n, ns)
    mean0 = (pi @ score0.transpose(1, 0, 2).reshape(k, n * ns)).reshape(-1, n, ns)
    louis = _louis_by_patterns if post.shape[0] < n else _louis_by_items
    full = louis(data, post, score1, score0, mean1, mean0).reshape(n, ns, n, ns)
    full = (full + full.transpose(2, 3, 0, 1)) / 2
    full[np.arange(n), :, np.arange(n), :] += block
    if lay.structure != "common":
        return full.reshape(n * ns, n * ns)
    rest = full[:, 1:, :, 1:].reshape(n * (ns - 1), n * (ns - 1))
    cross = full[:, 0, :, 1:].sum(0).reshape(-1)
    hess = np.empty((rest.shape[0] + 1,) * 2)
    hess[0, 0] = full[:, 0, :, 0].sum() + shared
    hess[0, 1:] = hess[1:, 0] = cross
    hess[1:, 1:] = rest
    return hess


def _louis_by_patterns(data: ResponsePatterns, post, score1, score0, mean1, mean0) -> np.ndarray:
    """Cross part of :func:`_hessian` as G'G, row (m, k) of G being sqrt(W_mk) (u_mk - ubar_m)
    (centring the second factor adds nothing: sum_k pi_mk (u_mk - ubar_m) = 0). Only the rows with
    W_mk > 1e-14 count_m are formed: on a long test each posterior holds a few of the nodes. About
    ``rows (items slots)^2`` flops in one symmetric product: for fewer patterns than items."""
    n, k, ns = score1.shape
    rows_m, rows_k = np.nonzero(post > 1e-14 * data.count[:, None])
    full = np.zeros((n * ns, n * ns))
    chunk = max(1, int(4e6 // (n * ns)))  # about 32 MB of G per chunk of rows
    for lo in range(0, rows_m.size, chunk):
        m, kk = rows_m[lo:lo + chunk], rows_k[lo:lo + chunk]
        g = data.y1[:, m].T[:, :, None] * (score1[:, kk].transpose(1, 0, 2) - mean1[m]) \
            + data.y0[:, m].T[:, :, None] * (score0[:, kk].transpose(1, 0, 2) - mean0[m])
        g = (g * np.sqrt(post[m, kk])[:, None, None]).reshape(-1, n * ns)
        full += g.T @ g
    return full


def _louis_by_items(data: ResponsePatterns, post, score1, score0, mean1, mean0) -> np.ndarray:
    """Cross part of :func:`_hessian` summed over patterns first: for a chunk of items j, one
    product of the posterior-weighted responses ``y_jm W_mk`` with X = [y1, y0, ubar] of all
    items (patterns x (2 + slots) items), about ``2 items^2 (2 + slots) nodes patterns`` flops in
    all; the rest is per item pair and node, so this is for more patterns than items."""
    n, k, ns = score1.shape
    centre = data.y1.T[:, :, None] * mean1 + data.y0.T[:, :, None] * mean0
    x = np.concatenate([data.y1.T, data.y0.T, centre.reshape(-1, n * ns)], axis=1)
    wx = post.T @ x if data.complete else None
    s1k, s0k = score1.transpose(1, 0, 2)[None], score0.transpose(1, 0, 2)[None]  # (1, nodes, items, slots)
    s1t, s0t = score1.transpose(0, 2, 1), score0.transpose(0, 2, 1)  # (items, slots, nodes)
    full = np.empty((n, ns, n * ns))
    chunk = max(1, int(4e6 // (k * x.shape[1])))  # about 32 MB of products per chunk of items j
    for lo in range(0, n, chunk):
        sl = slice(lo, min(lo + chunk, n))
        ones = ((data.y1[sl][:, None, :] * post.T[None]).reshape(-1, post.shape[0]) @ x).reshape(-1, k, x.shape[1])
        zeros = (wx[None] - ones) if data.complete else \
            ((data.y0[sl][:, None, :] * post.T[None]).reshape(-1, post.shape[0]) @ x).reshape(-1, k, x.shape[1])
        bracket = []
        for prod in (ones, zeros):  # sum_m y_jm W_mk [y1_mi, y0_mi, ubar_mi] for y_j = y1_j, y0_j
            t1, t0, cen = prod[..., :n, None], prod[..., n:2 * n, None], prod[..., 2 * n:].reshape(*prod.shape[:2], n, ns)
            bracket.append((t1 * s1k + t0 * s0k - cen).reshape(*prod.shape[:2], n * ns))
        full[sl] = s1t[sl] @ bracket[0] + s0t[sl] @ bracket[1]
    return full


def observed_covariance(lay: ParameterLayout, data: ResponsePatterns, par: ItemParameters, post: np.ndarray) -> np.ndarray | None:
    """Inverse observed information (minus the exact Hessian, :func:`_hessian`)."""
    chol, fail = lapack.dpotrf(-_hessian(lay, data, par, post), lower=True)
    if fail == 0:
        inv, fail = lapack.dpotri(chol, lower=True)  # the inverse from the Cholesky factor, lower triangle
    if fail != 0:
        warnings.warn("observed information is not positive definite at the estimates (weakly identified "
                      "parameters); standard errors set to NaN", RuntimeWarning, stacklevel=3)
        return None
    return np.tril(inv) + np.tril(inv, -1).T
