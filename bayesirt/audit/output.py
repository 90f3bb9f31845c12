"""The audit as labelled objects and files: ``audit.nc`` (a DataTree holding everything),
``summary.json``, ``report.md``, figures and the per-fold CSV tables (with the Bayesian layer,
also ``near_ties.csv`` and ``near_ties.png``: the near-tie leaderboard with uncertainty)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.audit.result import AuditResult, FoldResult
from bayesirt.utils.outputs import staged_output, write_netcdf
from bayesirt.report.audit import audit_report, plot_controls, plot_sensitivity
from bayesirt.report.near_ties import plot_near_ties
from bayesirt.audit.bayes import CONDITIONAL
from bayesirt.audit.near_ties import near_ties_dataset

__all__ = ["audit_summary", "audit_tree", "write_audit"]


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
    if result.controls is not None:
        c = result.controls.sel(pair_set="primary")
        summary |= {"matched_random_median": float(c["median"]), "matched_random_interval": [float(c["lower"]),
                                                                                              float(c["upper"])],
                    "excess_pp": float(c["excess_pp"]), "p_value": float(c["p_value"]),
                    "min_resolvable_p": float(c["min_resolvable_p"]), "undefined_controls": int(c["undefined"])}
    if result.composition is not None:
        b = result.composition.sel(pair_set="primary")
        summary |= {"bootstrap_rate_range": [float(b["rate_lower"]), float(b["rate_upper"])],
                    "bootstrap_tau_b_range": [float(result.composition["tau_lower"]),
                                              float(result.composition["tau_upper"])]}
    summary |= {
        "folds": [{"audit_fold": f.audit_fold, "selected_k": f.selection.k, "best_k": f.selection.k_best,
                   "dimension_cv": f.selection.table.to_dict(orient="records"),
                   "anchors": int(f.purification.selected.sum()), "eligible_pairs": f.eligible,
                   "reversals": f.reversed, "tau_b": f.tau_b, "target_models": len(f.target),
                   "purification": f.purification.rounds.to_dict(orient="records")} for f in result.folds],
        "warnings": result.warnings,
        "config": asdict(result.config),
        "timings_s": {k: round(v, 3) for k, v in result.timings.items()},
    }
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
    tree.attrs = {"summary": json.dumps(audit_summary(result), default=_json_default),
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


def _json_default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.bool_):
        return bool(value)
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def write_audit(result: AuditResult, responses: xr.Dataset, out: str | Path, *, force: bool = False) -> Path:
    """Write the audit folder atomically (staged, then renamed into place)."""
    summary = audit_summary(result)
    with staged_output(out, force=force) as folder:
        write_netcdf(audit_tree(result, responses), folder / "audit.nc")
        (folder / "summary.json").write_text(json.dumps(summary, indent=2, default=_json_default))
        result.population.to_csv(folder / "population.csv", index=False)
        item_ids = responses["item_id"].values.astype(str)
        for f in result.folds:
            h = f.audit_fold
            f.selection.table.to_csv(folder / f"fold{h}_dimension_cv.csv", index=False)
            f.purification.rounds.to_csv(folder / f"fold{h}_purification.csv", index=False)
            pur = f.purification
            anchors = pd.DataFrame({"item_id": item_ids, "item_group": responses["item_group"].values.astype(str),
                                    "cell": pur.cell, "easiness": pur.selection_fit.easiness,
                                    "dif_range": pur.selection_fit.dif_range, "selected": pur.selected,
                                    "weight": pur.weights, "final_dif_range": pur.final_fit.dif_range,
                                    "offsets_sd": pur.offsets_sd})
            anchors.to_csv(folder / f"fold{h}_anchors.csv", index=False)
            f.target.to_csv(folder / f"fold{h}_scores.csv", index=False)
        figure = None
        if result.controls is not None:
            c = result.controls
            table = pd.DataFrame({"replicate": c["replicate"].values, "rate": c["rate"].sel(pair_set="primary").values,
                                  "mean_tau_b": c["mean_tau_b"].values})
            for h in range(c.sizes["fold"]):
                table[f"fold{h}_eligible"] = c["eligible"].sel(pair_set="primary").isel(fold=h).values
                table[f"fold{h}_reversed"] = c["reversed"].sel(pair_set="primary").isel(fold=h).values
            table.to_csv(folder / "random_controls.csv", index=False)
            figure = plot_controls(result, folder / "controls.png").name
        if result.composition is not None:
            b = result.composition
            pd.DataFrame({"replicate": b["replicate"].values, "rate": b["rate"].sel(pair_set="primary").values,
                          "mean_tau_b": b["mean_tau_b"].values}).to_csv(folder / "composition_bootstrap.csv",
                                                                         index=False)
        if result.owners is not None:
            o = result.owners
            o[[v for v in o.data_vars if "replicate" not in o[v].dims]].to_dataframe().to_csv(
                folder / "owner_bootstrap.csv")
        if result.perturbations is not None:
            result.perturbations.to_csv(folder / "perturbations.csv", index=False)
        curve = None
        if result.sensitivity is not None:
            result.sensitivity.to_dataframe().to_csv(folder / "sensitivity.csv")
            curve = plot_sensitivity(result.sensitivity, folder / "sensitivity.png").name
        ties_figure = None
        if result.near_ties is not None:
            result.near_ties.to_csv(folder / "near_ties.csv", index=False)
            ties_figure = plot_near_ties(result.near_ties, folder / "near_ties.png").name
        (folder / "report.md").write_text(audit_report(result, summary, responses, figure, curve,
                                                       near_ties_figure=ties_figure))
    return Path(out)
