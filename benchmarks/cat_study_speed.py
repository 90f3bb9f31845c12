"""Cost of the suite's cat step at leaderboard size (issue 44 item 5): one split of the CAT study per bank.

The five Open LLM Leaderboard v1 files (``--data``, read only) restricted to the 2,461 models that
answered all five; the banks of the SAFE suite's cat step: each benchmark alone and the composite
(all five pooled). For each bank one calibration/test split of :func:`bayesirt.safety.cat_study.cat_study`
at the shipped settings (``analyses/safety_suite.toml``: budgets 10-200, 100 random subsets; the
study runs 20 such splits), timed in CPU seconds (``time.process_time``, this process, single-threaded
BLAS and numba) and wall seconds, with the CPU seconds of the per-split 2PL calibration
(:func:`bayesirt.frequentist.mml.fit_mml`) apart. The step's cost is extrapolated as 20 splits per
bank; on a quiet 2-core machine the splits run two at a time (``workers=2``), so its wall time is
about the CPU total / 2.

Run with ``PYTHONPATH`` pointing at the checkout to measure (another checkout gives the figures of
its implementation; the split is the same private task function in both)::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 PYTHONPATH=$PWD \\
        .venv/bin/python benchmarks/cat_study_speed.py
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import loadavg, machine, source_state, write_results  # noqa: E402

DATA = Path("/work/shared/data/llm/open_llm_leaderboard_v1")
NAMES = ("arc", "gsm8k", "mmlu", "truthfulqa", "winogrande")
BUDGETS = (10, 25, 50, 75, 100, 150, 200)
SPLITS = 20  # the shipped setting: the step's cost is this many splits per bank


def banks(folder: Path) -> dict:
    from bayesirt.data import load
    from bayesirt.data.responses import informative_items
    from bayesirt.safety.scopes import pool_benchmarks

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the orientation guess of mmlu.csv
        data = {n: load(folder / f"{n}.csv") for n in NAMES}
    common = sorted(set.intersection(*(set(map(str, d["model"].values)) for d in data.values())))
    data = {n: d.sel(model=common) for n, d in data.items()}
    data["composite"] = pool_benchmarks(data)
    return {n: informative_items(d)[0] for n, d in data.items()}


def time_split(ds, random_subsets: int, seed: int) -> dict:
    """One split of the study at the shipped settings: CPU and wall seconds, and those of the 2PL fit."""
    from bayesirt.safety import cat_study as module
    from bayesirt.utils.parallel import spawn_seeds

    fit_cpu = []
    original = module.fit_mml

    def timed_fit(*args, **kwargs):
        start = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            fit_cpu.append(time.process_time() - start)

    task = {"data": ds, "seed": spawn_seeds(seed, 1)[0], "budgets": BUDGETS, "random_subsets": random_subsets,
            "calibration": 0.75, "rule": "fisher", "estimator": "eap", "target": module._resolve_target(ds, "auto"),
            "quotas": False, "design": getattr(module, "STATIC_DESIGN", "max_information")}
    module.fit_mml = timed_fit
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # EM iteration cap, grid coarseness: the study's own business
            cpu, wall = time.process_time(), time.perf_counter()
            out = module._one_split(task)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        module.fit_mml = original
    rmse = {d: [None if not np.isfinite(v) else round(float(v), 6) for v in out[d][:, 0]] for d in ("cat", "static",
                                                                                                     "random")}
    return {"items": int(ds.sizes["item"]), "models": int(ds.sizes["model"]), "cpu_s": round(cpu, 2),
            "wall_s": round(wall, 2), "fit_cpu_s": round(sum(fit_cpu), 2), "rest_cpu_s": round(cpu - sum(fit_cpu), 2),
            "rmse": rmse}


def run(args) -> dict:
    data = banks(Path(args.data))
    rows = {}
    for name in args.banks:
        rows[name] = time_split(data[name], args.random_subsets, args.seed)
        print(name, rows[name], flush=True)
    import bayesirt

    total = sum(r["cpu_s"] for r in rows.values()) * SPLITS
    fits = sum(r["fit_cpu_s"] for r in rows.values()) * SPLITS
    return {"date": dt.date.today().isoformat(), "machine": machine(), "source": source_state(),
            "package": str(Path(bayesirt.__file__).resolve().parent), "command": "benchmarks/cat_study_speed.py " + " ".join(sys.argv[1:]), "load_average": loadavg(),
            "settings": {"budgets": list(BUDGETS), "random_subsets": args.random_subsets, "splits_timed": 1,
                         "splits_extrapolated": SPLITS, "seed": args.seed},
            "banks": rows, "step_cpu_s": round(total), "step_fit_cpu_s": round(fits),
            "quiet_2core_wall_min": round(total / 2 / 60, 1)}


def markdown(result: dict) -> str:
    lines = [f"CAT study cost at leaderboard size ({result['date']}, `{result['command']}`, package "
             f"{result['package']}, source {result['source'].get('head')}, load average {result['load_average']}).", "",
             "One split per bank at the shipped settings (budgets 10-200, 100 random subsets); CPU seconds of "
             "this process, single-threaded.", "",
             "| bank | items x models | split CPU-s | of which 2PL fit | rest | split wall-s |", "|---|---|---|---|---|---|"]
    lines += [f"| {n} | {r['items']} x {r['models']} | {r['cpu_s']:.1f} | {r['fit_cpu_s']:.1f} | {r['rest_cpu_s']:.1f} | "
              f"{r['wall_s']:.1f} |" for n, r in result["banks"].items()]
    lines += ["", f"Cat step, {result['settings']['splits_extrapolated']} splits per bank: {result['step_cpu_s']} CPU-s "
              f"({result['step_fit_cpu_s']} in the per-split 2PL fits); on a quiet 2-core machine (two splits at a "
              f"time) about {result['quiet_2core_wall_min']} min (target: 15 min)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--banks", nargs="+", default=[*NAMES, "composite"])
    parser.add_argument("--random-subsets", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "cat_study_speed.json"))
    args = parser.parse_args(argv)
    if not Path(args.data).is_dir():
        print(f"skipped: {args.data} is absent")
        return 0
    write_results(args.out, run(args), markdown, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
