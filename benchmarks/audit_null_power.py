"""Is the audit's randomization p uniform under a target-side null, and how much power has it at
zero-sum family DIF of the paper's size? (issue 29, item 4, audit level)

Benchmarks from ``simulate_dif_benchmark`` with NT's five families, 60 owners (one checkpoint per
owner and family: 300 models), 1,000 items in four interleaved groups, three ability dimensions,
and the audit's population rules (``audit_population`` defaults: owner cap 5, families of >= 20
models, owner-disjoint balanced halves, one representative per owner and family). Audits run
with ``AuditConfig(quick=True, controls=199, composition_bootstrap=0, owner_bootstrap=0)`` (the deterministic
audit: the randomization p is its test; the Bayesian layer adds no audit-level probability).

* ``null`` (target-side): zero-sum DIF on half of the items (``dif_sd`` 0.8) in the models of
  outer fold 0 only; every other model answers from the same abilities and items with no DIF.
  Fold 0's anchors are then chosen on a half with real, replicable DIF and scored on a target half
  without any, and fold 1's anchors are chosen on a half without DIF: neither target half can
  reverse near ties more than a blueprint-matched random subtest does. The population is computed
  again on the final responses (the same uniforms, so only the models whose DIF is removed
  change); the fold of every model must be unchanged (``split_stable``), otherwise the DIF is
  regenerated for the new split (up to ten times; ``models_moved``: models whose fold still
  changed at the last attempt, whose responses then carry the wrong DIF status).
* ``favoured``: zero-sum DIF in every model with a direction: on a random 40% of the items
  (:data:`FAVOURED_SHARE`) the first family gains s logits and each of the other four loses s / 4
  (the effects still sum to zero within every item), s in :data:`FAVOURED`, which gives the
  favoured family a score shift of about 0.5-2.5 pp, the paper's range.
* ``power``: the same zero-sum DIF in every model at ``dif_sd`` in :data:`STRENGTHS`. Each design
  records the largest family shift it produces, max over families of |mean over items of
  P(right | DIF) - P(right | no DIF)| in pp over the family's models (the paper's shifts are at
  most 2.5 pp).

Reported: the share of nulls with p <= .05 (target within [.02, .08], exact 95% interval) and with
p <= .10, the median p, and per strength the share with p <= .05 and the median family shift.

Usage::

    python benchmarks/audit_null_power.py [--nulls 100] [--power 20] [--workers 2] [--designs null power favoured]
        [--out audit_null_power]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from scipy.special import expit
from scipy.stats import beta

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine, versions, write_results  # noqa: E402

STRENGTHS = (0.2, 0.4, 0.8, 1.2)
#: Logit advantage of the favoured family on its items (the others lose a quarter each).
FAVOURED = (0.08, 0.16, 0.28, 0.40)
FAVOURED_SHARE = 0.4
N_OWNERS, N_ITEMS, DIF_SD = 60, 1000, 0.8


def _responses(truth, family_index, dif_models, uniform):
    """Responses of every model, with the truth's family effects only in ``dif_models``; the same
    uniforms ``uniform`` (item, model) every time, so a model whose DIF status is unchanged keeps its
    responses."""
    eta = truth["easiness"][:, None] + truth["loading"] @ truth["theta"].T
    eta = eta + np.where(dif_models[None, :], truth["family_effect"][:, family_index], 0.0)
    return (uniform < expit(eta)).astype(np.int8)


def _family_shift(truth, family_index) -> float:
    base = truth["easiness"][:, None] + truth["loading"] @ truth["theta"].T
    diff = expit(base + truth["family_effect"][:, family_index]) - expit(base)
    return float(100 * max(abs(diff[:, family_index == f].mean()) for f in np.unique(family_index)))


def one(task: tuple[str, float, int]) -> dict:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from bayesirt.audit import AuditConfig, run_audit
    from bayesirt.data import simulate_dif_benchmark
    from bayesirt.data.families import FAMILIES
    from bayesirt.data.populations import audit_population

    design, dif_sd, seed = task
    t0 = time.perf_counter()
    ds, truth = simulate_dif_benchmark(n_owners=N_OWNERS, families=FAMILIES, n_items=N_ITEMS, dif_fraction=0.5,
                                       dif_sd=dif_sd, seed=seed)
    family_index = np.arange(ds.sizes["model"]) % len(FAMILIES)  # models by owner, then family: truth's columns
    if design == "favoured":  # replace the generator's DIF by a directional zero-sum one
        chosen = np.random.default_rng(seed + 20_000).random(ds.sizes["item"]) < FAVOURED_SHARE
        effect = np.zeros_like(truth["family_effect"])
        effect[chosen, 0] = dif_sd
        effect[chosen, 1:] = -dif_sd / (effect.shape[1] - 1)
        truth = truth | {"family_effect": effect}
    uniform = np.random.default_rng(seed + 10_000).random(ds["responses"].shape)
    everyone = np.ones(ds.sizes["model"], dtype=bool)
    ds = ds.assign(responses=ds["responses"].copy(data=_responses(truth, family_index, everyone, uniform)))
    stable, attempts, leak = True, 0, 0
    if design == "null":
        fold = audit_population(ds)["fold"].to_numpy()
        for attempts in range(1, 11):
            ds = ds.assign(responses=ds["responses"].copy(data=_responses(truth, family_index, fold == 0, uniform)))
            new = audit_population(ds)["fold"].to_numpy()
            stable = bool(np.array_equal(new, fold))
            if stable:
                break
            leak = int((new != fold).sum())
            fold = new
        leak = 0 if stable else leak
    result = run_audit(ds, AuditConfig(quick=True, controls=199, composition_bootstrap=0, owner_bootstrap=0), progress=False)
    return {"design": design, "dif_sd": dif_sd, "seed": seed, "split_stable": stable, "attempts": attempts,
            "models_moved": leak,
            "p_value": float(result.controls["p_value"].sel(pair_set="primary")),
            "excess_pp": float(result.controls["excess_pp"].sel(pair_set="primary")),
            "eligible_pairs": result.summary["eligible_pairs"], "family_shift_pp": _family_shift(truth, family_index),
            "seconds": time.perf_counter() - t0}


def _share(hits: int, n: int) -> dict:
    lo = beta.ppf(0.025, hits, n - hits + 1) if hits else 0.0
    hi = beta.ppf(0.975, hits + 1, n - hits) if hits < n else 1.0
    return {"hits": hits, "n": n, "share": hits / n if n else None, "interval": [float(lo), float(hi)]}


def summarize(rows: list[dict]) -> dict:
    nulls = [r for r in rows if r["design"] == "null" and r["eligible_pairs"] > 0]
    p = np.array([r["p_value"] for r in nulls])
    stable = np.array([r["p_value"] for r in nulls if r["split_stable"]])
    out = {"null": {"benchmarks": len(nulls), "split_stable": sum(r["split_stable"] for r in nulls),
                    "stable_p_le_05": _share(int((stable <= 0.05).sum()), stable.size),
                    "p_le_05": _share(int((p <= 0.05).sum()), p.size), "p_le_10": _share(int((p <= 0.10).sum()), p.size),
                    "median_p": float(np.median(p)) if p.size else None,
                    "family_shift_pp_median": float(np.median([r["family_shift_pp"] for r in nulls])) if nulls else None}}
    out["power"] = []
    for design, s in sorted({(r["design"], r["dif_sd"]) for r in rows if r["design"] != "null"}):
        sel = [r for r in rows if r["design"] == design and r["dif_sd"] == s and r["eligible_pairs"] > 0]
        q = np.array([r["p_value"] for r in sel])
        out["power"].append({"design": design, "dif_sd": s, "benchmarks": len(sel),
                             "p_le_05": _share(int((q <= 0.05).sum()), q.size),
                             "median_p": float(np.median(q)),
                             "family_shift_pp_median": float(np.median([r["family_shift_pp"] for r in sel])),
                             "excess_pp_median": float(np.median([r["excess_pp"] for r in sel]))})
    return out


def markdown(result: dict) -> str:
    def cell(s):
        return (f"{s['hits']}/{s['n']} = {100 * s['share']:.1f}% [{100 * s['interval'][0]:.1f}, "
                f"{100 * s['interval'][1]:.1f}]")

    n = result["summary"].get("null") or {}
    lines = ["# The audit's randomization p under a target-side null, and its power", "",
             f"{result['date']}; {result['machine']}; command `{result['command']}`; {result['wall_s']:.0f} s wall.",
             f"Versions: {', '.join(f'{k} {v}' for k, v in result['versions'].items())}.", "",
             (f"Target-side null ({N_ITEMS:,} items, 5 families x {N_OWNERS} owners, DIF sd {DIF_SD} on half of the "
              f"items in fold 0's models only): {n['benchmarks']} benchmarks ({n['split_stable']} with the split "
              f"unchanged); p <= .05 in {cell(n['p_le_05'])} (target [2, 8]%; with the split unchanged "
              f"{cell(n['stable_p_le_05'])}), p <= .10 in {cell(n['p_le_10'])}, median p {n['median_p']:.3f}."
              if n.get("benchmarks") else "No null benchmarks in this run."), "",
             "| design | strength (logits) | benchmarks | median largest family shift (pp) | median excess (pp) | "
             "p <= .05 (95% CI) | median p |", "|---|---|---|---|---|---|---|"]
    for s in result["summary"]["power"]:
        lines.append(f"| {s['design']} | {s['dif_sd']:g} | {s['benchmarks']} | {s['family_shift_pp_median']:.2f} | "
                     f"{s['excess_pp_median']:+.2f} | {cell(s['p_le_05'])} | {s['median_p']:.3f} |")
    return "\n".join(lines + [""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nulls", type=int, default=100)
    parser.add_argument("--power", type=int, default=20, help="benchmarks per DIF strength")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--designs", nargs="+", default=["null", "power", "favoured"],
                        choices=["null", "power", "favoured"])
    parser.add_argument("--out", default="audit_null_power", help="results file stem in benchmarks/results")
    args = parser.parse_args()
    tasks = ([("null", DIF_SD, s) for s in range(args.nulls) if "null" in args.designs]
             + [("power", sd, 5000 + s) for sd in STRENGTHS for s in range(args.power) if "power" in args.designs]
             + [("favoured", sd, 7000 + s) for sd in FAVOURED for s in range(args.power) if "favoured" in args.designs])
    t0 = time.perf_counter()
    rows = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for k, row in enumerate(pool.map(one, tasks), 1):
            rows.append(row)
            print(f"[{k}/{len(tasks)}] {row['design']} sd {row['dif_sd']} seed {row['seed']}: p {row['p_value']:.3f}, "
                  f"shift {row['family_shift_pp']:.2f} pp, stable {row['split_stable']}, {row['seconds']:.1f} s",
                  flush=True)
    result = {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "wall_s": time.perf_counter() - t0,
              "command": f"python benchmarks/audit_null_power.py --nulls {args.nulls} --power {args.power} "
                         f"--workers {args.workers} --designs {' '.join(args.designs)} --out {args.out}",
              "versions": versions(("bayesirt", "numpy")), "summary": summarize(rows), "rows": rows}
    write_results(Path(__file__).parent / "results" / f"{args.out}.json", result, markdown, echo=True)


if __name__ == "__main__":
    main()
