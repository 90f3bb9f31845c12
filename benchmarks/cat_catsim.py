"""Side-by-side benchmark: bayesirt's adaptive tests (``run_cat``) vs the PyPI package ``catsim``.

One process, one 2PL item bank and one set of simulated examinees (true abilities) for both:

  * ``catsim``            -- ``Simulator(ItemBank(a, b, c=0, d=1), theta)`` with
                             ``FixedPointInitializer(0)``, ``MaxInfoSelector()``,
                             ``NumericalSearchEstimator()`` (maximum likelihood, bounded search,
                             Dodd's heuristic for all-correct / all-wrong patterns) and
                             ``TestLengthStopper(max_items=k)``. catsim draws each response when
                             the item is given, from its own generator.
  * ``bayesirt EAP``      -- ``run_cat(y, a, d, budget=k)``: maximum Fisher information at the
                             EAP, grid posterior under the N(0, 1) prior of the calibration.
  * ``bayesirt MAP``      -- the same with ``estimator="map"``.
  * ``bayesirt EAP on catsim's tests`` -- catsim's administered items and responses re-scored
                             by ``score_test`` (EAP): isolates the estimator from the item choice.

bayesirt's responses are a full matrix drawn once from the same true abilities (catsim cannot take
given responses), so the two tools see different but identically distributed responses; with
``--examinees`` 1,000 the RMSE's standard error (shown) is about 2% of its value. The examinees'
true abilities are drawn from N(0, 1), the prior both Bayesian rows assume: EAP/MAP shrinkage is
an advantage here that ML does not have; the re-scoring row shows how much of the gap it explains.

Usage::

    python benchmarks/cat_catsim.py             # 500 items, 1,000 examinees, budgets 10, 25, 50
    python benchmarks/cat_catsim.py --quick     # 200 items, 100 examinees, budget 25
    python benchmarks/cat_catsim.py --render    # re-render the Markdown (and rows) from the existing JSON

Writes ``benchmarks/results/cat_catsim.{json,md}`` (``--out``: either name; ``--quick`` defaults to
``cat_catsim_quick.{json,md}`` so a smoke run never overwrites the full results) and prints the
Markdown. The JSON holds the numbers and ``benchmark_rows`` for BENCHMARKS.md
(``benchmarks/harness.py``): one row per budget.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from scipy.special import expit

from _common import benchmark_row, source_state, versions, write_results  # noqa: E402 (benchmarks/ is on sys.path when run as a script)

PACKAGES = ("bayesirt", "catsim", "numpy", "scipy")
SEED = 20261130


def _design(n_items: int, n_examinees: int):
    rng = np.random.default_rng(SEED)
    a = rng.lognormal(0.2, 0.3, n_items)
    b = rng.normal(0.0, 1.2, n_items)
    theta = rng.normal(0.0, 1.0, n_examinees)
    y = (rng.random((n_items, n_examinees)) < expit(a[:, None] * (theta - b[:, None]))).astype(np.int8)
    return a, b, theta, y


def _rmse(est, theta) -> tuple[float, float]:
    err2 = (np.asarray(est) - theta) ** 2
    rmse = float(np.sqrt(err2.mean()))
    return rmse, float(err2.std(ddof=1) / np.sqrt(err2.size) / (2 * rmse))  # delta-method SE


def _catsim(a, b, theta, k):
    from catsim.estimation import NumericalSearchEstimator
    from catsim.initialization import FixedPointInitializer
    from catsim.item_bank import ItemBank
    from catsim.selection import MaxInfoSelector
    from catsim.simulation import Simulator
    from catsim.stopping import TestLengthStopper

    bank = ItemBank(np.column_stack([a, b, np.zeros_like(a), np.ones_like(a)]))
    sim = Simulator(bank, theta, seed=SEED)
    start = time.perf_counter()
    sim.simulate(FixedPointInitializer(0.0), MaxInfoSelector(), NumericalSearchEstimator(),
                 TestLengthStopper(max_items=k))
    return time.perf_counter() - start, np.asarray(sim.latest_estimations), sim


def _rescored(sim, a, b, n_items):
    from bayesirt.safety.adaptive import score_test

    y = np.full((n_items, len(sim.administered_items)), -1, dtype=np.int8)
    for m, (items, answers) in enumerate(zip(sim.administered_items, sim.response_vectors)):
        y[items, m] = np.asarray(answers, dtype=np.int8)
    return score_test(y, a, -a * b).theta


def run(n_items: int, n_examinees: int, budgets) -> list[dict]:
    from bayesirt.safety.adaptive import run_cat

    a, b, theta, y = _design(n_items, n_examinees)
    rows = []
    for k in budgets:
        for name in ("bayesirt EAP", "bayesirt MAP", "catsim"):
            row = {"budget": k, "run": name}
            try:
                if name == "catsim":
                    seconds, est, sim = _catsim(a, b, theta, k)
                    row["rescored"] = _rmse(_rescored(sim, a, b, n_items), theta)
                else:
                    start = time.perf_counter()
                    res = run_cat(y, a, -a * b, budget=k, estimator=name.split()[-1].lower())
                    seconds, est = time.perf_counter() - start, res.theta[:, -1]
                row |= {"seconds": seconds, "rmse": _rmse(est, theta), "bias": float(np.mean(est - theta))}
            except Exception:  # noqa: BLE001 -- a failing run is reported, never dropped
                row["error"] = traceback.format_exc(limit=2).strip().splitlines()[-1]
            rows.append(row)
            print(row, flush=True)
    return rows


def _markdown(result: dict) -> str:
    v, cfg, rows = result["versions"], result["config"], result["rows"]
    m = result["machine"]
    lines = [f"# CAT benchmark: bayesirt run_cat vs catsim {v['catsim']}", "",
             f"{m['platform']}, {m['cpu_count']} CPUs; {result['date']}; "
             + ", ".join(f"{k} {val}" for k, val in v.items()) + f". Total wall time {result['total_wall_s']:.0f} s. "
             f"Load average at start {result['loadavg_start']}, at end {result['loadavg_end']} (wall times are only "
             "comparable on an idle machine).", "",
             f"Design: 2PL bank of {cfg['items']} items (a ~ LogNormal(0.2, 0.3), b ~ N(0, 1.2)), {cfg['examinees']} "
             f"examinees with theta ~ N(0, 1), seed {SEED}; fixed-length tests, first item at theta = 0, maximum "
             f"Fisher information selection in both tools. Command: `{result['command']}`.", "",
             "| budget | run | ability RMSE (± SE) | bias | wall s | catsim / bayesirt wall |",
             "|---:|---|---|---:|---:|---:|"]
    for k in dict.fromkeys(r["budget"] for r in rows):
        block = {r["run"]: r for r in rows if r["budget"] == k}
        ref = block.get("catsim", {}).get("seconds")
        for name, r in block.items():
            if "error" in r:
                lines.append(f"| {k} | {name} | failed: {r['error']} | | | |")
                continue
            ratio = f"{ref / r['seconds']:.1f}x" if ref and name != "catsim" else "—"
            lines.append(f"| {k} | {name} | {r['rmse'][0]:.3f} ± {r['rmse'][1]:.3f} | {r['bias']:+.3f} | "
                         f"{r['seconds']:.2f} | {ratio} |")
        if "rescored" in block.get("catsim", {}):
            rmse = block["catsim"]["rescored"]
            lines.append(f"| {k} | bayesirt EAP on catsim's tests | {rmse[0]:.3f} ± {rmse[1]:.3f} | | | |")
    lines += ["", "Ratio > 1: bayesirt is faster (it updates every examinee at once, vectorized over the grid; "
              "catsim runs one examinee and one scalar optimization at a time). RMSE: bayesirt's EAP/MAP use the "
              "N(0, 1) prior that generated the abilities, catsim's estimator is maximum likelihood; the "
              "`on catsim's tests` row re-scores catsim's own items and responses by EAP, so its gap to `catsim` "
              "is the estimator's share and its gap to `bayesirt EAP` the item choice's (plus response noise).", ""]
    return "\n".join(lines)


def benchmark_rows(result: dict) -> list[dict]:
    """BENCHMARKS.md rows: one per budget (test length), all from this run.

    Every budget gets its own row rather than one chosen budget: the speed ratio and the RMSE both
    change with the test length (not necessarily monotonically), so showing one budget would mean
    picking a number. Ratio = catsim s / bayesirt EAP s (``run_cat``'s default estimator); the MAP
    time is in the bayesirt figure. Quality = ability RMSE against the simulated truth.
    """
    cfg, m = result["config"], result["machine"]
    machine = f"{m['platform']}, {m['cpu_count']} CPUs, Python {result['versions']['python']}"
    out = []
    for k in dict.fromkeys(r["budget"] for r in result["rows"]):
        block = {r["run"]: r for r in result["rows"] if r["budget"] == k}
        eap, map_, cat = (block.get(n, {"error": "not run"}) for n in ("bayesirt EAP", "bayesirt MAP", "catsim"))
        ratio = cat["seconds"] / eap["seconds"] if "error" not in cat and "error" not in eap else None
        bay = f"EAP {eap['seconds']:.2f} s" if "error" not in eap else f"EAP failed: {eap['error']}"
        bay += f" (MAP {map_['seconds']:.2f} s)" if "error" not in map_ else f" (MAP failed: {map_['error']})"
        quality = []
        if "error" not in eap:
            quality.append(f"bayesirt EAP {eap['rmse'][0]:.3f} ± {eap['rmse'][1]:.3f}")
        if "error" not in cat:
            quality.append(f"catsim (ML) {cat['rmse'][0]:.3f} ± {cat['rmse'][1]:.3f}")
            if "rescored" in cat:
                quality.append(f"EAP on catsim's tests {cat['rescored'][0]:.3f}")
        status = "ok"
        if "error" in cat:
            status = f"peer failed: {cat['error']}"
        elif "error" in eap:
            status = f"bayesirt failed: {eap['error']}"
        out.append(benchmark_row(
            task=f"CAT, {k}-item fixed-length tests (max Fisher information)",
            data_size=f"{cfg['items']}-item 2PL bank, {cfg['examinees']:,} examinees",
            bayesirt=bay, peer=f"catsim {result['versions'].get('catsim', '?')} (Simulator, ML estimator)",
            peer_figure=f"{cat['seconds']:.2f} s" if "error" not in cat else "—", ratio=ratio,
            ratio_meaning="catsim s / bayesirt EAP s (wall)", target="no slower than catsim (ratio >= 1)",
            target_met=None if ratio is None else bool(ratio >= 1),
            quality="ability RMSE vs truth: " + ", ".join(quality) if quality else "—", status=status,
            command=result["command"], date=result["date"], machine_description=machine))
    return out


def _json_path(out: Path | None, quick: bool) -> Path:
    if out is None:
        out = Path(__file__).parent / "results" / ("cat_catsim_quick.json" if quick else "cat_catsim.json")
    return out.with_suffix(".json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 items, 100 examinees, budget 25")
    parser.add_argument("--items", type=int, default=500)
    parser.add_argument("--examinees", type=int, default=1000)
    parser.add_argument("--budgets", default="10,25,50")
    parser.add_argument("--out", type=Path, default=None,
                        help="results .json or .md (both are written); default benchmarks/results/cat_catsim[_quick]")
    parser.add_argument("--render", action="store_true", help="only re-render the Markdown and rows from the JSON")
    args = parser.parse_args()
    json_path = _json_path(args.out, args.quick)
    if args.render:
        result = json.loads(json_path.read_text())
        result["benchmark_rows"] = benchmark_rows(result)
        write_results(json_path, result, _markdown, echo=True)
        return
    if args.quick:
        args.items, args.examinees, args.budgets = 200, 100, "25"
    load, start, source = [round(x, 2) for x in os.getloadavg()], time.perf_counter(), source_state()
    rows = run(args.items, args.examinees, [int(k) for k in args.budgets.split(",")])
    result = {
        "config": {"items": args.items, "examinees": args.examinees, "budgets": [int(k) for k in args.budgets.split(",")],
                   "seed": SEED, "quick": args.quick},
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "processor": platform.processor()},
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": versions(PACKAGES),
        "bayesirt_source": source,
        "loadavg_start": load,
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "total_wall_s": time.perf_counter() - start,
        "rows": rows,
    }
    result["benchmark_rows"] = benchmark_rows(result)
    write_results(json_path, result, _markdown, echo=True)


if __name__ == "__main__":
    main()
