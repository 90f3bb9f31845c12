"""The log-likelihood of the residual family-DIF model and its gradient, in numba, over the observed cells
grouped by (item, family).

    logit P(Y_im = 1) = b_i + o_im + delta_{i, f(m)}

(:mod:`bayesirt.models.family_dif`). Within one (item, family) group the logits differ only by the
fixed offsets o_im, so the cells are held as the offsets alone, group after group (item-major, families in
order): ``start`` (n_items * n_families + 1 int64 positions) and ``offset`` (float64, one per observed
cell). Which models they belong to and their responses are not needed: the linear part of the
log-likelihood, sum(y * eta), is sum_if n_if (b_i + delta_if) up to a constant, with n_if the correct
responses of item i in family f, and the rest, -sum softplus(eta), and its gradient, -sum sigmoid(eta)
per group, read the offsets only. One pass over the observed cells, a cost that scales with them. The
dense alternative, the float64 (item, model) offsets with missing cells masked (by an offset of -inf, the
cheapest mask: the same kernel), costs as much when complete and does not shrink with the missing share:
at 1,000 items x 600 models x 5 families, CPU ms of the kernel, 2.55 against 2.83 with 10% of the cells
missing and 1.40 against 2.88 with 50% (``benchmarks/direct_dif.py``, results/direct_dif_full.jsonl, a
machine at load 11 on 2 cores).

The terms are those of ``build_family_dif``'s PyMC graph (the oracle: ``tests/test_direct_dif.py``), the
constant sum(y * o) dropped as there.
"""

from __future__ import annotations

import numba
import numpy as np

from bayesirt.models.kernels import exp_clipped

__all__ = ["cells_by_family", "family_dif_loglik_and_gradient"]

#: Above this logit exp is clipped (:func:`bayesirt.models.kernels.exp_clipped`): softplus(eta) is then
#: log(1 + exp(_HIGH)) + (eta - _HIGH) and sigmoid(eta) 1, to double precision.
_HIGH = 36.0
#: Factors 1 + exp(eta) multiplied per lane before the lane's product is logged: 16 factors of at most
#: 1 + exp(_HIGH) = 4.3e15 stay below 1e250.
_ROUNDS = 16


def cells_by_family(observed: np.ndarray, offsets: np.ndarray, family: np.ndarray,
                    n_families: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, offset): the offsets of the observed cells of the (item, model) matrix grouped by item, then by
    family in order (models in their order within a group), and the int64 start of each group."""
    n_items = observed.shape[0]
    order = np.argsort(family, kind="stable")  # models by family
    kept = observed[:, order]
    counts = np.zeros((n_items, n_families), dtype=np.int64)
    for f in range(n_families):
        counts[:, f] = kept[:, family[order] == f].sum(axis=1)
    start = np.zeros(n_items * n_families + 1, dtype=np.int64)
    np.cumsum(counts.ravel(), out=start[1:])
    return start, np.ascontiguousarray(offsets[:, order][kept], dtype=np.float64)


@numba.njit(inline="always")
def _sum(v):
    """sum(v) with eight accumulators in a fixed order (so that the loop vectorizes without fast-math)."""
    n = v.size
    n8 = n - n % 8
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    for c in range(0, n8, 8):
        s0 += v[c]
        s1 += v[c + 1]
        s2 += v[c + 2]
        s3 += v[c + 3]
        s4 += v[c + 4]
        s5 += v[c + 5]
        s6 += v[c + 6]
        s7 += v[c + 7]
    total = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    for c in range(n8, n):
        total += v[c]
    return total


@numba.njit(inline="always")
def _log_product(v):
    """log(prod(v)) for factors 1 <= v <= 1 + exp(_HIGH): products of eight lanes, each logged after
    :data:`_ROUNDS` factors, so one log per 16 factors instead of one per factor."""
    n = v.size
    block = 8 * _ROUNDS
    total = 0.0
    c = 0
    while c < n - n % block:
        p0 = p1 = p2 = p3 = p4 = p5 = p6 = p7 = 1.0
        for r in range(c, c + block, 8):
            p0 *= v[r]
            p1 *= v[r + 1]
            p2 *= v[r + 2]
            p3 *= v[r + 3]
            p4 *= v[r + 4]
            p5 *= v[r + 5]
            p6 *= v[r + 6]
            p7 *= v[r + 7]
        total += ((np.log(p0) + np.log(p1)) + (np.log(p2) + np.log(p3))) + \
            ((np.log(p4) + np.log(p5)) + (np.log(p6) + np.log(p7)))
        c += block
    p = 1.0
    for r in range(c, n):
        p *= v[r]
        if (r - c) % _ROUNDS == _ROUNDS - 1:
            total += np.log(p)
            p = 1.0
    return total + np.log(p)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def family_dif_loglik_and_gradient(b, delta, correct, start, offset):
    """(log-likelihood, d/db (item), d/ddelta (item, family)) at easiness ``b`` and family effects
    ``delta`` (item, family), with ``correct`` the correct responses n_if (item, family) and the cells of
    :func:`cells_by_family`.

    Item by item: one vectorized loop per (item, family) group writes each cell's factor 1 + exp(eta)
    (:func:`bayesirt.models.kernels.exp_clipped`), sigmoid and excess over the clip (eta - 36 where
    positive) to scratch arrays; the sigmoids are summed per group, and the softplus terms
    log(1 + exp(eta)) + excess per item, as the log of the product of the factors (:func:`_log_product`:
    one log per 16 cells, where a log1p per cell cost about ten times the rest of the kernel)."""
    n_items, n_families = delta.shape
    gb = np.empty(n_items)
    gd = np.empty((n_items, n_families))
    longest = 0
    for i in range(n_items):
        longest = max(longest, start[(i + 1) * n_families] - start[i * n_families])
    factor, sigmoid, excess = np.empty(longest), np.empty(longest), np.empty(longest)
    total = 0.0
    for i in range(n_items):
        base = start[i * n_families]
        g_item = 0.0
        for f in range(n_families):
            k = i * n_families + f
            shift = b[i] + delta[i, f]
            for c in range(start[k], start[k + 1]):
                eta = shift + offset[c]
                e = exp_clipped(eta)
                one_e = 1.0 + e
                factor[c - base] = one_e
                sigmoid[c - base] = e / one_e
                excess[c - base] = max(eta - _HIGH, 0.0)
            total += correct[i, f] * shift
            gd[i, f] = correct[i, f] - _sum(sigmoid[start[k] - base:start[k + 1] - base])
            g_item += gd[i, f]
        gb[i] = g_item
        cells = start[(i + 1) * n_families] - base
        total -= _log_product(factor[:cells]) + _sum(excess[:cells])
    return total, gb, gd
