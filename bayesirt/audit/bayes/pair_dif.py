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
:data:`PERMUTATIONS`; the smallest attainable p is 1 / (R + 1).

Ability structure removed first. The residual family effects also carry what the working model's
K capability dimensions leave of the families' ability profiles (a family better on the items
loading on a dimension the offsets did not capture). Such a profile is shared by the two halves,
so without DIF a's wins still line up with d: on simulated benchmarks without any DIF the raw p
flagged 12% of near ties at .05. Before the test d is therefore projected off the item directions
of the abilities (:func:`item_directions`): the top :data:`DIRECTIONS` left singular vectors of
the audit half's responses centred within each family and item (the family means, hence any DIF,
removed first, so the directions are the within-family ability loadings), plus the constant, the
item's proportion right and its square, and the singular vectors times p(1 - p) (the curvature
of the response function). A family profile acts through the loadings, so it lies mostly in that
span; planted DIF, item-specific, keeps all but a (2 DIRECTIONS + 3) / items share of its variance.
On four simulated audits without any DIF (``benchmarks/results/audit_composition.md``) the
projected p was <= .05 for 7.1% of 2,250 near ties (the raw p: 12%): better, still not a valid
per-pair p, so no pair is flagged on it alone.

Testlets. Items that share a stem or passage carry shared noise: a model's wins clump by testlet (its
testlet effects), and so do the audit half's DIF estimates (the testlet effects of its models, averaged
within the family). Shuffling single items breaks the clumps' alignment, so the permutation spread misses
the covariance the clumps add to T, and p is too small. With testlet labels the permutations move whole
testlets instead: within a stratum, among its testlets of the same size, the k-th item of one takes the
contrast of the k-th item of another (a testlet of a size no other testlet of the stratum has stays in
place). One-item testlets give the item permutations exactly.

Multiplicity. A table has hundreds of pairs, tested at once; ``dif_q`` is the Benjamini-Hochberg
adjusted p over the table's pairs (:func:`scipy.stats.false_discovery_control`), and a pair is
DIF-sensitive when ``dif_q`` <= .05: under the null of no DIF in any pair the chance that any pair
of the table is flagged is at most .05 (so is the per-pair false-flag rate), and among flagged pairs
the expected share of false flags is at most .05. With R permutations the adjusted q can reach .05
only when at least m / (20 (R + 1)) of the m pairs sit at the floor: a table whose DIF orders a few
pairs among many flags none. Measured (``benchmarks/results/audit_composition.md``, 4 audits per
design, 60 owners x 5 families, 600 items): without DIF 0 of 2,250 pairs flagged (0 of 4 audits);
DIF sd 1.2 (strong) on half of the items: 203 of 203 DIF-ordered pairs flagged (recall 1.0); sd
0.8: .994; sd 0.4: .119. A flag says DIF credibly adds to a's lead;
at a 1 pp near tie that lead is itself within the reach of the DIF, whose share of it the test
does not measure.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy.stats import false_discovery_control

from bayesirt.audit.bayes.paired import paired_strata
from bayesirt.audit.engine.ranking import TIE_TOLERANCE
from bayesirt.errors import DataError
from bayesirt.utils.validation import testlet_labels

__all__ = ["pair_dif_p", "item_directions", "dif_q", "PERMUTATIONS", "DIRECTIONS"]

#: Within-stratum permutations of the DIF contrasts per pair (floor of the p: 1 / (PERMUTATIONS + 1)).
PERMUTATIONS = 1000
#: Within-family ability directions that the DIF contrasts are projected off (module notes).
DIRECTIONS = 10
_CHUNK = 2_000_000  # item x pair cells formed at once


def item_directions(y, observed, family, *, dims: int = DIRECTIONS) -> np.ndarray:
    """Orthonormal item directions of the abilities in one audit half (module notes).

    Parameters
    ----------
    y, observed : ndarray (item, model)
        The audit half's responses (1 right) and observed mask.
    family : array_like (model,)
        Family labels; responses are centred within each family and item before the SVD.
    dims : int, default :data:`DIRECTIONS`
        Singular vectors kept (at most a quarter of the smaller side of the matrix).

    Returns
    -------
    ndarray (item, k): an orthonormal basis of the top singular vectors, the constant, the items'
    proportion right and its square.
    """
    observed = np.asarray(observed, dtype=bool)
    right = np.where(observed, np.asarray(y) == 1, np.nan).astype(np.float64)
    family = np.asarray(family)
    centred = np.zeros_like(right)
    for f in np.unique(family):
        m = family == f
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an item none of the family answered: mean NaN, left 0
            centred[:, m] = right[:, m] - np.nanmean(right[:, m], axis=1, keepdims=True)
    centred = np.nan_to_num(centred)
    centred -= centred.mean(axis=0, keepdims=True)
    k = max(0, min(dims, min(centred.shape) // 4))
    u = np.linalg.svd(centred, full_matrices=False)[0][:, :k]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        share = np.nan_to_num(np.nanmean(right, axis=1), nan=0.5)
    basis = np.column_stack([u, u * (share * (1 - share))[:, None], np.ones(share.size), share, share ** 2])
    q, r = np.linalg.qr(basis)
    return q[:, np.abs(np.diag(r)) > 1e-10 * max(1.0, np.abs(np.diag(r)).max())]


def dif_q(p) -> np.ndarray:
    """Benjamini-Hochberg adjusted p of the table's pairs (module notes); NaN stays NaN."""
    p = np.asarray(p, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        out[ok] = false_discovery_control(p[ok])
    return out


def pair_dif_p(y, observed, item_group, delta, family_a, family_b, pairs, *, permutations: int = PERMUTATIONS,
               directions=None, testlet=None, seed: int = 0) -> np.ndarray:
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
    directions : ndarray (item, k), optional
        Orthonormal item directions the contrasts are projected off first (:func:`item_directions`
        of the audit half); None: the raw contrasts.
    testlet : array_like (item,), optional
        Testlet labels: the permutations move whole testlets (module notes, testlets); None: items.
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
    if directions is not None and (np.ndim(directions) != 2 or np.shape(directions)[0] != y.shape[0]):
        raise DataError(f"directions must be (item, k) over the {y.shape[0]} items; got {np.shape(directions)}")
    perm = _permutations(pd.factorize(paired_strata(item_group)[0])[0], testlet, permutations,
                         np.random.default_rng(seed))
    out = np.full(a.size, np.nan)
    combos, inverse = np.unique(np.column_stack([fa, fb]), axis=0, return_inverse=True)
    step = max(1, _CHUNK // max(1, y.shape[0]))
    for k, (f1, f2) in enumerate(combos):
        d = delta[:, f1] - delta[:, f2]
        if directions is not None:
            d = d - directions @ (directions.T @ d)
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


def _permutations(codes, testlet, permutations: int, rng) -> np.ndarray:
    """(permutation, item) item maps: item i takes the contrast of item ``perm[r, i]``. Without testlets the
    items are shuffled within each stratum; with them whole testlets are, among the stratum's testlets of the
    same size, the k-th item of one taking the k-th item's contrast of another (a testlet crossing strata is
    cut at their boundary)."""
    if testlet is None:
        order = np.argsort(codes, kind="stable")  # items by stratum; each permutation shuffles within the blocks
        bounds = np.flatnonzero(np.diff(codes[order])) + 1
        perm = np.empty((permutations, codes.size), dtype=np.intp)
        for r in range(permutations):
            perm[r, order] = np.concatenate([rng.permutation(block) for block in np.split(order, bounds)])
        return perm
    labels = testlet_labels(testlet, codes.size)
    cluster = pd.factorize(pd.MultiIndex.from_arrays([codes, labels]))[0]  # a testlet within a stratum
    size = np.bincount(cluster)
    first = np.unique(cluster, return_index=True)[1]  # each testlet's first item: its stratum
    classes = pd.factorize(pd.MultiIndex.from_arrays([codes[first], size]))[0]  # (stratum, size) of each testlet
    order = np.argsort(cluster, kind="stable")  # items by testlet, in item order within one
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    members = [order[start[c][:, None] + np.arange(size[c[0]])] for c in (np.flatnonzero(classes == k)
                                                                       for k in range(classes.max() + 1))]
    perm = np.empty((permutations, codes.size), dtype=np.intp)
    for r in range(permutations):
        for items in members:  # (testlet, position) of one class
            perm[r, items.ravel()] = items[rng.permutation(len(items))].ravel()
    return perm
