"""The model-comparison job (``bayesirt compare``): several specs or MIRT dimensions fitted and
compared by cross-validated elpd, in one output folder."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bayesirt import __version__
from bayesirt.comparison.settings import DEFAULT_WEIGHTS, KFOLD_MODES, NUTS_MAX_CELLS, UNITS, WEIGHTS
from bayesirt.data.settings import DATA_HELP
from bayesirt.errors import ConfigError
from bayesirt.inference.fitting import fit
from bayesirt.models.specs import MIRTSpec, load_spec
from bayesirt.utils.options import comma_ints, comma_list, declare, option, options_of
from bayesirt.utils.progress import format_duration
from bayesirt.utils.outputs import KeptUnits, check_output, staged_output, write_json, write_netcdf

if TYPE_CHECKING:  # annotations only
    import xarray as xr

__all__ = ["run_compare_job", "choose_method"]


#: Settings of ``fit`` that apply to one family of methods only (the others are listed for all).
_NUTS_ONLY = ("sampler", "tune", "chains", "cores", "thin")
_ADVI_ONLY = ("advi_iterations", "advi_tolerance", "advi_learning_rate", "advi_batch_size")


def _stage(message: str, enabled: bool) -> None:
    """One line per stage on stderr (kept in a log when output is not a terminal)."""
    if enabled:
        print(f"compare: {message}", file=sys.stderr, flush=True)


def _fit_settings(fit_options: dict) -> dict:
    """The fit settings that applied, given or default, for the method used only (NUTS's sampler,
    tuning and chains are not ADVI's, nor ADVI's iterations NUTS's)."""
    used = {name: opt.default for name, opt in options_of(fit).items()} | fit_options
    drop = (_ADVI_ONLY if used["method"] == "nuts" else _NUTS_ONLY) + ("log_likelihood",)
    return {k: ("not set (fit's default)" if v is None else v) for k, v in used.items() if k not in drop}


def _fingerprint(responses: xr.Dataset, specs: dict, settings: dict) -> str:
    """Digest of what a spec's result depends on: the responses and their labels, the specs' texts,
    the settings and bayesirt's version (results kept by an interrupted run are reused only when equal)."""
    digest = hashlib.sha256(__version__.encode())
    digest.update(responses["responses"].values.tobytes())
    for name in ("item", "model"):
        digest.update("\0".join(map(str, responses[name].values)).encode())
    digest.update(json.dumps({label: spec.text for label, spec in specs.items()}, sort_keys=True).encode())
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def choose_method(responses: xr.Dataset, specs: dict, requested: str | None, nuts_max_cells: int) -> tuple[str, str]:
    """The fit method of a comparison and the sentence saying why: the one requested, else NUTS up
    to ``nuts_max_cells`` observed responses, else Laplace when every spec allows it (a 2PL with
    fixed priors, :func:`bayesirt.inference.laplace.laplace_prior`), else ADVI."""
    if requested is not None:
        return requested, f"{requested}, as requested (--method)"
    from bayesirt.data.responses import MISSING  # import time: the parser imports this module
    from bayesirt.inference.laplace import MAX_MODELS, laplace_prior  # import time, as above

    cells = int((responses["responses"].values != MISSING).sum())
    if cells <= nuts_max_cells:
        return "nuts", f"nuts: {cells:,} observed responses, within --nuts-max-cells {nuts_max_cells:,}"
    above = (f"{cells:,} observed responses exceed --nuts-max-cells {nuts_max_cells:,}, above which NUTS on every "
             "spec (and on any K-fold refits) is too slow for a default run")
    refused = []
    for label, spec in specs.items():
        try:
            laplace_prior(spec)
        except ConfigError:
            refused.append(label)
    if not refused and responses.sizes["model"] <= MAX_MODELS:
        return "laplace", f"laplace: {above}, and every spec is a 2PL with fixed priors, which Laplace approximates"
    why_not = (f"Laplace approximates only a 2PL with fixed priors, not {', '.join(refused)}" if refused else
               f"Laplace holds at most {MAX_MODELS:,} models")
    return "advi", f"advi: {above}; {why_not}; give --method nuts to sample anyway"


def _comparison_specs(specs, dims, mirt_spec) -> dict:
    if (specs is None) == (dims is None):
        raise ConfigError("compare needs exactly one of --specs (e.g. rasch,2pl,3pl) or --dims (e.g. 1,2,3,4)")
    if specs is not None:
        specs = {str(m): load_spec(m) for m in specs}
    else:
        base = mirt_spec if isinstance(mirt_spec, MIRTSpec) else load_spec(mirt_spec)
        if not isinstance(base, MIRTSpec):
            raise ConfigError(f"--dims needs an exploratory MIRT spec (e.g. mirt); {base.name!r} is not one")
        specs = {f"{d}d": base.with_dimensions(int(d)) for d in dims}
    if len(specs) < 2:
        raise ConfigError("a comparison needs at least two specs or dimensions; give two or more")
    return specs


@declare(forward=fit, positional={"data": DATA_HELP})
def run_compare_job(data, out, *,
                    specs=option(None, "comma-separated specs, e.g. rasch,2pl,3pl,4pl (or --dims)", type=tuple,
                                 parse=comma_list),
                    dims=option(None, "comma-separated MIRT dimensions, e.g. 1,2,3,4 (or --specs)", type=tuple,
                                parse=comma_ints, low=1),
                    mirt_spec=option("mirt", "exploratory MIRT spec varied by --dims"),
                    unit: str = option("model", "unit of prediction: a whole model's responses (ability integrated "
                                                "out) or one response", choices=UNITS),
                    kfold: str = option("auto", "exact K-fold by model: when Pareto k flags more than --kfold-trigger "
                                                "of the models, always, or never", choices=KFOLD_MODES),
                    folds: int = option(5, "folds of the K-fold cross-validation", low=2),
                    kfold_trigger: float = option(0.05, "share of models with high Pareto k that switches to K-fold",
                                                  low=0, high=1),
                    rotation: str | None = option(None, "rotate MIRT loadings in loadings_*.csv", type=str,
                                                  choices=("oblimin", "varimax")),
                    workers: int | None = option(None, "worker processes for K-fold refits; 1 runs them in this process "
                                                       "[one per core]", type=int, low=1),
                    scheduler: str | None = option(None, "address of an existing Dask scheduler (instead of local "
                                                         "workers)", type=str,
                                                   toml="a running scheduler's address belongs to one session"),
                    nuts_max_cells: int = option(NUTS_MAX_CELLS, "without --method, the most observed responses "
                                                 "(models x items) fitted by NUTS; above it Laplace if every spec "
                                                 "allows it, else ADVI (the choice and its reason are reported)",
                                                 low=0),
                    weights: str = option(DEFAULT_WEIGHTS, "model weights of the weight column (both are reported): "
                                                      "stacking (the mixture of specs that predicts held-out units "
                                                      "best) or pseudo-bma+ (Bayesian-bootstrap pseudo-BMA: about the "
                                                      "chance that a spec has the highest elpd)", choices=WEIGHTS),
                    force: bool = False, progress: bool = True, **fit_options) -> Path:
    """Fit several specs (or MIRT dimensions) and compare them by cross-validated elpd.

    ``unit="model"``: leave-one-model-out PSIS-LOO with abilities integrated out; when more than
    ``kfold_trigger`` of the models have Pareto k above ArviZ's threshold for any spec (``kfold=
    "auto"``), or ``kfold="always"``, every spec is scored instead by exact ``folds``-fold
    cross-validation by model on the same folds (paired differences). ``unit="cell"``: PSIS-LOO
    over single responses. Writes ``compare.csv``, ``compare.png``, ``elpd.nc`` (pointwise elpd and
    Pareto k per spec), ``summary.json``, ``report.md`` and, for MIRT, ``loadings_<spec>.csv``.
    Both model weights are reported (``stacking_weight``, ``pseudo_bma_plus_weight``); ``weight``
    repeats the one ``weights`` names.

    Without ``method``, the fit method follows the size (:func:`choose_method`): NUTS up to
    ``nuts_max_cells`` observed responses, above it Laplace when every spec allows it, else ADVI;
    the choice and why are written to the console, ``report.md`` and ``summary.json``.
    """
    check_output(out, force=force)
    specs = _comparison_specs(specs, dims, mirt_spec)
    # import time: loaded when the job runs, not when the command line lists its options
    import xarray as xr
    from bayesirt.comparison.loo import (  # import time, as above
        compare_table, elpd_dataset, kfold_specs,
    )
    from bayesirt.data import load  # import time, as above
    from bayesirt.report.compare import WEIGHT_MEANINGS, comparison_report, plot_comparison  # import time, as above

    responses = data if isinstance(data, xr.Dataset) else load(data)
    seed = int(fit_options.get("seed", 0))
    method, why_method = choose_method(responses, specs, fit_options.get("method"), nuts_max_cells)
    fit_options = {**fit_options, "method": method}
    _stage(f"fit method: {why_method}", progress)
    kept = KeptUnits(out, _fingerprint(responses, specs, {"unit": unit, "rotation": rotation, **fit_options}))
    finished = kept.load()
    if finished:
        _stage(f"continuing an interrupted comparison: {', '.join(finished)} kept from it ({kept.folder})", progress)
    with kept.on_interrupt(len(specs)):
        done = {label: finished.get(label) or _score_spec(responses, label, spec, n, len(specs), unit, rotation,
                                                          kept, progress, fit_options)
                for n, (label, spec) in enumerate(specs.items(), start=1)}
    results = {label: d["result"] for label, d in done.items()}
    fit_seconds = {label: d["fit_seconds"] for label, d in done.items()}
    notes = [f"Fit method: {why_method}.", *(d["note"] for d in done.values())]
    flagged = {lab: float((r.pareto_k > r.good_k).mean()) for lab, r in results.items()}
    if unit == "model" and (kfold == "always" or (kfold == "auto" and max(flagged.values()) > kfold_trigger)):
        why = "on request" if kfold == "always" else (f"because Pareto k flagged more than {kfold_trigger:.0%} of "
                                                     f"the models (worst: {max(flagged.values()):.0%})")
        notes.append(f"elpd from exact {folds}-fold cross-validation by model {why}; same folds for every spec")
        slowest_first = sorted(specs, key=lambda lab: -fit_seconds[lab])
        n_workers = 1 if workers == 1 and scheduler is None else (workers or os.cpu_count() or 1)
        where = "in this process" if n_workers == 1 else f"in {n_workers} parallel workers"
        # a refit costs about its spec's full fit and scoring; they run n_workers at a time
        expected = sum(d["fit_seconds"] + d.get("loo_seconds", 0.0) for d in done.values()) * folds / n_workers
        _stage(f"exact {folds}-fold cross-validation by model {why}: {folds * len(specs)} refits ({len(specs)} specs "
               f"x {folds} folds), {where}; expected about {format_duration(expected)} at the full fits' pace, a "
               "line per finished refit", progress)
        start = time.perf_counter()
        with kept.on_interrupt(len(specs), then=f"the {folds}-fold refits"):
            refits = kfold_specs(responses, {lab: specs[lab] for lab in slowest_first}, folds=folds, seed=seed,
                                 full_lpd={lab: r.elpd + r.p for lab, r in results.items()}, workers=workers,
                                 scheduler=scheduler, progress=progress,
                                 **{k: v for k, v in fit_options.items() if k != "seed"})  # fold k: seed + k
        results = {lab: refits[lab] for lab in specs}
        for n, (label, result) in enumerate(results.items(), start=1):
            _stage(f"spec {n} of {len(specs)}: {label} - {folds}-fold elpd {result.elpd:,.1f} (SE {result.se:,.1f})",
                   progress)
        _stage(f"{folds}-fold cross-validation took {time.perf_counter() - start:.0f} s", progress)
    table = compare_table(results, weights=weights)
    with staged_output(out, force=force) as folder:
        table.to_csv(folder / "compare.csv")
        pointwise = elpd_dataset(results)
        write_netcdf(pointwise, folder / "elpd.nc")
        figure = plot_comparison(table, folder / "compare.png", unit=unit).name
        loadings = {}
        for label, spec in specs.items():
            if spec.kind == "mirt":
                loadings[label] = f"loadings_{label}.csv"
                done[label]["loadings"].to_csv(folder / loadings[label], index=False)
        settings = {"unit": unit, "kfold": kfold, "folds": folds, "kfold_trigger": kfold_trigger,
                    "rotation": rotation, "nuts_max_cells": nuts_max_cells, "weights": weights,
                    **_fit_settings(fit_options)}
        summary = {"data": responses.attrs.get("name", ""), "specs": {lab: s.name for lab, s in specs.items()},
                   "fit_method": {"method": method, "reason": why_method},
                   "table": json.loads(table.reset_index().to_json(orient="records")),
                   "weights": {"weight": weights, **WEIGHT_MEANINGS}, "notes": notes,
                   "settings": settings,
                   "timings": {lab: d["timings"] for lab, d in done.items()}}
        write_json(folder / "summary.json", summary)
        (folder / "report.md").write_text(comparison_report(
            table, data_name=responses.attrs.get("name", "responses"), unit=unit, settings=settings, notes=notes,
            figure=figure, loadings=loadings, fit_method=method, weights=weights))
    kept.discard()
    _stage(f"wrote {out}", progress)
    return Path(out)


def _score_spec(responses, label, spec, n, n_specs, unit, rotation, kept, progress, fit_options) -> dict:
    """Fit one spec and score it by PSIS-LOO; what the comparison needs of it (``result``,
    ``fit_seconds``, ``timings``, ``note``, MIRT ``loadings``), kept for a rerun (:class:`KeptSpecs`)."""
    # import time: loaded when the job runs, not when the command line lists its options
    from bayesirt.comparison.loo import loo_cells, loo_models
    from bayesirt.data.responses import MISSING  # import time, as above
    from bayesirt.structure.loadings import loading_table  # import time, as above

    head = f"spec {n} of {n_specs}: {label}"
    _stage(f"{head} - fitting ({fit_options.get('method', 'nuts')}) to {responses.sizes['model']:,} models x "
           f"{responses.sizes['item']:,} items", progress)
    start = time.perf_counter()
    tree = fit(responses, spec, progress=progress, **fit_options)
    fit_seconds = time.perf_counter() - start
    _stage(f"{head} - fitted in {fit_seconds:.0f} s; " + (
        f"marginal likelihood of {responses.sizes['model']:,} held-out models" if unit == "model" else
        f"PSIS-LOO over {int((responses['responses'] != MISSING).sum()):,} responses"), progress)
    start = time.perf_counter()
    result = (loo_models if unit == "model" else loo_cells)(tree, progress=progress)
    loo_seconds = time.perf_counter() - start
    bad = int((result.pareto_k > result.good_k).sum())
    _stage(f"{head} - elpd {result.elpd:,.1f} (SE {result.se:,.1f}), {bad} of {result.n_data_points:,} {unit}s with "
           f"Pareto k > {result.good_k:.2f} ({loo_seconds:.0f} s)", progress)
    done = {"result": result, "fit_seconds": fit_seconds, "loo_seconds": loo_seconds, "timings": json.loads(tree.attrs["bayesirt_timings"]),
            "note": f"{label}: {bad} of {result.n_data_points} {unit}s with Pareto k > {result.good_k:.2f}",
            "loadings": loading_table(tree, rotation=rotation) if spec.kind == "mirt" else None}
    kept.keep(label, done)
    return done
