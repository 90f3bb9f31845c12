"""Discrimination- and reliability-matched diagnostic control of the near-tie audit (NT 4.1, B.2,
App. D.1 eq. 42-50).

Per outer fold, the frozen blueprint cells of the audit half are refined by the spectral
discrimination proxy ``g_i`` (eq. 42, the SD over audit-half models of the final capability
offsets): within each cell of ``n_c`` items, items ordered by ``g_i`` (ties by item index) are cut
into ``min(4, n_c)`` nonempty near-equal strata (eq. 43, the cutting rule of
:func:`bayesirt.audit.engine.anchors.blueprint_cells`). A control replicate samples without replacement, in
every stratum, as many items as the low-DIF anchors hold there, and gives each its cell's weight
``n_c / k_c`` (:func:`bayesirt.audit.engine.resampling.matched_random_weights` with ``strata``). Only the audit
half chooses the controls; the target half scores them, as in the primary controls, and gives the
held-out balance diagnostics (eq. 44-50): weighted mean corrected item-total correlation (CITC),
SEM, weighted Cronbach's alpha and the weighted mean ``g_i``.

Random streams are those of :func:`bayesirt.audit.engine.resampling.matched_random_controls`: replicate ``r``
of fold ``h`` uses child ``r`` of ``SeedSequence(spawn_seeds(seed, 2)[h])``, so the numbers depend
on ``(seed, h, r)`` only, not on workers or blocks.

Where NT is silent:

- Missing target cells are handled as in :func:`bayesirt.audit.engine.ranking.weighted_scores`: the weighted
  total of eq. 48 is renormalized over the model's observed items, ``S_m = (sum_i w_i) x`` its
  weighted score; ``s_i^2`` and ``r_i`` use the target models that answered item ``i``, with the
  rest score ``sum_{j != i} Y_jm`` renormalized likewise over the other items the model answered.
  Without missing cells these are NT's formulas.
- ``s_i^2`` and ``Var(S_m)`` are sample variances (ddof 1). CITC, alpha and every ratio do not
  depend on that choice; only the SEM level does.
- ``r_i`` is NaN when item ``i`` or its rest score is constant over those models (or fewer than
  two answered); such items are left out of the weighted CITC mean (weights renormalized over the
  others). Alpha is NaN when ``K_w < 2`` or the weighted total is constant.
- Every per-replicate number is computed row by row (elementwise products and row sums; totals
  from the scores, whose weighted sums of 0/1 responses are exact), so it is bit-identical however
  the replicates are cut into blocks or spread over workers.
- Fold averages are plain means of the two folds; control medians leave NaN replicates out.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import xarray as xr

from bayesirt.audit.engine.anchors import blueprint_cells
from bayesirt.audit.engine.ranking import prepared_responses, prepared_scores
from bayesirt.audit.engine.resampling import (CONTROL_BLOCK, TargetFold, add_randomization_summaries, check_integer,
                                 fold_statistics, pack_folds, replicate_dataset, control_blocks,
                                 matched_random_weights)
from bayesirt.audit.engine.result import AuditResult, check_audit
from bayesirt.data.responses import MISSING
from bayesirt.errors import DataError
from bayesirt.utils.parallel import parallel_map, spawn_seeds

__all__ = ["discrimination_matched_controls", "discrimination_strata", "corrected_item_total", "balance_diagnostics",
           "DISCRIMINATION_STRATA", "DIAGNOSTICS", "subtest_balance", "item_statistics", "target_folds"]

#: Discrimination strata per blueprint cell (NT eq. 43: ``q_c = min(4, n_c)``).
DISCRIMINATION_STRATA = 4
#: The balance diagnostics, in the order of the ``diagnostic`` coordinate: weighted mean ``g_i``,
#: weighted mean CITC (eq. 45), SEM (eq. 47) and weighted Cronbach's alpha (eq. 50).
DIAGNOSTICS = ("g", "citc", "sem", "alpha")
_WITHIN = "within"


def discrimination_strata(cell, g) -> np.ndarray:
    """Discrimination strata nested in the blueprint cells (NT eq. 43).

    Parameters
    ----------
    cell : array_like of int, shape (item,)
        Frozen blueprint cell of every item.
    g : array_like, shape (item,)
        Spectral discrimination proxy ``g_i`` (eq. 42; ``Purification.offsets_sd``).

    Returns
    -------
    ndarray of int, shape (item,)
        Stratum ``0..S-1``: in each cell (in order of first appearance) items sorted by ``g``, ties
        by item index, cut by ``numpy.array_split`` into ``min(4, n_c)`` parts, lowest ``g`` first.
    """
    cell, g = np.asarray(cell), np.asarray(g, dtype=np.float64)
    if cell.ndim != 1 or not np.issubdtype(cell.dtype, np.integer) or g.shape != cell.shape or not np.all(
            np.isfinite(g)):
        raise DataError(f"cell {cell.shape} and g {g.shape} must be 1-D arrays of the same length: integer cells "
                        "and finite discrimination proxies, one per item")
    return blueprint_cells(cell, g, DISCRIMINATION_STRATA)


class _Items(NamedTuple):
    """Target-half item statistics the balance diagnostics need."""

    citc: np.ndarray  # r_i (item,), NaN for a constant item or rest score
    variance: np.ndarray  # s_i^2 (item,)


def _centred(values, mask) -> tuple[np.ndarray, np.ndarray]:
    """Row-centred values over ``mask`` (0 outside it) and whether each row is constant there."""
    count = mask.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(mask, values, 0).sum(axis=1, keepdims=True) / count
    constant = (np.where(mask, values, -np.inf).max(axis=1) == np.where(mask, values, np.inf).min(axis=1))
    return np.where(mask, values - mean, 0), constant | (count[:, 0] < 2)


def item_statistics(yobs, obs) -> _Items:
    """``r_i`` and ``s_i^2`` of prepared responses (:func:`bayesirt.audit.engine.ranking.prepared_responses`)."""
    items, models = yobs.shape
    if models < 2:
        raise DataError(f"the balance diagnostics need at least 2 target models; got {models}")
    answered = np.ones(yobs.shape, dtype=bool) if obs is None else obs > 0
    others = answered.sum(axis=0) - answered  # other items each model answered
    with np.errstate(invalid="ignore", divide="ignore"):
        rest = (yobs.sum(axis=0) - yobs) * ((items - 1) / others)  # factor 1.0 without missing cells
    x, x_constant = _centred(yobs, answered & (others > 0))
    r, r_constant = _centred(rest, answered & (others > 0))
    with np.errstate(invalid="ignore", divide="ignore"):
        citc = (x * r).sum(axis=1) / np.sqrt((x * x).sum(axis=1) * (r * r).sum(axis=1))
    citc[x_constant | r_constant] = np.nan
    x, constant = _centred(yobs, answered)
    with np.errstate(invalid="ignore", divide="ignore"):
        variance = np.where(constant, 0.0, (x * x).sum(axis=1) / (answered.sum(axis=1) - 1))
    return _Items(citc, variance)


def subtest_balance(w, g, items: _Items, scores) -> np.ndarray:
    """Diagnostics (replicate, 4) in :data:`DIAGNOSTICS` order of weights (replicate, item) whose
    weighted scores are ``scores`` (replicate, model)."""
    w = np.asarray(w, dtype=np.float64)
    mass = w.sum(axis=1)
    defined = ~np.isnan(items.citc)
    error = (w * w * items.variance).sum(axis=1)  # sum_i w_i^2 s_i^2
    total_variance = np.var(scores * mass[:, None], axis=1, ddof=1)  # Var_m S_m(w)
    selected = (w > 0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        citc = (w[:, defined] * items.citc[defined]).sum(axis=1) / w[:, defined].sum(axis=1)
        alpha = selected / (selected - 1) * (1 - error / total_variance)
    alpha[(selected < 2) | ~(total_variance > 0)] = np.nan
    return np.stack([(w * g).sum(axis=1) / mass, citc, np.sqrt(error) / mass, alpha], axis=1)


def corrected_item_total(y, *, observed=None) -> np.ndarray:
    """Corrected item-total correlation of every item (NT eq. 44).

    Parameters
    ----------
    y : array_like, shape (item, model)
        Responses 0/1 of the target models.
    observed : array_like of bool, shape (item, model), optional
        False marks a missing cell (statistics over the models that answered; module notes).

    Returns
    -------
    ndarray of float64, shape (item,)
        ``Corr_m(Y_im, sum_{j != i} Y_jm)``; NaN when the item or its rest score is constant.
    """
    return item_statistics(*prepared_responses(y, observed, "corrected_item_total")).citc


def balance_diagnostics(y, w, g, *, observed=None) -> np.ndarray:
    """Held-out balance diagnostics of one or more weighted subtests (NT eq. 44-50).

    Parameters
    ----------
    y, observed : as in :func:`corrected_item_total`
    w : array_like, shape (item,) or (replicate, item)
        Nonnegative item weights, not all zero.
    g : array_like, shape (item,)
        Spectral discrimination proxy ``g_i`` (eq. 42).

    Returns
    -------
    ndarray of float64, shape (4,) or (replicate, 4)
        :data:`DIAGNOSTICS`: ``sum w g / sum w``; weighted mean CITC (eq. 45, over items with a
        defined ``r_i``); ``SEM = sqrt(sum w^2 s^2) / sum w`` (eq. 47); weighted alpha (eq. 50).
    """
    yobs, obs = prepared_responses(y, observed, "balance_diagnostics")
    w, g = np.asarray(w, dtype=np.float64), np.asarray(g, dtype=np.float64)
    if w.ndim not in (1, 2) or w.shape[-1] != yobs.shape[0] or g.shape != (yobs.shape[0],):
        raise DataError(f"w {w.shape} and g {g.shape} must have one entry per item ({yobs.shape[0]}); pass w of shape "
                        "(item,) or (replicate, item)")
    if not np.all(np.isfinite(w)) or np.any(w < 0) or np.any(w.sum(axis=-1) == 0) or not np.all(np.isfinite(g)):
        raise DataError("w must be finite nonnegative weights with a positive sum per subtest, and g finite")
    w2 = np.atleast_2d(w)
    out = subtest_balance(w2, g, item_statistics(yobs, obs), prepared_scores(yobs, obs, w2))
    return out[0] if w.ndim == 1 else out


def target_folds(result: AuditResult, responses) -> list[TargetFold]:
    """The folds' target halves as :class:`~bayesirt.audit.engine.resampling.TargetFold` (after
    :func:`~bayesirt.audit.engine.result.check_audit`)."""
    values = responses["responses"].transpose("item", "model").values
    observed = values != MISSING
    y = np.where(observed, values, 0).astype(np.int8)
    folds = []
    for f in result.folds:
        folds.append(TargetFold(y=y[:, f.target_index], observed=observed[:, f.target_index],
                                full=f.target["full"].to_numpy(), cell=f.purification.cell,
                                anchor_weights=f.purification.weights, pairs=f.pairs,
                                extra_pairs={_WITHIN: f.within_pairs}))
    return folds


def _control_task(task) -> tuple[np.ndarray, ...]:
    """Replicates ``start..stop-1`` of every fold: counts (set, fold, replicate), tau-b (fold,
    replicate) and balance diagnostics (diagnostic, fold, replicate)."""
    folds, strata, gs, items, fold_seeds, start, stop = task
    out = []
    for fold, stratum, g, item_stats, seed in zip(folds, strata, gs, items, fold_seeds, strict=True):
        w = matched_random_weights(fold.cell, fold.anchor_weights, stop - start, seed, start=start, strata=stratum)
        scores = prepared_scores(*fold.responses(), w)
        out.append((*fold_statistics(fold.pair_sets, fold.full, scores), subtest_balance(w, g, item_stats, scores).T))
    return tuple(np.stack([o[k] for o in out], axis=-2) for k in range(4))


def discrimination_matched_controls(result: AuditResult, responses: xr.Dataset, *, replicates: int = 1000,
                                    seed: int = 0, workers: int | None = 1, scheduler: str | None = None,
                                    progress: bool = False) -> xr.Dataset:
    """Low-DIF near-tie reversals against discrimination-matched controls, with balance (NT 4.1, B.2, D.1).

    Parameters
    ----------
    result : AuditResult
        :func:`bayesirt.audit.run_audit` output with eligible near-tie pairs; its frozen cells,
        anchors, ``g_i`` (``purification.offsets_sd``) and pair sets are used as they are.
    responses : xarray.Dataset
        The response Dataset ``run_audit`` was given (target responses are read at ``target_index``).
    replicates : int, default 1000
        Controls per fold (NT: 1,000).
    seed : int, default 0
        See the module notes. With the primary controls' seed, replicate ``r`` would reuse their
        uniform keys (within finer strata); use another seed for independent controls.
    workers, scheduler, progress
        Passed to :func:`bayesirt.utils.parallel.parallel_map` (blocks of
        :data:`bayesirt.audit.engine.resampling.CONTROL_BLOCK` replicates); the numbers do not depend on them.

    Returns
    -------
    xarray.Dataset
        Dims ``pair_set`` (``"primary"``, ``"within"``), ``fold``, ``replicate``, ``diagnostic``
        (:data:`DIAGNOSTICS`), ``item``. As :func:`bayesirt.audit.engine.resampling.matched_random_controls`:
        ``rate`` (eq. 36), ``eligible``, ``reversed``, ``tau_b``, ``mean_tau_b``, the ``observed_*``
        low-DIF values and the summary ``median``, ``lower``, ``upper``, ``excess_pp``, ``p_value``,
        ``min_resolvable_p``, ``undefined`` per pair set. Balance: ``balance`` (diagnostic, fold,
        replicate), ``mean_balance`` (fold average per replicate), ``observed_balance`` (diagnostic,
        fold), ``observed_mean_balance``, ``control_median_balance`` (median of ``mean_balance``);
        NT Table 5: ``g_ratio``, ``citc_ratio``, ``sem_ratio`` (low-DIF / control median) and
        ``abs_delta_alpha``. ``stratum`` (fold, item): the discrimination strata.
    """
    check_audit(result, responses, "discrimination_matched_controls")
    replicates = check_integer(replicates, "replicates", "discrimination_matched_controls")
    seed = check_integer(seed, "seed", "discrimination_matched_controls", minimum=0)
    packed, names = pack_folds(target_folds(result, responses), "discrimination_matched_controls")
    gs = [np.asarray(f.purification.offsets_sd, dtype=np.float64) for f in result.folds]
    strata = [discrimination_strata(f.purification.cell, g) for f, g in zip(result.folds, gs, strict=True)]
    items = [item_statistics(*fold.responses()) for fold in packed]
    observed, observed_balance = [], []
    for fold, g, item_stats in zip(packed, gs, items, strict=True):
        scores = prepared_scores(*fold.responses(), fold.anchor_weights)
        observed.append(fold_statistics(fold.pair_sets, fold.full, scores))
        observed_balance.append(subtest_balance(fold.anchor_weights[None], g, item_stats, scores[None])[0])
    fold_seeds = spawn_seeds(seed, len(packed))
    tasks = [(packed, strata, gs, items, fold_seeds, start, stop)
             for start, stop in control_blocks(replicates, block=CONTROL_BLOCK)]
    blocks = parallel_map(_control_task, tasks, workers=workers, scheduler=scheduler, progress=progress,
                          description="discrimination-matched controls")
    eligible, reversed_, tau, balance = (np.concatenate([b[k] for b in blocks], axis=-1) for k in range(4))
    ds = replicate_dataset(names, eligible, reversed_, tau, observed)
    add_randomization_summaries(ds)
    mean_balance = balance.mean(axis=1)  # averaged across the two directions, per replicate index
    low = np.mean(observed_balance, axis=0)
    with np.errstate(invalid="ignore"):
        control = np.array([np.median(v[~np.isnan(v)]) if (~np.isnan(v)).any() else np.nan for v in mean_balance])
        ratio = low / control
    ds = ds.assign_coords(diagnostic=list(DIAGNOSTICS)).assign(
        balance=(("diagnostic", "fold", "replicate"), balance),
        mean_balance=(("diagnostic", "replicate"), mean_balance),
        observed_balance=(("diagnostic", "fold"), np.stack(observed_balance, axis=1)),
        observed_mean_balance=("diagnostic", low), control_median_balance=("diagnostic", control),
        g_ratio=ratio[0], citc_ratio=ratio[1], sem_ratio=ratio[2], abs_delta_alpha=abs(low[3] - control[3]),
        stratum=(("fold", "item"), np.stack(strata)))
    ds.attrs.update(seed=seed, replicates=replicates, strata_per_cell=DISCRIMINATION_STRATA,
                    reference="NT 4.1, B.2, D.1 eq. 42-50")
    return ds
