"""Report of the primary near-tie audit: Markdown and the matched-random control figure."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import xarray as xr  # noqa: E402

from bayesirt.audit.bayes.posterior import CONDITIONAL
from bayesirt.audit.intervals import owner_source, sensitivity_source
from bayesirt.report.audit_posterior import posterior_lines
from bayesirt.report.audit_sections import matched_section, profiles_section, replication_section
from bayesirt.report.intervals import Notes
from bayesirt.report.markdown import (
    markdown_table,  # noqa: E402
    reading_lines,
)
from bayesirt.report.near_ties import near_ties_lines

__all__ = ["audit_report", "plot_controls", "plot_sensitivity"]


def _pct(value: float) -> str:
    return "n/a" if value is None or not np.isfinite(value) else f"{100 * value:.1f}%"


def _headline(summary: dict, notes: Notes) -> list[str]:
    eps = f"{100 * summary['config']['epsilon']:g}"
    near = summary.get("near_tie_pairs", summary["eligible_pairs"])
    both = summary.get("near_tie_selection", "").startswith("both")
    gap = "gap on the items both answered (missing cells)" if both else "full-score gap"
    rows = [(f"near-tie pairs: different owner and family, 0 < {gap} <= {eps} pp, frozen from the observed "
             "scores, pooled over folds", f"{near:,}"),
            ("eligible pairs: the near-tie pairs also untied under the low-DIF anchor score (the rate's denominator; "
             "NT Table 1's \"near-tie pairs\" column)",
             f"{summary['eligible_pairs']:,} ({near - summary['eligible_pairs']:,} tied under the anchor score)"),
            ("strict reversals under the low-DIF anchor score, among the eligible pairs", f"{summary['reversals']:,}"),
            ("low-DIF reversal rate (reversals / eligible pairs)", _pct(summary["low_dif_reversal_rate"]))]
    if "excess_pp" in summary:
        lo, hi = summary["matched_random_interval"]
        rows += [("matched-random median (2.5-97.5th percentiles of the random subtests' rates)",
                  f"{_pct(summary['matched_random_median'])} ({_pct(lo)}-{_pct(hi)})"
                  + notes.mark("matched_random_interval")),
                 ("excess reversals", f"{summary['excess_pp']:+.1f} pp"
                  + (" (small sample: see the note below)" if "small_sample_note" in summary else "")),
                 ("one-sided randomization p (plus-one)", f"{summary['p_value']:.4g} "
                  f"(smallest possible {summary['min_resolvable_p']:.4g})")]
    tau = f"{summary['mean_tau_b']:.3f}"
    if "bootstrap_rate_range" in summary:
        lo, hi = summary["bootstrap_rate_range"]
        rows += [(f"low-DIF reversal rate (composition-bootstrap range: 2.5-97.5th percentiles of the rate recomputed "
                  f"on {summary['config']['composition_bootstrap']:,} recomposed benchmarks, {summary['bootstrap_units']} "
                  "resampled, pairs frozen; NT C.7)",
                  f"{_pct(summary['low_dif_reversal_rate'])} ({_pct(lo)}-{_pct(hi)}); replicate mean "
                  f"{_pct(summary['bootstrap_rate_mean'])}" + notes.mark("bootstrap_rate_range"))]
        lo, hi = summary["bootstrap_tau_b_range"]
        tau = f"{summary['mean_tau_b']:.3f} ({lo:.3f}-{hi:.3f})" + notes.mark("bootstrap_tau_b_range")
    rows += [("mean fold Kendall tau-b, full vs anchor score"
              + (" (composition-bootstrap range)" if "bootstrap_tau_b_range" in summary else ""), tau),
             ("all-cross-family reversal rate (different owner and family, any full-score gap)",
              _pct(summary["all_cross_family_reversal_rate"])),
             ("selected K per audit fold", " / ".join(map(str, summary["selected_k"]))),
             ("anchors per audit fold", " / ".join(map(str, summary["anchor_counts"])))]
    small = [f"**Small sample**: {summary['small_sample_note']}.", ""] if "small_sample_note" in summary else []
    return [markdown_table(pd.DataFrame(rows, columns=["quantity", "value"])), "", *small, *notes.lines()]


def _within_section(w: dict) -> list[str]:
    table = pd.DataFrame([{
        "eligible within-family pairs": f"{w['within_pairs']:,}",
        "within low-DIF / random": f"{_pct(w['within_rate'])} / {_pct(w['within_median'])}",
        "within excess (pp)": f"{w['within_excess_pp']:+.1f}", "p within": f"{w['within_p']:.3g}",
        "specificity (pp)": f"{w['specificity_pp']:+.1f}", "p specificity": f"{w['specificity_p']:.3g}"}])
    return ["## Within-family specificity (post hoc; NT 4.2, B.3)", "",
            "The same low-DIF weights and matched-random replicates applied to different-owner, same-family near ties. "
            "Specificity: the cross-minus-within gap against the replicates' paired gaps (eq. 53-55).", "",
            markdown_table(table), ""]


def _owner_shifts(owners: xr.Dataset, notes: Notes) -> list[str]:
    families = owners["family"].values
    table = pd.DataFrame({
        "family": families,
        "mean shift, pp (2.5-97.5%)": [
            f"{100 * float(o['observed_shift']):+.2f} ({100 * float(o['shift_lower']):+.2f} to "
            f"{100 * float(o['shift_upper']):+.2f})" + notes.mark(owner_source(f))
            for f, o in ((f, owners.sel(family=f)) for f in families)],
        "records": owners["records"].values,
        "owners": owners["owners"].values,
    })
    return ["## Family score shifts (anchor minus full), owner bootstrap", "",
            f"{owners.sizes['replicate']:,} owner resamples (NT D.1 eq. 57-58): each family's mean shift over its "
            "scored representatives, with the 2.5th-97.5th percentiles of its owner-resampled means.",
            "", markdown_table(table), "", *notes.lines()]


def _bayes_section(bayes: dict, result, notes: Notes) -> list[str]:
    rate, excess = bayes["low_dif_reversal_rate_q05_q50_q95"], bayes["excess_pp_q05_q50_q95"]
    bootstrap = bayes["method"] == "bootstrap"
    if bootstrap:
        source = (f"Owner-clustered Bayesian bootstrap of each audit half ({bayes['draws']} draws): every draw "
                  "reweights the half's owners (Dirichlet(1)) and refits the spectral offsets, the residual DIF and "
                  "the three purification rounds with K fixed")
        scope = ("The near-tie pairs and K stay fixed, so this posterior carries the uncertainty of the offsets and "
                 "of the DIF estimate from the population of owners, not of K.")
    else:
        source = (f"Residual-DIF posterior of each audit half ({bayes['method']}, {bayes['draws']} draws; "
                  + ("ridge prior N(0, 1) on centred delta, the lambda = 1 penalty" if bayes["prior"] == "ridge" else
                     "hierarchical prior: centred delta ~ N(0, s^2) with a learned common scale s ~ HalfNormal(1)")
                  + ")")
        scope = ("The offsets and the pairs stay fixed (the deterministic run's spectral adjustment), so this "
                 "posterior carries the uncertainty of the DIF estimate, not of K or the offsets.")
    rows = [] if bootstrap else [("NT's 5 Newton cycles vs the converged optimum: max |delta| gap, per fold",
                                  " / ".join(f"{g['max_abs_delta_diff']:.2g}" for g in bayes["schedule_gap"]))]
    lines = ["## Bayesian layer: posterior uncertainty of the residual DIF", "",
             source + ", each draw carried through D_i, the blueprint cells, "
             f"the anchors, the weights and the frozen near-tie pairs, and compared with {bayes['controls_per_draw']} "
             "blueprint-matched random subtests drawn from that draw's own cells (the same random keys in every draw). "
             + scope, "",
             markdown_table(pd.DataFrame([
                 ("low-DIF reversal rate, median (90% interval)", f"{_pct(rate[1])} ({_pct(rate[0])}-{_pct(rate[2])})"
                  + notes.mark("bayes/low_dif_reversal_rate_q05_q50_q95")),
                 ("excess over the draw's own matched-random median, median (90% interval)",
                  f"{excess[1]:+.1f} pp ({excess[0]:+.1f} to {excess[2]:+.1f})"
                  + notes.mark("bayes/excess_pp_q05_q50_q95")),
                 ("randomization p computed with each draw's anchors against its own matched-random subtests: "
                  "median (90% interval over the draws); the distribution of a p-value over the DIF posterior, not a "
                  f"posterior probability; smallest attainable p 1/({bayes['controls_per_draw']} + 1) = "
                  f"{1 / (bayes['controls_per_draw'] + 1):.4f}", "{:.3g} ({:.3g}-{:.3g})".format(*_median_first(bayes["draw_p_value_q05_q50_q95"]))
                  + notes.mark("bayes/draw_p_value_q05_q50_q95")),
                 ("share of the posterior draws whose randomization p is <= .05", f"{bayes['share_draws_p_le_05']:.3f}"),
                 ("draws whose DIF Newton fit stopped at its step cap, per fold",
                  " / ".join(str(v) for v in bayes.get("newton_capped_draws", []))),
                 ("share of items with anchor probability < .05 or > .95, per fold",
                  " / ".join(f"{v:.2f}" for v in bayes["anchor_probability_decisive_share"])),
                 *rows,
             ], columns=["quantity", "value"])), "", *notes.lines()]
    lines += ["Every interval here is " + CONDITIONAL + ".", ""]
    pairs = pd.concat([f.posterior[["reversal_probability"]].to_dataframe().assign(fold=f.audit_fold)
                       for f in result.folds])
    uncertain = pairs["reversal_probability"].between(0.1, 0.9).mean() if len(pairs) else np.nan
    eligible = sum(f.eligible for f in result.folds)
    lines += [f"Near-tie pairs whose reversal is uncertain (posterior probability between .1 and .9): "
              f"{_pct(uncertain)} of the {len(pairs):,} near-tie pairs (all of them: the {eligible:,} eligible pairs "
              f"and the {len(pairs) - eligible:,} tied under the deterministic anchor score, which a draw's anchors "
              "can untie; a tie counts as not reversed).", ""]
    return lines


def _sensitivity_section(ds: xr.Dataset, figure: str | None, notes: Notes) -> list[str]:
    rows = []
    for fraction in ds["anchor_fraction"].values:
        for t in ds["threshold"].values:
            v = ds.sel(anchor_fraction=fraction, threshold=t)
            rows.append({"anchor fraction": f"{fraction:g}", "gap <= (pp)": f"{t:g}", "eligible pairs": int(v["eligible"]),
                         "low-DIF (bootstrap range)": f"{_pct(float(v['low_dif_rate']))} "
                         f"({_pct(float(v['bootstrap_lower']))}-{_pct(float(v['bootstrap_upper']))})"
                         + notes.mark(sensitivity_source(fraction, t)),
                         "random median": _pct(float(v["random_median"])),
                         "excess (pp)": f"{100 * (float(v['low_dif_rate']) - float(v['random_median'])):+.1f}",
                         "p": f"{float(v['p_value']):.3g}"})
    lines = ["## Score-gap thresholds and anchor fractions (NT B.4-B.5)", "",
             "Pairs frozen at each threshold from the observed full scores; controls and bootstrap recomputed on the "
             "primary run's replicate streams; anchors rebuilt for each fraction with K frozen. The bootstrap range "
             "is the 2.5-97.5th percentiles of the recomposed rate (NT C.7), not a confidence interval for the "
             "low-DIF rate.", "", markdown_table(pd.DataFrame(rows)), "", *notes.lines()]
    return lines + ([f"![Reversal rate by score gap]({figure})", ""] if figure else [])


def plot_sensitivity(ds: xr.Dataset, path: Path) -> Path:
    """Reversal rate against the near-tie threshold, one panel per anchor fraction (like NT Figure 2)."""
    fractions = ds["anchor_fraction"].values
    fig, axes = plt.subplots(1, fractions.size, figsize=(3.6 * fractions.size, 3.4), sharey=True, squeeze=False)
    x = ds["threshold"].values
    for ax, fraction in zip(axes[0], fractions, strict=True):
        v = ds.sel(anchor_fraction=fraction)
        ax.fill_between(x, 100 * v["random_lower"], 100 * v["random_upper"], color="0.85", label="random 2.5-97.5%")
        ax.plot(x, 100 * v["random_median"], color="0.3", ls="--", marker="o", ms=3, label="random median")
        ax.plot(x, 100 * v["low_dif_rate"], color="C3", marker="o", ms=4, label="low-DIF anchor")
        ax.set_xscale("log")
        ax.set_xticks(x, [f"{t:g}" for t in x])
        ax.set_title(f"anchor fraction {fraction:g}")
        ax.set_xlabel("full-score gap threshold (pp)")
    axes[0, 0].set_ylabel("reversal rate (%)")
    axes[0, 0].legend(frameon=False, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def audit_report(result, summary: dict, responses: xr.Dataset, figure: str | None, curve: str | None = None, *,
                 near_ties_figure: str | None = None) -> str:
    """report.md of the primary audit (``near_ties_figure``: the file name of the near-tie
    leaderboard's figure, shown in its section)."""
    pop = result.population
    status = pop["status"].value_counts()
    lines = [f"# Family-DIF near-tie audit of {responses.attrs.get('name', 'responses')}", "",
             f"{summary['n_items']:,} items x {pop.shape[0]:,} models; {int(status.get('retained', 0)):,} retained "
             f"after the population rules ({', '.join(f'{k}: {v:,}' for k, v in status.items())}); "
             f"{summary['n_representatives']:,} owner x family representatives ranked. Families: "
             f"{', '.join(summary['families'])}. Status: **{summary['status']}**.", ""]
    lines += reading_lines(responses)
    if summary["status"] != "estimated":
        lines += [f"Not estimable: {summary['reason']}.", ""]
    notes = Notes(summary.get("intervals", []))
    lines += ["## Primary result", "", *_headline(summary, notes)]
    if figure:
        lines += [f"![Matched-random controls]({figure})", ""]
    fold_rows = [{"audit fold": f["audit_fold"], "selected K": f["selected_k"], "best-loss K": f["best_k"],
                  "anchors": f["anchors"], "target models": f["target_models"],
                  "near-tie pairs": f.get("near_tie_pairs", "n/a"), "eligible pairs": f["eligible_pairs"],
                  "reversals": f["reversals"], "tau-b": round(f["tau_b"], 4),
                  "Jaccard rounds 2/3": " / ".join(f"{r['jaccard_with_previous']:.2f}" for r in f["purification"][1:])}
                 for f in summary["folds"]]
    lines += ["## Folds", "", "Each audit half selects K (one-SE rule), learns the spectral directions, estimates "
              "residual family DIF and chooses the anchors; the opposite half's representatives are scored.", "",
              markdown_table(pd.DataFrame(fold_rows)), ""]

    if "within_family" in summary:
        lines += _within_section(summary["within_family"]) + posterior_lines(result, "specificity")
    if result.sensitivity is not None:
        lines += _sensitivity_section(result.sensitivity, curve, notes) + posterior_lines(result, "sensitivity")
    if result.owners is not None:
        lines += _owner_shifts(result.owners, notes)
    if result.perturbations is not None:
        table = result.perturbations.copy()
        for col in ("low_dif_rate", "random_median"):
            table[col] = table[col].map(_pct)
        lines += ["## Population perturbations (NT 4.3, D.2)", "",
                  "K frozen per fold at the primary values; 200 matched-random controls each; families need 15 models. "
                  "The pass rule (eq. 59-61) counts benchmarks: 3 of 5 with a positive excess and 3 of 5 with p <= .05.",
                  "", markdown_table(table.round(3)), ""]
    if result.profiles is not None:
        lines += profiles_section(result.profiles) + [""]
    if result.matched is not None:
        lines += matched_section(result.matched) + [""] + posterior_lines(result, "matched")
    if result.replication is not None:
        rep = result.replication
        lines += (replication_section(rep["signatures"], rep["groups"], rep["contributions"]) + [""]
                  + posterior_lines(result, "signatures"))
    if "bayes" in summary:
        lines += _bayes_section(summary["bayes"], result, notes)
    if getattr(result, "near_ties", None) is not None:
        lines += near_ties_lines(result.near_ties, summary["bayes"]["near_ties"], near_ties_figure, notes=notes)
    if summary["warnings"]:
        lines += ["## Warnings", "", *[f"- {w}" for w in summary["warnings"]], ""]
    cfg = summary["config"]
    lines += ["## Settings", "", ", ".join(f"{k} = {v}" for k, v in cfg.items()), "",
              f"Input SHA-256 `{summary['input_sha256']}`. Run time {summary['timings_s'].get('total_s', 0):.1f} s "
              f"({', '.join(f'{k} {v:.1f}' for k, v in summary['timings_s'].items() if k != 'total_s')}).", ""]
    return "\n".join(lines)


def plot_controls(result, path: Path) -> Path:
    """Histogram of matched-random pooled reversal rates with the low-DIF rate marked."""
    c = result.controls.sel(pair_set="primary")
    rates = c["rate"].values
    rates = rates[np.isfinite(rates)]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.hist(100 * rates, bins=min(40, max(10, rates.size // 20)), color="0.7", edgecolor="white")
    ax.axvline(100 * float(c["observed_rate"]), color="C3", lw=2, label="low-DIF anchor")
    ax.axvline(100 * float(c["median"]), color="0.2", ls="--", lw=1, label="random median")
    ax.set_xlabel("near-tie reversal rate (%), pooled over folds")
    ax.set_ylabel("random subtests")
    ax.set_title(f"excess {float(c['excess_pp']):+.1f} pp, p = {float(c['p_value']):.3g}")
    ax.legend(frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _median_first(q) -> tuple[float, float, float]:
    """(median, lower, upper) from the (lower, median, upper) quantiles."""
    return q[1], q[0], q[2]
