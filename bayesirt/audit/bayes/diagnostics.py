"""Posterior counterparts of the audit's diagnostics: within-family specificity (NT B.3),
discrimination-matched controls (B.2), score-gap thresholds and anchor fractions (B.4-B.5) and
item-signature replication (D.3), each recomputed once per draw of the Bayesian layer
(:mod:`bayesirt.audit.bayes.posterior`) instead of once at the point anchors.

What a draw carries. Draw ``s`` of outer fold ``h`` is a draw ``(delta^(s), b^(s))`` of the
residual-DIF posterior of its audit half; :func:`~bayesirt.audit.bayes.posterior.propagate_posterior` turned
it into blueprint cells, anchors ``S^(s)``, restoring weights and target-half anchor scores. Draw
``s`` of fold 0 and draw ``s`` of fold 1 form joint draw ``s`` (the halves' posteriors are
independent), exactly as :func:`~bayesirt.audit.bayes.posterior.pool_folds` pairs them. As in the Bayesian
layer, the offsets, K, the near-tie pairs, the full scores and the spectral discrimination proxy
``g_i`` stay frozen: the posteriors describe the uncertainty of the residual-DIF estimate.

- :func:`posterior_specificity` (B.3, eq. 51-55): per draw the within-family low-DIF reversal rate
  among same-family, different-owner near ties, the within excess over the deterministic run's
  matched-random within median, the cross-minus-within gap ``G^(s)`` and the specificity
  ``G^(s) - median_r G_r``. The controls are the deterministic run's (cell-matched, eq. 35): their
  per-cell counts ``k_c = max(1, round(anchor_fraction n_c))`` depend only on the item-group sizes, never on
  the draw, and :func:`~bayesirt.audit.bayes.posterior.pool_folds` compares the primary rate with the same
  frozen controls, so the cross rate here is its ``low_dif_reversal_rate``.
- :func:`posterior_matched_controls` (B.2, eq. 42-50): controls re-drawn for every draw, matched to
  ``S^(s)``. The discrimination strata are cut inside the draw's cells (``b^(s)``) and every
  stratum receives as many control items as ``S^(s)`` holds there, which changes from draw to draw;
  controls matched to the point anchors would not be matched to ``S^(s)``. Draw ``s`` uses the
  deterministic run's random streams (replicate ``r`` of fold ``h`` from ``(seed, h, r)``, common
  random numbers across draws), so draws differ through their anchors, not through control noise,
  and a draw equal to the point estimate reproduces the deterministic controls exactly. Cost:
  controls x draws scored subtests per fold, against controls alone deterministically. Measured on
  the real BBH matrix (250 items; 254 and 264 target models; 2,691 / 3,072 cross and 1,409 / 1,503
  within pairs per fold; 400 ADVI draws; one BLAS thread on the 2-core machine at load 4-8): 50
  controls per draw 7.8 s, 200 controls 17.9 s, 1,000 controls 74.9 s (the deterministic control
  with 199 replicates: ~1 s). Against 1,000 controls per draw, 200 move each draw's excess by
  0.08-0.10 pp (SD over draws) and all draws together by 0.02 pp, 50 by 0.16-0.20 pp and 0.29 pp,
  while the posterior SD of the excess was 1.15-1.38 pp: hence :data:`POSTERIOR_CONTROLS` = 100 (at
  most the deterministic count; 200 until scoring them was found to dominate a large --bayes
  audit). The cost grows with items x target models x controls (and the
  pairs): on a 14,000-item bank with ~1,250 target models per fold it should be a few hundred times
  BBH's (an estimate from that scaling, not measured), so lower the count there (``AuditConfig.bayes_controls``, ``--bayes-controls``). The
  balance diagnostics (g, CITC, SEM, alpha) of ``S^(s)`` against its own controls come along at no
  extra scoring cost.
- :func:`posterior_sensitivity` (B.4-B.5, eq. 56): per draw the pooled low-DIF rate at every
  score-gap threshold and anchor fraction, and its excess over the deterministic matched-random
  median of that (fraction, threshold) cell (controls frozen as in the Bayesian layer).
- :func:`posterior_signatures` (D.3, eq. 62-67): per draw the median family-wise Spearman rho,
  the top-20% overlap precision and the advantaged-family agreement between the two halves, with
  common cells from the draw's ``(b_D^(s) + b_V^(s)) / 2``. The permutation p-values stay the
  deterministic ones: a permutation null per draw would be a different question (and 500 x draws
  statistics) -- the posterior says how well the observed signature statistics are determined.

Moving the draws to another point estimate (location shift). The posterior is fitted given the
offsets of the primary purification's last round, whose point estimate is that round's
``selection_fit``. Two diagnostics read other fits: the anchor fractions other than the primary one
(purification rerun at that fraction, with its own last-round offsets) and the signatures (the
final refit on ``S(3)``). Refitting the posterior for each would cost 4 + 2 further posterior fits
per audit (ADVI: 7-25 s per fold on the 120-item test benchmark depending on the machine's load,
about a minute per fold on BBH).
Instead the draws are moved by the difference of the point estimates,
``delta^(s) -> (delta^(s) - delta_selection) + delta_target`` and the same for ``b``
(:func:`shifted_draws`): the posterior keeps its shape and follows the point estimate, the
first-order (Laplace) change of a posterior whose conditioning offsets change a little (successive
purification rounds share most anchors) -- an approximation, exact only in location. The primary
fraction's draws are used as fitted. A draw equal to the point estimate becomes the target fit
exactly, so every counterpart reduces to its deterministic statistic.

Reading the posteriors. A statistic of the draws is not the statistic of the point estimate:
nonlinear ones move. The Spearman correlation of two halves' draws is attenuated by both halves'
posterior noise (its posterior sits below the point value when the signatures are noisy), and a
near-tie reversal rate under noisy anchors can drift toward that of a random recomposition (as on
the simulated test benchmark). The
posteriors say how much each diagnostic depends on the uncertain DIF estimate; the deterministic
values stay the confirmatory statistics.

Summaries (:func:`describe`): posterior mean, the :data:`~bayesirt.audit.bayes.posterior.INTERVAL`
equal-tailed quantiles (the coordinates of :func:`~bayesirt.audit.bayes.posterior.pool_folds`) and the
posterior probability of a positive value, over the draws where the statistic is defined (NaN
draws -- no eligible pair, no overlap -- are left out and counted in ``*_undefined``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.audit.bayes.matched import posterior_matched_controls
from bayesirt.audit.bayes.posterior import INTERVAL, propagate_posterior
from bayesirt.audit.bayes.posterior_draws import (
    POSTERIOR_CONTROLS,
    chain_counts,
    check_chains,
    describe,
    draw_counts,
    shifted_draws,
)
from bayesirt.audit.diagnostics.replication import STATISTICS, TOP_SHARE, signature_statistics
from bayesirt.audit.diagnostics.sensitivity import THRESHOLDS
from bayesirt.audit.diagnostics.specificity import WITHIN, within_family_specificity
from bayesirt.audit.engine.anchors import blueprint_cells
from bayesirt.audit.engine.ranking import near_tie_pairs, pooled_rate, reversal_counts
from bayesirt.audit.engine.resampling import PRIMARY, randomization_summary
from bayesirt.audit.engine.result import AuditResult, check_audit
from bayesirt.errors import DataError
from bayesirt.utils.validation import check_number

__all__ = ["posterior_specificity", "fraction_scores", "posterior_sensitivity", "posterior_signatures",
           "signature_draws", "add_posterior_diagnostics", "attach"]


def posterior_specificity(chains: Sequence[xr.Dataset], within_pairs: Sequence, controls: xr.Dataset) -> xr.Dataset:
    """Posterior of the within-family specificity diagnostic (NT B.3, eq. 51-55).

    Parameters
    ----------
    chains : sequence of xarray.Dataset
        :func:`~bayesirt.audit.bayes.posterior.propagate_posterior` of every fold (its ``anchor_score``,
        ``full_score``, ``n_eligible``, ``n_reversed``); draw ``s`` of the folds is joint draw ``s``.
    within_pairs : sequence of (i, j)
        Each fold's frozen same-family, different-owner near ties (``FoldResult.within_pairs``).
    controls : xarray.Dataset
        The deterministic matched-random controls with a ``"within"`` pair set
        (``AuditResult.controls``); frozen, as in :func:`~bayesirt.audit.bayes.posterior.pool_folds`.

    Returns
    -------
    xarray.Dataset
        Per draw: ``cross_rate`` (= the Bayesian layer's ``low_dif_reversal_rate``),
        ``within_rate``, ``within_excess_pp`` = 100 (T_within^(s) - median_r T_within,r),
        ``gap_pp`` = 100 G^(s) = 100 (T_cross^(s) - T_within^(s)) and ``specificity_pp`` =
        100 (G^(s) - median_r G_r) (eq. 54 with the draw's anchors); ``within_eligible`` and
        ``within_reversed`` (fold, draw). Their :func:`describe` summaries (e.g.
        ``prob_gap_pp_positive``); the frozen ``within_median`` and ``gap_median``; the
        deterministic statistics as ``deterministic_*`` (:func:`within_family_specificity`; its
        p-values stay deterministic).
    """
    check_chains(chains, "posterior_specificity")
    if len(within_pairs) != len(chains):
        raise DataError(f"within_pairs has {len(within_pairs)} folds but chains {len(chains)}; pass one pair set per "
                        "fold")
    point = within_family_specificity(controls)
    cross_set, within_set = controls.sel(pair_set=PRIMARY), controls.sel(pair_set=WITHIN)
    within_median = randomization_summary(0.0, within_set["rate"].values)["median"]
    gap_median = randomization_summary(0.0, cross_set["rate"].values - within_set["rate"].values)["median"]
    eligible, reversed_ = chain_counts(chains)
    w_eligible, w_reversed = draw_counts(chains, within_pairs)
    cross, within = pooled_rate(reversed_, eligible), pooled_rate(w_reversed, w_eligible)
    gap = cross - within  # paired by draw: the same anchors S^(s) score both pair sets
    ds = xr.Dataset(
        {"cross_rate": ("draw", cross), "within_rate": ("draw", within),
         "within_excess_pp": ("draw", 100 * (within - within_median)), "gap_pp": ("draw", 100 * gap),
         "specificity_pp": ("draw", 100 * (gap - gap_median)),
         "within_eligible": (("fold", "draw"), w_eligible), "within_reversed": (("fold", "draw"), w_reversed),
         "within_median": within_median, "gap_median": gap_median},
        coords={"draw": chains[0]["draw"].values, "fold": np.arange(len(chains))})
    for key in ("within_rate", "within_excess_pp", "gap_pp", "specificity_pp", "within_p", "specificity_p"):
        ds[f"deterministic_{key}"] = point[key]
    ds.attrs.update(reference="NT B.3, D.1 eq. 51-55 per posterior draw", interval=INTERVAL,
                    controls="the deterministic run's matched-random replicates (frozen)")
    return describe(ds, ["within_rate", "within_excess_pp", "gap_pp", "specificity_pp"])


def fraction_scores(folds, purifications: Mapping[float, Sequence], *, y, observed, item_group, anchor_fraction: float,
                    fractions: Sequence[float] | None = None) -> list[xr.DataArray]:
    """Per-draw target-half anchor scores of every fold at every anchor fraction.

    Parameters
    ----------
    folds : sequence of FoldResult
        With the Bayesian layer (``posterior`` and ``draws``).
    purifications : mapping
        :func:`bayesirt.audit.diagnostics.sensitivity.fraction_purifications` of these folds.
    y, observed : ndarray (item, model)
        The whole response matrix and its observed mask (target columns at ``target_index``).
    item_group : array_like (item,)
    anchor_fraction : float
        The primary anchor fraction: its scores are the Bayesian layer's own chain.
    fractions : sequence of float, optional
        Default: the keys of ``purifications``.

    Returns
    -------
    list of xarray.DataArray
        Per fold, ``anchor_score`` (anchor_fraction, draw, model). At another fraction the draws are moved to
        that purification's ``selection_fit`` (:func:`shifted_draws`) and re-run through cells,
        anchors at that fraction and weights (:func:`~bayesirt.audit.bayes.posterior.propagate_posterior`).
    """
    fractions = list(purifications) if fractions is None else list(fractions)
    out = []
    for h, fold in enumerate(folds):
        if fold.posterior is None or fold.draws is None:
            raise DataError("fraction_scores needs folds of an audit run with bayes=True (posterior and draws)")
        t = fold.target_index
        layers = []
        for fraction in fractions:
            if np.isclose(fraction, anchor_fraction):
                layers.append(fold.posterior["anchor_score"].transpose("draw", "model").values)
                continue
            delta, b = shifted_draws(fold.draws, fold.purification.selection_fit,
                                     purifications[fraction][h].selection_fit)
            none = np.zeros(0, dtype=np.int64)
            chain = propagate_posterior(delta, b, item_group=item_group, anchor_fraction=fraction, y_target=y[:, t],
                                        observed_target=observed[:, t], full=fold.target["full"].to_numpy(),
                                        pairs=(none, none))
            layers.append(chain["anchor_score"].values)
        out.append(xr.DataArray(np.stack(layers), dims=("anchor_fraction", "draw", "model"),
                                coords={"anchor_fraction": fractions, "draw": fold.posterior["draw"].values,
                                        "model": fold.posterior["model"].values}, name="anchor_score"))
    return out


def posterior_sensitivity(scores: Sequence[xr.DataArray], targets: Sequence[pd.DataFrame], *,
                          epsilons: Sequence[float] = THRESHOLDS, sensitivity: xr.Dataset | None = None,
                          gaps: Sequence | None = None) -> xr.Dataset:
    """Posterior of the reversal curves over score-gap thresholds and anchor fractions (NT B.4-B.5).

    Parameters
    ----------
    scores : sequence of xarray.DataArray
        Per fold, per-draw anchor scores (anchor_fraction, draw, model) (:func:`fraction_scores`).
    targets : sequence of pandas.DataFrame
        Per fold, the target table (``full``, ``owner``, ``family`` per model, in ``scores``' model
        order): the pairs of every threshold are frozen from it, as in the deterministic curve.
    epsilons : sequence of float, default :data:`bayesirt.audit.diagnostics.sensitivity.THRESHOLDS`
        Near-tie bands (fractions of the full score; 0.01 = 1 pp).
    sensitivity : xarray.Dataset, optional
        The deterministic curve (``AuditResult.sensitivity``): gives the excess (over its frozen
        matched-random medians) and the ``deterministic_*`` values.
    gaps : sequence of ndarray or None, optional
        Per fold, the both-answered gaps the near ties are selected on with missing cells
        (``FoldResult.pair_gaps``, :func:`bayesirt.audit.engine.ranking.both_answered_gaps`); None: full scores.

    Returns
    -------
    xarray.Dataset
        Dims ``draw``, ``anchor_fraction``, ``threshold`` (pp): ``low_dif_rate`` and ``eligible`` (pooled over
        folds); with ``sensitivity``, ``excess_pp`` = 100 (T^(s) - random median),
        ``random_median``, ``deterministic_low_dif_rate`` and ``deterministic_excess_pp``; and their
        :func:`describe` summaries.
    """
    if len(scores) != len(targets) or not scores:
        raise DataError(f"scores ({len(scores)}) and targets ({len(targets)}) must give the same folds")
    fraction_values = scores[0]["anchor_fraction"].values
    eligible = np.zeros((len(scores), fraction_values.size, len(epsilons), scores[0].sizes["draw"]), dtype=np.int64)
    reversed_ = np.zeros_like(eligible)
    for h, (score, target) in enumerate(zip(scores, targets, strict=True)):
        full = target["full"].to_numpy()
        for e, epsilon in enumerate(epsilons):
            pairs = near_tie_pairs(full, target["owner"].to_numpy(), target["family"].to_numpy(), epsilon=epsilon,
                                   gaps=None if gaps is None else gaps[h])
            for a in range(fraction_values.size):
                eligible[h, a, e], reversed_[h, a, e] = reversal_counts(
                    full, score.isel(anchor_fraction=a).transpose("draw", "model").values, pairs)
    folds = len(scores)
    rate = pooled_rate(reversed_.reshape(folds, -1), eligible.reshape(folds, -1)).reshape(eligible.shape[1:])
    dims = ("anchor_fraction", "threshold", "draw")
    ds = xr.Dataset({"low_dif_rate": (dims, rate), "eligible": (dims, eligible.sum(axis=0))},
                    coords={"anchor_fraction": fraction_values, "threshold": [100 * e for e in epsilons],
                            "draw": scores[0]["draw"].values})
    names = ["low_dif_rate"]
    if sensitivity is not None:
        det = sensitivity.sel(anchor_fraction=ds["anchor_fraction"], threshold=ds["threshold"])
        median = det["random_median"].values
        ds["random_median"] = (("anchor_fraction", "threshold"), median)
        ds["excess_pp"] = (dims, 100 * (rate - median[..., None]))
        ds["deterministic_low_dif_rate"] = (("anchor_fraction", "threshold"), det["low_dif_rate"].values)
        ds["deterministic_excess_pp"] = (("anchor_fraction", "threshold"), det["excess_pp"].values)
        names.append("excess_pp")
    ds["threshold"].attrs["units"] = "percentage points of full score"
    ds.attrs.update(reference="NT B.4, B.5, D.1 eq. 56 per posterior draw", interval=INTERVAL,
                    controls="the deterministic curve's matched-random medians (frozen)",
                    transfer="fractions other than the primary one: draws moved to that purification's fit")
    return describe(ds.transpose("draw", ...), names)


def posterior_signatures(delta_d, delta_v, easiness_d, easiness_v, item_group, *, top_share: float = TOP_SHARE,
                         families=None, deterministic: xr.Dataset | None = None) -> xr.Dataset:
    """Posterior of the half-to-half signature statistics (NT D.3, eq. 62-67).

    Parameters
    ----------
    delta_d, delta_v : array_like (draw, item, family)
        Draws of the discovery and validation family effects, paired by draw index (the halves'
        posteriors are independent).
    easiness_d, easiness_v : array_like (draw, item)
        The same draws of b: draw ``s``'s common cells are
        ``blueprint_cells(item_group, (b_D^(s) + b_V^(s)) / 2)`` (eq. 62-63).
    item_group : array_like (item,)
    top_share : float, default 0.2
    families : sequence, optional
        Labels of the ``family`` coordinate.
    deterministic : xarray.Dataset, optional
        :func:`~bayesirt.audit.diagnostics.replication.signature_replication` output: its ``observed`` and
        permutation ``p_value`` (deterministic; not recomputed per draw) are copied alongside.

    Returns
    -------
    xarray.Dataset
        ``value`` (draw, statistic: :data:`~bayesirt.audit.diagnostics.replication.STATISTICS`), ``rho``
        (draw, family), the :func:`describe` summaries of ``value``, and ``deterministic_value``,
        ``p_value`` (statistic) when ``deterministic`` is given.
    """
    delta_d, delta_v = np.asarray(delta_d, dtype=np.float64), np.asarray(delta_v, dtype=np.float64)
    easiness_d, easiness_v = np.asarray(easiness_d, dtype=np.float64), np.asarray(easiness_v, dtype=np.float64)
    if (delta_d.ndim != 3 or delta_d.shape != delta_v.shape or easiness_d.shape != delta_d.shape[:2]
            or easiness_v.shape != easiness_d.shape or delta_d.shape[2] < 2):
        raise DataError(f"delta_d {delta_d.shape} and delta_v {delta_v.shape} must be (draw, item, family) with at "
                        f"least 2 families and easiness_d {easiness_d.shape}, easiness_v {easiness_v.shape} "
                        "(draw, item) with the same draws and items")
    check_number(top_share, name="top_share", caller="posterior_signatures", low=0, high=1, low_open=True)
    cells = blueprint_cells(np.asarray(item_group), (easiness_d + easiness_v) / 2)
    rho, values = zip(*(signature_statistics(d, v, c, top_share=top_share)
                        for d, v, c in zip(delta_d, delta_v, cells, strict=True)))
    n_families = delta_d.shape[2]
    ds = xr.Dataset({"value": (("draw", "statistic"), np.stack(values)), "rho": (("draw", "family"), np.stack(rho))},
                    coords={"draw": np.arange(delta_d.shape[0]), "statistic": list(STATISTICS),
                            "family": np.arange(n_families) if families is None else list(families)})
    if deterministic is not None:
        ds["deterministic_value"] = ("statistic", deterministic["observed"].sel(statistic=list(STATISTICS)).values)
        ds["p_value"] = ("statistic", deterministic["p_value"].sel(statistic=list(STATISTICS)).values)
        ds.attrs["permutations"] = int(deterministic.attrs["permutations"])
    ds.attrs.update(reference="NT D.3 eq. 62-67 per posterior draw", interval=INTERVAL, top_share=top_share,
                    p_values="deterministic (within-cell permutations of the point signatures), not per draw")
    return describe(ds, ["value"])


def signature_draws(result: AuditResult) -> tuple[np.ndarray, ...]:
    """``(delta_d, delta_v, easiness_d, easiness_v)``: each half's draws moved to its final refit on
    ``S(3)`` (the fit :func:`~bayesirt.audit.diagnostics.replication.signature_replication` reads;
    :func:`shifted_draws`). Discovery = fold 0's audit half, validation = fold 1's."""
    if any(f.draws is None for f in result.folds):
        raise DataError("signature_draws needs an audit run with bayes=True (its folds' posterior draws)")
    moved = [shifted_draws(f.draws, f.purification.selection_fit, f.purification.final_fit) for f in result.folds]
    return moved[0][0], moved[1][0], moved[0][1], moved[1][1]


def add_posterior_diagnostics(result: AuditResult, responses: xr.Dataset, *, replicates: int = POSTERIOR_CONTROLS,
                              workers: int | None = 1, scheduler: str | None = None,
                              progress: bool = False) -> AuditResult:
    """Attach the posterior counterparts of the diagnostics that read a finished audit (in place;
    also returned): the signatures when ``result.replication`` is set and the matched controls when
    ``result.matched`` is (with its seed), as children ``signatures`` and ``matched`` of
    ``result.bayes`` and keys of ``result.summary["bayes"]``. Nothing happens without the Bayesian
    layer or for an audit that was not estimated. (Specificity and the sensitivity curves are
    computed by :func:`~bayesirt.audit.primary.run_audit` itself.)"""
    if result.bayes is None or result.summary["status"] != "estimated":
        return result
    if result.replication is not None:
        t = time.perf_counter()
        check_audit(result, responses, "add_posterior_diagnostics")
        det = result.replication["signatures"]
        ds = posterior_signatures(*signature_draws(result), responses["item_group"].values.astype(str),
                                  top_share=det.attrs["top_share"], families=result.summary["families"],
                                  deterministic=det)
        attach(result, "signatures", ds)
        result.timings["bayes_signatures_s"] = time.perf_counter() - t
    if result.matched is not None:
        t = time.perf_counter()
        ds = posterior_matched_controls(result, responses, replicates=min(replicates, result.config.controls),
                                        seed=int(result.matched.attrs["seed"]), workers=workers, scheduler=scheduler,
                                        progress=progress)
        attach(result, "matched", ds)
        result.timings["bayes_matched_s"] = time.perf_counter() - t
    return result


def attach(result: AuditResult, name: str, ds: xr.Dataset) -> None:
    """Store a posterior diagnostic as child ``name`` of ``result.bayes`` and its summary in
    ``result.summary["bayes"][name]``."""
    result.bayes[name] = ds
    result.summary["bayes"][name] = _summary(name, ds)


def _stat(ds: xr.Dataset, name: str, **where) -> dict:
    pick = (lambda v: v.sel(**where)) if where else (lambda v: v)
    out = {"mean": float(pick(ds[f"{name}_mean"])), "q05_q50_q95": pick(ds[f"{name}_quantiles"]).values.tolist(),
           "prob_positive": float(pick(ds[f"prob_{name}_positive"])),
           "undefined_draws": int(pick(ds[f"{name}_undefined"]))}
    key = f"deterministic_{name}"
    if key in ds:
        out["deterministic"] = float(pick(ds[key]))
    return out


def _summary(name: str, ds: xr.Dataset) -> dict:
    """The ``summary.json`` entry of a posterior diagnostic."""
    if name == "specificity":
        return {k: _stat(ds, k) for k in ("within_rate", "within_excess_pp", "gap_pp", "specificity_pp")}
    if name == "matched":
        return {"replicates_per_draw": int(ds.attrs["replicates"]),
                **{f"excess_pp_{s}": _stat(ds, "excess_pp", pair_set=s) for s in ds["pair_set"].values},
                **{k: _stat(ds, k) for k in ("g_ratio", "citc_ratio", "sem_ratio", "abs_delta_alpha")}}
    if name == "signatures":
        out = {}
        for s in ds["statistic"].values:
            out[str(s)] = {"mean": float(ds["value_mean"].sel(statistic=s)),
                           "q05_q50_q95": ds["value_quantiles"].sel(statistic=s).values.tolist(),
                           "undefined_draws": int(ds["value_undefined"].sel(statistic=s))}
            if "deterministic_value" in ds:
                out[str(s)] |= {"deterministic": float(ds["deterministic_value"].sel(statistic=s)),
                                "permutation_p_value": float(ds["p_value"].sel(statistic=s))}
        return out
    if name == "sensitivity":
        keys = [k for k in ("low_dif_rate", "excess_pp") if k in ds]
        return [{"anchor_fraction": float(a), "threshold_pp": float(t), **{k: _stat(ds, k, anchor_fraction=a, threshold=t) for k in keys}}
                for a in ds["anchor_fraction"].values for t in ds["threshold"].values]
    raise DataError(f"no summary for posterior diagnostic {name!r}")
