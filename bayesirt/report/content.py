"""Reports of the NT content audit (D.4; :mod:`bayesirt.audit.diagnostics.content`) and of the exact-common-model
comparison of two audits (B.7; :mod:`bayesirt.audit.diagnostics.common_models`)."""

from __future__ import annotations

import pandas as pd

from bayesirt.audit.diagnostics.content import ContentAudit
from bayesirt.report.markdown import markdown_table

__all__ = ["content_report", "common_models_report"]


def _pp(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    return frame.assign(**{f"{column}_pp": 100 * frame[column]}).drop(columns=column)


def content_report(result: ContentAudit, source: str) -> str:
    s = result.summary
    r, c, f = s["reliability"], s["confirmatory"], s["family"]
    verdict = f"passes on {', '.join(c['axes_passing'])}" if c["passes"] else "no axis passes"
    largest = "; ".join(f"{a}: {v['axis']} {100 * v['difference']:+.1f} points (q = {v['q']:.3f})"
                        for a, v in s["largest_difference"].items())
    lines = [
        f"# Blinded content audit of {source}", "",
        f"{s['n_pairs']} matched pairs ({s['n_items']} items) labelled by {' and '.join(s['annotators'])}.", "",
        "## Reliability (NT eq. 73)", "",
        f"Median Cohen's kappa {r['median_kappa']:.3f} over {r['n_kappa_axes']} non-degenerate binary axes; "
        f"median Spearman rho {r['median_spearman']:.3f} over {r['n_spearman_axes']} ordinal axes: "
        f"{'passes' if r['passes'] else 'fails'} (needs >= 0.45 and >= 0.50).", "",
        markdown_table(result.agreement), "",
        "## Paired binary differences (high-DIF minus control, exact McNemar, BH per annotator)", "",
        markdown_table(_pp(result.binary, "difference")), "",
        f"Largest absolute difference per annotator: {largest}.", "",
        "## Confirmatory rule (both annotators: same direction, q <= .05, |d| >= 8 points, >= 3 benchmarks)", "",
        markdown_table(result.confirmatory), "",
        f"Confirmatory content audit: {verdict}.",
        "", "## Ordinal axes (paired Wilcoxon, BH per annotator; not confirmatory)", "",
        markdown_table(result.ordinal), "",
        "## Exploratory family direction (benchmark-stratified label permutation)", "",
        f"{f['n_stable']} of {f['n_high_dif']} high-DIF items have the same advantaged family in both halves; "
        f"{f['permutations']:,} permutations, seed {f['seed']}.", "",
        markdown_table(result.family), "",
    ]
    return "\n".join(lines)


def common_models_report(table: pd.DataFrame, left, right, *, replicates: int, families, derive_families: bool) -> str:
    """report.md of ``bayesirt audit-compare`` (:func:`bayesirt.audit.diagnostics.common_models.exact_common_shifts`)."""
    shown = table[["family", "models", "owners", "left_shift_pp", "right_shift_pp", "difference_shift_pp",
                   "difference_lower_pp", "difference_upper_pp", "direction_change"]].round(2)
    lines = ["# Exact-common-model directional checks (NT B.7)", "",
             f"Left: `{left}`; right: `{right}`. Family mean anchor-minus-full shifts (percentage points) over "
             f"the models scored in both audits; 95% intervals from {replicates:,} owner-bootstrap replicates "
             "(the same owner draws for left, right and their difference). `direction_change`: the shift "
             "changes sign and the interval of right - left excludes 0.", "",
             "Family labels: " + ("derived from the model ids (NT C.1)" if derive_families else
                                  "as the audits wrote them")
             + ("" if families is None else f"; restricted to {', '.join(families)}") + ".", "",
             markdown_table(shown), "",
             "These are descriptive consequences of benchmark composition, not intrinsic family rankings."]
    return "\n".join(lines) + "\n"
