"""Speed of the marginal likelihood behind ``compare`` by model (leave-one-model-out), on chembench.

A 2PL NUTS fit of the embedded chembench matrix (22 models x 2,854 items, complete; 4 chains x (300 + 250)
draws, seed 1), then ``marginal_log_likelihood`` of its 1,000 draws:

* ``sums``: as ``compare`` runs it, the complete 1PL/2PL's per-point sums of log q over items
  (``comparison.grid_kernel.grid_log_q_sums``), on one thread and on one per core;
* ``per cell``: the same grid with every cell's log q and the observed mask (``grid_log_terms``, the route a
  matrix with gaps takes, and every matrix took before a89051e), on one thread; and the largest difference
  between the two routes' values.

Also the two kernels alone at 400 points x the matrix's items (median of 50 calls).

Usage::

    .venv/bin/python benchmarks/marginal_likelihood_speed.py --out benchmarks/results/marginal_likelihood_speed.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import report, run_header, run_header_lines  # noqa: E402


def _median_ms(function, calls: int = 50) -> float:
    function()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        function()
        times.append(time.perf_counter() - t)
    return 1000 * float(np.median(times))


def measure() -> dict:
    import os

    import bayesirt as bi
    from bayesirt.comparison import grid
    from bayesirt.comparison.grid_kernel import grid_log_q_sums, grid_log_terms
    from bayesirt.comparison.loo import marginal_log_likelihood

    responses = bi.load("chembench")
    tree = bi.fit(responses, "2pl", method="nuts", seed=1, draws=250, tune=300, progress=False)
    out = {"models": responses.sizes["model"], "items": responses.sizes["item"]}

    def timed(**kwargs):
        t = time.perf_counter()
        values = marginal_log_likelihood(tree, progress=False, **kwargs).values
        return time.perf_counter() - t, values

    out["sums_1_thread_s"], sums = timed(threads=1)
    out["sums_all_threads_s"], _ = timed(threads=os.cpu_count())
    out["threads"] = os.cpu_count()
    # the per-cell route: the patterns carry an all-observed mask, so the grid takes every cell's log q
    original = grid.Patterns.of

    def with_mask(y, observed):
        pat = original(y, observed)
        return grid.Patterns(pat.correct, np.ones_like(pat.correct))

    with mock.patch.object(grid.Patterns, "of", staticmethod(with_mask)):
        out["per_cell_1_thread_s"], per_cell = timed(threads=1)
    out["largest_difference"] = float(np.abs(sums - per_cell).max())
    out["value_range"] = [float(sums.min()), float(sums.max())]
    draw = tree["posterior"]
    a = np.ascontiguousarray(draw["discrimination"].isel(chain=0, draw=0).values, dtype=float)
    d = np.ascontiguousarray(draw["intercept"].isel(chain=0, draw=0).values, dtype=float)
    theta, zeros = np.linspace(-4.0, 4.0, 400), np.zeros(a.size)
    out["kernel_sums_ms"] = _median_ms(lambda: grid_log_q_sums(theta, a, d))
    out["kernel_per_cell_ms"] = _median_ms(lambda: grid_log_terms(theta, a, d, zeros, zeros, False)[1].sum(axis=1))
    return out


def markdown(result: dict) -> str:
    r = result["measured"]
    return "\n".join([
        "# Marginal likelihood of `compare` by model: speed on chembench", "",
        *run_header_lines(result),
        f"2PL NUTS fit of chembench ({r['models']} models x {r['items']:,} items, complete), 4 chains x (300 + 250) "
        "draws; `marginal_log_likelihood` of its 1,000 draws.", "",
        "| route | wall s |", "|---|---:|",
        f"| per-point sums (as `compare` runs it), 1 thread | {r['sums_1_thread_s']:.2f} |",
        f"| per-point sums, {r['threads']} threads | {r['sums_all_threads_s']:.2f} |",
        f"| every cell's log q with the observed mask (before a89051e), 1 thread | {r['per_cell_1_thread_s']:.2f} |",
        "", f"Largest difference between the two routes' values: {r['largest_difference']:.1e} (values "
        f"{r['value_range'][0]:,.0f} to {r['value_range'][1]:,.0f}).", "",
        f"Kernels alone, 400 points x {r['items']:,} items, median of 50 calls: sums {r['kernel_sums_ms']:.2f} ms, "
        f"per cell and summed {r['kernel_per_cell_ms']:.2f} ms.", ""])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, help="results JSON (a Markdown beside it)")
    args = p.parse_args(argv)
    result = {**run_header(__file__, argv), "measured": measure()}
    return report(args.out, result, markdown)


if __name__ == "__main__":
    sys.exit(main())
