"""The log-likelihood of the residual family-DIF model and its gradient, in numba, over the observed cells
grouped by (item, family).

    logit P(Y_im = 1) = b_i + o_im + delta_{i, f(m)}

(:mod:`bayesirt.models.family_dif`). Within one (item, family) group the logits differ only by the
fixed offsets o_im, so the cells are held as the offsets alone, group after group (item-major, families in
order): ``start`` (n_items * n_families + 1 int64 positions) and ``offset`` (float64, one per observed
cell). Which models they belong to and their responses are not needed: the linear part of the
log-likelihood, sum(y * eta), is sum_if n_if (b_i + delta_if) up to a constant, with n_if the correct
responses of item i in family f, and the rest, -sum softplus(eta), and its gradient, -sum sigmoid(eta)
per group, read the offsets only. One pass over the observed cells, a cost that scales with them
(``benchmarks/direct_dif.py`` measures it against the dense masked matrix, which the offsets make a
float64 one).

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


@numba.njit(cache=True, nogil=True, error_model="numpy")
def family_dif_loglik_and_gradient(b, delta, correct, start, offset):
    """(log-likelihood, d/db (item), d/ddelta (item, family)) at easiness ``b`` and family effects
    ``delta`` (item, family), with ``correct`` the correct responses n_if (item, family) and the cells of
    :func:`cells_by_family`."""
    n_items, n_families = delta.shape
    gb = np.empty(n_items)
    gd = np.empty((n_items, n_families))
    total = 0.0
    for i in range(n_items):
        g_item = 0.0
        for f in range(n_families):
            k = i * n_families + f
            shift = b[i] + delta[i, f]
            softplus = 0.0
            mass = 0.0
            for c in range(start[k], start[k + 1]):
                eta = shift + offset[c]
                e = exp_clipped(eta)
                softplus += np.log1p(e) + max(eta - _HIGH, 0.0)
                mass += e / (1.0 + e)
            total += correct[i, f] * shift - softplus
            gd[i, f] = correct[i, f] - mass
            g_item += gd[i, f]
        gb[i] = g_item
    return total, gb, gd
