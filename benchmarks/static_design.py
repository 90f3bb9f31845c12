"""Static test designs against random items in the three SAFE steps that use a static test (issue 44 item 1).

Data: the five Open LLM Leaderboard v1 files (``/work/shared/data/llm/open_llm_leaderboard_v1``, a seeded
subset of ``--models`` models each) and a *curated* case like tinyBenchmarks (simulated: ``--models`` models
with abilities N(0, 1) and 100 curated 2PL items, discriminations lognormal(0, 0.3) around 1 and
difficulties at the cohort's ability quantiles, as a curated benchmark spreads its items). Per data set
and design (``representative``, the default, ``stratified``, ``population``, ``max_information``):

1. CAT study's static and random designs (as :func:`bayesirt.safety.cat_study.cat_study`: ``--splits``
   75/25 splits, 2PL by regularized MML on the calibration models, full score predicted from the
   reduced score and EAP ability by the spline of ``score_calibration``; ``--random`` random subsets,
   the same for every design; the adaptive test is left out): held-out RMSE of the predicted full score
   (proportion correct) at 10, 25, 50 items, each static design vs the mean of the random subsets, beside
   the representative criterion's expected RMSE of the default design and of the random subsets;
2. ability-shift detector recall: 2PL (regularized MML) on the cohort; 200 seeded models sandbag
   uniformly by one logit (``sandbag``, coherent ability shift, direction down); a run is caught when
   its 40-item MAP ability minus its historical (all-item) MAP exceeds the resolvable gap of that test
   at its historical ability (:func:`bayesirt.safety.fingerprint.resolvable_gap`, level .95), as the
   sandbag step; 40 static items vs 40 random items (mean over ``--random-tests`` sets);
3. pair test resolution (factors step, SAFE Fig. 5B): share of model pairs (``--pair-models`` models)
   whose 40-item MAP abilities differ by more than 1.96 sds of their difference
   (:func:`bayesirt.structure.pairs.pair_distinguishability`), static vs random 40 items, and the full test.

Usage::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/static_design.py              # all six data sets
    python benchmarks/static_design.py --quick                                   # one benchmark, small sizes

Writes ``benchmarks/results/static_design.{json,md}``.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_results  # noqa: E402

from bayesirt.data import load  # noqa: E402
from bayesirt.data.responses import informative_items, make_responses  # noqa: E402
from bayesirt.frequentist.mml import fit_mml  # noqa: E402
from bayesirt.models.information import item_information  # noqa: E402
from bayesirt.models.response import response_probability  # noqa: E402
from bayesirt.safety.adaptive import score_test, static_test  # noqa: E402
from bayesirt.safety.cat_study import score_calibration  # noqa: E402
from bayesirt.safety.fingerprint import gap_at, resolvable_gap  # noqa: E402
from bayesirt.safety.personfit import item_parameters  # noqa: E402
from bayesirt.safety.sandbagging import sandbag  # noqa: E402
from bayesirt.safety.settings import STATIC_DESIGN, STATIC_DESIGNS  # noqa: E402
from bayesirt.structure.pairs import pair_distinguishability  # noqa: E402

DATA = Path("/work/shared/data/llm/open_llm_leaderboard_v1")
BENCHMARKS = ("arc", "gsm8k", "mmlu", "truthfulqa", "winogrande")
RESULTS = Path(__file__).resolve().parent / "results"
BUDGETS = (10, 25, 50)
TEST_LENGTH = 40


def curated(n_models: int, seed: int):
    """A tinyBenchmarks-like curated benchmark: 100 moderately discriminating items spread over the cohort."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, n_models)
    a = np.exp(rng.normal(0, 0.3, 100))
    b = np.quantile(theta, (np.arange(100) + 0.5) / 100) + rng.normal(0, 0.2, 100)
    y = (rng.random((100, n_models)) < 1 / (1 + np.exp(-a[:, None] * (theta[None, :] - b[:, None])))).astype(float)
    return make_responses(y, item_id=[f"c{i}" for i in range(100)], model_id=[f"m{j}" for j in range(n_models)],
                          name="curated")


def dataset(name: str, n_models: int, seed: int):
    if name == "curated":
        return curated(n_models, seed)
    ds = load(DATA / f"{name}.csv")
    keep = np.sort(np.random.default_rng(seed).choice(ds.sizes["model"], min(n_models, ds.sizes["model"]),
                                                      replace=False))
    return informative_items(ds.isel(model=keep))[0]


def expected_rmse(a, d, theta, items) -> float:
    """The representative design's criterion for a test ``items`` (:mod:`bayesirt.safety.static_design`),
    by brute force: the root of the cohort-averaged expected squared error of the predicted full number
    correct, as a proportion of the items (percentage points), to set beside the realized error."""
    nodes = np.quantile(theta, (np.arange(256) + 0.5) / 256)
    p = response_probability(nodes, a, d)
    rest = np.ones(a.size, dtype=bool)
    rest[items] = False
    slope = (a[:, None] * p * (1 - p))[rest].sum(0)
    error = (p * (1 - p))[rest].sum(0) + slope**2 / (1.0 + item_information(nodes, a, d)[items].sum(0))
    return float(np.sqrt(error.mean())) / a.size * 100


def short_abilities(y, bank, items):
    est = score_test(y, bank.discrimination, bank.intercept, items, method="map")
    return est.theta, est.sd


def shift_and_pairs(ds, args, rng) -> dict:
    """Detector recall and pair resolution of every design and of random 40-item tests."""
    items = fit_mml(ds, "2pl", priors=True, se=False).items
    y = ds["responses"].transpose("item", "model").values.astype(np.int8)
    bank = item_parameters(items, ds["item"].values)
    hist = score_test(y, bank.discrimination, bank.intercept, method="map").theta
    run = sandbag(ds, scope="uniform", shift=1.0, items=items, seed=args.seed)
    y_run = run["responses"].transpose("item", "model").values.astype(np.int8)
    changed = run["changed"].values.any(axis=0)
    bagged = rng.choice(np.flatnonzero(changed), min(200, int(changed.sum())), replace=False)
    pair_models = rng.choice(y.shape[1], min(args.pair_models, y.shape[1]), replace=False)
    k = min(TEST_LENGTH, bank.n_items)

    def measure(test):
        theta_t, se_t = short_abilities(y, bank, test)
        gaps = resolvable_gap(hist, theta_t, se_t, seed=args.seed)
        run_t = short_abilities(y_run[:, bagged], bank, test)[0]
        recall = float(np.mean(np.abs(run_t - hist[bagged]) > gap_at(gaps, hist[bagged])))
        fpr = float(np.mean(np.abs(theta_t - hist) > gap_at(gaps, hist)))
        frame = lambda v: pd.DataFrame({"b": v[pair_models]})  # noqa: E731
        share = float(pair_distinguishability(frame(theta_t), frame(se_t))["b"])
        return {"recall": recall, "fpr_in_sample": fpr, "pairs": share}

    out = {d: measure(static_test(bank.discrimination, bank.intercept, hist, k, design=d)) for d in STATIC_DESIGNS}
    rand = [measure(rng.choice(bank.n_items, k, replace=False)) for _ in range(args.random_tests)]
    out["random"] = {m: float(np.mean([r[m] for r in rand])) for m in rand[0]}
    theta_f, se_f = short_abilities(y, bank, None)
    frame = lambda v: pd.DataFrame({"b": v[pair_models]})  # noqa: E731
    out["full"] = {"pairs": float(pair_distinguishability(frame(theta_f), frame(se_f))["b"])}
    return out


def cat_rmse(ds, args) -> tuple:
    """The CAT study's static and random designs (its splits, 2PL calibration and score calibration;
    :mod:`bayesirt.safety.cat_study`), every design on the same splits and random subsets: realized RMSE,
    the criterion's expected RMSE (:func:`expected_rmse`), and the standard error over splits of the
    default design's RMSE minus the random subsets' mean."""
    y = ds["responses"].transpose("item", "model").values.astype(np.int8)
    full = (y == 1).sum(0) / (y >= 0).sum(0)
    errors = {d: {k: [] for k in BUDGETS} for d in (*STATIC_DESIGNS, "random")}
    expected = {d: {k: [] for k in BUDGETS} for d in (*STATIC_DESIGNS, "random")}
    for split in range(args.splits):
        rng = np.random.default_rng([args.seed, split])
        perm = rng.permutation(y.shape[1])
        n_cal = int(round(0.75 * y.shape[1]))
        cal, test = np.sort(perm[:n_cal]), np.sort(perm[n_cal:])
        fit = fit_mml(ds.isel(model=cal), "2pl", priors=True, se=False)
        a, d = fit.items["discrimination"].values, fit.items["intercept"].values
        theta_cal = score_test(y[:, cal], a, d).theta

        def rmse(items):
            score = (y[items] == 1).mean(axis=0)
            theta = score_test(y, a, d, items).theta
            predict = score_calibration(score[cal], theta[cal], full[cal])
            return float(np.sqrt(np.mean((predict(score[test], theta[test]) - full[test]) ** 2))) * 100

        for k in BUDGETS:
            for design in STATIC_DESIGNS:
                items = static_test(a, d, theta_cal, k, design=design)
                errors[design][k].append(rmse(items))
                expected[design][k].append(expected_rmse(a, d, theta_cal, items))
            subsets = [rng.choice(a.size, k, replace=False) for _ in range(args.random)]
            errors["random"][k].append(np.mean([rmse(items) for items in subsets]))
            expected["random"][k].append(np.mean([expected_rmse(a, d, theta_cal, items) for items in subsets]))
    gap = {k: np.subtract(errors[STATIC_DESIGN][k], errors["random"][k]) for k in BUDGETS}
    return ({d: {k: float(np.mean(v)) for k, v in r.items()} for d, r in errors.items()},
            {d: {k: float(np.mean(v)) for k, v in r.items()} for d, r in expected.items()},
            {k: float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else None for k, v in gap.items()})


def markdown(result: dict) -> str:
    s = result["settings"]
    lines = ["# Static test designs vs random items (issue 44 item 1)", "",
             f"{s['date']}, {s['machine']}. "
             f"Command: `{s['command']}`. {s['models']} models per data set (seeded subset), {s['splits']} CAT-study "
             f"splits x {s['random']} random subsets, {s['random_tests']} random 40-item tests, {s['pair_models']} "
             f"models for the pair test. Default design: `{s['default']}` (`safety.settings.STATIC_DESIGN`).", "",
             "## CAT study: held-out RMSE of the predicted full score (percentage points; lower is better)", "",
             "| data | k | " + " | ".join(STATIC_DESIGNS) + " | random |", "|---|---|" + "---|" * (len(STATIC_DESIGNS) + 1)]
    for name, r in result["data"].items():
        for k in BUDGETS:
            c = r["cat"]
            lines.append(f"| {name} | {k} | " + " | ".join(f"{c[d][str(k)]:.2f}" for d in STATIC_DESIGNS)
                         + f" | {c['random'][str(k)]:.2f} |")
    d = s["default"]
    lines += ["", f"Realized vs expected (the representative criterion, `expected_rmse`) RMSE of `{d}` and of "
              "random items, and the default's RMSE minus random's mean with its standard error over splits "
              "(percentage points):", "",
              "| data | k | default realized | default expected | random realized | random expected | "
              "default - random (se) |", "|---|---|---|---|---|---|---|"]
    for name, r in result["data"].items():
        c, e = r["cat"], r["cat_expected"]
        for k in BUDGETS:
            se = r["cat_gap_se"][str(k)]
            lines.append(f"| {name} | {k} | {c[d][str(k)]:.2f} | {e[d][str(k)]:.2f} | {c['random'][str(k)]:.2f} | "
                         f"{e['random'][str(k)]:.2f} | {c[d][str(k)] - c['random'][str(k)]:+.2f} "
                         f"({'-' if se is None else f'{se:.2f}'}) |")
    lines += ["", "## Ability-shift detector (40 items): recall of one-logit uniform sandbagging (200 runs) and "
              "in-sample false-positive rate; pair test: share of model pairs told apart (40 items; full test)", "",
              "| data | " + " | ".join(f"{d} recall" for d in STATIC_DESIGNS) + " | random recall | "
              + " | ".join(f"{d} pairs" for d in STATIC_DESIGNS) + " | random pairs | full pairs |",
              "|---|" + "---|" * (2 * len(STATIC_DESIGNS) + 3)]
    for name, r in result["data"].items():
        x = r["shift"]
        lines.append(f"| {name} | " + " | ".join(f"{x[d]['recall']:.1%}" for d in STATIC_DESIGNS)
                     + f" | {x['random']['recall']:.1%} | " + " | ".join(f"{x[d]['pairs']:.1%}" for d in STATIC_DESIGNS)
                     + f" | {x['random']['pairs']:.1%} | {x['full']['pairs']:.1%} |")
    lines += ["", "## Acceptance of the default design", ""]
    for name, r in result["data"].items():
        d = s["default"]
        worse = [f"RMSE k={k}" for k in BUDGETS if r["cat"][d][str(k)] > r["cat"]["random"][str(k)]]
        worse += ["recall"] * (r["shift"][d]["recall"] < r["shift"]["random"]["recall"])
        worse += ["pairs"] * (r["shift"][d]["pairs"] < r["shift"]["random"]["pairs"])
        lines.append(f"- {name}: " + ("not worse than random on any criterion" if not worse
                                      else "worse than random on " + ", ".join(worse)))
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--random", type=int, default=20)
    parser.add_argument("--random-tests", type=int, default=10)
    parser.add_argument("--pair-models", type=int, default=500)
    parser.add_argument("--data", default=",".join((*BENCHMARKS, "curated")))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=str(RESULTS / "static_design.json"))
    parser.add_argument("--merge", help="comma-separated results JSONs of runs on disjoint data sets: one table")
    args = parser.parse_args()
    if args.merge:
        import json

        parts = [json.loads(Path(p).read_text()) for p in args.merge.split(",")]
        settings = dict(parts[0]["settings"], command="; ".join(p["settings"]["command"] for p in parts))
        merged = {"settings": settings, "data": {k: v for p in parts for k, v in p["data"].items()}}
        write_results(args.out, merged, markdown, echo=True)
        return
    if args.quick:
        args.models, args.splits, args.random, args.random_tests, args.pair_models = 300, 2, 3, 2, 200
        args.data = "arc"
    result = {"settings": {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "machine": machine(),
                           "command": "python benchmarks/static_design.py " + " ".join(sys.argv[1:]),
                           "models": args.models, "splits": args.splits, "random": args.random,
                           "random_tests": args.random_tests, "pair_models": args.pair_models, "seed": args.seed,
                           "default": STATIC_DESIGN},
              "data": {}}
    for name in args.data.split(","):
        start = time.perf_counter()
        ds = dataset(name, args.models, args.seed)
        rng = np.random.default_rng(args.seed)
        realized, expected, gap_se = cat_rmse(ds, args)
        result["data"][name] = {"items": int(ds.sizes["item"]),
                                "cat": {d: {str(k): v for k, v in r.items()} for d, r in realized.items()},
                                "cat_expected": {d: {str(k): v for k, v in r.items()} for d, r in expected.items()},
                                "cat_gap_se": {str(k): v for k, v in gap_se.items()},
                                "shift": shift_and_pairs(ds, args, rng), "seconds": time.perf_counter() - start}
        print(name, f"{time.perf_counter() - start:.0f}s", flush=True)
    write_results(args.out, result, markdown, echo=True)


if __name__ == "__main__":
    main()
