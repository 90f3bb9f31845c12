"""report.md lines of the posterior counterparts of the audit's diagnostics
(:mod:`bayesirt.audit.bayes.diagnostics`), each placed right after its deterministic section."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.audit.bayes.posterior import INTERVAL
from bayesirt.audit.engine.result import AuditResult
from bayesirt.report.markdown import markdown_table

__all__ = ["posterior_lines", "specificity_lines", "matched_lines", "sensitivity_lines", "signatures_lines"]


def _pct(v: float) -> str:
    return "n/a" if not np.isfinite(v) else f"{100 * v:.1f}%"


def _interval(ds: xr.Dataset, name: str, fmt, **where) -> str:
    pick = (lambda v: v.sel(**where)) if where else (lambda v: v)
    lo, _, hi = (float(x) for x in pick(ds[f"{name}_quantiles"]).values)
    return f"{fmt(float(pick(ds[f'{name}_mean'])))} ({fmt(lo)} to {fmt(hi)})"


def _pp(v: float) -> str:
    return "n/a" if not np.isfinite(v) else f"{v:+.1f}"


def _prob(v) -> str:
    v = float(v)
    return "n/a" if not np.isfinite(v) else f"{v:.3f}"


def _intro(ds: xr.Dataset) -> str:
    return (f"Posterior mean ({100 * INTERVAL:g}% equal-tailed interval, conditional on the spectral working model) "
            f"over {ds.sizes['draw']:,} draws of the Bayesian layer, each draw's anchors carried through the diagnostic")


def specificity_lines(ds: xr.Dataset) -> list[str]:
    """Markdown lines of :func:`posterior_specificity`."""
    rows = [("within-family low-DIF reversal rate", _interval(ds, "within_rate", _pct),
             _pct(float(ds["deterministic_within_rate"])), "n/a"),
            ("within excess (pp)", _interval(ds, "within_excess_pp", _pp),
             _pp(float(ds["deterministic_within_excess_pp"])), _prob(ds["prob_within_excess_pp_positive"])),
            ("cross-minus-within gap G (pp)", _interval(ds, "gap_pp", _pp), _pp(float(ds["deterministic_gap_pp"])),
             _prob(ds["prob_gap_pp_positive"])),
            ("specificity G - median G_r (pp)", _interval(ds, "specificity_pp", _pp),
             _pp(float(ds["deterministic_specificity_pp"])), _prob(ds["prob_specificity_pp_positive"]))]
    return ["### Posterior counterpart (Bayesian layer)", "",
            _intro(ds) + "; the matched-random replicates stay the deterministic run's. p-values stay deterministic.",
            "", markdown_table(pd.DataFrame(rows, columns=["quantity", "posterior mean (90% interval)",
                                                           "deterministic", "P(> 0)"])), ""]


def matched_lines(ds: xr.Dataset) -> list[str]:
    """Markdown lines of :func:`posterior_matched_controls`."""
    det = "deterministic_excess_pp" in ds
    rows = [{"quantity": f"excess reversals, {s} pairs (pp)", "posterior mean (90% interval)":
             _interval(ds, "excess_pp", _pp, pair_set=s),
             "deterministic": _pp(float(ds["deterministic_excess_pp"].sel(pair_set=s))) if det else "n/a",
             "P(> 0)": _prob(ds["prob_excess_pp_positive"].sel(pair_set=s))} for s in ds["pair_set"].values]
    fmt = lambda v: "n/a" if not np.isfinite(v) else f"{v:.3f}"  # noqa: E731
    for key, label in (("g_ratio", "g_i ratio"), ("citc_ratio", "CITC ratio"), ("sem_ratio", "SEM ratio"),
                       ("abs_delta_alpha", "|delta alpha|")):
        rows.append({"quantity": label, "posterior mean (90% interval)": _interval(ds, key, fmt),
                     "deterministic": fmt(float(ds[f"deterministic_{key}"])) if det else "n/a", "P(> 0)": ""})
    return ["### Posterior counterpart (Bayesian layer)", "",
            _intro(ds) + f": {ds.attrs['replicates']:,} discrimination-matched controls per draw and fold, re-drawn "
            "for each draw and matched to its anchors (strata cut in the draw's cells; common random streams across "
            "draws). Randomization p-values stay deterministic.", "",
            markdown_table(pd.DataFrame(rows)), ""]


def sensitivity_lines(ds: xr.Dataset) -> list[str]:
    """Markdown lines of :func:`posterior_sensitivity`."""
    rows = []
    has_excess = "excess_pp" in ds
    for a in ds["anchor_fraction"].values:
        for t in ds["threshold"].values:
            row = {"anchor fraction": f"{a:g}", "gap <= (pp)": f"{t:g}",
                   "low-DIF rate": _interval(ds, "low_dif_rate", _pct, anchor_fraction=a, threshold=t)}
            if has_excess:
                row |= {"excess (pp)": _interval(ds, "excess_pp", _pp, anchor_fraction=a, threshold=t),
                        "deterministic excess": _pp(float(ds["deterministic_excess_pp"].sel(anchor_fraction=a, threshold=t))),
                        "P(excess > 0)": _prob(ds["prob_excess_pp_positive"].sel(anchor_fraction=a, threshold=t))}
            rows.append(row)
    return ["### Posterior counterpart (Bayesian layer)", "",
            _intro(ds) + "; pairs frozen per threshold, matched-random medians frozen per cell; at fractions other "
            "than the primary one the draws are moved to that purification's fit (location shift).", "",
            markdown_table(pd.DataFrame(rows)), ""]


def signatures_lines(ds: xr.Dataset) -> list[str]:
    """Markdown lines of :func:`posterior_signatures`."""
    labels = {"median_rho": "median family-wise Spearman rho", "overlap": "top-share overlap precision",
              "agreement": "advantaged-family agreement"}
    det = "deterministic_value" in ds
    rows = []
    for s in ds["statistic"].values:
        fmt = (lambda v: "n/a" if not np.isfinite(v) else f"{v:.3f}") if s == "median_rho" else _pct
        rows.append({"statistic": labels[str(s)],
                     "posterior mean (90% interval)": _interval(ds, "value", fmt, statistic=s),
                     "deterministic": fmt(float(ds["deterministic_value"].sel(statistic=s))) if det else "n/a",
                     "permutation p (deterministic)": f"{float(ds['p_value'].sel(statistic=s)):.3g}" if det else "n/a",
                     "undefined draws": int(ds["value_undefined"].sel(statistic=s))})
    return ["### Posterior counterpart (Bayesian layer)", "",
            _intro(ds) + ": draw s of both halves (independent posteriors, paired by index), moved to the final "
            "refits, with common cells from the draw's easiness. The permutation p-values are the deterministic "
            "ones; they are not recomputed per draw.", "",
            markdown_table(pd.DataFrame(rows)), ""]


#: Report lines of each posterior counterpart held in ``AuditResult.bayes``.
_LINES = {"specificity": specificity_lines, "sensitivity": sensitivity_lines, "matched": matched_lines,
          "signatures": signatures_lines}


def posterior_lines(result: AuditResult, name: str) -> list[str]:
    """report.md lines of the posterior counterpart ``name`` ("specificity", "sensitivity",
    "matched" or "signatures"), placed by :func:`bayesirt.report.audit.audit_report` right after
    its deterministic section; empty when the audit holds none."""
    if result.bayes is None or name not in result.bayes.children:
        return []
    return _LINES[name](result.bayes[name].to_dataset())
