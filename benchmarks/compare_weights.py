"""Model weights of a `bayesirt compare` run, checked against ArviZ on the same pointwise elpd (issue 42 item 3).

    .venv/bin/python benchmarks/compare_weights.py OUT [--time-log FILE] [--command "..."]

``OUT`` is the output folder of a comparison (``compare.csv``, ``elpd.nc``); by default of
``bayesirt compare FILE --specs rasch,2pl,3pl`` on the simulated 755 x 1,351 3PL matrix of
``benchmarks/compare_leaderboard.py`` (its ``simulated_csv``). From ``elpd.nc`` (the pointwise elpd
of every spec: leave-one-model-out, or K-fold when K-fold replaced PSIS) it computes

- bayesirt's stacking weights and ArviZ's (``az.compare(method="stacking")``) on the same elpd with
  each unit's best spec moved to 0 (stacking is unchanged by a constant per unit, and ArviZ's
  ``exp(elpd_i)`` underflows on whole-pattern elpd of about -770 per model otherwise);
- bayesirt's pseudo-BMA+ weights and ArviZ's (``method="BB-pseudo-BMA"``, 1,000 Bayesian-bootstrap
  replicates each, different draws: they agree within Monte Carlo error);
- the leader's lead over the runner-up in elpd and in dse (ArviZ's ``elpd_diff`` / ``dse``);

and, with ``--time-log`` (the output of ``/usr/bin/time -v`` around the command), the command's
wall and CPU seconds. Writes ``benchmarks/results/compare_weights.{json,md}``.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from datetime import datetime, timezone
from pathlib import Path

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr
from arviz_stats.utils import ELPDDataLOO

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, versions, write_results  # noqa: E402

from bayesirt.comparison.stacking import pseudo_bma_plus_weights, stacking_weights  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "compare_weights.json"


def _elpd_data(values: np.ndarray) -> ELPDDataLOO:
    n = values.size
    return ELPDDataLOO(elpd=float(values.sum()), se=float(np.sqrt(n * values.var(ddof=1))), p=0.0,
                       n_samples=1000, n_data_points=n, scale="log", warning=False, good_k=0.7,
                       elpd_i=xr.DataArray(values, dims="model", name="elpd_i"),
                       pareto_k=xr.DataArray(np.zeros(n), dims="model"))


def time_log(path: Path) -> dict:
    """Wall and CPU (user + system) seconds, peak memory and exit status from ``/usr/bin/time -v``."""
    text = path.read_text(errors="replace")
    field = lambda name: re.search(rf"{re.escape(name)}: (.+)", text).group(1).strip()  # noqa: E731
    parts = [float(p) for p in field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")]
    wall = sum(p * 60 ** k for k, p in enumerate(reversed(parts)))
    cpu = float(field("User time (seconds)")) + float(field("System time (seconds)"))
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "max_rss_gb_largest_process": round(int(field("Maximum resident set size (kbytes)")) / 2**20, 2),
            "exit_status": int(field("Exit status"))}


def weights(folder: Path) -> dict:
    pointwise = xr.open_dataset(folder / "elpd.nc")
    specs = [str(s) for s in pointwise["spec"].values]
    elpd = np.column_stack([pointwise["elpd_i"].sel(spec=s).values for s in specs])
    shifted = elpd - elpd.max(axis=1, keepdims=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arviz = {m: az.compare({s: _elpd_data(shifted[:, j]) for j, s in enumerate(specs)}, method=m, round_to="none")
                 for m in ("stacking", "bb-pseudo-bma")}
        plain = az.compare({s: _elpd_data(elpd[:, j]) for j, s in enumerate(specs)}, method="stacking",
                           round_to="none")
    ranked = az.compare({s: _elpd_data(elpd[:, j]) for j, s in enumerate(specs)}, method="pseudo-bma", round_to="none")
    leader, second = ranked.index[0], ranked.index[1]
    table = pd.read_csv(folder / "compare.csv", index_col="spec")
    ours = {"stacking": dict(zip(specs, stacking_weights(elpd))), "pseudo-bma+": dict(zip(specs, pseudo_bma_plus_weights(elpd)))}
    rows = {s: {"elpd": round(float(elpd[:, j].sum()), 2),
                "stacking_bayesirt": round(ours["stacking"][s], 4),
                "stacking_arviz_same_elpd_shifted": round(float(arviz["stacking"].loc[s, "weight"]), 4),
                "stacking_arviz_unshifted": round(float(plain.loc[s, "weight"]), 4),
                "pseudo_bma_plus_bayesirt": round(ours["pseudo-bma+"][s], 4),
                "bb_pseudo_bma_arviz": round(float(arviz["bb-pseudo-bma"].loc[s, "weight"]), 4),
                "compare_csv_weight": round(float(table.loc[s, "weight"]), 4),
                "compare_csv_method": str(table.loc[s, "method"])} for j, s in enumerate(specs)}
    lead, dse = -float(ranked.loc[second, "elpd_diff"]), float(ranked.loc[second, "dse"])
    return {"specs": rows, "units": int(elpd.shape[0]), "leader": leader, "runner_up": second,
            "lead_elpd": round(lead, 2), "dse": round(dse, 2), "lead_in_dse": round(lead / dse, 2),
            "max_abs_stacking_diff_vs_arviz": float(max(abs(r["stacking_bayesirt"] - r["stacking_arviz_same_elpd_shifted"])
                                                        for r in rows.values())),
            "max_abs_pseudo_bma_plus_diff_vs_arviz": float(max(abs(r["pseudo_bma_plus_bayesirt"] - r["bb_pseudo_bma_arviz"])
                                                               for r in rows.values()))}


def markdown(result: dict) -> str:
    w = result["weights"]
    lines = ["# Model weights of `bayesirt compare`, against ArviZ on the same pointwise elpd (issue 42 item 3)", "",
             f"{result['date']}; {result['machine']}; {result['versions']}", "",
             f"Command: `{result['command']}`", ""]
    if "time" in result:
        t = result["time"]
        lines += [f"Wall {t['wall_s']} s, CPU {t['cpu_s']} s (user + system, the job and its K-fold workers; "
                  f"`/usr/bin/time -v`, 2 cores; the load is in the command line), largest process {t['max_rss_gb_largest_process']} "
                  f"GB, exit {t['exit_status']}.", ""]
    lines += [f"{w['units']} units (held-out models). Leader **{w['leader']}**, ahead of {w['runner_up']} by "
              f"{w['lead_elpd']} elpd = **{w['lead_in_dse']} dse** (dse {w['dse']}).", "",
              "| spec | elpd | stacking (bayesirt) | stacking (ArviZ, same elpd shifted per unit) | stacking (ArviZ, "
              "unshifted) | pseudo-BMA+ (bayesirt) | BB-pseudo-BMA (ArviZ) | weight in compare.csv | method |",
              "|---|---|---|---|---|---|---|---|---|"]
    for spec, r in w["specs"].items():
        lines.append(f"| {spec} | {r['elpd']} | {r['stacking_bayesirt']} | {r['stacking_arviz_same_elpd_shifted']} | "
                     f"{r['stacking_arviz_unshifted']} | {r['pseudo_bma_plus_bayesirt']} | {r['bb_pseudo_bma_arviz']} | "
                     f"{r['compare_csv_weight']} | {r['compare_csv_method']} |")
    lines += ["", f"Largest difference from ArviZ: stacking {w['max_abs_stacking_diff_vs_arviz']:.1e}, pseudo-BMA+ "
              f"{w['max_abs_pseudo_bma_plus_diff_vs_arviz']:.1e} (Monte Carlo: different bootstrap draws).", "",
              "Stacking weights: the mixture of the specs that predicts the held-out models best. Pseudo-BMA+: "
              "exp(elpd) normalized, averaged over Bayesian-bootstrap replicates of the units (about the chance "
              "that a spec has the highest elpd).", ""]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="output folder of a bayesirt compare run")
    parser.add_argument("--time-log", type=Path, help="/usr/bin/time -v output of the run")
    parser.add_argument("--command", default="bayesirt compare simulated_3pl_755x1351.csv --specs rasch,2pl,3pl "
                                               "(benchmarks/compare_leaderboard.py's simulated_csv, seed 32)")
    args = parser.parse_args()
    result = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
              "versions": versions(["bayesirt", "arviz", "arviz_stats", "numpy"]), "command": args.command,
              "weights": weights(args.out)}
    if args.time_log:
        result["time"] = time_log(args.time_log)
    write_results(OUT, result, markdown, echo=True)


if __name__ == "__main__":
    main()
