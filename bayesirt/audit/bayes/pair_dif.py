"""Per-pair DIF test of the near-tie table (issue 46 item 5): does a near tie's order follow its
two families' residual DIF?

The old rule (``excess_p``, :mod:`bayesirt.audit.bayes.near_ties`) asked whether the low-DIF
recomposition reverses the pair far more often than random half-tests of the same blueprint. It
needs random half-tests to flip the pair at most 5% of the time, which almost no 1 pp near tie
meets, so it flagged nothing even at strong simulated DIF. The anchor set also removes items by
their DIF range across all families, most of it irrelevant to the two families of a pair.

The statistic. For a pair (a, b) of families (f_a, f_b), let d_i = delta_i,f_a - delta_i,f_b be
the posterior mean of the residual family DIF of item i estimated on the audit half (the Bayesian
layer's draws), and e_i = y_ia - y_ib over the items both models answered in the target half
(0 elsewhere). T = sum_i d_i e_i is large when a's wins over b sit on the items that favour a's
family: DIF contributes to a's lead. The randomization p is

    p = (1 + #{r: T_r >= T}) / (1 + R),   T_r = sum_i d_pi_r(i) e_i,

pi_r a random permutation of the items within each stratum of the paired model
(:func:`bayesirt.audit.bayes.paired.paired_strata`: item groups, small groups pooled), R =
:data:`PERMUTATIONS`. Under the null of the audit's test (no DIF shared by the audit and target
halves) d is estimated from models the target responses do not involve, so it carries no
information about which items a wins; permuting it within strata gives the null distribution of
T given the target's responses. The smallest attainable p is 1 / (R + 1). Its power and
false-flag rate at near ties, on simulated DIF of known size: ``benchmarks/audit_calibration.md``.
A small p says DIF credibly adds to a's lead; at a 1 pp near tie that lead is itself within the
reach of the DIF, whose share of it the test does not measure.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesirt.audit.bayes.paired import paired_strata
from bayesirt.audit.engine.ranking import TIE_TOLERANCE
from bayesirt.errors import DataError

__all__ = ["pair_dif_p", "PERMUTATIONS"]

#: Within-stratum permutations of the DIF contrasts per pair.
PERMUTATIONS = 200
_CHUNK = 2_000_000  # item x pair cells formed at once


def pair_dif_p(y, observed, item_group, delta, family_a, family_b, pairs, *, permutations: int = PERMUTATIONS,
               seed: int = 0) -> np.ndarray:
    """Randomization p of each pair's alignment with its families' DIF (module notes).

    Parameters
    ----------
    y, observed : ndarray (item, model)
        Target-half responses (1 right) and the observed mask.
    item_group : array_like (item,)
    delta : ndarray (item, family)
        Posterior mean residual family DIF from the audit half.
    family_a, family_b : int arrays (pair,)
        Family columns of ``delta`` of each pair's models.
    pairs : tuple (a, b) of int arrays
        Model columns; a is the model whose lead is tested.
    permutations : int, default :data:`PERMUTATIONS`
    seed : int, default 0
        Of the permutations (the same for every pair).

    Returns
    -------
    ndarray (pair,): p in [1 / (permutations + 1), 1].
    """
    a, b = (np.asarray(p, dtype=np.intp) for p in pairs)
    fa, fb = np.asarray(family_a, dtype=np.intp), np.asarray(family_b, dtype=np.intp)
    delta = np.asarray(delta, dtype=np.float64)
    if delta.ndim != 2 or delta.shape[0] != y.shape[0] or not (a.shape == b.shape == fa.shape == fb.shape):
        raise DataError(f"delta must be (item, family) over the {y.shape[0]} items and the pair arrays equal; got "
                        f"{delta.shape}")
    codes = pd.factorize(paired_strata(item_group)[0])[0]
    rng = np.random.default_rng(seed)
    order = np.argsort(codes, kind="stable")  # items by stratum; each permutation shuffles within the blocks
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    perm = np.empty((permutations, codes.size), dtype=np.intp)
    for r in range(permutations):
        perm[r, order] = np.concatenate([rng.permutation(block) for block in np.split(order, bounds)])
    out = np.full(a.size, np.nan)
    combos, inverse = np.unique(np.column_stack([fa, fb]), axis=0, return_inverse=True)
    step = max(1, _CHUNK // max(1, y.shape[0]))
    for k, (f1, f2) in enumerate(combos):
        d = delta[:, f1] - delta[:, f2]
        shuffled = d[perm]  # (permutation, item)
        members = np.flatnonzero(inverse.ravel() == k)
        for start in range(0, members.size, step):
            m = members[start:start + step]
            both = observed[:, a[m]] & observed[:, b[m]]
            e = np.where(both, (y[:, a[m]] == 1).astype(np.float64) - (y[:, b[m]] == 1), 0.0)
            t = d @ e
            null = shuffled @ e  # (permutation, pair)
            out[m] = (1.0 + (null >= t - TIE_TOLERANCE).sum(axis=0)) / (permutations + 1.0)
    return out
