"""Peak memory of whole CLI runs (issue 31, part 0): ``bayesirt fit`` (ADVI), ``compare``, ``audit --quick``
and ``cat`` on simulated 2PL leaderboards of two sizes, each command in a subprocess of its own.

Target: ``bayesirt fit`` with ADVI and 1,000 draws peaks at <= 2 GB at 755 models x 1,351 items (the
issue's MMLU-Pro-math leaderboard; that file is not in ../shared/data, so a 2PL of the same shape is
simulated) and at <= 4 GB at 5,000 x 14,042.

Each run is ``python -m bayesirt COMMAND DATA --out TMP ...`` started with ``subprocess.Popen`` and
reaped with ``os.wait4``, whose ``ru_maxrss`` is the peak resident set size of that process (and of
any child it waited for: the largest single process, not the sum of processes alive at once; the
commands run here with ``--workers 1`` where they have workers). The data are written once per size
as a ``.nc`` response file (``bayesirt.data.io.save_responses``): a CSV of 70 M cells would measure
the CSV reader. Model ids ``ownerK/Family-N`` spread 150 owners over five families and "other",
so the audit has families to compare.

``--synthetic-posterior`` (fit only) replaces ADVI by independent normal draws around the simulated
truth (sd 0.05), everything else in the job unchanged (the PyMC model is still built): the memory of
what follows a fit at sizes where ADVI itself takes many minutes (13 min at 5,000 x 14,042,
``scale_advi.md``). Rows say so.

Rows accumulate in the results JSON: a run replaces the rows of the commands, sizes and mode it
measures and keeps the others, each row with its own date, load average and source commit.

The committed results come from three runs (about 45 min on 2 shared cores; compare alone 35 min)::

    .venv/bin/python benchmarks/peak_memory.py                                   # all four at 755 x 1,351
    .venv/bin/python benchmarks/peak_memory.py --sizes 5000x14042 --commands fit --synthetic-posterior
    .venv/bin/python benchmarks/peak_memory.py --sizes 2000x5000 --commands audit,cat
    .venv/bin/python benchmarks/peak_memory.py --quick                           # 100 x 200, a smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import fmt, loadavg, machine, parse_size, source_state, versions, write_results  # noqa: E402
from scale_advi import simulate  # noqa: E402

RESULTS = Path(__file__).parent / "results"
SEED = 20261202
FAMILY_NAMES = ("Llama-3", "Qwen2", "gemma-2", "Mistral", "phi-3", "olmo")
#: The measurement this benchmark was written against (not rerun by it).
BEFORE = ("on main 1163012 (the item table's information held 200 draws x items x models in float64, several "
          "copies), `bayesirt fit` of a 755 x 1,351 2PL simulated by `simulate_pl(seed=1)` and read from a wide CSV, "
          "ADVI, 1,000 draws, peaked at 13.45 GB RSS in 79 s (`/usr/bin/time -v`, load 2.0-4.8); after the change the "
          "same command peaked at 0.57 GB in 21 s (load 1.9), with the same tables (largest relative difference 1e-15).")
TARGETS_GB = {(755, 1351): 2.0, (5000, 14042): 4.0}  # bayesirt fit, ADVI, 1,000 draws (issue 31)

#: Arguments of each command after DATA (``--out``, ``--force`` and ``--no-progress`` are added).
COMMANDS = {
    "fit": ["fit", "--method", "advi", "--draws", "1000"],
    # the whole-leaderboard posterior (issue 31 part 2): <= 300 s wall and <= 4 GB for the whole run at 5,000 x 14,042
    "fit-laplace": ["fit", "--method", "laplace", "--draws", "1000"],
    # 200 draws: the per-model marginal likelihood integrates each draw by quadrature (time ~ draws x cells)
    "compare": ["compare", "--method", "advi", "--specs", "1pl,2pl", "--draws", "200", "--kfold", "never",
                "--workers", "1"],
    "audit": ["audit", "--quick", "--workers", "1"],
    "cat": ["cat", "--splits", "2", "--random-subsets", "10", "--workers", "1"],
}


def write_data(n_models: int, n_items: int, path: Path) -> dict:
    """Simulate a complete 2PL matrix (``scale_advi.simulate``) and save it as a response file."""
    from bayesirt.data.io import save_responses
    from bayesirt.data.responses import make_responses

    y, truth = simulate(n_models, n_items, 0.0, SEED)
    ids = [f"owner{k % 150}/{FAMILY_NAMES[k % len(FAMILY_NAMES)]}-{k}" for k in range(n_models)]
    save_responses(make_responses(y, model_id=ids, item_id=[f"q{j}" for j in range(n_items)],
                                  name=f"simulated 2PL {n_models} x {n_items}"), path)
    np.savez(path.with_suffix(".truth.npz"), **truth)
    return {"cells": int(y.size), "mb": path.stat().st_size / 1e6}


def measure(argv: list[str], timeout: float) -> dict:
    """Run ``argv``; its wall seconds, peak RSS (GB) and return code, from ``os.wait4``."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=os.environ | {"PYTHONWARNINGS": "ignore"})
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.2)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        err.seek(0)
        tail = [ln for ln in err.read().splitlines() if ln.strip()][-3:]
    return {"wall_s": time.perf_counter() - t0, "peak_rss_gb": usage.ru_maxrss / 2**20, "returncode": proc.returncode,
            "stderr_tail": tail}


def synthetic_child(argv: list[str]) -> None:
    """Run ``bayesirt fit`` (``argv``) with ADVI replaced by normal draws around the simulated truth."""
    import xarray as xr

    import bayesirt.inference.fitting as fitting
    from bayesirt.cli.main import main

    data = Path(argv[1])
    truth = dict(np.load(data.with_suffix(".truth.npz")))

    def sample_model(pm_model, *, method, draws, seed, **_):
        rng = np.random.default_rng(seed)
        coords = {k: np.asarray(v) for k, v in pm_model.coords.items()}
        a = truth["discrimination"] + rng.normal(0, 0.05, (1, draws, truth["discrimination"].size))
        b = truth["difficulty"] + rng.normal(0, 0.05, a.shape)
        theta = truth["theta"] + rng.normal(0, 0.05, (1, draws, truth["theta"].size))
        posterior = xr.Dataset({"theta": (("chain", "draw", "model"), theta),
                                "discrimination": (("chain", "draw", "item"), a),
                                "intercept": (("chain", "draw", "item"), -a * b),
                                "difficulty": (("chain", "draw", "item"), b)},
                               coords={"item": coords["item"], "model": coords["model"]})
        tree = xr.DataTree.from_dict({"posterior": posterior})
        tree.attrs = {"bayesirt_settings": json.dumps({"method": method, "draws": draws, "synthetic": True}),
                      "bayesirt_timings": json.dumps({"fit_s": 0.0}), "advi_converged": 1}
        return tree

    fitting.sample_model = sample_model  # the PyMC model is still built (its memory counts); only sampling is replaced
    sys.exit(main(argv))


def markdown(result: dict) -> str:
    lines = [
        "# Peak memory of whole CLI runs (issue 31, part 0)", "",
        f"{result['machine']}. Each row is one run of `benchmarks/peak_memory.py` (rows of earlier runs are kept "
        "until the same command, size and mode is measured again): its date, the 1-minute load average at its start "
        "and end (2 cores shared: wall seconds are not comparable) and the bayesirt commit it ran.", "",
        "Peak RSS: `ru_maxrss` of the command's process (`os.wait4`), GB = 2^30 bytes. Data: a complete simulated "
        "2PL (theta, b ~ N(0, 1), a ~ LogNormal(0, 0.5)) saved as a `.nc` response file.", "",
        f"Before: {BEFORE}", "",
        "| command | size (models x items) | peak RSS GB | target GB | met | wall s | load | exit | date | source | "
        "arguments |",
        "|---|---|---:|---:|---|---:|---|---:|---|---|---|",
    ]
    for row in result["rows"]:
        target = row.get("target_gb")
        met = "" if target is None else ("yes" if row["peak_rss_gb"] <= target and row["returncode"] == 0 else "no")
        lines.append(f"| {row['command']}{' (synthetic posterior)' if row.get('synthetic') else ''} | "
                     f"{row['models']:,} x {row['items']:,} | {fmt(row['peak_rss_gb'], '{:.2f}')} | "
                     f"{fmt(target, '{:.1f}')} | {met} | {fmt(row['wall_s'])} | {row['load'][0]:.1f}-{row['load'][1]:.1f} | "
                     f"{row['returncode']} | {row['date'][:16]} | {row['source']} | `{' '.join(row['args'])}` |")
    failed = [r for r in result["rows"] if r["returncode"]]
    for row in failed:
        lines += ["", f"- {row['command']} at {row['models']} x {row['items']} failed: {' / '.join(row['stderr_tail'])}"]
    return "\n".join(lines) + "\n"


def _source() -> str:
    state = source_state()
    return (state.get("head") or "?")[:10] + (" + uncommitted" if state.get("uncommitted") else "")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--synthetic-child":
        synthetic_child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="755x1351", help="comma-separated MODELSxITEMS")
    parser.add_argument("--commands", default=",".join(COMMANDS), help=f"subset of {','.join(COMMANDS)}")
    parser.add_argument("--synthetic-posterior", action="store_true", help="fit: normal draws instead of ADVI")
    parser.add_argument("--quick", action="store_true", help="100 x 200 only, a smoke test")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per command")
    parser.add_argument("--out", default=None, help="results JSON [results/peak_memory(_quick).json]")
    args = parser.parse_args()
    sizes = [(100, 200)] if args.quick else [parse_size(s) for s in args.sizes.split(",")]
    commands = args.commands.split(",")
    unknown = set(commands) - set(COMMANDS)
    if unknown or (args.synthetic_posterior and commands != ["fit"]):
        parser.error(f"--commands: unknown {sorted(unknown)}" if unknown else "--synthetic-posterior is for --commands fit")
    out = Path(args.out) if args.out else RESULTS / f"peak_memory{'_quick' if args.quick else ''}.json"
    result = json.loads(out.read_text()) if out.exists() else {"rows": []}
    result |= {"machine": machine(), "versions": versions(["numpy", "pymc", "xarray", "numba"]), "seed": SEED}
    source = _source()
    with tempfile.TemporaryDirectory() as tmp:
        for n_models, n_items in sizes:
            data = Path(tmp) / f"sim_{n_models}x{n_items}.nc"
            result.setdefault("data", {})[f"{n_models}x{n_items}"] = write_data(n_models, n_items, data)
            for name in commands:
                args_ = [*COMMANDS[name][:1], str(data), *COMMANDS[name][1:]]
                if args.quick and name == "audit":
                    args_ += ["--min-family-size", "10"]  # about 17 models per family at 100 models
                prefix = [sys.executable, __file__, "--synthetic-child"] if args.synthetic_posterior else \
                         [sys.executable, "-m", "bayesirt"]
                date, load = time.strftime("%Y-%m-%dT%H:%M:%S%z"), loadavg()[0]
                row = measure([*prefix, *args_, "--out", str(Path(tmp) / f"out_{name}"), "--force", "--no-progress"],
                              args.timeout)
                key = (name, n_models, n_items, args.synthetic_posterior)
                result["rows"] = [r for r in result["rows"]
                                  if (r["command"], r["models"], r["items"], r["synthetic"]) != key]
                shown = [str(a).replace(str(data), "DATA") for a in args_]
                result["rows"].append({"command": name, "models": n_models, "items": n_items, "args": shown,
                                       "target_gb": TARGETS_GB.get((n_models, n_items)) if name.startswith("fit") else None,
                                       "synthetic": args.synthetic_posterior, "date": date, "load": [load, loadavg()[0]],
                                       "source": source, **row})
                print(f"{name} {n_models}x{n_items}: {row['peak_rss_gb']:.2f} GB, {row['wall_s']:.0f} s, "
                      f"exit {row['returncode']}", flush=True)
                write_results(out, result, markdown)  # after every row: an interrupted run keeps what it measured
    print(markdown(result))


if __name__ == "__main__":
    main()
