"""Reports of the predictive checks: Markdown sections and PNG figures."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import xarray as xr  # noqa: E402

from bayesirt.report.markdown import markdown_table  # noqa: E402
from bayesirt.workflow.predictive import PPCResult  # noqa: E402

__all__ = ["ppc_section", "prior_section", "plot_ppc", "plot_prior"]

MAX_ROWS = 20


def ppc_section(result: PPCResult, figure: str | None = None) -> list[str]:
    items, models = result.items, result.models
    n_flag = (items["flag"] != "").sum()
    lines = [
        "## Posterior predictive checks", "",
        f"{result.replicated.attrs['draws_used']} replicated data sets from the posterior, observed cells only. "
        "ppp = Pr(T(replicate) >= T(observed)) (ties half); flagged when outside "
        f"[{result.alpha / 2:g}, {1 - result.alpha / 2:g}] for proportions, item-rest correlations, accuracies and "
        f"the item-curve curvature over score groups, or below {result.alpha:g} for outfit, infit and X2 over score "
        f"groups. Each statistic flags about {result.alpha:.0%} of well-fitting elements by chance; an item has six.",
        "",
        markdown_table(result.global_checks), "",
        f"Items flagged: {n_flag} of {len(items)}; models flagged: {(models['flag'] != '').sum()} of {len(models)}.",
        "",
        "Worst-fitting items (by fit_ppp: the smallest item-fit ppp, two-sided ones doubled):", "",
        markdown_table(result.worst_items.head(MAX_ROWS)[
            ["item", "proportion_correct", "proportion_ppp", "item_rest_corr", "item_rest_corr_ppp", "outfit_ppp",
             "infit_ppp", "x2_ppp", "curvature_ppp", "fit_ppp", "flag"]]),
    ]
    if figure:
        lines += ["", f"![Posterior predictive checks]({figure})"]
    return lines + [""]


def prior_section(table: pd.DataFrame, spec_name: str, draws: int, figure: str | None = None) -> list[str]:
    lines = [
        "## Prior predictive check", "",
        f"{draws} draws from the priors of spec `{spec_name}`, each with a simulated response matrix of the same "
        "design. prior_p = Pr(T(simulated) >= T(observed)) (ties half).", "",
        markdown_table(table), "",
    ]
    if figure:
        lines += [f"![Prior predictive distributions]({figure})", ""]
    return lines


def _interval_panel(ax, observed, replicated, label):
    order = np.argsort(observed, kind="stable")
    x = np.arange(order.size)
    lo, hi = np.nanquantile(replicated[:, order], [0.05, 0.95], axis=0)
    ax.fill_between(x, lo, hi, color="C0", alpha=0.3, step="mid", label="replicated 90%")
    ax.plot(x, observed[order], ".", color="C1", ms=3, label="observed")
    ax.set_xlabel("items, ordered by the observed value")
    ax.set_ylabel(label)
    ax.legend(fontsize=7)


def plot_ppc(result: PPCResult, path: Path) -> Path:
    """Observed against replicated: item proportions, item-rest correlations, accuracy spread."""
    rep = result.replicated.isel(chain=0)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    _interval_panel(axes[0], result.items["proportion_correct"].values, rep["item_proportion"].values,
                    "proportion correct")
    _interval_panel(axes[1], result.items["item_rest_corr"].values, rep["item_rest_correlation"].values,
                    "item-rest correlation")
    axes[2].hist(rep["accuracy_sd"].values, bins=30, color="C0", alpha=0.6, label="replicated")
    axes[2].axvline(result.global_checks["observed"].iloc[0], color="C1", lw=2, label="observed")
    axes[2].set_xlabel("sd of model accuracies")
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_prior(simulated: xr.Dataset, path: Path, responses: xr.Dataset | None = None) -> Path:
    """Prior predictive distributions of item proportions and model accuracies (pooled over
    draws), with the observed ones when data are given."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    bins = np.linspace(0, 1, 26)
    observed = None
    if responses is not None:
        y = responses["responses"].values
        obs = y >= 0
        observed = ((y == 1).sum(1) / obs.sum(1), (y == 1).sum(0) / obs.sum(0))
    for k, (ax, name, label) in enumerate(zip(axes, ("item_proportion", "model_accuracy"),
                                              ("item proportion correct", "model accuracy"), strict=True)):
        ax.hist(simulated[name].values.ravel(), bins=bins, density=True, color="C0", alpha=0.5, label="prior predictive")
        if observed is not None:
            ax.hist(observed[k], bins=bins, density=True, histtype="step", color="C1", lw=2, label="observed")
        ax.set_xlabel(label)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
