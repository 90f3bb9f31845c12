"""Posterior counterparts of the audit's diagnostics: within-family specificity (NT B.3),
discrimination-matched controls (B.2), score-gap thresholds and anchor fractions (B.4-B.5) and
item-signature replication (D.3), each recomputed once per draw of the Bayesian layer
(:mod:`bayesirt.audit.bayes`) instead of once at the point anchors.

What a draw carries. Draw ``s`` of outer fold ``h`` is a draw ``(delta^(s), b^(s))`` of the
residual-DIF posterior of its audit half; :func:`~bayesirt.audit.bayes.propagate_posterior` turned
it into blueprint cells, anchors ``S^(s)``, restoring weights and target-half anchor scores. Draw
``s`` of fold 0 and draw ``s`` of fold 1 form joint draw ``s`` (the halves' posteriors are
independent), exactly as :func:`~bayesirt.audit.bayes.pool_folds` pairs them. As in the Bayesian
layer, the offsets, K, the near-tie pairs, the full scores and the spectral discrimination proxy
``g_i`` stay frozen: the posteriors describe the uncertainty of the residual-DIF estimate.

- :func:`posterior_specificity` (B.3, eq. 51-55): per draw the within-family low-DIF reversal rate
  among same-family, different-owner near ties, the within excess over the deterministic run's
  matched-random within median, the cross-minus-within gap ``G^(s)`` and the specificity
  ``G^(s) - median_r G_r``. The controls are the deterministic run's (cell-matched, eq. 35): their
  per-cell counts ``k_c = max(1, round(alpha n_c))`` depend only on the item-group sizes, never on
  the draw, and :func:`~bayesirt.audit.bayes.pool_folds` compares the primary rate with the same
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
  while the posterior SD of the excess was 1.15-1.38 pp: hence :data:`POSTERIOR_CONTROLS` = 200 (at
  most the deterministic count). The cost grows with items x target models x controls (and the
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

Summaries (:func:`describe`): posterior mean, the :data:`~bayesirt.audit.bayes.INTERVAL`
equal-tailed quantiles (the coordinates of :func:`~bayesirt.audit.bayes.pool_folds`) and the
posterior probability of a positive value, over the draws where the statistic is defined (NaN
draws -- no eligible pair, no overlap -- are left out and counted in ``*_undefined``).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.audit.anchors import anchor_weights, blueprint_cells
from bayesirt.audit.bayes import INTERVAL, propagate_posterior
from bayesirt.audit.matched import DIAGNOSTICS, _balance, _item_statistics, _target_folds, discrimination_strata
from bayesirt.audit.primary import BAYES_CONTROLS, AuditResult, check_audit
from bayesirt.audit.replication import STATISTICS, TOP_SHARE, signature_statistics
from bayesirt.audit.sensitivity import THRESHOLDS
from bayesirt.audit.specificity import WITHIN, within_family_specificity
from bayesirt.errors import DataError
from bayesirt.utils.parallel import blas_threads, parallel_map, spawn_seeds
from bayesirt.audit.ranking import _prepared_scores, near_tie_pairs, pooled_rate, reversal_counts
from bayesirt.report.markdown import markdown_table
from bayesirt.audit.resampling import PRIMARY, _check_integer, _pack_folds, matched_random_weights, randomization_summary

__all__ = ["POSTERIOR_CONTROLS", "QUANTILES", "describe", "shifted_draws", "posterior_specificity",
           "fraction_scores", "posterior_sensitivity", "posterior_matched_controls", "posterior_signatures",
           "signature_draws", "add_posterior_diagnostics", "attach", "posterior_lines",
           "specificity_lines", "matched_lines", "sensitivity_lines", "signatures_lines"]

#: Discrimination-matched controls drawn per posterior draw and fold (module notes; the default of
#: ``AuditConfig.bayes_controls``).
POSTERIOR_CONTROLS = BAYES_CONTROLS
_TAIL = (1 - INTERVAL) / 2
#: Posterior quantiles reported (the coordinates of :func:`bayesirt.audit.bayes.pool_folds`).
QUANTILES = [_TAIL, 0.5, 1 - _TAIL]
_DRAW_BLOCK = 25  # posterior draws per parallel task of the matched controls (results do not depend on it)


def describe(ds: xr.Dataset, names: Sequence[str]) -> xr.Dataset:
    """Add the posterior summaries of every per-draw variable in ``names`` (dims ``draw``, ...).

    For a variable ``v``: ``v_mean``, ``v_quantiles`` (``quantile``: :data:`QUANTILES`, linear
    interpolation), ``prob_v_positive`` (share of defined draws above 0) and ``v_undefined`` (NaN
    draws, left out of the rest). Statistics without a defined draw are NaN.
    """
    out = ds.assign_coords(quantile=QUANTILES)
    for name in names:
        x = ds[name].transpose("draw", ...)
        values = x.values.astype(np.float64)
        defined = ~np.isnan(values)
        count = defined.sum(axis=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices give NaN, as documented
            mean = np.nanmean(values, axis=0)
            quantiles = np.nanquantile(values, QUANTILES, axis=0)
        positive = np.where(count > 0, (values > 0).sum(axis=0) / np.maximum(count, 1), np.nan)
        rest = x.dims[1:]
        out[f"{name}_mean"] = (rest, mean)
        out[f"{name}_quantiles"] = (("quantile", *rest), quantiles)
        out[f"prob_{name}_positive"] = (rest, positive)
        out[f"{name}_undefined"] = (rest, values.shape[0] - count)
    return out


def shifted_draws(draws: xr.Dataset, reference, target) -> tuple[np.ndarray, np.ndarray]:
    """Posterior draws moved from one point estimate to another (module notes).

    Parameters
    ----------
    draws : xarray.Dataset
        ``family_effect`` (draw, item, family) and ``easiness`` (draw, item): a fold's
        :attr:`~bayesirt.audit.primary.FoldResult.draws`.
    reference, target : DIFFit
        The fit the posterior is centred on (the purification's ``selection_fit``) and the one the
        diagnostic reads.

    Returns
    -------
    (family_effect, easiness) : ndarray (draw, item, family), ndarray (draw, item)
        ``(draw - reference) + target``: equal to ``target`` for a draw equal to ``reference``.
    """
    delta = draws["family_effect"].transpose("draw", "item", "family").values
    b = draws["easiness"].transpose("draw", "item").values
    return (delta - reference.family_effect) + target.family_effect, (b - reference.easiness) + target.easiness


def _counts(chains: Sequence[xr.Dataset], pair_sets: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """Eligible and reversed counts (fold, draw) of each fold's ``pair_sets[h]`` under its
    per-draw anchor scores."""
    counts = [reversal_counts(c["full_score"].values, c["anchor_score"].transpose("draw", "model").values, pairs)
              for c, pairs in zip(chains, pair_sets, strict=True)]
    return np.stack([c[0] for c in counts]), np.stack([c[1] for c in counts])


def _chain_counts(chains: Sequence[xr.Dataset]) -> tuple[np.ndarray, np.ndarray]:
    return (np.stack([c["n_eligible"].values for c in chains]), np.stack([c["n_reversed"].values for c in chains]))


def _check_chains(chains, caller: str) -> None:
    if len(chains) == 0 or not all(isinstance(c, xr.Dataset) and {"anchor_score", "full_score", "n_eligible",
                                                                   "n_reversed"} <= set(c.data_vars) for c in chains):
        raise DataError(f"{caller} needs the propagate_posterior Dataset of every fold (FoldResult.posterior of an "
                        "audit run with bayes=True)")
    sizes = {c.sizes["draw"] for c in chains}
    if len(sizes) != 1:
        raise DataError(f"every fold must hold the same number of draws to pair them; got {sorted(sizes)}")


def posterior_specificity(chains: Sequence[xr.Dataset], within_pairs: Sequence, controls: xr.Dataset) -> xr.Dataset:
    """Posterior of the within-family specificity diagnostic (NT B.3, eq. 51-55).

    Parameters
    ----------
    chains : sequence of xarray.Dataset
        :func:`~bayesirt.audit.bayes.propagate_posterior` of every fold (its ``anchor_score``,
        ``full_score``, ``n_eligible``, ``n_reversed``); draw ``s`` of the folds is joint draw ``s``.
    within_pairs : sequence of (i, j)
        Each fold's frozen same-family, different-owner near ties (``FoldResult.within_pairs``).
    controls : xarray.Dataset
        The deterministic matched-random controls with a ``"within"`` pair set
        (``AuditResult.controls``); frozen, as in :func:`~bayesirt.audit.bayes.pool_folds`.

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
    _check_chains(chains, "posterior_specificity")
    if len(within_pairs) != len(chains):
        raise DataError(f"within_pairs has {len(within_pairs)} folds but chains {len(chains)}; pass one pair set per "
                        "fold")
    point = within_family_specificity(controls)
    cross_set, within_set = controls.sel(pair_set=PRIMARY), controls.sel(pair_set=WITHIN)
    within_median = randomization_summary(0.0, within_set["rate"].values)["median"]
    gap_median = randomization_summary(0.0, cross_set["rate"].values - within_set["rate"].values)["median"]
    eligible, reversed_ = _chain_counts(chains)
    w_eligible, w_reversed = _counts(chains, within_pairs)
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


def fraction_scores(folds, purifications: Mapping[float, Sequence], *, y, observed, item_group, alpha: float,
                    fractions: Sequence[float] | None = None) -> list[xr.DataArray]:
    """Per-draw target-half anchor scores of every fold at every anchor fraction.

    Parameters
    ----------
    folds : sequence of FoldResult
        With the Bayesian layer (``posterior`` and ``draws``).
    purifications : mapping
        :func:`bayesirt.audit.sensitivity.fraction_purifications` of these folds.
    y, observed : ndarray (item, model)
        The whole response matrix and its observed mask (target columns at ``target_index``).
    item_group : array_like (item,)
    alpha : float
        The primary anchor fraction: its scores are the Bayesian layer's own chain.
    fractions : sequence of float, optional
        Default: the keys of ``purifications``.

    Returns
    -------
    list of xarray.DataArray
        Per fold, ``anchor_score`` (alpha, draw, model). At another fraction the draws are moved to
        that purification's ``selection_fit`` (:func:`shifted_draws`) and re-run through cells,
        anchors at that fraction and weights (:func:`~bayesirt.audit.bayes.propagate_posterior`).
    """
    fractions = list(purifications) if fractions is None else list(fractions)
    out = []
    for h, fold in enumerate(folds):
        if fold.posterior is None or fold.draws is None:
            raise DataError("fraction_scores needs folds of an audit run with bayes=True (posterior and draws)")
        t = fold.target_index
        layers = []
        for fraction in fractions:
            if np.isclose(fraction, alpha):
                layers.append(fold.posterior["anchor_score"].transpose("draw", "model").values)
                continue
            delta, b = shifted_draws(fold.draws, fold.purification.selection_fit,
                                     purifications[fraction][h].selection_fit)
            none = np.zeros(0, dtype=np.int64)
            chain = propagate_posterior(delta, b, item_group=item_group, alpha=fraction, y_target=y[:, t],
                                        observed_target=observed[:, t], full=fold.target["full"].to_numpy(),
                                        pairs=(none, none))
            layers.append(chain["anchor_score"].values)
        out.append(xr.DataArray(np.stack(layers), dims=("alpha", "draw", "model"),
                                coords={"alpha": fractions, "draw": fold.posterior["draw"].values,
                                        "model": fold.posterior["model"].values}, name="anchor_score"))
    return out


def posterior_sensitivity(scores: Sequence[xr.DataArray], targets: Sequence[pd.DataFrame], *,
                          epsilons: Sequence[float] = THRESHOLDS, sensitivity: xr.Dataset | None = None) -> xr.Dataset:
    """Posterior of the reversal curves over score-gap thresholds and anchor fractions (NT B.4-B.5).

    Parameters
    ----------
    scores : sequence of xarray.DataArray
        Per fold, per-draw anchor scores (alpha, draw, model) (:func:`fraction_scores`).
    targets : sequence of pandas.DataFrame
        Per fold, the target table (``full``, ``owner``, ``family`` per model, in ``scores``' model
        order): the pairs of every threshold are frozen from it, as in the deterministic curve.
    epsilons : sequence of float, default :data:`bayesirt.audit.sensitivity.THRESHOLDS`
        Near-tie bands (fractions of the full score; 0.01 = 1 pp).
    sensitivity : xarray.Dataset, optional
        The deterministic curve (``AuditResult.sensitivity``): gives the excess (over its frozen
        matched-random medians) and the ``deterministic_*`` values.

    Returns
    -------
    xarray.Dataset
        Dims ``draw``, ``alpha``, ``threshold`` (pp): ``low_dif_rate`` and ``eligible`` (pooled over
        folds); with ``sensitivity``, ``excess_pp`` = 100 (T^(s) - random median),
        ``random_median``, ``deterministic_low_dif_rate`` and ``deterministic_excess_pp``; and their
        :func:`describe` summaries.
    """
    if len(scores) != len(targets) or not scores:
        raise DataError(f"scores ({len(scores)}) and targets ({len(targets)}) must give the same folds")
    alphas = scores[0]["alpha"].values
    eligible = np.zeros((len(scores), alphas.size, len(epsilons), scores[0].sizes["draw"]), dtype=np.int64)
    reversed_ = np.zeros_like(eligible)
    for h, (score, target) in enumerate(zip(scores, targets, strict=True)):
        full = target["full"].to_numpy()
        for e, epsilon in enumerate(epsilons):
            pairs = near_tie_pairs(full, target["owner"].to_numpy(), target["family"].to_numpy(), epsilon=epsilon)
            for a in range(alphas.size):
                eligible[h, a, e], reversed_[h, a, e] = reversal_counts(
                    full, score.isel(alpha=a).transpose("draw", "model").values, pairs)
    folds = len(scores)
    rate = pooled_rate(reversed_.reshape(folds, -1), eligible.reshape(folds, -1)).reshape(eligible.shape[1:])
    dims = ("alpha", "threshold", "draw")
    ds = xr.Dataset({"low_dif_rate": (dims, rate), "eligible": (dims, eligible.sum(axis=0))},
                    coords={"alpha": alphas, "threshold": [100 * e for e in epsilons],
                            "draw": scores[0]["draw"].values})
    names = ["low_dif_rate"]
    if sensitivity is not None:
        det = sensitivity.sel(alpha=ds["alpha"], threshold=ds["threshold"])
        median = det["random_median"].values
        ds["random_median"] = (("alpha", "threshold"), median)
        ds["excess_pp"] = (dims, 100 * (rate - median[..., None]))
        ds["deterministic_low_dif_rate"] = (("alpha", "threshold"), det["low_dif_rate"].values)
        ds["deterministic_excess_pp"] = (("alpha", "threshold"), det["excess_pp"].values)
        names.append("excess_pp")
    ds["threshold"].attrs["units"] = "percentage points of full score"
    ds.attrs.update(reference="NT B.4, B.5, D.1 eq. 56 per posterior draw", interval=INTERVAL,
                    controls="the deterministic curve's matched-random medians (frozen)",
                    transfer="fractions other than the primary one: draws moved to that purification's fit")
    return describe(ds.transpose("draw", ...), names)


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
            scores = _prepared_scores(*responses[h], w)
            counts = [reversal_counts(fold.full, scores, pairs) for pairs in fold.pair_sets]
            eligible.append([c[0] for c in counts])
            reversed_.append([c[1] for c in counts])
            balance.append(_balance(w, gs[h], items[h], scores).T)  # (diagnostic, replicate)
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
        The controls' streams (:func:`~bayesirt.audit.matched.discrimination_matched_controls`'s
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
        (:data:`bayesirt.audit.matched.DIAGNOSTICS`): ``low_dif_rate`` and ``control_median``
        (draw, pair_set), ``excess_pp`` = 100 (T^(s) - median_r T_r^(s)); balance
        ``observed_mean_balance`` and ``control_median_balance`` (draw, diagnostic) and the NT
        Table 5 columns ``g_ratio``, ``citc_ratio``, ``sem_ratio``, ``abs_delta_alpha`` (draw);
        their :func:`describe` summaries; with ``result.matched``, ``deterministic_excess_pp``
        (pair_set) and ``deterministic_*`` ratios.
    """
    check_audit(result, responses, "posterior_matched_controls")
    replicates = _check_integer(replicates, "replicates", "posterior_matched_controls")
    seed = _check_integer(seed, "seed", "posterior_matched_controls", minimum=0)
    chains = [f.posterior for f in result.folds]
    if any(c is None for c in chains) or any(f.draws is None for f in result.folds):
        raise DataError("posterior_matched_controls needs an audit run with bayes=True (its folds' posterior draws)")
    _check_chains(chains, "posterior_matched_controls")
    packed, names = _pack_folds(_target_folds(result, responses), "posterior_matched_controls")
    item_group = responses["item_group"].values.astype(str)
    gs = [np.asarray(f.purification.offsets_sd, dtype=np.float64) for f in result.folds]
    items = [_item_statistics(*fold.responses()) for fold in packed]
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
              [s[a:b] for s in strata]) for a, b in ((a, min(a + _DRAW_BLOCK, n_draws))
                                                     for a in range(0, n_draws, _DRAW_BLOCK))]
    with blas_threads(threads):
        blocks = parallel_map(_matched_task, tasks, workers=workers, scheduler=scheduler, progress=progress,
                              description="posterior discrimination-matched controls")
    control = np.concatenate([b[0] for b in blocks])  # (draw, set)
    control_balance = np.concatenate([b[1] for b in blocks])  # (draw, diagnostic)
    eligible, reversed_ = _chain_counts(chains)
    w_eligible, w_reversed = _counts(chains, [f.within_pairs for f in result.folds])
    rate = np.stack([pooled_rate(reversed_, eligible), pooled_rate(w_reversed, w_eligible)], axis=1)
    observed = np.mean([_balance(w, g, it, c["anchor_score"].transpose("draw", "model").values)
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
        :func:`~bayesirt.audit.replication.signature_replication` output: its ``observed`` and
        permutation ``p_value`` (deterministic; not recomputed per draw) are copied alongside.

    Returns
    -------
    xarray.Dataset
        ``value`` (draw, statistic: :data:`~bayesirt.audit.replication.STATISTICS`), ``rho``
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
    if not 0 < top_share <= 1:
        raise DataError(f"The 'top_share' parameter of posterior_signatures must be in (0, 1]. Got {top_share!r} "
                        "instead.")
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
    ``S(3)`` (the fit :func:`~bayesirt.audit.replication.signature_replication` reads;
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
        return [{"alpha": float(a), "threshold_pp": float(t), **{k: _stat(ds, k, alpha=a, threshold=t) for k in keys}}
                for a in ds["alpha"].values for t in ds["threshold"].values]
    raise DataError(f"no summary for posterior diagnostic {name!r}")


# ---------------------------------------------------------------------------------------------- report


def _pct(v: float) -> str:
    return "n/a" if not np.isfinite(v) else f"{100 * v:.1f}%"


def _interval(ds: xr.Dataset, name: str, fmt, **where) -> str:
    pick = (lambda v: v.sel(**where)) if where else (lambda v: v)
    lo, _, hi = (float(x) for x in pick(ds[f"{name}_quantiles"]).values)
    return f"{fmt(float(pick(ds[f'{name}_mean'])))} ({fmt(lo)} to {fmt(hi)})"


def _pp(v: float) -> str:
    return "n/a" if not np.isfinite(v) else f"{v:+.1f}"


def _prob(v) -> str:
    v = float(v)
    return "n/a" if not np.isfinite(v) else f"{v:.3f}"


def _intro(ds: xr.Dataset) -> str:
    return (f"Posterior mean ({100 * INTERVAL:g}% equal-tailed interval) over {ds.sizes['draw']:,} draws of the "
            "Bayesian layer, each draw's anchors carried through the diagnostic")


def specificity_lines(ds: xr.Dataset) -> list[str]:
    """Markdown lines of :func:`posterior_specificity`."""
    rows = [("within-family low-DIF reversal rate", _interval(ds, "within_rate", _pct),
             _pct(float(ds["deterministic_within_rate"])), "n/a"),
            ("within excess (pp)", _interval(ds, "within_excess_pp", _pp),
             _pp(float(ds["deterministic_within_excess_pp"])), _prob(ds["prob_within_excess_pp_positive"])),
            ("cross-minus-within gap G (pp)", _interval(ds, "gap_pp", _pp), _pp(float(ds["deterministic_gap_pp"])),
             _prob(ds["prob_gap_pp_positive"])),
            ("specificity G - median G_r (pp)", _interval(ds, "specificity_pp", _pp),
             _pp(float(ds["deterministic_specificity_pp"])), _prob(ds["prob_specificity_pp_positive"]))]
    return ["### Posterior counterpart (Bayesian layer)", "",
            _intro(ds) + "; the matched-random replicates stay the deterministic run's. p-values stay deterministic.",
            "", markdown_table(pd.DataFrame(rows, columns=["quantity", "posterior mean (90% interval)",
                                                           "deterministic", "P(> 0)"])), ""]


def matched_lines(ds: xr.Dataset) -> list[str]:
    """Markdown lines of :func:`posterior_matched_controls`."""
    det = "deterministic_excess_pp" in ds
    rows = [{"quantity": f"excess reversals, {s} pairs (pp)", "posterior mean (90% interval)":
             _interval(ds, "excess_pp", _pp, pair_set=s),
             "deterministic": _pp(float(ds["deterministic_excess_pp"].sel(pair_set=s))) if det else "n/a",
             "P(> 0)": _prob(ds["prob_excess_pp_positive"].sel(pair_set=s))} for s in ds["pair_set"].values]
    fmt = lambda v: "n/a" if not np.isfinite(v) else f"{v:.3f}"  # noqa: E731
    for key, label in (("g_ratio", "g_i ratio"), ("citc_ratio", "CITC ratio"), ("sem_ratio", "SEM ratio"),
                       ("abs_delta_alpha", "|delta alpha|")):
        rows.append({"quantity": label, "posterior mean (90% interval)": _interval(ds, key, fmt),
                     "deterministic": fmt(float(ds[f"deterministic_{key}"])) if det else "n/a", "P(> 0)": ""})
    return ["### Posterior counterpart (Bayesian layer)", "",
            _intro(ds) + f": {ds.attrs['replicates']:,} discrimination-matched controls per draw and fold, re-drawn "
            "for each draw and matched to its anchors (strata cut in the draw's cells; common random streams across "
            "draws). Randomization p-values stay deterministic.", "",
            markdown_table(pd.DataFrame(rows)), ""]


def sensitivity_lines(ds: xr.Dataset) -> list[str]:
    """Markdown lines of :func:`posterior_sensitivity`."""
    rows = []
    has_excess = "excess_pp" in ds
    for a in ds["alpha"].values:
        for t in ds["threshold"].values:
            row = {"anchor fraction": f"{a:g}", "gap <= (pp)": f"{t:g}",
                   "low-DIF rate": _interval(ds, "low_dif_rate", _pct, alpha=a, threshold=t)}
            if has_excess:
                row |= {"excess (pp)": _interval(ds, "excess_pp", _pp, alpha=a, threshold=t),
                        "deterministic excess": _pp(float(ds["deterministic_excess_pp"].sel(alpha=a, threshold=t))),
                        "P(excess > 0)": _prob(ds["prob_excess_pp_positive"].sel(alpha=a, threshold=t))}
            rows.append(row)
    return ["### Posterior counterpart (Bayesian layer)", "",
            _intro(ds) + "; pairs frozen per threshold, matched-random medians frozen per cell; at fractions other "
            "than the primary one the draws are moved to that purification's fit (location shift).", "",
            markdown_table(pd.DataFrame(rows)), ""]


def signatures_lines(ds: xr.Dataset) -> list[str]:
    """Markdown lines of :func:`posterior_signatures`."""
    labels = {"median_rho": "median family-wise Spearman rho", "overlap": "top-share overlap precision",
              "agreement": "advantaged-family agreement"}
    det = "deterministic_value" in ds
    rows = []
    for s in ds["statistic"].values:
        fmt = (lambda v: "n/a" if not np.isfinite(v) else f"{v:.3f}") if s == "median_rho" else _pct
        rows.append({"statistic": labels[str(s)],
                     "posterior mean (90% interval)": _interval(ds, "value", fmt, statistic=s),
                     "deterministic": fmt(float(ds["deterministic_value"].sel(statistic=s))) if det else "n/a",
                     "permutation p (deterministic)": f"{float(ds['p_value'].sel(statistic=s)):.3g}" if det else "n/a",
                     "undefined draws": int(ds["value_undefined"].sel(statistic=s))})
    return ["### Posterior counterpart (Bayesian layer)", "",
            _intro(ds) + ": draw s of both halves (independent posteriors, paired by index), moved to the final "
            "refits, with common cells from the draw's easiness. The permutation p-values are the deterministic "
            "ones; they are not recomputed per draw.", "",
            markdown_table(pd.DataFrame(rows)), ""]


#: Report lines of each posterior counterpart held in ``AuditResult.bayes``.
_LINES = {"specificity": specificity_lines, "sensitivity": sensitivity_lines, "matched": matched_lines,
          "signatures": signatures_lines}


def posterior_lines(result: AuditResult, name: str) -> list[str]:
    """report.md lines of the posterior counterpart ``name`` ("specificity", "sensitivity",
    "matched" or "signatures"), placed by :func:`bayesirt.report.audit.audit_report` right after
    its deterministic section; empty when the audit holds none."""
    if result.bayes is None or name not in result.bayes.children:
        return []
    return _LINES[name](result.bayes[name].to_dataset())
