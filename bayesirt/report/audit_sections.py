"""Report sections of the audit's diagnostics: capability-profile matching (NT App. G), the
discrimination- and reliability-matched controls (NT B.2) and item-signature replication."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.audit.diagnostics.replication import STATISTICS
from bayesirt.report.markdown import markdown_table

__all__ = ["profiles_section", "matched_section", "replication_section"]


def profiles_section(ds: xr.Dataset) -> list[str]:
    """Markdown lines of the profile-overlap diagnostic: NT Table 13 with coverage per scenario,
    then the matching quality (NT Table 14's fold-averaged medians, and maxima).

    Parameters
    ----------
    ds : xarray.Dataset
        :func:`profile_matching` output.
    """
    low = 100 * float(ds["observed_rate"])
    table = pd.DataFrame({
        "scenario": ds["scenario"].values, "pairs": ds["matched"].sum("fold").values,
        "coverage (%)": 100 * ds["pooled_coverage"].values, "Low (%)": low, "Mix (%)": 100 * ds["median"].values,
        "Δmix (pp)": [f"{v:+.1f}" for v in ds["excess_pp"].values], "p mix": [f"{v:.3g}" for v in ds["p_value"].values],
        "Swap (%)": 100 * ds["swap_rate"].values, "Δswap (pp)": [f"{v:+.1f}" for v in ds["delta_swap_pp"].values],
        "p swap": [f"{v:.3g}" for v in ds["p_swap"].values]})
    quality = pd.DataFrame({
        "scenario": ds["scenario"].values, "median profile RMS": ds["distance_median"].mean("fold").values,
        "max profile RMS": ds["distance_max"].max("fold").values, "median abs Δb": ds["gap_median"].mean("fold").values,
        "max abs Δb": ds["gap_max"].max("fold").values})
    return ["## Capability-profile overlap (exploratory)", "",
            "Within each blueprint cell, low-DIF items are matched to nonselected items on their audit-half spectral "
            "capability profiles and intercepts (cost d² + Δb²; calipers bound both in logits), or paired at random; "
            f"{ds.attrs['replicates']:,} paired-mixture controls keep either endpoint of every pair (NT App. G). "
            "Coverage is the matched share of low-DIF weight; p mix is one-sided, p swap two-sided against "
            "complementary endpoint configurations. Unadjusted, conditional on the pairings; low coverage makes a "
            "control almost the low-DIF subtest, and close profiles do not establish capability-equivalent subtests.",
            "", markdown_table(table), "", markdown_table(quality), ""]


def matched_section(ds: xr.Dataset) -> list[str]:
    """Markdown lines of the discrimination-matched control: reversals per pair set and the
    balance of the low-DIF subtest against the median control (the columns of NT Table 5).

    Parameters
    ----------
    ds : xarray.Dataset
        :func:`discrimination_matched_controls` output.
    """
    reversals = pd.DataFrame([{
        "pair set": str(name), "eligible pairs": int(s["observed_eligible"].sum()),
        "low-DIF (%)": 100 * float(s["observed_rate"]), "control median (%)": 100 * float(s["median"]),
        "excess (pp)": f"{float(s['excess_pp']):+.1f}", "p": f"{float(s['p_value']):.3g}"}
        for name, s in ((n, ds.sel(pair_set=n)) for n in ds["pair_set"].values)])
    balance = pd.DataFrame({
        "diagnostic": ["mean g_i (audit-half spread)", "mean CITC", "SEM", "Cronbach alpha"],
        "low-DIF": ds["observed_mean_balance"].values, "control median": ds["control_median_balance"].values,
        "low-DIF / control": [float(ds["g_ratio"]), float(ds["citc_ratio"]), float(ds["sem_ratio"]), np.nan],
        "10^3 abs difference": [np.nan, np.nan, np.nan, 1e3 * float(ds["abs_delta_alpha"])]})
    return ["## Discrimination- and reliability-matched control", "",
            f"{ds.attrs['replicates']:,} controls per fold, sampled within {ds.attrs['strata_per_cell']} strata of the "
            "audit-half discrimination proxy g_i in every blueprint cell (NT 4.1, D.1 eq. 42-50). Balance is measured "
            "on the held-out target half and averaged over the two folds; ratios near 1 mean close balance.", "",
            markdown_table(reversals), "", markdown_table(balance), ""]


def replication_section(ds_sig: xr.Dataset, ds_groups: xr.Dataset, ds_contrib: xr.Dataset) -> list[str]:
    """Markdown lines summarizing the three diagnostics (a table like NT Table 2, then the group
    checks), for the audit report."""
    share = ds_sig.attrs["top_share"]
    labels = {"median_rho": "median family-wise Spearman rho", "overlap": f"top-{100 * share:g}% overlap precision",
              "agreement": "advantaged-family agreement (overlapping items)"}
    rows = []
    for s in STATISTICS:
        fmt = (lambda v: f"{v:.3f}") if s == "median_rho" else (lambda v: "n/a" if np.isnan(v) else f"{100 * v:.1f}%")
        rows.append(f"| {labels[s]} | {fmt(float(ds_sig['observed'].sel(statistic=s)))} | "
                    f"{fmt(float(ds_sig['null_mean'].sel(statistic=s)))} | "
                    f"{_p(float(ds_sig['p_value'].sel(statistic=s)))} |")
    lines = ["## Item-family signature replication across owner halves (NT 4.4, D.3)", "",
             f"Discovery = {ds_sig.attrs['discovery']}, validation = {ds_sig.attrs['validation']}; delta centred "
             f"within {ds_sig.attrs['n_cells']} common blueprint cells; {ds_sig.attrs['permutations']} within-cell "
             f"permutations of the validation signature (one-sided, smallest p {ds_sig.attrs['min_p']:.3g}). "
             f"Top items: {ds_sig.attrs['n_top']} per half, {ds_sig.attrs['n_overlap']} in both (chance precision "
             f"{100 * ds_sig.attrs['overlap_chance']:.1f}%).", "",
             "| statistic | observed | permutation mean | p |", "|---|---|---|---|", *rows, ""]
    for title, ds, what in (("Item-group effects", ds_groups, "discovery-selected extreme group effects keep their "
                             "sign in validation"),
                            ("Item-group contributions to family shifts", ds_contrib, "extreme contributions keep "
                             "their sign after swapping the folds")):
        if ds.attrs["status"] != "estimated":
            lines += [f"{title}: {ds.attrs['status']}.", ""]
            continue
        p = ds.attrs["p_value"]
        lines += [f"{title}: {ds.attrs['replicated']} of {ds.attrs['checks']} {what} ({100 * ds.attrs['share']:.1f}%, "
                  f"one-sided exact binomial p {'< .001' if p < 0.001 else f'= {_p(p)}'}).", ""]
    return lines


def _p(p: float) -> str:
    return "n/a" if np.isnan(p) else "<.001" if p < 0.001 else f"{p:.3f}".lstrip("0")
