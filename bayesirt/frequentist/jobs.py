"""The frequentist reference jobs, each writing one output folder: an MML fit, the PL ladder,
the Bayes-versus-MML agreement check and the split-half regularization check."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import xarray as xr

from bayesirt.data import load
from bayesirt.data.reading import reading_lines, reading_record
from bayesirt.inference.diagnostics import diagnose
from bayesirt.errors import recorded_warnings
from bayesirt.frequentist import (
    DEFAULT_THRESHOLD_SD, compare_estimates, fit_mml, information_criteria, pl_ladder, split_half_retention,
)
from bayesirt.inference.fitting import fit
from bayesirt.utils.outputs import check_output, staged_output, write_netcdf
from bayesirt.report.checks import (
    agreement_section, ladder_section, mml_section, plot_agreement, plot_splithalf, splithalf_section,
)
from bayesirt.models.specs import IRTSpec, load_spec

__all__ = ["run_mml_job", "run_ladder_job", "run_check_job", "run_splithalf_job"]


_ESTIMATORS = {False: "marginal maximum likelihood (Bock-Aitkin EM)",
               True: "marginal MAP of the item parameters under the spec's priors (MAP-EM)"}


def _inputs(data, model=None):
    responses = data if isinstance(data, xr.Dataset) else load(data)
    spec = None if model is None else model if isinstance(model, IRTSpec) else load_spec(model)
    return responses, spec


def _header(title: str, responses: xr.Dataset) -> list[str]:
    y = responses["responses"].values
    return [f"# {title} on {responses.attrs.get('name', 'responses')}", "",
            f"{y.shape[0]:,} items x {y.shape[1]:,} models; {(y < 0).mean():.1%} missing cells.", ""]


def _warnings_section(messages: list[str]) -> list[str]:
    if not messages:
        return []
    return ["## Warnings", "", *[f"- {m}" for m in messages], ""]


def _mml_tables(result) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``items.csv`` (every parameter with its SE, (a, b) and (a, d) forms) and ``models.csv``."""
    absent = [v for v, has in (("guessing", result.spec.has_guessing), ("slip", result.spec.has_slip)) if not has]
    items = result.items.drop_vars(absent + [f"{v}_se" for v in absent]).to_dataframe().reset_index()
    models = result.abilities[["eap", "eap_sd", "map", "map_se"]].to_dataframe().reset_index()
    return items, models


def _mml_summary(result, n_models: int) -> dict:
    return {"spec": result.spec.name, "loglik": result.loglik, "log_prior": result.log_prior,
            "objective": result.objective, "n_parameters": result.n_parameters,
            **information_criteria(result.loglik, result.n_parameters, n_models), "n_models": n_models,
            "iterations": result.iterations, "converged": result.converged,
            "priors": bool(result.attrs.get("priors")), "quadrature": result.attrs.get("quadrature")}


def run_mml_job(data, model, out, *, force: bool = False, quadrature: int = 61, priors: bool = False,
                se: bool = True, max_iter: int = 500, ignored_options: dict | None = None) -> Path:
    """Fit ``model`` by MML (or MAP-EM with ``priors``: the marginal MAP of the items, what
    ``bayesirt fit --method map`` runs); write items.csv, models.csv, summary.json, mml.nc and
    report.md to ``out``. ``ignored_options``: options of the caller that do not apply (listed in
    summary.json and the report)."""
    check_output(out, force=force)
    responses, spec = _inputs(data, model)
    result, messages = recorded_warnings(fit_mml, responses, spec, quadrature=quadrature, priors=priors, se=se, max_iter=max_iter)
    items, models = _mml_tables(result)
    summary = ({"data": responses.attrs.get("name", ""), "method": "map" if priors else "mml",
                "estimator": _ESTIMATORS[bool(priors)]}
               | _mml_summary(result, responses.sizes["model"]) | {"warnings": messages}
               | {"reading": reading_record(responses)})
    notes = []
    if ignored_options:
        summary["ignored_options"] = ignored_options
        listed = ", ".join(f"`{k} = {v!r}`" for k, v in ignored_options.items())
        notes = [f"Ignored options (they apply to the sampled methods, not to this estimate): {listed}.", ""]
    with staged_output(out, force=force) as folder:
        items.to_csv(folder / "items.csv", index=False)
        models.to_csv(folder / "models.csv", index=False)
        (folder / "summary.json").write_text(json.dumps(summary, indent=2))
        write_netcdf(result.to_datatree(), folder / "mml.nc")
        title = f"Marginal MAP (MAP-EM), {spec.title}" if priors else f"MML {spec.title}"
        lines = (_header(title, responses) + reading_lines(responses) + notes + mml_section(result, summary)
                 + _warnings_section(messages))
        (folder / "report.md").write_text("\n".join(lines))
    return Path(out)


def run_ladder_job(data, out, *, force: bool = False, quadrature: int = 61, max_iter: int = 500) -> Path:
    """Fit the 1PL-4PL ladder; write ladder.csv, lrt.csv, summary.json and report.md."""
    check_output(out, force=force)
    responses, _ = _inputs(data)
    (table, lrt), messages = recorded_warnings(pl_ladder, responses, quadrature=quadrature, max_iter=max_iter)
    with staged_output(out, force=force) as folder:
        table.to_csv(folder / "ladder.csv", index=False)
        lrt.to_csv(folder / "lrt.csv", index=False)
        summary = {"n_models": table.attrs["n"], "note": table.attrs["note"], "warnings": messages,
                   "ladder": table.to_dict("records"), "lrt": lrt.to_dict("records")}
        (folder / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
        lines = _header("PL ladder", responses) + ladder_section(table, lrt) + _warnings_section(messages)
        (folder / "report.md").write_text("\n".join(lines))
    return Path(out)


def run_check_job(data, model, out, *, force: bool = False, progress: bool = True, quadrature: int = 61,
                  threshold_sd: float = DEFAULT_THRESHOLD_SD, **fit_options) -> Path:
    """Fit ``model`` by ``fit`` (NUTS by default) and by ML and MAP-EM, and write the agreement
    report: agreement.csv, agreement_summary.csv, agreement.png, posterior.nc, ml.nc, map.nc,
    summary.json, report.md."""
    check_output(out, force=force)
    responses, spec = _inputs(data, model)
    tree = fit(responses, spec, progress=progress, **fit_options)
    ml, ml_messages = recorded_warnings(fit_mml, responses, spec, quadrature=quadrature, priors=False, se=True)
    mode, map_messages = recorded_warnings(fit_mml, responses, spec, quadrature=quadrature, priors=True, se=False)
    agreement = compare_estimates(tree, ml, mode, threshold_sd=threshold_sd)
    diagnostics = diagnose(tree)
    messages = [f"ML: {m}" for m in ml_messages] + [f"MAP-EM: {m}" for m in map_messages] + diagnostics
    with staged_output(out, force=force) as folder:
        write_netcdf(tree, folder / "posterior.nc")
        write_netcdf(ml.to_datatree(), folder / "ml.nc")
        write_netcdf(mode.to_datatree(), folder / "map.nc")
        agreement.elements.to_csv(folder / "agreement.csv", index=False)
        agreement.summary.to_csv(folder / "agreement_summary.csv", index=False)
        figure = plot_agreement(agreement, folder / "agreement.png").name
        summary = {"spec": spec.name, "settings": json.loads(tree.attrs["bayesirt_settings"]),
                   "threshold_sd": threshold_sd, "ml_loglik": ml.loglik, "map_objective": mode.objective,
                   "flags": agreement.elements["flag"].value_counts().to_dict(),
                   "summary": agreement.summary.to_dict("records"), "warnings": messages}
        (folder / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
        lines = _header(f"Agreement check, {spec.title}", responses) + agreement_section(agreement, figure)
        (folder / "report.md").write_text("\n".join(lines + _warnings_section(messages)))
    return Path(out)


def run_splithalf_job(data, out, *, model="2pl", force: bool = False, progress: bool = True, splits: int = 10,
                      top: int = 25, seed: int = 0, quadrature: int = 61) -> Path:
    """Split-half retention with and without priors; write splithalf.csv, splithalf.nc,
    splithalf.png, summary.json and report.md."""
    check_output(out, force=force)
    responses, spec = _inputs(data, model)
    ds = split_half_retention(responses, spec, splits=splits, top=top, seed=seed, quadrature=quadrature,
                              progress=progress)
    with staged_output(out, force=force) as folder:
        ds.drop_dims("item").to_dataframe().reset_index().to_csv(folder / "splithalf.csv", index=False)
        write_netcdf(ds, folder / "splithalf.nc")
        figure = plot_splithalf(ds, folder / "splithalf.png").name
        summary = {"attrs": {k: v for k, v in ds.attrs.items()},
                   "mean_retention": ds["retention"].mean("split").to_pandas().to_dict()}
        (folder / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
        lines = _header("Split-half check", responses) + splithalf_section(ds, figure)
        (folder / "report.md").write_text("\n".join(lines))
    return Path(out)
