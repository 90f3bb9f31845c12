"""ADVI at leaderboard scale: a 2PL on a simulated 5,000 models x 14,042 items matrix (the NT MMLU size).

Two cases, each in its own subprocess so its peak memory is its own:

- ``complete``: every one of the 70.2 M cells observed;
- ``missing70``: 70% of the cells missing completely at random (21 M observed).

Each case simulates the matrix an item block at a time straight into int8 (no float64 copy of
the full matrix), builds the response Dataset, and fits ``fit(..., method="advi",
advi_batch_size=B)``: minibatch ADVI over observed cells in long format (int32 indices, int8
responses; ``bayesirt.models.logistic``). Reported per stage: wall and CPU seconds, the
process's peak resident memory (``ru_maxrss``), iterations, convergence, and the correlation of
the posterior means with the simulated truth.

A second table times one log-density + gradient evaluation of the two likelihood layouts (dense
matrix vs observed cells in long format) at several observed fractions: the measurement behind
``DENSE_FROM`` in ``bayesirt/models/logistic.py``.

    .venv/bin/python benchmarks/scale_advi.py                 # both cases, ~1 h on 2 cores
    .venv/bin/python benchmarks/scale_advi.py --quick         # 500 x 2,000, a smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import benchmark_row, machine, source_state, versions, write_results  # noqa: E402

RESULTS = Path(__file__).parent / "results"
SEED = 20261130


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux reports KiB


def simulate(n_models: int, n_items: int, missing: float, seed: int, block: int = 500):
    """2PL truth (theta ~ N(0,1), a ~ LogNormal(0, 0.5), b ~ N(0,1)) and an int8 response matrix
    (items x models, -1 = missing) drawn an item block at a time."""
    from scipy.special import expit

    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 1.0, n_models)
    a = np.exp(rng.normal(0.0, 0.5, n_items))
    b = rng.normal(0.0, 1.0, n_items)
    y = np.empty((n_items, n_models), dtype=np.int8)
    for start in range(0, n_items, block):
        sl = slice(start, start + block)
        p = expit(a[sl, None] * (theta[None, :] - b[sl, None]))
        y[sl] = rng.random(p.shape) < p
        if missing:
            y[sl][rng.random(p.shape) < missing] = -1
    return y, {"theta": theta, "discrimination": a, "difficulty": b}


def run_case(name: str, n_models: int, n_items: int, missing: float, batch_size: int, draws: int) -> dict:
    from bayesirt.data.responses import make_responses
    from bayesirt.inference.fitting import fit

    stages = {}

    def stage(label, fn):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        stages[label] = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                         "peak_rss_gb_after": _peak_rss_gb()}
        return out

    y, truth = stage("simulate", lambda: simulate(n_models, n_items, missing, SEED))
    responses = stage("make_responses", lambda: make_responses(y, name=f"scale-{name}"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = stage("fit", lambda: fit(responses, "2pl", method="advi", advi_batch_size=batch_size, draws=draws,
                                        seed=SEED, progress=False))
    timings = json.loads(tree.attrs["bayesirt_timings"])
    post = tree["posterior"]
    # the 2PL reports slope and intercept; the difficulty -intercept / slope per draw
    estimates = {"theta": post["theta"], "discrimination": post["discrimination"],
                 "difficulty": -post["intercept"] / post["discrimination"]}
    r = {k: float(np.corrcoef(estimates[k].mean(("chain", "draw")).values, truth[k])[0, 1]) for k in truth}
    n_obs = int((responses["responses"].values != -1).sum())
    return {
        "case": name, "n_models": n_models, "n_items": n_items, "missing": missing, "n_observed": n_obs,
        "batch_size": batch_size, "draws": draws, "stages": stages, "fit_timings": timings,
        "iterations": int(tree.attrs["advi_iterations_run"]), "converged": bool(tree.attrs["advi_converged"]),
        "r_truth": r, "responses_mb": responses["responses"].nbytes / 2**20, "peak_rss_gb": _peak_rss_gb(),
    }


def layout_timing(n_items: int = 2000, n_models: int = 1000, fractions=(1.0, 0.7, 0.5, 0.3, 0.1), repeats: int = 20):
    """Median seconds of one logp + gradient evaluation, dense vs long layout, per observed fraction."""
    import pytensor

    import bayesirt.models.logistic as logistic
    from bayesirt.data.responses import make_responses
    from bayesirt.models.specs import load_spec

    spec = load_spec("2pl")
    rows = []
    for frac in fractions:
        y, _ = simulate(n_models, n_items, 1.0 - frac, SEED)
        responses = make_responses(y)
        fns = {}
        for layout, dense_from in (("dense", 0.0), ("long", 2.0)):
            logistic.DENSE_FROM, saved = dense_from, logistic.DENSE_FROM
            try:
                model = logistic.build_logistic(responses, spec)
            finally:
                logistic.DENSE_FROM = saved
            logp = model.logp()
            fn = model.compile_fn([logp, *pytensor.grad(logp, model.value_vars)], inputs=model.value_vars,
                                  point_fn=False)
            x = [model.initial_point()[v.name] for v in model.value_vars]
            fn(*x)
            fns[layout] = (fn, x)
        times = {k: [] for k in fns}
        for _ in range(repeats):
            for k, (fn, x) in fns.items():
                t0 = time.perf_counter()
                fn(*x)
                times[k].append(time.perf_counter() - t0)
        n_obs = int((y != -1).sum())
        rows.append({"observed_fraction": frac, "n_observed": n_obs,
                     **{f"{k}_ms": 1e3 * float(np.median(v)) for k, v in times.items()},
                     **{f"{k}_ns_per_observed": 1e9 * float(np.median(v)) / n_obs for k, v in times.items()}})
    return {"n_items": n_items, "n_models": n_models, "repeats": repeats, "rows": rows}


def _worker(args) -> None:
    if args.worker == "layout":
        out = layout_timing()
    else:
        n_models, n_items, missing = CASES[args.worker] if not args.quick else QUICK[args.worker]
        out = run_case(args.worker, n_models, n_items, missing, args.batch_size if not args.quick else 50_000,
                       args.draws)
    Path(args.worker_out).write_text(json.dumps(out, default=float))


CASES = {"complete": (5000, 14042, 0.0), "missing70": (5000, 14042, 0.7)}
QUICK = {"complete": (500, 2000, 0.0), "missing70": (500, 2000, 0.7)}


def _run_worker(name: str, args) -> dict:
    out = RESULTS / f".scale_{name}.json"
    cmd = [sys.executable, __file__, "--worker", name, "--worker-out", str(out), "--batch-size", str(args.batch_size),
           "--draws", str(args.draws)] + ["--quick"] * args.quick
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"case": name, "failed": tail, "wall_s": time.perf_counter() - t0}
    result = json.loads(out.read_text())
    out.unlink()
    result["process_wall_s"] = time.perf_counter() - t0
    return result


def benchmark_rows(result: dict) -> list[dict]:
    rows = []
    for case in result["cases"]:
        if "failed" in case:
            n_models, n_items, _ = (QUICK if result["quick"] else CASES)[case["case"]]
            size = f"{n_models:,} models x {n_items:,} items"
            rows.append(benchmark_row(task=f"2PL minibatch ADVI at scale ({case['case']})", data_size=size,
                                      bayesirt="failed", peer="none (scale target, no peer)", peer_figure="—",
                                      ratio=None, ratio_meaning="—", target="completes within 24 GB",
                                      target_met=False, quality="—", status=f"failed: {case['failed']}",
                                      command=result["command"], date=result["date"]))
            continue
        size = f"{case['n_models']:,} models x {case['n_items']:,} items"
        fit_s = case["stages"]["fit"]["wall_s"]
        r = case["r_truth"]
        rows.append(benchmark_row(
            task=f"2PL minibatch ADVI at scale ({case['case']})",
            data_size=f"{size}, {case['missing']:.0%} missing ({case['n_observed']:,} observed responses)",
            bayesirt=(f"fit {fit_s:,.0f} s ({case['iterations']:,} iterations of {case['batch_size']:,} cells, "
                      f"{'converged' if case['converged'] else 'NOT converged'}); peak RSS {case['peak_rss_gb']:.2f} GB"),
            peer="none (scale target, no peer)", peer_figure="—", ratio=None, ratio_meaning="—",
            target="completes within 24 GB", target_met=case["peak_rss_gb"] < 24,
            quality=f"r(truth) theta / a / b: {r['theta']:.3f} / {r['discrimination']:.3f} / {r['difficulty']:.3f}",
            command=result["command"], date=result["date"], machine_description=result["machine"]))
    return rows


def markdown(result: dict) -> str:
    lines = [f"# 2PL ADVI at scale ({'quick' if result['quick'] else 'full'})", "",
             f"{result['machine']}; {result['date']}; load average at start {result['load_start']}, at end "
             f"{result['load_end']}. Command: `{result['command']}`.", "",
             "| case | observed | batch | simulate s | make_responses s | fit s (build + ADVI + draws) | iterations | "
             "converged | peak RSS GB | int8 responses MB | r(theta) | r(a) | r(b) |",
             "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    for c in result["cases"]:
        if "failed" in c:
            lines.append(f"| {c['case']} | failed: {c['failed']} |" + " |" * 11)
            continue
        s, r = c["stages"], c["r_truth"]
        lines.append(
            f"| {c['case']} ({c['n_models']:,} x {c['n_items']:,}, {c['missing']:.0%} missing) | {c['n_observed']:,} | "
            f"{c['batch_size']:,} | {s['simulate']['wall_s']:.1f} | {s['make_responses']['wall_s']:.1f} | "
            f"{s['fit']['wall_s']:.1f} | {c['iterations']:,} | {c['converged']} | {c['peak_rss_gb']:.2f} | "
            f"{c['responses_mb']:.0f} | {r['theta']:.3f} | {r['discrimination']:.3f} | {r['difficulty']:.3f} |")
    lines += ["", "fit s includes building the model (long-format cells), compiling, ADVI and drawing the "
              f"posterior sample ({result['draws']} draws). Timings inside fit: "
              + "; ".join(f"{c['case']}: {c['fit_timings']}" for c in result["cases"] if "fit_timings" in c), ""]
    lay = result.get("layout")
    if lay:
        lines += [f"## Likelihood layout: one logp + gradient, {lay['n_items']:,} items x {lay['n_models']:,} models "
                  f"(median of {lay['repeats']}, round-robin)", "",
                  "| observed fraction | observed cells | dense ms | long ms | dense ns / observed cell | "
                  "long ns / observed cell |", "|---:|---:|---:|---:|---:|---:|"]
        for row in lay["rows"]:
            lines.append(f"| {row['observed_fraction']:.1f} | {row['n_observed']:,} | {row['dense_ms']:.2f} | "
                         f"{row['long_ms']:.2f} | {row['dense_ns_per_observed']:.1f} | {row['long_ns_per_observed']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="500 x 2,000 matrices, batch 50,000")
    p.add_argument("--cases", default="complete,missing70")
    p.add_argument("--batch-size", type=int, default=1_000_000)
    p.add_argument("--draws", type=int, default=200)
    p.add_argument("--no-layout", action="store_true", help="skip the layout timing table")
    p.add_argument("--out", type=Path)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        _worker(args)
        return 0
    out = args.out or RESULTS / ("scale_advi_quick.json" if args.quick else "scale_advi.json")
    result = {"quick": args.quick, "machine": machine(), "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "versions": versions(["bayesirt", "pymc", "pytensor", "numpy"]), "bayesirt_source": source_state(),
              "load_start": os.getloadavg(),
              "draws": args.draws, "command": "benchmarks/scale_advi.py " + " ".join(argv or sys.argv[1:]),
              "cases": []}

    def save() -> None:  # after every case, so an interrupted run keeps what it measured
        result["load_end"] = os.getloadavg()
        result["benchmark_rows"] = benchmark_rows(result)
        write_results(out, result, markdown)

    for name in args.cases.split(","):
        result["cases"].append(_run_worker(name, args))
        save()
    if not args.no_layout:
        result["layout"] = _run_worker("layout", args)
        save()
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
