"""The item-level MIRT job of SAFE App. C (``bayesirt mirt-mml``): the exploratory D-dimensional
2PL fitted by marginal ML for each D, compared by cross-validated held-out likelihood and BIC,
with its loadings aggregated by benchmark, in one output folder."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import xarray as xr

from bayesirt.data import load
from bayesirt.errors import recorded_warnings
from bayesirt.frequentist.mml_mirt import PRUNE, fit_mml_mirt
from bayesirt.frequentist.mml_mirt_select import check_dim_list, heldout_mirt, loadings_by_benchmark, rotated_loadings
from bayesirt.utils.outputs import check_output, staged_output, write_netcdf

__all__ = ["run_mirt_mml_job"]

_TABLE_COLUMNS = ["n_dims", "heldout_loglik", "heldout_per_model", "heldout_gain", "heldout_gain_se", "loglik",
                  "n_parameters", "aic", "bic", "iterations", "converged", "folds_converged"]


def _fit_all(responses, dims, folds, seed, rotation, progress, fit_options):
    """Full-data fits, the held-out table and the loadings by benchmark (one call, so that
    :func:`~bayesirt.errors.recorded_warnings` collects the warnings of all of them)."""
    fits = {d: fit_mml_mirt(responses, d, seed=seed, **fit_options) for d in dims}
    table = heldout_mirt(responses, dims, folds, seed=seed, full_fits=fits, progress=progress, **fit_options)
    loadings = pd.concat([loadings_by_benchmark(fits[d], rotation=rotation).assign(n_dims=d) for d in dims],
                         ignore_index=True)
    return fits, table, loadings[["n_dims", "item_group", "factor", "n_items", "mean_loading", "sd_loading",
                                  "mean_abs_loading"]]


def _tree(fits: dict, table: xr.Dataset, rotation: str) -> xr.DataTree:
    """``/``: the D table with per-model held-out scores; ``/D<d>``: each full fit with its rotated loadings."""
    nodes = {"/": table}
    for d, fit in fits.items():
        rotated = rotated_loadings(fit, rotation)
        ds = fit.to_dataset().drop_vars([c for c in ("family", "owner", "model_id") if c in fit.abilities.coords])
        ds["rotated_loading"] = rotated["loading"]
        ds["phi"] = rotated["phi"]
        ds.attrs["rotation"] = rotation
        nodes[f"D{d}"] = ds
    return xr.DataTree.from_dict(nodes)


def _report(responses, frame: pd.DataFrame, loadings: pd.DataFrame, table: xr.Dataset, rotation: str,
            messages: list[str]) -> str:
    from bayesirt.report.markdown import markdown_table

    y = responses["responses"].values
    best_cv = int(frame.loc[frame["heldout_loglik"].idxmax(), "n_dims"])
    best_bic = int(frame.loc[frame["bic"].idxmin(), "n_dims"])
    shown = frame.assign(converged=frame["converged"].map({True: "yes", False: "no"}))
    lines = [f"# Item-level MIRT by marginal ML on {responses.attrs.get('name', 'responses')}", "",
             f"{y.shape[0]:,} items x {y.shape[1]:,} models; {(y < 0).mean():.1%} missing cells.", "",
             "Exploratory compensatory 2PL, P(y = 1) = sigmoid(a . theta + d), theta ~ N(0, I_D), fitted by "
             "Bock-Aitkin EM on a pruned Gauss-Hermite product grid with echelon identification (SAFE App. C). "
             f"Grid: {table.attrs['quadrature']}; pruning keeps nodes with weight >= {table.attrs['prune']:g} x the "
             f"largest. Loading prior: {table.attrs['loading_prior_sd']} (SD of N(0, sd^2); 'none' = ML).", "",
             "## Dimensionality", "",
             f"{table.attrs['folds']}-fold cross-validation over models (seed {table.attrs['seed']}): item parameters "
             "calibrated on the other folds, each held-out model scored by the marginal likelihood of its whole "
             "response pattern (no per-model parameter refitted). `heldout_gain` is the change from the previous D, "
             "`heldout_gain_se` its paired standard error. BIC uses n = number of models.", "",
             markdown_table(shown), "",
             f"Held-out log-likelihood is highest at D = {best_cv}; BIC is lowest at D = {best_bic}. In-sample AIC "
             "only measures fit plus a penalty, so with many parameters per model the out-of-sample criterion is "
             "the one to read.", "",
             f"## Loadings by benchmark ({rotation} rotation of standardized loadings)", "",
             "Mean standardized loading (a / 1.702) / sqrt(1 + |a / 1.702|^2) of each item group's items on each "
             "factor, after rotation; factors reflected to positive loading sums.", ""]
    for d, part in loadings.groupby("n_dims"):
        wide = part.pivot(index="item_group", columns="factor", values="mean_loading")
        wide.columns = [f"F{c}" for c in wide.columns]
        n_items = part.groupby("item_group")["n_items"].first()
        lines += [f"### D = {d}", "", markdown_table(wide.assign(n_items=n_items).reset_index()), ""]
    if messages:
        lines += ["## Warnings", "", *[f"- {m}" for m in messages], ""]
    return "\n".join(lines)


#: SD of SAFE App. C's N(0, 1.5^2) prior on every loading: the job's default.
SAFE_LOADING_PRIOR = 1.5


def run_mirt_mml_job(data, out, *, dims=(1, 2, 3, 4), folds: int = 5, force: bool = False, seed: int = 0,
                     quadrature: int | None = None, prune: float = PRUNE, max_iter: int = 500, tol: float = 1e-4,
                     loading_prior: float | None = SAFE_LOADING_PRIOR, rotation: str = "oblimin", progress: bool = False,
                     threads: int | None = 1) -> Path:
    """Fit the D-dimensional 2PL by MML for each D, choose D by held-out likelihood, and write
    ``mirt_mml.csv`` (one row per D), ``loadings.csv`` (mean rotated loading by item group,
    factor and D), ``mirt_mml.nc`` (the table with per-model held-out scores at the root, each
    full fit with its rotated loadings under ``/D<d>``) and ``report.md`` to ``out``.

    Item groups are the Dataset's ``item_group`` coordinate (the benchmark of each item when
    the data were pooled from several files, see :func:`bayesirt.safety.scopes.pool_benchmarks`).
    ``quadrature`` (nodes per dimension; default by D), ``prune``, ``max_iter``, ``tol``,
    ``loading_prior`` and ``threads`` go to :func:`~bayesirt.frequentist.mml_mirt.fit_mml_mirt`;
    ``loading_prior`` defaults to SAFE App. C's N(0, 1.5^2) (:data:`SAFE_LOADING_PRIOR`), None fits
    by unregularized ML.
    """
    check_output(out, force=force)
    responses = data if isinstance(data, xr.Dataset) else load(data)
    dims = check_dim_list(dims, responses.sizes["item"])
    options = {"quadrature": quadrature, "prune": prune, "max_iter": max_iter, "tol": tol,
               "loading_prior": loading_prior, "threads": threads}
    (fits, table, loadings), messages = recorded_warnings(_fit_all, responses, dims, folds, seed, rotation, progress,
                                                          options)
    messages = list(dict.fromkeys(messages))  # the same warning from several folds is listed once
    frame = table.drop_dims("model").to_dataframe().reset_index()[_TABLE_COLUMNS]
    frame["converged"] = frame["converged"].astype(bool)
    frame["best_heldout"] = frame["heldout_loglik"] == frame["heldout_loglik"].max()
    frame["best_bic"] = frame["bic"] == frame["bic"].min()
    with staged_output(out, force=force) as folder:
        frame.to_csv(folder / "mirt_mml.csv", index=False)
        loadings.to_csv(folder / "loadings.csv", index=False)
        write_netcdf(_tree(fits, table, rotation), folder / "mirt_mml.nc")
        (folder / "report.md").write_text(_report(responses, frame, loadings, table, rotation, messages))
    return Path(out)
