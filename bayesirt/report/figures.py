"""Figures of a fitted logistic spec: item characteristic curves and an ability forest plot.

Each figure is built by a ``*_figure`` function that returns the matplotlib Figure (so tests can read
the plotted values back) and written by the ``plot_*`` function beside it.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display is assumed
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import xarray as xr  # noqa: E402

from bayesirt.models.response import response_probability  # noqa: E402
from bayesirt.report.paging import forest_rows  # noqa: E402

__all__ = ["plot_item_curves", "item_curves_figure", "plot_ability_forest", "ability_forest_figure"]

_SAMPLE = ("chain", "draw")
_LABEL_CHARS = 40


def _short_label(text, limit: int = _LABEL_CHARS) -> str:
    """A tick label of at most ``limit`` characters (the middle of a longer one replaced by '...')."""
    text = str(text)
    if len(text) <= limit:
        return text
    keep = limit - 3
    return text[:keep - keep // 2] + "..." + text[-(keep // 2):]


def _save_figure(fig, path: Path, dpi: int = 120) -> Path:
    """Write ``fig`` to ``path`` and close it."""
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def _draws(post: xr.Dataset, name: str, item: str | None, default: float, k: int) -> np.ndarray:
    if name not in post:
        return np.full(k, default)
    da = post[name]
    if item is not None and "item" in da.dims:
        da = da.sel(item=item)
    flat = da.values.reshape(-1)
    return flat[np.linspace(0, flat.size - 1, k).astype(int)]


def item_curves_figure(tree: xr.DataTree, items: pd.DataFrame, *, ci: float):
    """Item characteristic curves (posterior mean and ``ci`` band over up to 400 evenly spaced draws)
    of the most and the least discriminating items of ``items`` (the item table, ``items.csv``),
    with the models' posterior-mean abilities as a rug. A MAP fit (``method="map"``: one draw)
    shows the curve at the MAP estimates, without a band (its SEs are in ``items.csv``)."""
    post = tree["posterior"].to_dataset()
    is_map = json.loads(tree.attrs.get("bayesirt_settings", "{}")).get("method") == "map"
    order = items.sort_values("discrimination_mean", kind="stable")
    chosen = [("most discriminating", order.iloc[-1]), ("least discriminating", order.iloc[0])]
    theta_mean = post["theta"].mean(_SAMPLE).values
    grid = np.linspace(min(-3.0, theta_mean.min() - 0.5), max(3.0, theta_mean.max() + 0.5), 121)
    k = min(400, post.sizes["chain"] * post.sizes["draw"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True, layout="constrained")
    for ax, (label, row) in zip(axes, chosen):
        item = row["item_id"]
        p = response_probability(
            grid, _draws(post, "discrimination", item, 1.0, k)[:, None], _draws(post, "intercept", item, 0.0, k)[:, None],
            _draws(post, "guessing", item, 0.0, k)[:, None], _draws(post, "slip", item, 0.0, k)[:, None],
        )[:, 0, :]
        if not is_map:
            lo, hi = np.quantile(p, [(1 - ci) / 2, (1 + ci) / 2], axis=0)
            ax.fill_between(grid, lo, hi, alpha=0.3, label=f"{ci:.0%} credible band")
        ax.plot(grid, p.mean(axis=0), lw=2, label="at the MAP estimates" if is_map else "posterior mean")
        ax.plot(theta_mean, np.full_like(theta_mean, -0.02), "|", color="k", alpha=0.4,
                label="model abilities (MAP)" if is_map else "model abilities")
        ax.set_title(f"{label}: {_short_label(item)}\na = {row['discrimination_mean']:.2f}, "
                     f"b = {row['difficulty_mean']:.2f}", fontsize=10)
        ax.set_xlabel("ability θ")
        ax.set_ylim(-0.05, 1.02)
    axes[0].set_ylabel("P(correct)")
    axes[0].legend(loc="upper left", fontsize=8)
    return fig


def plot_item_curves(tree: xr.DataTree, items: pd.DataFrame, path: Path, *, ci: float) -> Path:
    """Write :func:`item_curves_figure` to ``path``."""
    return _save_figure(item_curves_figure(tree, items, ci=ci), path)


def ability_forest_figure(models: pd.DataFrame, *, ci: float, interval: str = "credible"):
    """Forest plot of model abilities (posterior mean and ``ci`` interval of ``models``, the model
    table in rank order), best at the top. With more than ``MAX_FOREST_ROWS`` models
    (:mod:`bayesirt.report.paging`), evenly spaced ranks are drawn, as the subtitle says.
    ``interval``: what the table's intervals are, for the title ("credible", or "Wald" for a MAP fit)."""
    lo_col, hi_col = [c for c in models.columns if c.startswith("theta_q")][:2]
    rows = forest_rows(len(models))
    shown = models.iloc[rows]
    title = f"Model abilities ({ci:.0%} {interval} intervals)"
    if len(shown) < len(models):
        title += f"\n{len(shown)} of {len(models):,} models, at evenly spaced ranks (all in models.csv)"
    y = np.arange(len(shown))[::-1]
    fig, ax = plt.subplots(figsize=(7.5, 1.4 + 0.22 * len(shown)), layout="constrained")
    ax.hlines(y, shown[lo_col], shown[hi_col], color="C0", lw=2)
    ax.plot(shown["theta_mean"], y, "o", color="C1", ms=4)
    labels = [_short_label(m) for m in shown["model_id"]]
    if len(shown) < len(models):
        labels = [f"{r + 1}. {m}" for r, m in zip(rows, labels)]
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_ylim(-0.8, len(shown) - 0.2)
    ax.set_xlabel("ability θ")
    fig.suptitle(title, fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    return fig


def plot_ability_forest(models: pd.DataFrame, path: Path, *, ci: float, interval: str = "credible") -> Path:
    """Write :func:`ability_forest_figure` to ``path``."""
    return _save_figure(ability_forest_figure(models, ci=ci, interval=interval), path)
