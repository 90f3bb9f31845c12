"""The Bayesian layer of the family-DIF near-tie audit: posterior uncertainty in the residual DIF
carried through the anchor -> reversal chain (NT 3.2-3.4, C.4-C.6, D.1 eq. 39-41).

In each outer fold the deterministic audit estimates (b, delta) once (the ridge mode, eq. 3),
chooses anchors from D_i and b_i and counts near-tie reversals in the target half. Here the same
chain is run once per posterior draw s of (b, delta) given the fold's offsets:

    D^(s) -> blueprint cells from b^(s) -> anchors S^(s) (k_c lowest D per cell) -> weights
    -> target-half anchor scores -> eligible / reversed counts on the frozen near-tie pairs,

and draws of the two folds are paired by index (the folds' posteriors are independent, so the
pairs are draws of the joint posterior) to give a posterior of the pooled low-DIF reversal rate
(eq. 41).

Its null is drawn per draw too: for draw s, blueprint-matched random subtests are drawn from
draw s's own cells with draw s's k_c (NT eq. 35), replicate r using the same random keys in every
draw (so draws are compared on paired controls), and scored on the same frozen pairs. The excess
of draw s is its rate minus the median of its own controls, and its randomization p
(``draw_p_value``) is the plus-one p of NT eq. 11 computed with the draw's anchors against its own
controls. The audit reports the distribution of that p over the draws (median, 90% interval, share
of draws at p <= .05) under that name: how much the test's verdict moves with the uncertain DIF
estimate. It is not a posterior probability of a hypothesis (the former ``prob_exceeds_random``,
the posterior mean of each draw's randomization percentile, was reported as one and is gone;
issue 29). Per pair, ``random_reversal_rate`` is the share of the draws' controls that reverse the
pair: the baseline of its ``reversal_probability``. The offsets, the near-tie pairs
and the full scores stay frozen: the posterior describes uncertainty from the DIF estimate given
the spectral adjustment, not from K selection, the offsets or the population, unless the draws
come from the Bayesian bootstrap (:mod:`bayesirt.audit.bayes.bootstrap`), which refits the
offsets too.

The same per-draw anchors are carried through the audit's diagnostics (specificity, matched
controls, threshold and fraction curves, signature replication) by
:mod:`bayesirt.audit.bayes.diagnostics`.

:func:`fit_family_dif_posterior` fits one fold (ADVI by default, NUTS or MAP on request; NUTS by nutpie
on the posterior written in numba, :mod:`bayesirt.inference.direct_dif`);
:func:`schedule_gap` measures how far NT's five-cycle Newton schedule stops from the optimum that
the MAP reproduces.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence

import numpy as np
import xarray as xr

from bayesirt.audit.engine.anchors import anchor_weights, blueprint_cells, select_anchors
from bayesirt.audit.engine.dif import DIF_CYCLES, fit_family_dif
from bayesirt.audit.engine.ranking import pair_reversals, pooled_rate, weighted_scores
from bayesirt.audit.engine.resampling import matched_random_weights
from bayesirt.errors import DataError
from bayesirt.inference.direct_dif import sample_family_dif
from bayesirt.inference.fitting import sample_model
from bayesirt.inference.methods import SAMPLER
from bayesirt.models.family_dif import build_family_dif

__all__ = ["fit_family_dif_posterior", "schedule_gap", "stacked_draws", "propagate_posterior", "pool_folds",
           "MAP_TOLERANCE", "REFERENCE_CYCLES", "REFERENCE_TOLERANCE", "INTERVAL", "CONDITIONAL"]

#: L-BFGS-B gradient tolerance of the MAP (its delta was 1.6e-7 from the converged Newton in the test).
MAP_TOLERANCE = 1e-6
#: Schedule of the converged Newton reference (:func:`schedule_gap`).
REFERENCE_CYCLES = 500
REFERENCE_TOLERANCE = 1e-12
#: Posterior interval reported by :func:`pool_folds` (equal-tailed).
INTERVAL = 0.90
#: What every DIF posterior of the audit conditions on (DataTree attributes, report, README): its
#: intervals were not checked for coverage with the offsets estimated as the audit estimates them.
CONDITIONAL = ("conditional on the spectral working model: the capability offsets (K and the spectral "
               "adjustment) are held at the audit's estimate, or refitted per draw by the owner bootstrap; the "
               "intervals' coverage of family effects with estimated offsets has not been established")


def fit_family_dif_posterior(y, observed, offsets, family, n_families: int, *, method: str = "advi",
                             draws: int = 500, seed: int = 0, prior: str = "ridge", delta_sd: float = 1.0,
                             easiness_prior: str = "flat", item_ids=None, family_names=None, progress: bool = False,
                             **options) -> xr.DataTree:
    """Posterior of residual family DIF in one audit half, given fixed offsets.

    Parameters
    ----------
    y, observed, offsets, family, n_families
        As in :func:`bayesirt.models.family_dif.build_family_dif`.
    method : {"advi", "fullrank_advi", "nuts", "joint_map"}, default "advi"
        ADVI (mean-field, Adam, the project's loss-plateau stop) is the default: one fold of a
        real benchmark has 10^4-10^5 parameters and NUTS is the check, not the routine. NUTS with
        nutpie (the default sampler) samples the same posterior written in numba
        (:func:`bayesirt.inference.direct_dif.sample_family_dif`), not PyMC's graph.
        ``"joint_map"`` gives the posterior mode (one draw) with L-BFGS-B's gradient tolerance
        :data:`MAP_TOLERANCE` unless ``map_tolerance`` is passed.
    draws : int, default 500
        Draws from the approximation (ADVI), per chain (NUTS); ignored by MAP.
    seed : int, default 0
    prior, delta_sd, easiness_prior, item_ids, family_names
        Passed to :func:`~bayesirt.models.family_dif.build_family_dif` (defaults: NT's ridge
        with a flat easiness prior, whose mode is NT's estimate).
    progress : bool, default False
    **options
        Other keywords of :func:`bayesirt.inference.fitting.sample_model`: ``sampler``, ``tune``,
        ``chains``, ``cores``, ``advi_iterations``, ``advi_tolerance``, ``advi_learning_rate``,
        ``map_tolerance``.

    Returns
    -------
    xarray.DataTree
        As :func:`~bayesirt.inference.fitting.sample_model`: ``posterior`` with ``easiness`` (chain, draw,
        item), ``family_effect`` (chain, draw, item, family), ``dif_range`` (chain, draw, item)
        (and ``family_effect_sd`` when hierarchical). The model settings are in the attribute
        ``bayesirt_family_dif`` (JSON).
    """
    if method == "joint_map":
        options.setdefault("map_tolerance", MAP_TOLERANCE)
    model = {"item_ids": item_ids, "family_names": family_names, "prior": prior, "delta_sd": delta_sd,
             "easiness_prior": easiness_prior}
    if method == "nuts" and options.get("sampler", SAMPLER.default) == "nutpie":
        # the same posterior with its density and gradient in numba (inference.direct_dif), not PyTensor's graph
        tree = sample_family_dif(y, observed, offsets, family, n_families, **model, draws=draws, seed=seed,
                                 progress=progress, **options)
    else:
        pm_model = build_family_dif(y, observed, offsets, family, n_families, **model)
        tree = sample_model(pm_model, method=method, draws=draws, seed=seed, progress=progress, **options)
    tree.attrs["bayesirt_family_dif"] = json.dumps({"prior": prior, "delta_sd": delta_sd,
                                                    "easiness_prior": easiness_prior, "n_families": n_families})
    return tree


def schedule_gap(y, observed, offsets, family, n_families: int, *, cycles: int = DIF_CYCLES) -> dict:
    """How far NT's Newton schedule (App. C.4) stops from the converged ridge optimum.

    Runs :func:`bayesirt.audit.engine.dif.fit_family_dif` with the schedule (default NT's five cycles) and with
    :data:`REFERENCE_CYCLES` cycles at tolerance :data:`REFERENCE_TOLERANCE` (the optimum the
    posterior mode reproduces).

    Returns
    -------
    dict
        ``max_abs_delta_diff``, ``max_abs_dif_range_diff``, ``max_abs_easiness_diff`` (largest
        absolute differences over items and families), ``cycles`` (run by the schedule),
        ``reference_cycles`` and ``reference_last_change`` (of the converged run).
    """
    schedule = fit_family_dif(y, observed, offsets, family, n_families, cycles=cycles)
    reference = fit_family_dif(y, observed, offsets, family, n_families, cycles=REFERENCE_CYCLES,
                               tolerance=REFERENCE_TOLERANCE)
    return {
        "max_abs_delta_diff": float(np.abs(schedule.family_effect - reference.family_effect).max()),
        "max_abs_dif_range_diff": float(np.abs(schedule.dif_range - reference.dif_range).max()),
        "max_abs_easiness_diff": float(np.abs(schedule.easiness - reference.easiness).max()),
        "cycles": schedule.cycles,
        "reference_cycles": reference.cycles,
        "reference_last_change": reference.last_change,
    }


def stacked_draws(tree: xr.DataTree) -> tuple[np.ndarray, np.ndarray]:
    """``(family_effect (draw, item, family), easiness (draw, item))`` with chains and draws
    stacked, from a tree of :func:`fit_family_dif_posterior`: the inputs of
    :func:`propagate_posterior`."""
    post = tree["posterior"].to_dataset()
    missing = {"family_effect", "easiness"} - set(post.data_vars)
    if missing:
        raise DataError(f"the posterior has no {sorted(missing)}; pass a tree from fit_family_dif_posterior")
    stacked = post[["family_effect", "easiness"]].stack(sample=("chain", "draw"))
    return (stacked["family_effect"].transpose("sample", "item", "family").values,
            stacked["easiness"].transpose("sample", "item").values)


def propagate_posterior(draws_delta, draws_easiness, *, item_group, anchor_fraction: float, y_target, observed_target, full,
                        pairs, item_ids=None, model_ids=None, controls: int = 0, seed: int = 0) -> xr.Dataset:
    """Run the anchor -> reversal chain of one fold once per posterior draw.

    Parameters
    ----------
    draws_delta : array_like, shape (draw, item, family)
        Posterior draws of delta in the audit half (e.g. :func:`stacked_draws`).
    draws_easiness : array_like, shape (draw, item)
        The same draws of b.
    item_group : array_like, shape (item,)
        Metadata item groups (blueprint cells are cut within them).
    anchor_fraction : float
        Anchor fraction (NT: 0.5).
    y_target, observed_target : array_like, shape (item, model)
        Target-half responses of the representatives and the observed mask.
    full : array_like, shape (model,)
        The target half's frozen full-benchmark scores.
    pairs : tuple (i, j) of int arrays
        The frozen near-tie pairs (:func:`bayesirt.audit.engine.ranking.near_tie_pairs`).
    item_ids, model_ids : sequence, optional
        Labels of the ``item`` and ``model`` coordinates. Default: 0, 1, ...
    controls : int, default 0
        Blueprint-matched random subtests per draw, drawn from the draw's own cells with its k_c
        (:func:`bayesirt.audit.engine.resampling.matched_random_weights`); replicate r uses the same
        random keys in every draw.
    seed : int, default 0
        Seed of the controls' keys.

    Returns
    -------
    xarray.Dataset
        Per draw: ``dif_range`` (draw, item), ``anchor`` (draw, item; bool), ``anchor_score``
        (draw, model), ``eligible`` and ``reversed`` (draw, pair; bool), ``n_eligible`` and
        ``n_reversed`` (draw); with ``controls``, ``control_eligible`` and ``control_reversed``
        (draw, replicate), ``control_reversal_rate`` (draw, pair: the share of the draw's controls
        that strictly reverse the pair) and ``random_reversal_rate`` (pair: its mean over draws).
        Summaries: ``anchor_probability`` (item), ``reversal_probability``
        (pair: share of draws in which the pair is strictly reversed; a tie counts as not
        reversed). ``full_score`` (model). Coordinates ``item``, ``model`` and, on ``pair``,
        ``model_i`` and ``model_j`` (the labels of the pair's models).
    """
    delta, b = np.asarray(draws_delta, dtype=np.float64), np.asarray(draws_easiness, dtype=np.float64)
    if delta.ndim != 3 or b.shape != delta.shape[:2] or 0 in delta.shape:
        raise DataError(f"draws_delta must be (draw, item, family) and draws_easiness (draw, item) with the same draws "
                        f"and items; got {delta.shape} and {b.shape}")
    if not (np.all(np.isfinite(delta)) and np.all(np.isfinite(b))):
        raise DataError("the posterior draws hold NaN or infinite values; check the fit before propagating it")
    n_draws, n_items = b.shape
    item_group = np.asarray(item_group)
    y_target, observed_target = np.asarray(y_target), np.asarray(observed_target)
    full = np.asarray(full, dtype=np.float64)
    if item_group.shape != (n_items,) or y_target.shape[:1] != (n_items,):
        raise DataError(f"the draws have {n_items} items but item_group has shape {item_group.shape} and y_target "
                        f"{y_target.shape}; pass the same items in the same order")
    if full.shape != y_target.shape[1:]:
        raise DataError(f"full has shape {full.shape} but y_target has {y_target.shape[1]} models")
    i, j = (np.asarray(p) for p in pairs)
    if i.shape != j.shape or i.ndim != 1 or not np.issubdtype(i.dtype, np.integer) or (
            i.size and (min(i.min(), j.min()) < 0 or max(i.max(), j.max()) >= full.size)):
        raise DataError(f"pairs must be two 1-D integer arrays of equal length indexing the {full.size} target models, "
                        "as near_tie_pairs returns")
    items = np.arange(n_items) if item_ids is None else np.asarray(item_ids)
    models = np.arange(full.size) if model_ids is None else np.asarray(model_ids)
    if items.shape != (n_items,) or models.shape != full.shape:
        raise DataError(f"item_ids {items.shape} and model_ids {models.shape} must label the {n_items} items and "
                        f"{full.size} models")

    dif_range = delta.max(axis=2) - delta.min(axis=2)
    cell = blueprint_cells(item_group, b)  # (draw, item)
    # One selection and one weighting for all draws: draw s's cells are renumbered s*C .. s*C+C-1
    # (C cells per draw, fixed by the groups' sizes). Item order within a draw is kept, so ties
    # break by item index as in a per-draw call.
    flat_cell = cell + np.arange(n_draws)[:, None] * (cell.max() + 1)
    selected = select_anchors(flat_cell.ravel(), dif_range.ravel(), anchor_fraction)
    weights = anchor_weights(flat_cell.ravel(), selected).reshape(n_draws, n_items)
    scores = weighted_scores(y_target, weights, observed_target)  # (draw, model)

    eligible, reversed_ = pair_reversals(full, scores, (i, j))
    null = {}
    if controls:
        counts = np.empty((2, n_draws, controls), dtype=np.int64)
        pair_rate = np.empty((n_draws, i.size), dtype=np.float32)
        for d in range(n_draws):
            random_weights = matched_random_weights(cell[d], weights[d], controls, seed)
            control_eligible, control_reversed = pair_reversals(
                full, weighted_scores(y_target, random_weights, observed_target), (i, j))  # (replicate, pair)
            counts[:, d] = control_eligible.sum(axis=1), control_reversed.sum(axis=1)
            pair_rate[d] = control_reversed.mean(axis=0)
        null = {"control_eligible": (("draw", "replicate"), counts[0]),
                "control_reversed": (("draw", "replicate"), counts[1]),
                "control_reversal_rate": (("draw", "pair"), pair_rate),
                "random_reversal_rate": ("pair", pair_rate.mean(axis=0, dtype=np.float64))}

    return xr.Dataset(
        {
            "dif_range": (("draw", "item"), dif_range),
            "anchor": (("draw", "item"), selected.reshape(n_draws, n_items)),
            "anchor_score": (("draw", "model"), scores),
            "eligible": (("draw", "pair"), eligible),
            "reversed": (("draw", "pair"), reversed_),
            "n_eligible": ("draw", eligible.sum(axis=1)),
            "n_reversed": ("draw", reversed_.sum(axis=1)),
            "anchor_probability": ("item", selected.reshape(n_draws, n_items).mean(axis=0)),
            "reversal_probability": ("pair", reversed_.mean(axis=0)),
            "full_score": ("model", full),
            **null,
        },
        coords={"draw": np.arange(n_draws), "item": items, "model": models, "pair": np.arange(i.size),
                "model_i": ("pair", models[i]), "model_j": ("pair", models[j])},
        attrs={"anchor_fraction": anchor_fraction, "controls_per_draw": int(controls), "control_seed": int(seed)},
    )


def pool_folds(folds: Sequence[xr.Dataset]) -> xr.DataTree:
    """Posterior of the pooled low-DIF reversal rate, of its excess over each draw's own
    matched-random median, and the distribution over draws of each draw's randomization p.

    Parameters
    ----------
    folds : sequence of xarray.Dataset
        :func:`propagate_posterior` of each outer fold with per-draw ``controls``, with the same
        numbers of draws and controls (draw s of every fold forms joint draw s; control r of every
        fold forms pooled control r).

    Returns
    -------
    xarray.DataTree
        Root: ``low_dif_reversal_rate`` (draw); ``control_rate`` (draw, replicate), the pooled
        rates T_r^(s) of the draw's controls (eq. 36); ``control_median`` (draw); ``excess_pp``
        (draw) = 100 (T_DIF^(s) - median_r T_r^(s)); ``draw_p_value`` (draw), the plus-one
        randomization p of draw s against its own controls, (1 + #{T_r^(s) >= T_DIF^(s)}) / (R_s + 1)
        (eq. 11 with the draw's anchors; R_s its defined controls); their posterior ``*_quantiles``
        (quantile: the median and the :data:`INTERVAL` equal-tailed bounds); ``share_draws_p_le_05``
        (share of defined draws with p <= .05); ``undefined_draws`` (draws with no eligible pair in
        any fold, or no defined control, left out of the summaries). The per-draw p is a
        randomization p-value computed with one draw's anchors; its distribution over draws says how
        much the test's verdict depends on the uncertain DIF estimate. It is not the posterior
        probability of a hypothesis. Children ``fold_0``, ``fold_1``, ...: the per-fold Datasets
        (anchor and pair reversal probabilities).
    """
    if len(folds) == 0:
        raise DataError("pool_folds needs the propagate_posterior result of at least one fold")
    sizes = [(f.sizes.get("draw"), f.sizes.get("replicate")) for f in folds]
    if len(set(sizes)) != 1 or sizes[0][0] is None:
        raise DataError(f"every fold must hold the same number of draws to pair them; got {[s[0] for s in sizes]}")
    if sizes[0][1] is None:
        raise DataError("the folds have no per-draw controls; run propagate_posterior with controls > 0")
    rate = pooled_rate(np.stack([f["n_reversed"].values for f in folds]),
                       np.stack([f["n_eligible"].values for f in folds]))
    n_draws, n_controls = sizes[0]
    control = pooled_rate(np.stack([f["control_reversed"].values.ravel() for f in folds]),
                          np.stack([f["control_eligible"].values.ravel() for f in folds])).reshape(n_draws, n_controls)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a draw without a defined control has no median
        median = np.nanmedian(control, axis=1)
    excess = 100 * (rate - median)
    defined = ~np.isnan(excess)
    n_defined = (~np.isnan(control)).sum(axis=1)
    p_value = np.where(defined, (1 + (control >= rate[:, None]).sum(axis=1)) / (n_defined + 1), np.nan)
    tail = (1 - INTERVAL) / 2
    quantiles = [tail, 0.5, 1 - tail]
    root = xr.Dataset(
        {
            "low_dif_reversal_rate": ("draw", rate),
            "control_rate": (("draw", "replicate"), control),
            "control_median": ("draw", median),
            "excess_pp": ("draw", excess),
            "draw_p_value": ("draw", p_value),
            "low_dif_reversal_rate_quantiles": ("quantile", _quantiles(rate[defined], quantiles)),
            "control_median_quantiles": ("quantile", _quantiles(median[defined], quantiles)),
            "excess_pp_quantiles": ("quantile", _quantiles(excess[defined], quantiles)),
            "draw_p_value_quantiles": ("quantile", _quantiles(p_value[defined], quantiles)),
            "share_draws_p_le_05": float((p_value[defined] <= 0.05).mean()) if defined.any() else np.nan,
            "undefined_draws": int((~defined).sum()),
        },
        coords={"draw": folds[0]["draw"].values, "replicate": np.arange(n_controls), "quantile": quantiles},
        attrs={"interval": INTERVAL, "controls_per_draw": int(n_controls),
               "null": "per draw: blueprint-matched random subtests from the draw's own cells (paired keys)",
               "conditional_on": CONDITIONAL},
    )
    return xr.DataTree.from_dict({"/": root} | {f"fold_{h}": fold for h, fold in enumerate(folds)})


def _quantiles(values: np.ndarray, quantiles: list[float]) -> np.ndarray:
    return np.quantile(values, quantiles) if values.size else np.full(len(quantiles), np.nan)
