"""Planted-DIF recovery of the audit: AUC of the final D_i for the planted items, on the DIF
benchmark generator (3 families, one model per family per owner, 400 items in 4 interleaved
groups, DIF on half the items), at NT's example size (32 models per family) and with plenty of
models (400 per family), over 5 seeds x 2 audit folds.

Usage: ``python benchmarks/nt_dif_recovery.py`` (about a minute); writes
``benchmarks/results/nt_dif_recovery.md``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.stats import rankdata

from bayesirt.audit import AuditConfig, run_audit
from bayesirt.data import simulate_dif_benchmark

SIZES = (32, 400)
SEEDS = range(5)


def auc(score, label) -> float:
    r = rankdata(score)
    n1, n0 = label.sum(), (~label).sum()
    return float((r[label].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def main() -> None:
    lines = ["# Planted-DIF recovery (AUC of D_i, planted vs clean items)", "",
             "| models per family | per audit half | AUC mean | AUC min | runs |", "|---|---|---|---|---|"]
    for owners in SIZES:
        aucs = []
        for seed in SEEDS:
            ds, truth = simulate_dif_benchmark(n_owners=owners, n_items=400, seed=seed)
            result = run_audit(ds, AuditConfig(quick=True, controls=9, composition_bootstrap=9, owner_bootstrap=9), progress=False)
            aucs += [auc(f.purification.final_fit.dif_range, np.asarray(truth["dif_items"])) for f in result.folds]
        lines.append(f"| {owners} | {owners // 2} | {np.mean(aucs):.3f} | {np.min(aucs):.3f} | {len(aucs)} |")
        print(lines[-1], flush=True)
    out = Path(__file__).parent / "results" / "nt_dif_recovery.md"
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
