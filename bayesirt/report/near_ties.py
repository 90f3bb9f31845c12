"""Report of the near-tie leaderboard with uncertainty (:mod:`bayesirt.audit.near_ties`): the
figure of the pairs on its two posterior probabilities and the report.md section."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from bayesirt.audit.near_ties import CATEGORIES, RESOLVED, ROBUST  # noqa: E402
from bayesirt.report.markdown import markdown_table  # noqa: E402

__all__ = ["plot_near_ties", "near_ties_lines", "TOP_PAIRS"]

#: Pairs listed per category in report.md (near_ties.csv has them all).
TOP_PAIRS = 5
_COLORS = {CATEGORIES[0]: "C2", CATEGORIES[1]: "C3", CATEGORIES[2]: "0.55"}
#: How each category's "top" pairs are chosen: the clearest cases of what the category says.
_ORDER = {CATEGORIES[0]: (["prob_a_ahead", "prob_reversal"], [False, True]),
          CATEGORIES[1]: (["prob_reversal", "prob_a_ahead"], [False, False]),
          CATEGORIES[2]: (["prob_a_ahead", "prob_reversal"], [True, False])}
_ORDER_TEXT = {CATEGORIES[0]: "highest P(a ahead), then lowest P(reversal)",
               CATEGORIES[1]: "highest P(reversal)", CATEGORIES[2]: "lowest P(a ahead)"}


def plot_near_ties(table: pd.DataFrame, path: Path) -> Path:
    """Every eligible near-tie pair at (prob_a_ahead, prob_reversal), coloured by category, with
    the thresholds as lines. Points are jittered by at most 0.006 so that stacks at 0 and 1 show."""
    rng = np.random.default_rng(0)
    fig, ax = plt.subplots(figsize=(6.4, 5.2))
    for category in CATEGORIES:
        sel = table[table["category"] == category]
        x = sel["prob_a_ahead"].to_numpy(float) + rng.uniform(-0.006, 0.006, len(sel))
        y = sel["prob_reversal"].to_numpy(float) + rng.uniform(-0.006, 0.006, len(sel))
        ax.scatter(x, y, s=9, alpha=0.5, color=_COLORS[category], edgecolors="none",
                   label=f"{category} ({len(sel):,})")
    ax.axvline(RESOLVED, color="0.2", ls="--", lw=1)
    ax.axhline(ROBUST, color="0.2", ls=":", lw=1)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("P(a ahead of b): posterior probability that the data resolve the ordering")
    ax.set_ylabel("P(low-DIF recomposition reverses the pair)")
    ax.set_title(f"{len(table):,} eligible near-tie pairs, both folds", fontsize=10)
    legend = ax.legend(frameon=False, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2,
                       markerscale=2.5)
    for handle in legend.legend_handles:
        handle.set_alpha(1)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def near_ties_lines(table: pd.DataFrame, info: dict, figure: str | None = None) -> list[str]:
    """report.md lines: what the two probabilities mean, the category counts and the top pairs of
    each category."""
    counts = info["counts"]
    lines = ["## Near-tie leaderboard with uncertainty (Bayesian layer)", "",
             f"Every eligible near-tie pair of both folds ({info['pairs']:,}; eligible as in the primary result: tied "
             "under neither the full nor the low-DIF anchor score), model a being the one with the higher full score. "
             f"P(a ahead) is the share of posterior draws with a's ability above b's under the `{info['ability_spec']}` spec "
             f"fitted to the full benchmark on all {info['models_fitted']:,} retained models ({info['method']}, "
             f"{info['draws']:,} draws, {info['fit_s']:.1f} s): does the data resolve the ordering? P(reversal) is the "
             "posterior probability that the low-DIF recomposition strictly reverses the pair (the residual-DIF "
             "posterior above): is the ordering composition-robust? Thresholds: resolved when P(a ahead) >= "
             f"{RESOLVED:g}; composition-robust when P(reversal) <= {ROBUST:g}. All pairs: `near_ties.csv`.", "",
             markdown_table(pd.DataFrame([(c, f"{counts[c]:,}", _share(counts[c], info["pairs"])) for c in CATEGORIES],
                                         columns=["category", "pairs", "share"])), "",
             f"Of the pairs not resolved, {info['b_ahead_resolved']:,} have P(a ahead) <= {1 - RESOLVED:.2g}: the "
             "ability model orders them the other way round from the full score with the same confidence (it weights "
             "items by discrimination; the full score counts them equally).", ""]
    if figure:
        lines += [f"![Near-tie pairs by P(a ahead) and P(reversal)]({figure})", ""]
    for category in CATEGORIES:
        sel = table[table["category"] == category]
        if sel.empty:
            continue
        by, ascending = _ORDER[category]
        top = sel.sort_values(by, ascending=ascending, kind="stable").head(TOP_PAIRS)
        shown = pd.DataFrame({"fold": top["fold"], "a (higher full score)": top["model_a"] + " (" + top["family_a"] + ")",
                              "b": top["model_b"] + " (" + top["family_b"] + ")",
                              "gap (pp)": top["full_gap_pp"].map(lambda v: f"{v:.2f}"),
                              "P(a ahead)": top["prob_a_ahead"].map(lambda v: f"{v:.3f}"),
                              "P(reversal)": top["prob_reversal"].map(lambda v: f"{v:.3f}")})
        lines += [f"### {category[0].upper()}{category[1:]}: top {len(top)} of {len(sel):,} "
                  f"({_ORDER_TEXT[category]})", "", markdown_table(shown), ""]
    return lines


def _share(n: int, total: int) -> str:
    return "n/a" if not total else f"{100 * n / total:.1f}%"
