"""Side-by-side benchmark: bayesirt's multidimensional MML (``fit_mml_mirt``, SAFE App. C) vs the
PyPI package ``mirt`` (1.2.0, the ``bench`` extra) on simulated D = 2 and D = 3 data.

What ``mirt`` 1.2.0 fits (read from its source, ``help(mirt.fit_mirt)``): ``fit_mirt(y, "2PL",
n_factors=D)`` is an exploratory compensatory 2PL, ``P = sigmoid(sum_k a_k theta_k - (sum_k a_k) b)``
with ``theta ~ N(0, I)`` on a full ``n_quadpts^D`` Gauss-Hermite product grid (no pruning), fitted by
EM; every slope is boxed to [0.1, 5] and every difficulty to [-6, 6] (``mirt.estimation.base.
_ITEM_PARAMETER_BOUNDS``), and no rotational constraint is imposed. So it fits the same model only
when some rotation of the ML solution has every slope in [0.1, 5]: the simulated loadings are
therefore all positive (main loading U(1.0, 2.0), others U(0.3, 0.6)). Its intercept is
``d = -(sum_k a_k) b``. It stops when the absolute log-likelihood change is below ``tol``.

Cases: ``d2`` (20 items x 1,000 models, D = 2, 31 nodes per dimension) and ``d3`` (24 items x
1,000 models, D = 3, 15 nodes per dimension): bayesirt's (and R mirt's) per-D defaults.

Rows per case
  * ``bayesirt``           -- ``fit_mml_mirt(ds, D)`` as shipped: pruned grid (weight >= 1e-6 x max),
                              tol 1e-4 / ll_tol 1e-9, SQUAREM, 1 BLAS thread.
  * ``bayesirt full grid`` -- ``prune=0`` (mirt's grid), tol 1e-7 / ll_tol 1e-12.
  * ``mirt``               -- ``mirt.fit_mirt(y, "2PL", n_factors=D, n_quadpts=q, tol=1e-6,
                              max_iter=2000, compute_standard_errors=False)``, default threads.

Every estimate is re-scored by one common evaluator (NumPy: the full, unpruned probabilists'
Gauss-Hermite product grid with 61 nodes per dimension for D = 2 and 31 for D = 3, independent of
both tools) at the parameters each tool returns, and at the truth. Parameters are compared up to
rotation: mirt's slopes are rotated onto bayesirt's by orthogonal Procrustes (theta ~ N(0, I) in
both, so only orthogonal rotations leave the likelihood unchanged) and both are compared with the
truth the same way; the oblimin-rotated loadings are matched by Tucker congruence (the figure SAFE
App. C quotes: "loading congruence 1.000"). Intercepts are rotation invariant.

Usage::

    python benchmarks/mml_mirt_multidim.py            # both cases (a few minutes on 2 cores)
    python benchmarks/mml_mirt_multidim.py --quick    # 500 models, D = 2 only

Writes ``--out`` (JSON) and the same stem with ``.md`` and prints the Markdown. A failing run
(including mirt missing) is reported, never dropped.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.linalg import orthogonal_procrustes
from scipy.special import log_expit, logsumexp

from _common import benchmark_row, machine, versions, write_results  # noqa: E402 (benchmarks/ is on sys.path)

PACKAGES = ("bayesirt", "mirt", "numpy", "scipy")
CASES = {"d2": {"dims": 2, "items": 20, "quadrature": 31, "evaluator": 61},
         "d3": {"dims": 3, "items": 24, "quadrature": 15, "evaluator": 31}}


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def simulate(dims: int, items: int, models: int, seed: int):
    """All-positive loadings (one main factor per item), intercepts N(0, 1), theta ~ N(0, I)."""
    from bayesirt.data import make_responses

    rng = np.random.default_rng(seed)
    a = rng.uniform(0.3, 0.6, (items, dims))
    a[np.arange(items), np.arange(items) % dims] = rng.uniform(1.0, 2.0, items)
    d = rng.normal(0, 1, items)
    theta = rng.normal(size=(models, dims))
    y = (rng.uniform(size=(items, models)) < 1 / (1 + np.exp(-(a @ theta.T + d[:, None])))).astype(float)
    return make_responses(y, drop_empty=True), a, d


def common_loglik(y: np.ndarray, a: np.ndarray, d: np.ndarray, nodes_per_dim: int) -> float:
    """Marginal log-likelihood on the full Gauss-Hermite product grid (y: items x models, 0/1)."""
    x, w = hermegauss(nodes_per_dim)
    w = w / w.sum()
    dims = a.shape[1]
    grid = np.stack([g.ravel() for g in np.meshgrid(*([x] * dims), indexing="ij")], axis=1)
    logw = sum(np.log(g.ravel()) for g in np.meshgrid(*([w] * dims), indexing="ij"))
    eta = a @ grid.T + d[:, None]
    y1 = (y == 1).astype(float)
    ll = y1.T @ (log_expit(eta) - log_expit(-eta)) + (log_expit(-eta).sum(0) + logw)
    return float(logsumexp(ll, axis=1).sum())


def fit_bayesirt(ds, dims, **options):
    from bayesirt.frequentist import fit_mml_mirt

    f = fit_mml_mirt(ds, dims, threads=1, **options)
    return {"a": f.loadings.values, "d": f.intercepts.values, "loglik_reported": f.loglik, "iterations": f.iterations,
            "converged": f.converged, "settings": {**options, "n_nodes": f.attrs["n_nodes"],
                                                   "quadrature": f.attrs["quadrature"]}}


def fit_peer(ds, dims, quadrature):
    import mirt

    y = np.ascontiguousarray(ds["responses"].transpose("model", "item").values.astype(np.int32))
    r = mirt.fit_mirt(y, "2PL", n_factors=dims, n_quadpts=quadrature, tol=1e-6, max_iter=2000,
                      compute_standard_errors=False)
    p = r.model.parameters
    a, b = np.asarray(p["discrimination"], float), np.asarray(p["difficulty"], float)
    return {"a": a, "d": -a.sum(1) * b, "loglik_reported": float(r.log_likelihood), "iterations": int(r.n_iterations),
            "converged": bool(r.converged), "settings": {"model": "2PL", "n_factors": dims, "n_quadpts": quadrature,
                                                         "tol": 1e-6, "max_iter": 2000, "model_class": type(r.model).__name__},
            "slopes_at_bound": int(np.sum(np.isclose(a, 0.1) | np.isclose(a, 5.0)))}


def compare(a, d, ref_a, ref_d) -> dict:
    """Parameters up to rotation: orthogonal Procrustes of ``a`` onto ``ref_a``, oblimin congruence."""
    from bayesirt.models.rotation import align_loadings, rotate

    r, _ = orthogonal_procrustes(a, ref_a)
    _, _, _, congruence = align_loadings(rotate(a, "oblimin").loadings, rotate(ref_a, "oblimin").loadings)
    return {"procrustes_max_abs_diff_a": float(np.abs(a @ r - ref_a).max()),
            "procrustes_rmse_a": float(np.sqrt(np.mean((a @ r - ref_a) ** 2))),
            "max_abs_diff_d": float(np.abs(d - ref_d).max()),
            "oblimin_congruence_min": float(np.min(congruence)),
            "implied_aat_max_abs_diff": float(np.abs(a @ a.T - ref_a @ ref_a.T).max())}


def run_case(name: str, args) -> dict:
    spec = CASES[name]
    dims = spec["dims"]
    ds, a_true, d_true = simulate(dims, spec["items"], args.models, args.seed + dims)
    y = ds["responses"].values
    rows = {"bayesirt": lambda: fit_bayesirt(ds, dims),
            "bayesirt full grid": lambda: fit_bayesirt(ds, dims, prune=0.0, tol=1e-7, ll_tol=1e-12, max_iter=5000),
            "mirt": lambda: fit_peer(ds, dims, spec["quadrature"])}
    out = {"dims": dims, "items": spec["items"], "models": args.models, "seed": args.seed + dims,
           "quadrature": spec["quadrature"], "evaluator_nodes_per_dim": spec["evaluator"],
           "loglik_truth": common_loglik(y, a_true, d_true, spec["evaluator"]), "rows": {}}
    for label, run in rows.items():
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                load0, t0, c0 = os.getloadavg()[0], time.perf_counter(), _cpu()
                res = run()
                res["wall_s"], res["cpu_s"] = time.perf_counter() - t0, _cpu() - c0
                res["loadavg_1min_before_after"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
            res["warnings"] = sorted({str(w.message)[:200] for w in caught})
            res["loglik_common"] = common_loglik(y, res["a"], res["d"], spec["evaluator"])
            res["loglik_fit_grid"] = common_loglik(y, res["a"], res["d"], spec["quadrature"])
            res["vs_truth"] = compare(res["a"], res["d"], a_true, d_true)
            res["status"] = "ok"
            print(f"  {name} {label}: {res['wall_s']:.2f} s wall, {res['cpu_s']:.2f} s CPU, {res['iterations']} it, "
                  f"loglik {res['loglik_common']:.4f}", flush=True)
        except Exception as e:  # noqa: BLE001 (a failing run is reported, never dropped)
            traceback.print_exc()
            res = {"status": "failed", "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
        out["rows"][label] = res
    ref = out["rows"]["bayesirt"]
    for label, res in out["rows"].items():
        if res.get("status") == "ok" and ref.get("status") == "ok":
            res["loglik_diff_vs_bayesirt"] = res["loglik_common"] - ref["loglik_common"]
            res["loglik_fit_grid_diff_vs_bayesirt"] = res["loglik_fit_grid"] - ref["loglik_fit_grid"]
            res["vs_bayesirt"] = compare(res["a"], res["d"], ref["a"], ref["d"])
            res["time_ratio_vs_bayesirt"] = res["wall_s"] / ref["wall_s"]
    for res in out["rows"].values():
        for key in ("a", "d"):
            if key in res:
                res[key] = np.asarray(res[key]).tolist()
    return out


def benchmark_rows(result: dict) -> list[dict]:
    """BENCHMARKS.md rows: one per case, ratio = mirt wall s / bayesirt wall s."""
    rows = []
    for name, case in result["cases"].items():
        task = f"exploratory {case.get('dims', '?')}-D 2PL, marginal ML (EM)"
        b, m = case.get("rows", {}).get("bayesirt", {}), case.get("rows", {}).get("mirt", {})
        ok = b.get("status") == "ok" and m.get("status") == "ok"
        quality = "—"
        if ok:
            quality = (f"common-evaluator loglik: mirt - bayesirt {m['loglik_diff_vs_bayesirt']:+.3f}; oblimin congruence "
                       f"{m['vs_bayesirt']['oblimin_congruence_min']:.4f}; max |Δd| {m['vs_bayesirt']['max_abs_diff_d']:.3f}")
        rows.append(benchmark_row(
            task=task, data_size=f"{case.get('models', '?'):,} models x {case.get('items', '?')} items (simulated)",
            bayesirt=f"{b['wall_s']:.2f} s ({b['iterations']} EM steps)" if b.get("status") == "ok" else "—",
            peer=f"mirt {result['versions'].get('mirt', '?')} (fit_mirt, n_factors={case.get('dims')}, same nodes/dim)",
            peer_figure=f"{m['wall_s']:.2f} s ({m['iterations']} iterations)" if m.get("status") == "ok" else "—",
            ratio=m["wall_s"] / b["wall_s"] if ok else None, ratio_meaning="mirt s / bayesirt s (wall)",
            target="no target (a correctness check of SAFE App. C's fit)", target_met=None, quality=quality,
            status="ok" if ok else f"failed: {m.get('error') or b.get('error')}", command=result["command"],
            date=result["date"], machine_description=result["machine"]))
    return rows


def markdown(result: dict) -> str:
    lines = ["# Multidimensional MML: bayesirt `fit_mml_mirt` vs `mirt` " + result["versions"].get("mirt", "?"), "",
             f"{result['date']}; {result['machine']}; `{result['command']}`; 1-minute load average "
             f"{result.get('loadavg_start', '?')} at the start, {result.get('loadavg_end', '?')} at the end (CPU "
             "seconds are the fairer comparison on a loaded machine: they count every thread).", "",
             "mirt's exploratory 2PL boxes every slope to [0.1, 5] and leaves the rotation free; bayesirt's is "
             "unconstrained with echelon identification. With all-positive true loadings both reach the same "
             "optimum. Log-likelihoods re-scored by one common evaluator (full Gauss-Hermite product grid); "
             "parameters compared up to an orthogonal rotation (Procrustes) and after oblimin (Tucker congruence). "
             "'Δ on the fitting grid': the same evaluator on the full product grid with the fits' own nodes per "
             "dimension, the objective both tools maximize (bayesirt's default row prunes that grid).", ""]
    for name, case in result["cases"].items():
        if "rows" not in case:
            lines += [f"## {name}", "", f"FAILED: {case.get('error')}", ""]
            continue
        lines += [f"## D = {case['dims']}: {case['models']:,} models x {case['items']} items, {case['quadrature']} "
                  f"nodes/dim (evaluator {case['evaluator_nodes_per_dim']}/dim)", "",
                  f"Common-evaluator log-likelihood at the truth: {case['loglik_truth']:.3f}.", "",
                  "| row | wall s | CPU s | iterations | converged | loglik (common) | Δ vs bayesirt | Δ on the fitting "
                  "grid | reported loglik | Procrustes max abs Δa vs bayesirt | max abs Δd vs bayesirt | oblimin "
                  "congruence vs bayesirt | congruence vs truth |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for label, r in case["rows"].items():
            if r.get("status") != "ok":
                lines.append(f"| {label} | FAILED: {r.get('error')} |" + " |" * 11)
                continue
            vb = r.get("vs_bayesirt", {})
            lines.append(f"| {label} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['iterations']} | {r['converged']} | "
                         f"{r['loglik_common']:.4f} | {r.get('loglik_diff_vs_bayesirt', float('nan')):+.4f} | "
                         f"{r.get('loglik_fit_grid_diff_vs_bayesirt', float('nan')):+.4f} | "
                         f"{r['loglik_reported']:.4f} | {vb.get('procrustes_max_abs_diff_a', float('nan')):.2e} | "
                         f"{vb.get('max_abs_diff_d', float('nan')):.2e} | {vb.get('oblimin_congruence_min', float('nan')):.5f} | "
                         f"{r['vs_truth']['oblimin_congruence_min']:.4f} |")
        m = case["rows"].get("mirt", {})
        if m.get("status") == "ok":
            lines += ["", f"mirt slopes at a box bound (0.1 or 5): {m['slopes_at_bound']}; model class "
                          f"{m['settings']['model_class']}."]
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", type=int, default=1000)
    p.add_argument("--seed", type=int, default=20261130)
    p.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    p.add_argument("--quick", action="store_true", help="500 models, D = 2 only")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/mml_mirt_multidim.json"))
    args = p.parse_args(argv)
    if args.quick:
        args.models, args.cases = 500, ["d2"]
    t0, load_start = time.perf_counter(), round(os.getloadavg()[0], 2)
    cases = {}
    for name in args.cases:
        try:
            cases[name] = run_case(name, args)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            cases[name] = {"status": "failed", "error": f"{type(e).__name__}: {e}"}
    result = {"config": {"models": args.models, "seed": args.seed, "cases": args.cases, "quick": args.quick},
              "command": " ".join([Path(sys.executable).name, *sys.argv]), "machine": machine(),
              "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "versions": versions(PACKAGES), "cases": cases,
              "total_wall_s": time.perf_counter() - t0, "loadavg_start": load_start,
              "loadavg_end": round(os.getloadavg()[0], 2)}
    result["benchmark_rows"] = benchmark_rows(result)
    write_results(args.out, result, markdown, echo=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
