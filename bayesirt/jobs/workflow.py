"""The workflow-check jobs, each writing one output folder: posterior predictive checks, prior
predictive checks and simulation-based calibration."""

from __future__ import annotations

from pathlib import Path

from bayesirt.data.settings import DATA_HELP
from bayesirt.errors import ConfigError
from bayesirt.inference.fitting import fit
from bayesirt.models.specs import SPEC_HELP, IRTSpec, load_spec
from bayesirt.utils.options import declare, option
from bayesirt.utils.outputs import check_output, staged_output, write_netcdf
from bayesirt.workflow.sbc import simulation_based_calibration

__all__ = ["run_ppc_job", "run_prior_check_job", "run_sbc_job", "parse_design"]


@declare(forward=fit, positional={"data": DATA_HELP})
def run_ppc_job(data, out, *, spec=option("2pl", SPEC_HELP, flag="--model"),
                ppc_draws: int = option(500, "posterior draws replicated", low=1),
                alpha: float = option(0.05, "flagging level of the ppp values", low=0, high=1, open=True),
                float32: bool = option(False, "store draws in posterior.nc in single precision: half the size, 7 "
                                              "significant digits"),
                force: bool = False, progress: bool = True, **fit_options) -> Path:
    """Fit ``spec`` and run posterior predictive checks; writes posterior.nc, ppc_items.csv,
    ppc_models.csv, ppc_global.csv, ppc.png and report.md.

    posterior.nc holds the fit with ``log_likelihood``, ``posterior_predictive["responses"]`` (one
    replicated matrix per posterior draw, beside ``observed_data["responses"]``, for
    ``az.loo_pit`` and ArviZ's PPC plots) and ``ppc_statistics``: the test quantities of the
    ``ppc_draws`` replicates (dim ``replicate``) behind the tables. ``float32`` stores the draws in
    single precision."""
    check_output(out, force=force)
    # import time: loaded when the job runs, not when the command line lists its options
    import xarray as xr
    from bayesirt.data import load  # import time, as above
    from bayesirt.inference.diagnostics import diagnose  # import time, as above
    from bayesirt.report.predictive import plot_ppc, ppc_section  # import time, as above
    from bayesirt.workflow.predictive import posterior_predictive_check, replicate_responses  # import time, as above

    responses = data if isinstance(data, xr.Dataset) else load(data)
    spec = spec if isinstance(spec, IRTSpec) else load_spec(spec)
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
        raise ConfigError(f"design must look like MODELSxITEMS, e.g. 200x100; got {text!r}") from None
    return models, items


def _one_design(v: dict) -> str | None:
    if (v["design"] is None) == (v["data"] is None):
        return "prior-check needs exactly one of --design MODELSxITEMS or --data DATA"
    return None


@declare(check=_one_design)
def run_prior_check_job(out, *, spec=option("2pl", SPEC_HELP, flag="--model"),
                        design: str | None = option(None, "MODELSxITEMS, e.g. 200x100 (or give --data)", type=str),
                        data=option(None, "observed data to compare with (sets the design)", type=str),
                        draws: int = option(500, "prior draws", low=1), seed: int = option(0, "random seed", low=0),
                        force: bool = False) -> Path:
    """Prior predictive check of ``spec`` on a design or on observed data (exactly one of
    ``design`` and ``data``); writes prior_check.csv, prior_predictive.nc, prior.png and report.md."""
    check_output(out, force=force)
    spec = spec if isinstance(spec, IRTSpec) else load_spec(spec)
    # import time: loaded when the job runs, not when the command line lists its options
    import xarray as xr
    from bayesirt.data import load  # import time, as above
    from bayesirt.report.predictive import plot_prior, prior_section  # import time, as above
    from bayesirt.workflow.predictive import prior_predictive_check  # import time, as above

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


@declare(forward=simulation_based_calibration)
def run_sbc_job(out, *, spec=option("2pl", SPEC_HELP, flag="--model"),
                design: str = option("100x40", "MODELSxITEMS of each simulated data set"),
                force: bool = False, progress: bool = True, **options) -> Path:
    """Run :func:`simulation_based_calibration` and write ``out``: sbc.nc (ranks and per-replicate
    diagnostics), sbc_tests.csv, sbc_diagnostics.csv, rank_histograms.png and report.md."""
    check_output(out, force=force)
    spec = spec if isinstance(spec, IRTSpec) else load_spec(spec)
    shape = parse_design(design) if isinstance(design, str) else design
    result = simulation_based_calibration(spec, shape, progress=progress, **options)
    # import time: loaded when the job runs, not when the command line lists its options
    from bayesirt.report.sbc import plot_rank_histograms, sbc_section

    with staged_output(out, force=force) as folder:
        write_netcdf(result.ranks, folder / "sbc.nc")
        result.tests.to_csv(folder / "sbc_tests.csv", index=False)
        result.diagnostics.to_csv(folder / "sbc_diagnostics.csv", index=False)
        figure = plot_rank_histograms(result, folder / "rank_histograms.png").name
        lines = [f"# Simulation-based calibration: {spec.title}", ""] + sbc_section(result, figure)
        (folder / "report.md").write_text("\n".join(lines))
    return Path(out)
