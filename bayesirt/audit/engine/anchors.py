"""Low-DIF anchors: blueprint cells, within-cell selection, restoring weights and the three-round
purification of NT 3.3 and App. C.5.

- Blueprint cells: within each item group of n_s items, items ordered by easiness b (ties by
  original item index) and cut into min(4, n_s) nonempty near-equal strata (sizes differ by at
  most one, larger strata first).
- Selection: in each cell c of n_c items keep k_c = max(1, round(anchor_fraction n_c)) items with the
  smallest D_i (ties by item index); ``round`` is NumPy's (halves to even, as Python's).
- Weights (eq. 6-7): n_c / k_c on selected items, 0 elsewhere, so every cell keeps its mass n_c
  and the weights sum to the number of items.
- Purification: S0 = all items; for rounds t = 1, 2, 3: rank-K* spectral offsets fitted on the
  rows S(t-1), residual DIF of all items, cells from the round's easiness, S(t) = the selection.
  The third round's cells and weights are frozen; a final refit on S(3) stores the items' final
  DIF signatures. The Jaccard overlap of successive anchor sets is recorded, never used to stop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayesirt.audit.adjustment.bayes_mirt import bayes_mirt_offsets
from bayesirt.audit.adjustment.joint_mirt import direct_offsets
from bayesirt.audit.adjustment.spectral import spectral_offsets, working_responses
from bayesirt.audit.engine.dif import DIFFit, fit_family_dif
from bayesirt.audit.engine.settings import ADJUSTMENTS, ANCHOR_FRACTION
from bayesirt.errors import DataError
from bayesirt.utils.validation import check_number

__all__ = ["ADJUSTMENTS", "capability_offsets", "ANCHOR_FRACTION", "PURIFICATION_ROUNDS", "EASINESS_STRATA",
           "blueprint_cells", "select_anchors",
           "anchor_weights", "purification_rounds", "purify", "Purification"]

PURIFICATION_ROUNDS = 3
EASINESS_STRATA = 4


def capability_offsets(y: np.ndarray, observed: np.ndarray, rows: np.ndarray, k: int, *, seed: int,
                       adjustment: str = "spectral", weights: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Capability offsets (item, model) learned from the item ``rows`` (bool mask), and the rank
    used: :func:`bayesirt.audit.adjustment.spectral.spectral_offsets`,
    :func:`bayesirt.audit.adjustment.joint_mirt.direct_offsets` or
    :func:`bayesirt.audit.adjustment.bayes_mirt.bayes_mirt_offsets`. Model ``weights`` (the Bayesian
    bootstrap) are taken by the spectral adjustment only."""
    if weights is not None and adjustment != "spectral":
        raise DataError(f"model weights (the Bayesian bootstrap) need the spectral adjustment, not {adjustment!r}; "
                        "use --adjustment spectral or another --bayes-method")
    if adjustment == "direct-mirt":
        return direct_offsets(y, observed, np.flatnonzero(rows), k, seed=seed)
    if adjustment == "bayes-mirt":
        return bayes_mirt_offsets(y, observed, np.flatnonzero(rows), k, seed=seed)
    x, _, s = working_responses(y, observed, weights)
    return spectral_offsets(x, s, np.flatnonzero(rows), k, seed=seed, weights=weights)


def blueprint_cells(item_group: np.ndarray, easiness: np.ndarray, strata: int = EASINESS_STRATA) -> np.ndarray:
    """Cell index numbered 0..C-1 by item group (in first-appearance order), then stratum from
    least to most easy. ``easiness`` (item,) gives cells (item,); (draw, item) gives the cells of
    every draw at once, (draw, item)."""
    easiness = np.asarray(easiness)
    rows = np.atleast_2d(easiness)
    cell = np.empty(rows.shape, dtype=np.int64)
    draw = np.arange(rows.shape[0])[:, None]
    next_id = 0
    for group in pd.unique(item_group):
        members = np.flatnonzero(item_group == group)
        order = members[np.argsort(rows[:, members], axis=1, kind="stable")]  # ties keep item order
        sizes = [part.size for part in np.array_split(members, min(strata, members.size))]
        cell[draw, order] = next_id + np.repeat(np.arange(len(sizes)), sizes)  # stratum by rank
        next_id += len(sizes)
    return cell if easiness.ndim > 1 else cell[0]


def select_anchors(cell: np.ndarray, dif_range: np.ndarray, anchor_fraction: float = ANCHOR_FRACTION) -> np.ndarray:
    """Boolean mask of the k_c lowest-D items of every cell (ties by item index)."""
    check_number(anchor_fraction, name="anchor_fraction", caller="select_anchors", low=0, high=1, low_open=True)
    keep = np.zeros(cell.size, bool)
    order = np.lexsort((np.arange(cell.size), dif_range, cell))  # by cell, then D, then index
    sorted_cell = cell[order]
    starts = np.flatnonzero(np.r_[True, sorted_cell[1:] != sorted_cell[:-1]])
    sizes = np.diff(np.r_[starts, cell.size])
    k = np.maximum(1, np.rint(anchor_fraction * sizes).astype(np.int64))
    rank = np.arange(cell.size) - np.repeat(starts, sizes)
    keep[order] = rank < np.repeat(k, sizes)
    return keep


def anchor_weights(cell: np.ndarray, selected: np.ndarray) -> np.ndarray:
    """Cell-restoring weights n_c / k_c on selected items, 0 elsewhere (eq. 6)."""
    n = np.bincount(cell)
    k = np.bincount(cell, weights=selected.astype(float), minlength=n.size)
    if (k[n > 0] == 0).any():
        raise DataError("a blueprint cell has no selected item, so its mass cannot be restored: select at least "
                        "one item per cell")
    return np.where(selected, n[cell] / np.maximum(k[cell], 1), 0.0)


@dataclass(frozen=True)
class Purification:
    """Result of :func:`purify` for one audit half.

    Attributes
    ----------
    rounds : pandas.DataFrame
        One row per round: items kept, Jaccard overlap with the previous set, the rank used,
        DIF cycles and last change.
    cell : ndarray (item,)
        Frozen blueprint cells of the last round.
    selected : ndarray of bool (item,)
        The anchors S(3).
    weights : ndarray (item,)
        Restoring weights (eq. 6).
    selection_fit : DIFFit
        The last round's DIF fit on all items (the D_i that chose the anchors).
    selection_rows : ndarray of bool (item,)
        The rows S(t-1) whose decomposition gave that fit's offsets.
    final_fit : DIFFit
        The refit with offsets from S(3): the stored item signatures.
    offsets_sd : ndarray (item,)
        SD over audit models of the final offsets (the spectral discrimination proxy g_i, NT
        eq. 42, used by the matched-discrimination diagnostic).
    k, seed : int
        The dimension asked for and the SVD seed: with the rows above, they reproduce every
        round's offsets (:func:`capability_offsets`, with ``adjustment``).
    adjustment : str
        The ability adjustment used (``ADJUSTMENTS``).
    """

    rounds: pd.DataFrame
    cell: np.ndarray
    selected: np.ndarray
    weights: np.ndarray
    selection_fit: DIFFit
    selection_rows: np.ndarray
    final_fit: DIFFit
    offsets_sd: np.ndarray
    k: int
    seed: int
    adjustment: str


def purification_rounds(y: np.ndarray, observed: np.ndarray, family: np.ndarray, n_families: int,
                        item_group: np.ndarray, k: int, *, anchor_fraction: float = ANCHOR_FRACTION,
                        rounds: int = PURIFICATION_ROUNDS, seed: int = 0, dif_options: dict | None = None,
                        adjustment: str = "spectral", weights: np.ndarray | None = None):
    """The rounds of :func:`purify` without its final refit; ``weights`` are model frequency
    weights (the Bayesian bootstrap, spectral adjustment only).

    Returns
    -------
    (rounds, cell, selected, selection_fit, selection_rows)
        The per-round table, the last round's cells, its anchors S(rounds), its DIF fit and the
        rows S(rounds - 1) whose offsets gave that fit (as in :class:`Purification`).
    """
    dif_options = dif_options or {}
    current = np.ones(y.shape[0], bool)
    rows = []
    for t in range(1, rounds + 1):
        offsets, rank = capability_offsets(y, observed, current, k, seed=seed, adjustment=adjustment, weights=weights)
        fit = fit_family_dif(y, observed, offsets, family, n_families, weights=weights, **dif_options)
        cell = blueprint_cells(item_group, fit.easiness)
        chosen = select_anchors(cell, fit.dif_range, anchor_fraction)
        jaccard = (chosen & current).sum() / (chosen | current).sum()
        rows.append({"round": t, "anchors": int(chosen.sum()), "jaccard_with_previous": jaccard, "rank": rank,
                     "dif_cycles": fit.cycles, "dif_last_change": fit.last_change})
        rows_used, current = current, chosen
    return pd.DataFrame(rows), cell, current, fit, rows_used


def purify(y: np.ndarray, observed: np.ndarray, family: np.ndarray, n_families: int, item_group: np.ndarray, k: int,
           *, anchor_fraction: float = ANCHOR_FRACTION, rounds: int = PURIFICATION_ROUNDS, seed: int = 0,
           dif_options: dict | None = None, adjustment: str = "spectral") -> Purification:
    """Three-round anchor purification in one audit half (NT C.5).

    Parameters
    ----------
    y, observed : ndarray (item, model)
        The audit half's responses.
    family : ndarray of int (model,)
        Family index 0..n_families-1.
    n_families : int
    item_group : ndarray (item,)
    k : int
        The fold's selected dimension K*.
    anchor_fraction : float
        Anchor fraction (0.5 primary; 0.3 and 0.7 as sensitivity).
    rounds : int
        Purification rounds (NT: 3).
    seed : int
        Seeds the randomized SVDs.
    dif_options : dict, optional
        Passed to :func:`bayesirt.audit.engine.dif.fit_family_dif` (schedule overrides).
    adjustment : {"spectral", "direct-mirt", "bayes-mirt"}
        How each round's capability offsets are learned (:func:`capability_offsets`).

    Returns
    -------
    Purification
    """
    rounds_table, cell, current, fit, rows_used = purification_rounds(
        y, observed, family, n_families, item_group, k, anchor_fraction=anchor_fraction, rounds=rounds, seed=seed,
        dif_options=dif_options, adjustment=adjustment)
    offsets, _ = capability_offsets(y, observed, current, k, seed=seed, adjustment=adjustment)
    final = fit_family_dif(y, observed, offsets, family, n_families, **(dif_options or {}))
    return Purification(rounds=rounds_table, cell=cell, selected=current, weights=anchor_weights(cell, current),
                        selection_fit=fit, selection_rows=rows_used, final_fit=final, offsets_sd=offsets.std(axis=1),
                        k=k, seed=seed, adjustment=adjustment)
