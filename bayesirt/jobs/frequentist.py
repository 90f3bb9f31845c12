"""The frequentist reference jobs, each writing one output folder: an MML fit, the PL ladder,
the Bayes-versus-MML agreement check, the split-half regularization check and the item-level MIRT
by marginal ML (SAFE App. C)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from bayesirt.data.settings import DATA_HELP
from bayesirt.errors import recorded_warnings
from bayesirt.frequentist.settings import (DEFAULT_THRESHOLD_SD, MAX_ITER, PRUNE, QUADRATURE, SAFE_LOADING_PRIOR,
                                          THREADS)
from bayesirt.inference.fitting import fit
from bayesirt.models.specs import SPEC_HELP, IRTSpec, load_spec
from bayesirt.utils.options import comma_ints, declare, none_or_float, option
from bayesirt.utils.outputs import check_output, staged_output, to_json, write_json, write_netcdf

if TYPE_CHECKING:  # annotations only
    import pandas as pd
    import xarray as xr

__all__ = ["run_mml_job", "run_ladder_job", "run_check_job", "run_splithalf_job", "run_mirt_mml_job"]


_ESTIMATORS = {False: "marginal maximum likelihood (Bock-Aitkin EM)",
               True: "marginal MAP of the item parameters under the spec's priors (MAP-EM)"}


def _inputs(data, spec=None):
    # import time: loaded when the job runs, not when the command line lists its options
    import xarray as xr
    from bayesirt.data import load  # import time, as above

    responses = data if isinstance(data, xr.Dataset) else load(data)
    spec = None if spec is None else spec if isinstance(spec, IRTSpec) else load_spec(spec)
    return responses, spec


def _informative(responses: xr.Dataset) -> tuple[xr.Dataset, list[str]]:
    """The responses without zero-variance items, and the note naming them (the job's warnings)."""
    # import time: loaded when the job runs, not when the command line lists its options
    from bayesirt.data.responses import drop_constant_items

    return drop_constant_items(responses)


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
    # import time: loaded when the job runs, not when the command line lists its options
    from bayesirt.frequentist import information_criteria

    return {"spec": result.spec.name, "loglik": result.loglik, "log_prior": result.log_prior,
            "objective": result.objective, "n_parameters": result.n_parameters,
            **information_criteria(result.loglik, result.n_parameters, n_models), "n_models": n_models,
            "iterations": result.iterations, "converged": result.converged,
            "priors": bool(result.attrs.get("priors")), "quadrature": result.attrs.get("quadrature")}


def _with_responses(tree, responses):
    """mml.nc with the fitted responses in ``observed_data`` / ``constant_data`` (as ``map.nc``), so a bank
    read from it (``select``, ``score``) has its calibration cohort without ``--calibration``."""
    # import time: loaded when the job runs, not when the command line lists its options
    import xarray as xr
    from bayesirt.data.responses import to_observed_data  # import time, as above

    observed, constant = to_observed_data(responses)
    groups = {name: tree[name].to_dataset() for name in tree.children}
    out = xr.DataTree.from_dict({**groups, "observed_data": observed, "constant_data": constant})
    out.attrs = dict(tree.attrs)
    return out


@declare(positional={"data": DATA_HELP})
def run_mml_job(data, out, *, spec=option("2pl", SPEC_HELP, flag="--model"),
                priors: bool = option(False, "add the spec's item priors (MAP-EM)"),
                se: bool = option(True, "skip standard errors (faster on large item banks)"),
                quadrature: int = QUADRATURE,
                max_iter: int = MAX_ITER,
                force: bool = False) -> Path:
    """Fit ``spec`` by MML (or MAP-EM with ``priors``: the marginal MAP of the items, the
    estimate of ``bayesirt fit --method map``, which writes it in the shape of a sampled fit);
    write items.csv, models.csv, summary.json, mml.nc and report.md to ``out``."""
    check_output(out, force=force)
    responses, spec = _inputs(data, spec)
    # import time: loaded when the job runs, not when the command line lists its options
    from bayesirt.data.reading import reading_record
    from bayesirt.frequentist import fit_mml  # import time, as above
    from bayesirt.report.checks import mml_section  # import time, as above
    from bayesirt.report.markdown import reading_lines  # import time, as above

    result, messages = recorded_warnings(fit_mml, responses, spec, quadrature=quadrature, priors=priors, se=se, max_iter=max_iter)
    items, models = _mml_tables(result)
    summary = ({"data": responses.attrs.get("name", ""), "method": "map" if priors else "mml",
                "estimator": _ESTIMATORS[bool(priors)]}
               | _mml_summary(result, responses.sizes["model"]) | {"warnings": messages}
               | {"reading": reading_record(responses)})
    with staged_output(out, force=force) as folder:
        items.to_csv(folder / "items.csv", index=False)
        models.to_csv(folder / "models.csv", index=False)
        write_json(folder / "summary.json", summary)
        tree = _with_responses(result.to_datatree(), responses)
        tree.attrs["bayesirt_reading"] = to_json(summary["reading"], indent=None)  # how the data were read
        write_netcdf(tree, folder / "mml.nc")
        # the spec's title names its priors ("regularized"), which plain MML does not use
        unpriored = ("no priors on slopes and intercepts; the asymptotes keep their Beta priors"
                     if result.attrs.get("map_asymptotes") else "no item priors")
        title = (f"Marginal MAP (MAP-EM), {spec.title}" if priors else
                 f"Plain MML (maximum marginal likelihood, {unpriored}), spec {spec.name}")
        lines = (_header(title, responses) + reading_lines(responses) + mml_section(result, summary)
                 + _warnings_section(messages))
        (folder / "report.md").write_text("\n".join(lines))
    return Path(out)


@declare(positional={"data": DATA_HELP})
def run_ladder_job(data, out, *, quadrature: int = QUADRATURE,
                   max_iter: int = MAX_ITER, force: bool = False) -> Path:
    """Fit the 1PL-4PL ladder; write ladder.csv, lrt.csv, summary.json and report.md."""
    check_output(out, force=force)
    responses, dropped = _informative(_inputs(data)[0])
    # import time: loaded when the job runs, not when the command line lists its options
    from bayesirt.frequentist import pl_ladder
    from bayesirt.report.checks import ladder_section  # import time, as above

    (table, lrt), messages = recorded_warnings(pl_ladder, responses, quadrature=quadrature, max_iter=max_iter)
    messages = dropped + messages
    with staged_output(out, force=force) as folder:
        table.to_csv(folder / "ladder.csv", index=False)
        lrt.to_csv(folder / "lrt.csv", index=False)
        summary = {"n_models": table.attrs["n"], "note": table.attrs["note"], "warnings": messages,
                   "ladder": table.to_dict("records"), "lrt": lrt.to_dict("records")}
        write_json(folder / "summary.json", summary)
        lines = _header("PL ladder", responses) + ladder_section(table, lrt) + _warnings_section(messages)
        (folder / "report.md").write_text("\n".join(lines))
    return Path(out)


@declare(forward=fit, positional={"data": DATA_HELP})
def run_check_job(data, out, *, spec=option("2pl", SPEC_HELP, flag="--model"),
                  quadrature: int = QUADRATURE,
                  threshold_sd: float = option(DEFAULT_THRESHOLD_SD, "prior-shrinkage flag threshold", low=0, open=True),
                  force: bool = False, progress: bool = True, **fit_options) -> Path:
    """Fit ``spec`` by ``fit`` (NUTS by default) and by ML and MAP-EM, and write the agreement
    report: agreement.csv, agreement_summary.csv, agreement.png, posterior.nc, ml.nc, map.nc,
    summary.json, report.md."""
    check_output(out, force=force)
    responses, spec = _inputs(data, spec)
    tree = fit(responses, spec, progress=progress, **fit_options)
    # import time: loaded when the job runs, not when the command line lists its options
    from bayesirt.frequentist import compare_estimates, fit_mml
    from bayesirt.inference.diagnostics import diagnose  # import time, as above
    from bayesirt.report.checks import agreement_section, plot_agreement  # import time, as above

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
        write_json(folder / "summary.json", summary)
        lines = _header(f"Agreement check, {spec.title}", responses) + agreement_section(agreement, figure)
        (folder / "report.md").write_text("\n".join(lines + _warnings_section(messages)))
    return Path(out)


@declare(positional={"data": DATA_HELP})
def run_splithalf_job(data, out, *, spec=option("2pl", SPEC_HELP, flag="--model"),
                      splits: int = option(10, "random splits of the models", low=1),
                      top: int = option(25, "items selected by half-one discrimination", low=1),
                      seed: int = option(0, "seed of the splits", low=0),
                      quadrature: int = QUADRATURE,
                      force: bool = False, progress: bool = True) -> Path:
    """Split-half retention with and without priors; write splithalf.csv, splithalf.nc,
    splithalf.png, summary.json and report.md."""
    check_output(out, force=force)
    responses, spec = _inputs(data, spec)
    responses, dropped = _informative(responses)
    # import time: loaded when the job runs, not when the command line lists its options
    from bayesirt.frequentist import split_half_retention
    from bayesirt.report.checks import plot_splithalf, splithalf_section  # import time, as above

    ds = split_half_retention(responses, spec, splits=splits, top=top, seed=seed, quadrature=quadrature,
                              progress=progress)
    with staged_output(out, force=force) as folder:
        ds.drop_dims("item").to_dataframe().reset_index().to_csv(folder / "splithalf.csv", index=False)
        write_netcdf(ds, folder / "splithalf.nc")
        figure = plot_splithalf(ds, folder / "splithalf.png").name
        summary = {"attrs": {k: v for k, v in ds.attrs.items()},
                   "mean_retention": ds["retention"].mean("split").to_pandas().to_dict(), "warnings": dropped}
        write_json(folder / "summary.json", summary)
        lines = _header("Split-half check", responses) + splithalf_section(ds, figure) + _warnings_section(dropped)
        (folder / "report.md").write_text("\n".join(lines))
    return Path(out)


@declare(positional={"data": DATA_HELP})
def run_mirt_mml_job(data, out, *,
                     dims=option((1, 2, 3, 4), "dimensions D to fit, each at most 4", parse=comma_ints, low=1),
                     folds: int = option(5, "cross-validation folds over models", low=2),
                     seed: int = option(0, "seed of the folds and of the start values", low=0),
                     quadrature: int | None = option(None, "Gauss-Hermite nodes per dimension [61, 31, 15, 9 for "
                                                           "D = 1..4]", type=int, low=5, high=201),
                     prune: float = option(PRUNE, "drop grid nodes whose prior weight is below this times the "
                                                  "largest", low=0, high=1, open="high"),
                     max_iter: int = MAX_ITER,
                     tol: float = option(1e-4, "EM convergence tolerance (relative change of the log-likelihood)", low=0, open=True),
                     loading_prior: float | None = option(SAFE_LOADING_PRIOR, "SD of the N(0, SD^2) prior on the "
                                                                              "loadings (MAP-EM, SAFE App. C); none: "
                                                                              "unregularized ML", type=float,
                                                          parse=none_or_float, metavar="SD", low=0, open=True),
                     rotation: str = option("oblimin", "rotation of the standardized loadings aggregated by item "
                                                       "group", choices=("oblimin", "varimax", "none")),
                     threads: int | None = THREADS,
                     force: bool = False, progress: bool = False) -> Path:
    """Fit the D-dimensional 2PL by MML for each D, choose D by held-out likelihood, and write
    ``mirt_mml.csv`` (one row per D), ``loadings.csv`` (mean rotated loading by item group,
    factor and D), ``mirt_mml.nc`` (the table with per-model held-out scores at the root, each
    full fit with its rotated loadings under ``/D<d>``) and ``report.md`` to ``out``.

    Item groups are the Dataset's ``item_group`` coordinate (the benchmark of each item when
    the data were pooled from several files, see :func:`bayesirt.safety.scopes.pool_benchmarks`).
    ``quadrature`` (nodes per dimension; default by D), ``prune``, ``max_iter``, ``tol``,
    ``loading_prior`` and ``threads`` go to :func:`~bayesirt.frequentist.mml_mirt.fit_mml_mirt`;
    ``loading_prior`` defaults to SAFE App. C's N(0, 1.5^2) (:data:`~bayesirt.frequentist.mml_mirt.SAFE_LOADING_PRIOR`),
    None fits by unregularized ML.
    """
    check_output(out, force=force)
    # import time: loaded when the job runs, not when the command line lists its options
    import xarray as xr
    from bayesirt.data import load  # import time, as above
    from bayesirt.frequentist.mml_mirt_select import (  # import time, as above
        check_dim_list, dimensions_tree, fit_dimensions,
    )
    from bayesirt.report.mirt import MIRT_MML_COLUMNS, mirt_mml_report  # import time, as above

    responses, dropped = _informative(data if isinstance(data, xr.Dataset) else load(data))
    dims = check_dim_list(dims, responses.sizes["item"])
    options = {"quadrature": quadrature, "prune": prune, "max_iter": max_iter, "tol": tol,
               "loading_prior": loading_prior, "threads": threads}
    (fits, table, loadings), messages = recorded_warnings(fit_dimensions, responses, dims, folds, seed, rotation, progress,
                                                          options)
    messages = dropped + list(dict.fromkeys(messages))  # the same warning from several folds is listed once
    frame = table.drop_dims("model").to_dataframe().reset_index()[MIRT_MML_COLUMNS]
    frame["converged"] = frame["converged"].astype(bool)
    frame["best_heldout"] = frame["heldout_loglik"] == frame["heldout_loglik"].max()
    frame["best_bic"] = frame["bic"] == frame["bic"].min()
    with staged_output(out, force=force) as folder:
        frame.to_csv(folder / "mirt_mml.csv", index=False)
        loadings.to_csv(folder / "loadings.csv", index=False)
        write_netcdf(dimensions_tree(fits, table, rotation), folder / "mirt_mml.nc")
        (folder / "report.md").write_text(mirt_mml_report(responses, frame, loadings, table, rotation, messages))
    return Path(out)
