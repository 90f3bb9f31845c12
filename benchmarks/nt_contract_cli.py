"""Benchmark: the command-line audit on a file in the NT artifact's own input contract.

The artifact reads an NPZ with ``responses`` (items x models, 0/1 with -1 for missing),
``model_id``, ``family``, ``owner`` and ``item_group`` (fixed-width unicode arrays) and family
labels ``family_0``, ``family_1``, ``family_2``. This script writes such a file at the NT
WinoGrande size (5,001 models x 1,267 items; ``simulate_dif_benchmark`` with its families renamed)
and times ``bayesirt audit FILE.npz --out DIR`` as a new process, start-up and writing included,
at default settings (1,000 controls, 2,000 + 2,000 bootstraps). Targets: at most 40 s on 2 cores
at the WinoGrande size (issue 43; 60 s in issue 18); at the NT MMLU size (``--items 14042``) at most 150 s within
4 GB (issue 22). The labels must be audited as given (no "too few families").

Usage::

    python benchmarks/nt_contract_cli.py [--owners 1667] [--items 1267] [--seed 20261201] [--bayes]
    python benchmarks/nt_contract_cli.py --items 14042 --out benchmarks/results/nt_contract_cli_mmlu.json

``--bayes`` times ``bayesirt audit FILE.npz --bayes`` as well (issue 19's cost target: at most 5x
the deterministic audit) and writes ``results/nt_contract_cli_bayes.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import versions, write_results  # noqa: E402


def _write_contract_npz(path: Path, owners: int, items: int, seed: int) -> dict:
    from bayesirt.data import simulate_dif_benchmark

    ds, _ = simulate_dif_benchmark(n_owners=owners, n_items=items, seed=seed)
    rename = {name: f"family_{k}" for k, name in enumerate(sorted(set(ds["family"].values.astype(str))))}
    np.savez(path, responses=ds["responses"].values.astype(np.int8),
             model_id=ds["model_id"].values.astype(str), family=np.array([rename[f] for f in ds["family"].values]),
             owner=ds["owner"].values.astype(str), item_group=ds["item_group"].values.astype(str))
    return {"models": int(ds.sizes["model"]), "items": int(ds.sizes["item"]), "families": sorted(rename.values())}


def _audit(npz: Path, out: Path, *extra: str) -> tuple[float, float, dict]:
    """Wall and CPU seconds (user + system of the child process) of ``bayesirt audit NPZ --out OUT``
    as a new process, and its summary.json. CPU time is the fair measure on a shared machine. The
    peak resident memory of the largest child so far is ``resource.getrusage(RUSAGE_CHILDREN)``."""
    command = [sys.executable, "-m", "bayesirt", "audit", str(npz), "--out", str(out), "--no-progress", *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"audit failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return wall, cpu, json.loads((out / "summary.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--owners", type=int, default=1667)
    parser.add_argument("--items", type=int, default=1267)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--bayes", action="store_true", help="also time the audit with --bayes")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "nt_contract_cli.json",
                        help="results JSON (the Markdown goes beside it)")
    args = parser.parse_args()
    target = {1267: 40, 14042: 150}.get(args.items)
    with tempfile.TemporaryDirectory() as tmp:
        npz = Path(tmp) / "responses.npz"
        shape = _write_contract_npz(npz, args.owners, args.items, args.seed)
        load = os.getloadavg()[0]
        wall, cpu, summary = _audit(npz, Path(tmp) / "audit")
        if args.bayes:
            bayes_wall, bayes_cpu, bayes_summary = _audit(npz, Path(tmp) / "audit_bayes", "--bayes")
    row = {**shape, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "load_before": round(load, 2),
           "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024**2, 2),
           "target_s": target, "timings_s": summary.get("timings_s"),
           "audited_families": summary["families"], "selected_k": summary["selected_k"],
           "eligible_pairs": summary["eligible_pairs"], "low_dif_reversal_rate": summary["low_dif_reversal_rate"],
           "excess_pp": round(summary["excess_pp"], 3), "p_value": summary["p_value"],
           "command": "bayesirt audit responses.npz --out DIR --no-progress"}
    row["versions"] = versions(("bayesirt", "numpy", "scipy"))

    def markdown(result: dict) -> str:
        r = result["row"]
        return "\n".join([
            "# CLI audit of an NT-contract NPZ (families family_0..family_2)", "",
            f"Versions: {', '.join(f'{k} {v}' for k, v in r['versions'].items())}.", "",
            "| models x items | wall s (new process) | target | CPU s | peak RSS GB | load before | families audited | "
            "K | pairs | low-DIF reversal rate | excess pp (p) |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
            f"| {r['models']:,} x {r['items']:,} | {r['wall_s']} | "
            + (f"<= {r['target_s']} s: **{'met' if r['wall_s'] <= r['target_s'] else 'not met'}**" if r["target_s"] else "none")
            + f" | {r['cpu_s']} | {r['peak_rss_gb']} | {r['load_before']} | "
            f"{', '.join(r['audited_families'])} | {r['selected_k']} | {r['eligible_pairs']:,} | "
            f"{r['low_dif_reversal_rate']:.5f} | {r['excess_pp']:+.2f} ({r['p_value']:.4g}) |", "",
            "Stage timings inside the audit (s): " + ", ".join(f"{k} {v:.1f}" for k, v in (r["timings_s"] or {}).items())
            + ".", ""])

    write_results(args.out, {"row": row}, markdown, echo=True)
    if args.bayes:
        bayes = {"wall_s": round(bayes_wall, 1), "deterministic_wall_s": row["wall_s"],
                 "ratio": round(bayes_wall / wall, 1), "cpu_s": round(bayes_cpu, 1),
                 "deterministic_cpu_s": row["cpu_s"], "cpu_ratio": round(bayes_cpu / cpu, 1), "timings_s": bayes_summary["timings_s"],
                 "draw_p_value_q05_q50_q95": bayes_summary["bayes"]["draw_p_value_q05_q50_q95"],
                 "near_ties": bayes_summary["bayes"].get("near_ties", {}).get("counts"),
                 "command": "bayesirt audit responses.npz --bayes --out DIR --no-progress"}

        def bayes_markdown(result: dict) -> str:
            b = result["bayes"]
            return "\n".join([
                "# CLI audit with --bayes of an NT-contract NPZ (5,001 x 1,267; target <= 5x the deterministic audit)",
                "", f"Deterministic {b['deterministic_wall_s']} s; --bayes {b['wall_s']} s ({b['ratio']}x). CPU "
                f"(user + system of the audit process): {b['deterministic_cpu_s']} s and {b['cpu_s']} s "
                f"({b['cpu_ratio']}x).", "",
                "Stage timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in b["timings_s"].items()) + ".", "",
                "per-draw randomization p (5%, 50%, 95% over draws) "
                + ", ".join(f"{v:.3g}" for v in b["draw_p_value_q05_q50_q95"]) + f"; near-tie categories {b['near_ties']}.",
                ""])

        write_results(Path(__file__).parent / "results" / "nt_contract_cli_bayes.json", {"bayes": bayes},
                      bayes_markdown, echo=True)


if __name__ == "__main__":
    main()
