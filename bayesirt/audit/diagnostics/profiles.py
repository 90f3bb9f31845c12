"""Capability-profile overlap diagnostic of the near-tie audit (NT App. G; exploratory).

Per outer fold, from the audit half only (``M_A`` models): working responses and scales ``s_i``
(NT eq. 13-14), the purification's final spectral fit (rows ``S(3)``, its ``k`` and seed; loadings
``L``, orthonormal coordinates ``Theta``) and profiles ``E_i = L_i / (s_i sqrt(M_A))``, so
``d_prof(i, j) = ||E_i - E_j||`` is the RMS over audit models of the difference of the unclipped
offsets ``L_i Theta^T / s_i``. With the final refit's intercepts ``b_i``, each frozen blueprint cell
matches its low-DIF items to its nonselected items without replacement at cost
``d_prof^2 + (b_i - b_j)^2`` (``scipy.optimize.linear_sum_assignment``). A caliper ``tau`` admits
only pairs with ``d_prof <= tau`` and ``|b_i - b_j| <= tau``: most pairs first, then least cost. A
random-pairing reference pairs at random within cells. The target half enters only through scores.

Control ``r`` keeps either endpoint of every pair with probability 1/2 and every unmatched low-DIF
item, each with its cell's weight ``n_c / k_c``; near-tie counts are pooled over folds per
replicate and compared with the low-DIF rate by :func:`bayesirt.audit.engine.resampling.randomization_summary`.
The all-swapped subtest moves every matched low-DIF item to its partner; ``Delta_swap`` (low-DIF
minus all-swapped rate) is referred to ``Delta_r = T(z_r) - T(1 - z_r)``, control ``r`` minus its
complementary endpoint configuration (low-DIF and all-swapped are one such pair), two-sided:
``(1 + #{|Delta_r| >= |Delta_swap|}) / (R + 1)``.

Random streams. Replicate ``r`` of fold ``h`` draws one uniform key per item from
``SeedSequence(spawn_seeds(seed, 2)[h], spawn_key=(r,))`` (as :mod:`bayesirt.audit.engine.resampling`); a
matched low-DIF item is swapped when its key is below 1/2. Every scenario uses the same keys
(common random numbers). Fold ``h``'s random pairing uses ``spawn_seeds(seed, 4)[2 + h]``. Numbers
depend on ``(seed, h, r)`` only, not on workers or blocks.

Where NT is silent:

- Calipers: inadmissible entries cost more than ``pairs x`` the largest admissible cost (one more
  admissible pair always wins); they are dropped after solving.
- Random pairing: in each cell, low-DIF and nonselected items are each put in a random order and
  paired position by position (as many pairs as the smaller side).
- Coverage is the share of low-DIF scoring weight on matched items (NT); ``count_coverage`` is
  matched / selected items. Quality statistics are over the fold's pairs (NaN without pairs).
- Only the primary (cross-family) near-tie pairs are scored. Replicates without an eligible pair
  (NaN rate or difference) are left out of the summaries and counted as undefined.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

from bayesirt.audit.adjustment.spectral import spectral_loadings, working_responses
from bayesirt.audit.diagnostics.matched import target_folds
from bayesirt.audit.engine.ranking import prepared_scores, pooled_rate, reversal_counts
from bayesirt.audit.engine.resampling import CONTROL_BLOCK, check_integer, pack_folds, control_blocks, randomization_summary
from bayesirt.audit.engine.result import AuditResult, check_audit
from bayesirt.data.responses import MISSING
from bayesirt.errors import ConfigError, DataError
from bayesirt.utils.parallel import parallel_map, spawn_seeds
from bayesirt.utils.validation import parameter_error

__all__ = ["profile_matching", "capability_profiles", "profile_pairs", "random_pairs", "paired_mixture_weights",
           "PROFILE_CALIPERS", "RANDOM"]

#: Scenarios of NT App. G: unconstrained matching (None) and calipers tau in logits.
PROFILE_CALIPERS = (None, 0.25, 0.5, 1.0)
#: Label of the random-pairing reference scenario.
RANDOM = "random"
_QUALITY = ("mean", "median", "max")


def capability_profiles(y, observed, selected, k: int, *, seed: int) -> np.ndarray:
    """Capability profiles ``E_i = L_i / (s_i sqrt(M_A))`` of every item in one audit half (NT App. G).

    Parameters
    ----------
    y, observed : ndarray (item, model)
        The audit half's responses and observed mask.
    selected : ndarray of bool (item,)
        The rows fitting the coordinates (``Purification.selected``).
    k, seed : int
        ``Purification.k`` and ``Purification.seed``: the final spectral fit is reproduced.

    Returns
    -------
    ndarray (item, dim); ``dim`` is ``k`` unless the rows cannot carry it.
    """
    x, _, s = working_responses(y, observed)
    loading, _ = spectral_loadings(x, np.flatnonzero(selected), k, seed=seed)
    return loading / (s[:, None] * np.sqrt(y.shape[1]))


def _cell_sides(cell, selected):
    """Per cell: (low-DIF items, nonselected items), both in item order."""
    for c in np.unique(cell):
        yield np.flatnonzero((cell == c) & selected), np.flatnonzero((cell == c) & ~selected)


def _check_items(cell, selected, caller) -> tuple[np.ndarray, np.ndarray]:
    cell, selected = np.asarray(cell), np.asarray(selected)
    if cell.ndim != 1 or not np.issubdtype(cell.dtype, np.integer) or selected.shape != cell.shape or (
            selected.dtype != bool):
        raise DataError(f"{caller}: cell and selected must be 1-D arrays of one integer cell and one bool per item; "
                        f"got {cell.dtype} {cell.shape} and {selected.dtype} {selected.shape}")
    return cell, selected


def profile_pairs(cell, selected, profiles, easiness, *, caliper: float | None = None) -> np.ndarray:
    """Within-cell minimum-cost matching of low-DIF items to nonselected items (NT App. G).

    Parameters
    ----------
    cell : array_like of int (item,)
        Frozen blueprint cells.
    selected : array_like of bool (item,)
        The low-DIF items.
    profiles : array_like (item, dim)
        :func:`capability_profiles`.
    easiness : array_like (item,)
        Final refit intercepts ``b_i``.
    caliper : float, optional
        ``tau``: admit only pairs with ``d_prof <= tau`` and ``|b_i - b_j| <= tau``; most pairs
        first, then least cost. None: every pair, least total cost.

    Returns
    -------
    ndarray of int (item,)
        Partner of each matched low-DIF item, -1 elsewhere.
    """
    profiles, easiness = np.asarray(profiles, dtype=np.float64), np.asarray(easiness, dtype=np.float64)
    cell, selected = _check_items(cell, selected, "profile_pairs")
    if profiles.ndim != 2 or profiles.shape[0] != cell.size or easiness.shape != cell.shape or not (
            np.all(np.isfinite(profiles)) and np.all(np.isfinite(easiness))):
        raise DataError(f"profile_pairs: profiles must be finite ({cell.size}, dim) and easiness finite ({cell.size},),"
                        f" one row per item; got {profiles.shape} and {easiness.shape}")
    _check_caliper(caliper)
    partner = np.full(cell.size, -1, dtype=np.intp)
    for low, other in _cell_sides(cell, selected):
        if not low.size or not other.size:
            continue
        d2 = cdist(profiles[low], profiles[other], "sqeuclidean")
        gap = np.abs(easiness[low, None] - easiness[None, other])
        cost = d2 + gap**2
        if caliper is not None:
            allowed = (np.sqrt(d2) <= caliper) & (gap <= caliper)
            rows, cols = allowed.any(axis=1), allowed.any(axis=0)
            low, other, cost, allowed = low[rows], other[cols], cost[rows][:, cols], allowed[rows][:, cols]
            if not low.size:
                continue
            cost = np.where(allowed, cost, min(allowed.shape) * cost[allowed].max() + 1.0)
        rows, cols = linear_sum_assignment(cost)
        if caliper is not None:
            keep = allowed[rows, cols]
            rows, cols = rows[keep], cols[keep]
        partner[low[rows]] = other[cols]
    return partner


def random_pairs(cell, selected, seed: int) -> np.ndarray:
    """Random within-cell pairing of low-DIF and nonselected items (the reference scenario).

    Returns the partner array of :func:`profile_pairs`; ``seed`` seeds one generator.
    """
    cell, selected = _check_items(cell, selected, "random_pairs")
    seed = check_integer(seed, "seed", "random_pairs", minimum=0)
    key = np.random.default_rng(seed).random(cell.size)
    partner = np.full(cell.size, -1, dtype=np.intp)
    for low, other in _cell_sides(cell, selected):
        n = min(low.size, other.size)
        partner[low[np.argsort(key[low])[:n]]] = other[np.argsort(key[other])[:n]]
    return partner


def _check_partner(weights, partner, caller) -> tuple[np.ndarray, np.ndarray]:
    weights, partner = np.asarray(weights, dtype=np.float64), np.asarray(partner)
    ok = weights.ndim == 1 and partner.shape == weights.shape and np.issubdtype(partner.dtype, np.integer)
    matched = partner >= 0 if ok else None
    ok = ok and np.all(partner < weights.size) and np.all(weights[matched] > 0)
    ok = ok and np.all(weights[partner[matched]] == 0) and np.unique(partner[matched]).size == matched.sum()
    if not ok:
        raise DataError(f"{caller}: partner must give each matched low-DIF item (positive weight) a distinct "
                        "nonselected item (weight 0) and -1 elsewhere, one entry per weight; use profile_pairs")
    return weights, partner.astype(np.intp)


def _coins(seed: int, items: int, start: int, stop: int) -> np.ndarray:
    """Swap keys below 1/2, (replicate, item): replicate r from ``SeedSequence(seed, spawn_key=(r,))``."""
    return np.stack([np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(r,))).random(items) < 0.5
                     for r in range(start, stop)])


def _swapped(weights, partner, swap) -> np.ndarray:
    """Weights (row, item) with every low-DIF item marked in ``swap`` (row, item) moved to its partner."""
    out = np.repeat(weights[None], swap.shape[0], axis=0)
    rows, low = np.nonzero(swap)
    out[rows, partner[low]] = weights[low]
    out[rows, low] = 0.0
    return out


def paired_mixture_weights(weights, partner, replicates: int, seed: int, *,
                           start: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Paired-mixture controls and their complementary endpoint configurations (NT App. G).

    Parameters
    ----------
    weights : array_like (item,)
        Low-DIF weights ``n_c / k_c`` (``Purification.weights``).
    partner : array_like of int (item,)
        :func:`profile_pairs` or :func:`random_pairs`.
    replicates, seed, start
        Replicates ``start .. start + replicates - 1`` of the stream of ``seed`` (module notes).

    Returns
    -------
    (mixture, complement) : ndarray (replicate, item) each
        A matched low-DIF item or its partner carries the weight in ``mixture``, the other one in
        ``complement``; unmatched low-DIF items keep their weight in both.
    """
    weights, partner = _check_partner(weights, partner, "paired_mixture_weights")
    replicates = check_integer(replicates, "replicates", "paired_mixture_weights")
    seed = check_integer(seed, "seed", "paired_mixture_weights", minimum=0)
    start = check_integer(start, "start", "paired_mixture_weights", minimum=0)
    coins, matched = _coins(seed, weights.size, start, start + replicates), partner >= 0
    return _swapped(weights, partner, coins & matched), _swapped(weights, partner, ~coins & matched)


def _check_caliper(tau) -> None:
    if tau is not None and (isinstance(tau, bool) or not isinstance(tau, (int, float, np.integer, np.floating))
                            or not 0 < tau < np.inf):
        raise parameter_error("caliper", "profile_pairs (each of the calipers of profile_matching)",
                              "a positive number (logits) or None (unconstrained)", tau)


def _scenarios(calipers) -> tuple[list[str], np.ndarray]:
    if not isinstance(calipers, (list, tuple)) or not calipers:
        raise parameter_error("calipers", "profile_matching", "a non-empty list of positive numbers or None "
                              "(unconstrained)", calipers)
    for tau in calipers:
        _check_caliper(tau)
    labels = ["unconstrained" if tau is None else f"caliper {np.format_float_positional(float(tau), trim='0')}"
              for tau in calipers]
    if len(set(labels)) < len(labels):
        raise ConfigError(f"profile_matching: calipers repeat a scenario ({labels}); list each caliper once")
    return [*labels, RANDOM], np.array([np.nan if tau is None else tau for tau in calipers] + [np.nan])


def _audit_halves(result: AuditResult, responses: xr.Dataset) -> list[tuple[np.ndarray, np.ndarray]]:
    """Audit-half (y, observed) per fold (after :func:`~bayesirt.audit.engine.result.check_audit`)."""
    values = responses["responses"].transpose("item", "model").values
    pop = result.population
    halves = []
    for h in range(len(result.folds)):
        audit = np.flatnonzero(pop["fold"].to_numpy() == h)
        observed = values[:, audit] != MISSING
        halves.append((np.where(observed, values[:, audit], 0).astype(np.int8), observed))
    return halves


def _control_task(task) -> np.ndarray:
    """Counts (mixture eligible, reversed, complement eligible, reversed) x (scenario, fold, replicate)."""
    packed, partners, fold_seeds, start, stop = task
    out = np.zeros((4, partners.shape[0], len(packed), stop - start), dtype=np.int64)
    for h, (fold, seed) in enumerate(zip(packed, fold_seeds, strict=True)):
        yobs, obs = fold.responses()
        coins = _coins(seed, fold.items, start, stop)
        w = np.concatenate([_swapped(fold.anchor_weights, p, swap) for p in partners[:, h]
                            for swap in (coins & (p >= 0), ~coins & (p >= 0))])  # rows (scenario, side, replicate)
        counts = np.stack(reversal_counts(fold.full, prepared_scores(yobs, obs, w), fold.pair_sets[0]))
        out[:, :, h] = counts.reshape(2, -1, 2, stop - start).transpose(2, 0, 1, 3).reshape(4, -1, stop - start)
    return out


def _quality(values, partner, weights) -> dict[str, float]:
    matched = partner >= 0
    stats = {f"{name}_{q}": float(getattr(np, q)(v[matched])) if matched.any() else np.nan
             for name, v in values.items() for q in _QUALITY}
    return stats | {"matched": int(matched.sum()), "selected": int((weights > 0).sum()),
                    "matched_weight": float(weights[matched].sum()), "weight": float(weights.sum())}


def profile_matching(result: AuditResult, responses: xr.Dataset, *, calipers=PROFILE_CALIPERS, replicates: int = 1000,
                     seed: int = 0, workers: int | None = 1, scheduler: str | None = None,
                     progress: bool = False) -> xr.Dataset:
    """Capability-profile overlap diagnostic of a finished audit (NT App. G; exploratory).

    Parameters
    ----------
    result : AuditResult
        :func:`bayesirt.audit.run_audit` output with eligible near-tie pairs; its folds, cells,
        anchors, weights, final fits and pair sets are used as they are.
    responses : xarray.Dataset
        The response Dataset ``run_audit`` was given.
    calipers : list or tuple of float or None, default :data:`PROFILE_CALIPERS`
        One scenario each (None: unconstrained); the random-pairing reference is always added.
    replicates : int, default 1000
        Paired-mixture controls per fold (NT: 1,000).
    seed : int, default 0
        See the module notes; give it a seed of its own, not the primary controls'.
    workers, scheduler, progress
        Passed to :func:`bayesirt.utils.parallel.parallel_map` (blocks of ``CONTROL_BLOCK`` replicates).

    Returns
    -------
    xarray.Dataset
        Dims ``scenario`` (``"unconstrained"``, ``"caliper 0.25"``, ..., ``"random"``; coordinate
        ``caliper``, NaN if none), ``fold``, ``replicate``, ``item``. Pairs: ``partner``,
        ``profile_distance`` and ``easiness_gap`` (scenario, fold, item; -1 / NaN off matched
        low-DIF items). Coverage and quality (scenario, fold): ``selected``, ``matched``,
        ``count_coverage``, ``coverage`` (matched share of low-DIF weight), ``distance_*`` and
        ``gap_*`` (mean, median, max); ``pooled_coverage`` (scenario). Controls: ``eligible``,
        ``reversed``, ``complement_eligible``, ``complement_reversed`` (scenario, fold, replicate),
        ``rate``, ``complement_rate``, ``delta`` (scenario, replicate); low-DIF ``observed_eligible``,
        ``observed_reversed`` (fold), ``observed_rate``; :func:`~bayesirt.audit.engine.resampling.randomization_summary`
        of ``rate`` per scenario (``median``, ``lower``, ``upper``, ``excess_pp``, ``p_value``,
        ``min_resolvable_p``, ``undefined``); all-swapped ``swap_eligible``, ``swap_reversed``
        (scenario, fold), ``swap_rate``, ``delta_swap_pp``, two-sided ``p_swap`` and
        ``delta_undefined`` (scenario).
    """
    check_audit(result, responses, "profile_matching")
    if result.config.adjustment != "spectral":
        raise DataError(f"capability profiles are spectral loadings (NT App. G); this audit used the "
                        f"{result.config.adjustment!r} adjustment: rerun it with the spectral one for this diagnostic")
    labels, caliper_values = _scenarios(calipers)
    replicates = check_integer(replicates, "replicates", "profile_matching")
    seed = check_integer(seed, "seed", "profile_matching", minimum=0)
    packed, _ = pack_folds(target_folds(result, responses), "profile_matching")
    halves = _audit_halves(result, responses)
    folds, items = len(packed), packed[0].items
    seeds = spawn_seeds(seed, 2 * folds)
    partners = np.full((len(labels), folds, items), -1, dtype=np.intp)
    distance, gap = np.full(partners.shape, np.nan), np.full(partners.shape, np.nan)
    quality, fixed = [], []
    for h, (fold, target, (y, observed)) in enumerate(zip(result.folds, packed, halves, strict=True)):
        pur = fold.purification
        profiles = capability_profiles(y, observed, pur.selected, pur.k, seed=pur.seed)
        b = np.asarray(pur.final_fit.easiness, dtype=np.float64)
        partners[:-1, h] = [profile_pairs(pur.cell, pur.selected, profiles, b, caliper=tau) for tau in calipers]
        partners[-1, h] = random_pairs(pur.cell, pur.selected, seeds[folds + h])
        for s, partner in enumerate(partners[:, h]):
            low = np.flatnonzero(partner >= 0)
            distance[s, h, low] = np.linalg.norm(profiles[low] - profiles[partner[low]], axis=1)
            gap[s, h, low] = np.abs(b[low] - b[partner[low]])
            quality.append(_quality({"distance": distance[s, h], "gap": gap[s, h]}, partner, pur.weights))
        w = np.stack([target.anchor_weights, *(_swapped(target.anchor_weights, p, (p >= 0)[None])[0]
                                               for p in partners[:, h])])  # low-DIF, then all-swapped per scenario
        fixed.append(reversal_counts(target.full, prepared_scores(*target.responses(), w), target.pair_sets[0]))
    quality = pd.DataFrame(quality)
    grid = {c: quality[c].to_numpy().reshape(folds, len(labels)).T for c in quality.columns}
    fixed = np.array(fixed)  # (fold, eligible / reversed, low-DIF + scenario)
    tasks = [(packed, partners, seeds[:folds], start, stop)
             for start, stop in control_blocks(replicates, block=CONTROL_BLOCK)]
    counts = np.concatenate(parallel_map(_control_task, tasks, workers=workers, scheduler=scheduler,
                                         progress=progress, description="paired-mixture controls"), axis=-1)
    observed_rate = float(pooled_rate(fixed[:, 1, 0], fixed[:, 0, 0]))
    rate, complement = (np.array([pooled_rate(counts[k + 1, s], counts[k, s]) for s in range(len(labels))])
                        for k in (0, 2))
    delta = rate - complement
    swap_rate = np.array([pooled_rate(fixed[:, 1, s], fixed[:, 0, s]) for s in range(1, len(labels) + 1)])
    delta_swap = observed_rate - swap_rate
    defined = ~np.isnan(delta)
    p_swap = np.array([(1 + np.sum(np.abs(d[m]) >= abs(o))) / (m.sum() + 1) if not np.isnan(o) else np.nan
                       for d, m, o in zip(delta, defined, delta_swap, strict=True)])
    summaries = pd.DataFrame([randomization_summary(observed_rate, r) for r in rate])
    dims, item_dims = ("scenario", "fold"), ("scenario", "fold", "item")
    ds = xr.Dataset(
        {"partner": (item_dims, partners), "profile_distance": (item_dims, distance), "easiness_gap": (item_dims, gap),
         "selected": (dims, grid["selected"]), "matched": (dims, grid["matched"]),
         "count_coverage": (dims, grid["matched"] / grid["selected"]),
         "coverage": (dims, grid["matched_weight"] / grid["weight"]),
         "pooled_coverage": ("scenario", grid["matched_weight"].sum(axis=1) / grid["weight"].sum(axis=1)),
         **{f"{name}_{q}": (dims, grid[f"{name}_{q}"]) for name in ("distance", "gap") for q in _QUALITY},
         **{name: (("scenario", "fold", "replicate"), counts[k])
            for k, name in enumerate(("eligible", "reversed", "complement_eligible", "complement_reversed"))},
         "rate": (("scenario", "replicate"), rate), "complement_rate": (("scenario", "replicate"), complement),
         "delta": (("scenario", "replicate"), delta),
         "observed_eligible": ("fold", fixed[:, 0, 0]), "observed_reversed": ("fold", fixed[:, 1, 0]),
         "observed_rate": observed_rate,
         **{k: ("scenario", summaries[k].to_numpy()) for k in summaries.columns},
         "swap_eligible": (dims, fixed[:, 0, 1:].T), "swap_reversed": (dims, fixed[:, 1, 1:].T),
         "swap_rate": ("scenario", swap_rate), "delta_swap_pp": ("scenario", 100 * delta_swap),
         "p_swap": ("scenario", p_swap), "delta_undefined": ("scenario", (~defined).sum(axis=1))},
        coords={"scenario": labels, "caliper": ("scenario", caliper_values), "fold": np.arange(folds),
                "replicate": np.arange(replicates), "item": responses["item"].values})
    ds.attrs.update(seed=seed, replicates=replicates, epsilon=float(result.config.epsilon), reference="NT App. G")
    return ds
