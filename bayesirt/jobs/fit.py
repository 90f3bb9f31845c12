"""The fit job (``bayesirt fit``): data -> spec -> fit -> ``posterior.nc``, tables, report and figures in one
output folder; ``method = "map"``: the marginal MAP (MAP-EM) in the same files, ``map.nc`` for ``posterior.nc``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from warnings import warn
from typing import TYPE_CHECKING

from bayesirt.data.settings import DATA_HELP
from bayesirt.errors import ConfigError, recorded_warnings
from bayesirt.inference.fitting import fit
from bayesirt.inference.methods import DEFAULT_CI, METHODS
from bayesirt.models.specs import SPEC_HELP, IRTSpec, MIRTSpec, load_spec
from bayesirt.utils.options import declare, option, options_of
from bayesirt.utils.outputs import check_output, staged_output, to_json, write_json, write_netcdf
from bayesirt.utils.progress import heartbeat, stage

if TYPE_CHECKING:  # annotations only
    import xarray as xr

__all__ = ["run_fit_job", "MAP_ESTIMATOR"]

#: What ``method="map"`` estimates (summary.json ``estimator``, the report).
MAP_ESTIMATOR = "marginal MAP of the item parameters under the spec's priors (MAP-EM); abilities MAP given the items"
_QUADRATURE, _MAX_ITER = 61, 500


def _pairs_need_draws(v: dict) -> str | None:
    if v["pairs"] == "all" and v["method"] == "map":
        return "--pairs all needs posterior draws; method 'map' has none: use --method advi (or nuts)"
    return None


@declare(forward=fit, positional={"data": DATA_HELP}, check=_pairs_need_draws)
def run_fit_job(
    data: str | Path | xr.Dataset, out: str | Path, *,
    spec: str | Path | IRTSpec = option("2pl", SPEC_HELP, flag="--model"),
    method: str = option("nuts", "nuts, advi, fullrank_advi (posterior draws); laplace: a Gaussian approximation "
                                 "of the 2PL posterior with fixed priors, for whole leaderboards in minutes; "
                                 "or map: marginal MAP of the items "
                                 "(MAP-EM) with SEs under the spec's priors, as `mml --priors`, in the same files (map.nc "
                                 "for posterior.nc; 1PL-4PL)",
                         choices=(*METHODS, "map")),
    ci: float = option(DEFAULT_CI, "credible-interval probability of tables (map: Wald intervals)", low=0, high=1, open=True),
    pairs: str = option("adjacent", "P(a ahead of b): for adjacent ranks in models.csv (prob_ahead_of_next), or "
                                    "also for every pair of models in pairs.nc (1PL-4PL)", choices=("adjacent", "all")),
    float32: bool = option(False, "store draws in posterior.nc in single precision: half the size, 7 significant "
                                  "digits"),
    force: bool = False, progress: bool = True, **fit_options,
) -> Path:
    """Fit ``spec`` to ``data`` and write the output folder ``out``.

    Writes ``posterior.nc`` (the DataTree, compressed; draws in single precision with
    ``float32``), ``items.csv``, ``models.csv``, ``summary.json``, ``report.md`` and two PNG
    figures. ``out`` must not exist unless ``force`` is True; the folder appears only when
    everything is written. Returns the output folder.

    ``method="map"`` is not a posterior: the same files and columns, ``map.nc`` in place of
    ``posterior.nc``, standard errors and Wald intervals in place of posterior SDs and credible
    intervals (see :func:`_run_marginal_map`). Every 1PL-4PL report and summary.json also carry
    fit checks at the point estimates (:func:`bayesirt.safety.fit_checks.fit_checks`).

    ``pairs="all"`` also writes ``pairs.nc``: P(a ahead of b) for every pair of models
    (:func:`bayesirt.inference.summaries.ahead_matrix`; 1PL-4PL posteriors). models.csv always has
    it for adjacent ranks (``prob_ahead_of_next``).
    """
    check_output(out, force=force)  # before the fit, not after minutes of sampling
    if method == "map":
        return _run_marginal_map(data, spec, out, force=force, ci=ci, float32=float32, progress=progress,
                                 **fit_options)
    # import time: loaded when the job runs, not when the command line lists its options
    import xarray as xr
    from bayesirt.data import load  # import time, as above
    from bayesirt.data.reading import reading_record  # import time, as above
    from bayesirt.inference.diagnostics import diagnose, element_diagnostics  # import time, as above
    from bayesirt.inference.summaries import is_sampled, item_table, model_table  # import time, as above

    responses = data if isinstance(data, xr.Dataset) else load(data)
    spec = spec if isinstance(spec, (IRTSpec, MIRTSpec)) else load_spec(spec)
    if pairs == "all" and spec.kind == "mirt":
        raise ConfigError(f"--pairs all compares one ability per model; spec {spec.name!r} is MIRT: use a 1PL-4PL spec")
    stage(f"fit: {spec.name} by {method} on {responses.sizes['item']:,} items x {responses.sizes['model']:,} models",
          enabled=progress)
    with heartbeat(f"fit: {method}", enabled=progress and method == "nuts"):  # ADVI reports its own progress
        tree = fit(responses, spec, method=method, progress=progress, **fit_options)
    stage("fit: diagnostics and tables", enabled=progress)
    reading = reading_record(responses)
    tree.attrs["bayesirt_reading"] = to_json(reading, indent=None)  # how the data were read, with the draws
    stats = element_diagnostics(tree) if is_sampled(tree["posterior"].to_dataset()) else None
    warnings = diagnose(tree, stats)
    if spec.kind == "mirt":
        return _write_mirt_fit(tree, spec, responses, out, warnings, ci=ci, float32=float32, force=force,
                               reading=reading)
    items, models = item_table(tree, ci=ci, stats=stats), model_table(tree, ci=ci, stats=stats)
    stage(f"fit: writing {out}", enabled=progress)
    return _write_fit(tree, spec, responses, out, items, models, warnings, {}, ci=ci, float32=float32, force=force,
                      pairs=pairs, reading=reading, stats=stats)


def _write_fit(tree, spec, responses, out, items, models, warnings, extra, *, ci, float32, force, pairs,
               reading, stats=None) -> Path:
    """The files of a 1PL-4PL fit, whatever the method: the DataTree (``posterior.nc``, or
    ``map.nc`` for method "map"), items.csv, models.csv, summary.json (with ``fit_checks``),
    report.md and two figures. ``extra``: method-specific summary entries."""
    method = json.loads(tree.attrs["bayesirt_settings"])["method"]
    point = "MAP estimates" if method == "map" else "posterior means"
    mu, sigma = _theta_prior(spec)
    # import time: loaded when the job runs, not when the command line lists its options
    from bayesirt.data.responses import from_observed_data
    from bayesirt.inference.summaries import ahead_matrix  # import time, as above
    from bayesirt.report import fit_report, plot_ability_forest, plot_item_curves  # import time, as above
    from bayesirt.report.fit_checks import fit_checks_section, ranking_caution  # import time, as above
    from bayesirt.safety.fit_checks import fit_checks, point_estimates  # import time, as above

    checks = fit_checks(from_observed_data(tree), point_estimates(tree["posterior"].to_dataset()), evaluated_at=point,
                        prior_mean=mu, prior_sd=sigma)
    with staged_output(out, force=force) as folder:
        write_netcdf(tree, folder / ("map.nc" if method == "map" else "posterior.nc"), float32=float32)
        items.to_csv(folder / "items.csv", index=False)
        models.to_csv(folder / "models.csv", index=False)
        if pairs == "all":
            write_netcdf(ahead_matrix(tree), folder / "pairs.nc")
        figures = {
            "Item characteristic curves": plot_item_curves(tree, items, folder / "item_curves.png", ci=ci).name,
            "Model abilities": plot_ability_forest(models, folder / "abilities.png", ci=ci,
                                                   interval="Wald" if method == "map" else "credible").name,
        }
        summary = {
            "data": responses.attrs.get("name", ""),
            "spec": spec.name,
            "settings": json.loads(tree.attrs["bayesirt_settings"]),
            "timings": json.loads(tree.attrs["bayesirt_timings"]),
            "versions": json.loads(tree.attrs["bayesirt_versions"]),
            "warnings": warnings,
            "ci": ci,
            "reading": reading,
            **extra,
            "fit_checks": checks,
        }
        write_json(folder / "summary.json", summary)
        (folder / "report.md").write_text(fit_report(tree, spec, responses, items, models, warnings, figures, ci=ci,
                                                     checks=fit_checks_section(checks), caution=ranking_caution(checks),
                                                     stats=stats))
    return Path(out)


def _theta_prior(spec: IRTSpec) -> tuple[float, float]:
    """Mean and SD of the spec's normal ability prior; a hierarchical one (a prior on them): 0, 1."""
    params = spec.priors["theta"].params
    mu, sigma = params.get("mu", 0.0), params.get("sigma", 1.0)
    fixed = all(isinstance(v, (int, float)) for v in (mu, sigma))
    return (float(mu), float(sigma)) if fixed else (0.0, 1.0)


def _run_marginal_map(data, spec, out, *, force: bool, ci: float, float32: bool, progress: bool = True,
                      **fit_options) -> Path:
    """The ``method="map"`` branch of :func:`run_fit_job`: the marginal MAP of the item parameters
    under the spec's priors (MAP-EM, abilities integrated out; what ``bayesirt mml --priors``
    fits), abilities as MAP (and EAP) given the items, standard errors from the observed
    information. The files of a sampled fit, with ``map.nc`` in place of ``posterior.nc``
    (:func:`bayesirt.frequentist.map_output.map_tree`) and the columns of items.csv / models.csv
    in their MAP meaning (:data:`~bayesirt.frequentist.map_output.MAP_COLUMNS`, also in
    summary.json as ``columns`` and in the report).

    Options of the sampled methods (sampler, draws, tune, chains, seed, advi_*, log_likelihood)
    do not apply: left at their defaults they pass silently; set to anything else they are
    ignored with a warning, listed in summary.json (``ignored_options``) and in the report.
    1PL-4PL specs only: a MIRT spec is refused (no marginal MAP for MIRT here).
    """
    defaults = {name: opt.default for name, opt in options_of(fit).items()}
    unknown = sorted(set(fit_options) - set(defaults))
    if unknown:
        raise TypeError(f"run_fit_job got unexpected fit option(s) {unknown}")
    spec = spec if isinstance(spec, (IRTSpec, MIRTSpec)) else load_spec(spec)
    if spec.kind == "mirt":
        raise ConfigError(f"method 'map' is the marginal MAP (MAP-EM) of 1PL-4PL items; spec {spec.name!r} is MIRT, "
                          "which has none here: use --method advi (or nuts)")
    ignored = {k: v for k, v in fit_options.items() if v != defaults[k]}
    if ignored:
        listed = ", ".join(f"{k}={v!r}" for k, v in ignored.items())
        warn(f"method 'map' (marginal MAP, MAP-EM) ignores {listed} (options of the sampled methods)",
             UserWarning, stacklevel=3)
    # import time: loaded when the job runs, not when the command line lists its options
    import xarray as xr
    from bayesirt.data import load  # import time, as above
    from bayesirt.data.reading import reading_record  # import time, as above
    from bayesirt.data.responses import validate_responses  # import time, as above
    from bayesirt.frequentist import fit_mml, information_criteria  # import time, as above
    from bayesirt.frequentist.map_output import MAP_COLUMNS, map_tables, map_tree  # import time, as above

    responses = validate_responses(data if isinstance(data, xr.Dataset) else load(data))
    start = time.perf_counter()
    stage(f"fit: {spec.name} by map (MAP-EM, then standard errors) on {responses.sizes['item']:,} items x "
          f"{responses.sizes['model']:,} models", enabled=progress)
    with heartbeat("fit: map (MAP-EM)", enabled=progress):
        result, messages = recorded_warnings(fit_mml, responses, spec, quadrature=_QUADRATURE, priors=True, se=True,
                                             max_iter=_MAX_ITER)
    stage(f"fit: MAP-EM done in {time.perf_counter() - start:.0f} s ({result.iterations} EM iterations); tables",
          enabled=progress)
    settings = {"method": "map", "estimator": MAP_ESTIMATOR, "quadrature": _QUADRATURE, "max_iter": _MAX_ITER,
                "active_priors": result.attrs["active_priors"], "se_method": result.attrs["se_method"]}
    tree = map_tree(result, responses, settings=settings, timings={"fit_s": time.perf_counter() - start})
    reading = reading_record(responses)
    tree.attrs["bayesirt_reading"] = to_json(reading, indent=None)
    items, models = map_tables(tree, ci=ci)
    n_models = responses.sizes["model"]
    extra = {"estimator": MAP_ESTIMATOR, "columns": MAP_COLUMNS,
             "map_em": {"loglik": result.loglik, "log_prior": result.log_prior, "objective": result.objective,
                        "n_parameters": result.n_parameters,
                        **information_criteria(result.loglik, result.n_parameters, n_models),
                        "iterations": result.iterations, "converged": result.converged}}
    if ignored:
        extra["ignored_options"] = ignored
        messages.append("Ignored options (they apply to the sampled methods, not to this estimate): "
                        + ", ".join(f"`{k} = {v!r}`" for k, v in ignored.items()) + ".")
    stage(f"fit: writing {out}", enabled=progress)
    return _write_fit(tree, spec, responses, out, items, models, messages, extra, ci=ci, float32=float32,
                      force=force, pairs="adjacent", reading=reading)


def _write_mirt_fit(tree, spec, responses, out, warnings, *, ci, float32, force, reading) -> Path:
    """The MIRT branch of :func:`run_fit_job`: posterior.nc, loadings/abilities (and factor
    correlation) tables with intervals, summary.json and report.md."""

    # import time: loaded when the job runs, not when the command line lists its options
    from bayesirt.report.mirt import mirt_report, mirt_tables

    tables = mirt_tables(tree, ci=ci)
    with staged_output(out, force=force) as folder:
        write_netcdf(tree, folder / "posterior.nc", float32=float32)
        for name, table in tables.items():
            table.to_csv(folder / f"{name}.csv", index=False)
        summary = {"data": responses.attrs.get("name", ""), "spec": spec.name,
                   "settings": json.loads(tree.attrs["bayesirt_settings"]),
                   "timings": json.loads(tree.attrs["bayesirt_timings"]), "warnings": warnings, "ci": ci,
                   "reading": reading}
        write_json(folder / "summary.json", summary)
        (folder / "report.md").write_text(mirt_report(tree, tables, title=spec.title, ci=ci, warnings=warnings,
                                                      data_name=responses.attrs.get("name", "responses")))
    return Path(out)
