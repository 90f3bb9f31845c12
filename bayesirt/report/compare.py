"""The model-comparison figure and report section (``bayesirt compare``)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from bayesirt.report.markdown import markdown_table  # noqa: E402

__all__ = ["plot_comparison", "comparison_report"]

_METHODS = {"loo": "PSIS-LOO", "loo_kfold": "exact K-fold"}


def plot_comparison(table: pd.DataFrame, path: Path, *, unit: str) -> Path:
    """elpd of every spec (points, +/- 1 SE) and its difference from the best (+/- 1 dse)."""
    order = table.sort_values("rank", ascending=False)
    fig, ax = plt.subplots(figsize=(6.5, 0.5 * len(order) + 1.5))
    y = range(len(order))
    ax.errorbar(order["elpd"], y, xerr=order["se"], fmt="o", color="black", label="elpd +/- SE")
    best = order["elpd"].max()
    ax.errorbar(best + order["elpd_diff"] * -1, [v + 0.15 for v in y], xerr=order["dse"], fmt="^", color="tab:blue",
                label="difference from best +/- dse")
    ax.axvline(best, color="grey", linestyle=":")
    ax.set_yticks(list(y), order.index)
    ax.set_xlabel(f"elpd ({'per held-out model' if unit == 'model' else 'per held-out response'}, summed)")
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def comparison_report(table: pd.DataFrame, *, data_name: str, unit: str, settings: dict, notes: list[str],
                      figure: str, loadings: dict[str, str] | None = None) -> str:
    """Markdown report: the table, how to read it, Pareto-k and K-fold notes, files."""
    best = table.index[table["rank"] == 0][0]
    shown = table.reset_index()[["spec", "rank", "elpd", "se", "elpd_diff", "dse", "p", "weight", "method", "bad_k"]]
    shown["method"] = shown["method"].map(lambda m: _METHODS.get(m, m))
    lines = [
        f"# Model comparison: {data_name}",
        "",
        f"Unit of prediction: **{'a whole model (LLM) response pattern, ability integrated out' if unit == 'model' else 'a single response'}**. "
        f"Best: **{best}**. A difference is clear when |elpd_diff| is several times its dse (4 dse is a strict bar).",
        "",
        markdown_table(shown.round({"elpd": 1, "se": 1, "elpd_diff": 1, "dse": 1, "p": 1, "weight": 3})),
        "",
        f"![comparison]({figure})",
        "",
        "## Notes",
        "",
        *[f"- {n}" for n in notes],
        "",
        "## Settings",
        "",
        *[f"- {k}: {v}" for k, v in settings.items()],
    ]
    if loadings:
        lines += ["", "## MIRT loadings", "", *[f"- {spec}: `{file}`" for spec, file in loadings.items()]]
    return "\n".join(lines) + "\n"
