"""The design-based interval of ``score`` over many item draws (issue 46 item 3).

``benchmarks/score_shift.py`` scores each split from a few tests of ``select --selection-rule sample``; the models of one
test share its items, so one draw's errors are correlated across them and a few draws say little about the
estimator's bias. Here the same banks (SPEC by MAP-EM with standard errors on the calibration models, read as
``--draws`` Laplace draws, as ``score_shift.py``) score the same models from ``--tests`` independently drawn
stratified samples of ``K`` items with :func:`bayesirt.safety.item_sample.design_estimate` alone (the estimate and
interval ``score`` gives for such a test, without its person fit and flags). Reported per benchmark, split and
bank: the bias of the estimate averaged over draws and models (the design bias, which the theory says is near 0
whatever the bank's bias), the coverage over draws and models, the 5th-95th percentile of a single draw's coverage,
and the mean width.

Usage: ``OMP_NUM_THREADS=1 nice python benchmarks/score_shift_draws.py`` (writes
``benchmarks/results/score_shift_draws.{json,md}``; skipped, said so, without ``../shared/data``).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, source_state, write_results  # noqa: E402
from score_shift import DATA, RESULTS, _splits  # noqa: E402

from bayesirt.data import load  # noqa: E402
from bayesirt.errors import recorded_warnings  # noqa: E402
from bayesirt.frequentist.mml import fit_mml  # noqa: E402
from bayesirt.safety.bank import read_bank  # noqa: E402
from bayesirt.safety.item_sample import design_estimate, stratified_sample  # noqa: E402


def _draws(bank, y, truth, k: int, tests: int) -> dict:
    covered, err, width = [], [], []
    for seed in range(tests):
        items = stratified_sample(bank, k, seed=seed)
        part = np.full_like(y, -1)
        part[items] = y[items]
        est = design_estimate(bank, part)
        covered.append((truth >= est.lower - 1e-12) & (truth <= est.upper + 1e-12))
        err.append(est.estimate - truth)
        width.append(est.upper - est.lower)
    covered, err = np.array(covered), np.array(err) * 100
    per_draw = covered.mean(axis=1)
    return {"coverage": float(covered.mean()), "coverage_p05_p95": [float(v) for v in np.quantile(per_draw, [.05, .95])],
            "bias_pp": float(err.mean()), "bias_pp_se": float(err.mean(axis=1).std(ddof=1) / np.sqrt(tests)),
            "rmse_pp": float(np.sqrt((err**2).mean())), "width_pp": float(np.mean(width) * 100),
            "n_scored": int(truth.size), "tests": tests}


def markdown(result: dict) -> str:
    s = result["settings"]
    lines = ["# `score`'s design-based interval over many item draws", "",
             f"{result['date']}, {result['machine']} (shared with other jobs); bayesirt "
             f"{result['source'].get('head', '')[:10]}.", "", f"Command: `{result['command']}`", "",
             " ".join(__doc__.split("\n\n")[1].split()), "",
             f"K = {s['k']}, {s['tests']} tests per row; bias in percentage points with its standard error over "
             "tests; coverage of the 90% interval (target .85-.95).", "",
             "| data | split | bank | coverage | single test's coverage (5th-95th pct) | bias pp (se) | RMSE pp | "
             "width pp | s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lo, hi = r["coverage_p05_p95"]
        lines.append(f"| {r['data']} | {r['split']} | {r['spec']} | {r['coverage']:.3f} | {lo:.3f}-{hi:.3f} | "
                     f"{r['bias_pp']:+.2f} ({r['bias_pp_se']:.2f}) | {r['rmse_pp']:.2f} | {r['width_pp']:.1f} | "
                     f"{r['seconds']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--benchmarks", default="arc,mmlu,gsm8k")
    ap.add_argument("--specs", default="3pl,2pl")
    ap.add_argument("--k", type=int, default=25)
    ap.add_argument("--tests", type=int, default=200)
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    result = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
              "source": source_state(), "settings": vars(args), "rows": [],
              "command": "python benchmarks/score_shift_draws.py " + " ".join(argv or sys.argv[1:])}
    out = RESULTS / "score_shift_draws.json"
    if not DATA.is_dir():
        print(f"skipped: {DATA} is absent")
        return
    for name in args.benchmarks.split(","):
        ds = load(DATA / f"{name}.csv", orientation="models-rows")
        y = ds["responses"].values.astype(np.int8)
        full = (y == 1).sum(0) / np.maximum((y >= 0).sum(0), 1)
        for split, (cal, test) in _splits(full, args.seed).items():
            for spec in args.specs.split(","):
                t0 = time.time()
                fit, _ = recorded_warnings(fit_mml, ds.isel(model=cal), spec, priors=True, se=True)
                bank = read_bank(fit, draws=args.draws, seed=args.seed, calibration=ds.isel(model=cal))
                row = {"data": name, "split": split, "spec": spec}
                row |= _draws(bank, y[:, test], full[test], args.k, args.tests)
                row["seconds"] = time.time() - t0
                result["rows"].append(row)
                print(row, flush=True)
                write_results(out, result, markdown)
    print(write_results(out, result, markdown))


if __name__ == "__main__":
    main()
