"""Every interval the audit reports, beside the estimate it is printed with, and why it may not
contain it (``summary.json["intervals"]``; report.md prints each note next to its interval).

A record is a dict: ``quantity`` (what the estimate is), ``source`` (where the interval is kept:
a summary key, or ``group/variable[label]`` in audit.nc), ``estimate``, ``lower``, ``upper``,
``interval`` (what the interval is of, under which resampling or model), ``inside`` (the estimate
lies in ``[lower, upper]``; None when a value is undefined) and ``note`` (a sentence when
``inside`` is False, else None).

Why the composition-bootstrap range can miss the observed rate (NT C.7 and its Table 11, where
BBH's 42.1% lies above 18.9-39.2%): a replicate resamples item units with replacement and
recomputes both scores, while the near-tie pairs stay frozen from the observed full scores. The
resampling widens the frozen pairs' full-score gaps, and pairs further apart reverse less often,
so the replicate rates centre below the observed one. The range describes how the rate moves when
the benchmark is recomposed, not a confidence interval for the observed rate. The bootstrap's band
counts (:func:`bayesirt.audit.engine.bootstrap.composition_bootstrap`) give the numbers of each run: on
the Open LLM Leaderboard MMLU file (issue 32: 42.3% against 16.6-40.2%, replicate mean 27.7%),
20% of the eligible pair-replicates stay within 1 pp and reverse at 41.7%, the rest at 24.0%.
The bootstrap's tau-b range tends to lie below the observed tau-b for a second reason: a
replicate holds about 63% of the distinct units (1 - 1/e), some several times, so both scores
rest on fewer distinct items and agree less in rank (on the simulated DIF benchmark of the tests,
observed .863; replicate mean .813; the same units once each, .833).
"""

from __future__ import annotations

import numpy as np

__all__ = ["interval_record", "audit_intervals", "recomposition_note", "format_value", "NEAR_TIE_GAP_SOURCE",
           "owner_source", "sensitivity_source"]

#: ``source`` of the record of the near-tie pairs' full-score gaps against their accuracy-gap intervals.
NEAR_TIE_GAP_SOURCE = "near_ties.csv/gap_lower_pp,gap_upper_pp"

_BOOTSTRAP = ("2.5th-97.5th percentiles of the rate recomputed over {replicates:,} composition-bootstrap replicates "
              "({count} {units} resampled with replacement, both scores recomposed, near-tie pairs frozen; NT C.7)")


def owner_source(family) -> str:
    """``source`` of a family's owner-bootstrap interval."""
    return f"owners/shift_lower,shift_upper[{family}]"


def sensitivity_source(anchor_fraction: float, threshold_pp: float) -> str:
    """``source`` of the bootstrap range at one anchor fraction and gap threshold (pp)."""
    return f"sensitivity/bootstrap_lower,bootstrap_upper[{anchor_fraction:g},{threshold_pp:g}]"


def format_value(value: float, unit: str) -> str:
    """``value`` as the report prints it: "rate" in percent, "pp" signed, "p" and "tau" plain."""
    if value is None or not np.isfinite(value):
        return "n/a"
    return {"rate": f"{100 * value:.1f}%", "pp": f"{value:+.1f} pp", "p": f"{value:.3g}"}.get(unit, f"{value:.3f}")


def interval_record(quantity: str, estimate, lower, upper, *, interval: str, source: str, unit: str,
                    note: str | None = None) -> dict:
    """One record (module notes). ``note``: the sentence to print when the estimate lies outside;
    a generic one is written when it does and none is given."""
    values = [None if v is None or not np.isfinite(v) else float(v) for v in (estimate, lower, upper)]
    inside = None if None in values else bool(values[1] <= values[0] <= values[2])
    if inside is False and note is None:
        side = "above" if values[0] > values[2] else "below"
        note = (f"The {quantity} ({format_value(values[0], unit)}) lies {side} this interval "
                f"({format_value(values[1], unit)} to {format_value(values[2], unit)}): the interval is the "
                f"{interval}, a different summary than this estimate, so it need not contain it.")
    return {"quantity": quantity, "source": source, "estimate": values[0], "lower": values[1], "upper": values[2],
            "interval": interval, "unit": unit, "inside": inside, "note": note if inside is False else None}


def recomposition_note(observed: float, lower: float, upper: float, *, mean: float, band: float,
                       in_band_share: float, rate_in_band: float, rate_out_band: float) -> str | None:
    """The sentence printed when an observed reversal rate lies outside its composition-bootstrap
    range (module notes), with this run's band counts; None when it lies inside."""
    if not all(np.isfinite(v) for v in (observed, lower, upper)) or lower <= observed <= upper:
        return None
    side = "above" if observed > upper else "below"
    text = (f"The observed rate {format_value(observed, 'rate')} lies {side} its composition-bootstrap range "
            f"(replicate mean {format_value(mean, 'rate')}). The range is the spread of the rate recomputed on "
            "recomposed benchmarks, not a confidence interval for the observed rate (as in NT Table 11): each "
            "replicate resamples item units and recomputes both scores while the near-tie pairs stay frozen from the "
            "observed full scores")
    if np.isfinite(in_band_share):
        text += (f", which moves their full-score gaps: in the replicates only {100 * in_band_share:.0f}% of the "
                 f"eligible pairs still differ by at most {100 * band:g} pp on the recomposed full score")
        if np.isfinite(rate_in_band) and np.isfinite(rate_out_band):
            text += (f"; those pairs reverse at {format_value(rate_in_band, 'rate')} in the replicates and the "
                     f"rest at {format_value(rate_out_band, 'rate')}")
    return text + "."


def _composition(result) -> list[dict]:
    boot = result.composition
    b = boot.sel(pair_set="primary")
    what = _BOOTSTRAP.format(replicates=boot.sizes["replicate"], count=boot.attrs.get("unit_count", "the"),
                             units=boot.attrs["units"])
    observed = float(b["observed_rate"])
    rate = interval_record("low-DIF reversal rate", observed, float(b["rate_lower"]), float(b["rate_upper"]),
                           interval=what, source="bootstrap_rate_range", unit="rate",
                           note=recomposition_note(observed, float(b["rate_lower"]), float(b["rate_upper"]),
                                                   mean=float(b["rate_mean"]), band=float(b["band"]),
                                                   in_band_share=float(b["in_band_share"]),
                                                   rate_in_band=float(b["rate_in_band"]),
                                                   rate_out_band=float(b["rate_out_band"])))
    observed_tau, lower, upper = (float(boot[k]) for k in ("observed_mean_tau_b", "tau_lower", "tau_upper"))
    tau_note = None
    if np.isfinite([observed_tau, lower, upper]).all() and not lower <= observed_tau <= upper:
        distinct = float((boot["multiplicity"].values > 0).mean())
        tau_note = (f"The observed mean tau-b {observed_tau:.3f} lies {'above' if observed_tau > upper else 'below'} "
                    f"its composition-bootstrap range (replicate mean {float(boot['tau_mean']):.3f}). The range is "
                    "the spread of tau-b on recomposed benchmarks, not a confidence interval for the observed value: "
                    f"a replicate holds on average {100 * distinct:.0f}% of the units, some of them several times, so "
                    "both scores rest on fewer distinct items, and two scores from fewer items agree less in rank.")
    tau = interval_record("mean fold Kendall tau-b", observed_tau, lower, upper, unit="tau",
                          source="bootstrap_tau_b_range", note=tau_note,
                          interval=what.replace("the rate", "the mean fold tau-b") + ", replicate mean "
                          f"{float(boot['tau_mean']):.3f}")
    return [rate, tau]


def _sensitivity(ds) -> list[dict]:
    records = []
    for anchor_fraction in ds["anchor_fraction"].values:
        for t in ds["threshold"].values:
            v = ds.sel(anchor_fraction=anchor_fraction, threshold=t)
            observed, lower, upper = (float(v[k]) for k in ("low_dif_rate", "bootstrap_lower", "bootstrap_upper"))
            note = recomposition_note(observed, lower, upper, mean=float(v["bootstrap_mean"]), band=t / 100,
                                      in_band_share=float(v["bootstrap_in_band_share"]),
                                      rate_in_band=float(v["bootstrap_rate_in_band"]),
                                      rate_out_band=float(v["bootstrap_rate_out_band"]))
            records.append(interval_record(
                f"low-DIF reversal rate at anchor fraction {anchor_fraction:g}, gap <= {t:g} pp", observed, lower, upper,
                unit="rate", note=note, source=sensitivity_source(anchor_fraction, t),
                interval=f"2.5th-97.5th percentiles of the recomposed rate over {ds.attrs['bootstrap']:,} "
                         "composition-bootstrap replicates (NT C.7), pairs frozen at this threshold"))
    return records


def _owners(owners) -> list[dict]:
    what = (f"2.5th-97.5th percentiles of the family's mean shift over {owners.sizes['replicate']:,} owner-bootstrap "
            "replicates (NT D.1 eq. 57-58)")
    records = []
    for family in owners["family"].values:
        o = owners.sel(family=family)
        est, lo, hi = 100 * float(o["observed_shift"]), 100 * float(o["shift_lower"]), 100 * float(o["shift_upper"])
        note = None
        if np.isfinite([est, lo, hi]).all() and not lo <= est <= hi:
            note = (f"{family}'s observed mean shift ({est:+.2f} pp) lies outside its owner-bootstrap percentiles "
                    f"({lo:+.2f} to {hi:+.2f} pp): percentiles of resampled means need not contain the observed mean "
                    "when their distribution is skewed or lumpy (few owners, or a few owners with large shifts); the "
                    "interval describes owner-resampling variability.")
        records.append(interval_record(f"mean score shift of {family} (pp)", est, lo, hi, interval=what, unit="pp",
                                       source=owner_source(family), note=note))
    return records


def _bayes(bayes: dict) -> list[dict]:
    labels = {"low_dif_reversal_rate": ("low-DIF reversal rate, posterior median", "rate"),
              "control_median": ("matched-random median, posterior median", "rate"),
              "excess_pp": ("excess over the draw's own matched-random median, posterior median", "pp"),
              "draw_p_value": ("randomization p over the posterior draws, median", "p")}
    return [interval_record(label, q[1], q[0], q[2], unit=unit, source=f"bayes/{name}_q05_q50_q95",
                            interval="5th-95th percentiles over the posterior draws of the Bayesian layer")
            for name, (label, unit) in labels.items() if (q := bayes.get(f"{name}_q05_q50_q95")) is not None]


def _posterior_counterparts(bayes_tree) -> list[dict]:
    """The posterior means and equal-tailed intervals of the diagnostics' posterior counterparts."""
    records = []
    for name, node in bayes_tree.children.items():
        ds = node.to_dataset()
        for var in ds.data_vars:
            if not var.endswith("_quantiles") or f"{var[:-10]}_mean" not in ds:
                continue
            q, mean = ds[var], ds[f"{var[:-10]}_mean"]
            quantile_dim = [d for d in q.dims if d not in mean.dims][0]
            for index in np.ndindex(mean.shape):
                where = dict(zip(mean.dims, index, strict=True))
                lo, _, hi = (float(x) for x in q.isel(where).transpose(quantile_dim).values)
                label = ",".join(str(mean[d].values[i]) for d, i in where.items() if d in mean.coords)
                records.append(interval_record(f"{name}: {var[:-10]}, posterior mean", float(mean.isel(where)), lo,
                                               hi, unit="value", source=f"bayes/{name}/{var}[{label}]",
                                               interval="90% equal-tailed posterior interval (5th-95th percentiles "
                                                        "of the draws), whose mean may lie outside when the draws "
                                                        "are very skewed"))
    return records


def _near_ties(table) -> list[dict]:
    if table is None or not len(table):
        return []
    gap, lo, hi = (table[c].to_numpy(float) for c in ("full_gap_pp", "gap_lower_pp", "gap_upper_pp"))
    outside = int((np.isfinite(lo) & ((gap < lo) | (gap > hi))).sum())
    note = None
    if outside:
        note = (f"{outside:,} of the {len(table):,} eligible pairs have a full-score gap outside the 90% posterior "
                "interval of their accuracy gap: the interval comes from the paired model (items both models answered, "
                "discordant items by item group, Jeffreys prior), the full-score gap from each model's own answered "
                "items, and they need not agree when responses are missing or few items are discordant.")
    return [{"quantity": "full-score gap of each eligible pair (pp)", "source": NEAR_TIE_GAP_SOURCE,
             "estimate": None, "lower": None, "upper": None, "unit": "pp", "pairs": int(len(table)), "outside": outside,
             "interval": "90% posterior interval of the pair's accuracy gap (paired model)", "inside": outside == 0,
             "note": note}]


def audit_intervals(result, summary: dict) -> list[dict]:
    """Records of every interval of the audit's summary and report (module notes)."""
    records = []
    if result.controls is not None:
        c = result.controls.sel(pair_set="primary")
        records.append(interval_record(
            "matched-random median", float(c["median"]), float(c["lower"]), float(c["upper"]), unit="rate",
            source="matched_random_interval",
            interval="2.5th-97.5th percentiles of the matched-random rates (NT C.6), a reference distribution for the "
                     "low-DIF rate, not its interval"))
    if result.composition is not None:
        records += _composition(result)
    if result.sensitivity is not None:
        records += _sensitivity(result.sensitivity)
    if result.owners is not None:
        records += _owners(result.owners)
    if "bayes" in summary:
        records += _bayes(summary["bayes"])
    if result.bayes is not None:
        records += _posterior_counterparts(result.bayes)
    records += _near_ties(getattr(result, "near_ties", None))
    return records
