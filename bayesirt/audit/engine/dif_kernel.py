"""The compiled inner loops of the family-DIF Newton scheme (:mod:`bayesirt.audit.engine.dif`).

Every Newton step of :func:`bayesirt.audit.engine.dif.fit_family_dif` needs, per item i and family f,
the sums over the item's observed models m of family f of

    w_im q_im   and   w_im q_im^2,   q_im = 1 / (E_im u_i,f(m) + 1),

where E = exp(-clip(base, -700, 700)) is fixed within one Newton solve (base = o + delta or
o + b), u = exp(-v) carries the parameter being solved and w is the observed mask times the model
weights (or 1 everywhere for complete, unweighted data). :func:`family_moments` forms them in one
pass over the matrix, and :func:`negative_exp` forms E in one pass, both in parallel over items.

Why compiled: with NumPy each step made five passes over the (item, model) matrix (product,
sum, reciprocal, two matrix products with the family indicator) and each start five more; at
the NT MMLU size (14,042 items x 2,500 models of an audit half, 3 families) a step took 0.48 s
and a start 0.69 s, against 0.057 s and 0.11 s here on 2 cores (``benchmarks/dif_kernel.py``), and
the two folds of a 5,001 x 14,042 audit went from 198 s (the NumPy code, same machine and day)
to 62 s (``benchmarks/nt_audit.py``). An item's sums run in one thread in model order, so the
results do not depend on the number of threads; they differ from NumPy's (pairwise and BLAS)
summation order by rounding only (``tests/test_dif.py`` checks both functions against their
NumPy expressions).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["family_moments", "negative_exp", "NO_WEIGHTS"]

#: Pass as ``weight`` when every cell is observed and every model weighs 1.
NO_WEIGHTS = np.empty((0, 0))


@numba.njit(parallel=True, cache=True)
def negative_exp(offsets, shift, family, out):
    """``out[i, m] = exp(clip(-(offsets[i, m] + shift[i, family[m]]), -700, 700))`` (in place)."""
    n_items, n_models = offsets.shape
    for i in numba.prange(n_items):
        for m in range(n_models):
            v = -(offsets[i, m] + shift[i, family[m]])
            out[i, m] = np.exp(min(max(v, -700.0), 700.0))


@numba.njit(parallel=True, cache=True)
def family_moments(e_base, factor, family, weight):
    """Per item and family, the sums of w q and w q^2 over the models of that family, with
    q_im = 1 / (e_base[i, m] factor[i, family[m]] + 1) and w = ``weight`` (:data:`NO_WEIGHTS`: 1).

    Returns ``(mass, curvature)``, each (item, factor.shape[1])."""
    n_items, n_models = e_base.shape
    n_families = factor.shape[1]
    mass = np.zeros((n_items, n_families))
    curvature = np.zeros((n_items, n_families))
    weighted = weight.shape[0] > 0
    for i in numba.prange(n_items):
        m_i = np.zeros(n_families)
        c_i = np.zeros(n_families)
        for m in range(n_models):
            f = family[m]
            q = 1.0 / (e_base[i, m] * factor[i, f] + 1.0)
            p = q * weight[i, m] if weighted else q
            m_i[f] += p
            c_i[f] += p * q
        mass[i] = m_i
        curvature[i] = c_i
    return mass, curvature
