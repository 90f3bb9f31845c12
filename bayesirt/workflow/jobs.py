"""The workflow-check jobs, each writing one output folder: posterior predictive checks, prior
predictive checks and simulation-based calibration."""

from __future__ import annotations

from pathlib import Path

import xarray as xr

from bayesirt.data import load
from bayesirt.errors import SpecError
from bayesirt.inference.diagnostics import diagnose
from bayesirt.inference.fitting import fit
from bayesirt.models.specs import IRTSpec, load_spec
from bayesirt.report.predictive import plot_ppc, plot_prior, ppc_section, prior_section
from bayesirt.report.sbc import plot_rank_histograms, sbc_section
from bayesirt.utils.outputs import check_output, staged_output, write_netcdf
from bayesirt.workflow.predictive import posterior_predictive_check, prior_predictive_check, replicate_responses
from bayesirt.workflow.sbc import simulation_based_calibration

__all__ = ["run_ppc_job", "run_prior_check_job", "run_sbc_job", "parse_design"]


def run_ppc_job(data, model, out, *, force: bool = False, progress: bool = True, ppc_draws: int = 500,
                alpha: float = 0.05, float32: bool = False, **fit_options) -> Path:
    """Fit ``model`` and run posterior predictive checks; writes posterior.nc, ppc_items.csv,
    ppc_models.csv, ppc_global.csv, ppc.png and report.md.

    posterior.nc holds the fit with ``log_likelihood``, ``posterior_predictive["responses"]`` (one
    replicated matrix per posterior draw, beside ``observed_data["responses"]``, for
    ``az.loo_pit`` and ArviZ's PPC plots) and ``ppc_statistics``: the test quantities of the
    ``ppc_draws`` replicates (dim ``replicate``) behind the tables. ``float32`` stores the draws in
    single precision."""
    check_output(out, force=force)
    responses = data if isinstance(data, xr.Dataset) else load(data)
    spec = model if isinstance(model, IRTSpec) else load_spec(model)
    tree = fit(responses, spec, progress=progress, **(fit_options | {"log_likelihood": True}))
    seed = int(fit_options.get("seed", 0))
    result = posterior_predictive_check(tree, draws=ppc_draws, seed=seed, alpha=alpha)
    tree["posterior_predictive"] = xr.DataTree(replicate_responses(tree, seed=seed))
    tree["ppc_statistics"] = xr.DataTree(result.replicated.isel(chain=0, drop=True).rename(draw="replicate"))
    warnings = diagnose(tree)
    with staged_output(out, force=force) as folder:
        write_netcdf(tree, folder / "posterior.nc", float32=float32)
        result.items.to_csv(folder / "ppc_items.csv", index=False)
        result.models.to_csv(folder / "ppc_models.csv", index=False)
        result.global_checks.to_csv(folder / "ppc_global.csv", index=False)
        figure = plot_ppc(result, folder / "ppc.png").name
        lines = [f"# Posterior predictive checks: {spec.title} on {responses.attrs.get('name', 'responses')}", ""]
        lines += ppc_section(result, figure)
        if warnings:
            lines += ["## Sampler diagnostics", "", *[f"- {w}" for w in warnings], ""]
        (folder / "report.md").write_text("\n".join(lines))
    return Path(out)


def parse_design(text: str) -> tuple[int, int]:
    """``"200x100"`` -> (200 models, 100 items)."""
    try:
        models, items = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise SpecError(f"design must look like MODELSxITEMS, e.g. 200x100; got {text!r}") from None
    return models, items


def run_prior_check_job(model, out, *, data=None, design: str | None = None, force: bool = False,
                        draws: int = 500, seed: int = 0) -> Path:
    """Prior predictive check of ``model`` on a design or on observed data; writes
    prior_check.csv, prior_predictive.nc, prior.png and report.md."""
    check_output(out, force=force)
    spec = model if isinstance(model, IRTSpec) else load_spec(model)
    responses = None if data is None else data if isinstance(data, xr.Dataset) else load(data)
    shape = None if design is None else parse_design(design)
    simulated, table = prior_predictive_check(spec, responses, design=shape, draws=draws, seed=seed)
    with staged_output(out, force=force) as folder:
        table.to_csv(folder / "prior_check.csv", index=False)
        write_netcdf(simulated, folder / "prior_predictive.nc")
        figure = plot_prior(simulated, folder / "prior.png", responses).name
        where = responses.attrs.get("name", "the data") if responses is not None else f"a {design} design"
        lines = [f"# Prior predictive check: {spec.title} on {where}", ""] + prior_section(table, spec.name, draws, figure)
        (folder / "report.md").write_text("\n".join(lines))
    return Path(out)


def run_sbc_job(model, out, *, design: str = "100x40", force: bool = False, progress: bool = True,
                **options) -> Path:
    """Run :func:`simulation_based_calibration` and write ``out``: sbc.nc (ranks and per-replicate
    diagnostics), sbc_tests.csv, sbc_diagnostics.csv, rank_histograms.png and report.md."""
    check_output(out, force=force)
    spec = model if isinstance(model, IRTSpec) else load_spec(model)
    shape = parse_design(design) if isinstance(design, str) else design
    result = simulation_based_calibration(spec, shape, progress=progress, **options)
    with staged_output(out, force=force) as folder:
        write_netcdf(result.ranks, folder / "sbc.nc")
        result.tests.to_csv(folder / "sbc_tests.csv", index=False)
        result.diagnostics.to_csv(folder / "sbc_diagnostics.csv", index=False)
        figure = plot_rank_histograms(result, folder / "rank_histograms.png").name
        lines = [f"# Simulation-based calibration: {spec.title}", ""] + sbc_section(result, figure)
        (folder / "report.md").write_text("\n".join(lines))
    return Path(out)
