"""Discrimination-matched controls per posterior draw (NT B.2 with the Bayesian layer's anchors):
each draw's low-DIF reversals and balance against controls matched to its own anchors."""

from __future__ import annotations

import numpy as np
import xarray as xr

from bayesirt.audit.bayes.posterior import INTERVAL
from bayesirt.audit.bayes.posterior_draws import DRAW_BLOCK, POSTERIOR_CONTROLS, chain_counts, check_chains, describe, draw_counts
from bayesirt.audit.diagnostics.matched import DIAGNOSTICS, discrimination_strata, item_statistics, subtest_balance, target_folds
from bayesirt.audit.engine.anchors import anchor_weights, blueprint_cells
from bayesirt.audit.engine.ranking import pooled_rate, prepared_scores, reversal_counts
from bayesirt.audit.engine.resampling import check_integer, matched_random_weights, pack_folds, randomization_summary
from bayesirt.audit.engine.result import AuditResult, check_audit
from bayesirt.errors import DataError
from bayesirt.utils.parallel import blas_threads, parallel_map, spawn_seeds

__all__ = ["posterior_matched_controls"]


def _matched_task(task) -> tuple[np.ndarray, np.ndarray]:
    """Draws of one block: the control median rate per pair set (draw, set) and the control
    median balance (draw, diagnostic), each draw's controls matched to its own anchors."""
    packed, gs, items, fold_seeds, replicates, cells, weights, strata = task
    responses = [fold.responses() for fold in packed]
    medians, balances = [], []
    for s in range(cells[0].shape[0]):
        eligible, reversed_, balance = [], [], []
        for h, fold in enumerate(packed):
            w = matched_random_weights(cells[h][s], weights[h][s], replicates, fold_seeds[h], strata=strata[h][s])
            scores = prepared_scores(*responses[h], w)
            counts = [reversal_counts(fold.full, scores, pairs) for pairs in fold.pair_sets]
            eligible.append([c[0] for c in counts])
            reversed_.append([c[1] for c in counts])
            balance.append(subtest_balance(w, gs[h], items[h], scores).T)  # (diagnostic, replicate)
        eligible, reversed_ = np.asarray(eligible), np.asarray(reversed_)  # (fold, set, replicate)
        medians.append([randomization_summary(0.0, pooled_rate(reversed_[:, k], eligible[:, k]))["median"]
                        for k in range(eligible.shape[1])])
        mean_balance = np.mean(balance, axis=0)  # over folds, per replicate index, as the deterministic control
        balances.append([np.median(v[~np.isnan(v)]) if (~np.isnan(v)).any() else np.nan for v in mean_balance])
    return np.asarray(medians), np.asarray(balances)


def posterior_matched_controls(result: AuditResult, responses: xr.Dataset, *,
                               replicates: int = POSTERIOR_CONTROLS, seed: int = 0, workers: int | None = 1,
                               scheduler: str | None = None, progress: bool = False,
                               threads: int | None = 1) -> xr.Dataset:
    """Posterior of the discrimination- and reliability-matched control (NT B.2), controls re-drawn
    for every draw and matched to its anchors (module notes).

    Parameters
    ----------
    result : AuditResult
        An estimated audit run with ``bayes=True``.
    responses : xarray.Dataset
        The Dataset it ran on.
    replicates : int, default :data:`POSTERIOR_CONTROLS`
        Controls per draw and fold.
    seed : int, default 0
        The controls' streams (:func:`~bayesirt.audit.diagnostics.matched.discrimination_matched_controls`'s
        seed reproduces its first ``replicates`` controls when a draw equals the point estimate).
    workers, scheduler, progress
        :func:`bayesirt.utils.parallel.parallel_map` over blocks of draws; the numbers do not depend on them.
    threads : int, optional
        BLAS threads in this process (:func:`bayesirt.utils.parallel.blas_threads`; None: the library
        default). One, as in :func:`~bayesirt.audit.primary.run_audit`: the scoring products are
        small, and with the library default they ran ~15x slower on the loaded 2-core machine.

    Returns
    -------
    xarray.Dataset
        Dims ``draw``, ``pair_set`` (``"primary"``, ``"within"``), ``diagnostic``
        (:data:`bayesirt.audit.diagnostics.matched.DIAGNOSTICS`): ``low_dif_rate`` and ``control_median``
        (draw, pair_set), ``excess_pp`` = 100 (T^(s) - median_r T_r^(s)); balance
        ``observed_mean_balance`` and ``control_median_balance`` (draw, diagnostic) and the NT
        Table 5 columns ``g_ratio``, ``citc_ratio``, ``sem_ratio``, ``abs_delta_alpha`` (draw);
        their :func:`describe` summaries; with ``result.matched``, ``deterministic_excess_pp``
        (pair_set) and ``deterministic_*`` ratios.
    """
    check_audit(result, responses, "posterior_matched_controls")
    replicates = check_integer(replicates, "replicates", "posterior_matched_controls")
    seed = check_integer(seed, "seed", "posterior_matched_controls", minimum=0)
    chains = [f.posterior for f in result.folds]
    if any(c is None for c in chains) or any(f.draws is None for f in result.folds):
        raise DataError("posterior_matched_controls needs an audit run with bayes=True (its folds' posterior draws)")
    check_chains(chains, "posterior_matched_controls")
    packed, names = pack_folds(target_folds(result, responses), "posterior_matched_controls")
    item_group = responses["item_group"].values.astype(str)
    gs = [np.asarray(f.purification.offsets_sd, dtype=np.float64) for f in result.folds]
    items = [item_statistics(*fold.responses()) for fold in packed]
    cells, weights, strata = [], [], []
    for fold, chain, g in zip(result.folds, chains, gs, strict=True):
        cell = blueprint_cells(item_group, fold.draws["easiness"].transpose("draw", "item").values)
        anchors = chain["anchor"].transpose("draw", "item").values
        cells.append(cell)
        weights.append(np.stack([anchor_weights(c, a) for c, a in zip(cell, anchors, strict=True)]))
        strata.append(np.stack([discrimination_strata(c, g) for c in cell]))
    n_draws = chains[0].sizes["draw"]
    fold_seeds = spawn_seeds(seed, len(packed))
    tasks = [(packed, gs, items, fold_seeds, replicates, [c[a:b] for c in cells], [w[a:b] for w in weights],
              [s[a:b] for s in strata]) for a, b in ((a, min(a + DRAW_BLOCK, n_draws))
                                                     for a in range(0, n_draws, DRAW_BLOCK))]
    with blas_threads(threads):
        blocks = parallel_map(_matched_task, tasks, workers=workers, scheduler=scheduler, progress=progress,
                              description="posterior discrimination-matched controls")
    control = np.concatenate([b[0] for b in blocks])  # (draw, set)
    control_balance = np.concatenate([b[1] for b in blocks])  # (draw, diagnostic)
    eligible, reversed_ = chain_counts(chains)
    w_eligible, w_reversed = draw_counts(chains, [f.within_pairs for f in result.folds])
    rate = np.stack([pooled_rate(reversed_, eligible), pooled_rate(w_reversed, w_eligible)], axis=1)
    observed = np.mean([subtest_balance(w, g, it, c["anchor_score"].transpose("draw", "model").values)
                        for w, g, it, c in zip(weights, gs, items, chains, strict=True)], axis=0)  # (draw, diag)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = observed / control_balance
    ds = xr.Dataset(
        {"low_dif_rate": (("draw", "pair_set"), rate), "control_median": (("draw", "pair_set"), control),
         "excess_pp": (("draw", "pair_set"), 100 * (rate - control)),
         "observed_mean_balance": (("draw", "diagnostic"), observed),
         "control_median_balance": (("draw", "diagnostic"), control_balance),
         "g_ratio": ("draw", ratio[:, 0]), "citc_ratio": ("draw", ratio[:, 1]), "sem_ratio": ("draw", ratio[:, 2]),
         "abs_delta_alpha": ("draw", np.abs(observed[:, 3] - control_balance[:, 3]))},
        coords={"draw": chains[0]["draw"].values, "pair_set": names, "diagnostic": list(DIAGNOSTICS)})
    if result.matched is not None:
        m = result.matched
        ds["deterministic_excess_pp"] = ("pair_set", m["excess_pp"].sel(pair_set=names).values)
        ds["deterministic_p_value"] = ("pair_set", m["p_value"].sel(pair_set=names).values)
        for key in ("g_ratio", "citc_ratio", "sem_ratio", "abs_delta_alpha"):
            ds[f"deterministic_{key}"] = float(m[key])
        ds.attrs["deterministic_replicates"] = int(m.attrs["replicates"])
    ds.attrs.update(reference="NT B.2, D.1 eq. 42-50 per posterior draw", interval=INTERVAL, seed=seed,
                    replicates=replicates, controls="re-drawn per draw, matched to the draw's anchors and cells "
                                                    "(common random streams across draws)")
    return describe(ds, ["excess_pp", "g_ratio", "citc_ratio", "sem_ratio", "abs_delta_alpha"])
