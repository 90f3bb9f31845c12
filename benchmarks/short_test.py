"""Held-out study of ``select`` + ``score``: full-benchmark accuracy of new models from K items.

For each real benchmark (Open LLM Leaderboard v1 response matrices in ``/work/shared/data/llm``):

1. split the models at random, 80% calibration / 20% held out (``--seed``);
2. fit the 2PL bank on the calibration models by MAP-EM with standard errors
   (``fit_mml(..., priors=True, se=True)``) and read it as a bank of ``--draws`` Laplace draws
   (``read_bank``: ``Normal(estimate, inverse observed information)`` over all item parameters);
3. for each K in ``--budgets``: the selected test (``select_items``, SAFE's static test), and
   ``--random`` random K-item subsets; each held-out model's responses to those K items only are
   scored (``predict_accuracy``: ability posterior mixed over item draws, posterior predictive of the
   full-benchmark accuracy with a 90% interval; ``person_fit_flags``: l_z against the calibration
   cohort's 10% cut-off on the same items);
4. against the model's actual full-benchmark accuracy: MAE and RMSE (percentage points), coverage
   of the 90% intervals, mean interval width, share flagged, coverage among the unflagged; for random
   subsets also the plain mean accuracy on the K items (MAE, RMSE), averaged over subsets.

Distribution shift: the bank is calibrated on the weakest 80% of models (by full accuracy) and
the strongest 20% are scored from the selected test; the share outside the calibrated ability
range is reported.

Usage::

    nice -n 10 python benchmarks/short_test.py                # all five benchmarks (~30 min on 1 core)
    nice -n 10 python benchmarks/short_test.py --quick        # one benchmark, K = 10, 25, 2 random subsets
    python benchmarks/short_test.py --merge a.json,b.json    # one table from runs on disjoint benchmarks

Writes ``benchmarks/results/short_test.{json,md}`` and ``short_test.png`` (predicted vs actual at
K = 25, selected tests, held-out models).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fmt, machine, source_state, write_results  # noqa: E402

from bayesirt.data import load  # noqa: E402
from bayesirt.errors import recorded_warnings  # noqa: E402
from bayesirt.frequentist.mml import fit_mml  # noqa: E402
from bayesirt.safety.bank import Bank, read_bank  # noqa: E402
from bayesirt.safety.scoring import at_ceiling, outside_calibration, person_fit_flags, predict_accuracy  # noqa: E402
from bayesirt.safety.short_test import select_items  # noqa: E402

DATA = Path("/work/shared/data/llm/open_llm_leaderboard_v1")
BENCHMARKS = ("gsm8k", "truthfulqa", "winogrande", "mmlu", "arc")
RESULTS = Path(__file__).resolve().parent / "results"
CAL_MODELS = 1000  # calibration models scored for each test's interval scale
RULE = "conservative"  # interval_scale's rule (--rule)


def _metrics(pred, full, flags=None) -> dict:
    err = pred.predicted_accuracy - full
    cover = (full >= pred.lower - 1e-12) & (full <= pred.upper + 1e-12)
    model = (full >= pred.model_lower - 1e-12) & (full <= pred.model_upper + 1e-12)
    out = {"mae": float(np.mean(np.abs(err)) * 100), "rmse": float(np.sqrt(np.mean(err**2)) * 100),
           "coverage": float(cover.mean()), "width": float(np.mean(pred.upper - pred.lower) * 100),
           "coverage_model": float(model.mean()), "width_model": float(np.mean(pred.model_upper - pred.model_lower) * 100),
           "scale": float(np.nanmean(pred.scale)) if np.isfinite(pred.scale).any() else float("nan")}
    if flags is not None:
        out["flagged"] = float(flags.mean())
        out["coverage_unflagged"] = float(cover[~flags].mean()) if (~flags).any() else float("nan")
    return out


def _round(scatter: dict) -> dict:
    """Per-model figure data rounded to 4 decimals (0.01 pp), to keep the results JSON small."""
    return {k: np.round(np.asarray(v, float), 4).tolist() for k, v in scatter.items()}


def _masked(y: np.ndarray, items: np.ndarray) -> np.ndarray:
    out = np.full_like(y, -1)
    out[items] = y[items]
    return out


def _bank(ds, cal, draws, seed):
    fit, messages = recorded_warnings(fit_mml, ds.isel(model=cal), "2pl", priors=True, se=True)
    return read_bank(fit, draws=draws, seed=seed, calibration=ds.isel(model=cal)), messages


def study(name: str, budgets, n_random: int, draws: int, samples: int, seed: int) -> dict:
    ds = load(DATA / f"{name}.csv")
    y = ds["responses"].values
    n_items, n_models = y.shape
    full_all = (y == 1).sum(0) / np.maximum((y >= 0).sum(0), 1)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n_models)
    n_cal = int(round(0.8 * n_models))
    cal, test = np.sort(perm[:n_cal]), np.sort(perm[n_cal:])
    t0 = time.time()
    bank, messages = _bank(ds, cal, draws, seed)
    fit_s = time.time() - t0
    point_bank = Bank(bank.item_ids, bank.item_group, *(getattr(bank, k).mean(0, keepdims=True) for k in
                                                         ("discrimination", "intercept", "guessing", "slip")),
                      bank.abilities, bank.calibration, kind="point estimates")
    yt, full = y[:, test], full_all[test]
    rows, scatter = [], {}
    for k in budgets:
        if k >= n_items:
            rows.append({"k": k, "skipped": f"K >= the {n_items} items"})
            continue
        sel = select_items(bank, k, method="score")
        ym = _masked(yt, sel)
        pred = predict_accuracy(bank, ym, samples=samples, seed=seed, calibrate=True, max_models=CAL_MODELS, rule=RULE)
        pf = person_fit_flags(bank, ym)
        row = {"k": k, "selected": _metrics(pred, full, pf.flag), "at_ceiling": float(at_ceiling(ym).mean())}
        row["selected_fixed_items"] = _metrics(predict_accuracy(point_bank, ym, samples=samples, seed=seed), full)
        info = _masked(yt, select_items(bank, k, method="information"))
        row["information"] = _metrics(predict_accuracy(bank, info, samples=samples, seed=seed, calibrate=True,
                                                        max_models=CAL_MODELS, rule=RULE), full,
                                      person_fit_flags(bank, info).flag)
        if k == 25:
            scatter = _round({"actual": full, "predicted": pred.predicted_accuracy, "lower": pred.lower,
                              "upper": pred.upper})
        plain, irt = [], []
        for _ in range(n_random):
            items = np.sort(rng.choice(n_items, size=k, replace=False))
            sub = yt[items]
            mean = (sub == 1).sum(0) / np.maximum((sub >= 0).sum(0), 1)
            plain.append({"mae": float(np.mean(np.abs(mean - full)) * 100),
                          "rmse": float(np.sqrt(np.mean((mean - full) ** 2)) * 100)})
            irt.append(_metrics(predict_accuracy(bank, _masked(yt, items), samples=samples, seed=seed, calibrate=True,
                                                 max_models=CAL_MODELS, rule=RULE), full))
        row["random_plain"] = {m: float(np.mean([r[m] for r in plain])) for m in ("mae", "rmse")}
        row["random_irt"] = {m: float(np.mean([r[m] for r in irt])) for m in ("mae", "rmse", "coverage", "width",
                                                                               "coverage_model", "width_model")}
        row["random_irt_rmse_sd"] = float(np.std([r["rmse"] for r in irt]))
        rows.append(row)
        print(f"{name} K={k}: selected RMSE {row['selected']['rmse']:.2f} cov {row['selected']['coverage']:.3f} "
              f"(model-based {row['selected']['coverage_model']:.3f}, fixed items "
              f"{row['selected_fixed_items']['coverage_model']:.3f}); "
              f"max-information RMSE {row['information']['rmse']:.2f} cov {row['information']['coverage']:.3f}; "
              f"random IRT {row['random_irt']['rmse']:.2f} cov {row['random_irt']['coverage']:.3f}; "
              f"random plain {row['random_plain']['rmse']:.2f}", flush=True)
    # distribution shift: calibrate on the weakest 80%, score the strongest 20%
    order = np.argsort(full_all, kind="stable")
    weak, strong = np.sort(order[:n_cal]), np.sort(order[n_cal:])
    shift_bank, shift_messages = _bank(ds, weak, draws, seed)
    shift = []
    for k in budgets:
        if k >= n_items:
            continue
        sel = select_items(shift_bank, k, method="score")
        ym = _masked(y[:, strong], sel)
        pred = predict_accuracy(shift_bank, ym, samples=samples, seed=seed, calibrate=True, max_models=CAL_MODELS, rule=RULE)
        pf = person_fit_flags(shift_bank, ym)
        outside = outside_calibration(shift_bank, ym, pred.theta_mean)
        m = _metrics(pred, full_all[strong], pf.flag)
        inside = (full_all[strong] >= pred.lower) & (full_all[strong] <= pred.upper)
        warned = outside | at_ceiling(ym) | pf.flag
        m.update(k=k, outside_range=float(outside.mean()), at_ceiling=float(at_ceiling(ym).mean()),
                 coverage_inside=float(np.mean(inside[~warned])) if (~warned).any() else float("nan"),
                 n_inside=int((~warned).sum()))
        shift.append(m)
        print(f"{name} shift K={k}: RMSE {m['rmse']:.2f} cov {m['coverage']:.3f} outside {m['outside_range']:.2f}",
              flush=True)
    return {"benchmark": name, "n_items": n_items, "n_models": n_models, "n_calibration": int(cal.size),
            "n_held_out": int(test.size), "fit_seconds": fit_s, "bank_kind": bank.kind, "bank_notes": bank.notes,
            "fit_warnings": messages + shift_messages, "full_accuracy_sd": float(full.std() * 100), "rows": rows,
            "shift": shift, "shift_threshold": float(full_all[order[n_cal - 1]]), "scatter_k25": scatter}


def markdown(result: dict) -> str:
    s = result["settings"]
    lines = ["# Short tests from a calibrated bank: held-out models", "",
             f"{result['date']}, {result['machine']}; bayesirt {result['source'].get('head', '')[:10]}.", "",
             f"Command: `{result['command']}`", "",
             f"2PL bank by MAP-EM on a random 80% of models, {s['draws']} Laplace draws of the items; the held-out "
             f"20% scored from their responses to K items only ({s['samples']} predictive draws each); "
             f"random subsets: {s['random']} per K; calibrated-interval rule: {s.get('rule', 'conservative')}. "
             "Errors in percentage points of full-benchmark accuracy. "
             "Coverage of the 90% intervals: 'model' = the Bayesian posterior predictive interval, 'calibrated' = "
             f"its half-widths rescaled to cover 90% of {CAL_MODELS} calibration models on the same items "
             "(`calibrate=True`, the default of `score`); 'fixed items' = model-based with the items at their "
             "point estimates. 'flagged': l_z at or below the calibration cohort's 10% cut-off on the same items.", "",
             "| benchmark | items | K | selected MAE | selected RMSE | coverage calibrated | coverage model | "
             "coverage fixed items | width calibrated / model | flagged | coverage unflagged | max-information RMSE "
             "(coverage) | random IRT RMSE | random IRT coverage calibrated / model | random plain RMSE | "
             "selected beats random |", "|" + "---|" * 16]
    for b in result["benchmarks"]:
        for r in b["rows"]:
            if "skipped" in r:
                lines.append(f"| {b['benchmark']} | {b['n_items']} | {r['k']} | {r['skipped']} |" + " |" * 12)
                continue
            sel, ri, rp, inf = r["selected"], r["random_irt"], r["random_plain"], r["information"]
            beats = sel["rmse"] < min(ri["rmse"], rp["rmse"])
            lines.append(f"| {b['benchmark']} | {b['n_items']} | {r['k']} | {sel['mae']:.2f} | {sel['rmse']:.2f} | "
                         f"{sel['coverage']:.1%} | {sel['coverage_model']:.1%} | "
                         f"{r['selected_fixed_items']['coverage_model']:.1%} | {sel['width']:.1f} / "
                         f"{sel['width_model']:.1f} | {sel['flagged']:.1%} | {sel['coverage_unflagged']:.1%} | "
                         f"{inf['rmse']:.2f} ({inf['coverage']:.0%}) | {ri['rmse']:.2f} | {ri['coverage']:.1%} / "
                         f"{ri['coverage_model']:.1%} | {rp['rmse']:.2f} | {'yes' if beats else 'no'} |")
    lines += ["", "## Distribution shift: calibrated on the weakest 80%, scoring the strongest 20%", "",
              "| benchmark | accuracy threshold | K | MAE | RMSE | coverage calibrated | coverage model | outside "
              "calibrated range | at ceiling | person-fit flagged | coverage of the unwarned (n) |", "|" + "---|" * 11]
    for b in result["benchmarks"]:
        for m in b["shift"]:
            lines.append(f"| {b['benchmark']} | {b['shift_threshold']:.2f} | {m['k']} | {m['mae']:.2f} | "
                         f"{m['rmse']:.2f} | {m['coverage']:.1%} | {m['coverage_model']:.1%} | "
                         f"{m['outside_range']:.1%} | {m['at_ceiling']:.1%} | {m['flagged']:.1%} | "
                         f"{fmt(m['coverage_inside'] * 100, '{:.1f}')}% ({m['n_inside']}) |")
    lines += ["", "Fit seconds per bank: " + ", ".join(f"{b['benchmark']} {b['fit_seconds']:.0f}"
                                                       for b in result["benchmarks"]), ""]
    return "\n".join(lines)


def figure(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bs = [b for b in result["benchmarks"] if b["scatter_k25"]]
    fig, axes = plt.subplots(1, len(bs), figsize=(3.2 * len(bs), 3.3), squeeze=False)
    for ax, b in zip(axes[0], bs, strict=True):
        sc = b["scatter_k25"]
        x, p = np.array(sc["actual"]), np.array(sc["predicted"])
        err = np.vstack([p - np.array(sc["lower"]), np.array(sc["upper"]) - p])
        ax.errorbar(x, p, yerr=err, fmt="o", ms=1.5, lw=0.3, alpha=0.4)
        ax.plot([0, 1], [0, 1], "k--", lw=0.8)
        ax.set(title=f"{b['benchmark']} (K=25)", xlabel="actual full accuracy", xlim=(0, 1), ylim=(0, 1))
    axes[0][0].set_ylabel("predicted (90% interval)")
    fig.tight_layout()
    fig.savefig(path, dpi=130)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--benchmarks", default=",".join(BENCHMARKS))
    ap.add_argument("--budgets", default="10,25,50,100")
    ap.add_argument("--random", type=int, default=10, help="random K-item subsets per K")
    ap.add_argument("--draws", type=int, default=100, help="Laplace draws of the item parameters")
    ap.add_argument("--samples", type=int, default=1000, help="predictive draws per model")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--merge", default=None, help="comma-separated results JSONs of runs on disjoint benchmarks "
                    "(same settings): write their union to --out (default short_test.json) with its Markdown and figure")
    ap.add_argument("--rule", default="conservative", choices=("conservative", "nearest"),
                    help="how the calibrated interval's factor is chosen (bayesirt.safety.scoring.interval_scale)")
    args = ap.parse_args(argv)
    global RULE
    RULE = args.rule
    if args.merge:
        import json

        parts = [json.loads(Path(f).read_text()) for f in args.merge.split(",")]
        if any(p["settings"] != parts[0]["settings"] for p in parts):
            raise SystemExit("the runs to merge have different settings")
        for b in (b for p in parts for b in p["benchmarks"]):
            b["scatter_k25"] = _round(b["scatter_k25"]) if b["scatter_k25"] else {}
        result = dict(parts[0], benchmarks=[b for p in parts for b in p["benchmarks"]],
                      command=" ; ".join(p["command"] for p in parts), merged_from=args.merge.split(","),
                      runs=[{k: p[k] for k in ("date", "machine", "source", "command")} for p in parts])
        out = Path(args.out) if args.out else RESULTS / "short_test.json"
        write_results(out, result, markdown)
        figure(result, out.with_suffix(".png"))
        print(markdown(result))
        return
    names = args.benchmarks.split(",")
    budgets = [int(b) for b in args.budgets.split(",")]
    if args.quick:
        names, budgets, args.random = names[:1], [10, 25], 2
    out = Path(args.out) if args.out else RESULTS / ("short_test_quick.json" if args.quick else "short_test.json")
    result = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
              "source": source_state(), "command": "python benchmarks/short_test.py " + " ".join(argv or sys.argv[1:]),
              "settings": {"budgets": budgets, "random": args.random, "draws": args.draws, "samples": args.samples,
                           "seed": args.seed, "rule": args.rule}, "benchmarks": []}
    for name in names:
        result["benchmarks"].append(study(name, budgets, args.random, args.draws, args.samples, args.seed))
        write_results(out, result, markdown)
    figure(result, out.with_suffix(".png"))
    print(markdown(result))


if __name__ == "__main__":
    main()
