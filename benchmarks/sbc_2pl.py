"""Validation run: simulation-based calibration of the 2PL spec with NUTS and with ADVI.

The acceptance run of issue 8: ``models/2pl.toml`` on a small design (100 models x 40 items),
each replicate's parameters drawn from the spec's priors, responses simulated, the data fitted,
and the rank of every true theta, discrimination, difficulty and intercept among L thinned
posterior draws recorded (``bayesirt.workflow.sbc``). Replicates run through the Dask layer
(``bayesirt.utils.parallel``) on ``--workers`` local processes.

- NUTS (nutpie): 2 chains x 500 draws after 500 tuning steps, every 10th draw kept (L = 100).
  Acceptance: chi-square uniformity p > 0.01 for ability, discrimination and difficulty.
- ADVI (mean-field, Adam 0.01, bayesirt's convergence rule): 100 draws from the approximation
  (L = 100). ADVI is known to under-disperse; the report states what the ranks show.

Usage::

    python benchmarks/sbc_2pl.py                          # 200 + 200 replicates, 2 workers
    python benchmarks/sbc_2pl.py --replicates 100 --advi-replicates 60
    python benchmarks/sbc_2pl.py --quick                  # 30 x 10 design, 6 replicates each

Writes ``benchmarks/results/sbc_2pl.json``, ``sbc_2pl.md``, the rank histograms
``sbc_2pl_nuts.png`` and ``sbc_2pl_advi.png`` and (from the next run on) the ranks themselves,
``sbc_2pl_{nuts,advi}.nc`` (``--out`` changes the stem).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from _common import versions  # noqa: E402 (benchmarks/ is on sys.path when run as a script)

HERE = Path(__file__).resolve().parent
PACKAGES = ("bayesirt", "pymc", "pytensor", "nutpie", "arviz", "numpy", "dask", "distributed", "simuk")


def _versions() -> dict:
    return versions(PACKAGES)


def _run(method: str, args, figure: Path) -> dict:
    from bayesirt.report.sbc import plot_rank_histograms, sbc_section
    from bayesirt.workflow.sbc import simulation_based_calibration

    replicates = args.replicates if method == "nuts" else args.advi_replicates
    options = dict(replicates=replicates, method=method, seed=args.seed, workers=args.workers, bins=args.bins,
                   progress=not args.no_progress)
    if method == "nuts":
        options |= dict(draws=args.draws, tune=args.tune, chains=args.chains, thin=args.thin)
    else:
        options |= dict(draws=args.advi_draws, thin=1)
    load0 = list(os.getloadavg())
    t0 = time.perf_counter()
    result = simulation_based_calibration("2pl", args.design, **options)
    wall = time.perf_counter() - t0
    plot_rank_histograms(result, figure)
    result.ranks.to_netcdf(figure.with_suffix(".nc"), engine="h5netcdf")  # ranks + diagnostics, to re-plot
    d = result.diagnostics
    return {
        "settings": json.loads(result.ranks.attrs["bayesirt_settings"]),
        "draws_L": int(result.ranks.attrs["draws_L"]),
        "wall_s": round(wall, 1),
        "loadavg_before_after": [load0, list(os.getloadavg())],
        "tests": result.tests.to_dict(orient="records"),
        "diagnostics": {
            "replicates": len(d),
            "max_rhat_median": float(d["max_rhat"].median()) if d["max_rhat"].notna().any() else None,
            "max_rhat_worst": float(d["max_rhat"].max()) if d["max_rhat"].notna().any() else None,
            "replicates_rhat_above_1.01": int((d["max_rhat"] > 1.01).sum()),
            "divergences_total": float(d["divergences"].sum()) if d["divergences"].notna().any() else None,
            "replicates_with_divergences": int((d["divergences"] > 0).sum()),
            "min_ess_bulk_median": float(d["min_ess_bulk"].median()) if d["min_ess_bulk"].notna().any() else None,
            "advi_converged": int(d["advi_converged"].sum()) if d["advi_converged"].notna().any() else None,
            "fit_seconds_median": float(d["fit_seconds"].median()),
        },
        "figure": figure.name,
        "markdown": sbc_section(result, figure.name),
    }


def _markdown(result: dict) -> str:
    lines = [
        "# SBC of the 2PL spec: NUTS and ADVI", "",
        f"Machine: {result['machine']['platform']}, {result['machine']['cpu_count']} CPUs; "
        "versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items()) + ".", "",
    ]
    for method in ("nuts", "advi"):
        if method not in result["runs"]:
            continue
        run = result["runs"][method]
        tests = {t["family"]: t for t in run["tests"]}
        lines += [f"## {method.upper()}", ""]
        if method == "nuts":
            ok = all(tests[f]["p_value"] > 0.01 for f in ("theta", "discrimination", "difficulty"))
            lines += [f"**Acceptance (p > 0.01 for ability, discrimination, difficulty): {'met' if ok else 'NOT met'}.** "
                      + ", ".join(f"{f} p = {tests[f]['p_value']:.3g}" for f in tests) + ".", ""]
        else:
            lines += ["**ADVI: " + "; ".join(
                f"{f} p = {t['p_value']:.3g}, rank sd {t['rank_sd']:.3f} (uniform 0.289), 90% intervals cover "
                f"{t['coverage_90']:.0%}" for f, t in tests.items()) + ".**", ""]
        load = [[round(v, 1) for v in pair] for pair in run["loadavg_before_after"]]
        lines += [f"Wall time {run['wall_s']:.0f} s for {run['settings']['replicates']} replicates on "
                  f"{run['settings']['workers']} workers (started {run.get('date', '?')}; load average before/after "
                  f"{load}). Command: `{run.get('command', '')}`", ""]
        lines += [line.replace("### ", "#### ").replace("## Simulation-based calibration", "### Details")
                  for line in run["markdown"]]
    return "\n".join(lines) + "\n"


def readme_summary(result: dict, source: str) -> str:
    """The "Last run" paragraph of benchmarks/README.md, from a results JSON (``--readme-summary``)."""
    runs = result["runs"]
    parts = []
    for method in ("nuts", "advi"):
        if method not in runs:
            continue
        run, tests = runs[method], {t["family"]: t for t in runs[method]["tests"]}
        st, diag = run["settings"], run["diagnostics"]
        cover = [t["coverage_90"] for t in tests.values()]
        head = (f"{method.upper()} ({st['replicates']} replicates, {run['wall_s']:,.0f} s): "
                + ", ".join(f"p = {t['p_value']:.2g} ({f})" for f, t in tests.items())
                + f"; 90% intervals covering {min(cover):.1%}-{max(cover):.1%}")
        if method == "nuts":
            ok = all(tests[f]["p_value"] > 0.01 for f in ("theta", "discrimination", "difficulty"))
            head += (f"; {diag.get('divergences_total', 0):.0f} divergences, worst max R-hat "
                     f"{diag.get('max_rhat_worst', float('nan')):.3f} (acceptance {'met' if ok else 'NOT met'})")
        else:
            bad = [f for f, t in tests.items() if t["p_value"] <= 0.01]
            good = [f for f in tests if f not in bad]
            head += (f"; converged in {diag.get('advi_converged')} of {st['replicates']} replicates. "
                     + (f"{', '.join(good)} consistent with uniform; " if good else "")
                     + ("; ".join(f"{f} miscalibrated (rank sd {tests[f]['rank_sd']:.3f} vs 0.289, 90% intervals cover "
                                  f"{tests[f]['coverage_90']:.1%}: posteriors too narrow)" for f in bad) if bad else
                        "no family miscalibrated at the 0.01 level"))
        parts.append(head)
    return (f"Last run ({result['date'][:10]}, {runs[next(iter(runs))]['settings']['workers']} workers, design "
            f"{'x'.join(map(str, runs[next(iter(runs))]['settings']['design']))}; `{source}`, generated by "
            f"`.venv/bin/python benchmarks/sbc_2pl.py --readme-summary`): " + ". ".join(parts) + ".")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--design", default="100x40", help="MODELSxITEMS [100x40]")
    p.add_argument("--replicates", type=int, default=200, help="NUTS replicates [200]")
    p.add_argument("--advi-replicates", type=int, default=200, help="ADVI replicates (0: skip) [200]")
    p.add_argument("--draws", type=int, default=500)
    p.add_argument("--tune", type=int, default=500)
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--thin", type=int, default=10)
    p.add_argument("--advi-draws", type=int, default=100)
    p.add_argument("--bins", type=int, default=20)
    p.add_argument("--seed", type=int, default=20261129)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--methods", default="nuts,advi", help="comma-separated [nuts,advi]")
    p.add_argument("--quick", action="store_true", help="30x10 design, 6 replicates each, short chains")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--keep-other-runs", action="store_true",
                   help="keep the results of methods not run now from an existing --out JSON")
    p.add_argument("--out", default=str(HERE / "results" / "sbc_2pl.json"))
    p.add_argument("--readme-summary", action="store_true",
                   help="no run: print the benchmarks/README.md summary of the existing --out JSON")
    args = p.parse_args()
    if args.readme_summary:
        out = Path(args.out)
        shown = out.resolve().relative_to(HERE.parent) if out.resolve().is_relative_to(HERE.parent) else out
        print(readme_summary(json.loads(out.read_text()), str(shown)))
        return
    if args.quick:
        args.design, args.replicates, args.advi_replicates = "30x10", 6, 6
        args.draws, args.tune, args.thin, args.bins = 100, 150, 5, 5
        args.advi_draws = 40
    from bayesirt.jobs.workflow import parse_design

    args.design = parse_design(args.design)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
        "versions": _versions(),
        "command": "python benchmarks/sbc_2pl.py " + " ".join(os.sys.argv[1:]),
        "runs": {},
    }
    if out.exists() and args.keep_other_runs:  # e.g. NUTS and ADVI run by separate invocations
        previous = json.loads(out.read_text())
        result["runs"] = {m: r for m, r in previous.get("runs", {}).items() if m not in args.methods.split(",")}
    t0 = time.perf_counter()
    for method in args.methods.split(","):
        if method == "advi" and args.advi_replicates == 0:
            continue
        figure = out.with_name(f"{out.stem}_{method}.png")
        result["runs"][method] = _run(method, args, figure) | {"command": result["command"], "date": result["date"]}
        result["total_wall_s"] = time.perf_counter() - t0
        out.write_text(json.dumps(result, indent=2, default=float))  # after each method: partial results survive
        out.with_suffix(".md").write_text(_markdown(result))
        print(f"{method}: {result['runs'][method]['wall_s']:.0f} s; "
              + ", ".join(f"{t['family']} p={t['p_value']:.3g}" for t in result["runs"][method]["tests"]), flush=True)
    print(out.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
