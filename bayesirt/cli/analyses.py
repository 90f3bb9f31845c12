"""Analyses run end to end: the fit job (data -> spec -> fit -> posterior.nc, tables, report,
figures in one output folder; ``method = "map"``: the MAP-EM job of :mod:`bayesirt.frequentist`)
and declared analyses (``analyses/*.toml``)."""

from __future__ import annotations

import inspect
import json
from warnings import warn
from pathlib import Path

import xarray as xr

from bayesirt.data import load
from bayesirt.inference.diagnostics import diagnose, element_diagnostics
from bayesirt.errors import SpecError, did_you_mean
from bayesirt.inference.fitting import fit
from bayesirt.utils.outputs import check_output, staged_output, write_netcdf
from bayesirt.report import fit_report, plot_ability_forest, plot_item_curves
from bayesirt.models.specs import IRTSpec, MIRTSpec, load_spec, parse_toml, toml_text
from bayesirt.inference.summaries import DEFAULT_CI, ahead_matrix, is_sampled, item_table, model_table

__all__ = ["run_fit_job", "load_analysis", "run_analysis", "ANALYSIS_KINDS"]

ANALYSIS_KINDS = ("fit", "audit", "safety")
_OPTIONS = {  # per kind: its option table, and the types of its options
    "fit": ("fit", {
        "method": str, "sampler": str, "draws": int, "tune": int, "chains": int, "seed": int, "thin": int,
        "advi_iterations": int, "advi_tolerance": float, "advi_learning_rate": float, "advi_batch_size": int,
        "log_likelihood": bool, "ci": float, "float32": bool,
    }),
    "audit": ("audit", {
        "owner_cap": int, "min_family_size": int, "alpha": float, "epsilon": float, "controls": int,
        "bootstrap": int, "owner_bootstrap": int, "max_k": int, "population_seed": int, "seed": int, "quick": bool,
        "bayes": bool, "bayes_method": str, "bayes_draws": int, "bayes_prior": str, "sensitivity": bool,
        "adjustment": str, "workers": int, "families": list, "derive_families": bool,
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
    ci: float = DEFAULT_CI, float32: bool = False, progress: bool = True, pairs: str = "adjacent", **fit_options,
) -> Path:
    """Fit ``model`` to ``data`` and write the output folder ``out``.

    Writes ``posterior.nc`` (the DataTree, compressed; draws in single precision with
    ``float32``), ``items.csv``, ``models.csv``, ``summary.json``, ``report.md`` and two PNG
    figures. ``out`` must not exist unless ``force`` is True; the folder appears only when
    everything is written. Returns the output folder.

    ``method="map"`` is not a posterior: it writes what ``bayesirt mml DATA --priors`` writes (see
    :func:`_run_marginal_map`).

    ``pairs="all"`` also writes ``pairs.nc``: P(a ahead of b) for every pair of models
    (:func:`bayesirt.inference.summaries.ahead_matrix`; 1PL-4PL posteriors). models.csv always has
    it for adjacent ranks (``prob_ahead_of_next``).
    """
    check_output(out, force=force)  # before the fit, not after minutes of sampling
    if not 0 < ci < 1:
        raise SpecError(f"'ci' must be a probability between 0 and 1; got {ci!r}")
    if pairs not in ("adjacent", "all"):
        raise SpecError(f"'pairs' must be 'adjacent' or 'all'; got {pairs!r}")
    if pairs == "all" and fit_options.get("method") == "map":
        raise SpecError("--pairs all needs posterior draws; method 'map' has none: use --method advi (or nuts)")
    if fit_options.get("method") == "map":
        return _run_marginal_map(data, model, out, force=force, ci=ci, **fit_options)
    responses = data if isinstance(data, xr.Dataset) else load(data)
    spec = model if isinstance(model, (IRTSpec, MIRTSpec)) else load_spec(model)
    if pairs == "all" and spec.kind == "mirt":
        raise SpecError(f"--pairs all compares one ability per model; spec {spec.name!r} is MIRT: use a 1PL-4PL spec")
    tree = fit(responses, spec, progress=progress, **fit_options)
    stats = element_diagnostics(tree) if is_sampled(tree["posterior"].to_dataset()) else None
    warnings = diagnose(tree, stats)
    if spec.kind == "mirt":
        return _write_mirt_fit(tree, spec, responses, out, warnings, ci=ci, float32=float32, force=force)
    items, models = item_table(tree, ci=ci, stats=stats), model_table(tree, ci=ci, stats=stats)
    with staged_output(out, force=force) as folder:
        write_netcdf(tree, folder / "posterior.nc", float32=float32)
        items.to_csv(folder / "items.csv", index=False)
        models.to_csv(folder / "models.csv", index=False)
        if pairs == "all":
            write_netcdf(ahead_matrix(tree), folder / "pairs.nc")
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


def _run_marginal_map(data, model, out, *, force: bool, ci: float, **fit_options) -> Path:
    """The ``method="map"`` branch of :func:`run_fit_job`: the marginal MAP of the item parameters
    under the spec's priors (MAP-EM, abilities integrated out), abilities as EAP and MAP given the
    items, standard errors from the observed information; the files of ``bayesirt mml DATA
    --priors`` (items.csv, models.csv, mml.nc, summary.json, report.md), with ``"method": "map"``.

    Options of the sampled methods (sampler, draws, tune, chains, seed, advi_*, log_likelihood,
    ci) do not apply: left at their defaults they pass silently; set to anything else they are
    ignored with a warning, listed in summary.json (``ignored_options``) and in the report.
    1PL-4PL specs only: a MIRT spec is refused (no marginal MAP for MIRT here).
    """
    from bayesirt.frequentist.jobs import run_mml_job

    defaults = {name: par.default for name, par in inspect.signature(fit).parameters.items()
                if par.kind is inspect.Parameter.KEYWORD_ONLY}
    unknown = sorted(set(fit_options) - set(defaults))
    if unknown:
        raise TypeError(f"run_fit_job got unexpected fit option(s) {unknown}")
    spec = model if isinstance(model, (IRTSpec, MIRTSpec)) else load_spec(model)
    if spec.kind == "mirt":
        raise SpecError(f"method 'map' is the marginal MAP (MAP-EM) of 1PL-4PL items; spec {spec.name!r} is MIRT, "
                        "which has none here: use --method advi (or nuts)")
    ignored = {k: v for k, v in fit_options.items() if k != "method" and v != defaults[k]}
    if ci != DEFAULT_CI:
        ignored["ci"] = ci
    if ignored:
        listed = ", ".join(f"{k}={v!r}" for k, v in ignored.items())
        warn(f"method 'map' (marginal MAP, MAP-EM) ignores {listed} (options of the sampled methods)",
             UserWarning, stacklevel=3)
    responses = data if isinstance(data, xr.Dataset) else load(data)
    return run_mml_job(responses, spec, out, force=force, priors=True, ignored_options=ignored)


def _write_mirt_fit(tree, spec, responses, out, warnings, *, ci, float32, force) -> Path:
    """The MIRT branch of :func:`run_fit_job`: posterior.nc, loadings/abilities (and factor
    correlation) tables with intervals, summary.json and report.md."""
    from bayesirt.report.mirt import mirt_report, mirt_tables

    tables = mirt_tables(tree, ci=ci)
    with staged_output(out, force=force) as folder:
        write_netcdf(tree, folder / "posterior.nc", float32=float32)
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
    raw = parse_toml(toml_text(path), where=str(path))
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
        first = sorted(unknown)[0]
        raise SpecError(f"{path}: unknown table(s) {sorted(unknown)}{did_you_mean(first, tables)}; "
                        f"allowed: {sorted(tables)}")
    options, simulate = raw.get(table, {}), raw.get("simulate", {})
    for name, value in ((table, options), ("simulate", simulate)):
        if not isinstance(value, dict):
            raise SpecError(f"{path}: {name!r} must be a table ([{name}] with its options); got {value!r}")
    _check_types(path, table, options, allowed)
    _check_types(path, "simulate", simulate, _SIMULATE)
    if kind == "audit" and (head["data"] == SIMULATED) != bool(simulate):
        raise SpecError(f"{path}: generated data need data = {SIMULATED!r} together with a [simulate] table")
    if kind == "safety":
        from bayesirt.safety.suite import SAFETY_STEPS, check_step_options

        check_step_options(options.get("steps", list(SAFETY_STEPS)),
                           {k: v for k, v in options.items() if k != "steps"}, where=str(path))
    return {"path": path, **head, "options": options, "simulate": simulate}


def _check_types(path: Path, table: str, options: dict, allowed: dict) -> None:
    for key, value in options.items():
        if key not in allowed:
            raise SpecError(f"{path}: [{table}] unknown option {key!r}{did_you_mean(key, allowed)}; "
                            f"allowed: {sorted(allowed)}")
        want = allowed[key]
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            if not (want is float and isinstance(value, int) and not isinstance(value, bool)):
                raise SpecError(f"{path}: [{table}] {key!r} must be of type {want.__name__}; got {value!r}")


def run_analysis(path: str | Path, *, force: bool = False, resume: bool = False, progress: bool = True) -> Path:
    """Run a declared analysis end to end; returns its output folder.

    ``resume``: a safety analysis reruns only its missing and failed steps, with the settings its
    summary.json recorded (:func:`~bayesirt.safety.suite.run_safety_suite`); a fit or audit is
    written whole or not at all, so an existing output folder is returned as it is and a missing
    one is computed."""
    analysis = load_analysis(path)
    options = dict(analysis["options"])
    if resume and analysis["kind"] != "safety" and Path(analysis["out"]).is_dir():
        return Path(analysis["out"])
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
        derive_families = options.pop("derive_families", False)  # families: AuditConfig keeps them as a tuple
        return run_audit_job(data, analysis["out"], config=AuditConfig(**options), derive_families=derive_families,
                             workers=workers, force=force, progress=progress)
    if analysis["kind"] == "safety":
        from bayesirt.safety.suite import SAFETY_STEPS, run_safety_suite

        steps = options.pop("steps", list(SAFETY_STEPS))
        return run_safety_suite(analysis["data"], analysis["out"], steps=steps, options=options, force=force,
                                resume=resume, progress=progress)
    ci = float(options.pop("ci", DEFAULT_CI))
    return run_fit_job(analysis["data"], analysis["model"], analysis["out"], force=force, ci=ci,
                       progress=progress, **options)
