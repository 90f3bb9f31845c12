"""Matched-random references of the near-tie audit: blueprint-matched random subtests (NT 3.4 and
C.6, eq. 10-11 and 35-36), the fold packing, counting and summaries that every resampling
reference shares (the bootstraps live in :mod:`bayesirt.audit.engine.bootstrap`).

Every function takes the folds' target halves as :class:`TargetFold` objects (or mappings with
the same keys) whose near-tie pair sets were frozen from the observed full scores.

Random streams. Control replicate ``r`` of fold ``h`` draws from its own generator,
``SeedSequence(fold_seed_h).spawn(r + 1)[r]`` with ``fold_seed_h = spawn_seeds(seed, folds)[h]``,
so a replicate's subtest depends on ``(seed, h, r)`` only: results are bit-identical whatever the
number of workers and however the replicates are cut into blocks, and the first ``R`` replicates
of a longer run are those of a run of ``R``. Nothing touches a global seed.

Undefined replicates. A replicate whose pooled denominator is zero (no pair eligible in any
fold) has no rate (NaN). It is left out of the median, the percentiles and the p-value, and
counted in the ``undefined`` variable of the result; the p-value and its resolution use the
number of defined replicates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import xarray as xr

from bayesirt.errors import DataError
from bayesirt.utils.options import declare, option
from bayesirt.utils.validation import parameter_error
from bayesirt.utils.parallel import SCHEDULER, WORKERS, parallel_map, spawn_seeds
from bayesirt.audit.engine.settings import EPSILON
from bayesirt.audit.engine.ranking import (GAP_TOLERANCE, both_answered_gaps, pair_arrays, prepared_responses, prepared_scores, kendall_tau_b,
                              pooled_rate, reversal_counts)

__all__ = ["TargetFold", "control_blocks", "matched_random_weights", "randomization_summary",
           "matched_random_controls", "PRIMARY", "CONTROL_BLOCK",
           "pack_folds", "fold_statistics", "percentile_range", "replicate_dataset", "add_randomization_summaries", "check_integer"]

#: Name of a fold's primary pair set in the ``pair_set`` coordinate of results.
PRIMARY = "primary"
#: Replicates per parallel task (results do not depend on it).
CONTROL_BLOCK = 50
_PERCENTILES = (2.5, 97.5)


@dataclass
class TargetFold:
    """One outer fold's target half: what the matched controls and the bootstrap score.

    Parameters
    ----------
    y : array_like, shape (item, model)
        Target-half responses 0/1.
    cell : array_like of int, shape (item,)
        Blueprint cell ``0..C-1`` of every item (built on the fold's audit half).
    anchor_weights : array_like, shape (item,)
        Low-DIF weights: ``n_c / k_c`` on the ``k_c`` anchors of cell ``c``, 0 elsewhere (NT eq. 6).
    pairs : tuple (i, j) of int arrays
        The frozen primary near-tie pairs (:func:`bayesirt.audit.engine.ranking.near_tie_pairs` on ``full``).
    observed : array_like of bool, shape (item, model), optional
        False marks a missing cell; default all observed.
    full : array_like, shape (model,), optional
        Observed full scores; computed from ``y`` when omitted and checked against it when given.
    extra_pairs : mapping of str to (i, j), optional
        Further frozen pair sets (e.g. ``{"within": ...}``) scored on the same replicates.
    """

    y: np.ndarray
    cell: np.ndarray
    anchor_weights: np.ndarray
    pairs: tuple[np.ndarray, np.ndarray]
    observed: np.ndarray | None = None
    full: np.ndarray | None = None
    extra_pairs: Mapping[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


class _Packed(NamedTuple):
    """A validated fold in the compact form sent to workers (responses as bits)."""

    y_bits: np.ndarray
    observed_bits: np.ndarray | None
    items: int
    full: np.ndarray
    anchor_weights: np.ndarray
    cell: np.ndarray
    pair_sets: tuple[tuple[np.ndarray, np.ndarray], ...]

    def responses(self) -> tuple[np.ndarray, np.ndarray | None]:
        yobs = np.unpackbits(self.y_bits, axis=0, count=self.items).astype(np.float64)
        if self.observed_bits is None:
            return yobs, None
        return yobs, np.unpackbits(self.observed_bits, axis=0, count=self.items).astype(np.float64)


def pack_folds(folds, caller) -> tuple[tuple[_Packed, ...], list[str]]:
    try:
        folds = [TargetFold(**f) if isinstance(f, Mapping) else f for f in folds]
    except TypeError as err:
        raise DataError(f"{caller}: a fold mapping does not match TargetFold ({err}); use its field names") from None
    if not folds or not all(isinstance(f, TargetFold) for f in folds):
        raise DataError(f"{caller} needs a non-empty list of TargetFold objects (or mappings with its fields)")
    names = [PRIMARY, *(folds[0].extra_pairs or {})]
    packed = []
    for h, fold in enumerate(folds):
        extra = dict(fold.extra_pairs or {})
        if [PRIMARY, *extra] != names or PRIMARY in extra:
            raise DataError(f"fold {h} has pair sets {[PRIMARY, *extra]} but fold 0 has {names}; give every fold "
                            f"the same extra_pairs names (not {PRIMARY!r})")
        yobs, obs = prepared_responses(fold.y, fold.observed, caller)
        items, models = yobs.shape
        full = prepared_scores(yobs, obs, np.ones(items))
        if np.isnan(full).any():
            raise DataError(f"fold {h} has a model without observed responses; drop it before the audit")
        if fold.full is not None and not np.allclose(np.asarray(fold.full, dtype=float), full, rtol=0, atol=1e-9):
            raise DataError(f"fold {h}: full does not equal the mean observed response of each model; pass the "
                            "scores of this fold's target half (or omit full)")
        cell, counts = _cells(fold.cell, items, f"fold {h}")
        weights = np.asarray(fold.anchor_weights, dtype=np.float64)
        if weights.shape != (items,) or not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() == 0:
            raise DataError(f"fold {h}: anchor_weights must be {items} finite nonnegative weights, not all zero")
        chosen = np.bincount(cell, weights=weights > 0, minlength=counts.size)
        restoring = np.divide(counts, chosen, out=np.zeros(counts.size), where=chosen > 0)[cell]
        if not np.allclose(weights[weights > 0], restoring[weights > 0], rtol=1e-6):
            raise DataError(f"fold {h}: anchor_weights are not n_c / k_c on the anchors of each cell (NT eq. 6); "
                            "pass the blueprint-restoring weights")
        pair_sets = tuple(tuple(p.astype(np.int32) for p in pair_arrays(pairs, models))
                          for pairs in (fold.pairs, *extra.values()))
        observed_bits = None if obs is None else np.packbits(obs.astype(bool), axis=0)
        packed.append(_Packed(np.packbits(yobs.astype(bool), axis=0), observed_bits, items, full, weights, cell,
                              pair_sets))
    if len({p.items for p in packed}) > 1:
        raise DataError(f"folds have {sorted({p.items for p in packed})} items; every target half must score the "
                        "same items")
    return tuple(packed), names


def _cells(cell, items, where, name="cell") -> tuple[np.ndarray, np.ndarray]:
    cell = np.asarray(cell)
    if cell.shape != (items,) or not np.issubdtype(cell.dtype, np.integer) or (cell.size and cell.min() < 0):
        raise DataError(f"{where}: {name} must be {items} nonnegative integer {name} indices, one per item")
    return cell.astype(np.intp), np.bincount(cell)


def check_integer(value, name, caller, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise parameter_error(name, caller, "a positive integer" if minimum == 1 else "a non-negative integer", value)
    return int(value)


def control_blocks(replicates: int, *, block: int = CONTROL_BLOCK) -> list[tuple[int, int]]:
    """Replicate ranges ``(start, stop)`` of at most ``block`` replicates covering ``0..replicates-1``."""
    replicates = check_integer(replicates, "replicates", "control_blocks")
    block = check_integer(block, "block", "control_blocks")
    return [(start, min(start + block, replicates)) for start in range(0, replicates, block)]


def matched_random_weights(cell, anchor_weights, replicates: int, seed: int, *, start: int = 0,
                           strata=None) -> np.ndarray:
    """Blueprint-matched random subtests (NT C.6, eq. 35; with ``strata``, NT D.1 eq. 43).

    Replicate ``r`` samples, uniformly without replacement, ``k_c`` items of every cell ``c`` (``k_c``
    the anchors of ``c``: items with a positive anchor weight) and gives them weight ``n_c / k_c``.
    With refined ``strata`` it samples in every stratum as many items as it holds anchors; the
    sampled items still get their cell's weight ``n_c / k_c``.

    Parameters
    ----------
    cell : array_like of int, shape (item,)
    anchor_weights : array_like, shape (item,)
    replicates : int
        Number of replicates returned: ``start .. start + replicates - 1``.
    seed : int
        Replicate ``r`` uses the generator of ``SeedSequence(seed).spawn(r + 1)[r]``, so any cut of
        the replicates into blocks gives the same weights.
    start : int, default 0
        Index of the first replicate.
    strata : array_like of int, shape (item,), optional
        Refined strata nested in the cells (every stratum inside one cell), e.g. the discrimination
        strata of :func:`bayesirt.audit.diagnostics.matched.discrimination_strata`. Default: the cells.

    Returns
    -------
    ndarray of float32, shape (replicates, item)
        Every row has exactly ``k_c`` nonzero weights in cell ``c`` (and the anchors' count in every
        stratum), summing to ``n_c`` when ``k_c > 0``.
    """
    selected = np.asarray(anchor_weights) > 0
    if selected.ndim != 1:
        raise DataError(f"anchor_weights must be a 1-D array (item,); got shape {selected.shape}")
    cell, counts = _cells(cell, selected.size, "matched_random_weights")
    stratum, sizes = (cell, counts) if strata is None else _cells(strata, selected.size, "matched_random_weights",
                                                                  "stratum")
    stratum_cell = np.zeros(sizes.size, dtype=np.intp)
    stratum_cell[stratum] = cell
    if np.any(stratum_cell[stratum] != cell):
        raise DataError("matched_random_weights: a stratum holds items of several cells; pass strata nested in the "
                        "cells")
    replicates = check_integer(replicates, "replicates", "matched_random_weights")
    seed = check_integer(seed, "seed", "matched_random_weights", minimum=0)
    start = check_integer(start, "start", "matched_random_weights", minimum=0)
    keys = np.stack([np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(r,))).random(cell.size)
                     for r in range(start, start + replicates)])
    k_cell = np.bincount(cell, weights=selected, minlength=counts.size).astype(np.intp)
    chosen = np.bincount(stratum, weights=selected, minlength=sizes.size).astype(np.intp)
    by_stratum = np.split(np.argsort(stratum, kind="stable"), np.cumsum(sizes)[:-1])
    weights = np.zeros((replicates, cell.size), dtype=np.float32)
    rows = np.arange(replicates)[:, None]
    for s in np.flatnonzero(chosen):
        items, c = by_stratum[s], stratum_cell[s]
        draw = np.argsort(keys[:, items], axis=1)[:, :chosen[s]]  # the smallest keys: a uniform subset
        weights[rows, items[draw]] = counts[c] / k_cell[c]
    return weights


def randomization_summary(observed: float, replicates) -> dict[str, float]:
    """Compare an observed rate with its matched-random reference (NT eq. 10-11).

    Parameters
    ----------
    observed : float
        ``T_DIF``, the low-DIF pooled rate.
    replicates : array_like, shape (replicate,)
        ``T_r``; NaN entries (undefined replicates) are left out.

    Returns
    -------
    dict
        ``median``, ``lower``, ``upper`` (2.5th and 97.5th percentiles, linear interpolation),
        ``excess_pp = 100 (T_DIF - median)``, ``p_value = (1 + #{T_r >= T_DIF}) / (R + 1)``,
        ``min_resolvable_p = 1 / (R + 1)`` (``R`` the defined replicates) and ``undefined``, the
        number of NaN replicates. Statistics without data are NaN.
    """
    values = np.asarray(replicates, dtype=np.float64).ravel()
    defined = values[~np.isnan(values)]
    n = defined.size
    median = float(np.median(defined)) if n else np.nan
    lower, upper = percentile_range(defined)
    valid = n > 0 and not np.isnan(observed)
    return {"median": median, "lower": lower, "upper": upper, "excess_pp": 100 * (observed - median),
            "p_value": (1 + int(np.sum(defined >= observed))) / (n + 1) if valid else np.nan,
            "min_resolvable_p": 1 / (n + 1), "undefined": int(values.size - n)}


def percentile_range(values) -> tuple[float, float]:
    """2.5th and 97.5th percentiles of the non-NaN values (linear interpolation); NaN if none."""
    values = np.asarray(values, dtype=np.float64)
    values = values[~np.isnan(values)]
    return tuple(float(v) for v in np.percentile(values, _PERCENTILES)) if values.size else (np.nan, np.nan)


def fold_statistics(pair_sets, full, alt):
    """Eligible and reversed counts per pair set, shape (set, ...), and tau-b of one fold."""
    counts = [reversal_counts(full, alt, pairs) for pairs in pair_sets]
    return (np.array([c[0] for c in counts]), np.array([c[1] for c in counts]), kendall_tau_b(full, alt))


def _control_task(task) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Replicates ``start..stop-1`` of every fold: counts (set, fold, replicate), tau-b (fold, replicate)."""
    folds, fold_seeds, start, stop = task
    out = [fold_statistics(fold.pair_sets, fold.full, prepared_scores(
        *fold.responses(), matched_random_weights(fold.cell, fold.anchor_weights, stop - start, seed, start=start)))
        for fold, seed in zip(folds, fold_seeds, strict=True)]
    return tuple(np.stack([o[k] for o in out], axis=-2) for k in range(3))


@declare()
def matched_random_controls(folds, *, replicates: int = option(1000, "matched random subtests", low=1),
                            seed: int = option(0, "seed", low=0), epsilon: float = EPSILON,
                            workers: int | None = WORKERS, scheduler: str | None = SCHEDULER,
                            progress: bool = True) -> xr.Dataset:
    """Low-DIF reversals against blueprint-matched random subtests (NT 3.4, C.6).

    Parameters
    ----------
    folds : list of TargetFold (or mappings with its fields)
        The outer folds' target halves, with frozen pair sets.
    replicates : int, default 1000
        ``R`` random subtests per fold (NT: 1,000).
    seed : int, default 0
        See the module notes: the result depends on the seed, not on ``workers``.
    epsilon : float, default 0.01
        The full-score band the primary pairs were frozen with: checked against their gaps (a
        mismatched threshold is an error) and recorded in the attributes.
    workers, scheduler, progress
        Passed to :func:`bayesirt.utils.parallel.parallel_map` (blocks of :data:`CONTROL_BLOCK` replicates).

    Returns
    -------
    xarray.Dataset
        Dims ``pair_set`` (``"primary"`` then the ``extra_pairs`` names), ``fold``, ``replicate``.
        Per replicate: ``rate`` (``T_r``, eq. 36), ``eligible`` and ``reversed`` counts per fold,
        ``tau_b`` per fold and ``mean_tau_b``. Observed low-DIF values: ``observed_rate`` (``T_DIF``),
        ``observed_eligible``, ``observed_reversed``, ``observed_tau_b``, ``observed_mean_tau_b``.
        Summary per pair set (:func:`randomization_summary`): ``median``, ``lower``, ``upper``,
        ``excess_pp``, ``p_value``, ``min_resolvable_p``, ``undefined``.
    """
    packed, names = pack_folds(folds, "matched_random_controls")
    for h, fold in enumerate(packed):
        i, j = fold.pair_sets[0]
        gap = np.abs(fold.full[i] - fold.full[j])
        gaps = both_answered_gaps(*fold.responses())  # with missing cells the audit chooses pairs on these (ranking notes)
        if gaps is not None:  # a pair is in the band on either gap
            gap = np.fmin(gap, np.abs(gaps[i, j]))
        if gap.size and gap.max() > epsilon + GAP_TOLERANCE:
            raise DataError(f"fold {h}: the primary pairs have full-score gaps up to {gap.max():.6g}, more than "
                            f"epsilon={epsilon:g}; pass the epsilon the pairs were frozen with")
    fold_seeds = spawn_seeds(seed, len(packed))
    observed = [fold_statistics(f.pair_sets, f.full, prepared_scores(*f.responses(), f.anchor_weights))
                for f in packed]
    tasks = [(packed, fold_seeds, start, stop) for start, stop in control_blocks(replicates, block=CONTROL_BLOCK)]
    blocks = parallel_map(_control_task, tasks, workers=workers, scheduler=scheduler, progress=progress,
                          description="matched-random controls")
    eligible, reversed_, tau = (np.concatenate([b[k] for b in blocks], axis=-1) for k in range(3))
    result = replicate_dataset(names, eligible, reversed_, tau, observed)
    add_randomization_summaries(result)
    result.attrs.update(seed=seed, replicates=replicates, epsilon=float(epsilon),
                        reference="NT 3.4, C.6 (eq. 10-11, 35-36)")
    return result


def add_randomization_summaries(result: xr.Dataset) -> None:
    """Add :func:`randomization_summary` of every pair set's ``rate`` against its ``observed_rate``
    as variables over ``pair_set`` (``median``, ``lower``, ... ``undefined``)."""
    summaries = [randomization_summary(float(result["observed_rate"][s]), result["rate"].values[s])
                 for s in range(result.sizes["pair_set"])]
    for key in summaries[0]:
        result[key] = ("pair_set", np.array([s[key] for s in summaries]))


def replicate_dataset(names, eligible, reversed_, tau, observed) -> xr.Dataset:
    """Per-replicate and observed statistics of the controls or the bootstrap."""
    obs_eligible, obs_reversed = (np.stack([o[k] for o in observed], axis=1) for k in range(2))
    obs_tau = np.array([o[2] for o in observed])
    return xr.Dataset(
        {"rate": (("pair_set", "replicate"), np.array([pooled_rate(r, e) for r, e in zip(reversed_, eligible,
                                                                                           strict=True)])),
         "eligible": (("pair_set", "fold", "replicate"), eligible),
         "reversed": (("pair_set", "fold", "replicate"), reversed_),
         "tau_b": (("fold", "replicate"), tau), "mean_tau_b": ("replicate", tau.mean(axis=0)),
         "observed_rate": ("pair_set", np.array([pooled_rate(r, e) for r, e in zip(obs_reversed, obs_eligible,
                                                                                    strict=True)])),
         "observed_eligible": (("pair_set", "fold"), obs_eligible),
         "observed_reversed": (("pair_set", "fold"), obs_reversed),
         "observed_tau_b": ("fold", obs_tau), "observed_mean_tau_b": float(obs_tau.mean())},
        coords={"pair_set": names, "fold": np.arange(eligible.shape[1]), "replicate": np.arange(eligible.shape[2])})
