"""Near-tie ranking statistics of the family-DIF audit (NT 3.3-3.4 and D.1, eq. 8 and 39-41).

Scores. A model's full score is the mean of its observed responses; a weighted (anchor or control)
score is ``sum_i w_i y_im o_im / sum_i w_i o_im`` (``o`` the observed mask), so weights are
renormalized over the items the model answered. Without missing cells this is NT eq. 8.

Near-tie pairs (eq. 39). Pairs ``m < m'`` of models with different owners (and, for the primary
``cross`` type, different families) whose full-score gap satisfies ``0 < |gap| <= epsilon``. With
missing cells the gap is taken on the items both models answered (:func:`both_answered_gaps`,
issue 46): each model's own full score compares the two on partly different items, and the
near-tie table's paired posterior (:mod:`bayesirt.audit.bayes.paired`) sees only the common
items, so a pair chosen on the full scores was chosen on data the posterior does not condition on
(its called pairs were in the true order 85-90% of the time at 10-30% missing). With complete data
the two gaps are equal and the pair set is unchanged.
Scores are fractions ``k / I``, so gaps are compared with tolerances: a gap counts as zero when
``|gap| <= TIE_TOLERANCE`` and as inside the band when ``|gap| <= epsilon + GAP_TOLERANCE`` (a gap
of exactly one percentage point is in the 1-point band).

Reversals (eq. 40). A pair tied under either score (``|difference| <= TIE_TOLERANCE``, or a NaN
score) is not eligible; an eligible pair is reversed when the two score differences have opposite
signs. Counts, not rates, are pooled over the folds (eq. 41, :func:`pooled_rate`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from bayesirt.errors import DataError
from bayesirt.utils.validation import check_choice, check_number

__all__ = ["weighted_scores", "near_tie_pairs", "both_answered_gaps", "reversal_counts", "pair_reversals", "kendall_tau_b", "pooled_rate",
           "percentile_ranks", "PAIR_TYPES", "TIE_TOLERANCE", "GAP_TOLERANCE",
           "prepared_scores", "prepared_responses", "pair_arrays"]

#: Score differences at most this large are ties.
TIE_TOLERANCE = 1e-12
#: Slack added to ``epsilon`` so that a gap of exactly ``epsilon`` (up to rounding) is in the band.
GAP_TOLERANCE = 1e-9
#: ``cross``: different owner and family, gap in (0, epsilon] (the primary set); ``within``: same
#: family, different owner, gap in (0, epsilon]; ``all``: different owner and family, any nonzero gap.
PAIR_TYPES = ("cross", "within", "all")

# Elements per temporary array of reversal_counts. Measured on 1,000 replicates x 150,000 pairs:
# chunks of ~0.5 MB are about 3x faster than chunks of ~32 MB (they stay in cache).
_CHUNK_ELEMENTS = 2**16
# Rows of weights turned into float64 at a time by weighted_scores.
_SCORE_ROWS = 256
# Candidate pairs generated at a time by near_tie_pairs.
_CANDIDATES = 2**22


def weighted_scores(y, w, observed=None) -> np.ndarray:
    """Weighted scores of every model, renormalized over its observed items.

    Parameters
    ----------
    y : array_like, shape (item, model)
        Responses 0/1 (any numeric or boolean dtype); unobserved cells are ignored whatever they hold.
    w : array_like, shape (item,) or (replicate, item)
        Nonnegative item weights (float32 accepted); ``np.ones(item)`` gives the full score.
    observed : array_like of bool, shape (item, model), optional
        False marks a missing cell. Default: every cell observed (``y`` must then be finite).

    Returns
    -------
    ndarray of float64, shape (model,) or (replicate, model)
        ``sum_i w_i y_im o_im / sum_i w_i o_im``; NaN for a model with no weight on its observed items.
    """
    yobs, obs = prepared_responses(y, observed, "weighted_scores")
    w = np.asarray(w)
    if w.ndim not in (1, 2) or w.shape[-1] != yobs.shape[0]:
        raise DataError(f"w has shape {w.shape} but y has {yobs.shape[0]} items; pass weights of shape (item,) or "
                        "(replicate, item)")
    if not np.issubdtype(w.dtype, np.number) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise DataError("w must hold finite nonnegative numbers; check the weights for NaN or negative values")
    return prepared_scores(yobs, obs, w)


def prepared_scores(yobs: np.ndarray, obs: np.ndarray | None, w: np.ndarray) -> np.ndarray:
    """:func:`weighted_scores` on the arrays of :func:`prepared_responses` (no validation): the
    kernel that the resampling tasks call once per block."""
    if w.ndim == 1:
        return _scores_rows(yobs, obs, w[None, :])[0]
    out = np.empty((w.shape[0], yobs.shape[1]))
    for start in range(0, w.shape[0], _SCORE_ROWS):
        out[start:start + _SCORE_ROWS] = _scores_rows(yobs, obs, w[start:start + _SCORE_ROWS])
    return out


def _scores_rows(yobs, obs, w) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    numerator = w @ yobs
    denominator = w.sum(axis=1, keepdims=True) if obs is None else w @ obs
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, numerator / denominator, np.nan)


def prepared_responses(y, observed, caller) -> tuple[np.ndarray, np.ndarray | None]:
    """Validated ``(y * observed, observed)`` as float64 (observed None when every cell is)."""
    y = np.asarray(y)
    if y.ndim != 2 or 0 in y.shape:
        raise DataError(f"y must be a non-empty (item, model) matrix; got shape {y.shape}")
    if observed is None:
        mask = None
    else:
        mask = np.asarray(observed)
        if mask.shape != y.shape or mask.dtype != bool:
            raise DataError(f"observed must be a boolean array of the shape of y {y.shape}; got {mask.dtype} of "
                            f"shape {mask.shape}")
    values = y if mask is None else y[mask]
    if not np.isin(values, (0, 1)).all():
        hint = "pass observed=False for missing cells" if mask is None else "recode responses to 0/1"
        raise DataError(f"{caller}: observed responses must be 0 or 1; {hint}")
    if mask is None:
        return y.astype(np.float64), None
    return np.where(mask, y, 0).astype(np.float64), mask.astype(np.float64)


def both_answered_gaps(y, observed) -> np.ndarray | None:
    """Accuracy gaps of every pair of models on the items both answered.

    Parameters
    ----------
    y : array_like, shape (item, model)
        Responses, 1 right (unobserved cells are ignored whatever they hold).
    observed : array_like of bool, shape (item, model), or None

    Returns
    -------
    ndarray (model, model) or None
        ``G[m, m']`` = m's accuracy minus m''s on the items both answered (antisymmetric; NaN
        without a common item). None when every cell is observed: the gaps are then the full-score
        differences, and :func:`near_tie_pairs` uses those.
    """
    if observed is None or np.all(observed):
        return None
    o = np.asarray(observed, dtype=np.float64)
    right = ((np.asarray(y) == 1) & np.asarray(observed, dtype=bool)).astype(np.float64)
    common = right.T @ o  # [m, m']: items m got right among those both answered
    n = o.T @ o
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, (common - common.T) / np.maximum(n, 1), np.nan)


def near_tie_pairs(full, owner, family, *, epsilon: float = 0.01, pair_type: str = "cross",
                   gaps=None) -> tuple[np.ndarray, np.ndarray]:
    """Model pairs whose full scores are nearly tied (NT eq. 39, the full-score conditions).

    Parameters
    ----------
    full : array_like, shape (model,)
        Observed full-benchmark scores (finite).
    owner, family : array_like, shape (model,)
        Labels of any hashable type.
    epsilon : float, default 0.01
        Largest full-score gap of a pair (0.01: one percentage point); unused when ``pair_type="all"``.
    pair_type : {"cross", "within", "all"}, default "cross"
        See :data:`PAIR_TYPES`. Every type requires different owners and a nonzero gap.
    gaps : ndarray (model, model), optional
        Pairwise gaps to select on instead of ``full[m] - full[m']``: the both-answered gaps of
        :func:`both_answered_gaps` when cells are missing (module notes). None: the full scores.

    Returns
    -------
    (i, j) : tuple of int64 ndarray
        Model indices with ``i < j``, sorted by ``i`` then ``j``.
    """
    full = np.asarray(full, dtype=np.float64)
    if full.ndim != 1 or not np.all(np.isfinite(full)):
        raise DataError("full must be a 1-D array of finite scores; a model without observed items has no score")
    owners = _codes(owner, "owner", full.size)
    families = _codes(family, "family", full.size)
    check_choice(pair_type, PAIR_TYPES, name="pair_type", caller="near_tie_pairs")
    check_number(epsilon, name="epsilon", caller="near_tie_pairs", low=0, low_open=True)
    band = np.inf if pair_type == "all" else epsilon + GAP_TOLERANCE
    if gaps is not None:
        return _pairs_on_gaps(np.asarray(gaps, dtype=np.float64), owners, families, band, pair_type)
    order = np.argsort(full, kind="stable")
    ranked = full[order]
    # Sorted position p is paired with positions p+1 .. stop[p]-1: a window a little wider than the
    # band, so that the exact test below, not rounding in the search, decides every pair.
    if np.isfinite(band):
        stop = np.searchsorted(ranked, ranked + band + GAP_TOLERANCE, side="right")
    else:
        stop = np.full(full.size, full.size)
    counts = stop - np.arange(full.size) - 1
    ends = np.cumsum(counts)
    found_i, found_j = [], []
    first = 0
    while first < full.size:  # blocks of positions with at most ~_CANDIDATES candidate pairs each
        last = max(first + 1, int(np.searchsorted(ends, (ends[first - 1] if first else 0) + _CANDIDATES)))
        block = np.arange(first, min(last, full.size))
        left = np.repeat(block, counts[block])
        offsets = np.arange(left.size) - np.repeat(np.cumsum(counts[block]) - counts[block], counts[block])
        a, b = order[left], order[left + 1 + offsets]
        i, j = np.minimum(a, b), np.maximum(a, b)
        gap = np.abs(full[i] - full[j])
        keep = (gap > TIE_TOLERANCE) & (gap <= band) & (owners[i] != owners[j])
        keep &= families[i] == families[j] if pair_type == "within" else families[i] != families[j]
        found_i.append(i[keep])
        found_j.append(j[keep])
        first = block[-1] + 1
    i, j = np.concatenate(found_i).astype(np.int64), np.concatenate(found_j).astype(np.int64)
    order = np.lexsort((j, i))
    return i[order], j[order]


def _pairs_on_gaps(gaps, owners, families, band, pair_type) -> tuple[np.ndarray, np.ndarray]:
    """:func:`near_tie_pairs` on a (model, model) matrix of pairwise gaps (NaN: no common item, never a pair)."""
    n = owners.size
    if gaps.shape != (n, n):
        raise DataError(f"gaps has shape {gaps.shape} but there are {n} models; pass a (model, model) matrix")
    found_i, found_j = [], []
    rows = max(1, _CANDIDATES // max(1, n))
    for start in range(0, n, rows):
        i, j = np.nonzero(np.triu(np.ones((min(rows, n - start), n), dtype=bool), start + 1))
        i = i + start
        gap = np.abs(gaps[i, j])
        keep = (gap > TIE_TOLERANCE) & (gap <= band) & (owners[i] != owners[j])  # NaN compares False
        keep &= families[i] == families[j] if pair_type == "within" else families[i] != families[j]
        found_i.append(i[keep])
        found_j.append(j[keep])
    return np.concatenate(found_i).astype(np.int64), np.concatenate(found_j).astype(np.int64)


def _codes(labels, name, n) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.shape != (n,):
        raise DataError(f"{name} has shape {labels.shape} but there are {n} models; pass one label per model")
    codes, _ = pd.factorize(labels, use_na_sentinel=True)
    if np.any(codes < 0):
        raise DataError(f"{name} has missing labels; give every model an {name}")
    return codes


def reversal_counts(full, alt, pairs) -> tuple[np.ndarray, np.ndarray]:
    """Eligible and strictly reversed pairs between two scorings (NT eq. 39-40).

    Parameters
    ----------
    full : array_like, shape (model,) or (replicate, model)
        Reference scores (observed full scores, or bootstrap full scores per replicate).
    alt : array_like, shape (model,) or (replicate, model)
        Alternative scores (anchor, one control per row, ...).
    pairs : tuple (i, j) of int arrays
        Frozen pair set, e.g. from :func:`near_tie_pairs`.

    Returns
    -------
    (n_eligible, n_reversed) : int64 scalars, or int64 arrays of shape (replicate,)
        A pair is eligible when tied under neither scoring (:data:`TIE_TOLERANCE`; a NaN score is a
        tie) and reversed when ``(full_i - full_j) * (alt_i - alt_j) < 0``. Memory is bounded:
        replicates x pairs is never formed at once.
    """
    full, alt = np.asarray(full, dtype=np.float64), np.asarray(alt, dtype=np.float64)
    if full.ndim not in (1, 2) or alt.ndim not in (1, 2) or full.shape[-1] != alt.shape[-1]:
        raise DataError(f"full {full.shape} and alt {alt.shape} must be (model,) or (replicate, model) arrays with "
                        "the same number of models")
    if full.ndim == alt.ndim == 2 and full.shape[0] != alt.shape[0]:
        raise DataError(f"full has {full.shape[0]} replicates but alt has {alt.shape[0]}; pass as many of each")
    i, j = pair_arrays(pairs, full.shape[-1])
    replicates = max(full.shape[0] if full.ndim == 2 else 1, alt.shape[0] if alt.ndim == 2 else 1)
    alt_t = np.ascontiguousarray(np.atleast_2d(alt).T)  # (model, replicate): pair gathers copy whole rows
    step = max(1, _CHUNK_ELEMENTS // replicates)
    eligible, reversed_ = np.zeros(replicates, np.int64), np.zeros(replicates, np.int64)
    if full.ndim == 1:  # orient every untied pair so that full[hi] > full[lo]: one difference to test
        gap = full[i] - full[j]
        keep = np.abs(gap) > TIE_TOLERANCE
        hi, lo = np.where(gap > 0, i, j)[keep], np.where(gap > 0, j, i)[keep]
        for start in range(0, hi.size, step):
            d = alt_t[hi[start:start + step]]
            d -= alt_t[lo[start:start + step]]
            below = np.add.reduce(d < -TIE_TOLERANCE, axis=0, dtype=np.int64)
            eligible += below + np.add.reduce(d > TIE_TOLERANCE, axis=0, dtype=np.int64)
            reversed_ += below
    else:  # both scores per replicate, side by side: one gather per pair end
        both = np.concatenate([full.T, np.broadcast_to(alt_t, (alt_t.shape[0], replicates))], axis=1)
        step = max(1, step // 2)
        concordance = np.zeros(replicates, np.int64)
        for start in range(0, i.size, step):
            d = both[i[start:start + step]]
            d -= both[j[start:start + step]]
            sign = np.greater(d, TIE_TOLERANCE).view(np.int8)  # -1, 0 (tie or NaN), 1
            sign -= np.less(d, -TIE_TOLERANCE).view(np.int8)
            product = sign[:, :replicates] * sign[:, replicates:]  # 1 kept, -1 reversed, 0 ineligible
            concordance += np.add.reduce(product, axis=0, dtype=np.int64)
            eligible += np.add.reduce(product != 0, axis=0, dtype=np.int64)
        reversed_ = (eligible - concordance) // 2
    if full.ndim == alt.ndim == 1:
        return eligible[0], reversed_[0]
    return eligible, reversed_


def pair_reversals(full, alt, pairs) -> tuple[np.ndarray, np.ndarray]:
    """Per-pair form of :func:`reversal_counts` (same rule): boolean ``eligible`` and
    ``reversed`` of shape (pair,) or (replicate, pair), for when each pair's outcome is wanted
    (e.g. its posterior probability of reversing). Forms replicates x pairs at once."""
    full, alt = np.asarray(full, dtype=np.float64), np.asarray(alt, dtype=np.float64)
    i, j = pair_arrays(pairs, full.shape[-1])
    gap_full, gap_alt = full[..., i] - full[..., j], alt[..., i] - alt[..., j]
    eligible = (np.abs(gap_full) > TIE_TOLERANCE) & (np.abs(gap_alt) > TIE_TOLERANCE)  # NaN compares False
    return eligible, eligible & (np.sign(gap_full) != np.sign(gap_alt))


def pair_arrays(pairs, n_models) -> tuple[np.ndarray, np.ndarray]:
    try:
        i, j = (np.asarray(p) for p in pairs)
    except (TypeError, ValueError):
        raise DataError("pairs must be a tuple (i, j) of two index arrays, as near_tie_pairs returns") from None
    if i.shape != j.shape or i.ndim != 1 or not (np.issubdtype(i.dtype, np.integer)
                                                  and np.issubdtype(j.dtype, np.integer)):
        raise DataError(f"pairs must be two 1-D integer arrays of equal length; got {i.dtype} {i.shape} and "
                        f"{j.dtype} {j.shape}")
    if i.size and (min(i.min(), j.min()) < 0 or max(i.max(), j.max()) >= n_models):
        raise DataError(f"pairs index models outside 0..{n_models - 1}; build them from the same scores")
    return i.astype(np.intp), j.astype(np.intp)


def kendall_tau_b(full, alt):
    """Kendall's tau-b between two scorings (``scipy.stats.kendalltau``, variant "b").

    Scores are rounded to 12 decimals first, so that differences within :data:`TIE_TOLERANCE`
    (floating-point noise of weighted sums) count as ties, as they do for reversals.

    Parameters
    ----------
    full, alt : array_like, shape (model,) or (replicate, model)

    Returns
    -------
    float when both are 1-D, else ndarray of shape (replicate,). NaN when a scoring is constant
    or holds NaN.
    """
    full, alt = np.round(np.asarray(full, dtype=np.float64), 12), np.round(np.asarray(alt, dtype=np.float64), 12)
    if full.ndim not in (1, 2) or alt.ndim not in (1, 2) or full.shape[-1] != alt.shape[-1]:
        raise DataError(f"full {full.shape} and alt {alt.shape} must be (model,) or (replicate, model) arrays with "
                        "the same number of models")
    if full.ndim == alt.ndim == 1:
        return float(stats.kendalltau(full, alt, variant="b").statistic)
    if full.ndim == alt.ndim == 2 and full.shape[0] != alt.shape[0]:
        raise DataError(f"full has {full.shape[0]} replicates but alt has {alt.shape[0]}; pass as many of each")
    return np.asarray(stats.kendalltau(full, alt, variant="b", axis=-1).statistic, dtype=np.float64)


def pooled_rate(n_reversed, n_eligible):
    """Reversal rate pooled over folds (NT eq. 36 and 41): summed reversals / summed eligible pairs.

    Parameters
    ----------
    n_reversed, n_eligible : array_like of int, shape (fold,) or (fold, replicate)

    Returns
    -------
    float, or ndarray of shape (replicate,). NaN where no pair is eligible in any fold.
    """
    n_reversed, n_eligible = np.asarray(n_reversed), np.asarray(n_eligible)
    if n_reversed.shape != n_eligible.shape or n_reversed.ndim not in (1, 2):
        raise DataError(f"n_reversed {n_reversed.shape} and n_eligible {n_eligible.shape} must have the same shape, "
                        "(fold,) or (fold, replicate)")
    if np.any(n_reversed < 0) or np.any(n_reversed > n_eligible):
        raise DataError("reversal counts must lie between 0 and the eligible counts; pass (n_reversed, n_eligible) "
                        "in this order")
    reversed_, eligible = n_reversed.sum(axis=0), n_eligible.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(eligible > 0, reversed_ / np.maximum(eligible, 1), np.nan)
    return float(rate) if rate.ndim == 0 else rate


def percentile_ranks(scores) -> np.ndarray:
    """Percentile rank of every score among all scores: ``100 (rank - 1/2) / n``.

    ``rank`` is the average rank (ties share it) of the score rounded to 12 decimals, so the lowest
    of ``n`` distinct scores is at ``50 / n`` and the highest at ``100 - 50 / n``; equal to the
    share of scores below plus half the share equal to it (``scipy.stats.percentileofscore``,
    ``kind="mean"``).
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1 or not np.all(np.isfinite(scores)):
        raise DataError("scores must be a 1-D array of finite numbers")
    return 100 * (stats.rankdata(np.round(scores, 12)) - 0.5) / scores.size
