"""nutpie adaptation settings on bayesirt's direct model: min bulk ESS per gradient and per second, by dataset.

For each generator seed (the data) and each sampler seed, a simulated matrix of ``--spec`` (default the
complete 2PL at 300 models x 1,000 items; ``--spec 3pl --size 200x500`` the 3PL of
``benchmarks/nuts_numpyro.py``; any family of ``benchmarks/_nuts_families.py`` but exploratory MIRT, whose
draws need sign alignment), the direct nutpie model ``fit`` samples (``bayesirt.inference.nutpie_direct``,
``direct_mirt`` for a MIRT spec), and 2 chains x (500 tune + 500 draws) under each setting, the
settings interleaved per (dataset, sampler seed) so that the machine's load falls on all alike. Reported
per run, per dataset and pooled over every run: the smallest bulk ESS over theta, discrimination and
intercept (MIRT: theta, loading, intercept and the factor correlation's off-diagonal), the gradient evaluations of tuning and draws together (nutpie's ``n_steps``), ESS per 1,000 of
them, sampling wall and CPU seconds, ESS per sampling wall second, mean leapfrog steps per draw, and the
1-minute load average after the run. The chains run on ``--cores`` threads (default 1: one chain after
the other, so wall ~ CPU on a machine others share). The model's build and compile are the same for
every setting (the callbacks are compiled once) and are not counted.

Usage::

    python benchmarks/nutpie_adaptation.py --out benchmarks/results/nutpie_adaptation_2pl.json
    python benchmarks/nutpie_adaptation.py --spec 3pl --size 200x500 --out benchmarks/results/nutpie_adaptation_3pl.json
    python benchmarks/nutpie_adaptation.py --settings '{"cur": {"adaptation": "draw_diag"}}'
    python benchmarks/nutpie_adaptation.py --spec mirt-confirmatory --size 200x500 --missing 0.5 \
        --data-seeds 20261129,20261130,20261131 --sampler-seeds 1 --settings '{"default": {}, ...}'
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import command_line, machine, source_state, write_results  # noqa: E402
from _nuts_families import FAMILIES  # noqa: E402

#: The reported variables whose smallest bulk ESS and largest R-hat are taken (those the model has; a hierarchical
#: spec's learned prior parameters too).
VARIABLES = ("theta", "discrimination", "loading", "intercept", "factor_correlation", "discrimination_mu",
             "discrimination_sigma", "difficulty_mu", "difficulty_sigma", "intercept_mu", "intercept_sigma")

SETTINGS = {
    "cur": {"adaptation": "draw_diag", "mass_matrix_switch_freq": 120, "step_size_jitter": 0.0},
    "diag": {"adaptation": "diag", "step_size_jitter": 0.0},
    "low_rank": {"adaptation": "low_rank", "step_size_jitter": 0.0},
    "ta9": {"adaptation": "draw_diag", "mass_matrix_switch_freq": 120, "step_size_jitter": 0.0, "target_accept": 0.9},
}
#: Generator seeds: the benchmark's first (20261129) and others it was not tuned on.
DATA_SEEDS = (20261129, 7, 11)


def summarize(rows: list[dict]) -> dict:
    """Pooled figures of runs: sums of min bulk ESS, gradients and seconds, and their ratios."""
    ess, grads, wall, cpu = (sum(r[k] for r in rows) for k in ("min_bulk_ess", "gradients", "sampling_s", "cpu_s"))
    return {"runs": len(rows), "min_bulk_ess": ess, "ess_per_1k_gradients": 1000 * ess / grads,
            "ess_per_wall_s": ess / wall, "ess_per_cpu_s": ess / cpu, "min_of_runs": min(r["min_bulk_ess"] for r in rows)}


def markdown(result: dict) -> str:
    cfg = result["config"]
    names = list(cfg["settings"])
    lines = [f"# nutpie adaptation settings: {cfg['spec'].upper()} {cfg['size']}, missing {cfg['missing']:.0%}", "",
             f"Command: `{result['command']}`  ", f"Date: {result['date']}; {result['machine']}; source "
             f"{result['source'].get('head')} (uncommitted under bayesirt/: {len(result['source'].get('uncommitted') or [])})  ",
             f"2 chains x ({cfg['tune']} tune + {cfg['draws']} draws) on {cfg['cores']} thread(s); data seeds "
             f"{cfg['data_seeds']}, sampler seeds {cfg['sampler_seeds']}; 1-min load average (2 CPUs) after the runs "
             f"{min(r['load'] for r in result['runs']):.2f}-{max(r['load'] for r in result['runs']):.2f}.", "",
             "Settings: " + "; ".join(f"`{k}` = `{json.dumps(v)}`" for k, v in cfg["settings"].items()), "",
             "Pooled over every run (sums of min bulk ESS / sums of gradients or seconds; gradients include tuning):", "",
             "| settings | runs | sum min bulk ESS | smallest run | ESS / 1k gradients | ESS / sampling wall s | ESS / CPU s |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name in names:
        s = result["pooled"][name]
        lines.append(f"| {name} | {s['runs']} | {s['min_bulk_ess']:.0f} | {s['min_of_runs']:.0f} | "
                     f"{s['ess_per_1k_gradients']:.2f} | {s['ess_per_wall_s']:.2f} | {s['ess_per_cpu_s']:.2f} |")
    lines += ["", "Per dataset (ESS per sampling wall second, pooled over its sampler seeds; in brackets ESS per 1k "
              "gradients):", "", "| data seed | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for seed, by in result["by_dataset"].items():
        lines.append(f"| {seed} | " + " | ".join(f"{by[n]['ess_per_wall_s']:.2f} ({by[n]['ess_per_1k_gradients']:.2f})"
                                                 for n in names) + " |")
    variables = list(result["runs"][0]["ess_by_var"])
    lines += ["", "Every run:", "", f"| data seed | sampler seed | settings | min bulk ESS ({' / '.join(variables)}) | gradients | "
              "leapfrog / draw | max R-hat | sampling s | CPU s | load after |", "|---|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in result["runs"]:
        by = r["ess_by_var"]
        lines.append(f"| {r['data_seed']} | {r['sampler_seed']} | {r['settings']} | {r['min_bulk_ess']:.0f} "
                     f"({' / '.join(f'{by[v]:.0f}' for v in variables)}) | {r['gradients']} | "
                     f"{r['leapfrog_per_draw']:.1f} | {r.get('max_rhat', float('nan')):.3f} | {r['sampling_s']:.1f} | {r['cpu_s']:.1f} | {r['load']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--settings", type=json.loads, default=SETTINGS, help="JSON: name -> nutpie.sample keywords")
    p.add_argument("--spec", default="2pl")
    p.add_argument("--size", default="300x1000", help="MODELSxITEMS")
    p.add_argument("--missing", type=float, default=0.0)
    p.add_argument("--data-seeds", default=",".join(map(str, DATA_SEEDS)))
    p.add_argument("--sampler-seeds", default="1,2,3")
    p.add_argument("--tune", type=int, default=500)
    p.add_argument("--draws", type=int, default=500)
    p.add_argument("--cores", type=int, default=1)
    p.add_argument("--out", type=Path, help="results JSON (a Markdown beside it)")
    args = p.parse_args(argv)
    if args.spec not in FAMILIES or args.spec in ("mirt", "dif"):
        p.error(f"--spec: one of {', '.join(f for f in FAMILIES if f not in ('mirt', 'dif'))} (exploratory MIRT's draws "
                "need sign alignment, which this script does not do; the DIF model is not a spec)")
    import arviz as az
    import nutpie

    from bayesirt.inference.direct_mirt import direct_mirt_model
    from bayesirt.inference.nutpie_direct import direct_model
    from bayesirt.models.specs import load_spec

    n_models, n_items = map(int, args.size.split("x"))
    data_seeds = [int(s) for s in args.data_seeds.split(",")]
    sampler_seeds = [int(s) for s in args.sampler_seeds.split(",")]
    command = command_line(__file__, argv)
    spec, runs = load_spec(args.spec), []
    date = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    for data_seed in data_seeds:
        responses, _ = FAMILIES[args.spec].simulate(n_models, n_items, data_seed, args.missing)
        direct = direct_mirt_model(responses, spec)[0] if spec.kind == "mirt" else direct_model(responses, spec)
        model = direct.compiled
        for seed in sampler_seeds:
            for name, settings in args.settings.items():
                t, c = time.perf_counter(), time.process_time()
                tree = nutpie.sample(model, draws=args.draws, tune=args.tune, chains=2, cores=args.cores, seed=seed,
                                     save_warmup=True, progress_bar=False, **settings)
                seconds, cpu = time.perf_counter() - t, time.process_time() - c
                post = tree["posterior"].to_dataset()
                if direct.reported is not None:  # the draws hold the unconstrained point: the reported variables
                    post = direct.reported(post)
                # min skips NaN: the ESS of a constant element (the correlation matrix's diagonal) is undefined
                by_var = {v: float(az.ess(post[[v]], method="bulk")[v].min()) for v in VARIABLES if v in post}
                stats, warm = tree["sample_stats"].to_dataset(), tree["warmup_sample_stats"].to_dataset()
                grads = int(stats["n_steps"].sum() + warm["n_steps"].sum())
                ess = min(by_var.values())
                rhat = max(float(az.rhat(post[[v]])[v].max()) for v in by_var)
                row = {"settings": name, "data_seed": data_seed, "sampler_seed": seed, "min_bulk_ess": ess,
                       "ess_by_var": by_var, "max_rhat": rhat, "gradients": grads, "ess_per_1k_gradients": 1000 * ess / grads,
                       "sampling_s": seconds, "cpu_s": cpu, "leapfrog_per_draw": float(stats["n_steps"].mean()),
                       "step_size": float(stats["step_size"].mean()), "divergences": int(stats["diverging"].sum()),
                       "load": os.getloadavg()[0]}
                print(json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()
                                  if k != "ess_by_var"}), flush=True)
                runs.append(row)
    names = list(args.settings)
    result = {"command": command, "date": date, "machine": machine(), "source": source_state(),
              "config": {"spec": args.spec, "size": args.size, "missing": args.missing, "data_seeds": data_seeds,
                         "sampler_seeds": sampler_seeds, "tune": args.tune, "draws": args.draws, "cores": args.cores,
                         "settings": args.settings},
              "runs": runs,
              "pooled": {n: summarize([r for r in runs if r["settings"] == n]) for n in names},
              "by_dataset": {str(d): {n: summarize([r for r in runs if r["settings"] == n and r["data_seed"] == d])
                                      for n in names} for d in data_seeds}}
    if args.out:
        write_results(args.out, result, markdown, echo=True)
    else:
        print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
