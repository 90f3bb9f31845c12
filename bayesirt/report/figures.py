"""Figures of a fitted logistic spec: item characteristic curves and an ability forest plot."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display is assumed
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import xarray as xr  # noqa: E402

from bayesirt.models.logistic import response_probability  # noqa: E402

__all__ = ["plot_item_curves", "plot_ability_forest", "MAX_FOREST_ROWS"]

MAX_FOREST_ROWS = 60
_SAMPLE = ("chain", "draw")


def _draws(post: xr.Dataset, name: str, item: str | None, default: float, k: int) -> np.ndarray:
    if name not in post:
        return np.full(k, default)
    da = post[name]
    if item is not None and "item" in da.dims:
        da = da.sel(item=item)
    flat = da.values.reshape(-1)
    return flat[np.linspace(0, flat.size - 1, k).astype(int)]


def plot_item_curves(tree: xr.DataTree, items: pd.DataFrame, path: Path, *, ci: float) -> Path:
    """Item characteristic curves (posterior mean and ``ci`` band) of the most and the least
    discriminating items in ``items`` (the item table), with the models' ability means as a rug."""
    post = tree["posterior"].to_dataset()
    order = items.sort_values("discrimination_mean", kind="stable")
    chosen = [("most discriminating", order.iloc[-1]), ("least discriminating", order.iloc[0])]
    theta_mean = post["theta"].mean(_SAMPLE).values
    grid = np.linspace(min(-3.0, theta_mean.min() - 0.5), max(3.0, theta_mean.max() + 0.5), 121)
    k = min(400, post.sizes["chain"] * post.sizes["draw"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, (label, row) in zip(axes, chosen):
        item = row["item_id"]
        p = response_probability(
            grid, _draws(post, "discrimination", item, 1.0, k)[:, None], _draws(post, "intercept", item, 0.0, k)[:, None],
            _draws(post, "guessing", item, 0.0, k)[:, None], _draws(post, "slip", item, 0.0, k)[:, None],
        )[:, 0, :]
        lo, hi = np.quantile(p, [(1 - ci) / 2, (1 + ci) / 2], axis=0)
        ax.fill_between(grid, lo, hi, alpha=0.3, label=f"{ci:.0%} credible band")
        ax.plot(grid, p.mean(axis=0), lw=2, label="posterior mean")
        ax.plot(theta_mean, np.full_like(theta_mean, -0.02), "|", color="k", alpha=0.4, label="model abilities")
        ax.set_title(f"{label}: {item}\na = {row['discrimination_mean']:.2f}, b = {row['difficulty_mean']:.2f}")
        ax.set_xlabel("ability θ")
        ax.set_ylim(-0.05, 1.02)
    axes[0].set_ylabel("P(correct)")
    axes[0].legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_ability_forest(models: pd.DataFrame, path: Path, *, ci: float) -> Path:
    """Forest plot of model abilities (posterior mean and ``ci`` interval), best at the top.

    With more than ``MAX_FOREST_ROWS`` models, evenly spaced ranks are shown (stated in the title).
    """
    lo_col, hi_col = [c for c in models.columns if c.startswith("theta_q")][:2]
    shown = models
    title = f"Model abilities ({ci:.0%} credible intervals)"
    if len(models) > MAX_FOREST_ROWS:
        shown = models.iloc[np.linspace(0, len(models) - 1, MAX_FOREST_ROWS).astype(int)]
        title += f": {MAX_FOREST_ROWS} of {len(models)} models at evenly spaced ranks"
    y = np.arange(len(shown))[::-1]
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.22 * len(shown)))
    ax.hlines(y, shown[lo_col], shown[hi_col], color="C0", lw=2)
    ax.plot(shown["theta_mean"], y, "o", color="C1", ms=4)
    ax.set_yticks(y, shown["model_id"], fontsize=7)
    ax.set_xlabel("ability θ")
    ax.set_title(title, fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
