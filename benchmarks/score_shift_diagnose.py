"""Why ``score`` misses under shift (issue 46 item 3): the bank's item curves above the cohort, or the test?

For each benchmark and bank spec, the bank is fitted (MAP-EM with standard errors) on the weakest 80% of models
by full score (as ``benchmarks/score_shift.py``) and the strongest 20% are examined without any short test:

- ``all items``: each model's ability is estimated from all its answers (EAP, prior sd 3 on the bank's point
  estimates) and its accuracy predicted from the curves at that ability; the bias (predicted minus actual,
  percentage points) is the error of the bank's mapping from ability to accuracy, no item choice involved;
- ``half -> half``: the ability from a random half of the items (seed 1) predicts the accuracy on the other
  half: the error of carrying the curves to items the model did not answer;
- ``half -> half, true score``: the same with the ability that matches the model's proportion correct on the
  first half (the test characteristic curve, ``mean_j P_j(theta) = observed accuracy``) instead of the EAP, which
  matches the discrimination-weighted score: a candidate fix (not used by ``score``) when the strong models'
  answers do not have the shape the cohort's curves give them.

Usage: ``OMP_NUM_THREADS=1 nice python benchmarks/score_shift_diagnose.py`` (writes
``benchmarks/results/score_shift_diagnose.{json,md}``; skipped, said so, without ``../shared/data``).
"""

from __future__ import annotations

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
from bayesirt.models.response import probability  # noqa: E402
from bayesirt.safety.adaptive import score_test  # noqa: E402


def _mapping_bias(point, y, rows, target_rows) -> float:
    est = score_test(y[rows], point.discrimination[rows], point.intercept[rows], guessing=point.guessing[rows],
                     slip=point.slip[rows], method="eap", prior_sd=3.0)
    p = probability(point.discrimination[target_rows, None] * est.theta[None] + point.intercept[target_rows, None],
                    point.guessing[target_rows, None], point.slip[target_rows, None])
    return float(100 * (p.mean(0) - (y[target_rows] == 1).mean(0)).mean())


def _true_score_bias(point, y, rows, target_rows) -> float:
    grid = np.linspace(-6.0, 14.0, 2001)
    p = probability(point.discrimination[:, None] * grid[None] + point.intercept[:, None], point.guessing[:, None],
                    point.slip[:, None])
    at = np.clip(np.searchsorted(p[rows].mean(0), (y[rows] == 1).mean(0)), 0, grid.size - 1)
    return float(100 * (p[target_rows][:, at].mean(0) - (y[target_rows] == 1).mean(0)).mean())


def markdown(result: dict) -> str:
    lines = ["# Why `score` misses under shift: the bank's curves above the cohort", "",
             f"{result['date']}, {result['machine']}; bayesirt {result['source'].get('head', '')[:10]}.", "",
             f"Command: `{result['command']}`", "", __doc__.split("\n\n")[1].replace("\n", " "), "",
             "| data | bank | mapping bias, ability from all items (pp) | half -> half bias (pp) | "
             "half -> half, true score (pp) | s |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['data']} | {r['spec']} | {r['all_items_bias_pp']:+.2f} | {r['half_bias_pp']:+.2f} | "
              f"{r['true_score_half_bias_pp']:+.2f} | "
              f"{r['seconds']:.0f} |" for r in result["rows"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    result = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
              "source": source_state(), "command": "python benchmarks/score_shift_diagnose.py", "rows": []}
    out = RESULTS / "score_shift_diagnose.json"
    if not DATA.is_dir():
        result["skipped"] = f"{DATA} is absent"
        print(result["skipped"])
        return
    for name in ("arc", "mmlu", "gsm8k"):
        ds = load(DATA / f"{name}.csv", orientation="models-rows")
        y = ds["responses"].values
        full = (y == 1).sum(0) / np.maximum((y >= 0).sum(0), 1)
        cal, test = _splits(full, 0)["shift"]
        yt = y[:, test].astype(np.int8)
        n = y.shape[0]
        half = np.random.default_rng(1).permutation(n)
        for spec in ("2pl", "3pl"):
            t0 = time.time()
            fit, _ = recorded_warnings(fit_mml, ds.isel(model=cal), spec, priors=True, se=False)
            items = fit.items
            point = type("P", (), {k: (items[k].values if k in items else np.zeros(n))
                                   for k in ("discrimination", "intercept", "guessing", "slip")})
            row = {"data": name, "spec": spec,
                   "all_items_bias_pp": _mapping_bias(point, yt, np.arange(n), np.arange(n)),
                   "half_bias_pp": _mapping_bias(point, yt, np.sort(half[: n // 2]), np.sort(half[n // 2:])),
                   "true_score_half_bias_pp": _true_score_bias(point, yt, np.sort(half[: n // 2]),
                                                               np.sort(half[n // 2:])),
                   "seconds": time.time() - t0}
            result["rows"].append(row)
            print(row, flush=True)
            write_results(out, result, markdown)
    print(write_results(out, result, markdown))


if __name__ == "__main__":
    main()
