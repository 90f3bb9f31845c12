"""The model-comparison figure and report section (``bayesirt compare``)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator, StrMethodFormatter  # noqa: E402

from bayesirt.report.markdown import markdown_table  # noqa: E402

__all__ = ["comparison_figure", "plot_comparison", "comparison_report", "WEIGHT_MEANINGS"]

#: What each model-weight column is (report.md and summary.json).
WEIGHT_MEANINGS = {
    "stacking_weight": "stacking (Yao et al. 2018): the weights of the mixture of the specs that predicts the held-out "
                       "units best (maximizes the sum of log mixture densities); near-nested specs can share it even "
                       "when one leads by several dse, because each predicts some units better",
    "pseudo_bma_plus_weight": "pseudo-BMA+ (Yao et al. 2018): exp(elpd) normalized over the specs, averaged over 1,000 "
                              "Bayesian-bootstrap replicates of the units; about the chance that a spec has the highest "
                              "elpd, so a spec that leads by several dse takes nearly all of it",
}

_METHODS = {"loo": "PSIS-LOO", "loo_kfold": "exact K-fold"}


def comparison_figure(table: pd.DataFrame, *, unit: str) -> Figure:
    """The table's numbers, best spec at the top: elpd +/- SE (left) and elpd_diff +/- dse (right).

    ``elpd_diff`` is ArviZ's ``elpd(spec) - elpd(best)`` (0 for the best, negative for the others),
    plotted as it stands in ``compare.csv``; the legend sits below the panels, outside the data.
    """
    order = table.sort_values("rank")
    y = np.arange(len(order))
    per = "held-out model" if unit == "model" else "held-out response"
    fig, (left, right) = plt.subplots(1, 2, sharey=True, figsize=(9.0, 0.45 * len(order) + 2.2), layout="constrained")
    left.errorbar(order["elpd"], y, xerr=order["se"], fmt="o", color="black", capsize=3, label="elpd +/- SE")
    right.errorbar(order["elpd_diff"], y, xerr=order["dse"], fmt="^", color="tab:blue", capsize=3,
                   label="elpd_diff +/- dse (SE of the difference)")
    right.axvline(0.0, color="grey", linestyle=":", linewidth=1)
    left.set_yticks(y, [str(s) for s in order.index])
    left.invert_yaxis()  # shared: the best (rank 0) at the top of both panels
    left.set_xlabel(f"elpd (sum of log predictive densities, one per {per})")
    right.set_xlabel("elpd_diff = elpd(spec) - elpd(best)")
    left.set_title("expected log predictive density", fontsize=10)
    right.set_title("difference from the best", fontsize=10)
    for ax in (left, right):
        ax.grid(axis="x", alpha=0.3)
        ax.margins(x=0.08)
        ax.xaxis.set_major_locator(MaxNLocator(5))
        step = float(np.diff(ax.get_xticks()).min())  # thousands separated, as many decimals as the step needs
        decimals = max(0, int(np.ceil(-np.log10(step) - 1e-9))) if 0 < step < 1 else 0
        ax.xaxis.set_major_formatter(StrMethodFormatter(f"{{x:,.{decimals}f}}"))
    fig.legend(loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    return fig


def plot_comparison(table: pd.DataFrame, path: Path, *, unit: str) -> Path:
    """Write :func:`comparison_figure` to ``path``."""
    fig = comparison_figure(table, unit=unit)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


_CAVEATS = {
    "advi": "Fitted by mean-field ADVI, which under-disperses (its posterior is too narrow and ignores "
            "correlations between parameters) and whose draws are not posterior draws, so the importance "
            "ratios, the elpd values, their differences and SEs are approximate; confirm a close call with `--method nuts`.",
    "laplace": "Fitted by a Laplace approximation (a joint Gaussian at the items' marginal mode), which cannot show "
               "where the posterior is skewed, so the importance ratios, the elpd values, their differences and SEs are "
               "approximate; confirm a close call with `--method nuts`.",
    "fullrank_advi": "Fitted by full-rank ADVI, a Gaussian approximation of the posterior, so the elpd values "
                     "and their differences are approximate; confirm a close call with `--method nuts`.",
}


def comparison_report(table: pd.DataFrame, *, data_name: str, unit: str, settings: dict, notes: list[str],
                      figure: str, loadings: dict[str, str] | None = None, fit_method: str = "nuts",
                      weights: str) -> str:
    """Markdown report: the table, how to read it, Pareto-k and K-fold notes, the caveat of an
    approximate fit method, the settings that applied, files."""
    best = table.index[table["rank"] == 0][0]
    shown = table.reset_index()[["spec", "rank", "elpd", "se", "elpd_diff", "dse", "p_worse", "p", "stacking_weight",
                                  "pseudo_bma_plus_weight", "method", "bad_k"]]
    shown["method"] = shown["method"].map(lambda m: _METHODS.get(m, m))
    lines = [
        f"# Model comparison: {data_name}",
        "",
        f"Unit of prediction: **{'a whole model (LLM) response pattern, ability integrated out' if unit == 'model' else 'a single response'}**. "
        f"Best: **{best}**. A difference is clear when |elpd_diff| is several times its dse (4 dse is a strict bar).",
        "",
        markdown_table(shown.round({"elpd": 1, "se": 1, "elpd_diff": 1, "dse": 1, "p_worse": 3, "p": 1, "stacking_weight": 3,
                                   "pseudo_bma_plus_weight": 3})),
        "",
        f"![comparison]({figure})",
        "",
        "elpd: the sum, over held-out units, of the log predictive density of each unit under the spec "
        "fitted without it; SE its standard error. elpd_diff: elpd(spec) - elpd(best), dse its standard "
        "error (paired over units); p_worse: the normal-approximation probability that the spec predicts worse "
        "than the best.",
        "",
        f"Model weights (`weight` in compare.csv is the {weights.replace('-bma+', '-BMA+')} weight, `--weights`):",
        "",
        *[f"- {name}: {meaning}." for name, meaning in WEIGHT_MEANINGS.items()],
        "",
        "## Notes",
        "",
        *([f"- {_CAVEATS[fit_method]}"] if fit_method in _CAVEATS else []),
        *[f"- {n}" for n in notes],
        "",
        "## Settings",
        "",
        *[f"- {k}: {v}" for k, v in settings.items()],
    ]
    if loadings:
        lines += ["", "## MIRT loadings", "", *[f"- {spec}: `{file}`" for spec, file in loadings.items()]]
    return "\n".join(lines) + "\n"
