"""Report of a simulation-based calibration run: the Markdown section and the rank histograms."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats  # noqa: E402

from bayesirt.report.markdown import markdown_table  # noqa: E402
from bayesirt.workflow.sbc import SBCResult  # noqa: E402

__all__ = ["sbc_section", "plot_rank_histograms", "LEVEL", "FAMILY_LABELS"]

#: Significance level of the verdicts in the report.
LEVEL = 0.01
FAMILY_LABELS = {"theta": "ability (theta)", "discrimination": "discrimination (a)", "difficulty": "difficulty (b)",
                 "intercept": "intercept (d)", "guessing": "guessing (c)", "slip": "slip (s)"}
_UNIFORM_SD = 1 / np.sqrt(12)


def _reading(row) -> str:
    if row.p_value > LEVEL:
        return "consistent with uniform"
    width = ("posterior too narrow (U-shaped ranks)" if row.rank_sd > _UNIFORM_SD * 1.03
             else "posterior too wide (peaked ranks)" if row.rank_sd < _UNIFORM_SD * 0.97 else "")
    bias = ("truth tends to lie below the posterior" if row.rank_mean < 0.47
            else "truth tends to lie above the posterior" if row.rank_mean > 0.53 else "")
    return "miscalibrated: " + ("; ".join(x for x in (width, bias) if x) or "non-uniform shape")


def _tests_table(tests: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "family": [FAMILY_LABELS.get(f, f) for f in tests["family"]],
        "ranks": [f"{r} x {m}" for r, m in zip(tests["replicates"], tests["elements"], strict=True)],
        "Pearson X2 (pooled)": tests["pearson_x2"].map(lambda v: f"{v:.1f}"),
        "design effect": tests["design_effect"].map(lambda v: f"{v:.2f}"),
        "corrected X2": tests["x2"].map(lambda v: f"{v:.1f}"),
        "df": tests["df"].map(lambda v: f"{v:.1f}"),
        "p": tests["p_value"].map(lambda v: f"{v:.3g}"),
        "mean rank": tests["rank_mean"].map(lambda v: f"{v:.3f}"),
        "rank sd (0.289)": tests["rank_sd"].map(lambda v: f"{v:.3f}"),
        "90% coverage": tests["coverage_90"].map(lambda v: f"{v:.1%}"),
        "reading": [_reading(r) for r in tests.itertuples()],
    })


def sbc_section(result: SBCResult, figure: str | None = None) -> list[str]:
    """Markdown lines: settings, the uniformity tests, the replicate diagnostics, the figure."""
    ranks, tests = result.ranks, result.tests
    s = json.loads(ranks.attrs["bayesirt_settings"])
    n_draws, bins = ranks.attrs["draws_L"], ranks.attrs["bins"]
    fitted = (f"NUTS (nutpie), {s['chains']} chains x {s['draws']} draws after {s['tune']} tuning steps"
              if s["method"] == "nuts" else f"{s['method']} ({s['draws']} draws from the approximation)")
    lines = [
        "## Simulation-based calibration", "",
        f"Spec `{s['spec']}`, design {s['design'][0]} models x {s['design'][1]} items, {s['replicates']} replicates "
        f"(seed {s['seed']}, {s['wall_seconds']:.0f} s wall). Each replicate draws parameters from the spec's priors, "
        f"simulates responses, fits them by {fitted}, keeps "
        + (f"every {s['thin']}th draw of each chain" if s["thin"] > 1 else "every draw") + f" (L = {n_draws}) and records the "
        "rank of each true value among those draws (0..L). Calibrated inference gives uniform ranks "
        "(Talts et al. 2018).", "",
        f"Test: ranks binned into {bins} bins (rank k in bin floor(k * {bins} / (L + 1))); Pearson X2 of the pooled "
        "histogram with the second-order Rao-Scott correction for the dependence of ranks within a replicate (they "
        "share one data set and one fit): X2 / (mean design effect x (1 + a^2)) against chi2 with "
        f"({bins - 1}) / (1 + a^2) df, a the coefficient of variation of the design effects, estimated from the "
        f"spread between replicates (`bayesirt.workflow.sbc`). Verdict at the {LEVEL:g} level. Normalized ranks "
        "(rank + 0.5) / (L + 1) have mean 0.5 and sd 0.289 when uniform; the 90% coverage is the share of true "
        "values inside the central 90% posterior interval.", "",
        markdown_table(_tests_table(tests)), "",
    ]
    lines += _diagnostics_lines(result, n_draws)
    if figure:
        lines += [f"![Rank histograms]({figure})", ""]
    return lines


def _diagnostics_lines(result: SBCResult, n_draws: int) -> list[str]:
    d = result.ranks
    n = d.sizes["replicate"]
    fit_s = d["fit_seconds"].values
    out = ["### Replicate diagnostics", ""]
    if np.isfinite(d["max_rhat"].values).any():
        rhat, div, ess = d["max_rhat"].values, d["divergences"].values, d["min_ess_bulk"].values
        bad = (rhat > 1.01) | (div > 0)
        out += [
            f"- max R-hat over all parameters: median {np.nanmedian(rhat):.3f}, worst {np.nanmax(rhat):.3f}; "
            f"{int((rhat > 1.01).sum())} of {n} replicates above 1.01.",
            f"- divergent transitions: {int(np.nansum(div))} in total, in {int((div > 0).sum())} of {n} replicates.",
            f"- smallest bulk ESS per replicate: median {np.nanmedian(ess):.0f}; {int((ess < n_draws).sum())} of {n} "
            f"replicates below L = {n_draws} (thinned draws then still carry autocorrelation).",
            "- replicates with any problem (R-hat > 1.01 or divergences): "
            + (", ".join(str(int(r)) for r in d["replicate"].values[bad][:30]) or "none")
            + (" ..." if bad.sum() > 30 else "") + ".",
        ]
    if np.isfinite(d["advi_converged"].values).any():
        conv = d["advi_converged"].values
        out.append(f"- ADVI reached its convergence criterion in {int(np.nansum(conv))} of {n} replicates.")
    out += [f"- fit time per replicate: median {np.median(fit_s):.1f} s, max {np.max(fit_s):.1f} s.", ""]
    return out


def plot_rank_histograms(result: SBCResult, path: Path) -> Path:
    """One panel per parameter family: the pooled rank histogram (share of ranks per bin, relative
    to the uniform share) with the 99% band of a uniform histogram of the same effective size
    (pooled count divided by the design effect)."""
    fams = result.families
    tests = result.tests.set_index("family")
    n_draws, bins = result.ranks.attrs["draws_L"], result.ranks.attrs["bins"]
    p0 = np.bincount(np.arange(n_draws + 1) * bins // (n_draws + 1), minlength=bins) / (n_draws + 1)
    cols = min(3, len(fams))
    rows = int(np.ceil(len(fams) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    x = np.arange(bins)
    for ax, fam in zip(axes.ravel(), fams, strict=False):
        r = result.ranks[fam].values.ravel()
        counts = np.bincount(r * bins // (n_draws + 1), minlength=bins)
        n = r.size
        n_eff = max(1.0, n / max(tests.loc[fam, "design_effect"], 1.0))
        lo = stats.binom.ppf(0.005, np.round(n_eff), p0) / np.round(n_eff) / p0
        hi = stats.binom.ppf(0.995, np.round(n_eff), p0) / np.round(n_eff) / p0
        ax.fill_between(np.r_[x, bins] - 0.5, np.r_[lo, lo[-1]], np.r_[hi, hi[-1]], step="post", color="0.8",
                        label="99% band, uniform")
        share = counts / n / p0
        ax.stairs(share, np.r_[x, bins] - 0.5, baseline=None, color="C0", lw=1.6, label="ranks")
        ax.axhline(1.0, color="0.3", lw=0.8)
        ax.set_title(f"{FAMILY_LABELS.get(fam, fam)}  p = {tests.loc[fam, 'p_value']:.2g}", fontsize=9)
        ax.set_xlabel(f"rank bin (L = {n_draws}, {bins} bins)", fontsize=8)
        ax.set_ylabel("share / uniform share", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes.ravel()[len(fams):]:
        ax.set_visible(False)
    axes.ravel()[0].legend(fontsize=7, loc="lower center")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
