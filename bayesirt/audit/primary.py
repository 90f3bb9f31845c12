"""The primary family-DIF near-tie audit (NT sections 3.1-3.4, App. C and D.1).

Population (C.1) -> per outer fold h (the audit half h selects K, learns directions, estimates
residual DIF and chooses anchors; the other half's representatives are scored with them):
nested K selection (C.3), three-round purification (C.5), full and weighted anchor scores
(eq. 8), frozen near-tie pairs and strict reversals (D.1) -> counts pooled over both folds ->
matched-random controls (C.6), composition bootstrap (C.7) and owner bootstrap (D.1).

Nothing a fold's anchors depend on is computed from the other half's responses: the target half
enters only through its scores.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.audit.adjustment.joint_mirt import select_dimension_direct
from bayesirt.audit.adjustment.spectral import DimensionSelection, select_dimension
from bayesirt.audit.bayes.bootstrap import bootstrap_draws
from bayesirt.audit.bayes.diagnostics import attach, fraction_scores, posterior_sensitivity, posterior_specificity
from bayesirt.audit.bayes.laplace import laplace_draws
from bayesirt.audit.bayes.near_ties import add_near_ties, check_ability_spec
from bayesirt.audit.bayes.posterior import (
    CONDITIONAL,
    fit_family_dif_posterior,
    pool_folds,
    propagate_posterior,
    schedule_gap,
    stacked_draws,
)
from bayesirt.audit.diagnostics.sensitivity import fraction_purifications, gap_and_fraction_sensitivity
from bayesirt.audit.diagnostics.specificity import within_family_specificity
from bayesirt.audit.engine.anchors import capability_offsets, purify
from bayesirt.audit.engine.bootstrap import composition_bootstrap, owner_bootstrap
from bayesirt.audit.engine.ranking import (
    both_answered_gaps,
    kendall_tau_b,
    near_tie_pairs,
    percentile_ranks,
    pooled_rate,
    reversal_counts,
    weighted_scores,
)
from bayesirt.audit.engine.resampling import matched_random_controls
from bayesirt.audit.engine.result import AuditConfig, AuditResult, FoldResult, input_sha256
from bayesirt.audit.engine.settings import SMALL_SAMPLE_PAIRS
from bayesirt.data.populations import audit_population
from bayesirt.data.responses import MISSING
from bayesirt.errors import warn
from bayesirt.models.family_dif import EASINESS_SD
from bayesirt.utils.parallel import blas_threads, shared_cluster, spawn_seeds
from bayesirt.utils.progress import stage

__all__ = ["run_audit", "OFFSETS_METHOD"]

#: How the Bayesian layer treats the capability offsets (summary.json ``bayes.offsets``), by
#: whether ``bayes_method`` is "bootstrap".
OFFSETS_METHOD = {
    False: "fixed: the deterministic run's spectral offsets (selected K, last purification round's anchors)",
    True: "per draw: owner-clustered Bayesian bootstrap of the audit half, offsets, DIF and the three purification "
          "rounds refitted with K fixed",
}


def _posterior(y_audit, obs_audit, family_audit, owner_audit, n_families, item_group, item_ids, purification, k,
               seed, config: AuditConfig, target: dict) -> tuple[xr.Dataset, xr.Dataset, dict | None, list[str]]:
    """The Bayesian layer in one fold: draws of (delta, b), propagated through anchors and
    reversals; also returns the stacked draws (family coordinate 0..F-1, relabelled by the caller).

    ``bayes_method="laplace"``: the per-item Laplace approximation of the DIF posterior given the
    offsets (:mod:`bayesirt.audit.bayes.laplace`); ``"bootstrap"``: the owner-clustered Bayesian bootstrap of the audit half, which
    refits offsets, DIF and purification per draw with K fixed (:mod:`bayesirt.audit.bayes.bootstrap`).
    Otherwise the DIF posterior given the offsets that chose the anchors (the last purification
    round's)."""
    notes, gap, easiness_prior, capped = [], None, None, 0
    if config.bayes_method == "bootstrap":
        delta, easiness, info = bootstrap_draws(y_audit, obs_audit, family_audit, n_families, item_group, k,
                                                owner_audit, draws=config.bayes_draws, anchor_fraction=config.anchor_fraction, seed=seed,
                                                svd_seed=purification.seed, return_info=True)
        capped = int((info["newton_capped"] > 0).sum())
        if capped:
            notes.append(f"{capped} of {config.bayes_draws} bootstrap draws of an audit half stopped an inner DIF "
                         "Newton solve at its step cap (newton_iterations) with the step still above the tolerance, "
                         "so in those draws NT's schedule ran on unconverged solves (newton_capped_draws in the "
                         "fold's attributes)")
    else:
        offsets, _ = capability_offsets(y_audit, obs_audit, purification.selection_rows, k, seed=purification.seed,
                                        adjustment=purification.adjustment)
        gap = schedule_gap(y_audit, obs_audit, offsets, family_audit, n_families)
        correct = np.where(obs_audit, y_audit, 0).sum(axis=1)
        degenerate = (correct == 0) | (correct == obs_audit.sum(axis=1))
        easiness_prior = "flat"
        if degenerate.any():  # a flat prior leaves an all-0 / all-1 item's easiness improper
            easiness_prior = "normal"
            notes.append(f"{degenerate.sum()} item(s) are all correct or all wrong in an audit half, so the Bayesian "
                         "layer used the N(0, 2) easiness prior there instead of a flat one")
        if config.bayes_method == "laplace":
            delta, easiness, info = laplace_draws(y_audit, obs_audit, offsets, family_audit, n_families,
                                                  draws=config.bayes_draws, seed=seed,
                                                  easiness_sd=EASINESS_SD if easiness_prior == "normal" else None)
            capped = config.bayes_draws if info["newton_capped"] else 0  # every draw is centred on that mode
            if capped:
                notes.append(f"the Laplace mode search of an audit half stopped at its step cap ({info['newton_steps']} "
                             f"Newton steps, last step {info['last_step']:.2g}); all its draws are centred off the "
                             "posterior mode")
        else:
            tree = fit_family_dif_posterior(y_audit, obs_audit, offsets, family_audit, n_families,
                                            method=config.bayes_method, draws=config.bayes_draws, seed=seed,
                                            prior=config.bayes_prior, easiness_prior=easiness_prior,
                                            item_ids=item_ids, progress=False)
            delta, easiness = stacked_draws(tree)
    chain = propagate_posterior(delta, easiness, item_group=item_group, anchor_fraction=config.anchor_fraction, item_ids=item_ids,
                                controls=config.bayes_controls, seed=spawn_seeds(seed, 1)[0], **target)
    chain.attrs.update(method=config.bayes_method, prior=config.bayes_prior if gap is not None else "none",
                       easiness_prior=str(easiness_prior), newton_capped_draws=int(capped),
                       conditional_on=CONDITIONAL)
    draws = xr.Dataset({"family_effect": (("draw", "item", "family"), delta), "easiness": (("draw", "item"), easiness)},
                       coords={"draw": chain["draw"].values, "item": item_ids, "family": np.arange(n_families)})
    return chain, draws, gap, notes


def _fold(h: int, y, observed, family_index, n_families, pop: pd.DataFrame, item_group, item_ids,
          config: AuditConfig, seeds: list[int]) -> tuple[FoldResult, list[str]]:
    audit = np.flatnonzero((pop["fold"] == h).to_numpy())
    target = np.flatnonzero(((pop["fold"] == 1 - h) & pop["representative"]).to_numpy())
    owner = pop["owner"].to_numpy()
    if config.fixed_k is None:
        rule = select_dimension_direct if config.adjustment == "direct-mirt" else select_dimension
        selection = rule(y[:, audit], observed[:, audit], owner[audit], item_group, seed=seeds[0], max_k=config.max_k)
    else:
        k = config.fixed_k[h]
        selection = DimensionSelection(k=k, k_best=k, table=pd.DataFrame({"k": [k], "selected": [True]}),
                                       validation_owners=())
    purification = purify(y[:, audit], observed[:, audit], family_index[audit], n_families, item_group,
                          selection.k, anchor_fraction=config.anchor_fraction, seed=seeds[1], adjustment=config.adjustment)
    y_t, obs_t = y[:, target], observed[:, target]
    full = weighted_scores(y_t, np.ones(y.shape[0]), obs_t)
    anchor = weighted_scores(y_t, purification.weights, obs_t)
    fam_t, own_t = pop["family"].to_numpy()[target], owner[target]
    gaps = both_answered_gaps(y_t, obs_t)  # None with complete data: the full-score gaps (ranking module notes)
    pairs = near_tie_pairs(full, own_t, fam_t, epsilon=config.epsilon, gaps=gaps)
    within = near_tie_pairs(full, own_t, fam_t, epsilon=config.epsilon, pair_type="within", gaps=gaps)
    eligible, n_rev = reversal_counts(full, anchor, pairs)
    all_pairs = near_tie_pairs(full, own_t, fam_t, pair_type="all")
    all_eligible, all_rev = reversal_counts(full, anchor, all_pairs)
    table = pd.DataFrame({"model_id": pop["model_id"].to_numpy()[target], "family": fam_t, "owner": own_t,
                          "full": full, "anchor": anchor, "shift": anchor - full})
    posterior, draws, gap, notes = None, None, None, []
    if config.bayes:
        posterior, draws, gap, notes = _posterior(
            y[:, audit], observed[:, audit], family_index[audit], owner[audit], n_families, item_group, item_ids, purification,
            selection.k, seeds[2], config, {"y_target": y_t, "observed_target": obs_t, "full": full, "pairs": pairs,
                                            "model_ids": table["model_id"].to_numpy()})
    return FoldResult(audit_fold=h, selection=selection, purification=purification, target=table, pairs=pairs,
                      within_pairs=within, eligible=int(eligible), reversed=int(n_rev),
                      tau_b=float(kendall_tau_b(full, anchor)),
                      all_cross_eligible=int(all_eligible), all_cross_reversed=int(all_rev), target_index=target,
                      posterior=posterior, schedule_gap=gap, draws=draws, pair_gaps=gaps), notes


def run_audit(responses: xr.Dataset, config: AuditConfig | None = None, *, workers: int | None = 1,
              scheduler: str | None = None, progress: bool = True, threads: int | None = 1) -> AuditResult:
    """Run the primary audit on a response Dataset with ``family`` and ``owner`` coordinates.

    Parameters
    ----------
    responses : xarray.Dataset
        From :mod:`bayesirt.data` (families and owners derived from model ids, or supplied).
    config : AuditConfig, optional
        Default: NT's frozen settings.
    workers, scheduler
        Where the controls and bootstraps run: in this process (``workers=1``, the default: at
        benchmark sizes they take seconds, less than starting a cluster), on one local Dask
        cluster of ``workers`` processes shared by both, or on a running ``scheduler``. The
        numbers do not depend on them.
    progress : bool
        Progress bars.
    threads : int, optional
        BLAS threads in this process (:func:`bayesirt.utils.parallel.blas_threads`; None: the library
        default). One is the default: the folds are dominated by elementwise work, and on the
        2-core benchmark machine one thread was faster than two.

    Returns
    -------
    AuditResult
        ``summary["status"]`` is ``"not estimable"`` (with the reason) when no near-tie pair is
        eligible; the resampling is then skipped.
    """
    config = (config or AuditConfig()).resolved()
    with blas_threads(threads):
        return _run_audit(responses, config, workers, scheduler, progress)


def _run_audit(responses, config, workers, scheduler, progress) -> AuditResult:
    timings, t0 = {}, time.perf_counter()
    if config.bayes and config.bayes_ability_spec is not None:  # a bad ability spec fails before any work
        check_ability_spec(config.bayes_ability_spec)
    pop = audit_population(responses, owner_cap=config.owner_cap, min_family_size=config.min_family_size,
                           seed=config.population_seed, lineage_filter=config.lineage_filter,
                           representative=config.representative, families=config.families)
    timings["population_s"] = time.perf_counter() - t0
    y_all = responses["responses"].values
    observed = y_all != MISSING
    y = np.where(observed, y_all, 0).astype(np.int8)
    item_group = responses["item_group"].values.astype(str)
    testlet = responses["testlet"].values.astype(str) if "testlet" in responses.coords else None
    families = sorted(pop.loc[pop["status"] == "retained", "family"].unique())
    family_index = np.searchsorted(families, pop["family"].to_numpy())  # only retained models are used
    seeds = spawn_seeds(config.seed, 5)
    item_ids = responses["item_id"].values.astype(str)
    folds, notes = [], []
    fold_seeds = [spawn_seeds(seeds[h], 3) for h in (0, 1)]
    stage(f"audit: {int((pop['status'] == 'retained').sum()):,} models in {len(families)} families retained",
          enabled=progress)
    for h in (0, 1):
        t = time.perf_counter()
        stage(f"audit: fold {h + 1} of 2 - dimension selection, anchor purification, near-tie reversals"
              + (", Bayesian layer" if config.bayes else ""), enabled=progress)
        fold, fold_notes = _fold(h, y, observed, family_index, len(families), pop, item_group, item_ids, config,
                                 fold_seeds[h])
        if fold.draws is not None:
            fold.draws = fold.draws.assign_coords(family=families)
        folds.append(fold)
        notes += fold_notes
        timings[f"fold{h}_s"] = time.perf_counter() - t
    eligible = np.array([f.eligible for f in folds])
    n_rev = np.array([f.reversed for f in folds])
    rate = float(pooled_rate(n_rev, eligible))
    summary = {
        "status": "estimated" if eligible.sum() > 0 else "not estimable",
        "families": families,
        "eligible_pairs": int(eligible.sum()),
        "reversals": int(n_rev.sum()),
        "low_dif_reversal_rate": rate,
        "mean_tau_b": float(np.mean([f.tau_b for f in folds])),
        "all_cross_family_reversal_rate": float(pooled_rate(np.array([f.all_cross_reversed for f in folds]),
                                                            np.array([f.all_cross_eligible for f in folds]))),
        "selected_k": [f.selection.k for f in folds],
        "anchor_counts": [int(f.purification.selected.sum()) for f in folds],
        "n_items": int(y.shape[0]),
        "n_representatives": int(pop["representative"].sum()),
        "input_sha256": input_sha256(responses),
    }
    result = AuditResult(config=config, population=pop, folds=folds, summary=summary, timings=timings,
                         warnings=sorted(set(notes)))
    if summary["status"] != "estimated":
        summary["reason"] = (f"no different-owner, different-family pair of representatives is within "
                             f"{100 * config.epsilon:g} pp on the full benchmark in either fold, so the reversal "
                             "rate has no denominator")
        result.warnings.append(summary["reason"])
        return result
    if summary["eligible_pairs"] < SMALL_SAMPLE_PAIRS:
        n = summary["eligible_pairs"]
        summary["small_sample_note"] = (
            f"only {n} eligible near-tie pair{'s' if n != 1 else ''} (fewer than {SMALL_SAMPLE_PAIRS}): one reversal "
            f"moves the rate by {100 / n:.1f} pp, so the rate, its excess over the matched-random controls and the p "
            "value rest on very few pairs; read them as indicative only")
        warn(summary["small_sample_note"], UserWarning)
    fold_inputs = [{"y": y[:, f.target_index], "observed": observed[:, f.target_index],
                    "full": f.target["full"].to_numpy(),
                    "pairs": f.pairs, "cell": f.purification.cell, "anchor_weights": f.purification.weights,
                    "extra_pairs": {"within": f.within_pairs}}
                   for f in folds]
    with shared_cluster(workers, scheduler) as (workers, scheduler):
        t = time.perf_counter()
        result.controls = matched_random_controls(fold_inputs, replicates=config.controls, seed=seeds[2],
                                                  epsilon=config.epsilon, workers=workers, scheduler=scheduler,
                                                  progress=progress)
        timings["controls_s"] = time.perf_counter() - t
        t = time.perf_counter()
        if config.composition_bootstrap:
            result.composition = composition_bootstrap(fold_inputs, item_group=item_group, testlet=testlet,
                                                       replicates=config.composition_bootstrap, seed=seeds[3],
                                                       epsilon=config.epsilon, workers=workers,
                                                       scheduler=scheduler, progress=progress)
        timings["bootstrap_s"] = time.perf_counter() - t
        purifications = None
        if config.sensitivity:
            t = time.perf_counter()
            halves = []
            for h in (0, 1):
                audit = (pop["fold"] == h).to_numpy()
                halves.append({"y": y[:, audit], "observed": observed[:, audit], "family": family_index[audit],
                               "n_families": len(families), "item_group": item_group, "seed": fold_seeds[h][1],
                               "adjustment": config.adjustment})
            purifications = fraction_purifications(folds, halves, anchor_fraction=config.anchor_fraction)
            result.sensitivity = gap_and_fraction_sensitivity(
                folds, fold_inputs, halves, anchor_fraction=config.anchor_fraction, epsilon=config.epsilon, item_group=item_group,
                testlet=testlet,
                controls=config.controls, bootstrap=config.composition_bootstrap,
                seeds={"controls": seeds[2], "bootstrap": seeds[3]}, workers=workers, scheduler=scheduler,
                progress=progress, purifications=purifications)
            timings["sensitivity_s"] = time.perf_counter() - t
    if config.owner_bootstrap:
        result.owners = _owner_shifts(folds, config.owner_bootstrap, seeds[4])
    summary["within_family"] = within_family_specificity(result.controls)
    if config.bayes:
        result.bayes = pool_folds([f.posterior for f in folds])
        result.bayes.attrs["newton_capped_draws"] = sum(int(f.posterior.attrs.get("newton_capped_draws", 0))
                                                       for f in folds)
        summary["bayes"] = _bayes_summary(result.bayes, folds)
        t = time.perf_counter()
        _posterior_diagnostics(result, purifications, y, observed, item_group)
        timings["bayes_diagnostics_s"] = time.perf_counter() - t
        if config.bayes_ability_spec is not None:  # the near-tie leaderboard (2PL on all retained models)
            add_near_ties(result, responses, progress=progress)
    timings["total_s"] = time.perf_counter() - t0
    return result


def _posterior_diagnostics(result: AuditResult, purifications, y, observed, item_group) -> None:
    """Posterior counterparts of the within-family specificity and, with ``sensitivity``, of the
    threshold and fraction curves (:mod:`bayesirt.audit.bayes.diagnostics`)."""
    folds = result.folds
    attach(result, "specificity", posterior_specificity([f.posterior for f in folds], [f.within_pairs for f in folds],
                                                        result.controls))
    if result.sensitivity is not None:
        scores = fraction_scores(folds, purifications, y=y, observed=observed, item_group=item_group,
                                 anchor_fraction=result.config.anchor_fraction)
        attach(result, "sensitivity", posterior_sensitivity(scores, [f.target for f in folds],
                                                            sensitivity=result.sensitivity,
                                                            gaps=[f.pair_gaps for f in folds]))


def _owner_shifts(folds: list[FoldResult], replicates: int, seed: int) -> xr.Dataset:
    """Owner bootstrap of the family score and percentile-rank shifts of all scored representatives."""
    targets = pd.concat([f.target for f in folds], ignore_index=True)
    percentile_shift = percentile_ranks(targets["anchor"].to_numpy()) - percentile_ranks(targets["full"].to_numpy())
    return owner_bootstrap(targets["shift"].to_numpy(), targets["family"].to_numpy(), targets["owner"].to_numpy(),
                           percentile_shift=percentile_shift, replicates=replicates, seed=seed)


def _bayes_summary(pooled: xr.DataTree, folds: list[FoldResult]) -> dict:
    root = pooled.to_dataset()
    q = {name: root[f"{name}_quantiles"].values.tolist()
         for name in ("low_dif_reversal_rate", "control_median", "excess_pp")}
    return {
        "method": folds[0].posterior.attrs["method"],
        "prior": folds[0].posterior.attrs["prior"],
        "offsets": OFFSETS_METHOD[folds[0].posterior.attrs["method"] == "bootstrap"],
        "draws": int(root.sizes["draw"]),
        "controls_per_draw": int(root.sizes["replicate"]),
        "low_dif_reversal_rate_q05_q50_q95": q["low_dif_reversal_rate"],
        "control_median_q05_q50_q95": q["control_median"],
        "excess_pp_q05_q50_q95": q["excess_pp"],
        "draw_p_value_q05_q50_q95": root["draw_p_value_quantiles"].values.tolist(),
        "share_draws_p_le_05": float(root["share_draws_p_le_05"]),
        "newton_capped_draws": [int(f.posterior.attrs.get("newton_capped_draws", 0)) for f in folds],
        "conditional_on": CONDITIONAL,
        "anchor_probability_decisive_share": [
            float(((f.posterior["anchor_probability"] < 0.05) | (f.posterior["anchor_probability"] > 0.95)).mean())
            for f in folds],
        "schedule_gap": [f.schedule_gap for f in folds],
    }

