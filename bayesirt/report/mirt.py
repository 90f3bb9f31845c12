"""Tables and report of a MIRT fit (``bayesirt fit --model mirt`` or ``mirt-confirmatory``)."""

from __future__ import annotations

import pandas as pd
import xarray as xr

from bayesirt.structure.loadings import loading_table
from bayesirt.report.markdown import markdown_table

__all__ = ["mirt_tables", "mirt_report"]


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

