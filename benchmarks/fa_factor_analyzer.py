"""Side-by-side benchmark: bayesirt's exploratory factor analysis vs the PyPI package ``factor_analyzer``.

One process, one simulated correlation matrix per case, given to both tools:

  * ``bayesirt``        -- ``bayesirt.structure.factor.factor_analysis(r, k, correlation=True, n_obs=n)``:
                           minres (ULS) by L-BFGS-B with the analytic gradient, oblimin (gamma 0)
                           by gradient projection (``bayesirt.models.rotation``), fit indices; BLAS limited
                           to one thread (bayesirt's default).
  * ``factor_analyzer`` -- ``FactorAnalyzer(n_factors=k, method="minres", rotation="oblimin",
                           is_corr_matrix=True).fit(r)`` as shipped (0.5.1: L-BFGS-B on the same
                           objective with a finite-difference gradient and scipy's default
                           tolerances, GPA oblimin with tol 1e-5); NumPy's default BLAS threads.
                           One compatibility repair, the same as ``tests/test_factor.py``'s oracle:
                           factor_analyzer 0.5.1 calls scikit-learn's ``check_array(force_all_finite=...)``,
                           a keyword renamed ``ensure_all_finite`` in scikit-learn 1.8, so the call is
                           routed to the new name. Nothing else is changed (tolerances as shipped).

Data: ``n`` observations of ``p`` variables with ``k`` correlated factors (factor correlations 0.3),
each variable loading on one factor (U(0.45, 0.8)), every fifth also on a second one (U(0.15, 0.3)),
unit variances; the correlation matrix of the simulated data is the input of both tools.

Reported per case: median wall and CPU seconds over the repeats (run round-robin, after one
untimed warm-up of each), factor_analyzer s / bayesirt s, max |loading difference| after aligning
factor_analyzer's factors to bayesirt's (permutation and reflection, ``align_loadings``), the
max |factor correlation difference|, each solution's ULS objective (sum of squared off-diagonal
residuals of R - L Phi L' / 2), and Tucker congruence of each solution with the true loadings.

Usage::

    python benchmarks/fa_factor_analyzer.py            # 5,000 x 60 (3 factors), 20,000 x 120 (8 factors); ~4 min
    python benchmarks/fa_factor_analyzer.py --quick    # 2,000 x 30 (3), 5,000 x 60 (3); 2 repeats; ~15 s
    python benchmarks/fa_factor_analyzer.py --cases 20000x200x8 --repeats 1   # the peer takes ~3 min per fit here

Writes ``--out`` (JSON, with ``benchmark_rows`` for BENCHMARKS.md) and the same stem with ``.md``.
A failing run (factor_analyzer missing, a fit raising) is reported, never dropped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

from _common import benchmark_row, source_state, versions, write_results  # noqa: E402 (benchmarks/ is on sys.path when run as a script)

PACKAGES = ("bayesirt", "factor-analyzer", "numpy", "scipy", "scikit-learn", "threadpoolctl")
SEED = 20261130
DEFAULT_CASES = ("5000x60x3", "20000x120x8")
QUICK_CASES = ("2000x30x3", "5000x60x3")
PHI_OFF = 0.3


# --------------------------------------------------------------------------------------- helpers
def _cpu() -> float:
    import resource

    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]


def parse_case(text: str) -> tuple[int, int, int]:
    n, p, k = (int(v) for v in text.lower().split("x"))
    return n, p, k


def simulate(n: int, p: int, k: int, seed: int):
    """(correlation matrix, true pattern loadings (p, k), true phi (k, k)) of simulated data."""
    rng = np.random.default_rng(seed)
    loadings = np.zeros((p, k))
    primary = np.arange(p) % k
    loadings[np.arange(p), primary] = rng.uniform(0.45, 0.8, p)
    if k > 1:
        cross = np.arange(0, p, 5)
        loadings[cross, (primary[cross] + 1) % k] = rng.uniform(0.15, 0.3, cross.size)
    phi = np.full((k, k), PHI_OFF)
    np.fill_diagonal(phi, 1.0)
    common = np.sum((loadings @ phi) * loadings, axis=1)
    if common.max() >= 1:
        raise ValueError("simulated communalities must stay below 1")
    scores = rng.multivariate_normal(np.zeros(k), phi, size=n)
    data = scores @ loadings.T + rng.standard_normal((n, p)) * np.sqrt(1.0 - common)
    r = np.corrcoef(data, rowvar=False)
    return (r + r.T) / 2, loadings, phi


def _factor_analyzer():
    """factor_analyzer with scikit-learn's renamed ``check_array`` keyword routed (see the module doc)."""
    import factor_analyzer
    import sklearn.utils

    def check_array(*args, force_all_finite=None, **kwargs):
        return sklearn.utils.check_array(*args, **kwargs, ensure_all_finite=force_all_finite)

    factor_analyzer.factor_analyzer.check_array = check_array  # this process only; the package is not edited
    return factor_analyzer


def fit_bayesirt(r, k, n):
    from bayesirt.structure.factor import factor_analysis

    sol = factor_analysis(r, k, correlation=True, n_obs=n, rotation="oblimin")
    return {"loadings": sol.loadings, "phi": sol.phi, "converged": bool(sol.converged), "heywood": bool(sol.heywood)}


def fit_factor_analyzer(r, k, n):
    fa = _factor_analyzer()
    model = fa.FactorAnalyzer(n_factors=k, method="minres", rotation="oblimin", is_corr_matrix=True).fit(r.copy())
    loadings = np.asarray(model.loadings_, float)
    # factor_analyzer sorts the loading (and structure) columns by variance after rotating but leaves
    # phi_ in the rotation's order; with structure = loadings @ phi, the factor correlations in the
    # order of the returned loadings are recovered exactly from the two returned matrices.
    phi = np.linalg.lstsq(loadings, np.asarray(model.structure_, float), rcond=None)[0] if k > 1 else np.eye(1)
    phi = (phi + phi.T) / 2
    # Heywood: a uniqueness 1 - diag(L Phi L') at the 0.005 bound both tools use (factor_analyzer's own
    # get_uniquenesses() sums squared pattern loadings, which ignores Phi after an oblique rotation)
    return {"loadings": loadings, "phi": phi, "converged": None,
            "heywood": bool(np.any(1.0 - np.sum((loadings @ phi) * loadings, axis=1) <= 0.005 + 1e-8))}


def uls_objective(r, loadings, phi) -> float:
    """Half the sum of squared off-diagonal residuals of R - L Phi L' (minres' criterion)."""
    res = r - loadings @ phi @ loadings.T
    np.fill_diagonal(res, 0.0)
    return 0.5 * float(np.sum(res ** 2))


def run_rows(specs: dict, repeats: int) -> dict:
    """Round-robin timing: one untimed warm-up of each, then ``repeats`` rounds of every row."""
    acc = {name: {"walls": [], "cpus": [], "warnings": set(), "result": None, "error": None} for name in specs}
    for rep in range(-1, repeats):
        for name, fn in specs.items():
            a = acc[name]
            if a["error"]:
                continue
            try:
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    t0, c0 = time.perf_counter(), _cpu()
                    out = fn()
                    wall, cpu = time.perf_counter() - t0, _cpu() - c0
                a["warnings"] |= {f"{x.category.__name__}: {str(x.message)[:200]}" for x in w}
                a["result"] = out
                if rep >= 0:
                    a["walls"].append(wall)
                    a["cpus"].append(cpu)
                print(f"    {name} [{'warm-up' if rep < 0 else f'{rep + 1}/{repeats}'}]: wall {wall:.3f} s, CPU {cpu:.3f} s",
                      flush=True)
            except Exception as e:  # noqa: BLE001 -- a failing run is reported, never dropped
                traceback.print_exc()
                a["error"] = _err(e)
    rows = {}
    for name, a in acc.items():
        if a["error"] and not a["walls"]:
            rows[name] = {"status": "failed", "error": a["error"]}
            continue
        rows[name] = {"status": "ok", "wall_s": float(statistics.median(a["walls"])),
                      "cpu_s": float(statistics.median(a["cpus"])), "wall_s_all": a["walls"], "cpu_s_all": a["cpus"],
                      "repeats": len(a["walls"]), "warnings": sorted(a["warnings"]), "_result": a["result"]}
        if a["error"]:
            rows[name]["later_repeat_error"] = a["error"]
    return rows


def run_case(case: str, repeats: int, seed: int) -> dict:
    from bayesirt.models.rotation import align_loadings, align_phi, tucker_congruence

    n, p, k = parse_case(case)
    print(f"=== case {n:,} x {p}, {k} factors", flush=True)
    r, true_l, true_phi = simulate(n, p, k, seed)
    out = {"n_obs": n, "variables": p, "factors": k, "repeats": repeats, "seed": seed,
           "loadavg_before": [round(x, 2) for x in os.getloadavg()]}
    rows = run_rows({"bayesirt": lambda: fit_bayesirt(r, k, n), "factor_analyzer": lambda: fit_factor_analyzer(r, k, n)},
                    repeats)
    out["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    bay = rows["bayesirt"].get("_result")
    for name, row in rows.items():
        res = row.pop("_result", None)
        if res is None:
            continue
        row["converged"], row["heywood"] = res["converged"], res["heywood"]
        row["uls_objective"] = uls_objective(r, res["loadings"], res["phi"])
        aligned, perm, signs, cong = align_loadings(res["loadings"], true_l)
        row["congruence_truth"] = [float(c) for c in cong]
        row["min_congruence_truth"] = float(np.min(cong))
        row["max_abs_loading_error_truth"] = float(np.max(np.abs(aligned - true_l)))
        row["max_abs_phi_error_truth"] = float(np.max(np.abs(align_phi(res["phi"], perm, signs) - true_phi)))
        if name != "bayesirt" and bay is not None:
            al, perm_b, signs_b, _ = align_loadings(res["loadings"], bay["loadings"])
            row["max_abs_loading_diff_vs_bayesirt"] = float(np.max(np.abs(al - bay["loadings"])))
            row["min_congruence_vs_bayesirt"] = float(np.min(tucker_congruence(al, bay["loadings"])))
            row["max_abs_phi_diff_vs_bayesirt"] = float(np.max(np.abs(align_phi(res["phi"], perm_b, signs_b) - bay["phi"])))
            row["uls_objective_diff_vs_bayesirt"] = row["uls_objective"] - uls_objective(r, bay["loadings"], bay["phi"])
    if "bayesirt" in rows and rows["bayesirt"].get("status") == "ok":
        for name, row in rows.items():
            if name != "bayesirt" and row.get("status") == "ok":
                row["ratio_wall"] = row["wall_s"] / rows["bayesirt"]["wall_s"]
                row["ratio_cpu"] = row["cpu_s"] / rows["bayesirt"]["cpu_s"]
    out["rows"] = rows
    return out


# ------------------------------------------------------------------------------------- reporting
def _f(x, fmt="{:.3f}"):
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "—"
    return fmt.format(x)


def _machine(result: dict) -> str:
    m = result["machine"]
    return f"{m['platform']}, {m['cpu_count']} CPUs, Python {result['versions']['python']}"


def benchmark_rows(result: dict) -> list[dict]:
    """BENCHMARKS.md rows of this benchmark: one per case, ratio = factor_analyzer s / bayesirt s."""
    fa_version = result["versions"].get("factor-analyzer", "?")
    rows = []
    for case, c in result["cases"].items():
        size = (f"{c['n_obs']:,} x {c['variables']} data -> {c['variables']} x {c['variables']} correlation matrix, "
                f"{c['factors']} factors" if "n_obs" in c else case)
        common = dict(task="Exploratory factor analysis: minres + oblimin", data_size=size,
                      peer=f"factor_analyzer {fa_version} (FactorAnalyzer minres + oblimin, as shipped)",
                      target="none set (ratio reported)", target_met=None, command=result["command"],
                      date=result["date"], machine_description=_machine(result))
        if "rows" not in c:
            rows.append(benchmark_row(bayesirt="—", peer_figure="—", ratio=None, ratio_meaning="factor_analyzer s / bayesirt s",
                                      quality="—", status=f"failed: {c.get('error', '?')}", **common))
            continue
        b, f = c["rows"].get("bayesirt", {}), c["rows"].get("factor_analyzer", {})
        bay_txt = (f"{b['wall_s']:.3f} s (CPU {b['cpu_s']:.3f} s; median of {b['repeats']})" if b.get("status") == "ok"
                   else f"failed: {b.get('error', '?')}")
        peer_txt = (f"{f['wall_s']:.3f} s (CPU {f['cpu_s']:.3f} s; median of {f['repeats']})" if f.get("status") == "ok"
                    else "—")
        status = "ok"
        if f.get("status") != "ok":
            status = f"peer failed: {f.get('error', '?')}"
        elif b.get("status") != "ok":
            status = f"bayesirt failed: {b.get('error', '?')}"
        quality = "—"
        if b.get("status") == "ok" and f.get("status") == "ok":
            quality = (f"vs peer: max abs Δ loading {f['max_abs_loading_diff_vs_bayesirt']:.1e}, "
                       f"max abs Δ phi {f['max_abs_phi_diff_vs_bayesirt']:.1e}; "
                       f"vs truth: min Tucker congruence bayesirt {b['min_congruence_truth']:.4f}, "
                       f"peer {f['min_congruence_truth']:.4f}")
        elif b.get("status") == "ok":
            quality = f"vs truth: min Tucker congruence bayesirt {b['min_congruence_truth']:.4f}"
        cpu = f"; by CPU time {f['ratio_cpu']:.1f}x" if f.get("ratio_cpu") else ""
        rows.append(benchmark_row(bayesirt=bay_txt, peer_figure=peer_txt, ratio=f.get("ratio_wall"),
                                  ratio_meaning="factor_analyzer s / bayesirt s (wall)" + cpu, quality=quality,
                                  status=status, **common))
    return rows


def markdown(result: dict) -> str:
    v = result["versions"]
    lines = [f"# Factor analysis benchmark: bayesirt vs factor_analyzer {v.get('factor-analyzer')}", "",
             f"{result['machine']['platform']}, {result['machine']['cpu_count']} CPUs; {result['date']}; "
             + ", ".join(f"{k} {val}" for k, val in v.items()) + f". Total wall time {result['total_wall_s']:.0f} s. "
             "Timings are only comparable on an otherwise idle machine.", "",
             "Both tools get the same correlation matrix of simulated data (k correlated factors, phi = 0.3, "
             "simple structure with cross-loadings on every fifth variable). bayesirt: "
             "`factor_analysis(r, k, correlation=True, n_obs=n)` (minres with the analytic gradient, oblimin by "
             "GPA, fit indices; BLAS 1 thread). factor_analyzer: `FactorAnalyzer(n_factors=k, method='minres', "
             "rotation='oblimin', is_corr_matrix=True).fit(r)` as shipped (finite-difference gradient, scipy's "
             "default L-BFGS-B tolerances, GPA tol 1e-5; default BLAS threads), with scikit-learn's renamed "
             "`check_array` keyword routed. Median over the repeats, run round-robin after one warm-up each. "
             f"Command: `{result['command']}`.", "",
             "| data | factors | run | wall s | CPU s | factor_analyzer / bayesirt wall | max abs Δ loading vs bayesirt "
             "| max abs Δ phi vs bayesirt | ULS objective | Δ ULS objective vs bayesirt | min congruence with truth | max abs loading error "
             "| max abs phi error | Heywood |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for case, c in result["cases"].items():
        if "rows" not in c:
            lines.append(f"| {case} | | FAILED: {c.get('error', '?')} |" + " |" * 11)
            continue
        for name, r in c["rows"].items():
            data = f"{c['n_obs']:,} x {c['variables']}"
            if r.get("status") != "ok":
                lines.append(f"| {data} | {c['factors']} | {name} | FAILED: {r.get('error', '?')} |" + " |" * 10)
                continue
            lines.append(
                f"| {data} | {c['factors']} | {name} | {_f(r['wall_s'])} | {_f(r['cpu_s'])} "
                f"| {_f(r.get('ratio_wall'), '{:.1f}x')} | {_f(r.get('max_abs_loading_diff_vs_bayesirt'), '{:.1e}')} "
                f"| {_f(r.get('max_abs_phi_diff_vs_bayesirt'), '{:.1e}')} | {_f(r.get('uls_objective'), '{:.8f}')} | {_f(r.get('uls_objective_diff_vs_bayesirt'), '{:+.1e}')} | {_f(r['min_congruence_truth'], '{:.4f}')} "
                f"| {_f(r['max_abs_loading_error_truth'])} | {_f(r['max_abs_phi_error_truth'])} | {'yes' if r['heywood'] else 'no'} |")
    lines += ["", "Ratio > 1: bayesirt is faster. Loadings are compared after aligning factor_analyzer's factors to "
              "bayesirt's (permutation and reflection maximizing Tucker congruence); congruence and errors against the "
              "truth after aligning each solution to the true pattern loadings. ULS objective = half the sum of squared "
              "off-diagonal residuals of R - L Phi L' (minres' criterion; lower is better; rotation leaves it unchanged). "
              "factor_analyzer sorts its loading and structure columns by variance after rotating but returns `phi_` in "
              "the unsorted order, so its Phi is taken as the exact solution of structure = loadings Phi from the two "
              "sorted matrices it returns.", ""]
    lines += ["1-minute load average before / after each case (timings on a busy machine are inflated, wall more than "
              "CPU): " + "; ".join(f"{case}: {c.get('loadavg_before')} / {c.get('loadavg_after')}"
                                   for case, c in result["cases"].items()) + f" ({result['machine']['cpu_count']} CPUs).", ""]
    warn = {f"{case} {name}": r["warnings"] for case, c in result["cases"].items() for name, r in c.get("rows", {}).items()
            if r.get("warnings")}
    if warn:
        lines += ["Warnings raised: " + "; ".join(f"{n}: {' | '.join(w)[:300]}" for n, w in warn.items()), ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ main
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", nargs="*", default=None, help="NxPxK, e.g. 5000x60x3 (default: 5000x60x3 20000x120x8)")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats per row (median)")
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--quick", action="store_true", help="2,000 x 30 and 5,000 x 60 (3 factors), 2 repeats")
    p.add_argument("--out", type=Path, default=None,
                   help="results JSON (default benchmarks/results/factor_analyzer.json, or factor_analyzer_quick.json with --quick)")
    p.add_argument("--render", action="store_true", help="only re-render the Markdown from an existing --out JSON")
    args = p.parse_args(argv)
    if args.out is None:
        args.out = Path(__file__).parent / "results" / ("factor_analyzer_quick.json" if args.quick else "factor_analyzer.json")
    if args.render:
        result = json.loads(args.out.read_text())
        result["benchmark_rows"] = benchmark_rows(result)
        write_results(args.out, result, markdown, echo=True)
        return 0
    if args.cases is None:
        args.cases = list(QUICK_CASES if args.quick else DEFAULT_CASES)
    if args.quick:
        args.repeats = min(args.repeats, 2)

    t_start = time.perf_counter()
    source = source_state()
    cases = {}
    for i, case in enumerate(args.cases):
        try:
            cases[case] = run_case(case, args.repeats, args.seed + i)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            cases[case] = {"status": "failed", "error": _err(e)}
    result = {
        "config": {"cases": args.cases, "repeats": args.repeats, "seed": args.seed, "quick": args.quick},
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "processor": platform.processor()},
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": versions(PACKAGES),
        "bayesirt_source": source,
        "cases": cases,
        "total_wall_s": time.perf_counter() - t_start,
    }
    result["benchmark_rows"] = benchmark_rows(result)
    write_results(args.out, result, markdown, echo=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
