"""`bayesirt compare` at leaderboard size (issue 32): 755 models x 1,351 items x rasch, 2pl, 3pl.

    .venv/bin/python benchmarks/compare_leaderboard.py [--data FILE] [--parts cli,stages[,kfold]]

Data: ``--data``, a models-by-items response file (the issue's MMLU-Pro math matrix of 755
fine-tuned 8B models, when you have it); by default a seeded simulated 3PL matrix of that shape
(abilities N(0, 0.8), discrimination LogNormal(0, 0.5), difficulty N(0, 1), guessing Beta(2, 18):
ten-option items), written to a temporary CSV.

Parts (each appends to ``benchmarks/results/compare_leaderboard.{json,md}`` when it ends, with the
1-minute load average before and after, since the machine is shared):

- ``cli``: the command a user runs, ``bayesirt compare FILE --specs rasch,2pl,3pl`` at its defaults
  (issue 42: the fit method chosen by size, ``--nuts-max-cells``; ``--kfold auto``: leave-one-model-out
  PSIS, then exact 5-fold by model if Pareto k flags more than 5% of the models), in a child
  process: wall and CPU time, peak memory (max RSS of the child and its workers), the method chosen
  and why, the table (elpd, differences and their dse, the weight column and both model weights:
  stacking and pseudo-BMA+), whether a spec leading by more than 4 dse got a weight of at least .9 (by
  each weight), and the stage lines (stderr), which time each phase.
- ``cli_advi``: the same with ``--method advi`` (the method the size rule picks here; the earlier runs).
- ``stages``: the same work piece by piece, per spec: ADVI fit, the marginal likelihood of every
  held-out model over the posterior draws (shared grid), PSIS; the old adaptive Gauss-Hermite
  path (21 nodes) timed on a few draws and its largest difference from the grid there.
- ``kfold`` (not by default): ``--kfold always``, for data where ``auto`` keeps PSIS.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, versions, write_results  # noqa: E402

from bayesirt.comparison.loo import _item_draws, _psis, _relative_efficiency, marginal_log_likelihood  # noqa: E402
from bayesirt.comparison.marginal import pattern_log_marginal, quadrature_rule  # noqa: E402
from bayesirt.data import load  # noqa: E402
from bayesirt.data.datasets.simulate import simulate_pl  # noqa: E402
from bayesirt.data.responses import MISSING  # noqa: E402
from bayesirt.inference.fitting import fit  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "compare_leaderboard.json"
SPECS = ("rasch", "2pl", "3pl")
OLD_PATH_DRAWS = 3


def simulated_csv(folder: Path) -> Path:
    rng = np.random.default_rng(32)
    n_models, n_items = 755, 1351
    ds, _ = simulate_pl("3pl", n_items=n_items, n_models=n_models, seed=32,
                        theta=rng.normal(0, 0.8, n_models), guessing=rng.beta(2, 18, n_items))
    frame = pd.DataFrame(ds["responses"].values.T, index=[f"org{i % 40}/ft-{i}" for i in range(n_models)],
                         columns=[f"q{j}" for j in range(n_items)]).rename_axis("model")
    path = folder / "simulated_3pl_755x1351.csv"
    frame.to_csv(path)
    return path


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _tree_rss(pid: int) -> int:
    """Resident memory of a process and all its descendants, in bytes (0 once it has ended)."""
    try:
        proc = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
    except psutil.Error:
        return 0


def run_cli(data: Path, out: Path, extra: list[str]) -> dict:
    """One ``bayesirt compare`` in a child process: wall seconds, child max RSS, stage lines."""
    command = [sys.executable, "-m", "bayesirt", "compare", str(data), "--specs", ",".join(SPECS),
               "--out", str(out), "--force", *extra]
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0, t0 = _load(), time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, text=True,
                                 env=os.environ | {"PYTHONPATH": str(ROOT)})
        peak, loads = 0, []
        while child.poll() is None:  # memory of the job and its K-fold workers together, every 2 s
            peak = max(peak, _tree_rss(child.pid))
            loads.append(_load())
            time.sleep(2)
        wall = time.perf_counter() - t0
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        err.seek(0)
        stderr = err.read()
    stages = [line for line in re.split(r"[\r\n]", stderr) if line.startswith(("compare: ", "bayesirt: refit"))]
    result = {"command": " ".join(["bayesirt", *command[3:]]), "returncode": child.returncode, "wall_s": round(wall, 1),
              "cpu_s": round(usage.ru_utime + usage.ru_stime - usage0.ru_utime - usage0.ru_stime, 1),
              "peak_rss_gb_job_and_workers": round(peak / 2**30, 2), "load_1min_before": load0,
              "load_1min_mean_during": round(float(np.mean(loads)), 2) if loads else None,
              "load_1min_after": _load(), "stage_lines": stages}
    if child.returncode == 0:
        table = pd.read_csv(out / "compare.csv").round(2)
        result["table"] = table.astype(object).where(table.notna(), None).to_dict(orient="records")  # NaN: null
        summary = json.loads((out / "summary.json").read_text())
        result["fit_method"] = summary.get("fit_method")
        result["leader_check"] = leader_check(table)
    else:
        result["stderr_tail"] = stderr[-2000:]
    return result


def leader_check(table: pd.DataFrame) -> dict:
    """The issue's acceptance: a spec leading the next best by more than 4 dse gets a weight >= .9, for the
    weight column (``--weights``, stacking by default) and each of the two weights."""
    ranked = table.sort_values("rank")
    best, second = ranked.iloc[0], ranked.iloc[1]
    ratio = abs(float(second["elpd_diff"])) / float(second["dse"]) if second["dse"] > 0 else float("inf")
    weights = {c: round(float(best[c]), 3) for c in ("weight", "stacking_weight", "pseudo_bma_plus_weight") if c in best}
    return {"best": best["spec"], "lead_over_second": round(-float(second["elpd_diff"]), 1),
            "dse": round(float(second["dse"]), 1), "lead_in_dse": round(ratio, 2),
            "best_weight": weights["weight"], "best_weights": weights,
            "passes": bool(ratio <= 4 or weights["weight"] >= 0.9),
            "passes_by": {c: bool(ratio <= 4 or w >= 0.9) for c, w in weights.items()}}


def stages(data: Path) -> dict:
    """Per spec: fit, marginal likelihood (grid), PSIS; the old path on a few draws."""
    responses = load(data)
    y = responses["responses"].values.T
    observed, correct = y != MISSING, (y == 1).astype(float)
    out = {"load_1min_before": _load()}
    for spec in SPECS:
        row = {}
        t0 = time.perf_counter()
        tree = fit(responses, spec, method="advi", progress=False)
        row["fit_s"] = round(time.perf_counter() - t0, 1)
        t0, c0 = time.perf_counter(), time.process_time()
        ll = marginal_log_likelihood(tree, progress=False)
        row["marginal_s"], row["marginal_cpu_s"] = round(time.perf_counter() - t0, 1), round(time.process_time() - c0, 1)
        row["draws"] = int(ll.sizes["chain"] * ll.sizes["draw"])
        row["adaptive_fallback_evaluations"] = int(ll.attrs["adaptive_fallback_evaluations"])
        t0 = time.perf_counter()
        result = _psis(ll, _relative_efficiency(tree))
        row["psis_s"] = round(time.perf_counter() - t0, 2)
        row["elpd"], row["se"] = round(result.elpd, 2), round(result.se, 2)
        row["bad_k"] = int((result.pareto_k > result.good_k).sum())
        draws = _item_draws(tree)[:OLD_PATH_DRAWS]
        t0 = time.perf_counter()
        old = np.stack([pattern_log_marginal(correct, observed, d, quadrature_rule(1)) for d in draws])
        row["old_path_s_per_draw"] = round((time.perf_counter() - t0) / len(draws), 3)
        row["old_path_projected_s"] = round(row["old_path_s_per_draw"] * row["draws"], 0)
        grid = ll.values.reshape(row["draws"], -1)[:OLD_PATH_DRAWS]
        row["max_abs_grid_minus_old"] = float(np.abs(grid - old).max())
        out[spec] = row
        print(spec, row, flush=True)
    out["load_1min_after"] = _load()
    out["max_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    return out


def markdown(result: dict) -> str:
    lines = [f"# `bayesirt compare` at leaderboard size (issue 32)", "",
             f"{result['date']}; {result['machine']}; {result['versions']}", "",
             f"Data: {result['data']}", "",
             "Command: `.venv/bin/python benchmarks/compare_leaderboard.py` (load averages are the machine's "
             "1-minute load, 2 cores shared with other jobs).", ""]
    for part, title in (("cli", "End to end, the defaults (method by size, --kfold auto)"),
                        ("cli_advi", "End to end, --method advi (--kfold auto)"),
                        ("cli_second_run", "Second run of --method advi"),
                        ("cli_earlier_run", "First run of --method advi"),
                        ("kfold", "End to end, --kfold always")):
        if part in result:
            r = result[part]
            lines += [f"## {title}", "", f"`{r['command']}`", "",
                      f"Wall {r['wall_s']} s, CPU {r.get('cpu_s', r.get('cpu_s_lower_bound_polled'))} s (job and "
                      f"workers; on 2 idle cores the wall time would be at least half of it); peak memory {r['peak_rss_gb_job_and_workers']} GB (resident, job and "
                      f"workers together, sampled every 2 s); 1-minute load {r['load_1min_before']} before, "
                      f"{r['load_1min_mean_during']} mean during, {r['load_1min_after']} after; exit {r['returncode']}.", ""]
            if r.get("fit_method"):
                lines += [f"Fit method chosen: {r['fit_method']['reason']}.", ""]
            if r.get("leader_check"):
                c = r["leader_check"]
                by = c.get("passes_by", {"weight": c["passes"]})
                shown = c.get("best_weights", {"weight": c["best_weight"]})
                lines += [f"Leader {c['best']}: ahead by {c['lead_over_second']} elpd, {c['lead_in_dse']} dse "
                          f"(dse {c['dse']}); weight >= .9 when the lead exceeds 4 dse: "
                          + "; ".join(f"{name} {w}: {'yes' if by[name] else 'NO'}" for name, w in shown.items())
                          + ".", ""]
            if r.get("table"):
                table = pd.DataFrame(r["table"])
                cols = [c for c in ("spec", "rank", "elpd", "se", "elpd_diff", "dse", "weight", "stacking_weight",
                                    "pseudo_bma_plus_weight", "method", "bad_k")
                        if c in table]
                lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols),
                          *("| " + " | ".join(str(v) for v in row) + " |" for row in table[cols].itertuples(index=False)),
                          ""]
            lines += ["```", *r["stage_lines"], "```", ""]
    if "stages" in result:
        s = result["stages"]
        lines += ["## Stages per spec", "", f"Load {s['load_1min_before']} -> {s['load_1min_after']}; max RSS "
                  f"{s['max_rss_gb']} GB.", "",
                  "| spec | fit s | marginal s (CPU s) | PSIS s | draws | elpd (SE) | bad k | old path s/draw "
                  "(projected s) | max abs(grid - old) |", "|---|---|---|---|---|---|---|---|---|"]
        for spec in SPECS:
            r = s[spec]
            lines.append(f"| {spec} | {r['fit_s']} | {r['marginal_s']} ({r['marginal_cpu_s']}) | {r['psis_s']} | "
                         f"{r['draws']} | {r['elpd']} ({r['se']}) | {r['bad_k']} | {r['old_path_s_per_draw']} "
                         f"({r['old_path_projected_s']:.0f}) | {r['max_abs_grid_minus_old']:.1e} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="models-by-items file [a simulated 755 x 1,351 3PL matrix]")
    parser.add_argument("--parts", default="cli,stages", help="comma-separated: cli, cli_advi, stages, kfold")
    parser.add_argument("--fresh", action="store_true", help="drop the results of parts not run now")
    args = parser.parse_args()
    parts = args.parts.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = args.data or simulated_csv(tmp)
        previous = json.loads(OUT.read_text()) if OUT.exists() and not args.fresh else {}
        result = {**previous, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
                  "versions": versions(["bayesirt", "pymc", "arviz", "numpy"]),
                  "data": str(args.data) if args.data else "simulated 3PL, 755 x 1,351, seed 32 (see the script)"}
        if "cli" in parts:
            result["cli"] = run_cli(data, tmp / "default", [])
            write_results(OUT, result, markdown)
        if "cli_advi" in parts:
            result["cli_advi"] = run_cli(data, tmp / "advi", ["--method", "advi"])
            write_results(OUT, result, markdown)
        if "stages" in parts:
            result["stages"] = stages(data)
            write_results(OUT, result, markdown)
        if "kfold" in parts:
            result["kfold"] = run_cli(data, tmp / "kfold", ["--method", "advi", "--kfold", "always"])
            write_results(OUT, result, markdown)
    print(markdown(result))


if __name__ == "__main__":
    main()
