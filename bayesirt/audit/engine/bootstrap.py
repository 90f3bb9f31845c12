"""Bootstrap references of the near-tie audit: the composition bootstrap over item units (NT C.7,
eq. 37-38) and the owner bootstrap of family score shifts (NT D.1, eq. 57-58).

Folds are :class:`bayesirt.audit.engine.resampling.TargetFold` objects (or mappings with their keys) whose
near-tie pair sets were frozen from the observed full scores. Each bootstrap draws all its
multiplicities from one ``numpy.random.default_rng(seed)`` before any work is split, so results do
not depend on the number of workers. Undefined replicates are handled as in
:mod:`bayesirt.audit.engine.resampling`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr
from scipy import sparse

from bayesirt.errors import DataError
from bayesirt.utils.options import declare, option
from bayesirt.utils.parallel import SCHEDULER, WORKERS, parallel_map
from bayesirt.audit.engine.settings import EPSILON
from bayesirt.audit.engine.ranking import GAP_TOLERANCE, TIE_TOLERANCE, prepared_responses
from bayesirt.audit.engine.resampling import (check_integer, fold_statistics, pack_folds, percentile_range,
                                 replicate_dataset, control_blocks)
from bayesirt.errors import DataError
from bayesirt.utils.parallel import parallel_map
from bayesirt.utils.validation import check_number, testlet_labels

__all__ = ["bootstrap_units", "recomposed_scores", "composition_bootstrap", "owner_bootstrap", "BOOTSTRAP_BLOCK",
           "MIN_GROUP_UNITS", "CLUSTERS"]

#: Replicates per parallel task (results do not depend on it).
BOOTSTRAP_BLOCK = 100
#: Replicate x pair differences formed at once when counting the pairs still within their band.
_PAIR_CHUNK = 2**18
#: Item groups needed for groups to be the bootstrap units (NT C.7); else contiguous clusters.
MIN_GROUP_UNITS = 5
CLUSTERS = 100


def bootstrap_units(item_group=None, *, items: int | None = None, testlet=None) -> np.ndarray:
    """Bootstrap unit of every item (NT C.7).

    Item groups are the units when there are at least :data:`MIN_GROUP_UNITS` of them (numbered in
    order of first appearance); otherwise the item order is cut into ``min(CLUSTERS, items)``
    contiguous clusters whose sizes differ by at most one (the larger ones first). With ``testlet``
    labels the clusters hold whole testlets (items that share a stem or passage are not independent
    draws, so a resampling unit never splits one): the testlets, in order of first appearance, are cut
    into ``min(CLUSTERS, testlets)`` runs of about equal item counts, each run one unit. Item groups as
    units keep a testlet whole when it lies in one group (a testlet crossing groups is resampled with
    each group's part).

    Parameters
    ----------
    item_group : array_like, shape (item,), optional
        Group label of every item; None means one group (then ``items`` is required).
    items : int, optional
        Number of items, when ``item_group`` is None.
    testlet : array_like, shape (item,), optional
        Testlet label of every item (a label per stand-alone item); None: every item stands alone.

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
    if testlet is not None:
        member = pd.factorize(testlet_labels(testlet, codes.size))[0]  # testlets in order of first appearance
        size = np.bincount(member)
        start = np.concatenate([[0], np.cumsum(size)[:-1]])  # items before each testlet, in that order
        run = start * min(CLUSTERS, size.size) // codes.size  # a large testlet may leave a run empty: renumbered
        return np.unique(run, return_inverse=True)[1][member].astype(np.intp)
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
    y, observed : as in :func:`bayesirt.audit.engine.ranking.weighted_scores`
    w : array_like, shape (item,)
        Item weights (``np.ones(item)`` for full scores, the anchor weights for anchor scores).
    unit : array_like of int, shape (item,)
        Bootstrap unit of every item (:func:`bootstrap_units`).
    multiplicities : array_like of int, shape (replicate, unit)

    Returns
    -------
    ndarray of float64, shape (replicate, model); NaN where a model keeps no weighted observed item.
    With all multiplicities 1 these are :func:`~bayesirt.audit.engine.ranking.weighted_scores`.
    """
    yobs, obs = prepared_responses(y, observed, "recomposed_scores")
    w, unit, n = np.asarray(w, dtype=np.float64), np.asarray(unit), np.asarray(multiplicities)
    if w.shape != (yobs.shape[0],) or unit.shape != w.shape or not np.issubdtype(unit.dtype, np.integer):
        raise DataError(f"w and unit must be 1-D arrays of {yobs.shape[0]} entries (one per item)")
    if n.ndim != 2 or n.shape[1] != unit.max() + 1:
        raise DataError(f"multiplicities must have shape (replicate, {unit.max() + 1}); got {n.shape}")
    return _recomposed(_unit_totals(yobs, obs, w, unit.astype(np.intp), n.shape[1]), n.astype(np.float64))


def _in_band(pair_sets, bands, full, anchor) -> tuple[np.ndarray, np.ndarray]:
    """Eligible and reversed counts (set, replicate) among the pairs whose recomposed full gap stays
    within their set's band (the same eligibility and reversal rule as
    :func:`bayesirt.audit.engine.ranking.reversal_counts`); pairs are taken in chunks to bound memory."""
    eligible, reversed_ = np.zeros((len(pair_sets), full.shape[0]), np.int64), np.zeros((len(pair_sets), full.shape[0]),
                                                                                     np.int64)
    full_t, anchor_t = np.ascontiguousarray(full.T), np.ascontiguousarray(anchor.T)
    step = max(1, _PAIR_CHUNK // max(1, full.shape[0]))
    for s, ((i, j), band) in enumerate(zip(pair_sets, bands, strict=True)):
        for start in range(0, i.size, step):
            a, b = i[start:start + step], j[start:start + step]
            d_full, d_anchor = full_t[a] - full_t[b], anchor_t[a] - anchor_t[b]
            ok = (np.abs(d_full) > TIE_TOLERANCE) & (np.abs(d_anchor) > TIE_TOLERANCE)  # NaN compares False
            ok &= np.abs(d_full) <= band + GAP_TOLERANCE
            eligible[s] += ok.sum(axis=0)
            reversed_[s] += (ok & (d_full * d_anchor < 0)).sum(axis=0)
    return eligible, reversed_


def _bootstrap_task(task) -> tuple[np.ndarray, ...]:
    """Bootstrap statistics of the replicates in ``multiplicities``: counts (set, fold, replicate),
    tau-b (fold, replicate), and the counts among pairs still within their band (set, fold,
    replicate); ``folds`` holds (pair sets, full-score unit totals, anchor unit totals)."""
    folds, bands, multiplicities = task
    out = []
    for pair_sets, full, anchor in folds:
        full_r, anchor_r = _recomposed(full, multiplicities), _recomposed(anchor, multiplicities)
        out.append((*fold_statistics(pair_sets, full_r, anchor_r), *_in_band(pair_sets, bands, full_r, anchor_r)))
    return tuple(np.stack([o[k] for o in out], axis=-2) for k in range(5))


@declare()
def composition_bootstrap(folds, *, item_group=option(None, "item unit labels", type=object),
                          testlet=option(None, "testlet labels", type=object),
                          replicates: int = option(2000, "bootstrap replicates", low=1),
                          seed: int = option(0, "seed", low=0), epsilon: float = EPSILON,
                          bands=option(None, "near-tie band per pair set", type=object), workers: int | None = WORKERS,
                          scheduler: str | None = SCHEDULER,
                          progress: bool = True) -> xr.Dataset:
    """Recomposed near-tie reversal rate and tau-b over item-unit bootstrap replicates (NT C.7).

    Unit multiplicities ``N^(r) ~ Multinomial(B; 1/B, ..., 1/B)`` (eq. 37) recompose both the full
    and the anchor score of every target model (eq. 38); the anchor weights and the pair sets stay
    frozen (NT: "the close-pair mask is defined once from the observed full scores"). In a
    replicate a pair is eligible when untied under both bootstrap scores and reversed when their
    differences have opposite signs; counts are pooled over folds per replicate, tau-b is averaged
    over folds. The 2.5th-97.5th percentiles are a range of recomposed statistics, not a confidence
    interval for the observed rate (NT Table 11): resampling moves the frozen pairs' full-score gaps,
    so a replicate scores pairs that are no longer near ties. The ``*_in_band`` counts measure this.

    Parameters
    ----------
    folds : list of TargetFold (or mappings)
        As for :func:`matched_random_controls` (``cell`` is only validated here).
    item_group : array_like, shape (item,), optional
        Item groups, shared by the folds (:func:`bootstrap_units`); None: one group.
    testlet : array_like, shape (item,), optional
        Testlet labels (:func:`bootstrap_units`: clusters never split a testlet); None: items stand alone.
    replicates : int, default 2000
    seed : int, default 0
        Seed of the one generator that draws every multiplicity.
    epsilon : float, default 0.01
        The full-score band the pairs were frozen with (``band`` of every pair set not in ``bands``).
    bands : mapping of str to float, optional
        The band of each named extra pair set (e.g. the thresholds of the sensitivity curves).
    workers, scheduler, progress
        Passed to :func:`bayesirt.utils.parallel.parallel_map` (blocks of :data:`BOOTSTRAP_BLOCK` replicates).

    Returns
    -------
    xarray.Dataset
        As :func:`matched_random_controls` for the per-replicate and observed variables (observed =
        all multiplicities 1), plus ``multiplicity`` (replicate, unit), ``unit`` (item), the 2.5th
        and 97.5th percentiles ``rate_lower``, ``rate_upper`` and the mean ``rate_mean`` of the
        defined replicate rates (pair_set), ``tau_lower``, ``tau_upper`` and ``tau_mean`` of
        ``mean_tau_b``, and ``undefined`` (NaN rates left out of the percentiles; a model left
        without anchor mass by missing cells has a NaN score in that replicate, its pairs are
        ineligible and its fold's tau-b is NaN, also left out). Band diagnostics per pair set:
        ``band``; ``eligible_in_band`` and ``reversed_in_band`` (pair_set, fold, replicate), the
        counts among eligible pairs whose recomposed full gap is still <= ``band``;
        ``in_band_share`` (their share of all eligible pair-replicates), ``rate_in_band`` and
        ``rate_out_band`` (reversal rates pooled over replicates and folds within and beyond the
        band; NaN without pairs). Attribute ``units`` says whether item groups or contiguous
        clusters were resampled, ``unit_count`` how many.
    """
    packed, names = pack_folds(folds, "composition_bootstrap")
    bands = dict(bands or {})
    if set(bands) - set(names):
        raise DataError(f"bands names {sorted(set(bands) - set(names))} are not pair sets of the folds ({names})")
    band = np.array([float(bands.get(name, epsilon)) for name in names])
    units = bootstrap_units(item_group, items=packed[0].items, testlet=testlet)
    if units.size != packed[0].items:
        raise DataError(f"item_group has {units.size} labels but the folds have {packed[0].items} items")
    count = int(units.max()) + 1
    multiplicities = np.random.default_rng(seed).multinomial(count, np.full(count, 1 / count), size=replicates)
    totals = tuple((fold.pair_sets, *(_unit_totals(*fold.responses(), w, units, count)
                                      for w in (np.ones(fold.items), fold.anchor_weights))) for fold in packed)
    observed = _bootstrap_task((totals, band, np.ones((1, count))))
    observed = [tuple(part[..., h, 0] for part in observed[:3]) for h in range(len(packed))]
    tasks = [(totals, band, multiplicities[start:stop].astype(np.float64))
             for start, stop in control_blocks(replicates, block=BOOTSTRAP_BLOCK)]
    blocks = parallel_map(_bootstrap_task, tasks, workers=workers, scheduler=scheduler, progress=progress,
                          description="composition bootstrap")
    eligible, reversed_, tau, in_eligible, in_reversed = (np.concatenate([b[k] for b in blocks], axis=-1)
                                                          for k in range(5))
    result = replicate_dataset(names, eligible, reversed_, tau, observed)
    rate = result["rate"].values
    rate_range = np.array([percentile_range(r) for r in rate])
    result["rate_lower"], result["rate_upper"] = ("pair_set", rate_range[:, 0]), ("pair_set", rate_range[:, 1])
    result["rate_mean"] = ("pair_set", np.array([np.nanmean(r) if np.isfinite(r).any() else np.nan for r in rate]))
    result["tau_lower"], result["tau_upper"] = percentile_range(result["mean_tau_b"])
    taus = result["mean_tau_b"].values
    result["tau_mean"] = float(np.nanmean(taus)) if np.isfinite(taus).any() else np.nan
    result["undefined"] = ("pair_set", np.isnan(rate).sum(axis=1))
    result["band"] = ("pair_set", band)
    result["eligible_in_band"] = (("pair_set", "fold", "replicate"), in_eligible)
    result["reversed_in_band"] = (("pair_set", "fold", "replicate"), in_reversed)
    totals_in = in_eligible.sum(axis=(1, 2)), in_reversed.sum(axis=(1, 2))
    totals_all = eligible.sum(axis=(1, 2)), reversed_.sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        result["in_band_share"] = ("pair_set", np.where(totals_all[0] > 0, totals_in[0] / totals_all[0], np.nan))
        result["rate_in_band"] = ("pair_set", np.where(totals_in[0] > 0, totals_in[1] / totals_in[0], np.nan))
        beyond = totals_all[0] - totals_in[0]
        result["rate_out_band"] = ("pair_set", np.where(beyond > 0, (totals_all[1] - totals_in[1]) / beyond, np.nan))
    result["multiplicity"] = (("replicate", "unit"), multiplicities)
    result["unit"] = ("item", units)
    groups = 1 if item_group is None else pd.unique(np.asarray(item_group)).size
    kind = ("item groups" if groups >= MIN_GROUP_UNITS else
            "contiguous clusters" if testlet is None else "contiguous clusters of whole testlets")
    result.attrs.update(seed=seed, replicates=replicates, units=kind, unit_count=count,
                        reference="NT C.7 (eq. 37-38)")
    return result


@declare()
def owner_bootstrap(shift, family, owner, *, percentile_shift=option(None, "percentile shifts", type=object),
                    replicates: int = option(2000, "owner bootstrap replicates", low=1),
                    seed: int = option(0, "seed", low=0)) -> xr.Dataset:
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
        (:func:`bayesirt.audit.engine.ranking.percentile_ranks`, ranks among all representatives passed, under
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
