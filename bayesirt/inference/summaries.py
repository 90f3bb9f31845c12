"""Posterior summaries of a fitted logistic spec as tables: one row per item, one row per model."""

from __future__ import annotations

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr
from scipy.stats import rankdata

from bayesirt.data.responses import METADATA, MISSING, from_observed_data
from bayesirt.errors import DataError
from bayesirt.inference.methods import DEFAULT_CI
from bayesirt.models.information import mean_item_information
from bayesirt.models.logistic import ITEM_PARAMETERS, with_difficulty

__all__ = ["item_table", "model_table", "posterior_ranks", "ahead_matrix", "is_sampled", "DEFAULT_CI"]

_SAMPLE = ("chain", "draw")
#: Cells of the observed responses counted at once by :func:`_margins` (a few MB of masks).
_MARGIN_CELLS = 4_000_000


def _interval_columns(ci: float) -> tuple[str, str, float, float]:
    lo, hi = (1.0 - ci) / 2.0, (1.0 + ci) / 2.0
    return f"q{100 * lo:g}", f"q{100 * hi:g}", lo, hi


def _describe(da: xr.DataArray, ci: float, *, with_diagnostics: bool, stats=None) -> dict[str, np.ndarray]:
    lo_name, hi_name, lo, hi = _interval_columns(ci)
    out = {
        "mean": da.mean(_SAMPLE).values,
        "sd": da.std(_SAMPLE, ddof=1).values if da.sizes["chain"] * da.sizes["draw"] > 1 else np.full(da.shape[2:], np.nan),
        lo_name: da.quantile(lo, _SAMPLE).values,
        hi_name: da.quantile(hi, _SAMPLE).values,
    }
    if with_diagnostics and stats is not None:
        out["r_hat"], out["ess_bulk"] = stats["r_hat"][da.name].values, stats["ess_bulk"][da.name].values
    elif with_diagnostics:
        ds = da.to_dataset(name="x")
        out["r_hat"] = az.rhat(ds)["x"].values
        out["ess_bulk"] = az.ess(ds, method="bulk")["x"].values
    return out


def _margins(tree: xr.DataTree) -> dict[str, np.ndarray]:
    """Observed and correct responses per item and per model (``item_n``, ``item_correct``,
    ``model_n``, ``model_correct``) and the metadata (``item_group``, ``family``, ``owner``) of a
    fit, counted from its observed_data a block of items at a time: no copy of the whole matrix
    (:func:`from_observed_data` makes several, about 20 bytes a cell). A fit without the metadata
    in constant_data (an earlier version's file) is read through :func:`from_observed_data`."""
    constant = tree["constant_data"].to_dataset() if "constant_data" in tree.children else xr.Dataset()
    if "observed_data" in tree.children and set(METADATA) <= set(constant):
        y, meta = tree["observed_data"]["responses"].transpose("item", "model"), constant
    else:
        meta = from_observed_data(tree)
        y = meta["responses"]
    out = {name: meta[name].values for name in METADATA}
    counts = {k: np.zeros(y.sizes[dim], dtype=np.int64) for k, dim in
              (("item_n", "item"), ("item_correct", "item"), ("model_n", "model"), ("model_correct", "model"))}
    step = max(1, _MARGIN_CELLS // max(1, y.sizes["model"]))
    for start in range(0, y.sizes["item"], step):
        block = y[start:start + step].values
        observed = ~np.isnan(block) if block.dtype.kind == "f" else block != MISSING  # NaN, or -1 in int8 files
        correct = block == 1
        counts["item_n"][start:start + step] = observed.sum(axis=1)
        counts["item_correct"][start:start + step] = correct.sum(axis=1)
        counts["model_n"] += observed.sum(axis=0)
        counts["model_correct"] += correct.sum(axis=0)
    return out | counts


def is_sampled(posterior: xr.Dataset) -> bool:
    """Whether R-hat and ESS mean anything: several chains of several draws."""
    return posterior.sizes["chain"] > 1 and posterior.sizes["draw"] >= 4


def item_table(tree: xr.DataTree, *, ci: float = DEFAULT_CI, stats: dict | None = None) -> pd.DataFrame:
    """One row per item: mean, sd, equal-tailed ``ci`` interval (and R-hat, bulk ESS when sampled
    with several chains) of every item parameter in both forms (a, b) and (a, d), plus observed
    proportion correct and the posterior-mean Fisher information averaged over the fitted models.

    A common (1PL) or fixed slope is repeated on every row. ``stats``:
    :func:`bayesirt.inference.diagnostics.element_diagnostics` of ``tree``, when already computed.
    """
    post = with_difficulty(tree["posterior"].to_dataset())
    margins = _margins(tree)
    diag = is_sampled(post)
    n_items = post.sizes["item"]
    frame = {"item_id": post["item"].values, "item_group": margins["item_group"]}
    for name in ITEM_PARAMETERS:
        if name not in post:
            continue
        described = _describe(post[name], ci, with_diagnostics=diag, stats=stats)
        for key, values in described.items():
            frame[f"{name}_{key}"] = np.broadcast_to(values, (n_items,))
    frame["n_observed"] = margins["item_n"]
    frame["proportion_correct"] = margins["item_correct"] / margins["item_n"]
    frame["information"] = _mean_information(post)
    return pd.DataFrame(frame)


def _mean_information(post: xr.Dataset) -> np.ndarray:
    """Posterior mean of each item's information averaged over the fitted models' abilities, from
    <= ~200 evenly thinned draws (:func:`~bayesirt.models.information.mean_item_information`: no
    draws x items x models array)."""
    n_samples = post.sizes["chain"] * post.sizes["draw"]
    keep = slice(None, None, max(1, n_samples // 200))

    def draws(name, default):  # (sample, model) or (sample, item); (sample, 1) for a common slope
        return post[name].transpose(*_SAMPLE, ...).values.reshape(n_samples, -1)[keep] if name in post else default

    return mean_item_information(draws("theta", 0.0), draws("discrimination", 1.0), draws("intercept", 0.0),
                                 draws("guessing", 0.0), draws("slip", 0.0))


def posterior_ranks(theta: xr.DataArray) -> xr.DataArray:
    """Rank of each model's ability in every draw (1 = highest ability)."""
    return xr.apply_ufunc(
        lambda x: rankdata(-x, axis=-1, method="min").astype(int), theta,
        input_core_dims=[["model"]], output_core_dims=[["model"]],
    )


def model_table(tree: xr.DataTree, *, ci: float = DEFAULT_CI, stats: dict | None = None) -> pd.DataFrame:
    """One row per model: ability (theta) summary, posterior rank (mean and ``ci`` interval;
    1 = best), observed accuracy and count, family and owner; sorted by posterior mean ability.

    ``prob_ahead_of_next``: the posterior probability that the model's ability exceeds that of the
    model on the next row (ranked just below it by posterior mean), i.e. the share of draws with
    theta_row > theta_next (a tie counts as not ahead); NaN on the last row."""
    post = tree["posterior"].to_dataset()
    theta = post["theta"]
    described = _describe(theta, ci, with_diagnostics=is_sampled(post), stats=stats)
    ranks = posterior_ranks(theta)
    lo_name, hi_name, lo, hi = _interval_columns(ci)
    margins = _margins(tree)
    frame = pd.DataFrame({
        "model_id": post["model"].values,
        "family": margins["family"],
        "owner": margins["owner"],
        **{f"theta_{k}": v for k, v in described.items()},
        "rank_mean": ranks.mean(_SAMPLE).values,
        f"rank_{lo_name}": ranks.quantile(lo, _SAMPLE, method="lower").values.astype(int),
        f"rank_{hi_name}": ranks.quantile(hi, _SAMPLE, method="higher").values.astype(int),
        "n_observed": margins["model_n"],
        "accuracy": margins["model_correct"] / margins["model_n"],
    })
    frame = frame.sort_values("theta_mean", ascending=False, kind="stable")
    draws = theta.stack(sample=_SAMPLE).transpose("sample", "model").values[:, frame.index.to_numpy()]
    frame["prob_ahead_of_next"] = np.append((draws[:, :-1] > draws[:, 1:]).mean(axis=0), np.nan)
    return frame.reset_index(drop=True)


_AHEAD_CHUNK = 20_000_000  # draw x model x model comparisons held at once


def ahead_matrix(tree: xr.DataTree) -> xr.Dataset:
    """P(a ahead of b) for every ordered pair of models: ``prob_ahead`` (model, model_other),
    float32, the share of posterior draws with theta_model > theta_model_other (a tie counts as
    not ahead, so ``p[a, b] + p[b, a] = 1`` minus the probability of a tie, which is zero for
    continuous draws). The diagonal is NaN (a model is not compared with itself). Models in the
    posterior's order. 1PL-4PL posteriors (one ability per model)."""
    theta = tree["posterior"]["theta"]
    if set(theta.dims) != {"chain", "draw", "model"}:
        raise DataError(f"ahead_matrix needs one ability per model (dims chain, draw, model); theta has {theta.dims}: "
                         "a MIRT posterior has no single ordering")
    draws = theta.stack(sample=_SAMPLE).transpose("sample", "model").values
    n_draws, n = draws.shape
    out = np.empty((n, n), dtype=np.float32)
    step = max(1, _AHEAD_CHUNK // max(1, n_draws * n))
    for start in range(0, n, step):
        rows = draws[:, start:start + step]
        out[start:start + step] = (rows[:, :, None] > draws[:, None, :]).sum(axis=0, dtype=np.int64) / n_draws
    np.fill_diagonal(out, np.nan)
    models = theta["model"].values
    return xr.Dataset(
        {"prob_ahead": (("model", "model_other"), out)},
        coords={"model": models, "model_other": models},
        attrs={"description": "posterior probability that the ability of `model` exceeds that of `model_other` "
                              "(share of draws, ties not ahead); diagonal NaN", "draws": int(n_draws)},
    )
