"""Analyses run end to end: the fit job (data -> spec -> fit -> posterior.nc, tables, report,
figures in one output folder), the predictive-check jobs, the model-comparison job and declared
analyses (``analyses/*.toml``)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import xarray as xr

from bayesirt.data import load
from bayesirt.inference.diagnostics import diagnose, element_diagnostics
from bayesirt.errors import SpecError
from bayesirt.inference.fitting import fit
from bayesirt.utils.outputs import check_output, staged_output
from bayesirt.workflow.predictive import posterior_predictive_check, prior_predictive_check
from bayesirt.report import fit_report, plot_ability_forest, plot_item_curves
from bayesirt.report.predictive import plot_ppc, plot_prior, ppc_section, prior_section
from bayesirt.models.specs import IRTSpec, MIRTSpec, load_spec
from bayesirt.inference.summaries import DEFAULT_CI, is_sampled, item_table, model_table

__all__ = ["run_fit_job", "run_ppc_job", "run_prior_check_job", "run_compare_job", "load_analysis", "run_analysis",
           "ANALYSIS_KINDS"]

ANALYSIS_KINDS = ("fit", "audit", "safety")
_OPTIONS = {  # per kind: its option table, and the types of its options
    "fit": ("fit", {
        "method": str, "sampler": str, "draws": int, "tune": int, "chains": int, "seed": int,
        "advi_iterations": int, "advi_tolerance": float, "advi_learning_rate": float, "advi_batch_size": int,
        "log_likelihood": bool, "ci": float,
    }),
    "audit": ("audit", {
        "owner_cap": int, "min_family_size": int, "alpha": float, "epsilon": float, "controls": int,
        "bootstrap": int, "owner_bootstrap": int, "max_k": int, "population_seed": int, "seed": int, "quick": bool,
        "bayes": bool, "bayes_method": str, "bayes_draws": int, "bayes_prior": str, "sensitivity": bool,
        "adjustment": str, "workers": int,
    }),
    "safety": ("safety", {"steps": list, "information": dict, "cat": dict, "personfit": dict, "sandbag": dict,
                          "factors": dict}),
}
_REQUIRED = {"fit": ("data", "model", "out"), "audit": ("data", "out"), "safety": ("out",)}
_SIMULATE = {"n_owners": int, "families": list, "models_per_owner_family": int, "n_items": int, "n_groups": int,
             "n_dims": int, "dif_fraction": float, "dif_sd": float, "missing": float, "seed": int}
SIMULATED = "simulate_dif_benchmark"
"""``data`` value of an audit analysis whose data are generated from its ``[simulate]`` table."""


def run_fit_job(
    data: str | Path | xr.Dataset, model: str | Path | IRTSpec, out: str | Path, *, force: bool = False,
    ci: float = DEFAULT_CI, progress: bool = True, **fit_options,
) -> Path:
    """Fit ``model`` to ``data`` and write the output folder ``out``.

    Writes ``posterior.nc`` (the DataTree), ``items.csv``, ``models.csv``, ``summary.json``,
    ``report.md`` and two PNG figures. ``out`` must not exist unless ``force`` is True; the folder
    appears only when everything is written. Returns the output folder.
    """
    check_output(out, force=force)  # before the fit, not after minutes of sampling
    if not 0 < ci < 1:
        raise SpecError(f"'ci' must be a probability between 0 and 1; got {ci!r}")
    responses = data if isinstance(data, xr.Dataset) else load(data)
    spec = model if isinstance(model, (IRTSpec, MIRTSpec)) else load_spec(model)
    tree = fit(responses, spec, progress=progress, **fit_options)
    stats = element_diagnostics(tree) if is_sampled(tree["posterior"].to_dataset()) else None
    warnings = diagnose(tree, stats)
    if spec.kind == "mirt":
        return _write_mirt_fit(tree, spec, responses, out, warnings, ci=ci, force=force)
    items, models = item_table(tree, ci=ci, stats=stats), model_table(tree, ci=ci, stats=stats)
    with staged_output(out, force=force) as folder:
        tree.to_netcdf(folder / "posterior.nc", engine="h5netcdf")
        items.to_csv(folder / "items.csv", index=False)
        models.to_csv(folder / "models.csv", index=False)
        figures = {
            "Item characteristic curves": plot_item_curves(tree, items, folder / "item_curves.png", ci=ci).name,
            "Model abilities": plot_ability_forest(models, folder / "abilities.png", ci=ci).name,
        }
        summary = {
            "data": responses.attrs.get("name", ""),
            "spec": spec.name,
            "settings": json.loads(tree.attrs["bayesirt_settings"]),
            "timings": json.loads(tree.attrs["bayesirt_timings"]),
            "versions": json.loads(tree.attrs["bayesirt_versions"]),
            "warnings": warnings,
            "ci": ci,
        }
        (folder / "summary.json").write_text(json.dumps(summary, indent=2))
        (folder / "report.md").write_text(fit_report(tree, spec, responses, items, models, warnings, figures, ci=ci))
    return Path(out)


def _write_mirt_fit(tree, spec, responses, out, warnings, *, ci, force) -> Path:
    """The MIRT branch of :func:`run_fit_job`: posterior.nc, loadings/abilities (and factor
    correlation) tables with intervals, summary.json and report.md."""
    from bayesirt.report.mirt import mirt_report, mirt_tables

    tables = mirt_tables(tree, ci=ci)
    with staged_output(out, force=force) as folder:
        tree.to_netcdf(folder / "posterior.nc", engine="h5netcdf")
        for name, table in tables.items():
            table.to_csv(folder / f"{name}.csv", index=False)
        summary = {"data": responses.attrs.get("name", ""), "spec": spec.name,
                   "settings": json.loads(tree.attrs["bayesirt_settings"]),
                   "timings": json.loads(tree.attrs["bayesirt_timings"]), "warnings": warnings, "ci": ci}
        (folder / "summary.json").write_text(json.dumps(summary, indent=2))
        (folder / "report.md").write_text(mirt_report(tree, tables, title=spec.title, ci=ci, warnings=warnings,
                                                      data_name=responses.attrs.get("name", "responses")))
    return Path(out)


def load_analysis(path: str | Path) -> dict:
    """Read and validate an analysis spec (``analyses/*.toml``)."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"no analysis spec at {path}; give the path of a .toml file such as analyses/demo.toml")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{path}: not valid TOML ({err}); fix the syntax") from None
    head = raw.get("analysis")
    if not isinstance(head, dict):
        raise SpecError(f"{path}: missing the [analysis] table (kind, data, model, out)")
    kind = head.get("kind")
    if kind not in ANALYSIS_KINDS:
        raise SpecError(f"{path}: [analysis] 'kind' must be one of {list(ANALYSIS_KINDS)}; got {kind!r}")
    for key in _REQUIRED[kind]:
        if not isinstance(head.get(key), str) or not head[key]:
            raise SpecError(f"{path}: [analysis] needs {key!r} (a name or path)")
    if kind == "safety":
        files = head.get("data")
        if not isinstance(files, list) or not files or not all(isinstance(f, str) and f for f in files):
            raise SpecError(f"{path}: [analysis] needs 'data', a list of benchmark files or dataset names")
    table, allowed = _OPTIONS[kind]
    tables = {"analysis", table} | ({"simulate"} if kind == "audit" else set())
    unknown = set(raw) - tables
    if unknown:
        raise SpecError(f"{path}: unknown table(s) {sorted(unknown)}; allowed: {sorted(tables)}")
    options = raw.get(table, {})
    _check_types(path, table, options, allowed)
    simulate = raw.get("simulate", {})
    _check_types(path, "simulate", simulate, _SIMULATE)
    if kind == "audit" and (head["data"] == SIMULATED) != bool(simulate):
        raise SpecError(f"{path}: generated data need data = {SIMULATED!r} together with a [simulate] table")
    return {"path": path, **head, "options": options, "simulate": simulate}


def _check_types(path: Path, table: str, options: dict, allowed: dict) -> None:
    for key, value in options.items():
        if key not in allowed:
            raise SpecError(f"{path}: [{table}] unknown option {key!r}; allowed: {sorted(allowed)}")
        want = allowed[key]
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            if not (want is float and isinstance(value, int) and not isinstance(value, bool)):
                raise SpecError(f"{path}: [{table}] {key!r} must be of type {want.__name__}; got {value!r}")


def run_analysis(path: str | Path, *, force: bool = False, progress: bool = True) -> Path:
    """Run a declared analysis end to end; returns its output folder."""
    analysis = load_analysis(path)
    options = dict(analysis["options"])
    if analysis["kind"] == "audit":
        from bayesirt.audit import AuditConfig, run_audit_job
        from bayesirt.data import simulate_dif_benchmark

        data = analysis["data"]
        if data == SIMULATED:
            sim = dict(analysis["simulate"])
            if "families" in sim:
                sim["families"] = tuple(sim["families"])
            data, _ = simulate_dif_benchmark(**sim)
        workers = options.pop("workers", 1)
        return run_audit_job(data, analysis["out"], config=AuditConfig(**options), workers=workers, force=force,
                             progress=progress)
    if analysis["kind"] == "safety":
        from bayesirt.safety.suite import SAFETY_STEPS, run_safety_suite

        steps = options.pop("steps", list(SAFETY_STEPS))
        return run_safety_suite(analysis["data"], analysis["out"], steps=steps, options=options, force=force,
                                progress=progress)
    ci = float(options.pop("ci", DEFAULT_CI))
    return run_fit_job(analysis["data"], analysis["model"], analysis["out"], force=force, ci=ci,
                       progress=progress, **options)


def run_ppc_job(data, model, out, *, force: bool = False, progress: bool = True, ppc_draws: int = 500,
                alpha: float = 0.05, **fit_options) -> Path:
    """Fit ``model`` and run posterior predictive checks; writes posterior.nc (with the
    ``posterior_predictive`` group of replicated test quantities), ppc_items.csv, ppc_models.csv,
    ppc_global.csv, ppc.png and report.md."""
    check_output(out, force=force)
    responses = data if isinstance(data, xr.Dataset) else load(data)
    spec = model if isinstance(model, IRTSpec) else load_spec(model)
    tree = fit(responses, spec, progress=progress, **fit_options)
    result = posterior_predictive_check(tree, draws=ppc_draws, seed=int(fit_options.get("seed", 0)), alpha=alpha)
    tree["posterior_predictive"] = xr.DataTree(result.replicated)
    warnings = diagnose(tree)
    with staged_output(out, force=force) as folder:
        tree.to_netcdf(folder / "posterior.nc", engine="h5netcdf")
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
        simulated.to_netcdf(folder / "prior_predictive.nc", engine="h5netcdf")
        figure = plot_prior(simulated, folder / "prior.png", responses).name
        where = responses.attrs.get("name", "the data") if responses is not None else f"a {design} design"
        lines = [f"# Prior predictive check: {spec.title} on {where}", ""] + prior_section(table, spec.name, draws, figure)
        (folder / "report.md").write_text("\n".join(lines))
    return Path(out)


def _comparison_specs(models, dims, mirt_spec) -> dict:
    if (models is None) == (dims is None):
        raise SpecError("compare needs exactly one of --models (e.g. rasch,2pl,3pl) or --dims (e.g. 1,2,3,4)")
    if models is not None:
        specs = {str(m): load_spec(m) for m in models}
    else:
        base = mirt_spec if isinstance(mirt_spec, MIRTSpec) else load_spec(mirt_spec)
        if not isinstance(base, MIRTSpec):
            raise SpecError(f"--dims needs an exploratory MIRT spec (e.g. mirt); {base.name!r} is not one")
        specs = {f"{d}d": base.with_dimensions(int(d)) for d in dims}
    if len(specs) < 2:
        raise SpecError("a comparison needs at least two specs or dimensions; give two or more")
    return specs


def run_compare_job(data, out, *, models=None, dims=None, mirt_spec="mirt", unit: str = "model", kfold: str = "auto",
                    folds: int = 5, kfold_trigger: float = 0.05, rotation: str | None = None, force: bool = False,
                    progress: bool = True, workers: int | None = None, scheduler: str | None = None,
                    **fit_options) -> Path:
    """Fit several specs (or MIRT dimensions) and compare them by cross-validated elpd.

    ``unit="model"``: leave-one-model-out PSIS-LOO with abilities integrated out; when more than
    ``kfold_trigger`` of the models have Pareto k above ArviZ's threshold for any spec (``kfold=
    "auto"``), or ``kfold="always"``, every spec is scored instead by exact ``folds``-fold
    cross-validation by model on the same folds (paired differences). ``unit="cell"``: PSIS-LOO
    over single responses. Writes ``compare.csv``, ``compare.png``, ``elpd.nc`` (pointwise elpd and
    Pareto k per spec), ``summary.json``, ``report.md`` and, for MIRT, ``loadings_<spec>.csv``.
    """
    from bayesirt.comparison.loo import KFOLD_MODES, UNITS, compare_table, elpd_dataset, kfold_models, loo_cells, loo_models
    from bayesirt.models.mirt import loading_table
    from bayesirt.report.compare import comparison_report, plot_comparison

    check_output(out, force=force)
    if unit not in UNITS or kfold not in KFOLD_MODES:
        raise SpecError(f"unit must be one of {list(UNITS)} and kfold one of {list(KFOLD_MODES)}; "
                        f"got unit={unit!r}, kfold={kfold!r}")
    if not 0 <= kfold_trigger <= 1:
        raise SpecError(f"kfold_trigger is a fraction of models in [0, 1]; got {kfold_trigger!r}")
    specs = _comparison_specs(models, dims, mirt_spec)
    responses = data if isinstance(data, xr.Dataset) else load(data)
    seed = int(fit_options.get("seed", 0))
    trees, results, notes = {}, {}, []
    for label, spec in specs.items():
        trees[label] = fit(responses, spec, progress=progress, **fit_options)
        results[label] = (loo_models if unit == "model" else loo_cells)(trees[label], progress=progress)
        bad = int((results[label].pareto_k > results[label].good_k).sum())
        notes.append(f"{label}: {bad} of {results[label].n_data_points} {unit}s with Pareto k > "
                     f"{results[label].good_k:.2f}")
    flagged = {lab: float((r.pareto_k > r.good_k).mean()) for lab, r in results.items()}
    if unit == "model" and (kfold == "always" or (kfold == "auto" and max(flagged.values()) > kfold_trigger)):
        why = "on request" if kfold == "always" else (f"because Pareto k flagged more than {kfold_trigger:.0%} of "
                                                     f"the models (worst: {max(flagged.values()):.0%})")
        notes.append(f"elpd from exact {folds}-fold cross-validation by model {why}; same folds for every spec")
        results = {lab: kfold_models(responses, specs[lab], folds=folds, seed=seed, full_fit=trees[lab],
                                     workers=workers, scheduler=scheduler, progress=progress, **fit_options)
                   for lab in specs}
    table = compare_table(results)
    with staged_output(out, force=force) as folder:
        table.to_csv(folder / "compare.csv")
        pointwise = elpd_dataset(results)
        pointwise.to_netcdf(folder / "elpd.nc", engine="h5netcdf")
        figure = plot_comparison(table, folder / "compare.png", unit=unit).name
        loadings = {}
        for label, spec in specs.items():
            if spec.kind == "mirt":
                loadings[label] = f"loadings_{label}.csv"
                loading_table(trees[label], rotation=rotation).to_csv(folder / loadings[label], index=False)
        settings = {"unit": unit, "kfold": kfold, "folds": folds, "kfold_trigger": kfold_trigger,
                    "rotation": rotation, **fit_options}
        summary = {"data": responses.attrs.get("name", ""), "specs": {lab: s.name for lab, s in specs.items()},
                   "table": json.loads(table.reset_index().to_json(orient="records")), "notes": notes,
                   "settings": settings,
                   "timings": {lab: json.loads(t.attrs["bayesirt_timings"]) for lab, t in trees.items()}}
        (folder / "summary.json").write_text(json.dumps(summary, indent=2))
        (folder / "report.md").write_text(comparison_report(
            table, data_name=responses.attrs.get("name", "responses"), unit=unit, settings=settings, notes=notes,
            figure=figure, loadings=loadings))
    return Path(out)
