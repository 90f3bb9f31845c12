"""Tables and report of a MIRT fit (``bayesirt fit --model mirt`` or ``mirt-confirmatory``)."""

from __future__ import annotations

import pandas as pd
import xarray as xr

from bayesirt.report.markdown import markdown_table
from bayesirt.structure.loadings import loading_table

__all__ = ["mirt_mml_report", "MIRT_MML_COLUMNS", "mirt_tables", "mirt_report"]


def _interval(draws: xr.DataArray, ci: float) -> xr.Dataset:
    tail = (1 - ci) / 2
    return xr.Dataset({"mean": draws.mean(("chain", "draw")), "sd": draws.std(("chain", "draw")),
                       "lower": draws.quantile(tail, ("chain", "draw")).drop_vars("quantile"),
                       "upper": draws.quantile(1 - tail, ("chain", "draw")).drop_vars("quantile")})


def mirt_tables(tree: xr.DataTree, *, ci: float, rotation: str | None = None) -> dict[str, pd.DataFrame]:
    """``loadings`` (item x dim), ``abilities`` (model x dim) and, for correlated factors,
    ``factor_correlations`` (each pair once), each with mean, sd and the equal-tailed ``ci`` interval."""
    post = tree["posterior"].to_dataset()
    tables = {"loadings": loading_table(tree, rotation=rotation, ci=ci)}
    theta = _interval(post["theta"], ci)
    tables["abilities"] = theta.drop_vars([c for c in theta.coords if c not in ("model", "dim")]).to_dataframe().reset_index()
    if "factor_correlation" in post:
        corr = _interval(post["factor_correlation"], ci).to_dataframe().reset_index()
        dims = list(post["dim"].values)
        keep = [dims.index(a) < dims.index(b) for a, b in zip(corr["dim"], corr["dim_bis"])]
        tables["factor_correlations"] = corr[keep].reset_index(drop=True)
    return tables


def mirt_report(tree: xr.DataTree, tables: dict[str, pd.DataFrame], *, title: str, data_name: str, ci: float,
                warnings: list[str]) -> str:
    """Markdown report: design, factor correlations with intervals, strongest loadings per dimension."""
    post = tree["posterior"]
    lines = [f"# {title} on {data_name}", "",
             f"{post.sizes['item']} items x {post.sizes['model']} models, {post.sizes['dim']} dimensions; "
             f"{100 * ci:g}% equal-tailed intervals.", ""]
    if "bayesirt_anchor_items" in tree.attrs:
        lines += [f"Echelon anchor items (rotation and sign identification): {tree.attrs['bayesirt_anchor_items']}", ""]
    if "factor_correlations" in tables:
        lines += ["## Factor correlations", "", markdown_table(tables["factor_correlations"].round(3)), ""]
    loadings = tables["loadings"]
    lines += ["## Strongest loadings per dimension", ""]
    for dim, part in loadings.groupby("dim", sort=False):
        top = part.reindex(part["mean"].abs().sort_values(ascending=False).index).head(5)
        lines += [f"**{dim}**", "", markdown_table(top.round(3)), ""]
    if warnings:
        lines += ["## Sampler diagnostics", "", *[f"- {w}" for w in warnings], ""]
    lines += ["Files: `posterior.nc`, `loadings.csv`, `abilities.csv`"
              + (", `factor_correlations.csv`" if "factor_correlations" in tables else "") + "."]
    return "\n".join(lines) + "\n"


MIRT_MML_COLUMNS = ["n_dims", "heldout_loglik", "heldout_per_model", "heldout_gain", "heldout_gain_se", "loglik",
                  "n_parameters", "aic", "bic", "iterations", "converged", "folds_converged"]


def mirt_mml_report(responses, frame: pd.DataFrame, loadings: pd.DataFrame, table: xr.Dataset, rotation: str,
            messages: list[str]) -> str:

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
