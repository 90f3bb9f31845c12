"""The SAFE suite end to end on five real benchmark files (issue 33 acceptance).

Runs :func:`bayesirt.jobs.suite.run_safety_suite` with the options of
``analyses/safety_suite.toml`` (SAFE's factor analysis on the complete cohort, polarity intervals,
CAT budgets up to 200, ability-shift sandbagging) on the five Open LLM Leaderboard v1 files
(``--data``, read only): ``--models`` random models common to all five, written as NetCDF to a
temporary folder (never into the repository). Fewer CAT splits and random subsets than the suite
file (``--splits``, ``--random-subsets``) to fit a shared machine. Writes the headline figures to
``--out`` (JSON) and Markdown beside it; the suite's folder is ``--keep`` or a temporary one.

    .venv/bin/python benchmarks/safe_suite_leaderboard.py          # about 8 min on one busy core
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, source_state, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = Path("/work/shared/data/llm/open_llm_leaderboard_v1")
NAMES = ("arc", "gsm8k", "mmlu", "truthfulqa", "winogrande")


def run(args) -> dict:
    from bayesirt.data import load
    from bayesirt.data.io import save_responses
    from bayesirt.jobs.suite import run_safety_suite

    spec = tomllib.loads((ROOT / "analyses" / "safety_suite.toml").read_text())["safety"]
    steps = spec.pop("steps")
    options = {k: dict(v) for k, v in spec.items()}
    options["cat"] |= {"splits": args.splits, "random_subsets": args.random_subsets, "workers": 1}
    options["factors"] |= {"loading_bootstrap": args.bootstrap, "parallel_iter": args.parallel_iter}
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="safe_suite_"))
    work.mkdir(parents=True, exist_ok=True)
    data = {n: load(Path(args.data) / f"{n}.csv") for n in NAMES}
    common = sorted(set.intersection(*(set(map(str, d["model"].values)) for d in data.values())))
    pick = sorted(np.random.default_rng(args.seed).choice(common, args.models, replace=False))
    files = [str(save_responses(d.sel(model=pick), work / f"{n}.nc")) for n, d in data.items()]
    start = time.perf_counter()
    out = run_safety_suite(files, work / "suite", steps=steps, options=options, force=True, progress=False)
    seconds = time.perf_counter() - start
    factors = out / "factors"
    polarity = pd.read_csv(factors / "polarity.csv", index_col="benchmark")
    fits = pd.read_csv(factors / "fit_indices.csv")
    parallel = pd.read_csv(factors / "parallel.csv")
    curves = pd.read_csv(out / "cat" / "composite" / "cat_curves.csv")
    rmse = curves[(curves["metric"] == "rmse")].pivot(index="budget", columns="design", values="mean")
    detection = {}
    for bank in pd.read_csv(out / "sandbag" / "scopes.csv")["scope"]:
        d = pd.read_csv(out / "sandbag" / bank / "detection.csv")
        top = d[d["strength"] == d["strength"].max()]
        detection[bank] = top[["scope", "personfit_rate", "shift_rate", "auc"]].to_dict("records")
    distinguish = pd.read_csv(factors / "distinguishability.csv", index_col="benchmark")
    return {"date": dt.date.today().isoformat(), "machine": machine(), "source": source_state(),
            "command": "benchmarks/safe_suite_leaderboard.py", "seconds": round(seconds),
            "settings": {"models": args.models, "splits": args.splits, "random_subsets": args.random_subsets,
                         "loading_bootstrap": args.bootstrap, "parallel_iter": args.parallel_iter, "seed": args.seed,
                         "suite": options},
            "status": json.loads((out / "summary.json").read_text())["steps"],
            "polarity": polarity.reset_index().to_dict("records"),
            "fit_indices": fits[["n_factors", "rmsea", "cfi", "tli", "heywood"]].to_dict("records"),
            "parallel_retained": int((parallel["observed_fa"] > parallel["reference_fa"]).cumprod().sum()),
            "alignment": pd.read_csv(factors / "alignment.csv").to_dict("records"),
            "composite_rmse": {int(b): r for b, r in rmse.to_dict("index").items()},
            "distinguishability": distinguish.to_dict("index"), "sandbag_top_level": detection}


def markdown(result: dict) -> str:
    lines = [f"SAFE suite on five Open LLM Leaderboard v1 files ({result['date']}, `{result['command']}`, "
             f"{result['settings']['models']} models, {result['seconds']} s).", "",
             "Steps: " + ", ".join(f"{s} {e['status']}" for s, e in result["status"].items()) + ".", "",
             "| benchmark | general loading [95% bootstrap] | polarity |", "|---|---|---|"]
    lines += [f"| {p['benchmark']} | {p['general_loading']:.2f} [{p['lower']:.2f}, {p['upper']:.2f}] | "
              f"{p['polarity']:+d} ({p['source']}) |" for p in result["polarity"]]
    lines += ["", "| factors | RMSEA | CFI | TLI | Heywood |", "|---|---|---|---|---|"]
    lines += [f"| {f['n_factors']} | {f['rmsea']:.3f} | {f['cfi']:.3f} | {f['tli']:.3f} | {f['heywood']} |"
              for f in result["fit_indices"]]
    lines += ["", f"Parallel analysis (minres) retains {result['parallel_retained']} factor(s).", "",
              "| composite | members | signed mean r |", "|---|---|---|"]
    lines += [f"| {a['composite']} | {a['members']} | {a['signed']:.3f} |" for a in result["alignment"]]
    lines += ["", "Composite full-score RMSE by budget (CAT / static / random):", "",
              "| budget | CAT | static | random |", "|---|---|---|---|"]
    lines += [f"| {b} | {r['cat']:.3f} | {r['static']:.3f} | {r['random']:.3f} |"
              for b, r in sorted(result["composite_rmse"].items(), key=lambda kv: int(kv[0]))]
    lines += ["", "| benchmark | " + " | ".join(next(iter(result["distinguishability"].values()))) + " |",
              "|---|" + "---|" * len(next(iter(result["distinguishability"].values())))]
    lines += [f"| {b} | " + " | ".join(f"{v:.1%}" for v in row.values()) + " |"
              for b, row in result["distinguishability"].items()]
    lines += ["", "Sandbagging at the largest shift (2 logits): person fit / ability shift / l_z AUC", "",
              "| bank | uniform | targeted | triggered |", "|---|---|---|---|"]
    for bank, rows in result["sandbag_top_level"].items():
        cells = {r["scope"]: f"{r['personfit_rate']:.0%} / {r['shift_rate']:.0%} / {r['auc']:.2f}" for r in rows}
        lines.append(f"| {bank} | {cells.get('uniform', '')} | {cells.get('targeted', '')} | "
                     f"{cells.get('triggered', '')} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--models", type=int, default=400)
    parser.add_argument("--splits", type=int, default=4)
    parser.add_argument("--random-subsets", type=int, default=10)
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--parallel-iter", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", default=None, help="folder for the data and the suite output (default: temporary)")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "safe_suite_leaderboard.json"))
    args = parser.parse_args(argv)
    write_results(args.out, run(args), markdown, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
