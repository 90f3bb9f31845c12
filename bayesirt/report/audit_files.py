"""The audit's output folder: ``audit.nc`` (one DataTree), ``summary.json``, ``report.md``, figures and the
per-fold CSV tables (with the Bayesian layer, also ``near_ties.csv`` and ``near_ties.png``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import xarray as xr

from bayesirt.audit.engine.result import AuditResult
from bayesirt.audit.output import audit_summary, audit_tree
from bayesirt.data.reading import reading_record
from bayesirt.report.audit import audit_report, plot_controls, plot_sensitivity
from bayesirt.report.near_ties import plot_near_ties
from bayesirt.utils.outputs import staged_output, to_json, write_json, write_netcdf

__all__ = ["write_audit"]


def write_audit(result: AuditResult, responses: xr.Dataset, out: str | Path, *, force: bool = False) -> Path:
    """Write the audit folder atomically (staged, then renamed into place)."""
    summary = audit_summary(result) | {"reading": reading_record(responses)}
    with staged_output(out, force=force) as folder:
        tree = audit_tree(result, responses)
        tree.attrs["bayesirt_reading"] = to_json(summary["reading"], indent=None)  # how the data were read
        write_netcdf(tree, folder / "audit.nc")
        write_json(folder / "summary.json", summary)
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
