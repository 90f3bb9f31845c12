"""The marginal MAP fit (MAP-EM) in the shape of a posterior fit, for ``bayesirt fit --method map``.

A MAP with standard errors is not a posterior. :func:`map_tree` stores the estimates as a
``posterior`` group of one chain and one draw (so every reader of a fit's DataTree finds the same
variables), next to the groups of ``mml.nc`` (``items`` and ``abilities`` with standard errors,
the EM ``trace``, the ``covariance`` of the item parameters). :func:`map_tables`
builds ``items.csv`` / ``models.csv`` with the columns of
:func:`bayesirt.inference.summaries.item_table` / :func:`~bayesirt.inference.summaries.model_table`
(by calling them on that tree) and then gives the columns whose meaning differs their MAP value
(:data:`MAP_COLUMNS`).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import xarray as xr
from scipy.stats import norm

from bayesirt.data.responses import to_observed_data
from bayesirt.frequentist.mml import MMLResult
from bayesirt.inference.summaries import item_table, model_table
from bayesirt.utils.outputs import package_versions

__all__ = ["MAP_COLUMNS", "map_tree", "map_tables"]

#: What the columns of items.csv / models.csv mean for method "map" (written to summary.json and the report).
MAP_COLUMNS = {
    "<parameter>_mean": "the marginal MAP estimate of the item parameter (MAP-EM, abilities integrated out)",
    "<parameter>_sd": "its standard error (inverse observed information of the log posterior, Louis' identity; "
                      "difficulty by the delta method), not a posterior standard deviation",
    "<parameter>_q<lo>, _q<hi>": "Wald interval: estimate -/+ z * SE with z the normal quantile of the ci level, "
                                 "not a credible interval",
    "theta_mean": "the MAP ability of the model given the MAP item parameters (prior: the spec's theta prior)",
    "theta_sd": "the standard error of the MAP ability (inverse observed information at the mode), items held fixed",
    "theta_q<lo>, theta_q<hi>": "Wald interval of the MAP ability (estimate -/+ z * SE)",
    "rank_mean": "the model's rank by MAP ability (1 = highest); a point rank, not a posterior mean",
    "rank_q<lo>, rank_q<hi>": "empty (NaN): a rank interval needs posterior draws",
    "prob_ahead_of_next": "normal approximation Phi((theta_row - theta_next) / sqrt(SE_row^2 + SE_next^2)), treating "
                          "the two MAP abilities as independent normals with their SEs and the items as known; "
                          "not a posterior probability",
    "information": "Fisher information at the MAP item parameters averaged over the models' MAP abilities",
}
_VERSIONED = ("bayesirt", "numpy", "scipy", "xarray", "pandas")


def map_tree(result: MMLResult, responses: xr.Dataset, *, settings: dict, timings: dict) -> xr.DataTree:
    """The DataTree of ``map.nc``: the groups of a sampled fit's ``posterior.nc`` where they exist
    and those of ``mml.nc`` (so the readers of either work):

    - ``posterior``: one chain and one draw holding the point estimates: ``theta`` = MAP
      abilities, ``discrimination`` (per item, or a scalar for a common or fixed slope),
      ``intercept`` and ``guessing`` / ``slip`` when the spec has them; ``observed_data`` and
      ``constant_data`` as in a sampled fit;
    - ``items`` (estimates and ``*_se``), ``abilities`` (``eap``, ``eap_sd``, ``map``,
      ``map_se``), ``trace`` and ``covariance``: as in ``mml.nc``.

    Attributes: those of ``mml.nc``, a sampled fit's ``bayesirt_settings``, ``bayesirt_timings``,
    ``bayesirt_versions``, and ``bayesirt_estimates`` saying that the posterior holds estimates."""
    items, abil, spec = result.items, result.abilities, result.spec
    names = ["discrimination", "intercept"] + [n for n, has in (("guessing", spec.has_guessing),
                                                                ("slip", spec.has_slip)) if has]
    point = {"theta": (("model",), abil["map"].values)}
    for name in names:
        common = name == "discrimination" and spec.discrimination_structure != "item"
        point[name] = ((), items[name].values[0]) if common else (("item",), items[name].values)
    coords = {"item": responses["item"].values, "model": responses["model"].values}
    posterior = xr.Dataset({k: (("chain", "draw", *dims), np.reshape(v, (1, 1, *np.shape(v))))
                            for k, (dims, v) in point.items()}, coords={"chain": [0], "draw": [0], **coords})
    posterior.attrs = {"estimates": "marginal MAP point estimates stored as one draw; not posterior draws"}
    observed, constant = to_observed_data(responses)
    mml = result.to_datatree()
    groups = {"posterior": posterior, "observed_data": observed, "constant_data": constant,
              **{name: mml[name].to_dataset() for name in mml.children}}
    tree = xr.DataTree.from_dict(groups)
    tree.attrs = {**mml.attrs, "bayesirt_spec_name": spec.name, "bayesirt_spec_kind": spec.kind,
                  "bayesirt_settings": json.dumps(settings), "bayesirt_timings": json.dumps(timings),
                  "bayesirt_versions": json.dumps(package_versions(_VERSIONED)),
                  "bayesirt_data_name": str(responses.attrs.get("name", "")),
                  "bayesirt_estimates": "posterior holds the marginal MAP estimates as one draw (not a posterior); "
                                        "items and abilities hold them with their standard errors"}
    return tree


def _wald(frame: pd.DataFrame, prefix: str, se: np.ndarray, ci: float) -> None:
    lo_col, hi_col = [c for c in frame.columns if c.startswith(f"{prefix}_q")][:2]
    z = norm.ppf((1 + ci) / 2)
    est = frame[f"{prefix}_mean"].to_numpy()
    frame[f"{prefix}_sd"] = se
    frame[lo_col], frame[hi_col] = est - z * se, est + z * se


def map_tables(tree: xr.DataTree, *, ci: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``items.csv`` and ``models.csv`` of a :func:`map_tree`: the columns, order and sorting of
    the posterior tables, with the MAP meanings of :data:`MAP_COLUMNS` (SEs, Wald intervals, a
    point rank, empty rank intervals, a normal-approximation ``prob_ahead_of_next``)."""
    items, models = item_table(tree, ci=ci), model_table(tree, ci=ci)
    se = tree["items"].to_dataset().sel(item=items["item_id"].to_numpy())
    for name in ("discrimination", "difficulty", "intercept", "guessing", "slip"):
        if f"{name}_mean" in items:  # difficulty's SE by the delta method, with the a-d covariance
            _wald(items, name, se[f"{name}_se"].values, ci)
    theta_se = tree["abilities"]["map_se"].to_series().reindex(models["model_id"].to_numpy()).to_numpy()
    _wald(models, "theta", theta_se, ci)
    for col in [c for c in models.columns if c.startswith("rank_q")]:
        models[col] = np.nan
    gap = models["theta_mean"].to_numpy()[:-1] - models["theta_mean"].to_numpy()[1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        ahead = norm.cdf(gap / np.hypot(theta_se[:-1], theta_se[1:]))
    models["prob_ahead_of_next"] = np.append(ahead, np.nan)
    return items, models

