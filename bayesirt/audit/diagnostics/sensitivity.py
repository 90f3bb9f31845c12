"""Score-gap thresholds and anchor fractions (NT B.4, B.5, D.1 eq. 56): the reversal curve of
NT Figure 2.

For each anchor fraction (0.3, 0.5, 0.7), the anchors are rebuilt by the same three-round
purification with each fold's K frozen from the primary run (the primary fraction reuses
the primary anchors). For each near-tie threshold epsilon (0.25 ... 5 pp), the pair set is frozen
from the observed full scores; the matched-random controls (matched to that fraction's anchors,
same seed, so the replicate streams are the primary run's) and the composition bootstrap are
recomputed on the same replicates for every threshold at once.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from bayesirt.audit.engine.anchors import purify
from bayesirt.audit.engine.bootstrap import composition_bootstrap
from bayesirt.audit.engine.ranking import near_tie_pairs
from bayesirt.audit.engine.resampling import matched_random_controls

__all__ = ["THRESHOLDS", "FRACTIONS", "fraction_purifications", "gap_and_fraction_sensitivity"]

THRESHOLDS = (0.0025, 0.005, 0.01, 0.02, 0.03, 0.05)
FRACTIONS = (0.3, 0.5, 0.7)


def fraction_purifications(folds, audit_halves: list[dict], *, anchor_fraction: float, fractions=FRACTIONS) -> dict:
    """Each anchor fraction's anchors per fold: ``{fraction: [Purification per fold]}``, the primary
    run's at ``anchor_fraction`` and otherwise rebuilt by :func:`bayesirt.audit.engine.anchors.purify` with the fold's K
    frozen (``audit_halves`` as in :func:`gap_and_fraction_sensitivity`)."""
    return {fraction: [fold.purification if np.isclose(fraction, anchor_fraction) else
                       purify(**audit_halves[h], k=fold.selection.k, anchor_fraction=fraction) for h, fold in enumerate(folds)]
            for fraction in fractions}


def _label(epsilon: float) -> str:
    return f"gap {100 * epsilon:g} pp"


def gap_and_fraction_sensitivity(folds, fold_inputs: list[dict], audit_halves: list[dict], *, anchor_fraction: float,
                                 epsilon: float, item_group, controls: int, bootstrap: int, seeds: dict, testlet=None,
                                 thresholds=THRESHOLDS, fractions=FRACTIONS, workers=1, scheduler=None,
                                 progress=False, purifications: dict | None = None) -> xr.Dataset:
    """Reversal rates, matched-random references and bootstrap ranges over (anchor_fraction, threshold).

    Parameters
    ----------
    folds : list of FoldResult
        The primary run's folds (their K, anchors and target tables).
    fold_inputs : list of dict
        The primary run's :class:`bayesirt.audit.engine.resampling.TargetFold` mappings.
    audit_halves : list of dict
        Per fold, the keyword arguments of :func:`bayesirt.audit.engine.anchors.purify` for its audit half
        (``y``, ``observed``, ``family``, ``n_families``, ``item_group``, ``seed``).
    anchor_fraction, epsilon : float
        The primary anchor fraction and near-tie band.
    item_group : array_like
        Item groups (bootstrap units).
    testlet : array_like, optional
        Testlet labels, kept whole by the bootstrap's clusters (:func:`bayesirt.audit.engine.bootstrap.bootstrap_units`).
    controls, bootstrap : int
        Replicates.
    seeds : dict
        ``{"controls": ..., "bootstrap": ...}``: the primary run's seeds.
    thresholds, fractions : sequence of float
    workers, scheduler, progress
        As :func:`bayesirt.audit.engine.resampling.matched_random_controls`.
    purifications : dict, optional
        :func:`fraction_purifications` of these folds and fractions, when the caller needs the
        rebuilt anchors too (the posterior curves of :mod:`bayesirt.audit.bayes.diagnostics`);
        computed here when omitted.

    Returns
    -------
    xarray.Dataset
        Dims ``anchor_fraction`` and ``threshold`` (in pp): ``low_dif_rate``, ``eligible``, ``random_median``,
        ``random_lower``, ``random_upper``, ``excess_pp``, ``p_value``, ``bootstrap_lower``,
        ``bootstrap_upper``, ``bootstrap_mean`` and the band diagnostics ``bootstrap_in_band_share``,
        ``bootstrap_rate_in_band``, ``bootstrap_rate_out_band`` (``in_band_share``, ... of
        :func:`bayesirt.audit.engine.bootstrap.composition_bootstrap`, each pair set's band its threshold);
        ``anchors`` (anchor_fraction, fold).
    """
    extra = [{_label(e): near_tie_pairs(f.target["full"].to_numpy(), f.target["owner"].to_numpy(),
                                        f.target["family"].to_numpy(), epsilon=e, gaps=f.pair_gaps)
              for e in thresholds} for f in folds]
    names = [_label(e) for e in thresholds]
    out = {k: np.full((len(fractions), len(thresholds)), np.nan) for k in
           ("low_dif_rate", "eligible", "random_median", "random_lower", "random_upper", "excess_pp", "p_value",
            "bootstrap_lower", "bootstrap_upper", "bootstrap_mean", "bootstrap_in_band_share", "bootstrap_rate_in_band",
            "bootstrap_rate_out_band")}
    anchors = np.zeros((len(fractions), len(folds)), dtype=np.int64)
    if purifications is None:
        purifications = fraction_purifications(folds, audit_halves, anchor_fraction=anchor_fraction, fractions=fractions)
    for a, fraction in enumerate(fractions):
        inputs = []
        for h, (fold, base) in enumerate(zip(folds, fold_inputs, strict=True)):
            if np.isclose(fraction, anchor_fraction):
                cell, weights = base["cell"], base["anchor_weights"]
            else:
                rebuilt = purifications[fraction][h]
                cell, weights = rebuilt.cell, rebuilt.weights
            anchors[a, h] = int((weights > 0).sum())
            inputs.append(base | {"cell": cell, "anchor_weights": weights, "extra_pairs": extra[h]})
        ctrl = matched_random_controls(inputs, replicates=controls, seed=seeds["controls"], epsilon=epsilon,
                                       workers=workers, scheduler=scheduler, progress=progress).sel(pair_set=names)
        boot = composition_bootstrap(inputs, item_group=item_group, testlet=testlet, replicates=bootstrap,
                                     seed=seeds["bootstrap"],
                                     epsilon=epsilon, bands=dict(zip(names, thresholds, strict=True)), workers=workers,
                                     scheduler=scheduler, progress=progress).sel(pair_set=names)
        for key, source in (("low_dif_rate", ctrl["observed_rate"]), ("random_median", ctrl["median"]),
                            ("random_lower", ctrl["lower"]), ("random_upper", ctrl["upper"]),
                            ("excess_pp", ctrl["excess_pp"]), ("p_value", ctrl["p_value"]),
                            ("bootstrap_lower", boot["rate_lower"]), ("bootstrap_upper", boot["rate_upper"]),
                            ("bootstrap_mean", boot["rate_mean"]), ("bootstrap_in_band_share", boot["in_band_share"]),
                            ("bootstrap_rate_in_band", boot["rate_in_band"]),
                            ("bootstrap_rate_out_band", boot["rate_out_band"])):
            out[key][a] = source.values
        out["eligible"][a] = ctrl["observed_eligible"].sum("fold").values
    coords = {"anchor_fraction": list(fractions), "threshold": [100 * e for e in thresholds], "fold": [f.audit_fold for f in folds]}
    ds = xr.Dataset({k: (("anchor_fraction", "threshold"), v) for k, v in out.items()} | {"anchors": (("anchor_fraction", "fold"), anchors)},
                    coords=coords)
    ds["threshold"].attrs["units"] = "percentage points of full score"
    ds.attrs.update(reference="NT B.4, B.5, D.1 eq. 56 (Figure 2)", controls=controls, bootstrap=bootstrap)
    return ds
