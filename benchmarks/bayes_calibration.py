"""The Bayesian audit's per-draw randomization p on benchmarks with and without family DIF (issues 19, 29).

Each posterior draw's low-DIF reversal rate is compared with random subtests drawn from its own
cells, giving that draw's plus-one randomization p (``draw_p_value``). The audit reports the
distribution of that p over the draws; this script counts how often its median falls to .05 or
below, beside the deterministic randomization p. It replaces the former ``prob_exceeds_random``
(the posterior mean of each draw's randomization percentile, reported as a probability and removed
in issue 29); the figures that quantity had are in the results files of 2026-12-01/02 and describe
only this 120-item design.

Designs (``simulate_dif_benchmark``: three families crossed with owners, four item groups,
three-dimensional abilities):

* ``null``: no DIF (``dif_fraction=0``), 60 owners (180 models) x 120 items;
* ``planted``: no generator DIF, 150 owners x 120 items, and one family (Qwen) given an advantage
  on 40% of the items (``plant_family_advantage``, strength 0.9): the power of both tests.

Every benchmark is audited with ``AuditConfig(quick=True, controls=99, bayes=True,
bayes_draws=100, bayes_controls=20, bayes_ability_spec=None)`` (``--method laplace``, the default:
the per-item Laplace approximation of the residual-DIF posterior given the offsets, ridge prior,
results in ``bayes_calibration_laplace.*``; ``--method advi``: the ADVI posterior, the default until
issue 19's second session, results in ``bayes_calibration.*``; ``--method bootstrap``: the owner-clustered
Bayesian bootstrap refitting offsets, DIF and purification per draw, results in
``bayes_calibration_bootstrap.*``; bootstraps and the near-tie leaderboard's 2PL off: they do not
enter either statistic). Reported: the share with median per-draw p <= .05 and the share with
deterministic ``p <= .05``, each with its exact (Clopper-Pearson) 95% interval.

Usage::

    python benchmarks/bayes_calibration.py [--null 100] [--planted 40] [--workers 2] [--method laplace|advi|bootstrap]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from scipy.stats import beta

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine, versions, write_results  # noqa: E402

SIZES = {"null": 60, "planted": 150}
LEVEL = 0.95


def _one(task: tuple[str, int, str]) -> dict:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from bayesirt.audit import AuditConfig, run_audit
    from bayesirt.data import plant_family_advantage, simulate_dif_benchmark

    design, seed, method = task
    ds, _ = simulate_dif_benchmark(n_owners=SIZES[design], n_items=120, dif_fraction=0.0, seed=seed)
    if design == "planted":
        ds, _ = plant_family_advantage(ds, "Qwen", share=0.4, strength=0.9, seed=seed + 1000)
    t0 = time.perf_counter()
    result = run_audit(ds, AuditConfig(quick=True, controls=99, composition_bootstrap=0, owner_bootstrap=0, bayes=True,
                                       bayes_method=method, bayes_draws=100, bayes_controls=20, bayes_ability_spec=None), progress=False)
    bayes = result.summary["bayes"]
    return {"design": design, "seed": seed, "median_draw_p": bayes["draw_p_value_q05_q50_q95"][1],
            "share_draws_p_le_05": bayes["share_draws_p_le_05"],
            "p_value": float(result.controls["p_value"].sel(pair_set="primary")),
            "excess_pp_q05_q50_q95": bayes["excess_pp_q05_q50_q95"],
            "eligible_pairs": result.summary["eligible_pairs"], "seconds": time.perf_counter() - t0}


def _share(hits: int, n: int) -> dict:
    """Share with its exact (Clopper-Pearson) 95% interval."""
    lo = beta.ppf(0.025, hits, n - hits + 1) if hits else 0.0
    hi = beta.ppf(0.975, hits + 1, n - hits) if hits < n else 1.0
    return {"hits": hits, "n": n, "share": hits / n, "interval": [float(lo), float(hi)]}


def summarize(rows: list[dict]) -> dict:
    out = {}
    for design in SIZES:
        sel = [r for r in rows if r["design"] == design]
        if not sel:
            continue
        draw_p = np.array([r["median_draw_p"] for r in sel])
        p = np.array([r["p_value"] for r in sel])
        out[design] = {"median_draw_p_at_most_05": _share(int((draw_p <= 1 - LEVEL).sum()), len(sel)),
                       "p_at_most_05": _share(int((p <= 1 - LEVEL).sum()), len(sel)),
                       "mean_median_draw_p": float(draw_p.mean()),
                       "corr_draw_p_p": float(np.corrcoef(draw_p, p)[0, 1]),
                       "median_seconds": float(np.median([r["seconds"] for r in sel]))}
    return out


def markdown(result: dict) -> str:
    def cell(s):
        return f"{s['hits']}/{s['n']} = {100 * s['share']:.1f}% [{100 * s['interval'][0]:.1f}, {100 * s['interval'][1]:.1f}]"

    lines = [f"# Per-draw randomization p of the Bayesian near-tie audit ({result.get('method', 'advi')})", "",
             f"{result['date']}; {result['machine']}; command `{result['command']}`; {result['wall_s']:.0f} s wall.",
             f"Versions: {', '.join(f'{k} {v}' for k, v in result['versions'].items())}.", "",
             "| design | benchmarks | median per-draw p <= .05 (95% CI) | deterministic p <= .05 (95% CI) | "
             "mean of the median per-draw p | corr(median per-draw p, p) | median s per audit |",
             "|---|---|---|---|---|---|---|"]
    for design, s in result["summary"].items():
        lines.append(f"| {design} | {s['p_at_most_05']['n']} | {cell(s['median_draw_p_at_most_05'])} | "
                     f"{cell(s['p_at_most_05'])} | {s['mean_median_draw_p']:.3f} | {s['corr_draw_p_p']:.2f} | "
                     f"{s['median_seconds']:.1f} |")
    lines += ["", "null: no DIF, 60 owners x 3 families x 120 items; planted: 150 owners, Qwen advantaged on 40% of the "
              "items (strength 0.9). The null row must stay at or below about 5%; the planted row is power.",
              ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--null", type=int, default=100)
    parser.add_argument("--planted", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--method", choices=("laplace", "advi", "bootstrap"), default="laplace")
    args = parser.parse_args()
    tasks = ([("null", s, args.method) for s in range(args.null)]
             + [("planted", s, args.method) for s in range(args.planted)])
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        rows = []
        for k, row in enumerate(pool.map(_one, tasks), 1):
            rows.append(row)
            print(f"[{k}/{len(tasks)}] {row['design']} seed {row['seed']}: median draw p {row['median_draw_p']:.3f}, "
                  f"p {row['p_value']:.3f}", flush=True)
    result = {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "wall_s": time.perf_counter() - t0,
              "command": f"python benchmarks/bayes_calibration.py --null {args.null} --planted {args.planted}"
                         + f" --method {args.method}",
              "method": args.method,
              "versions": versions(("bayesirt", "pymc", "numpy")), "summary": summarize(rows), "rows": rows}
    name = "bayes_draw_p" + f"_{args.method}"
    write_results(Path(__file__).parent / "results" / f"{name}.json", result, markdown, echo=True)


if __name__ == "__main__":
    main()
