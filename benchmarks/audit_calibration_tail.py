"""The called pairs of issue 46's short cell, looked at closely: the 3PL generator of
:mod:`audit_calibration` (or ``--kinds``: any of its generators), its 3 pp band, both-answered selection, at 0,
20 and 30% missing cells.

For every benchmark seed and group size of ``audit_calibration`` (the same simulated matrices and missing
masks), the pairs within 3 pp on the items both models answered get the paired posterior
(``bayesirt.audit.bayes.paired``) at the default Dirichlet pseudo-count and at larger ones. Reported for the
called pairs (prob_a_ahead >= .95 or <= .05): how many, the mean stated probability of the called order, and
the share in the true order (truth: the expected accuracy gap over the item population, as in
``audit_calibration``); then, at the first (default) prior, the pairs' discordance rate on the both-answered items over
that on the complete matrix, and their gap on the both-answered items, on the complete matrix and in truth,
for right and wrong calls apart. ``--first-seed`` runs benchmark seeds past ``audit_calibration``'s (new
matrices from the same generators: an independent replicate of its cells).

Usage::

    .venv/bin/python benchmarks/audit_calibration_tail.py --out benchmarks/results/audit_calibration_tail.json
    .venv/bin/python benchmarks/audit_calibration_tail.py --kinds 3pl,2d,heterogeneous,testlets --priors 0.5 \
        --first-seed 18 --seeds 18 --out benchmarks/results/audit_calibration_tail_replicate.json
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import audit_calibration as ac  # noqa: E402
from _common import report, run_header, run_header_lines  # noqa: E402

MISSING = (0.0, 0.2, 0.3)
PRIORS = (0.5, 5.0, 20.0)


def _rows(seeds: range, kinds: tuple[str, ...], priors: tuple[float, ...]) -> list[dict]:
    """One row per called pair and prior."""
    from bayesirt.audit.bayes.paired import discordant_counts, paired_accuracy, paired_strata

    rows = []
    for kind, (k, size) in itertools.product(kinds, enumerate(ac.SIZES)):
        for seed in seeds:
            sim = ac.simulate(kind, size, 1000 * k + seed + 100 * ac.KINDS.index(kind))
            stratum, weights, _ = paired_strata(sim["group"])
            complete = np.ones(sim["y"].shape, dtype=bool)
            for missing in MISSING:
                observed = np.random.default_rng(seed + 77).random(sim["y"].shape) >= missing  # audit_calibration's
                y = np.where(observed, sim["y"], 0)
                gap, full = ac.both_gaps(y, observed)
                a, b = ac.select("both", y, observed, full, ac.WIDE)
                counts = discordant_counts(y, observed, stratum, (a, b))
                c10, c01, cn = discordant_counts(sim["y"], complete, stratum, (a, b))
                truth = sim["truth"][a] - sim["truth"][b]
                disc_ratio = ((counts[0] + counts[1]).sum(1) / counts[2].sum(1)) / ((c10 + c01).sum(1) / cn.sum(1))
                for prior in priors:
                    p = paired_accuracy(*counts, weights=weights, prior=prior, seed=seed)["prob_a_ahead"].to_numpy()
                    for j in np.flatnonzero((p >= ac.LEVEL) | (p <= 1 - ac.LEVEL)):
                        rows.append({"kind": kind, "size": str(size), "missing": missing, "prior": prior,
                                     "stated": float(max(p[j], 1 - p[j])),
                                     "right": bool((truth[j] > 0) == (p[j] > 0.5)), "disc_ratio": float(disc_ratio[j]),
                                     "gap_both": float(gap[a[j], b[j]]),
                                     "gap_complete": float((c10[j] - c01[j]).sum() / cn[j].sum()),
                                     "gap_true": float(truth[j])})
        print(f"{kind} size {size}: {len(rows)} rows", flush=True)
    return rows


def summarize(rows: list[dict], kinds: tuple[str, ...], priors: tuple[float, ...]) -> dict:
    out = {"by_prior": [], "default_prior": [], "by_kind": []}
    for kind, missing in itertools.product(kinds, MISSING):
        sel = [r for r in rows if r["prior"] == priors[0] and r["missing"] == missing and r["kind"] == kind]
        out["by_kind"].append({"kind": kind, "missing": missing, "calls": len(sel),
                               "mixed_calls": sum(r["size"] == "mixed" for r in sel),
                               "stated": float(np.mean([r["stated"] for r in sel])) if sel else None,
                               "right": float(np.mean([r["right"] for r in sel])) if sel else None})
    for prior in priors:
        for missing in MISSING:
            sel = [r for r in rows if r["prior"] == prior and r["missing"] == missing]
            out["by_prior"].append({"prior": prior, "missing": missing, "calls": len(sel),
                                    "stated": float(np.mean([r["stated"] for r in sel])) if sel else None,
                                    "right": float(np.mean([r["right"] for r in sel])) if sel else None})
    for missing in MISSING:
        for right in (True, False):
            sel = [r for r in rows if r["prior"] == priors[0] and r["missing"] == missing and r["right"] == right]
            mean = lambda key: float(np.mean([r[key] for r in sel])) if sel else None  # noqa: E731
            out["default_prior"].append({"missing": missing, "right": right, "calls": len(sel),
                                         "disc_ratio": mean("disc_ratio"), "gap_both": mean("gap_both"),
                                         "gap_complete": mean("gap_complete"), "gap_true": mean("gap_true")})
    return out


def markdown(result: dict) -> str:
    s = result["summary"]
    pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}%"  # noqa: E731
    pp = lambda x: "n/a" if x is None else f"{100 * x:+.2f}"  # noqa: E731
    lines = ["# Issue 46's short cell: the 3PL generator's called pairs in the 3 pp band", "",
             *run_header_lines(result),
             f"`audit_calibration`'s generators {', '.join(result.get('kinds', ['3pl']))} ({ac.MODELS} models x "
             f"{ac.ITEMS:,} items), benchmark seeds {result.get('first_seed', 0)}-"
             f"{result.get('first_seed', 0) + result['seeds'] - 1}, group sizes {', '.join(map(str, ac.SIZES))}; "
             "pairs within 3 pp on the items both answered; a call: prob_a_ahead >= .95 or <= .05.", "",
             "Calls at the first pseudo-count by generator and missing share (all group sizes; of them the "
             "uneven 20-200-item groups, `mixed`):", "",
             "| generator | missing | calls (mixed) | stated | right |", "|---|---:|---:|---:|---:|",
             *(f"| {r['kind']} | {r['missing']:.0%} | {r['calls']} ({r['mixed_calls']}) | {pct(r['stated'])} | "
               f"{pct(r['right'])} |" for r in s.get("by_kind", [])), "",
             "Calls by Dirichlet pseudo-count (the audit's default 0.5) and missing share: stated = mean posterior "
             "probability of the called order; right = share of calls in the true order.", "",
             "| pseudo-count | missing | calls | stated | right |", "|---:|---:|---:|---:|---:|"]
    for r in s["by_prior"]:
        lines.append(f"| {r['prior']:g} | {r['missing']:.0%} | {r['calls']} | {pct(r['stated'])} | {pct(r['right'])} |")
    lines += ["", "At the first pseudo-count, right and wrong calls apart: discordance rate on the both-answered "
              "items over the same pair's on the complete matrix; mean gap in pp (a minus b, a the model ahead "
              "on the both-answered items) on the both-answered items, on the complete matrix, and in truth.",
              "", "| missing | calls | right | discordance ratio | gap both-answered | gap complete | gap true |",
              "|---:|---|---:|---:|---:|---:|---:|"]
    for r in s["default_prior"]:
        ratio = "n/a" if r["disc_ratio"] is None else f"{r['disc_ratio']:.3f}"
        lines.append(f"| {r['missing']:.0%} | {'right' if r['right'] else 'wrong'} | {r['calls']} | {ratio} | "
                     f"{pp(r['gap_both'])} | {pp(r['gap_complete'])} | {pp(r['gap_true'])} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=18, help="how many benchmark seeds (audit_calibration's: 18)")
    p.add_argument("--first-seed", type=int, default=0, help="the first benchmark seed")
    p.add_argument("--kinds", default="3pl", help="generators of audit_calibration, comma-separated")
    p.add_argument("--priors", default=",".join(map(str, PRIORS)), help="Dirichlet pseudo-counts; the first is "
                   "the one of the by-generator and right/wrong tables")
    p.add_argument("--out", type=Path, help="results JSON (a Markdown beside it)")
    args = p.parse_args(argv)
    kinds, priors = tuple(args.kinds.split(",")), tuple(float(v) for v in args.priors.split(","))
    rows = _rows(range(args.first_seed, args.first_seed + args.seeds), kinds, priors)
    result = {**run_header(__file__, argv), "seeds": args.seeds, "first_seed": args.first_seed, "kinds": list(kinds),
              "summary": summarize(rows, kinds, priors)}
    return report(args.out, result, markdown)


if __name__ == "__main__":
    sys.exit(main())
