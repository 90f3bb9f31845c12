"""Where issue 46's short cell comes from: the paired model's calls within 3 pp at 30% missing cells, by the
accuracy level of the pair and by the strata weights.

``audit_calibration``'s generator (default ``3pl``, uneven 20-200-item groups ``mixed``, 120 models x 1,000
items), benchmark seeds as there, the pairs within 5 pp on the items both answered (``audit_calibration.select``),
at 0% and 30% missing cells. Per pair: the paired posterior (``paired_accuracy`` with the design's strata weights,
as the audit), its standardized error z = (true gap - posterior mean) / posterior sd (sd from the 90% interval,
width / 3.29), and the pair's mean observed accuracy (own-item full scores: data, not truth, so the bins are a
valid conditioning of a calibrated posterior, whose z has mean 0 and sd 1 in every bin). Calls: P(a ahead) >= .95
or <= .05; right: in the true order. Also the calls within 3 pp under two other strata weightings: each pair's
own both-answered composition (``weights=None``) and one stratum (the groups ignored).

Usage::

    .venv/bin/python benchmarks/paired_calibration_by_level.py --seeds 60 \\
        --out benchmarks/results/paired_calibration_by_level.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import audit_calibration as ac  # noqa: E402
from _common import report, run_header, run_header_lines  # noqa: E402

MISSING = (0.0, 0.3)
LEVELS = (0.0, 0.5, 0.7, 0.8, 0.85, 0.9, 1.0001)
WEIGHTINGS = ("design", "own composition", "one stratum")


def _pairs(kind: str, size, seeds: range) -> dict:
    """Per missing share, one row per pair: stated P(a ahead), truth, z, mean observed accuracy, both-answered
    gap, and the calls within 3 pp of the other weightings."""
    from bayesirt.audit.bayes.paired import discordant_counts, paired_accuracy, paired_strata

    k = ac.SIZES.index(size)
    out = {m: [] for m in MISSING}
    for seed in seeds:
        sim = ac.simulate(kind, size, 1000 * k + seed + 100 * ac.KINDS.index(kind))  # audit_calibration's seeds
        stratum, weights, _ = paired_strata(sim["group"])
        for missing in MISSING:
            observed = np.random.default_rng(seed + 77).random(sim["y"].shape) >= missing
            y = np.where(observed, sim["y"], 0)
            gap, full = ac.both_gaps(y, observed)
            a, b = ac.select("both", y, observed, full, 0.05)
            counts = discordant_counts(y, observed, stratum, (a, b))
            truth = sim["truth"][a] - sim["truth"][b]
            fits = [paired_accuracy(*counts, weights=weights, seed=seed), paired_accuracy(*counts, seed=seed),
                    paired_accuracy(*(c.sum(axis=1, keepdims=True) for c in counts), seed=seed)]
            design = fits[0]
            sd = (design["gap_upper"] - design["gap_lower"]).to_numpy() / (2 * 1.6448536269514722)
            out[missing].append(np.column_stack([
                design["prob_a_ahead"], truth, (truth - design["gap_mean"].to_numpy()) / sd, (full[a] + full[b]) / 2,
                gap[a, b], *(f["prob_a_ahead"].to_numpy() for f in fits[1:])]))
        print(f"seed {seed}", flush=True)
    return {m: np.concatenate(v) for m, v in out.items()}


def _calls(p, truth) -> tuple[int, int, float]:
    call = (p >= ac.LEVEL) | (p <= 1 - ac.LEVEL)
    right = (truth > 0) == (p > 0.5)
    return int(call.sum()), int((call & right).sum()), float(np.maximum(p, 1 - p)[call].mean()) if call.any() else None


def summarize(rows: dict) -> dict:
    levels, weightings = [], []
    for missing, x in rows.items():
        p, truth, z, level, gap = x[:, 0], x[:, 1], x[:, 2], x[:, 3], x[:, 4]
        for lo, hi in zip(LEVELS[:-1], LEVELS[1:]):
            k = (level >= lo) & (level < hi)
            narrow, wide = _calls(p[k & (gap <= ac.WIDE + 1e-9)], truth[k & (gap <= ac.WIDE + 1e-9)]), _calls(p[k], truth[k])
            levels.append({"missing": missing, "low": lo, "high": min(hi, 1.0), "pairs": int(k.sum()),
                           "z_mean": float(z[k].mean()), "z_se": float(z[k].std() / np.sqrt(max(k.sum(), 1))),
                           "z_sd": float(z[k].std()), "calls_3pp": narrow, "calls_5pp": wide})
        narrow = gap <= ac.WIDE + 1e-9
        for name, column in zip(WEIGHTINGS, (0, 5, 6), strict=True):
            weightings.append({"missing": missing, "weighting": name,
                               "calls_3pp": _calls(x[narrow, column], truth[narrow])})
    return {"levels": levels, "weightings": weightings}


def markdown(result: dict) -> str:
    s = result["summary"]
    share = lambda c: "n/a" if not c[0] else f"{c[1]} of {c[0]} = {100 * c[1] / c[0]:.1f}% (stated {100 * c[2]:.1f}%)"  # noqa: E731
    lines = ["# The paired model's calls by accuracy level (issue 46's short cell)", "",
             *run_header_lines(result),
             f"Generator `{result['kind']}`, groups `{result['size']}`, {ac.MODELS} models x {ac.ITEMS:,} items, "
             f"benchmark seeds {result['first_seed']}-{result['first_seed'] + result['seeds'] - 1}; pairs within 5 pp "
             "on the items both answered. z = (true gap - posterior mean) / posterior sd: mean 0 and sd 1 in every "
             "bin of data for a calibrated posterior. Level: the pair's mean observed (own-item) accuracy.", "",
             "| missing | level | pairs | z mean (se) | z sd | calls within 3 pp: right | calls within 5 pp: right |",
             "|---:|---|---:|---:|---:|---|---|"]
    for r in s["levels"]:
        lines.append(f"| {100 * r['missing']:.0f}% | {r['low']:.2f}-{r['high']:.2f} | {r['pairs']:,} | "
                     f"{r['z_mean']:+.3f} ({r['z_se']:.3f}) | {r['z_sd']:.2f} | {share(r['calls_3pp'])} | "
                     f"{share(r['calls_5pp'])} |")
    lines += ["", "Calls within 3 pp by the strata weights of the posterior (design: the audit's).", "",
              "| missing | weighting | calls: right |", "|---:|---|---|"]
    for r in s["weightings"]:
        lines.append(f"| {100 * r['missing']:.0f}% | {r['weighting']} | {share(r['calls_3pp'])} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kind", default="3pl", choices=ac.KINDS)
    p.add_argument("--size", default="mixed", help="group size of audit_calibration (1, 2, 4, 10 or mixed)")
    p.add_argument("--seeds", type=int, default=60)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="results JSON (a Markdown beside it)")
    args = p.parse_args(argv)
    size = args.size if args.size == "mixed" else int(args.size)
    rows = _pairs(args.kind, size, range(args.first_seed, args.first_seed + args.seeds))
    result = {**run_header(__file__, argv), "kind": args.kind, "size": str(size), "seeds": args.seeds,
              "first_seed": args.first_seed, "summary": summarize(rows)}
    return report(args.out, result, markdown)


if __name__ == "__main__":
    sys.exit(main())
