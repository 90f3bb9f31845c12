"""Peak memory of the paired model with testlet labels (issue 46): ``pair_posterior`` on a simulated
5,000-item x 1,000-model matrix, 5,000 pairs, with and without labels (testlets of 5 items), each in a fresh
process; peak RSS (``ru_maxrss``) and wall seconds, and the design effects and clustered McNemar p of the
labelled run against the same computed in one block (all pairs at once, the oracle of the chunked loop).

Usage::

    .venv/bin/python benchmarks/paired_testlet_memory.py --out benchmarks/results/paired_testlet_memory.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import report, run_header, run_header_lines  # noqa: E402

ITEMS, MODELS, PAIRS, TESTLET, GROUPS = 5000, 1000, 5000, 5, 50
KINDS = ("plain", "labelled", "block")
LABEL = {"plain": "none", "labelled": "testlets, pairs in chunks (pair_posterior)",
         "block": "testlets, design effects of every pair at once (before)"}


def _data():
    import numpy as np

    rng = np.random.default_rng(46)
    theta = rng.normal(0, 1, MODELS)
    b = rng.normal(0, 1, ITEMS)
    effect = rng.normal(0, 0.6, (ITEMS // TESTLET, MODELS)).repeat(TESTLET, axis=0)
    y = (rng.random((ITEMS, MODELS)) < 1 / (1 + np.exp(-(theta[None] - b[:, None] + effect)))).astype(np.int8)
    observed = rng.random((ITEMS, MODELS)) >= 0.2
    group = np.arange(ITEMS) * GROUPS // ITEMS
    a = rng.integers(0, MODELS, PAIRS)
    return y, observed, group, (a, (a + 1 + rng.integers(0, MODELS - 1, PAIRS)) % MODELS), np.arange(ITEMS) // TESTLET


def _one_block(paired, y, observed, group, pairs, testlet):
    """Design effects and clustered McNemar p of every pair at once (the oracle of the chunked loop)."""
    import numpy as np

    stratum, weights, _ = paired.paired_strata(group)
    codes = paired.pd.factorize(stratum)[0]
    cluster = paired.pd.factorize(paired.pd.MultiIndex.from_arrays([codes, testlet.astype(str)]))[0]
    block = paired.discordant_counts(y, observed, cluster, pairs)
    deff = paired.design_effects(*block, codes[np.unique(cluster, return_index=True)[1]], weights)
    return deff, paired.clustered_mcnemar_p(block[0], block[1])


def child(kind: str) -> dict:
    """One run in this process (``plain``, ``labelled``, or ``block``: the labelled design effects of every pair
    at once): peak RSS and wall s; ``labelled`` also compares its results with one block's."""
    import resource
    import time

    import numpy as np

    from bayesirt.audit.bayes import paired

    y, observed, group, pairs, testlet = _data()
    start = time.perf_counter()
    if kind == "block":
        deff = _one_block(paired, y, observed, group, pairs, testlet)[0]
    else:
        out = paired.pair_posterior(y, observed, group, pairs, testlet=testlet if kind == "labelled" else None, seed=1)
        deff = out["design_effect"].to_numpy()
    result = {"kind": kind, "wall_s": time.perf_counter() - start,
              "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
              "design_effect_mean": float(deff.mean())}
    if kind == "labelled":
        block_deff, block_p = _one_block(paired, y, observed, group, pairs, testlet)
        result["max_abs_difference"] = float(max(np.abs(block_deff - deff).max(),
                                                 np.abs(block_p - out["mcnemar_p"].to_numpy()).max()))
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, help="results JSON (a Markdown beside it)")
    p.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    runs = []
    for kind in KINDS:
        done = subprocess.run([sys.executable, __file__, "--child", kind], capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return report(args.out, {**run_header(__file__, argv), "items": ITEMS, "models": MODELS, "pairs": PAIRS,
                             "runs": runs}, markdown)


def markdown(result: dict) -> str:
    lines = ["# Peak memory of the paired model with testlet labels", "",
             *run_header_lines(result),
             f"`pair_posterior` on {result['items']:,} items x {result['models']:,} models (20% missing, {GROUPS} "
             f"item groups), {result['pairs']:,} pairs; labelled: testlets of {TESTLET} items. Each run a fresh "
             "process; peak RSS includes the data (about 0.1 GB); the block run computes only the design effects.", "",
             "| run | peak RSS GB | wall s | mean design effect | chunked vs one block, max abs difference |",
             "|---|---:|---:|---:|---:|"]
    for r in result["runs"]:
        diff = r.get("max_abs_difference")
        lines.append(f"| {LABEL[r['kind']]} | {r['peak_rss_gb']:.2f} | {r['wall_s']:.1f} | "
                     f"{r['design_effect_mean']:.3f} | {'—' if diff is None else f'{diff:.1e}'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
