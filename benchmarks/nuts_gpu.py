"""The JAX NUTS path on a GPU: ``fit(..., sampler="numpyro")`` on a whole-leaderboard 2PL.

One simulated 2PL matrix (``bayesirt.data.simulate_pl("2pl", ...)``, default 5,000 models x 14,042
items, complete; ``--missing 0.7`` hides 70% of the cells at random), fitted by
``bayesirt.fit(responses, "2pl", method="nuts", sampler="numpyro")``: PyMC's JAX NUTS (NumPyro's
sampler, all chains at once) on bayesirt's model, i.e. its reparameterization (abilities as mean +
zero-sum deviation, the ability shift moved into the intercepts; ``bayesirt/models/logistic.py``).
Reported: min bulk ESS over every element of theta, discrimination and intercept (ArviZ), wall s of
the ``fit`` call (XLA compile included; compile s as JAX reports it), ESS per wall second, max R-hat,
divergences, mean leapfrog steps per draw and the correlation of posterior means with the truth.

Runs with the Python of the JAX environment (``make test-jax`` creates ``.venv-jax``)::

    .venv-jax/bin/python benchmarks/nuts_gpu.py                     # on a GPU machine: 5000x14042
    .venv-jax/bin/python benchmarks/nuts_gpu.py --missing 0.7
    .venv-jax/bin/python benchmarks/nuts_gpu.py --cpu-small --out /tmp/nuts_gpu_cpu.json   # CPU, 40x60

Without a GPU (or without JAX) and without ``--cpu-small`` it prints one line saying so and exits 0,
writing nothing: the numbers are meant to come from an accelerator. ``--cpu-small`` runs the same
code on the CPU at a small size (``tests/test_jax_sampler.py`` runs it). Writes ``--out`` (JSON) and
the same stem with ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # _common, nuts_stan

from _common import fmt as _f, loadavg as _load, machine, parse_size, source_state, versions, write_results  # noqa: E402
from nuts_stan import diagnostics  # noqa: E402

PACKAGES = ("bayesirt", "pymc", "pytensor", "jax", "jaxlib", "numpyro", "arviz", "numpy")
FULL_SIZE, SMALL_SIZE = "5000x14042", "40x60"
GPU_PLATFORMS = ("gpu", "cuda", "rocm")


def accelerators() -> list[str] | None:
    """The GPU devices JAX sees; None when JAX is not installed."""
    try:
        import pymc.sampling.jax  # noqa: F401  (first: it sets XLA_FLAGS before JAX starts, as fit does)
        import jax
    except ImportError:
        return None
    return [str(d) for d in jax.devices() if d.platform in GPU_PLATFORMS]


def run(models: int, items: int, args) -> dict:
    """One fit on the JAX path; its timings and diagnostics (nuts_stan.diagnostics, as every NUTS benchmark)."""
    from bayesirt.data import simulate_pl
    from bayesirt.inference.fitting import fit

    responses, truth = simulate_pl("2pl", n_items=items, n_models=models, seed=args.seed, missing=args.missing)
    t0 = time.perf_counter()
    tree = fit(responses, "2pl", method="nuts", sampler="numpyro", draws=args.draws, tune=args.tune,
               chains=args.chains, seed=args.seed, progress=False)
    wall = time.perf_counter() - t0
    timings = json.loads(tree.attrs["bayesirt_timings"])
    times = {"wall_s": wall, "compile_s": timings["compile_s"], "sample_s": timings["sample_s"]}
    return times | diagnostics(tree["posterior"].to_dataset(), tree["sample_stats"].to_dataset(), times, truth)


def markdown(result: dict) -> str:
    r, cfg = result["run"], result["config"]
    return "\n".join([
        "# NUTS on the JAX path (`fit(..., sampler=\"numpyro\")`)", "",
        f"Command: `{result['command']}`  ",
        f"Date: {result['date']}; machine: {result['machine']}; devices: {', '.join(result['devices'])}; "
        f"load average {result['loadavg_start']} -> {result['loadavg_end']}  ",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items()), "",
        f"{cfg['models']:,} models x {cfg['items']:,} items (simulated 2PL, {cfg['missing']:.0%} missing, seed "
        f"{cfg['seed']}), {cfg['chains']} chains x ({cfg['tune']} tune + {cfg['draws']} draws).", "",
        "| min bulk ESS (theta / a / d) | wall s incl. compile | compile s | ESS/s wall | ESS/s sampling | max R-hat "
        "| div. | leapfrog / draw | r truth theta/a/b |", "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        f"| {r['min_bulk_ess']:.0f} ({' / '.join(f'{v:.0f}' for v in r['min_bulk_ess_by_var'].values())}) | "
        f"{r['wall_s']:.1f} | {r['compile_s']:.1f} | {r['ess_per_wall_s']:.3g} | {r['ess_per_sample_s']:.3g} | "
        f"{r['max_rhat']:.3f} | {r['divergences']} | {_f(r.get('mean_leapfrog_steps'))} | "
        + "/".join(f"{v:.3f}" for v in r["corr_truth"].values()) + " |", "",
        "min bulk ESS: the smallest `arviz.ess(method='bulk')` over every element of theta, discrimination and "
        "intercept; wall: the whole `fit` call (model build, XLA compile, sampling); compile s: XLA compile time "
        "reported by JAX.", ""])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default=FULL_SIZE, help=f"MODELSxITEMS (default {FULL_SIZE})")
    p.add_argument("--missing", type=float, default=0.0, help="share of cells missing at random (default 0)")
    p.add_argument("--draws", type=int, default=500)
    p.add_argument("--tune", type=int, default=500)
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--seed", type=int, default=20261129, help="data seed and the sampler's seed")
    p.add_argument("--cpu-small", action="store_true",
                   help=f"run on the CPU at {SMALL_SIZE} with 200 + 200 draws (no GPU needed)")
    p.add_argument("--out", type=Path, default=None,
                   help="results JSON [benchmarks/results/nuts_gpu.json; with --cpu-small nuts_gpu_cpu_small.json]")
    args = p.parse_args(argv)
    devices = accelerators()
    if devices is None:
        print("nuts_gpu.py: JAX is not installed here; run it with .venv-jax/bin/python (`make test-jax` creates it).")
        return 0
    if not devices and not args.cpu_small:
        print("nuts_gpu.py: no GPU visible to JAX on this machine; nothing measured (--cpu-small runs a small CPU check).")
        return 0
    if args.cpu_small:
        args.size, args.draws, args.tune = SMALL_SIZE, 200, 200
        devices = ["cpu"]
    out = args.out or HERE / "results" / ("nuts_gpu_cpu_small.json" if args.cpu_small else "nuts_gpu.json")
    models, items = parse_size(args.size)
    date, load_start = time.strftime("%Y-%m-%dT%H:%M:%S%z"), _load()
    r = run(models, items, args)
    result = {"command": " ".join([".venv-jax/bin/python", "benchmarks/nuts_gpu.py",
                                   *(argv if argv is not None else sys.argv[1:])]),
              "date": date, "machine": machine(), "devices": devices, "versions": versions(PACKAGES),
              "bayesirt_source": source_state(), "loadavg_start": load_start, "loadavg_end": _load(),
              "config": {"models": models, "items": items, "missing": args.missing, "draws": args.draws,
                         "tune": args.tune, "chains": args.chains, "seed": args.seed, "cpu_small": args.cpu_small,
                         "xla_flags": os.environ.get("XLA_FLAGS", "")},
              "run": r}
    write_results(out, result, markdown, echo=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
