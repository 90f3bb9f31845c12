"""Paired comparison of two models' accuracy on the same items: the near-tie leaderboard's
``prob_a_ahead``, ``gap_lower_pp`` / ``gap_upper_pp`` and ``mcnemar_p`` (issue 29).

The quantity. Model m's accuracy on the item population is

    A_m = sum_g w_g p_mg,   p_mg = E_{i ~ group g}[P(Y_mi = 1)],   w_g = n_g / N,

where the benchmark's item groups g are fixed strata (its blueprint: the sizes n_g are the
benchmark's own, as the leaderboard's score and the audit's blueprint cells and matched-random
subtests hold them) and the items of group g are draws from that group's item population. A_m is
the expected accuracy over the item population of the benchmark's design (new items from the same
groups, in the same proportions), not the accuracy on the fixed items: the latter is known exactly
from the data and has no uncertainty. ``prob_a_ahead`` is the posterior probability that
A_a > A_b; the gap is A_a - A_b.

The model. On the items both models answered, each item of group g falls in one of three cells:
a right and b wrong (``n10_g``), b right and a wrong (``n01_g``), or concordant (``nc_g``).
Items of one group are exchangeable, so the cell counts are multinomial with cell probabilities
pi_g = (pi10_g, pi01_g, pic_g), and p_ag - p_bg = pi10_g - pi01_g. With the prior
Dirichlet(a_g, a_g, a_g), a_g = :data:`PRIOR` w_g (Jeffreys' 1/2 per cell for the whole
benchmark, split over the groups by their sizes, so that cutting the benchmark into finer groups
does not add prior pseudo-items: the strata of a Dirichlet-process prior with total mass 3/2),
pi_g | data ~ Dirichlet(n10_g + a_g, n01_g + a_g, nc_g + a_g), independently across groups (the
Bayesian bootstrap of the group's items with the prior's pseudo-counts; Rubin 1981), and

    A_a - A_b = sum_g w_g (pi10_g - pi01_g) = sum_g w_g T_g (2 B_g - 1),
    T_g = pi10_g + pi01_g ~ Beta(n10_g + n01_g + 2 a_g, nc_g + a_g),   B_g ~ Beta(n10_g + a_g, n01_g + a_g),

T_g and B_g independent (the aggregation property of the Dirichlet). Items of a group share their
cell probabilities, so under the prior they are correlated (a Polya urn), and the groups are
modelled separately: a pair whose difference sits in one group is not credited with the other
groups' concordant items as independent evidence about that group. Why not Dirichlet weights over
the groups as well (a two-stage Bayesian bootstrap): that treats the groups as a sample from a
population of groups, an estimand a one-task benchmark (one group) can say nothing about, and the
two-stage resampling counts the within-group variance twice (Davison & Hinkley 1997, sec. 3.8).
Why the prior: the plain Bayesian bootstrap puts all its mass on the observed values, so a pair
with two discordant items, both in a's favour, would get P(a ahead) = 1; with the Jeffreys prior it
gets P(Beta(2.5, 0.5) > 1/2) = 0.92 (and three, 0.96).

Computation. P(A_a > A_b) is Rao-Blackwellized over the B of the pair's largest group g*: given
the other draws, A_a > A_b exactly when B_g* > 1/2 - R / (2 w_g* T_g*), R the other groups' sum,
whose probability is a regularized incomplete beta function. With one group this is exact
(1 - I_{1/2}(n10 + 1/2, n01 + 1/2): no Monte Carlo error); with several it averages that exact
conditional probability over :data:`PAIR_DRAWS` draws of the rest. The gap interval is the
equal-tailed :data:`INTERVAL` interval of the draws. A group's draws depend only on its counts
(and the pair's item total), so they are drawn once per distinct counts and group and shared by
the pairs that hold them: every pair's draws are still exact, independent across its groups, and
the cost is a gather and a sum per pair, group and draw.

Small item groups (issue 46). A group's pseudo-count a_g = PRIOR n_g / N vanishes with its
size, so a group of one or two items has a nearly degenerate posterior (a one-item group's pi_g is
all but certain after one response): the 90% gap interval covered .04 of true gaps with one item
per group, .66 with two, .87 with ten. Groups with fewer than :data:`MIN_STRATUM` items are
therefore pooled into one stratum (:func:`paired_strata`), whose items are treated as exchangeable
draws from the pooled groups' item population: the stratum's posterior then carries the spread
between those groups' items (an estimand at the groups' benchmark proportions, whose variance it
slightly over-states when the small groups differ). Groups of :data:`MIN_STRATUM` or more items
stay their own strata; with no small group nothing changes. The strata weights are the benchmark's
stratum sizes (``weights``: the design, the same for every pair), not the pair's both-answered
counts: with missing cells those vary by pair, and a stratum a pair has no common item in would
otherwise drop out of its estimand (it keeps its weight and its prior).

Monte Carlo error. ``prob_a_ahead`` is a mean of :data:`PAIR_DRAWS` conditional probabilities
(exact, no Monte Carlo error, with one stratum); ``prob_a_ahead_mcse`` is their standard deviation
over sqrt(draws). A pair called at .95 with an MCSE of .005 is called in ~all seeds; one within
2 MCSE of .95 or .05 may flip with the seed. Such borderline pairs (issue 46 item 6) are drawn
again with :data:`BORDERLINE_DRAWS` draws (10x, so their MCSE shrinks ~3x), and the reported
``prob_a_ahead`` and MCSE are those of the larger run. On uneven 20-200-item groups 20% of the
calls within 3 pp changed between two seeds at 2,000 draws, 6.5% with the redraw
(``benchmarks/results/audit_calibration.md``).

Testlets (issue 46 item 6). Items that share a stem, passage or scenario are not independent draws
from the item population: a model that misreads the passage misses several of its items, so a pair's
discordant items come in clumps and the group's items carry less information about the population
than their number says. Taking them as independent, 90% gap intervals covered the population gap 88.1-89.1%
of the time at 0-30% missing, 86.6% at worst (testlets of 5 items with a model-by-testlet effect of sd
0.6 logits, pairs within 5 pp). Given testlet
labels (:func:`pair_posterior`'s ``testlet``), each pair's counts are divided by its design effect
(Kish 1965): the variance of its stratified mean item difference under clustered sampling of the
testlets over that under independent items,

    deff = sum_g w_g^2 V_cl,g / sum_g w_g^2 V_iid,g   (at least 1; 1 when the denominator is 0),
    V_iid,g = (Q_g - n_g r_g^2) / (n_g (n_g - 1)),
    V_cl,g = K_g / (K_g - 1) sum_c (D_c - r_g m_c)^2 / n_g^2,

over the pair's both-answered items of stratum g: n_g of them, Q_g = n10_g + n01_g (the sum of the
squared item differences, each -1, 0 or 1), r_g = (n10_g - n01_g) / n_g, and per testlet c of the
stratum D_c = n10_c - n01_c on its m_c items, K_g the testlets with an item both answered (a stratum
with K_g <= 1 counts V_iid,g in both sums). V_cl,g is the ratio estimator's between-cluster variance
(Cochran 1977, sec. 11.8), so clumped discordance gives deff > 1 and the posterior is that of n / deff
independent items: the effective sample size of the pair, the same counts at a smaller scale. The
floor keeps testlets from adding information: a negative intra-testlet correlation is noise at the
sizes seen. A testlet that crosses item groups is cut at the stratum boundary. With every testlet
one item, deff = 1 (the two variances are equal). With the labels the same intervals covered 90.0-90.1%
(89.3-90.9% for every group size and missing share; mean deff 1.06-1.12) and the calls within 5 pp were
right 98.3 / 97.8 / 97.4 / 96.4% of the time at 0 / 10 / 20 / 30% missing, against 98.0 / 97.5 / 97.2 /
96.2% without (``benchmarks/results/audit_calibration.md``, 18 benchmarks per group size).

``mcnemar_p`` is the exact two-sided McNemar test on the items both models answered: n10 ~
Binomial(n10 + n01, 1/2) under equal accuracy, p = min(1, 2 P(Bin <= min(n10, n01)))
(``scipy.stats.binomtest``'s two-sided p for p = 1/2). It conditions on the discordant items and
ignores the groups; ``prob_a_ahead`` is its Bayesian counterpart with the groups as strata. With
testlet labels it is the clustered McNemar test of Durkalski et al. (2003): (sum_c D_c)^2 / sum_c D_c^2
against chi-square(1) over the testlets (one-item testlets: the asymptotic McNemar test).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import betainc
from scipy.stats import binom, chi2

from bayesirt.errors import DataError
from bayesirt.utils.validation import testlet_labels

__all__ = ["discordant_counts", "paired_accuracy", "paired_strata", "pair_posterior", "design_effects",
           "clustered_mcnemar_p", "mcnemar_p", "PRIOR", "PAIR_DRAWS", "INTERVAL",
           "MIN_STRATUM", "BORDERLINE_DRAWS", "CALL_LEVEL"]

#: Dirichlet pseudo-count of every cell of every group (Jeffreys).
PRIOR = 0.5
#: Monte Carlo draws of the paired posterior per distinct count vector.
PAIR_DRAWS = 2000
#: Draws of a pair whose prob_a_ahead lies within 2 MCSE of a call level (module notes).
BORDERLINE_DRAWS = 20_000
#: prob_a_ahead from which a pair is called (either way: >= CALL_LEVEL or <= 1 - CALL_LEVEL).
CALL_LEVEL = 0.95
#: Equal-tailed posterior interval of the gap.
INTERVAL = 0.90
#: Item groups with fewer items are pooled into one stratum of the paired model (module notes).
MIN_STRATUM = 20
_CHUNK = 4_000_000  # item x pair cells formed at once (float64 in the product)
_DRAW_CHUNK = 4_000_000  # count vector x draw x group cells formed at once
_TESTLET_CHUNK = 2_000_000  # pair x testlet cells of the design effects formed at once
_TABLE_CELLS = 25_000_000  # key x draw cells of a call's shared posterior draws (each of two tables, float64)


def discordant_counts(y, observed, item_group, pairs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pair and item group: items with a right and b wrong, with b right and a wrong, and
    items both answered.

    Parameters
    ----------
    y, observed : array_like (item, model)
        Responses (1 right; anything where ``observed`` is False is ignored) and the observed mask.
    item_group : array_like (item,)
        Group labels (the strata of :func:`paired_accuracy`).
    pairs : tuple (a, b) of int arrays
        Model positions; a is the model whose lead is asked about.

    Returns
    -------
    (n10, n01, n) : int64 ndarrays (pair, group), groups in order of first appearance.
    """
    observed = np.asarray(observed, dtype=bool)
    right = (np.asarray(y) == 1) & observed
    a, b = (np.asarray(p, dtype=np.intp) for p in pairs)
    codes, _ = pd.factorize(np.asarray(item_group))
    if right.ndim != 2 or codes.shape != right.shape[:1] or a.shape != b.shape or a.ndim != 1:
        raise DataError(f"y {right.shape} must be (item, model), item_group one label per item {codes.shape}, and "
                        "pairs two equal 1-D index arrays")
    # items sorted by group: a group's count is a sum over one run of rows (cost per item, not per item and group)
    order = np.argsort(codes, kind="stable")
    starts = np.searchsorted(codes[order], np.arange(codes.max() + 1 if codes.size else 0))
    observed, right = observed[order], right[order]
    out = np.zeros((3, a.size, starts.size), dtype=np.int64)
    step = max(1, _CHUNK // max(1, codes.size))
    for start in range(0, a.size if starts.size else 0, step):
        s = slice(start, start + step)
        both = observed[:, a[s]] & observed[:, b[s]]
        ra, rb = right[:, a[s]], right[:, b[s]]
        for k, cell in enumerate((both & ra & ~rb, both & rb & ~ra, both)):
            out[k, s] = np.add.reduceat(cell.astype(np.int32), starts, axis=0).T
    return out[0], out[1], out[2]


def paired_strata(item_group, *, min_size: int = MIN_STRATUM) -> tuple[np.ndarray, np.ndarray, int]:
    """Strata of the paired model: every item group of at least ``min_size`` items, and one stratum
    pooling the smaller groups (module notes).

    Returns
    -------
    (stratum, weights, pooled) : ndarray (item,) of str, ndarray (stratum,), int
        Each item's stratum label (its group's, or ``"pooled groups of < min_size items"``), the
        strata's shares of the items in order of first appearance (the design weights of
        :func:`paired_accuracy`), and the number of groups pooled (0: the groups are the strata).
        When the small groups hold fewer than ``min_size`` items together they join the smallest
        large group; when every group is small, all items form one stratum.
    """
    group = np.asarray(item_group).astype(str)
    labels, codes, sizes = np.unique(group, return_inverse=True, return_counts=True)
    small = sizes < min_size
    stratum = group
    if small.any() and sizes.size > 1:
        pool = f"pooled groups of < {min_size} items"
        if sizes[small].sum() < min_size and not small.all():  # too few to stand alone: they join the smallest large group
            pool = labels[~small][np.argmin(sizes[~small])]
        stratum = np.where(small[codes.ravel()], pool, group)
    counts = np.bincount(pd.factorize(stratum)[0])
    return stratum, counts / max(1, group.size), int(small.sum()) if sizes.size > 1 else 0


def mcnemar_p(n10, n01) -> np.ndarray:
    """Exact two-sided McNemar p of discordant counts (module notes); 1 when there is none."""
    n10, n01 = np.asarray(n10), np.asarray(n01)
    d = n10 + n01
    return np.minimum(1.0, 2.0 * binom.cdf(np.minimum(n10, n01), d, 0.5))


def clustered_mcnemar_p(n10, n01) -> np.ndarray:
    """Clustered McNemar p (Durkalski et al. 2003; module notes) of per-pair, per-testlet discordant
    counts (pair, testlet): chi-square(1) tail of (sum_c D_c)^2 / sum_c D_c^2, D_c = n10_c - n01_c;
    1 when every D_c is 0."""
    d = np.atleast_2d(np.asarray(n10, dtype=np.float64) - np.asarray(n01, dtype=np.float64))
    square = (d ** 2).sum(axis=1)
    stat = np.divide(d.sum(axis=1) ** 2, square, out=np.zeros(square.shape), where=square > 0)
    return np.where(square > 0, chi2.sf(stat, 1), 1.0)


def design_effects(n10, n01, n, cluster_stratum, weights) -> np.ndarray:
    """Design effect of each pair's stratified mean item difference under testlet clustering
    (module notes).

    Parameters
    ----------
    n10, n01, n : array_like of int (pair, cluster)
        :func:`discordant_counts` per testlet (a testlet crossing strata counts once per stratum).
    cluster_stratum : array_like of int (cluster,)
        Each testlet's stratum, positions into ``weights``.
    weights : array_like (stratum,)
        The strata's design weights (:func:`paired_strata`).

    Returns
    -------
    ndarray (pair,)
        deff >= 1; 1 where the pair has no discordant item or too few items for a variance.
    """
    n10, n01, n = (np.atleast_2d(np.asarray(x, dtype=np.float64)) for x in (n10, n01, n))
    code = np.asarray(cluster_stratum, dtype=np.intp)
    w2 = np.asarray(weights, dtype=np.float64) ** 2
    onehot = np.zeros((code.size, w2.size))
    onehot[np.arange(code.size), code] = 1.0
    d, m = n10 - n01, n
    n_g, d_g, q_g = m @ onehot, d @ onehot, (n10 + n01) @ onehot
    k_g = (m > 0) @ onehot
    with np.errstate(divide="ignore", invalid="ignore"):
        r_g = np.where(n_g > 0, d_g / n_g, 0.0)
        v_iid = np.where(n_g > 1, (q_g - n_g * r_g ** 2) / (n_g * (n_g - 1)), 0.0)
        spread = ((d - r_g @ onehot.T * m) ** 2) @ onehot  # sum_c (D_c - r_g m_c)^2 per stratum
        v_cl = np.where(k_g > 1, k_g / (k_g - 1) * spread / n_g ** 2, v_iid)
    iid, clustered = v_iid @ w2, v_cl @ w2
    ratio = np.divide(clustered, iid, out=np.ones(iid.shape), where=iid > 0)
    return np.where(ratio > 1 + 1e-9, ratio, 1.0)  # one-item testlets: equal variances up to rounding -> exactly 1


def paired_accuracy(n10, n01, n, *, weights=None, prior: float = PRIOR, draws: int = PAIR_DRAWS, seed: int = 0,
                    interval: float = INTERVAL, design_effect=None) -> pd.DataFrame:
    """Posterior of the accuracy gap A_a - A_b of each pair (module notes).

    Parameters
    ----------
    n10, n01, n : array_like of int (pair, group)
        :func:`discordant_counts`.
    weights : array_like (group,), optional
        The strata's shares of the benchmark's items (:func:`paired_strata`), the same for every
        pair. Default: each pair's both-answered counts n / n.sum() (equal to the design's with
        complete data).
    prior : float, default :data:`PRIOR`
        Dirichlet pseudo-count per cell for the whole benchmark (group g gets ``prior`` n_g / N).
    draws : int, default :data:`PAIR_DRAWS`
    seed : int, default 0
        Of ``default_rng``; the draws of group g at given counts are shared by every pair holding
        those counts (module notes), so pairs with equal counts get equal results, and a pair's
        result depends on the seed and the counts present in the call.
    interval : float, default :data:`INTERVAL`
    design_effect : array_like (pair,), optional
        Each pair's design effect (:func:`design_effects`, >= 1): its counts are divided by it
        (module notes, testlets). Default: items independent (1).

    Returns
    -------
    pandas.DataFrame, one row per pair
        ``prob_a_ahead`` (P(A_a > A_b | data)), ``prob_a_ahead_mcse`` (its Monte Carlo standard
        error; 0 with one stratum), ``gap_mean``, ``gap_lower``, ``gap_upper`` (the
        posterior mean and equal-tailed interval of A_a - A_b, as fractions), ``n10``, ``n01``,
        ``n_both`` (summed over groups), ``mcnemar_p``, ``design_effect``. A pair without a common
        item has NaN.
    """
    n10, n01, n = (np.atleast_2d(np.asarray(x, dtype=np.int64)) for x in (n10, n01, n))
    if not (n10.shape == n01.shape == n.shape) or np.any(n10 < 0) or np.any(n01 < 0) or np.any(n10 + n01 > n):
        raise DataError("n10, n01 and n must be (pair, group) counts with n10 + n01 <= n")
    deff = np.ones(n.shape[0]) if design_effect is None else np.asarray(design_effect, dtype=np.float64)
    if deff.shape != (n.shape[0],) or not np.all(deff >= 1):
        raise DataError(f"design_effect must be one number >= 1 per pair ({n.shape[0]}); got {deff!r}")
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 2:
        raise DataError(f"draws must be an integer >= 2; got {draws!r}")
    if not prior > 0:
        raise DataError(f"prior must be positive; got {prior!r}")
    groups = n.shape[1]
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != (groups,) or np.any(weights < 0) or not weights.sum() > 0:
            raise DataError(f"weights must be {groups} nonnegative stratum shares, one per group; got {weights.shape}")
        weights = weights / weights.sum()
    scaled = np.concatenate([n10, n01, n], axis=1) / deff[:, None]  # the effective counts (module notes, testlets)
    unique, inverse = np.unique(scaled, axis=0, return_inverse=True)
    rng = np.random.default_rng(seed)
    parts = unique[:, :groups], unique[:, groups:2 * groups], unique[:, 2 * groups:]
    out = _posterior(*parts, weights, prior, draws, rng, interval)
    # borderline calls: within 2 MCSE of a call level, drawn again with more draws (module notes)
    edge = np.flatnonzero(np.abs(np.abs(out[:, 0] - 0.5) - (CALL_LEVEL - 0.5)) <= 2 * out[:, 4])
    if edge.size and draws < BORDERLINE_DRAWS:
        out[edge] = _posterior(*(x[edge] for x in parts), weights, prior, BORDERLINE_DRAWS, rng, interval)
    out = out[inverse.ravel()]  # pairs with equal counts: one row
    s10, s01 = n10.sum(axis=1), n01.sum(axis=1)
    return pd.DataFrame({"prob_a_ahead": out[:, 0], "prob_a_ahead_mcse": out[:, 4], "gap_mean": out[:, 1],
                         "gap_lower": out[:, 2], "gap_upper": out[:, 3], "n10": s10, "n01": s01, "n_both": n.sum(axis=1),
                         "mcnemar_p": mcnemar_p(s10, s01), "design_effect": deff})


def pair_posterior(y, observed, item_group, pairs, *, testlet=None, seed: int = 0, **options) -> pd.DataFrame:
    """:func:`paired_accuracy` of the pairs' responses, the item groups as strata (small groups
    pooled by :func:`paired_strata`, weighted by the design), with the testlets' design effects and
    the clustered McNemar p when ``testlet`` labels (one per item) are given (module notes).

    ``y``, ``observed``, ``item_group``, ``pairs``: as :func:`discordant_counts`; ``options``: those
    of :func:`paired_accuracy` but ``weights`` and ``design_effect``."""
    stratum, weights, _ = paired_strata(item_group)
    counts = discordant_counts(y, observed, stratum, pairs)
    if testlet is None:
        return paired_accuracy(*counts, weights=weights, seed=seed, **options)
    testlet = testlet_labels(testlet, stratum.size)
    codes = pd.factorize(stratum)[0]  # discordant_counts' strata order: first appearance
    cluster = pd.factorize(pd.MultiIndex.from_arrays([codes, testlet]))[0]  # a testlet within one stratum
    cluster_stratum = codes[np.unique(cluster, return_index=True)[1]]
    a, b = (np.asarray(p, dtype=np.intp) for p in pairs)
    deff, p_clustered = np.ones(a.size), np.ones(a.size)
    step = max(1, _TESTLET_CHUNK // max(1, cluster_stratum.size))  # pairs at once: (pair, testlet) arrays stay small
    for start in range(0, a.size, step):
        s = slice(start, start + step)
        by_testlet = discordant_counts(y, observed, cluster, (a[s], b[s]))
        deff[s] = design_effects(*by_testlet, cluster_stratum, weights)
        p_clustered[s] = clustered_mcnemar_p(by_testlet[0], by_testlet[1])
    out = paired_accuracy(*counts, weights=weights, seed=seed, design_effect=deff, **options)
    out["mcnemar_p"] = p_clustered
    return out


def _posterior(n10, n01, n, weights, prior, draws, rng, interval) -> np.ndarray:
    """(prob, mean, lower, upper, prob's MCSE) per pair (module notes).

    Group g's pi10_g - pi01_g and T_g depend only on its counts (n10_g, n01_g, n_g) and the pair's
    N, so they are drawn once per distinct such key and group and shared by the pairs holding it:
    each pair's draws are exact draws of its posterior (independent across its groups), the gammas
    cost nothing, and the work is one gather and sum per pair, group and draw. When the distinct keys'
    draws would exceed :data:`_TABLE_CELLS` (many pairs, groups and distinct counts: missing cells), the
    pairs go in blocks whose draws fit, each block sharing its own keys' draws."""
    keys = _keys(n10, n01, n, weights)
    if sum(len(k) for k, _ in keys) * draws <= _TABLE_CELLS:
        return _posterior_block(n10, n01, n, weights, prior, draws, rng, interval, keys)
    step = max(1, _TABLE_CELLS // (draws * n.shape[1]))
    return np.concatenate([_posterior_block(n10[s], n01[s], n[s], weights, prior, draws, rng, interval,
                                            _keys(n10[s], n01[s], n[s], weights))
                           for s in (slice(start, start + step) for start in range(0, n.shape[0], step))])


def _keys(n10, n01, n, weights) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per group: the distinct keys (n10_g, n01_g, n_g, the pair's total or the design's share) and each
    pair's position among them."""
    total = n.sum(axis=1)
    share = (np.broadcast_to((weights * 1_000_000).round(), n.shape).astype(np.int64) if weights is not None
             else None)
    out = []
    for g in range(n.shape[1]):
        key = total if weights is None else share[:, g]
        keys, inverse = np.unique(np.column_stack([n10[:, g], n01[:, g], n[:, g], key]), axis=0, return_inverse=True)
        out.append((keys, inverse.ravel()))
    return out


def _posterior_block(n10, n01, n, weights, prior, draws, rng, interval, group_keys) -> np.ndarray:
    """:func:`_posterior` of pairs whose keys' draws (``group_keys``: :func:`_keys`) fit in memory."""
    total = n.sum(axis=1)
    if weights is None:
        w = np.divide(n, total[:, None], out=np.zeros(n.shape), where=total[:, None] > 0)
    else:  # the design's shares; a stratum without common items keeps its weight and its prior
        w = np.broadcast_to(weights, n.shape)
    n_pairs, n_groups = n.shape
    x_tables, t_tables, index = [], [], np.empty((n_pairs, n_groups), dtype=np.intp)
    for g, (keys, inverse) in enumerate(group_keys):
        index[:, g] = inverse
        if weights is None:
            alpha = prior * np.divide(keys[:, 2], keys[:, 3], out=np.zeros(len(keys)), where=keys[:, 3] > 0)
            present = keys[:, 2] > 0
        else:
            alpha = np.full(len(keys), prior * weights[g])
            present = np.full(len(keys), weights[g] > 0)
        shape = lambda c: np.where(present, c + alpha, 1.0)[:, None]  # noqa: E731 (absent: weight 0)
        g10 = rng.standard_gamma(np.broadcast_to(shape(keys[:, 0]), (len(keys), draws)))
        g01 = rng.standard_gamma(np.broadcast_to(shape(keys[:, 1]), g10.shape))
        gc = rng.standard_gamma(np.broadcast_to(shape(keys[:, 2] - keys[:, 0] - keys[:, 1]), g10.shape))
        with np.errstate(invalid="ignore"):  # all three gammas of a tiny prior can underflow to 0
            x_tables.append(np.nan_to_num((g10 - g01) / (g10 + g01 + gc)))  # pi10_g - pi01_g
            t_tables.append(np.nan_to_num((g10 + g01) / (g10 + g01 + gc)))  # T_g
    top = np.argmax(w, axis=1)
    tail = (1 - interval) / 2
    out = np.full((n_pairs, 5), np.nan)
    step = max(1, _DRAW_CHUNK // (draws * n_groups))
    for start in range(0, n_pairs, step):
        s = slice(start, start + step)
        rows = np.arange(s.start, min(s.stop, n_pairs))
        gap = np.zeros((rows.size, draws))
        for g in range(n_groups):
            gap += w[rows, g][:, None] * x_tables[g][index[rows, g]]
        x_top, t_top = np.empty(gap.shape), np.empty(gap.shape)
        for g in np.unique(top[rows]):
            m = top[rows] == g
            x_top[m], t_top[m] = x_tables[g][index[rows[m], g]], t_tables[g][index[rows[m], g]]
        w_top = w[rows, top[rows]][:, None]
        rest = gap - w_top * x_top
        # A_a > A_b  <=>  B_top > 1/2 - rest / (2 w_top T_top), B_top ~ Beta(n10 + a, n01 + a)
        cut = np.clip(0.5 - rest / (2 * np.maximum(w_top * t_top, 1e-300)), 0.0, 1.0)
        a_top = prior * w_top[:, 0]
        prob = 1.0 - betainc((n10[rows, top[rows]] + a_top)[:, None], (n01[rows, top[rows]] + a_top)[:, None], cut)
        out[rows] = np.column_stack([prob.mean(axis=1), gap.mean(axis=1), np.quantile(gap, tail, axis=1),
                                     np.quantile(gap, 1 - tail, axis=1), prob.std(axis=1, ddof=1) / np.sqrt(draws)])
    out[total == 0] = np.nan
    return out
