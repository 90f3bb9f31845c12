"""The audit as labelled objects: the DataTree of ``audit.nc`` (:func:`audit_tree`) and the
machine-readable summary (:func:`audit_summary`); :mod:`bayesirt.report.audit_files` writes them."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import xarray as xr

from bayesirt.audit.bayes.near_ties import near_ties_dataset
from bayesirt.audit.bayes.posterior import CONDITIONAL
from bayesirt.audit.engine.result import AuditResult, FoldResult
from bayesirt.audit.intervals import audit_intervals
from bayesirt.utils.outputs import to_json

__all__ = ["audit_summary", "audit_tree", "PAIR_COUNTS"]

#: The two pair counts of the audit (summary.json ``pair_count_definitions``; NT eq. 39).
PAIR_COUNTS = {
    "near_tie_pairs": "pairs of target models with different owners and different families whose observed full "
                      "scores differ by more than 0 and at most epsilon (with missing cells: whose accuracies on the "
                      "items both answered do, near_tie_selection), pooled over folds; frozen for every control, "
                      "bootstrap and posterior draw",
    "eligible_pairs": "near-tie pairs not tied under the low-DIF anchor score either: the denominator of the "
                      "low-DIF reversal rate (NT eq. 39-41)",
    "anchor_tied_pairs": "near_tie_pairs - eligible_pairs: near-tie pairs tied under the low-DIF anchor score",
}


def _fold_dataset(fold: FoldResult, item_ids, item_group, families) -> xr.Dataset:
    pur, sel = fold.purification, fold.selection
    final, chosen = pur.final_fit, pur.selection_fit
    items = {
        "item_group": ("item", item_group),
        "cell": ("item", pur.cell),
        "selected": ("item", pur.selected),
        "weight": ("item", pur.weights),
        "easiness": ("item", final.easiness),
        "dif_range": ("item", final.dif_range),
        "family_effect": (("item", "family"), final.family_effect),
        "selection_easiness": ("item", chosen.easiness),
        "selection_dif_range": ("item", chosen.dif_range),
        "offsets_sd": ("item", pur.offsets_sd),
    }
    table = sel.table.set_index("k")
    target = fold.target.rename_axis("target_model")
    ds = xr.Dataset(
        {**items,
         **{f"cv_{c}": ("k", table[c].to_numpy()) for c in ("mean_loss", "se", "models", "selected")},
         **{f"purification_{c}": ("round", pur.rounds[c].to_numpy()) for c in pur.rounds.columns if c != "round"},
         **{f"target_{c}": ("target_model", target[c].to_numpy()) for c in target.columns},
         "pair_first": ("pair", fold.pairs[0]), "pair_second": ("pair", fold.pairs[1])},
        coords={"item": item_ids, "family": families, "k": table.index.to_numpy(),
                "round": pur.rounds["round"].to_numpy()},
    )
    ds.attrs.update(audit_fold=fold.audit_fold, selected_k=sel.k, best_k=sel.k_best, tau_b=fold.tau_b,
                    eligible=fold.eligible, reversed=fold.reversed, validation_owners=list(sel.validation_owners),
                    description=f"audit half {fold.audit_fold} chose K, DIF and anchors; target = the other half's "
                                "representatives")
    return ds


def audit_summary(result: AuditResult) -> dict:
    """The machine-readable summary (``summary.json``)."""
    summary = dict(result.summary)
    near_tie = [len(f.pairs[0]) for f in result.folds]
    summary |= {"near_tie_pairs": int(sum(near_tie)),
                "near_tie_selection": ("both-answered gap (missing cells: each pair's accuracies on the items both "
                                       "answered in the target half)" if any(f.pair_gaps is not None for f in result.folds)
                                       else "full-score gap"),
                "anchor_tied_pairs": int(sum(near_tie)) - summary["eligible_pairs"],
                "pair_count_definitions": PAIR_COUNTS}
    if result.controls is not None:
        c = result.controls.sel(pair_set="primary")
        summary |= {"matched_random_median": float(c["median"]), "matched_random_interval": [float(c["lower"]),
                                                                                              float(c["upper"])],
                    "excess_pp": float(c["excess_pp"]), "p_value": float(c["p_value"]),
                    "min_resolvable_p": float(c["min_resolvable_p"]), "undefined_controls": int(c["undefined"])}
    if result.composition is not None:
        b = result.composition.sel(pair_set="primary")
        summary |= {"bootstrap_rate_range": [float(b["rate_lower"]), float(b["rate_upper"])],
                    "bootstrap_rate_mean": float(b["rate_mean"]),
                    "bootstrap_tau_b_range": [float(result.composition["tau_lower"]),
                                              float(result.composition["tau_upper"])],
                    "bootstrap_units": f"{result.composition.attrs['unit_count']} "
                                       f"{result.composition.attrs['units']}",
                    "bootstrap_band": {k: float(b[k]) for k in ("in_band_share", "rate_in_band", "rate_out_band")}}
    summary |= {
        "folds": [{"audit_fold": f.audit_fold, "selected_k": f.selection.k, "best_k": f.selection.k_best,
                   "dimension_cv": f.selection.table.to_dict(orient="records"),
                   "anchors": int(f.purification.selected.sum()), "near_tie_pairs": len(f.pairs[0]),
                   "eligible_pairs": f.eligible,
                   "reversals": f.reversed, "tau_b": f.tau_b, "target_models": len(f.target),
                   "purification": f.purification.rounds.to_dict(orient="records")} for f in result.folds],
        "warnings": result.warnings,
        "config": asdict(result.config),
        "timings_s": {k: round(v, 3) for k, v in result.timings.items()},
    }
    summary["intervals"] = audit_intervals(result, summary)
    return summary


def audit_tree(result: AuditResult, responses: xr.Dataset) -> xr.DataTree:
    """Everything the audit computed, labelled: population, both folds, controls, bootstraps."""
    item_ids = responses["item_id"].values.astype(str)
    item_group = responses["item_group"].values.astype(str)
    families = np.array(result.summary["families"], dtype=str)
    pop = result.population.rename_axis("model").reset_index(drop=True)
    children = {"population": xr.Dataset.from_dataframe(pop.rename_axis("model"))}
    for f in result.folds:
        children[f"fold{f.audit_fold}"] = _fold_dataset(f, item_ids, item_group, families)
    for name in ("controls", "composition", "owners", "sensitivity"):
        value = getattr(result, name)
        if value is not None:
            children[name] = value
    for name, ds in (result.replication or {}).items():
        children[f"replication_{name}"] = ds
    if result.matched is not None:
        children["matched"] = result.matched
    if result.profiles is not None:
        children["profiles"] = result.profiles
    if result.perturbations is not None:
        children["perturbations"] = xr.Dataset.from_dataframe(
            result.perturbations.drop(columns="status").set_index("perturbation")).assign(
            status=("perturbation", result.perturbations["status"].to_numpy(dtype=str)))
    if result.bayes is not None:
        children["bayes"] = _with_chain(result.bayes.to_dataset())
        children |= {f"bayes/{name}": _with_chain(node.to_dataset()) for name, node in result.bayes.children.items()}
    if result.near_ties is not None:
        children["near_ties"] = near_ties_dataset(result.near_ties, result.summary["bayes"]["near_ties"])
    tree = xr.DataTree.from_dict(children)
    tree.attrs = {"summary": to_json(audit_summary(result), indent=None),
                  "reference": "NT sections 3.1-3.4, App. C and D.1"}
    if result.bayes is not None:  # every DIF interval of the Bayesian layer and its diagnostics
        tree.attrs["bayes_intervals"] = CONDITIONAL
    return tree


def _with_chain(ds: xr.Dataset) -> xr.Dataset:
    """Per-draw variables of the Bayesian layer as one ``chain`` of ``draw`` s, ArviZ's sample
    dims, so plain ArviZ summarizes them (``az.summary(tree, group="bayes", var_names=[...])``)."""
    if "draw" not in ds.dims:
        return ds
    per_draw = [n for n, v in ds.data_vars.items() if "draw" in v.dims]
    expanded = ds[per_draw].expand_dims(chain=[0]).transpose("chain", "draw", ...)
    return ds.drop_vars(per_draw).merge(expanded).assign_coords(draw=np.arange(ds.sizes["draw"]))


