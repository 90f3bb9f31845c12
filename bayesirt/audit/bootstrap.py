"""Bootstrap references of the near-tie audit: the composition bootstrap over item units (NT C.7,
eq. 37-38) and the owner bootstrap of family score shifts (NT D.1, eq. 57-58).

Folds are :class:`bayesirt.audit.resampling.TargetFold` objects (or mappings with their keys) whose
near-tie pair sets were frozen from the observed full scores. Each bootstrap draws all its
multiplicities from one ``numpy.random.default_rng(seed)`` before any work is split, so results do
not depend on the number of workers. Undefined replicates are handled as in
:mod:`bayesirt.audit.resampling`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr
from scipy import sparse

from bayesirt.errors import DataError
from bayesirt.utils.parallel import parallel_map
from bayesirt.audit.ranking import prepared_responses
from bayesirt.audit.resampling import (check_integer, fold_statistics, pack_folds, percentile_range,
                                 replicate_dataset, control_blocks)

__all__ = ["bootstrap_units", "recomposed_scores", "composition_bootstrap", "owner_bootstrap", "BOOTSTRAP_BLOCK",
           "MIN_GROUP_UNITS", "CLUSTERS"]

#: Replicates per parallel task (results do not depend on it).
BOOTSTRAP_BLOCK = 100
#: Item groups needed for groups to be the bootstrap units (NT C.7); else contiguous clusters.
MIN_GROUP_UNITS = 5
CLUSTERS = 100


def bootstrap_units(item_group=None, *, items: int | None = None) -> np.ndarray:
    """Bootstrap unit of every item (NT C.7).

    Item groups are the units when there are at least :data:`MIN_GROUP_UNITS` of them (numbered in
    order of first appearance); otherwise the item order is cut into ``min(CLUSTERS, items)``
    contiguous clusters whose sizes differ by at most one (the larger ones first).

    Parameters
    ----------
    item_group : array_like, shape (item,), optional
        Group label of every item; None means one group (then ``items`` is required).
    items : int, optional
        Number of items, when ``item_group`` is None.

    Returns
    -------
    ndarray of int, shape (item,), values ``0..B-1``.
    """
    if item_group is None:
        codes = np.zeros(check_integer(items, "items", "bootstrap_units"), dtype=np.intp)
    else:
        item_group = np.asarray(item_group)
        codes = pd.factorize(item_group)[0] if item_group.ndim == 1 else np.array([])
        if codes.size == 0 or np.any(codes < 0):
            raise DataError("item_group must be a non-empty 1-D array of labels without missing values")
    if codes.max() + 1 >= MIN_GROUP_UNITS:
        return codes.astype(np.intp)
    clusters = min(CLUSTERS, codes.size)
    sizes = np.full(clusters, codes.size // clusters) + (np.arange(clusters) < codes.size % clusters)
    return np.repeat(np.arange(clusters), sizes)


def _unit_totals(yobs, obs, w, units, count) -> tuple[np.ndarray, np.ndarray]:
    """Weighted successes (unit, model) and observed item mass per unit and model: (unit, model),
    or (unit, 1) when every cell is observed."""
    membership = sparse.csr_array((w, (units, np.arange(units.size))), shape=(count, units.size))
    mass = membership.sum(axis=1)[:, None] if obs is None else membership @ obs
    return membership @ yobs, mass


def _recomposed(totals, multiplicities) -> np.ndarray:
    successes, mass = totals
    with np.errstate(invalid="ignore", divide="ignore"):
        denominator = multiplicities @ mass
        return np.where(denominator > 0, (multiplicities @ successes) / denominator, np.nan)


def recomposed_scores(y, w, unit, multiplicities, *, observed=None) -> np.ndarray:
    """Bootstrap scores of NT eq. 38: ``sum_b N_b S_bm / sum_b N_b n_bm`` per replicate.

    Parameters
    ----------
    y, observed : as in :func:`bayesirt.audit.ranking.weighted_scores`
    w : array_like, shape (item,)
        Item weights (``np.ones(item)`` for full scores, the anchor weights for anchor scores).
    unit : array_like of int, shape (item,)
        Bootstrap unit of every item (:func:`bootstrap_units`).
    multiplicities : array_like of int, shape (replicate, unit)

    Returns
    -------
    ndarray of float64, shape (replicate, model); NaN where a model keeps no weighted observed item.
    With all multiplicities 1 these are :func:`~bayesirt.audit.ranking.weighted_scores`.
    """
    yobs, obs = prepared_responses(y, observed, "recomposed_scores")
    w, unit, n = np.asarray(w, dtype=np.float64), np.asarray(unit), np.asarray(multiplicities)
    if w.shape != (yobs.shape[0],) or unit.shape != w.shape or not np.issubdtype(unit.dtype, np.integer):
        raise DataError(f"w and unit must be 1-D arrays of {yobs.shape[0]} entries (one per item)")
    if n.ndim != 2 or n.shape[1] != unit.max() + 1:
        raise DataError(f"multiplicities must have shape (replicate, {unit.max() + 1}); got {n.shape}")
    return _recomposed(_unit_totals(yobs, obs, w, unit.astype(np.intp), n.shape[1]), n.astype(np.float64))


def _bootstrap_task(task) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bootstrap statistics of the replicates in ``multiplicities``: counts (set, fold, replicate),
    tau-b (fold, replicate); ``folds`` holds (pair sets, full-score unit totals, anchor unit totals)."""
    folds, multiplicities = task
    out = [fold_statistics(pair_sets, _recomposed(full, multiplicities), _recomposed(anchor, multiplicities))
           for pair_sets, full, anchor in folds]
    return tuple(np.stack([o[k] for o in out], axis=-2) for k in range(3))


def composition_bootstrap(folds, *, item_group=None, replicates: int = 2000, seed: int = 0,
                          workers: int | None = None, scheduler: str | None = None,
                          progress: bool = True) -> xr.Dataset:
    """Recomposed near-tie reversal rate and tau-b over item-unit bootstrap replicates (NT C.7).

    Unit multiplicities ``N^(r) ~ Multinomial(B; 1/B, ..., 1/B)`` (eq. 37) recompose both the full
    and the anchor score of every target model (eq. 38); pair sets stay frozen. In a replicate a pair
    is eligible when untied under both bootstrap scores and reversed when their differences have
    opposite signs; counts are pooled over folds per replicate, tau-b is averaged over folds.

    Parameters
    ----------
    folds : list of TargetFold (or mappings)
        As for :func:`matched_random_controls` (``cell`` is only validated here).
    item_group : array_like, shape (item,), optional
        Item groups, shared by the folds (:func:`bootstrap_units`); None: one group.
    replicates : int, default 2000
    seed : int, default 0
        Seed of the one generator that draws every multiplicity.
    workers, scheduler, progress
        Passed to :func:`bayesirt.utils.parallel.parallel_map` (blocks of :data:`BOOTSTRAP_BLOCK` replicates).

    Returns
    -------
    xarray.Dataset
        As :func:`matched_random_controls` for the per-replicate and observed variables (observed =
        all multiplicities 1), plus ``multiplicity`` (replicate, unit), ``unit`` (item), the 2.5th
        and 97.5th percentiles ``rate_lower``, ``rate_upper`` (pair_set) and ``tau_lower``,
        ``tau_upper`` of ``mean_tau_b``, and ``undefined`` (NaN rates left out of the percentiles;
        a model left without anchor mass by missing cells has a NaN score in that replicate, its
        pairs are ineligible and its fold's tau-b is NaN, also left out). Attribute ``units`` says
        whether item groups or contiguous clusters were resampled.
    """
    replicates = check_integer(replicates, "replicates", "composition_bootstrap")
    seed = check_integer(seed, "seed", "composition_bootstrap", minimum=0)
    packed, names = pack_folds(folds, "composition_bootstrap")
    units = bootstrap_units(item_group, items=packed[0].items)
    if units.size != packed[0].items:
        raise DataError(f"item_group has {units.size} labels but the folds have {packed[0].items} items")
    count = int(units.max()) + 1
    multiplicities = np.random.default_rng(seed).multinomial(count, np.full(count, 1 / count), size=replicates)
    totals = tuple((fold.pair_sets, *(_unit_totals(*fold.responses(), w, units, count)
                                      for w in (np.ones(fold.items), fold.anchor_weights))) for fold in packed)
    observed = _bootstrap_task((totals, np.ones((1, count))))
    observed = [tuple(part[..., h, 0] for part in observed) for h in range(len(packed))]
    tasks = [(totals, multiplicities[start:stop].astype(np.float64))
             for start, stop in control_blocks(replicates, block=BOOTSTRAP_BLOCK)]
    blocks = parallel_map(_bootstrap_task, tasks, workers=workers, scheduler=scheduler, progress=progress,
                          description="composition bootstrap")
    eligible, reversed_, tau = (np.concatenate([b[k] for b in blocks], axis=-1) for k in range(3))
    result = replicate_dataset(names, eligible, reversed_, tau, observed)
    rate = result["rate"].values
    rate_range = np.array([percentile_range(r) for r in rate])
    result["rate_lower"], result["rate_upper"] = ("pair_set", rate_range[:, 0]), ("pair_set", rate_range[:, 1])
    result["tau_lower"], result["tau_upper"] = percentile_range(result["mean_tau_b"])
    result["undefined"] = ("pair_set", np.isnan(rate).sum(axis=1))
    result["multiplicity"] = (("replicate", "unit"), multiplicities)
    result["unit"] = ("item", units)
    groups = 1 if item_group is None else pd.unique(np.asarray(item_group)).size
    kind = "item groups" if groups >= MIN_GROUP_UNITS else "contiguous clusters"
    result.attrs.update(seed=seed, replicates=replicates, units=kind, reference="NT C.7 (eq. 37-38)")
    return result


def owner_bootstrap(shift, family, owner, *, percentile_shift=None, replicates: int = 2000,
                    seed: int = 0) -> xr.Dataset:
    """Owner-cluster bootstrap of family mean shifts (NT D.1, eq. 57-58).

    A replicate draws as many owners as there are, uniformly with replacement, and keeps every
    record of each drawn owner as often as it was drawn; a family's replicate mean is the mean over
    its kept records (NaN if none: counted in ``undefined`` and left out of the interval).

    Parameters
    ----------
    shift : array_like, shape (record,)
        ``d_m = anchor_m - full_m`` of every representative scored in either fold (eq. 57).
    family, owner : array_like, shape (record,)
    percentile_shift : array_like, shape (record,), optional
        Percentile-rank shift of every record, bootstrapped on the same owner draws:
        ``percentile_ranks(anchor) - percentile_ranks(full)``
        (:func:`bayesirt.audit.ranking.percentile_ranks`, ranks among all representatives passed, under
        each scoring; percentile points).
    replicates : int, default 2000
    seed : int, default 0

    Returns
    -------
    xarray.Dataset
        Dims ``family`` (sorted labels) and ``replicate``: ``observed_shift`` (family means),
        ``shift`` (replicate, family), ``shift_lower`` and ``shift_upper`` (2.5th and 97.5th
        percentiles); the same four ``*percentile_shift*`` variables when ``percentile_shift`` is
        given; ``records``, ``owners`` and ``undefined`` per family.
    """
    values = {"shift": np.asarray(shift, dtype=np.float64)}
    if percentile_shift is not None:
        values["percentile_shift"] = np.asarray(percentile_shift, dtype=np.float64)
    shapes = {name: np.shape(v) for name, v in
              {**values, "family": np.asarray(family), "owner": np.asarray(owner)}.items()}
    if len(set(shapes.values())) > 1 or len(shapes["shift"]) != 1 or not all(
            np.all(np.isfinite(v)) for v in values.values()):
        raise DataError(f"{', '.join(f'{k} {v}' for k, v in shapes.items())} must be 1-D arrays of the same length "
                        "(one per record), with finite shifts")
    replicates = check_integer(replicates, "replicates", "owner_bootstrap")
    seed = check_integer(seed, "seed", "owner_bootstrap", minimum=0)
    families, family_code = np.unique(np.asarray(family), return_inverse=True)
    owner_code, owners = pd.factorize(np.asarray(owner))
    cells = owner_code * families.size + family_code  # records per (owner, family), summed once
    records = np.bincount(cells, minlength=owners.size * families.size).reshape(owners.size, families.size)
    draws = np.random.default_rng(seed).multinomial(owners.size, np.full(owners.size, 1 / owners.size),
                                                    size=replicates).astype(np.float64)
    kept = draws @ records
    result = xr.Dataset(coords={"family": families, "replicate": np.arange(replicates)})
    for name, d in values.items():
        sums = np.bincount(cells, weights=d, minlength=records.size).reshape(records.shape)
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = np.where(kept > 0, (draws @ sums) / kept, np.nan)
        result[f"observed_{name}"] = ("family", sums.sum(axis=0) / records.sum(axis=0))
        result[name] = (("replicate", "family"), boot)
        ranges = np.array([percentile_range(b) for b in boot.T])
        result[f"{name}_lower"], result[f"{name}_upper"] = ("family", ranges[:, 0]), ("family", ranges[:, 1])
    result["records"] = ("family", records.sum(axis=0))
    result["owners"] = ("family", (records > 0).sum(axis=0))
    result["undefined"] = ("family", (kept == 0).sum(axis=0))
    result.attrs.update(seed=seed, replicates=replicates, reference="NT D.1 (eq. 57-58)")
    return result
