"""Owner-disjoint replication of item-family signatures and item-group attribution (NT 4.4, 5.3, D.3).

Discovery D is outer fold 0's audit half and validation V fold 1's: their final DIF fits
(:attr:`bayesirt.audit.engine.anchors.Purification.final_fit`) are independent because the halves share no owner.

Signature replication (eq. 62-68). Common cells ``blueprint_cells(item_group, (b_D + b_V) / 2)``;
delta centred within cell per family and half (eq. 64); ``rho_f`` the Spearman correlation of the
centred effects (average ranks for ties, as :func:`scipy.stats.spearmanr`) and the median over
families; in every cell of n_c items the top ``k_c = max(1, round(top_share n_c))`` items by
``D_i = max_f delta_if - min_f delta_if`` of each half (NumPy rounding, halves to even, and ties
by item index: the rule of :func:`bayesirt.audit.engine.anchors.select_anchors` turned upside down); overlap
precision O (eq. 66); advantaged-family agreement A on H_D & H_V with the argmax of the uncentred
delta (eq. 67; ties to the first family in sorted order; NaN when the overlap is empty). The null
permutes the complete validation signature (its delta row, hence D and argmax) among the items of
each common cell; the cell means are unchanged, so centring commutes with it. Every replicate
reapplies the same selection rule, and p = (1 + #{S_r >= S_obs, or S_r undefined}) / (R + 1)
(eq. 68; an undefined replicate counts against the observation). Since D and V use the same cells,
``sum_c k_c^2 / n_c / sum_c k_c`` is the exact expected O under the null. A's null depends on the
cell sizes: a replicate overlaps only where it hands an item a validation top signature, and with
few top items per cell (k_c = 1 for cells under 8 items at 20%) that is often the item's own, so
A's permutation mean then sits near the observed agreement and A has little power.

Group attribution (eq. 69-70). Per half, delta minus the family's all-item mean, averaged within
each item group. Among groups of at least ``min_group_items`` items, each family's ``k`` most
positive and ``k`` most negative discovery effects, ``k = min(2, eligible // 2)`` so the two
sets never share a group (ties in first-appearance order), are checked for the same nonzero sign
in validation; share and one-sided exact binomial p (p0 = 1/2) per family and pooled.

Group contributions (eq. 71-72). With every cell observed, C_sf is eq. 71. With missing cells the
scores are :func:`bayesirt.audit.engine.ranking.weighted_scores` (renormalized over observed items), and C_sf
is defined as the group's part of the score difference,
``100 mean_m [sum_{i in s} w_i Y o / sum_i w_i o - sum_{i in s} Y o / sum_i o]``, which reduces
to eq. 71 on complete data and keeps eq. 72 exact (to rounding) in both cases. A target model
without anchor weight on its observed items (NaN anchor score) is left out of both sides. All item
groups enter the decomposition; the extreme discovery-to-validation contributions are chosen as
above among all groups and checked against the swapped direction.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr
from scipy.stats import binomtest, rankdata

from bayesirt.audit.engine.anchors import blueprint_cells
from bayesirt.audit.engine.result import AuditResult, check_audit
from bayesirt.data.responses import MISSING
from bayesirt.errors import DataError
from bayesirt.utils.validation import check_int, check_number

__all__ = ["TOP_SHARE", "PERMUTATIONS", "MIN_GROUP_ITEMS", "STATISTICS", "within_cell_centre", "top_share_mask",
           "cell_permutations", "signature_statistics", "signature_test", "signature_replication",
           "item_group_attribution", "score_contributions", "group_contributions"]

TOP_SHARE = 0.2
PERMUTATIONS = 500
MIN_GROUP_ITEMS = 20
STATISTICS = ("median_rho", "overlap", "agreement")
HALVES = ("discovery", "validation")
DIRECTIONS = ("discovery->validation", "validation->discovery")
_CHUNK_ELEMENTS = 2**22  # permuted (replicate, item, family) values held at once


def within_cell_centre(values: np.ndarray, cell: np.ndarray) -> np.ndarray:
    """``values`` (item, ...) minus their mean over the items of the same cell (eq. 64)."""
    values = np.asarray(values, dtype=np.float64)
    sums = np.zeros((cell.max() + 1, *values.shape[1:]))
    np.add.at(sums, cell, values)
    return values - (sums / np.bincount(cell).reshape(-1, *[1] * (values.ndim - 1)))[cell]


def top_share_mask(cell: np.ndarray, magnitude: np.ndarray, share: float = TOP_SHARE) -> np.ndarray:
    """Boolean mask of the ``max(1, round(share n_c))`` largest ``magnitude`` items of every cell
    (ties by item index); ``magnitude`` (item,) or (replicate, item), one selection per row.
    Equals ``select_anchors(cell, -magnitude, share)`` row by row."""
    rows = np.atleast_2d(magnitude)
    sizes = np.bincount(cell)
    k = np.maximum(1, np.rint(share * sizes).astype(np.int64))
    index = np.broadcast_to(np.arange(cell.size), rows.shape)
    order = np.lexsort((index, -rows, np.broadcast_to(cell, rows.shape)), axis=-1)  # cell, largest first, index
    sorted_cell = cell[order]
    rank = np.arange(cell.size) - (np.cumsum(sizes) - sizes)[sorted_cell]
    mask = np.zeros(rows.shape, bool)
    np.put_along_axis(mask, order, rank < k[sorted_cell], axis=-1)
    return mask.reshape(np.shape(magnitude))


def cell_permutations(cell: np.ndarray, replicates: int, rng: np.random.Generator) -> np.ndarray:
    """(replicate, item) index arrays: row r gives item i the signature of item ``perm[r, i]``,
    drawn uniformly among the items of i's cell, independently per cell and replicate."""
    base = np.argsort(cell, kind="stable")
    shuffled = np.lexsort((rng.random((replicates, cell.size)), np.broadcast_to(cell, (replicates, cell.size))),
                          axis=-1)
    perm = np.empty_like(shuffled)
    perm[:, base] = shuffled
    return perm


def _standardized_ranks(x: np.ndarray) -> np.ndarray:
    r = rankdata(x, axis=0)
    r -= r.mean(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return r / np.sqrt((r * r).sum(axis=0))


def _statistics(z_d, z_v, range_v, argmax_d, argmax_v, top_d, cell, share, perm) -> tuple[np.ndarray, ...]:
    """Per-family rho (replicate, family), O and A (replicate,) of validation signatures ``perm``."""
    rho = np.einsum("if,rif->rf", z_d, z_v[perm])
    top_v = top_share_mask(cell, range_v[perm], share)
    both = top_d & top_v
    agree = (both & (argmax_v[perm] == argmax_d)).sum(axis=1)
    n_both = both.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return rho, n_both / top_d.sum(), np.where(n_both > 0, agree / n_both, np.nan)


def _signatures(delta_d, delta_v, cell, top_share) -> tuple[np.ndarray, ...]:
    """What :func:`_statistics` reads of the two halves: standardized ranks of the centred effects
    (eq. 64-65), the validation ranges D_i, both argmax families and the discovery top mask."""
    z_d = _standardized_ranks(within_cell_centre(delta_d, cell))
    z_v = _standardized_ranks(within_cell_centre(delta_v, cell))
    range_d, range_v = np.ptp(delta_d, axis=1), np.ptp(delta_v, axis=1)
    top_d = top_share_mask(cell, range_d, top_share)
    return z_d, z_v, range_v, delta_d.argmax(axis=1), delta_v.argmax(axis=1), top_d


def signature_statistics(delta_d: np.ndarray, delta_v: np.ndarray, cell: np.ndarray, *,
                         top_share: float = TOP_SHARE) -> tuple[np.ndarray, np.ndarray]:
    """The observed statistics of :func:`signature_test` without its permutations (no input checks).

    Returns
    -------
    (rho, values) : ndarray (family,) and ndarray (3,)
        ``rho_f`` (eq. 65) and the :data:`STATISTICS` (median rho, O, A; A NaN when the top sets do
        not overlap), computed as :func:`signature_test` computes its ``observed``.
    """
    rho, overlap, agreement = _statistics(*_signatures(np.asarray(delta_d, dtype=np.float64),
                                                       np.asarray(delta_v, dtype=np.float64), cell, top_share),
                                          cell, top_share, np.arange(cell.size)[None])
    return rho[0], np.array([np.median(rho[0]), overlap[0], agreement[0]])


def signature_test(delta_d: np.ndarray, delta_v: np.ndarray, cell: np.ndarray, *, permutations: int = PERMUTATIONS,
                   seed: int = 0, top_share: float = TOP_SHARE) -> xr.Dataset:
    """Cross-half replication statistics and their within-cell permutation test (eq. 64-68).

    Parameters
    ----------
    delta_d, delta_v : ndarray (item, family)
        Family effects of the discovery and validation halves (D_i is each row's range).
    cell : ndarray of int (item,)
        Common blueprint cells numbered 0..C-1.
    permutations : int, default 500
        Replicates R (NT: 500).
    seed : int, default 0
        Seeds :func:`numpy.random.default_rng`.
    top_share : float, default 0.2
        Share of each cell called high-DIF (NT: 20%).

    Returns
    -------
    xarray.Dataset
        ``observed``, ``null_mean``, ``p_value`` (statistic); ``null`` (replicate, statistic);
        ``rho`` (family); ``top_discovery``, ``top_validation`` (item); attrs ``overlap_chance``,
        ``n_top``, ``n_overlap``, ``n_cells``, ``min_p``.
    """
    delta_d, delta_v = np.asarray(delta_d, dtype=np.float64), np.asarray(delta_v, dtype=np.float64)
    cell = np.asarray(cell)
    if delta_d.ndim != 2 or delta_d.shape != delta_v.shape or delta_d.shape[1] < 2:
        raise DataError(f"delta_d {delta_d.shape} and delta_v {delta_v.shape} must be (item, family) arrays of one "
                        "shape with at least 2 families; pass both halves' family_effect")
    if cell.shape != (delta_d.shape[0],) or not np.issubdtype(cell.dtype, np.integer) or cell.min() < 0:
        raise DataError(f"cell must hold one nonnegative integer per item ({delta_d.shape[0]}); got {cell.dtype} of "
                        f"shape {cell.shape}: pass blueprint_cells(item_group, easiness)")
    check_int(permutations, name="permutations", caller="signature_test", low=1)
    check_number(top_share, name="top_share", caller="signature_test", low=0, high=1, low_open=True)
    signatures = _signatures(delta_d, delta_v, cell, top_share)
    perms = np.vstack([np.arange(cell.size), cell_permutations(cell, permutations, np.random.default_rng(seed))])
    step = max(1, _CHUNK_ELEMENTS // delta_d.size)
    parts = [_statistics(*signatures, cell, top_share, perms[s:s + step]) for s in range(0, perms.shape[0], step)]
    rho = np.concatenate([p[0] for p in parts])
    values = np.column_stack([np.median(rho, axis=1), *[np.concatenate([p[j] for p in parts]) for j in (1, 2)]])
    observed, null = values[0], values[1:]
    exceed = ((null >= observed) | np.isnan(null)).sum(axis=0)
    sizes = np.bincount(cell)
    k = np.maximum(1, np.rint(top_share * sizes[sizes > 0]).astype(np.int64))
    top_d, top_v = signatures[5], top_share_mask(cell, signatures[2], top_share)
    return xr.Dataset(
        {"observed": ("statistic", observed), "null_mean": ("statistic", np.nanmean(null, axis=0)),
         "p_value": ("statistic", np.where(np.isnan(observed), np.nan, (1 + exceed) / (permutations + 1))),
         "null": (("replicate", "statistic"), null), "rho": ("family", rho[0]),
         "top_discovery": ("item", top_d), "top_validation": ("item", top_v)},
        coords={"statistic": list(STATISTICS)},
        attrs={"overlap_chance": float((k * k / sizes[sizes > 0]).sum() / k.sum()), "n_top": int(top_d.sum()),
               "n_overlap": int((top_d & top_v).sum()), "n_cells": int((sizes > 0).sum()),
               "permutations": permutations, "seed": seed, "top_share": top_share, "min_p": 1 / (permutations + 1)})


def signature_replication(result: AuditResult, responses: xr.Dataset, *, permutations: int = PERMUTATIONS,
                          seed: int = 0, top_share: float = TOP_SHARE) -> xr.Dataset:
    """Item-family signature replication between the two audit halves (NT 4.4, D.3 eq. 62-68).

    Parameters
    ----------
    result : AuditResult
        From :func:`bayesirt.audit.run_audit`.
    responses : xarray.Dataset
        The Dataset the audit ran on (checked by its SHA-256).
    permutations, seed, top_share
        As in :func:`signature_test` (NT: 500 permutations, top 20%).

    Returns
    -------
    xarray.Dataset
        :func:`signature_test`'s output labelled by ``item`` (item ids) and ``family``, with
        ``common_easiness`` and ``cell`` (item).
    """
    check_audit(result, responses, "signature_replication", estimated=False)
    fits = [fold.purification.final_fit for fold in result.folds]
    easiness = (fits[0].easiness + fits[1].easiness) / 2
    cell = blueprint_cells(responses["item_group"].values.astype(str), easiness)
    ds = signature_test(fits[0].family_effect, fits[1].family_effect, cell, permutations=permutations, seed=seed,
                        top_share=top_share)
    ds = ds.assign(common_easiness=("item", easiness), cell=("item", cell))
    ds.attrs.update(discovery="fold 0 audit half", validation="fold 1 audit half")
    return ds.assign_coords(item=responses["item_id"].values, family=list(result.summary["families"]))


def item_group_attribution(result: AuditResult, responses: xr.Dataset, *,
                           min_group_items: int = MIN_GROUP_ITEMS) -> xr.Dataset:
    """Sign replication of extreme item-group family effects (NT D.3 eq. 69-70).

    Parameters
    ----------
    result : AuditResult
    responses : xarray.Dataset
        The Dataset the audit ran on.
    min_group_items : int, default 20
        Smallest eligible item group (NT: 20).

    Returns
    -------
    xarray.Dataset
        ``gamma`` (group, family, half), ``group_items`` and ``eligible`` (group); per family and
        ``check`` (positive_1, ..., negative_1, ...) ``selected_group``, ``discovery_value``,
        ``validation_value``, ``replicated``; per family ``replicated_count``, ``share``,
        ``p_value``; attrs ``status`` ("estimated", or "not applicable: ..." with only
        ``group_items`` when fewer than 2 groups are eligible), pooled ``replicated``, ``checks``,
        ``share``, ``p_value``.
    """
    check_audit(result, responses, "item_group_attribution", estimated=False)
    check_int(min_group_items, name="min_group_items", caller="item_group_attribution", low=1)
    groups, index = _groups(responses)
    sizes = np.bincount(index, minlength=groups.size)
    eligible = sizes >= min_group_items
    coords = {"group": groups, "family": list(result.summary["families"])}
    if eligible.sum() < 2:
        return xr.Dataset({"group_items": ("group", sizes)}, coords={"group": groups}, attrs={
            "status": f"not applicable: {eligible.sum()} of {groups.size} item group(s) have at least "
                      f"{min_group_items} items; attribution needs 2", "min_group_items": min_group_items})
    gamma = np.stack([_group_means(fold.purification.final_fit.family_effect, index, groups.size)
                      for fold in result.folds], axis=-1)
    checks = _sign_checks(gamma[..., 0], gamma[..., 1], eligible, groups, HALVES)
    ds = xr.Dataset({"gamma": (("group", "family", "half"), gamma), "group_items": ("group", sizes),
                     "eligible": ("group", eligible)}, coords=coords | {"half": list(HALVES)})
    return ds.merge(checks, combine_attrs="no_conflicts").assign_attrs(min_group_items=min_group_items)


def score_contributions(y: np.ndarray, observed: np.ndarray, weights: np.ndarray, group: np.ndarray,
                        n_groups: int) -> np.ndarray:
    """Contribution (percentage points) of every item group to every model's anchor-minus-full
    score (module docstring; eq. 71 on complete data), shape (group, model); summing over groups
    gives ``100 (weighted_scores(y, weights, observed) - weighted_scores(y, 1, observed))``."""
    onehot = np.zeros((y.shape[0], n_groups))
    onehot[np.arange(y.shape[0]), group] = 1.0
    yo, o = np.where(observed, y, 0).astype(np.float64), observed.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        anchor = onehot.T @ (weights[:, None] * yo) / (weights @ o)
        full = onehot.T @ yo / o.sum(axis=0)
    return 100 * (anchor - full)


def group_contributions(result: AuditResult, responses: xr.Dataset) -> xr.Dataset:
    """Exact item-group contributions to the family score shifts in both directions, and sign
    retention of the extreme discovery-to-validation contributions (NT D.3 eq. 71-72).

    Returns
    -------
    xarray.Dataset
        ``contribution`` (direction, group, family); ``shift_pp`` (direction, family) = 100 x
        (mean anchor - mean full score) of the family's target models from the audit's target
        table (eq. 72 right-hand side); ``models`` (direction, family); the checks of
        :func:`_sign_checks` with ``forward_value`` (discovery->validation, where the extremes are
        chosen) and ``swapped_value`` (validation->discovery); attrs ``status`` and pooled counts.
    """
    check_audit(result, responses, "group_contributions", estimated=False)
    groups, index = _groups(responses)
    families = list(result.summary["families"])
    raw = responses["responses"].values
    contribution, shift, models = [], [], []
    for fold in result.folds:
        t, target = fold.target_index, fold.target
        per_model = score_contributions(raw[:, t], raw[:, t] != MISSING, fold.purification.weights, index, groups.size)
        used = target["anchor"].notna().to_numpy()
        code = np.searchsorted(families, target["family"].to_numpy())
        onehot = np.zeros((len(target), len(families)))
        onehot[np.arange(len(target)), code] = used
        n = onehot.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            contribution.append(np.where(used, per_model, 0.0) @ onehot / n)
            shift.append(100 * (np.where(used, target["anchor"] - target["full"], 0.0) @ onehot) / n)
        models.append(n.astype(np.int64))
    contribution = np.stack(contribution)
    ds = xr.Dataset({"contribution": (("direction", "group", "family"), contribution),
                     "shift_pp": (("direction", "family"), np.stack(shift)),
                     "models": (("direction", "family"), np.stack(models))},
                    coords={"direction": list(DIRECTIONS), "group": groups, "family": families})
    if groups.size < 2:
        return ds.assign_attrs(status="not applicable: a single item group has no sign checks (its contribution is "
                                      "the whole shift)")
    checks = _sign_checks(contribution[0], contribution[1], np.ones(groups.size, bool), groups, ("forward", "swapped"))
    return ds.merge(checks, combine_attrs="no_conflicts")


def _group_means(delta: np.ndarray, index: np.ndarray, n_groups: int) -> np.ndarray:
    """gamma_sf: family effects minus the family's all-item mean, averaged per group (eq. 69-70)."""
    star = delta - delta.mean(axis=0)
    sums = np.zeros((n_groups, delta.shape[1]))
    np.add.at(sums, index, star)
    return sums / np.bincount(index, minlength=n_groups)[:, None]


def _sign_checks(first: np.ndarray, second: np.ndarray, eligible: np.ndarray, groups: np.ndarray,
                 names: tuple[str, str]) -> xr.Dataset:
    """Each family's k most positive and k most negative eligible ``first`` values (group, family),
    k = min(2, eligible // 2), checked for the same nonzero sign in ``second``."""
    k = min(2, int(eligible.sum()) // 2)
    pool = np.flatnonzero(eligible)
    order = pool[np.argsort(-first[pool], axis=0, kind="stable")]  # (eligible group, family), descending
    rising = pool[np.argsort(first[pool], axis=0, kind="stable")]
    picked = np.concatenate([order[:k], rising[:k]]).T  # (family, check)
    fam = np.arange(first.shape[1])[:, None]
    a, b = first[picked, fam], second[picked, fam]
    same = (np.sign(a) == np.sign(b)) & (a != 0)
    hits, n = same.sum(axis=1), same.shape[1]
    labels = [f"positive_{j + 1}" for j in range(k)] + [f"negative_{j + 1}" for j in range(k)]
    pooled = int(hits.sum()), same.size
    return xr.Dataset(
        {"selected_group": (("family", "check"), groups[picked]), f"{names[0]}_value": (("family", "check"), a),
         f"{names[1]}_value": (("family", "check"), b), "replicated": (("family", "check"), same),
         "replicated_count": ("family", hits), "share": ("family", hits / n),
         "p_value": ("family", [binomtest(int(h), n, 0.5, alternative="greater").pvalue for h in hits])},
        coords={"check": labels},
        attrs={"status": "estimated", "replicated": pooled[0], "checks": pooled[1], "share": pooled[0] / pooled[1],
               "p_value": binomtest(pooled[0], pooled[1], 0.5, alternative="greater").pvalue})


def _groups(responses: xr.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Item groups in first-appearance order (as :func:`bayesirt.audit.engine.anchors.blueprint_cells`) and each item's index."""
    labels = responses["item_group"].values.astype(str)
    index, groups = pd.factorize(labels)
    return np.asarray(groups, dtype=str), index


