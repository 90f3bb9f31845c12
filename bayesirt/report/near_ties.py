"""Report of the near-tie leaderboard with uncertainty (:mod:`bayesirt.audit.bayes.near_ties`): the
figure of the pairs on its two posterior probabilities and the report.md section."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from bayesirt.audit.bayes.near_ties import CATEGORIES, COLUMN_NOTES, RESOLVED, ROBUST, SENSITIVE_P  # noqa: E402
from bayesirt.audit.bayes.paired import BORDERLINE_DRAWS, PAIR_DRAWS  # noqa: E402
from bayesirt.audit.intervals import NEAR_TIE_GAP_SOURCE  # noqa: E402
from bayesirt.report.intervals import Notes  # noqa: E402
from bayesirt.report.markdown import markdown_table  # noqa: E402

__all__ = ["plot_near_ties", "near_ties_lines", "TOP_PAIRS"]

#: Pairs listed per category in report.md (near_ties.csv has them all).
TOP_PAIRS = 5
_COLORS = {CATEGORIES[0]: "C2", CATEGORIES[1]: "C3", CATEGORIES[2]: "C1", CATEGORIES[3]: "0.55"}
#: How each category's "top" pairs are chosen: the clearest cases of what the category says.
_ORDER = {CATEGORIES[0]: (["prob_a_ahead", "prob_reversal"], [False, True]),
          CATEGORIES[1]: (["dif_p", "prob_a_ahead"], [True, False]),
          CATEGORIES[2]: (["prob_reversal", "prob_a_ahead"], [False, False]),
          CATEGORIES[3]: (["prob_a_ahead", "prob_reversal"], [True, False])}
_ORDER_TEXT = {CATEGORIES[0]: "highest P(a ahead), then lowest P(reversal)", CATEGORIES[1]: "smallest dif_p",
               CATEGORIES[2]: "highest P(reversal)", CATEGORIES[3]: "lowest P(a ahead)"}


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
    ax.set_xlabel("P(a ahead): posterior probability that a's expected accuracy exceeds b's")
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


def near_ties_lines(table: pd.DataFrame, info: dict, figure: str | None = None, *,
                    notes: Notes | None = None) -> list[str]:
    """report.md lines: what each probability is of and conditions on, the category counts and
    the top pairs of each category (a listed pair whose full-score gap lies outside its 90%
    accuracy-gap interval gets the note of ``summary.json["intervals"]``, from ``notes``)."""
    notes = notes or Notes([])
    record = notes.record(NEAR_TIE_GAP_SOURCE)
    counts = info["counts"]
    called = info.get("called", 0)
    share = info.get("called_mcnemar_p_le_10")
    lines = ["## Near-tie leaderboard with uncertainty (Bayesian layer)", "",
             f"Every eligible near-tie pair of both folds ({info['pairs']:,}; eligible as in the primary result: tied "
             "under neither the full nor the low-DIF anchor score), model a being the one ahead on the gap the pair was "
             "selected on (the full score; with missing cells the items both answered, `both_gap_pp`) "
             f"(target half, {info.get('item_groups', 1)} item group(s)). All pairs: `near_ties.csv`. What each "
             "column is:", "",
             *[f"- `{name}`: {note}." for name, note in COLUMN_NOTES.items()], "",
             f"Categories: not resolved when {1 - RESOLVED:.2g} < P(a ahead) < {RESOLVED:g}; otherwise composition-robust when "
             f"P(reversal) <= {ROBUST:g} and the random reversal rate <= {ROBUST:g}, else DIF-sensitive when "
             f"dif_q <= {SENSITIVE_P:g} (`dif_sensitive`: dif_p, the per-pair randomization p that a's wins sit on "
             "the items whose residual DIF favours a's family, Benjamini-Hochberg adjusted over the table's pairs), "
             "else composition-sensitive (recompositions flip it, its order does not follow the families' DIF). "
             f"DIF-sensitive pairs, resolved or not: {info.get('dif_sensitive_any', 0):,} "
             f"({info.get('dif_p_le_05', 0):,} with unadjusted dif_p <= {SENSITIVE_P:g}; smallest attainable dif_p "
             f"{info.get('dif_p_floor', 1 / 1001):.4f} = 1/(permutations + 1)). Without any DIF the chance that any pair "
             f"of the table is flagged is at most {SENSITIVE_P:g}; its measured power on simulated DIF of known size is "
             "in benchmarks/results/audit_composition.md. At 1 pp near ties the data rarely resolve the order, so most "
             "DIF-sensitive pairs sit in \"not resolved by the data\". The old excess_p rule (reference column) flags "
             f"{info.get('excess_p_le_05', 0):,}.",
             "",
             markdown_table(pd.DataFrame([(c, f"{counts[c]:,}", _share(counts[c], info["pairs"])) for c in CATEGORIES],
                                         columns=["category", "pairs", "share"])), "",
             f"Pairs called either way on accuracy (P(a ahead) >= {RESOLVED:g} or <= {1 - RESOLVED:.2g}): "
             f"{called:,}" + (f", of which {100 * share:.1f}% have McNemar p <= .10" if share is not None else "")
             + f". Of these, b is ahead in {info['b_ahead_resolved']:,} (only possible through missing responses). "
             f"The 2PL ability comparison (P(theta a ahead), not used for categories) calls "
             f"{info.get('theta_resolved', 0):,} pairs at {RESOLVED:g} either way, "
             f"{info.get('theta_resolved_accuracy_not', 0):,} of which the accuracy comparison does not resolve.",
             *_caveats(info), ""]
    if figure:
        lines += [f"![Near-tie pairs by P(a ahead) and P(reversal)]({figure})", ""]
    for category in CATEGORIES:
        sel = table[table["category"] == category]
        if sel.empty:
            continue
        by, ascending = _ORDER[category]
        top = sel.sort_values(by, ascending=ascending, kind="stable").head(TOP_PAIRS)
        shown = pd.DataFrame({"fold": top["fold"], "a (ahead on the selection gap)": top["model_a"] + " (" + top["family_a"] + ")",
                              "b": top["model_b"] + " (" + top["family_b"] + ")",
                              "full gap, pp (90% accuracy-gap interval)": [
                                  f"{g:+.2f} ({lo:+.1f} to {hi:+.1f})" + _gap_mark(g, lo, hi, record, notes)
                                  for g, lo, hi in zip(top["full_gap_pp"], top["gap_lower_pp"], top["gap_upper_pp"],
                                                       strict=True)],
                              "P(a ahead)": top["prob_a_ahead"].map(lambda v: f"{v:.3f}"),
                              "McNemar p": top["mcnemar_p"].map(lambda v: f"{v:.3g}"),
                              "P(theta a ahead)": top["prob_theta_a_ahead"].map(lambda v: f"{v:.3f}"),
                              "P(reversal)": top["prob_reversal"].map(lambda v: f"{v:.3f}"),
                              "random rate": top["random_reversal_rate"].map(lambda v: f"{v:.3f}"),
                              "excess (90% MC)": [f"{e:+.3f} ({lo:+.3f}, {hi:+.3f})" for e, lo, hi in
                                                  zip(top["excess_reversal"], top["excess_lower"], top["excess_upper"],
                                                      strict=True)],
                              "dif_p (q)": [f"{p:.3g} ({q:.3g})" for p, q in zip(top["dif_p"], top["dif_q"], strict=True)]})
        lines += [f"### {category[0].upper()}{category[1:]}: top {len(top)} of {len(sel):,} "
                  f"({_ORDER_TEXT[category]})", "", markdown_table(shown), "", *notes.lines()]
    return lines


def _caveats(info: dict) -> list[str]:
    """Monte Carlo error, pooled item groups (when present) and the testlet labels (or their absence)."""
    out = []
    if info.get("prob_a_ahead_mcse_max") is not None:
        out.append(f"Monte Carlo error of P(a ahead) (`prob_a_ahead_mcse`): at most {info['prob_a_ahead_mcse_max']:.4f}; "
                   f"pairs within 2 MCSE of {RESOLVED:g} or {1 - RESOLVED:.2g} at {PAIR_DRAWS:,} draws were drawn again "
                   f"with {BORDERLINE_DRAWS:,}, after which {info.get('calls_within_2_mcse', 0):,} call(s) still lie "
                   "within 2 MCSE of the threshold and may change with the seed.")
    if info.get("pooled_item_groups"):
        out.append(f"{info['pooled_item_groups']:,} item group(s) have fewer than {info.get('min_stratum_items')} items, too "
                   "few to stratify: the paired model pools them into one stratum.")
    if info.get("testlets"):
        out.append(f"The items are in {info['testlets']:,} testlets: each pair's counts are divided by its design "
                   f"effect (`design_effect`, at most {info.get('design_effect_max') or 1:.2f}), so clumped wins and "
                   "losses count as fewer independent items.")
    else:
        out.append("No testlet labels: the items of a group are taken as independent; items that share a passage or "
                   "stem make the intervals too narrow for the item population (give a `testlet` item column).")
    return [" ".join(out)] if out else []


def _gap_mark(gap: float, lower: float, upper: float, record: dict | None, notes: Notes) -> str:
    """The note marker of a listed pair whose full-score gap lies outside its interval."""
    if not (np.isfinite(lower) and np.isfinite(upper)) or lower <= gap <= upper:
        return ""
    return notes.add(record["note"] if record and record.get("note") else
                     "This pair's full-score gap lies outside the 90% posterior interval of its accuracy gap: the "
                     "interval comes from the paired model of the items both models answered, the gap from each "
                     "model's own answered items.")


def _share(n: int, total: int) -> str:
    return "n/a" if not total else f"{100 * n / total:.1f}%"
