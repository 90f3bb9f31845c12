"""A whole-leaderboard 2PL posterior in minutes: ``fit(..., method="laplace")`` (issue 31, part 2).

The Laplace approximation (the joint Gaussian at the joint posterior mode, ``bayesirt/inference/laplace.py``)
checked for calibration and timed, in four parts, each in its own subprocess (so each peak RSS is its own):

- ``replicates``: coverage of the simulated truth by 90% equal-tailed intervals (from 1,000 draws) of
  every ability, log discrimination and intercept, over REPLICATES datasets of 300 models x 1,000
  items (every other one with 30% of cells missing at random), the truth drawn from
  ``models/2pl.toml``'s priors (theta ~ N(0, 1), a ~ LogNormal(0, 0.5), d ~ N(0, 2)): under the
  model, a calibrated posterior covers it 90% of the time;
- ``nuts``: one dataset of 300 models x 1,000 items (not the 500 x 2,000 first planned: on the shared
  machine, at load averages of 10-15 on 2 cores, NUTS there would take most of an hour), fitted by NUTS (nutpie, 2 chains x (500 + 500)) and by the
  Laplace approximation: per parameter, the ratio of the 90% interval widths (Laplace / NUTS), the
  share of NUTS posterior means inside the Laplace 90% interval, the mean difference in NUTS sds,
  and both methods' coverage of the truth;
- ``scale``: 5,000 models x 14,042 items, complete and with 70% missing, truth from the priors:
  wall and CPU seconds of ``fit`` (mode search + draws), the process's peak RSS, Newton steps, and
  coverage of the truth;
- ``misspecified``: a 3PL truth (guessing c ~ Beta(5, 17), as on multiple-choice benchmarks) at 300
  x 1,000, fitted by the 2PL: coverage of the abilities and the rank correlation with them.

Results: ``benchmarks/results/leaderboard_posterior.json`` and ``.md``. A run of some parts keeps the
others' results from the existing JSON (``--parts``).

    .venv/bin/python benchmarks/leaderboard_posterior.py                       # all parts (~30 min on 2 idle cores)
    .venv/bin/python benchmarks/leaderboard_posterior.py --parts scale         # only the two 5,000 x 14,042 fits
    .venv/bin/python benchmarks/leaderboard_posterior.py --quick               # small sizes, a smoke test
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
from _common import benchmark_row, loadavg, machine, source_state, versions, write_results  # noqa: E402

RESULTS = Path(__file__).parent / "results"
SEED = 20261202
LEVEL = 0.9
PARTS = ("replicates", "nuts", "scale", "misspecified")
FULL = {"replicates": (300, 1000, 6), "nuts": (300, 1000), "scale": (5000, 14042), "misspecified": (300, 1000),
        "draws": 1000, "nuts_draws": 500}
QUICK = {"replicates": (60, 150, 2), "nuts": (40, 100), "scale": (400, 1200), "misspecified": (60, 150),
         "draws": 400, "nuts_draws": 200}


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux reports KiB


def simulate(n_models: int, n_items: int, missing: float, seed: int, guessing: bool = False, block: int = 500):
    """Truth from models/2pl.toml's priors (theta ~ N(0,1), log a ~ N(0, 0.5), d ~ N(0, 2)); with
    ``guessing`` a 3PL with c ~ Beta(5, 17). The int8 matrix (item, model; -1 missing) is drawn an
    item block at a time, so no float64 copy of the whole matrix exists."""
    from scipy.special import expit

    rng = np.random.default_rng(seed)
    theta, alpha, d = rng.normal(0, 1, n_models), rng.normal(0, 0.5, n_items), rng.normal(0, 2, n_items)
    c = rng.beta(5, 17, n_items) if guessing else np.zeros(n_items)
    y = np.empty((n_items, n_models), dtype=np.int8)
    for start in range(0, n_items, block):
        sl = slice(start, start + block)
        p = c[sl, None] + (1 - c[sl, None]) * expit(np.exp(alpha[sl, None]) * theta[None, :] + d[sl, None])
        y[sl] = rng.random(p.shape) < p
        if missing:
            y[sl][rng.random(p.shape) < missing] = -1
    return y, {"theta": theta, "log_discrimination": alpha, "intercept": d}


def _draws(posterior) -> dict:
    return {"theta": posterior["theta"].values.reshape(-1, posterior.sizes["model"]),
            "log_discrimination": np.log(posterior["discrimination"].values).reshape(-1, posterior.sizes["item"]),
            "intercept": posterior["intercept"].values.reshape(-1, posterior.sizes["item"])}


def _interval(draws):
    return np.quantile(draws, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0)


def _hits(draws: dict, truth: dict) -> dict:
    out = {}
    for name, value in truth.items():
        lo, hi = _interval(draws[name])
        out[name] = ((lo <= value) & (value <= hi)).tolist()
    return out


def _laplace(y, draws, seed):
    from bayesirt.data.responses import make_responses
    from bayesirt.inference.fitting import fit

    responses = make_responses(y)
    t0, c0 = time.perf_counter(), time.process_time()
    tree = fit(responses, "2pl", method="laplace", draws=draws, seed=seed, progress=False)
    return tree, {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}


def part_replicates(size) -> dict:
    n_models, n_items, reps = size["replicates"]
    hits = {}
    for rep in range(reps):
        y, truth = simulate(n_models, n_items, 0.3 if rep % 2 else 0.0, SEED + rep)
        tree, _ = _laplace(y, size["draws"], rep)
        for name, h in _hits(_draws(tree["posterior"]), truth).items():
            hits.setdefault(name, []).extend(h)
    return {"n_models": n_models, "n_items": n_items, "replicates": reps, "coverage": _coverage_rows(hits)}


def _coverage_rows(hits: dict) -> dict:
    out = {}
    for name, h in hits.items():
        h = np.asarray(h, dtype=float)
        out[name] = {"coverage": float(h.mean()), "n": int(h.size), "binomial_se": float(np.sqrt(LEVEL * (1 - LEVEL) / h.size))}
    return out


def part_nuts(size) -> dict:
    from bayesirt.data.responses import make_responses
    from bayesirt.inference.fitting import fit

    n_models, n_items = size["nuts"]
    y, truth = simulate(n_models, n_items, 0.0, SEED + 100)
    lap_tree, lap_time = _laplace(y, size["draws"], 0)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nuts_tree = fit(make_responses(y), "2pl", method="nuts", chains=2, draws=size["nuts_draws"],
                        tune=size["nuts_draws"], seed=1, progress=False)
    nuts_s = time.perf_counter() - t0
    import arviz as az

    lap, nuts = _draws(lap_tree["posterior"]), _draws(nuts_tree["posterior"])
    ess = az.ess(nuts_tree["posterior"].to_dataset()[["theta", "discrimination", "intercept"]])
    rhat = az.rhat(nuts_tree["posterior"].to_dataset()[["theta", "discrimination", "intercept"]])
    rows = {}
    for name in lap:
        lo_l, hi_l = _interval(lap[name])
        lo_n, hi_n = _interval(nuts[name])
        ratio = (hi_l - lo_l) / (hi_n - lo_n)
        mean_n, sd_n = nuts[name].mean(axis=0), nuts[name].std(axis=0)
        rows[name] = {
            "width_ratio_median": float(np.median(ratio)), "width_ratio_p05": float(np.quantile(ratio, 0.05)),
            "width_ratio_p95": float(np.quantile(ratio, 0.95)),
            "nuts_mean_inside_laplace_90": float(((lo_l <= mean_n) & (mean_n <= hi_l)).mean()),
            "mean_difference_in_nuts_sd_median": float(np.median(np.abs(lap[name].mean(axis=0) - mean_n) / sd_n)),
            "mean_difference_in_nuts_sd_max": float(np.max(np.abs(lap[name].mean(axis=0) - mean_n) / sd_n)),
            "laplace_truth_coverage": float(np.mean(_hits(lap, {name: truth[name]})[name])),
            "nuts_truth_coverage": float(np.mean(_hits(nuts, {name: truth[name]})[name])),
        }
    return {"n_models": n_models, "n_items": n_items, "laplace": lap_time, "nuts_wall_s": nuts_s,
            "nuts_draws": f"2 chains x ({size['nuts_draws']} tune + {size['nuts_draws']} draws), nutpie",
            "nuts_min_bulk_ess": float(min(float(ess[v].min()) for v in ess.data_vars)),
            "nuts_max_rhat": float(max(float(rhat[v].max()) for v in rhat.data_vars)), "rows": rows}


def part_scale(size, missing: float) -> dict:
    n_models, n_items = size["scale"]
    t0 = time.perf_counter()
    y, truth = simulate(n_models, n_items, missing, SEED + 200 + int(missing * 10))
    simulate_s = time.perf_counter() - t0
    rss_before = _peak_rss_gb()
    tree, timing = _laplace(y, size["draws"], 0)
    hits = _hits(_draws(tree["posterior"]), truth)
    return {"n_models": n_models, "n_items": n_items, "missing": missing, "observed": int((y >= 0).sum()),
            "simulate_s": simulate_s, "fit": timing, "fit_timings": json.loads(tree.attrs["bayesirt_timings"]),
            "newton_steps": int(tree.attrs["laplace_newton_steps"]), "last_step": float(tree.attrs["laplace_last_step"]),
            "schur_passes": int(tree.attrs["laplace_schur_passes"]), "sweeps": int(tree.attrs["laplace_sweeps"]),
            "peak_rss_gb_before_fit": rss_before, "peak_rss_gb": _peak_rss_gb(), "coverage": _coverage_rows(hits)}


def part_misspecified(size) -> dict:
    from scipy.stats import spearmanr

    n_models, n_items = size["misspecified"]
    y, truth = simulate(n_models, n_items, 0.0, SEED + 300, guessing=True)
    tree, _ = _laplace(y, size["draws"], 0)
    draws = _draws(tree["posterior"])
    return {"n_models": n_models, "n_items": n_items, "generator": "3PL, guessing c ~ Beta(5, 17)",
            "theta_coverage": _coverage_rows({"theta": _hits(draws, {"theta": truth["theta"]})["theta"]})["theta"],
            "theta_rank_correlation": float(spearmanr(draws["theta"].mean(axis=0), truth["theta"])[0]),
            "theta_posterior_sd_mean": float(draws["theta"].std(axis=0).mean()),
            "theta_mean_abs_error": float(np.abs(draws["theta"].mean(axis=0) - truth["theta"]).mean())}


def _worker(args) -> None:
    size = QUICK if args.quick else FULL
    if args.worker == "replicates":
        out = part_replicates(size)
    elif args.worker == "nuts":
        out = part_nuts(size)
    elif args.worker.startswith("scale"):
        out = part_scale(size, 0.7 if args.worker.endswith("missing70") else 0.0)
    else:
        out = part_misspecified(size)
    out["load"] = loadavg()
    Path(args.worker_out).write_text(json.dumps(out, default=float))


def _run(name: str, args) -> dict:
    tmp = RESULTS / f".leaderboard_{name}.json"
    cmd = [sys.executable, __file__, "--worker", name, "--worker-out", str(tmp)] + ["--quick"] * args.quick
    load, t0 = loadavg(), time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        return {"failed": (proc.stderr.strip().splitlines() or ["no output"])[-1], "load_start": load}
    out = json.loads(tmp.read_text())
    tmp.unlink()
    out |= {"process_wall_s": time.perf_counter() - t0, "load_start": load}
    return out


def benchmark_rows(result: dict) -> list[dict]:
    rows = []
    for case in ("scale_complete", "scale_missing70"):
        r = result["parts"].get(case)
        if not r or "failed" in r:
            continue
        cov = r["coverage"]
        rows.append(benchmark_row(
            task=f"Whole-leaderboard 2PL posterior, Laplace ({case.split('_')[1]})",
            data_size=f"{r['n_models']:,} models x {r['n_items']:,} items, {r['missing']:.0%} missing",
            bayesirt=f"fit {r['fit']['wall_s']:.0f} s wall (load {r['load_start'][0]}); peak RSS {r['peak_rss_gb']:.2f} GB",
            peer="minibatch ADVI (scale_advi.json)", peer_figure="781 s complete, 205 s missing70 (earlier run)",
            ratio=None, ratio_meaning="not measured side by side", target="<= 300 s wall, <= 4 GB",
            target_met=bool(r["fit"]["wall_s"] <= 300 and r["peak_rss_gb"] <= 4),
            quality="90% coverage of truth theta / log a / d: " + " / ".join(
                f"{cov[k]['coverage']:.3f}" for k in ("theta", "log_discrimination", "intercept")),
            command=result["command"], date=result["date"]))
    return rows


def markdown(result: dict) -> str:
    parts = result["parts"]
    lines = ["# Whole-leaderboard 2PL posterior: Laplace approximation (issue 31, part 2)", "",
             f"Machine: {result['machine']}. Source: {result['source'].get('head')}. "
             f"Each part in its own process; load averages (1/5/15 min) at its start are given.", ""]
    lines += ["## Coverage of the simulated truth by 90% intervals", "",
              "| data | theta | log a | intercept d | n per parameter | load |", "|---|---|---|---|---|---|"]

    def cov_cells(cov):
        return " | ".join(f"{cov[k]['coverage']:.3f} (se {cov[k]['binomial_se']:.3f})"
                          for k in ("theta", "log_discrimination", "intercept"))

    rep = parts.get("replicates")
    if rep and "failed" not in rep:
        lines.append(f"| {rep['replicates']} replicates of {rep['n_models']} x {rep['n_items']} (half with 30% "
                     f"missing), truth from the priors | {cov_cells(rep['coverage'])} | "
                     f"{rep['coverage']['theta']['n']:,} / {rep['coverage']['intercept']['n']:,} | {rep['load_start']} |")
    for case in ("scale_complete", "scale_missing70"):
        r = parts.get(case)
        if r and "failed" not in r:
            lines.append(f"| {r['n_models']:,} x {r['n_items']:,}, {r['missing']:.0%} missing | {cov_cells(r['coverage'])} "
                         f"| {r['coverage']['theta']['n']:,} / {r['coverage']['intercept']['n']:,} | {r['load_start']} |")
    lines += ["", "The binomial se treats parameters as independent; within one dataset they share the "
              "uncertainty of the abilities' shift and scale, so the real spread is somewhat larger.", ""]
    nuts = parts.get("nuts")
    if nuts and "failed" not in nuts:
        lines += [f"## Against NUTS at {nuts['n_models']} x {nuts['n_items']} (complete)", "",
                  f"NUTS: {nuts['nuts_draws']}, {nuts['nuts_wall_s']:.0f} s, min bulk ESS {nuts['nuts_min_bulk_ess']:.0f}, "
                  f"max R-hat {nuts['nuts_max_rhat']:.3f}. Laplace: {nuts['laplace']['wall_s']:.1f} s. Load {nuts['load_start']}.", "",
                  "| parameter | 90% width ratio Laplace/NUTS: median (5%-95%) | NUTS mean inside Laplace 90% | "
                  "abs mean difference / NUTS sd: median, max | truth coverage Laplace | truth coverage NUTS |",
                  "|---|---|---|---|---|---|"]
        for name, r in nuts["rows"].items():
            lines.append(f"| {name} | {r['width_ratio_median']:.3f} ({r['width_ratio_p05']:.3f}-{r['width_ratio_p95']:.3f}) "
                         f"| {r['nuts_mean_inside_laplace_90']:.3f} | {r['mean_difference_in_nuts_sd_median']:.3f}, "
                         f"{r['mean_difference_in_nuts_sd_max']:.3f} | {r['laplace_truth_coverage']:.3f} | "
                         f"{r['nuts_truth_coverage']:.3f} |")
        lines.append("")
    lines += ["## Time and memory at leaderboard size (fit only: mode search + 1,000 draws + DataTree)", "",
              "| data | observed cells | fit wall s | fit CPU s | centre s | draws s | sweeps / Schur passes / steps | peak RSS GB "
              "(before fit) | load at start |", "|---|---|---|---|---|---|---|---|---|"]
    for case in ("scale_complete", "scale_missing70"):
        r = parts.get(case)
        if r and "failed" not in r:
            t = r["fit_timings"]
            lines.append(f"| {r['missing']:.0%} missing | {r['observed']:,} | {r['fit']['wall_s']:.1f} | "
                         f"{r['fit']['cpu_s']:.1f} | {t['mode_s']:.1f} | {t['draws_s']:.1f} | {r['sweeps']} / {r['schur_passes']} / "
                         f"{r['newton_steps']} | "
                         f"{r['peak_rss_gb']:.2f} ({r['peak_rss_gb_before_fit']:.2f}) | {r['load_start']} |")
        elif r:
            lines.append(f"| {case} | failed: {r['failed']} |")
    lines += ["", "CPU s counts every thread of the process (numba and BLAS use both cores): on an otherwise idle "
              "2-core machine the wall time lies between CPU s / 2 and CPU s; on the shared machine it was stretched "
              "by the load shown."]
    mis = parts.get("misspecified")
    if mis and "failed" not in mis:
        c = mis["theta_coverage"]
        lines += ["", f"## A generator the 2PL does not fit: {mis['generator']}, {mis['n_models']} x {mis['n_items']}", "",
                  f"90% intervals of the abilities cover the generator's theta {c['coverage']:.3f} of the time "
                  f"(se {c['binomial_se']:.3f}); rank correlation of posterior means with it "
                  f"{mis['theta_rank_correlation']:.3f}; mean posterior sd {mis['theta_posterior_sd_mean']:.3f}, "
                  f"mean absolute error {mis['theta_mean_abs_error']:.3f}. The 2PL's ability is not the 3PL's "
                  "(guessing compresses the low end), so miscoverage here is model error, not approximation error."]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--parts", default=",".join(PARTS),
                   help=f"comma list of {', '.join(PARTS)} (scale = scale_complete,scale_missing70)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        _worker(args)
        return
    out = args.out or RESULTS / f"leaderboard_posterior{'_quick' if args.quick else ''}.json"
    previous = json.loads(out.read_text()) if out.exists() else {}
    parts = dict(previous.get("parts", {}))
    for part in args.parts.split(","):
        names = ("scale_complete", "scale_missing70") if part == "scale" else (part,)
        for name in names:
            print(f"running {name} (load {loadavg()})", flush=True)
            parts[name] = _run(name, args)
            print(json.dumps(parts[name], default=float)[:400], flush=True)
    result = {"quick": args.quick, "machine": machine(), "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "versions": versions(("numpy", "scipy", "numba", "pymc", "nutpie", "arviz")), "source": source_state(),
              "command": " ".join(["benchmarks/leaderboard_posterior.py", *sys.argv[1:]]), "cpu_count": os.cpu_count(),
              "parts": parts}
    result["benchmark_rows"] = benchmark_rows(result)
    write_results(out, result, markdown, echo=True)


if __name__ == "__main__":
    main()
