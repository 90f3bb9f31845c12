"""Figures and Markdown of the benchmark-distillation study (CAT curves) and of information curves."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display is assumed
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import xarray as xr  # noqa: E402

from bayesirt.report.markdown import markdown_table  # noqa: E402

__all__ = ["plot_cat_curves", "cat_curves_figure", "bank_label", "cat_report", "plot_information",
           "information_report", "GROUPS_PER_PAGE"]

_STYLE = {"cat": ("CAT", "C0", "o"), "static": ("static test", "C1", "s"),
          "random": ("random subsets", "C7", "^")}
GROUPS_PER_PAGE = 6
_PANELS = (("rmse", "full-score RMSE (lower is better)"), ("spearman", "Spearman rank recovery"))


def bank_label(bench: str, attrs: dict) -> str:
    """The name of one scored unit of a CAT study: the whole bank (``"all"``: the data's name and its
    item count) or one item group of it (``per_benchmark``: its name)."""
    if bench == "all":
        name = attrs.get("name") or "the item bank"
        return f"{name}: all {int(attrs['n_items']):,} items" if "n_items" in attrs else f"{name}: all items"
    return bench


def cat_curves_figure(curves: pd.DataFrame, attrs: dict | None = None):
    """RMSE (top) and Spearman (bottom) against budget per scored unit (columns titled by
    :func:`bank_label` from the study's ``attrs``), mean and 95% band over splits, from ``curves``
    (the ``cat_curves.csv`` table)."""
    attrs = attrs or {}
    benches = list(dict.fromkeys(curves["benchmark"]))
    fig, axes = plt.subplots(2, len(benches), figsize=(4.4 * len(benches), 6.5), squeeze=False, sharex="col",
                             layout="constrained")
    ticks = sorted(curves["budget"].unique())
    for col, bench in enumerate(benches):
        for row, (metric, label) in enumerate(_PANELS):
            ax = axes[row, col]
            for design, (name, color, marker) in _STYLE.items():
                part = curves.query("benchmark == @bench and metric == @metric and design == @design")
                part = part.sort_values("budget")
                ax.plot(part["budget"], part["mean"], marker=marker, color=color, label=name)
                ax.fill_between(part["budget"], part["lower"], part["upper"], color=color, alpha=0.2)
            ax.set_xscale("log")
            ax.set_ylabel(label if col == 0 else "")
            if row == 0:
                ax.set_title(bank_label(str(bench), attrs), fontsize=10)
            else:
                ax.set_xlabel("items administered (k)")
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.minorticks_off()
    axes[0, 0].legend(frameon=False, fontsize=8)
    return fig


def plot_cat_curves(curves: pd.DataFrame, path: Path, attrs: dict | None = None) -> list[Path]:
    """Write :func:`cat_curves_figure` to ``path``; with more than ``GROUPS_PER_PAGE`` scored units
    (``per_benchmark`` on many item groups), one page per ``GROUPS_PER_PAGE`` of them
    (``cat_curves.png``, ``cat_curves_2.png``, ...). Returns the pages written."""
    benches = list(dict.fromkeys(curves["benchmark"]))
    pages = []
    for k, start in enumerate(range(0, len(benches), GROUPS_PER_PAGE)):
        page = path if k == 0 else path.with_name(f"{path.stem}_{k + 1}{path.suffix}")
        fig = cat_curves_figure(curves[curves["benchmark"].isin(benches[start:start + GROUPS_PER_PAGE])], attrs)
        fig.savefig(page, dpi=150)
        plt.close(fig)
        pages.append(page)
    return pages


def _wide(curves: pd.DataFrame, bench: str, metric: str) -> pd.DataFrame:
    part = curves.query("benchmark == @bench and metric == @metric").copy()
    part["value"] = [f"{m:.3f} [{lo:.3f}, {hi:.3f}]" for m, lo, hi in part[["mean", "lower", "upper"]].to_numpy()]
    wide = part.pivot(index="budget", columns="design", values="value")[list(_STYLE)].reset_index()
    return wide.rename(columns={k: v[0] for k, v in _STYLE.items()})


def _gain_line(curves: pd.DataFrame, bench: str) -> str:
    rmse = curves.query("benchmark == @bench and metric == 'rmse'").pivot(index="budget", columns="design",
                                                                          values="mean")
    gains = [f"k={k}: {100 * (r['cat'] / r['random'] - 1):+.0f}%" for k, r in rmse.iterrows() if np.isfinite(r["cat"])]
    return "CAT full-score RMSE relative to random subsets (negative = CAT better): " + ", ".join(gains) + "."


def cat_report(study: xr.Dataset, curves: pd.DataFrame, figures: list[str] | str | None) -> str:
    """``report.md`` of :func:`bayesirt.jobs.safety.run_cat_job`; ``figures``: the pages of
    :func:`plot_cat_curves`."""
    figures = [figures] if isinstance(figures, str) else list(figures or [])
    a = study.attrs
    lines = [f"# Short tests on held-out models: {a.get('name') or 'responses'}", "",
             f"{a['n_models']} models x {a['n_items']} items; {a['splits']} random splits into "
             f"{a['calibration']:.0%} calibration and {1 - a['calibration']:.0%} held-out models. Per split: "
             f"{a['model']} on the calibration models; CAT ({a['rule']} selection, {a['estimator'].upper()} updates), "
             f"the static test of design `{a.get('static_design', 'max_information')}` for the calibration abilities "
             f"(SAFE's is `max_information`), and {a['random_subsets']} random "
             "item sets" + (" (all three keep proportional per-item-group quotas)" if int(a.get("quotas", 1))
                            else " (no quotas: items drawn from the whole bank, SAFE's unconstrained CAT)")
             + ". Every test's reduced score and ability go through the same spline calibration to the full score, "
             "fitted on the calibration models.", "",
             "Target (full score): " + (
                 "the unweighted mean over the pooled benchmarks of each one's proportion correct (reversed members "
                 "as 1 - y), so that every benchmark counts equally whatever its item count (SAFE's composite; "
                 "a different scale from the factors step's composite.csv, the mean of z-scored MAP abilities)."
                 if a.get("target") == "benchmark_mean" else
                 "the proportion correct over the model's observed items."), "",
             "Intervals: 95% t-intervals of the mean over splits (splits share models, so they are optimistic).", ""]
    removed = json.loads(a.get("removed_items", "[]"))
    if removed:
        lines += [f"{len(removed)} item(s) that every model answered alike were removed first (no information; they "
                  f"would flatter random subsets): {', '.join(removed[:10])}" + (" ..." if len(removed) > 10 else "")
                  + ".", ""]
    if len(figures) > 1:
        lines += [f"The figure has {len(figures)} pages of at most {GROUPS_PER_PAGE} item groups each.", ""]
    for k, name in enumerate(figures, start=1):
        lines += [f"![CAT curves{f', page {k}' if len(figures) > 1 else ''}]({name})", ""]
    for bench in dict.fromkeys(curves["benchmark"]):
        lines += [f"## {bank_label(str(bench), a)}", "", _gain_line(curves, bench), ""]
        for metric, title in (("rmse", "Full-score RMSE"), ("spearman", "Spearman rank recovery"),
                              ("theta_rmse", "Ability RMSE against the all-item ability")):
            lines += [f"**{title}**", "", markdown_table(_wide(curves, bench, metric)), ""]
    lines += ["Files: `cat.nc` (per-split and per-random-subset metrics), `cat_curves.csv` (this summary), "
              "`static_tests.csv` (the static test of each budget, calibrated on every model: the items to administer).",
              ""]
    return "\n".join(lines)


def plot_information(info: xr.Dataset, path: Path) -> Path:
    """Test information and its standard error; per-group curves when ``group_information`` exists."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    theta = info["theta"].values
    left.plot(theta, info["test_information"], color="k", label="test")
    if "test_information_sd" in info:
        sd = info["test_information_sd"].values
        left.fill_between(theta, info["test_information"] - sd, info["test_information"] + sd, color="k", alpha=0.15,
                          label="\u00b11 posterior SD")
    if "group_information" in info and info.sizes["group"] > 1:
        for g in info["group"].values:
            left.plot(theta, info["group_information"].sel(group=g), label=str(g), lw=1)
    left.set(xlabel="ability (theta)", ylabel="information", title="Test information")
    left.legend(frameon=False, fontsize=8)
    right.plot(theta, info["standard_error"], color="C3")
    right.set(xlabel="ability (theta)", ylabel="SE(theta) = 1 / sqrt(information)", title="Standard error",
              ylim=(0, None))
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


def information_report(info: xr.Dataset, source: str, figure: str | None, n_top: int = 10) -> str:
    """``report.md`` of :func:`bayesirt.jobs.safety.run_information_job`."""
    test = info["test_information"]
    peak = float(test["theta"][int(test.argmax("theta"))])
    inside = test["theta"].values[(test >= 10).values]
    lines = [f"# Information curves: {source}", "",
             f"{info.sizes['item']} items; {info.attrs.get('parameters', '')}.", "",
             f"Test information peaks at theta = {peak:.2f} ({float(test.max()):.1f}, "
             f"SE {float(1 / np.sqrt(test.max())):.3f}).",
             (f"It exceeds 10 (SE < 0.32) for theta in [{inside.min():.2f}, {inside.max():.2f}]." if inside.size
              else "It never reaches 10 (SE 0.32) on the grid."), ""]
    if figure:
        lines += [f"![information]({figure})", ""]
    total = info["item_information"].sum("theta") * float(np.mean(np.diff(info["theta"].values)))
    top = total.sortby(total, ascending=False)[:n_top]
    frame = pd.DataFrame({"item": top["item"].values, "area under curve": top.values,
                          "peak theta": info["theta"].values[info["item_information"].sel(item=top["item"]).argmax(
                              "theta").values]})
    lines += [f"## The {len(frame)} most informative items (area under the information curve)", "",
              markdown_table(frame), "", "Files: `information.nc`, `information.csv`.", ""]
    return "\n".join(lines)
