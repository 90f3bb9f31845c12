"""The called pairs of issue 46's short cell, looked at closely: the 3PL generator of
:mod:`audit_calibration`, its 3 pp band, both-answered selection, at 0, 20 and 30% missing cells.

For every benchmark seed and group size of ``audit_calibration`` (the same simulated matrices and missing
masks), the pairs within 3 pp on the items both models answered get the paired posterior
(``bayesirt.audit.bayes.paired``) at the default Dirichlet pseudo-count and at larger ones. Reported for the
called pairs (prob_a_ahead >= .95 or <= .05): how many, the mean stated probability of the called order, and
the share in the true order (truth: the expected accuracy gap over the item population, as in
``audit_calibration``); then, at the default prior, the pairs' discordance rate on the both-answered items over
that on the complete matrix, and their gap on the both-answered items, on the complete matrix and in truth,
for right and wrong calls apart.

Usage::

    .venv/bin/python benchmarks/audit_calibration_tail.py --out benchmarks/results/audit_calibration_tail.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import audit_calibration as ac  # noqa: E402
from _common import machine, source_state, write_results  # noqa: E402

MISSING = (0.0, 0.2, 0.3)
PRIORS = (0.5, 5.0, 20.0)


def _rows(seeds: int) -> list[dict]:
    """One row per called pair and prior."""
    from bayesirt.audit.bayes.paired import discordant_counts, paired_accuracy, paired_strata

    rows = []
    for k, size in enumerate(ac.SIZES):
        for seed in range(seeds):
            sim = ac.simulate("3pl", size, 1000 * k + seed + 100 * ac.KINDS.index("3pl"))
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
                for prior in PRIORS:
                    p = paired_accuracy(*counts, weights=weights, prior=prior, seed=seed)["prob_a_ahead"].to_numpy()
                    for j in np.flatnonzero((p >= ac.LEVEL) | (p <= 1 - ac.LEVEL)):
                        rows.append({"missing": missing, "prior": prior, "stated": float(max(p[j], 1 - p[j])),
                                     "right": bool((truth[j] > 0) == (p[j] > 0.5)), "disc_ratio": float(disc_ratio[j]),
                                     "gap_both": float(gap[a[j], b[j]]),
                                     "gap_complete": float((c10[j] - c01[j]).sum() / cn[j].sum()),
                                     "gap_true": float(truth[j])})
        print(f"size {size}: {len(rows)} rows", flush=True)
    return rows


def summarize(rows: list[dict]) -> dict:
    out = {"by_prior": [], "default_prior": []}
    for prior in PRIORS:
        for missing in MISSING:
            sel = [r for r in rows if r["prior"] == prior and r["missing"] == missing]
            out["by_prior"].append({"prior": prior, "missing": missing, "calls": len(sel),
                                    "stated": float(np.mean([r["stated"] for r in sel])) if sel else None,
                                    "right": float(np.mean([r["right"] for r in sel])) if sel else None})
    for missing in MISSING:
        for right in (True, False):
            sel = [r for r in rows if r["prior"] == PRIORS[0] and r["missing"] == missing and r["right"] == right]
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
             f"Command: `{result['command']}`  ", f"Date: {result['date']}; {result['machine']}; source "
             f"{result['source'].get('head')}", "",
             f"`audit_calibration`'s 3PL generator ({ac.MODELS} models x {ac.ITEMS:,} items), benchmark seeds "
             f"0-{result['seeds'] - 1}, group sizes {', '.join(map(str, ac.SIZES))}; pairs within 3 pp on the "
             "items both answered; a call: prob_a_ahead >= .95 or <= .05.", "",
             "Calls by Dirichlet pseudo-count (the audit's default 0.5) and missing share: stated = mean posterior "
             "probability of the called order; right = share of calls in the true order.", "",
             "| pseudo-count | missing | calls | stated | right |", "|---:|---:|---:|---:|---:|"]
    for r in s["by_prior"]:
        lines.append(f"| {r['prior']:g} | {r['missing']:.0%} | {r['calls']} | {pct(r['stated'])} | {pct(r['right'])} |")
    lines += ["", "At the default pseudo-count, right and wrong calls apart: discordance rate on the both-answered "
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
    p.add_argument("--seeds", type=int, default=18, help="benchmark seeds 0..N-1 (audit_calibration's)")
    p.add_argument("--out", type=Path, help="results JSON (a Markdown beside it)")
    args = p.parse_args(argv)
    command = " ".join([".venv/bin/python", "benchmarks/audit_calibration_tail.py",
                        *(argv if argv is not None else sys.argv[1:])])
    rows = _rows(args.seeds)
    result = {"command": command, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(),
              "source": source_state(), "seeds": args.seeds, "summary": summarize(rows)}
    if args.out:
        write_results(args.out, result, markdown, echo=True)
    else:
        print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
