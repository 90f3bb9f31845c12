"""Benchmark: the population-perturbation suite (NT D.2) on a simulated 2,000 models x 1,000 items
benchmark (3 families, one model per family per owner, 4 interleaved item groups, DIF on half the
items), with 1 and with 2 Dask workers.

Reported: the primary audit's stages, the perturbation suite's wall and CPU time with 1 worker
(in process) and with a local cluster of 2 single-threaded workers, the speed-up, and whether the
two tables are identical (they must be: every perturbation is seeded on its own).

Usage: ``python benchmarks/nt_perturbations.py``; writes ``benchmarks/results/nt_perturbations.md``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from bayesirt.audit import AuditConfig, run_audit
from bayesirt.audit.perturbations import population_perturbations
from bayesirt.data import simulate_dif_benchmark
from bayesirt.report import markdown_table


def main() -> None:
    ds, _ = simulate_dif_benchmark(n_owners=667, n_items=1000, seed=20261129)
    t0 = time.perf_counter()
    result = run_audit(ds, AuditConfig(), progress=False)
    primary_s = time.perf_counter() - t0
    runs = {}
    for workers in (1, 2):
        load = os.getloadavg()[0]
        t0, c0 = time.perf_counter(), time.process_time()
        table = population_perturbations(result, ds, workers=workers)
        runs[workers] = (table, time.perf_counter() - t0, time.process_time() - c0, load)
    identical = runs[1][0].equals(runs[2][0])
    lines = ["# Population perturbations (NT D.2) on a simulated 2,001 x 1,000 benchmark", "",
             f"{time.strftime('%Y-%m-%d %H:%M')}; {os.cpu_count()} cores.", "",
             f"Primary audit (default settings): {primary_s:.1f} s "
             f"({', '.join(f'{k} {v:.1f}' for k, v in result.timings.items())}).", "",
             "| workers | perturbations | wall s | CPU s of this process | load before |", "|---|---|---|---|---|"]
    for workers, (table, wall, cpu, load) in runs.items():
        lines.append(f"| {workers} | {len(table)} | {wall:.1f} | {cpu:.1f} | {load:.1f} |")
    lines += ["", f"Speed-up 1 -> 2 workers: {runs[1][1] / runs[2][1]:.2f}x (cluster start-up included). "
              f"Tables identical: {identical}.", "",
              markdown_table(runs[1][0].drop(columns=["status"]).round(4))]
    out = Path(__file__).parent / "results" / "nt_perturbations.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
