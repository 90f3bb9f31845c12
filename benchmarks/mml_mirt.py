"""Side-by-side benchmark: bayesirt's marginal maximum likelihood vs the PyPI package ``mirt``.

``mirt`` (Python API over a Rust/Rayon backend; install with ``pip install -e ".[bench]"``) fits
unidimensional 2PL/3PL models by Bock-Aitkin EM on a Gauss-Hermite grid, as
``bayesirt.frequentist.fit_mml`` does. One process runs both tools on the same data:

Cases
  * ``lsat7``  -- LSAT7 (5 items x 1,000 people), 2PL. Published log-likelihood -2658.805.
  * ``2pl``    -- ``simulate_pl("2pl", n_items=80, n_models=5000, seed=20261129)``.
  * ``3pl``    -- the same for the 3PL.

Rows per case
  * ``bayesirt``       -- ``fit_mml(responses, kind, quadrature=61, priors=False, se=..., threads=1)``.
  * ``mirt``           -- ``mirt.fit_mirt(y, kind, n_quadpts=61, tol=<matched>, max_iter=500,
                          compute_standard_errors=...)`` with mirt's default threads (a Rayon pool
                          of one thread per CPU; NumPy's BLAS default).
  * ``mirt, 1 thread`` -- the same in a subprocess started with ``RAYON_NUM_THREADS=1`` (and
                          ``OMP/OPENBLAS/MKL_NUM_THREADS=1``), so the timing is like for like
                          with bayesirt's single-threaded default.
  * ``mirt defaults``  -- ``mirt.fit_mirt(y, kind)`` as shipped (21 nodes, tol 1e-4, SEs on).
  * 3PL only: ``mirt + Beta(5,17) prior`` -- ``priors={"guessing": BetaPrior(5, 17)}``, the
    objective bayesirt maximizes (its 3PL always keeps the spec's Beta(5, 17) guessing prior).
    mirt's plain 3PL is ML with ``guessing`` boxed to [0, 0.5]; it maximizes a different
    function, so its log-likelihood is higher by construction and its parameters differ.

Settings matched: both use probabilists' Gauss-Hermite nodes for theta ~ N(0, 1) (61 nodes),
the same 500-iteration cap. Stopping rules differ in kind: bayesirt stops when the largest
parameter change is < 1e-6 or the relative objective change is < 1e-10; mirt stops when the
absolute log-likelihood (log-posterior) change is < ``tol``, which is set to
1e-10 x |bayesirt's objective| (the same relative criterion).

Every estimate is re-scored by one common evaluator (NumPy, 61 nodes) so log-likelihoods are
compared at the parameters each tool returns, and against a reference optimum (bayesirt run to
tol 1e-9 / ll_tol 1e-14).

Usage::

    python benchmarks/mml_mirt.py            # full (~10-15 min on 2 cores)
    python benchmarks/mml_mirt.py --quick    # 1,000 x 20 simulated cases, 1 repeat

Writes ``--out`` (JSON) and the same stem with ``.md`` and prints the Markdown. Every run is
wrapped in try/except: a failing run (including mirt missing) is reported, never dropped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

from _common import benchmark_row, source_state, versions, write_results  # noqa: E402 (benchmarks/ is on sys.path when run as a script)

PACKAGES = ("bayesirt", "mirt", "numpy", "scipy", "xarray", "threadpoolctl")
PUBLISHED_LSAT7 = -2658.805  # LSAT7 2PL marginal log-likelihood (e.g. R mirt / ltm)
GUESSING_PRIOR = (5.0, 17.0)  # bayesirt's models/3pl.toml guessing ~ Beta(5, 17)
LL_TOL, TOL = 1e-10, 1e-6  # bayesirt's fit_mml defaults
SINGLE_ENV = {"RAYON_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


# --------------------------------------------------------------------------------------- helpers
def _cpu() -> float:
    """CPU seconds used so far by this process, all threads (Rayon workers included)."""
    import resource

    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def _nthreads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


def _versions() -> dict:
    return versions(PACKAGES)


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]


def _blas_info() -> list:
    try:
        from threadpoolctl import threadpool_info

        return [{k: d.get(k) for k in ("user_api", "internal_api", "num_threads")} for d in threadpool_info()]
    except Exception as e:  # noqa: BLE001
        return [_err(e)]


def load_case(case: str, args):
    """(responses Dataset, y persons x items int32, truth Dataset or None, kind)."""
    from bayesirt.data import load_dataset, simulate_pl

    if case == "lsat7":
        ds, truth, kind = load_dataset("lsat7"), None, "2pl"
    else:
        kind = case
        ds, truth = simulate_pl(kind, n_items=args.items, n_models=args.models, seed=args.seed)
    y = np.ascontiguousarray(ds["responses"].transpose("model", "item").values.astype(np.int32))
    return ds, y, truth, kind


def marginal_loglik(y: np.ndarray, a, d, c, nodes: int) -> float:
    """Common evaluator: sum over people of log sum_k w_k prod_j P^y (1 - P)^(1 - y),
    P = c + (1 - c) sigmoid(a theta + d), theta ~ N(0, 1) on ``nodes`` Gauss-Hermite nodes."""
    from numpy.polynomial.hermite_e import hermegauss
    from scipy.special import log_expit, logsumexp

    x, w = hermegauss(nodes)
    w = w / w.sum()
    a, d, c = (np.asarray(v, float)[:, None] for v in (a, d, c))
    eta = a * x[None, :] + d
    with np.errstate(divide="ignore"):
        lp = np.logaddexp(np.log(c), np.log1p(-c) + log_expit(eta))  # log(c + (1-c) s)
        lq = np.log1p(-c) + log_expit(-eta)  # log((1-c)(1-s))
    y1, y0 = (y == 1).astype(float), (y == 0).astype(float)
    return float(logsumexp(y1 @ lp + y0 @ lq + np.log(w)[None, :], axis=1).sum())


def log_guessing_prior(c) -> float:
    from scipy.stats import beta

    return float(beta.logpdf(np.asarray(c, float), *GUESSING_PRIOR).sum())


def _median(xs):
    return float(statistics.median(xs)) if xs else None


# ------------------------------------------------------------------------------------------ fits
def fit_bayesirt(ds, kind, q, se, **kw):
    from bayesirt.frequentist import fit_mml

    f = fit_mml(ds, kind, quadrature=q, priors=False, se=se, threads=1, **kw)
    it = f.items
    par = {"a": it["discrimination"].values, "d": it["intercept"].values, "b": it["difficulty"].values,
           "c": it["guessing"].values}
    ses = {"a": it["discrimination_se"].values, "b": it["difficulty_se"].values, "c": it["guessing_se"].values}
    return {"par": par, "se": ses if se else None, "loglik_reported": f.loglik, "objective_reported": f.objective,
            "iterations": f.iterations, "converged": f.converged,
            "settings": {"quadrature": q, "priors": False, "se": se, "threads": 1, "tol": kw.get("tol", TOL),
                         "ll_tol": kw.get("ll_tol", LL_TOL), "max_iter": kw.get("max_iter", 500),
                         "method": f.attrs.get("method"), "active_priors": f.attrs.get("active_priors")}}


class _PathProbe:
    """Record which mirt code path a fit takes (native 2PL fit, fused native 3PL iteration, or the
    generic Python EM) by counting calls; only this process is affected, mirt is not edited."""

    def __enter__(self):
        import mirt.backends.rust.estimation as rest
        from mirt.estimation.em import EMEstimator

        self.n2, self.n3 = 0, 0
        self._rest, self._em = rest, EMEstimator
        self._o2, self._o3 = rest._em_fit_2pl_prepared, EMEstimator._run_rust_3pl_iteration
        probe = self

        def f2(*a, **k):
            probe.n2 += 1
            return probe._o2(*a, **k)

        def f3(est, *a, **k):
            r = probe._o3(est, *a, **k)
            probe.n3 += r is not None
            return r

        rest._em_fit_2pl_prepared, EMEstimator._run_rust_3pl_iteration = f2, f3
        return self

    def __exit__(self, *exc):
        self._rest._em_fit_2pl_prepared, self._em._run_rust_3pl_iteration = self._o2, self._o3
        return False

    @property
    def path(self) -> str:
        if self.n2:
            return "native Rust 2PL EM (em_fit_2pl)"
        if self.n3:
            return f"fused native Rust 3PL E+M iteration ({self.n3} calls)"
        return "generic Python EM (mirt.estimation.em.EMEstimator)"


def fit_mirt(y, kind, q, se, tol, max_iter=500, prior=False, defaults=False):
    import mirt

    kw = {} if defaults else {"n_quadpts": q, "tol": tol, "max_iter": max_iter, "compute_standard_errors": se}
    if prior:
        from mirt.estimation.priors import BetaPrior

        kw["priors"] = {"guessing": BetaPrior(*GUESSING_PRIOR)}
    with _PathProbe() as probe:
        r = mirt.fit_mirt(y, kind.upper(), **kw)
    p = r.model.parameters
    a, b = np.asarray(p["discrimination"], float).ravel(), np.asarray(p["difficulty"], float).ravel()
    c = np.asarray(p["guessing"], float).ravel() if "guessing" in p else np.zeros_like(a)
    ses = None
    if r.standard_errors:
        ses = {k: np.asarray(r.standard_errors[v], float).ravel() for k, v in
               (("a", "discrimination"), ("b", "difficulty"), ("c", "guessing")) if v in r.standard_errors}
    settings = {"model": kind.upper(), "n_quadpts": 21 if defaults else q, "tol": 1e-4 if defaults else tol,
                "max_iter": 500 if defaults else max_iter, "compute_standard_errors": True if defaults else se,
                "priors": f"guessing ~ Beta{GUESSING_PRIOR}" if prior else None,
                "se_method": getattr(r, "se_method", None), "path": probe.path,
                "RAYON_NUM_THREADS": os.environ.get("RAYON_NUM_THREADS", "unset (Rayon default: one per CPU)")}
    return {"par": {"a": a, "d": -a * b, "b": b, "c": c}, "se": ses, "loglik_reported": float(r.log_likelihood),
            "objective_reported": float(r.log_posterior) if getattr(r, "log_posterior", None) is not None
            else float(r.log_likelihood),
            "iterations": int(r.n_iterations), "converged": bool(r.converged), "settings": settings}


def run_rows(specs: dict, repeats: dict) -> dict:
    """Run the rows round-robin (one repeat of each, then the next) so drifting machine load
    hits every row alike. ``specs``: name -> zero-arg fit function."""
    acc = {k: {"walls": [], "cpus": [], "warnings": set(), "result": None, "error": None} for k in specs}
    for rep in range(max(repeats.values())):
        for name, fn in specs.items():
            a = acc[name]
            if a["error"] or rep >= repeats[name]:
                continue
            load0 = list(os.getloadavg())
            try:
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    t0, c0 = time.perf_counter(), _cpu()
                    r = fn()
                    a["walls"].append(time.perf_counter() - t0)
                    a["cpus"].append(_cpu() - c0)
                a["warnings"] |= {f"{x.category.__name__}: {str(x.message)[:200]}" for x in w}
                a["result"] = r
                print(f"    {name} [{rep + 1}/{repeats[name]}]: wall {a['walls'][-1]:.3f} s, CPU {a['cpus'][-1]:.3f} s, "
                      f"{r['iterations']} it, converged {r['converged']}", flush=True)
            except Exception as e:  # noqa: BLE001  (a failing run is reported, never dropped)
                traceback.print_exc()
                a["error"] = _err(e)
            a.setdefault("load", []).append([load0, list(os.getloadavg())])
    out = {}
    for name, a in acc.items():
        if a["error"] and a["result"] is None:
            out[name] = {"status": "failed", "error": a["error"], "loadavg_before_after": a.get("load")}
            continue
        r = a["result"]
        r.update(status="ok", wall_s=_median(a["walls"]), cpu_s=_median(a["cpus"]), wall_s_all=a["walls"],
                 cpu_s_all=a["cpus"], repeats=len(a["walls"]), warnings=sorted(a["warnings"]),
                 loadavg_before_after=a.get("load"))
        if a["error"]:
            r["later_repeat_error"] = a["error"]
        out[name] = r
    return out


# --------------------------------------------------------------------------- single-thread worker
def worker(args) -> int:
    """Subprocess entry: mirt rows of one case with RAYON_NUM_THREADS=1 (set by the parent)."""
    ds, y, truth, kind = load_case(args.worker, args)
    t_before = _nthreads()
    import mirt  # noqa: F401

    fit_mirt(y, kind, args.quadrature, False, max(args.worker_tol, 1e-3))  # warm-up, as in the parent
    specs = {f"se={se}": (lambda se=se: fit_mirt(y, kind, args.quadrature, se, args.worker_tol)) for se in (False, True)}
    rows = run_rows(specs, {k: args.worker_repeats for k in specs})
    for r in rows.values():
        if r.get("status") == "ok":
            r["par"] = {k: v.tolist() for k, v in r["par"].items()}
            r["se"] = {k: v.tolist() for k, v in r["se"].items()} if r["se"] else None
    info = {"threads_before_import": t_before, "threads_after_fits": _nthreads(), "env": {k: os.environ.get(k) for k in SINGLE_ENV},
            "blas": _blas_info()}
    Path(args.worker_out).write_text(json.dumps({"rows": rows, "info": info}, default=float))
    return 0


def run_single_thread(case: str, tol: float, args) -> tuple[dict, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "w.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", case, "--worker-out", str(out),
               "--worker-tol", repr(tol), "--worker-repeats", str(args.repeats if case != "lsat7" else args.repeats_small),
               "--items", str(args.items), "--models", str(args.models), "--seed", str(args.seed),
               "--quadrature", str(args.quadrature)]
        env = os.environ | SINGLE_ENV
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        sys.stdout.write(p.stdout)
        if p.returncode != 0 or not out.exists():
            tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"single-thread worker exited {p.returncode}: {tail}")
        res = json.loads(out.read_text())
    for r in res["rows"].values():
        if r.get("status") == "ok":
            r["par"] = {k: np.asarray(v) for k, v in r["par"].items()}
            r["se"] = {k: np.asarray(v) for k, v in r["se"].items()} if r["se"] else None
    return res["rows"], res["info"]


# ------------------------------------------------------------------------------------ the cases
def _agree(x, y) -> dict:
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    corr = float(np.corrcoef(x[ok], y[ok])[0, 1]) if ok.sum() > 2 and np.std(x[ok]) > 0 and np.std(y[ok]) > 0 else None
    return {"corr": corr, "max_abs_diff": float(np.abs(x[ok] - y[ok]).max()) if ok.any() else None}


def se_agreement(se, ref, kind) -> dict:
    """max over items of |SE / bayesirt SE - 1| per parameter (items with a NaN SE, e.g. mirt's
    guessing at a bound, are left out)."""
    out = {}
    for k in ("a", "b", "c") if kind == "3pl" else ("a", "b"):
        if k in se and k in ref:
            s1, s2 = np.asarray(se[k], float), np.asarray(ref[k], float)
            ok = np.isfinite(s1) & np.isfinite(s2) & (s2 > 0)
            out[k] = float(np.abs(s1[ok] / s2[ok] - 1).max()) if ok.any() else None
    return out


def score(row: dict, y, q, kind, truth, ref, bay) -> None:
    """Add the common-evaluator log-likelihood / objective and the agreement numbers to a row."""
    p = row["par"]
    ll = marginal_loglik(y, p["a"], p["d"], p["c"], q)
    row["loglik_common"] = ll
    row["objective_common"] = ll + (log_guessing_prior(p["c"]) if kind == "3pl" else 0.0)
    if ref is not None:
        row["gap_to_optimum"] = ref["objective_common"] - row["objective_common"]
    names = ("a", "d", "b", "c") if kind == "3pl" else ("a", "d", "b")
    if bay is not None and bay is not row:
        row["vs_bayesirt"] = {k: _agree(p[k], bay["par"][k]) for k in names}
        row["loglik_diff_vs_bayesirt"] = row["loglik_common"] - bay["loglik_common"]
        row["objective_diff_vs_bayesirt"] = row["objective_common"] - bay["objective_common"]
    if truth is not None:
        tv = {"a": truth["discrimination"].values, "d": truth["intercept"].values, "b": truth["difficulty"].values,
              "c": truth["guessing"].values}
        row["corr_truth"] = {k: float(np.corrcoef(p[k], tv[k])[0, 1]) for k in names}
        row["rmse_truth"] = {k: float(np.sqrt(np.mean((p[k] - tv[k]) ** 2))) for k in names}
    if kind == "3pl":
        row["guessing_at_bound"] = {"c<=1e-6": int((p["c"] <= 1e-6).sum()), "c>=0.5-1e-6": int((p["c"] >= 0.5 - 1e-6).sum())}


def run_case(case: str, args) -> dict:
    print(f"=== case {case}", flush=True)
    ds, y, truth, kind = load_case(case, args)
    q = args.quadrature
    reps = args.repeats_small if case == "lsat7" else args.repeats
    out = {"kind": kind, "people": int(y.shape[0]), "items": int(y.shape[1]),
           "mean_response": float((y == 1).sum() / (y >= 0).sum()), "missing_cells": int((y < 0).sum()),
           "repeats": reps}
    if case != "lsat7":
        out["seed"] = args.seed

    # reference optimum (not timed in the tables): bayesirt run to a much tighter stop
    try:
        ref = fit_bayesirt(ds, kind, q, False, tol=1e-9, ll_tol=1e-14, max_iter=5000)
        score(ref, y, q, kind, None, None, None)
        out["reference"] = {k: ref[k] for k in ("loglik_common", "objective_common", "iterations", "converged")} | \
            {"settings": ref["settings"]}
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        ref, out["reference"] = None, {"status": "failed", "error": _err(e)}

    # bayesirt first: its objective sets mirt's matched tolerance
    bay_specs = {f"bayesirt se={se}": (lambda se=se: fit_bayesirt(ds, kind, q, se)) for se in (False, True)}
    # warm-up (imports, first-call allocations) outside the timings
    try:
        warm = fit_bayesirt(ds, kind, q, False)
        mirt_tol = LL_TOL * abs(warm["objective_reported"])
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        mirt_tol = 1e-4
        out["warmup_error"] = _err(e)
    out["mirt_tol"] = mirt_tol
    mirt_ok = True
    threads0 = _nthreads()
    try:
        import mirt  # noqa: F401

        fit_mirt(y, kind, q, False, max(mirt_tol, 1e-3))  # warm-up: builds the Rayon pool
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        mirt_ok, out["mirt_import_error"] = False, _err(e)
    out["threads"] = {"process_threads_before_mirt_warmup": threads0, "process_threads_after": _nthreads(),
                      "cpu_count": os.cpu_count()}

    specs = dict(bay_specs)
    specs |= {f"mirt se={se}": (lambda se=se: fit_mirt(y, kind, q, se, mirt_tol)) for se in (False, True)}
    specs["mirt defaults (21 nodes, tol 1e-4, SEs)"] = lambda: fit_mirt(y, kind, q, True, 1e-4, defaults=True)
    repeats = {k: reps for k in specs}
    if kind == "3pl" and "mirt-prior" not in args.skip:
        specs["mirt + Beta(5,17) prior se=False"] = lambda: fit_mirt(y, kind, q, False, mirt_tol, prior=True)
        repeats["mirt + Beta(5,17) prior se=False"] = args.prior_repeats
    if not mirt_ok:
        for k in [k for k in specs if k.startswith("mirt")]:
            specs[k] = lambda e=out["mirt_import_error"]: (_ for _ in ()).throw(RuntimeError(e))
    rows = run_rows(specs, repeats)

    if "single-thread" not in args.skip:
        print("    mirt single-threaded subprocess (RAYON_NUM_THREADS=1) ...", flush=True)
        try:
            st_rows, st_info = run_single_thread(case, mirt_tol, args)
            for k, r in st_rows.items():
                rows[f"mirt {k}, 1 thread"] = r
            out["single_thread_worker"] = st_info
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            for se in (False, True):
                rows[f"mirt se={se}, 1 thread"] = {"status": "failed", "error": _err(e)}

    bay = rows.get("bayesirt se=False")
    bay = bay if bay and bay.get("status") == "ok" else None
    for name, r in rows.items():
        if r.get("status") != "ok":
            continue
        try:
            score(r, y, q, kind, truth, ref, bay)
            bse = rows.get("bayesirt se=True", {})
            # SEs are compared only where both tools maximize the same function (not mirt's ML 3PL)
            if name.startswith("mirt") and kind == "2pl" and r.get("se") and bse.get("se") is not None:
                r["se_max_rel_diff_vs_bayesirt"] = se_agreement(r["se"], bse["se"], kind)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            r["score_error"] = _err(e)
    if case == "lsat7":
        for r in rows.values():
            if r.get("status") == "ok":
                r["diff_vs_published"] = r["loglik_common"] - PUBLISHED_LSAT7
    # speed ratios: mirt time / bayesirt time with the same SE setting (> 1: bayesirt faster)
    for name, r in rows.items():
        if r.get("status") != "ok" or not name.startswith("mirt") or "defaults" in name:
            continue
        se = "se=True" if "se=True" in name else "se=False"
        b = rows.get(f"bayesirt {se}")
        if b and b.get("status") == "ok":
            r["ratio_wall"] = r["wall_s"] / b["wall_s"]
            r["ratio_cpu"] = r["cpu_s"] / b["cpu_s"]
    for r in rows.values():  # arrays stay out of the JSON
        r.pop("par", None)
        r.pop("se", None)
    out["rows"] = rows
    return out


# ------------------------------------------------------------------------------------- reporting
def _f(x, fmt="{:.3f}"):
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "—"
    return fmt.format(x)


def result_nodes(c: dict) -> int:
    b = c["rows"].get("bayesirt se=False", {})
    return b.get("settings", {}).get("quadrature", 61)


def _threads_label(name: str, r: dict) -> str:
    if name.startswith("bayesirt"):
        return "1 (BLAS limited to 1)"
    if "1 thread" in name:
        return "1 (RAYON/BLAS = 1)"
    return "Rayon default (1/CPU) + NumPy BLAS default"


CASE_TITLES = {"lsat7": "LSAT7 2PL (1,000 people x 5 items)", "2pl": "Simulated 2PL", "3pl": "Simulated 3PL"}


def case_markdown(case: str, c: dict) -> list:
    kind, rows = c["kind"], c["rows"]
    title = CASE_TITLES[case] + ("" if case == "lsat7" else f" ({c['people']:,} models x {c['items']} items, seed {c.get('seed')})")
    lines = [f"## {title}", "",
             f"mirt tol (|change in log-likelihood|) = {c['mirt_tol']:.3g} = 1e-10 x |bayesirt objective|; "
             f"{c['repeats']} repeats per row (median shown) unless noted, run round-robin.", "",
             "### Time", "",
             "| run | threads | SEs | wall s | CPU s | CPU / wall | iterations | converged | mirt / bayesirt wall | mirt / bayesirt CPU | code path |",
             "|---|---|---|---:|---:|---:|---:|---|---:|---:|---|"]
    for name, r in rows.items():
        if r.get("status") != "ok":
            lines.append(f"| {name} | {r.get('status', '?').upper()}: {r.get('error', '')} |" + " |" * 9)
            continue
        se = "yes" if r["settings"].get("se", r["settings"].get("compute_standard_errors")) else "no"
        reps = "" if r["repeats"] == c["repeats"] else f" ({r['repeats']} run)"
        path = r["settings"].get("path", "numpy / scipy EM")
        lines.append(f"| {name}{reps} | {_threads_label(name, r)} | {se} | {_f(r['wall_s'])} | {_f(r['cpu_s'])} "
                     f"| {_f(r['cpu_s'] / r['wall_s'], '{:.2f}')} | {r['iterations']} | {'yes' if r['converged'] else 'NO'} "
                     f"| {_f(r.get('ratio_wall'), '{:.2f}x')} | {_f(r.get('ratio_cpu'), '{:.2f}x')} | {path} |")
    names = ("a", "d", "b", "c") if kind == "3pl" else ("a", "d", "b")
    ref = c.get("reference", {})
    obj = "objective (loglik + log Beta(5,17) prior on c)" if kind == "3pl" else "log-likelihood"
    lines += ["", "### Agreement", "",
              f"Log-likelihoods re-scored by one common evaluator at each tool's estimates ({c['items']} items, "
              f"{_f(ref.get('objective_common'), '{:.6f}')} = reference optimum of the {obj}, "
              f"bayesirt run to tol 1e-9 / ll_tol 1e-14). Parameter rows: max |difference| vs bayesirt (se=False) "
              f"/ correlation; d = intercept (logit = a theta + d), b = difficulty = -d/a. The `mirt defaults` row "
              f"reports its log-likelihood on its own 21-node grid; the common column re-scores its estimates on "
              f"{result_nodes(c)} nodes.", ""]
    head = ["run", "loglik (reported)", "loglik (common)", "Δ loglik vs bayesirt"]
    if kind == "3pl":
        head += ["objective (common)", "Δ objective vs bayesirt"]
    head += ["gap to optimum"] + [f"max abs Δ{k} / r({k})" for k in names]
    if case == "lsat7":
        head.append("loglik - published (-2658.805)")
    else:
        head += ["r(truth) " + " / ".join(names)]
    head.append("max rel Δ SE vs bayesirt")
    lines += ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name, r in rows.items():
        if r.get("status") != "ok" or "loglik_common" not in r:
            continue
        if "se=True" in name:
            continue  # same estimates as the se=False row of the same tool (its SE agreement is shown there)
        cells = [name, _f(r["loglik_reported"], "{:.6f}"), _f(r["loglik_common"], "{:.6f}"),
                 _f(r.get("loglik_diff_vs_bayesirt"), "{:+.2e}")]
        if kind == "3pl":
            cells += [_f(r["objective_common"], "{:.6f}"), _f(r.get("objective_diff_vs_bayesirt"), "{:+.2e}")]
        cells.append(_f(r.get("gap_to_optimum"), "{:.2e}"))
        vb = r.get("vs_bayesirt", {})
        for k in names:
            v = vb.get(k)
            cells.append(f"{v['max_abs_diff']:.2e} / {_f(v['corr'], '{:.6f}')}" if v else "—")
        if case == "lsat7":
            cells.append(_f(r.get("diff_vs_published"), "{:+.2e}"))
        else:
            ct = r.get("corr_truth", {})
            cells.append(" / ".join(_f(ct.get(k), "{:.3f}") for k in names))
        se_name = name.replace("se=False", "se=True")
        sr = rows.get(se_name, {}).get("se_max_rel_diff_vs_bayesirt") if se_name != name else r.get("se_max_rel_diff_vs_bayesirt")
        cells.append(", ".join(f"{k} {v:.1e}" for k, v in sr.items() if v is not None) if sr else "—")
        lines.append("| " + " | ".join(cells) + " |")
    if kind == "3pl":
        for name, r in rows.items():
            if r.get("status") == "ok" and "guessing_at_bound" in r and name.startswith("mirt"):
                g = r["guessing_at_bound"]
                lines.append("")
                lines.append(f"mirt's ML 3PL ({name}): guessing at its box bounds for {g['c<=1e-6']} item(s) at c = 0 and "
                             f"{g['c>=0.5-1e-6']} at c = 0.5. An estimate at c = 0 has zero Beta(5, 17) density, so "
                             "the objective column is -inf (shown —) for the ML rows; their parameters are compared with "
                             "bayesirt's MAP estimates only to show how far apart the two estimators land, and SEs are not "
                             "compared (different functions; mirt reports NaN SEs at bounds).")
                break
    warn = {n: r["warnings"] for n, r in rows.items() if r.get("warnings")}
    if warn:
        lines += ["", "Warnings raised: " + "; ".join(f"{n}: {' | '.join(w)[:300]}" for n, w in warn.items())]
    lines.append("")
    return lines


def _headline(cases: dict) -> list:
    out = []
    for case in ("2pl", "3pl"):
        c = cases.get(case)
        if not c or "rows" not in c:
            continue
        rows = c["rows"]
        parts = []
        for se in (False, True):
            m, m1, b = rows.get(f"mirt se={se}", {}), rows.get(f"mirt se={se}, 1 thread", {}), rows.get(f"bayesirt se={se}", {})
            if b.get("status") != "ok":
                continue
            txt = f"SEs {'on' if se else 'off'}: bayesirt {b['wall_s']:.2f} s vs mirt "
            txt += f"{m['wall_s']:.2f} s ({m['ratio_wall']:.2f}x)" if m.get("status") == "ok" else f"FAILED ({m.get('error', '?')})"
            if m1.get("status") == "ok":
                txt += f", mirt 1 thread {m1['wall_s']:.2f} s ({m1['ratio_wall']:.2f}x)"
            parts.append(txt)
        if case == "3pl":
            pr = rows.get("mirt + Beta(5,17) prior se=False", {})
            if pr.get("status") == "ok":
                parts.append(f"same objective (mirt + Beta(5,17) prior, generic EM): {pr['wall_s']:.1f} s ({pr['ratio_wall']:.0f}x)")
        def verdict(suffix):
            ok = [rows[f"mirt se={se}{suffix}"]["ratio_wall"] >= 1 for se in (False, True)
                  if rows.get(f"mirt se={se}{suffix}", {}).get("ratio_wall") is not None]
            return "met" if ok and all(ok) else ("NOT met" if ok else "n/a")

        out.append(f"- **{case.upper()} {c['people']:,} x {c['items']}**: " + "; ".join(parts) +
                   f". Target bayesirt no slower than mirt (wall ratio >= 1, SEs off and on): **{verdict('')}** against "
                   f"mirt's default threading, **{verdict(', 1 thread')}** against single-threaded mirt.")
    c = cases.get("lsat7")
    if c and "rows" in c:
        b, m = c["rows"].get("bayesirt se=False", {}), c["rows"].get("mirt se=False", {})
        if b.get("status") == "ok" and m.get("status") == "ok":
            d = m["loglik_common"] - b["loglik_common"]
            out.append(f"- **LSAT7 2PL**: loglik bayesirt {b['loglik_common']:.6f}, mirt {m['loglik_common']:.6f}, "
                       f"|difference| {abs(d):.1e} (target <= 1e-3: {'met' if abs(d) <= 1e-3 else 'NOT met'}); "
                       f"max |Δa| {m['vs_bayesirt']['a']['max_abs_diff']:.1e}, max |Δd| {m['vs_bayesirt']['d']['max_abs_diff']:.1e}; "
                       f"time (SEs off, median) bayesirt {b['wall_s'] * 1e3:.0f} ms vs mirt {m['wall_s'] * 1e3:.0f} ms "
                       f"({m['ratio_wall']:.2f}x; a tiny case, milliseconds either way).")
    return out


def _load_note(result: dict) -> list:
    """Say so when the machine was busy: Rayon / BLAS threads then cannot run in parallel and
    the default-threading mirt rows are the most distorted."""
    n = result["machine"]["cpu_count"] or 1
    loads = [result["loadavg_start"][0], result["loadavg_end"][0]]
    for c in result["cases"].values():
        for r in c.get("rows", {}).values():
            loads += [pair[i][0] for pair in r.get("loadavg_before_after") or [] for i in (0, 1)]
    load = max(loads)
    if load <= 0.75 * n:
        return []
    lines = [f"**Machine was busy** (1-min load average up to {load:.1f} on {n} CPUs, other jobs running): every "
             "timing is slower than on an idle machine, mirt's Rayon pool could not run its threads in parallel "
             "(CPU / wall ~ 1), and oversubscribed thread pools can cost far more than their share."]
    for case, c in result["cases"].items():
        m, m1 = c.get("rows", {}).get("mirt se=True", {}), c.get("rows", {}).get("mirt se=True, 1 thread", {})
        if m.get("status") == "ok" and m1.get("status") == "ok" and m["wall_s"] > 1.5 * m1["wall_s"]:
            blas = ", ".join(sorted({f"{d.get('internal_api')} {d.get('num_threads')} threads" for d in result.get("blas_main_process", [])
                                     if isinstance(d, dict)}))
            lines[0] += (f" {case}: mirt with SEs took {m['wall_s']:.1f} s with its default threads (Rayon pool, and "
                         f"NumPy BLAS for its Python SE step: {blas}) but {m1['wall_s']:.1f} s single-threaded.")
    lines[0] += " The single-threaded (`1 thread`) rows are the like-for-like comparison."
    return [*lines, ""]


def markdown(result: dict) -> str:
    v, cases = result["versions"], result["cases"]
    lines = [f"# MML benchmark: bayesirt fit_mml vs mirt {v.get('mirt')}", "",
             f"{result['machine']['platform']}, {result['machine']['cpu_count']} CPUs; {result['date']}; "
             f"Python {v['python']}, bayesirt {v['bayesirt']}, mirt {v['mirt']}, numpy {v['numpy']}, scipy {v['scipy']}. "
             f"Total wall time {result['total_wall_s']:.0f} s. Load average at start {result['loadavg_start']}, "
             f"at end {result['loadavg_end']} (timings are only comparable on an otherwise idle machine; "
             "CPU seconds are less sensitive to other jobs than wall seconds).", "",
             *_load_note(result),
             "**Headline** (ratio = mirt time / bayesirt time; > 1 means bayesirt is faster):", "",
             *_headline(cases), "",
             "Settings: both tools integrate theta ~ N(0, 1) on the same probabilists' Gauss-Hermite grid "
             f"({result['config']['quadrature']} nodes; checked separately: run to tol 1e-10 on LSAT7, the two log-likelihoods agree to < 1e-8), "
             "500-iteration cap. bayesirt stops when max |parameter change| < 1e-6 or |relative objective change| "
             "< 1e-10; mirt stops when |log-likelihood change| < tol, set to 1e-10 x |bayesirt objective|. "
             "bayesirt: `fit_mml(..., quadrature=61, priors=False, threads=1)` (BLAS limited to 1 thread). "
             "mirt: `fit_mirt(y, '2PL'|'3PL', n_quadpts=61, tol=..., compute_standard_errors=...)`; its Rust kernels "
             "run on a Rayon pool with one thread per CPU by default (the process gains "
             f"{result.get('mirt_rayon_threads_added', '?')} threads at the first mirt fit); the `1 thread` rows rerun mirt in a "
             "subprocess with RAYON_NUM_THREADS=1 and OMP/OPENBLAS/MKL_NUM_THREADS=1. SEs: bayesirt inverts the "
             "observed information (exact, Louis' identity); mirt's default `se_method='auto'` is "
             "'oakes' (observed information by Louis' identity) for these models.", "",
             "3PL: bayesirt's `priors=False` 3PL still keeps the spec's guessing ~ Beta(5, 17) prior (MAP for c), while "
             "mirt's 3PL is plain ML with c boxed to [0, 0.5] (a in [0.1, 5], b in [-6, 6]). The two maximize different "
             "functions, so the mirt ML log-likelihood is higher by construction and its parameters differ; the like-for-like "
             "row is mirt with `priors={'guessing': BetaPrior(5, 17)}`, which maximizes the same objective but leaves mirt's "
             "fused native 3PL iteration for its generic Python EM.", ""]
    for case in ("lsat7", "2pl", "3pl"):
        c = cases.get(case)
        if c is None:
            continue
        if "rows" not in c:
            lines += [f"## {CASE_TITLES[case]}", "", f"FAILED: {c.get('error', '?')}", ""]
            continue
        lines += case_markdown(case, c)
    return "\n".join(lines)


def _lsat7_agreement(cases: dict) -> str | None:
    c = cases.get("lsat7", {})
    b, m = c.get("rows", {}).get("bayesirt se=False", {}), c.get("rows", {}).get("mirt se=False", {})
    if b.get("status") != "ok" or m.get("status") != "ok":
        return None
    return (f"LSAT7 (1,000 x 5): loglik {b['loglik_common']:.6f} vs mirt {m['loglik_common']:.6f} "
            f"(|Δ| {abs(m['loglik_common'] - b['loglik_common']):.1e}; published {PUBLISHED_LSAT7}); on that tiny case "
            f"bayesirt is slower, {b['wall_s'] * 1e3:.0f} ms vs {m['wall_s'] * 1e3:.0f} ms")


def benchmark_rows(result: dict) -> list[dict]:
    """BENCHMARKS.md rows of this run (``benchmarks/harness.py`` also calls this on JSONs written
    before the rows were stored): one row per simulated case (2PL, 3PL) and SE setting.

    ratio = mirt wall s / bayesirt wall s with the same SE setting, against single-threaded mirt
    (``RAYON_NUM_THREADS=1``; bayesirt runs with ``threads=1``): the like-for-like comparison, and
    the one the target "no slower than mirt" (ratio >= 1) is judged on; mirt with its default
    Rayon pool is in the peer figure too. Quality: the simulated case's agreement (log-likelihood by
    one common evaluator, parameters, correlation with the truth) and LSAT7's log-likelihood.
    """
    cases, v, m = result["cases"], result["versions"], result["machine"]
    machine = f"{m['platform']}, {m['cpu_count']} CPUs, Python {v['python']}"
    common = dict(command=result["command"], date=result["date"], machine_description=machine,
                  target="no slower than mirt (ratio >= 1 vs single-threaded mirt)")
    lsat7 = _lsat7_agreement(cases)
    out = []
    for case in ("2pl", "3pl"):
        if case not in result["config"].get("cases", ["2pl", "3pl"]):
            continue
        c = cases.get(case, {})
        for se in (False, True):
            task = f"{case.upper()} marginal ML (Bock-Aitkin EM, 61 nodes), SEs {'on' if se else 'off'}"
            peer = f"mirt {v.get('mirt', '?')} (fit_mirt, same grid, matched tolerance)"
            if "rows" not in c:
                out.append(benchmark_row(task=task, data_size="—", bayesirt="—", peer=peer, peer_figure="—", ratio=None,
                                         ratio_meaning="mirt s / bayesirt s", target_met=None, quality="—",
                                         status=f"failed: {c.get('error', 'case not run')}", **common))
                continue
            rows = c["rows"]
            size = f"{c['people']:,} people x {c['items']} items (simulated {case.upper()}, seed {c.get('seed')})"
            b = rows.get(f"bayesirt se={se}", {})
            m1, md = rows.get(f"mirt se={se}, 1 thread", {}), rows.get(f"mirt se={se}", {})
            ok_b = b.get("status") == "ok"
            bay = f"{b['wall_s']:.2f} s (1 thread, {b['iterations']} iterations)" if ok_b else "—"
            peer_parts = []
            if m1.get("status") == "ok":
                peer_parts.append(f"1 thread {m1['wall_s']:.2f} s")
            if md.get("status") == "ok":
                peer_parts.append(f"default Rayon pool ({c.get('threads', {}).get('cpu_count', '?')} CPUs) {md['wall_s']:.2f} s"
                                  + (f" (ratio {md['ratio_wall']:.2f}x)" if md.get("ratio_wall") is not None else ""))
            if m1.get("status") == "ok":
                ratio, meaning = m1.get("ratio_wall"), "mirt 1-thread s / bayesirt s (wall)"
            else:  # single-thread rows skipped or failed: fall back to default threading, and say so
                ratio, meaning = md.get("ratio_wall"), "mirt (default threads) s / bayesirt s (wall); 1-thread row missing"
            failed = [f"{n}: {r.get('error', r.get('status'))}" for n, r in
                      ((f"mirt se={se}", md), (f"mirt se={se}, 1 thread", m1)) if r and r.get("status") != "ok"]
            status = ("ok" if ok_b and not failed else f"bayesirt failed: {b.get('error', b.get('status'))}" if not ok_b
                      else "peer failed: " + "; ".join(failed))
            ref = md if md.get("status") == "ok" else m1
            quality = []
            if ok_b and ref.get("status") == "ok" and "vs_bayesirt" in ref:
                vb = ref["vs_bayesirt"]
                if case == "2pl":
                    quality.append(f"vs mirt: Δ loglik {ref['loglik_diff_vs_bayesirt']:+.1e}, max abs Δa "
                                   f"{vb['a']['max_abs_diff']:.1e}, max abs Δb {vb['b']['max_abs_diff']:.1e}")
                    if se and ref.get("se_max_rel_diff_vs_bayesirt"):
                        quality.append("max rel Δ SE " + ", ".join(f"{k} {x:.1e}" for k, x in
                                                                   ref["se_max_rel_diff_vs_bayesirt"].items() if x is not None))
                else:
                    pr = rows.get("mirt + Beta(5,17) prior se=False", {})
                    quality.append(f"mirt's 3PL is plain ML (no Beta(5, 17) guessing prior): Δ loglik "
                                   f"{ref['loglik_diff_vs_bayesirt']:+.1f}, a different optimum")
                    if pr.get("status") == "ok" and "vs_bayesirt" in pr:
                        quality.append(f"same objective (mirt + Beta(5,17) prior, generic EM, {pr['wall_s']:.0f} s): "
                                       f"Δ objective {pr['objective_diff_vs_bayesirt']:+.1e}, max abs Δa "
                                       f"{pr['vs_bayesirt']['a']['max_abs_diff']:.1e}")
            if ok_b and b.get("corr_truth"):
                names = ("a", "b", "c") if case == "3pl" else ("a", "b")
                quality.append(f"r(truth) {'/'.join(names)}: bayesirt " + " / ".join(f"{b['corr_truth'][k]:.3f}" for k in names)
                               + (", mirt " + " / ".join(f"{ref['corr_truth'][k]:.3f}" for k in names)
                                  if ref.get("corr_truth") else ""))
            if case == "2pl" and lsat7:
                quality.append(lsat7)
            out.append(benchmark_row(task=task, data_size=size, bayesirt=bay, peer=peer,
                                     peer_figure="; ".join(peer_parts) or "—", ratio=ratio, ratio_meaning=meaning,
                                     target_met=None if ratio is None else bool(ratio >= 1),
                                     quality="; ".join(quality) or "—", status=status, **common))
    return out


# ------------------------------------------------------------------------------------------ main
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", type=int, default=80)
    p.add_argument("--models", type=int, default=5000)
    p.add_argument("--seed", type=int, default=20261129)
    p.add_argument("--quadrature", type=int, default=61)
    p.add_argument("--repeats", type=int, default=3, help="timed repeats of each simulated-data row (median)")
    p.add_argument("--repeats-small", type=int, default=9, help="timed repeats of each LSAT7 row (median)")
    p.add_argument("--prior-repeats", type=int, default=1, help="repeats of the slow 3PL mirt + Beta prior row")
    p.add_argument("--quick", action="store_true", help="1,000 models x 20 items, 1 repeat (3 for LSAT7)")
    p.add_argument("--cases", nargs="*", default=["lsat7", "2pl", "3pl"], choices=["lsat7", "2pl", "3pl"])
    p.add_argument("--skip", nargs="*", default=[], choices=["mirt-prior", "single-thread"])
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/mml_mirt.json"))
    p.add_argument("--render", action="store_true", help="only re-render the Markdown from an existing --out JSON")
    p.add_argument("--worker", choices=["lsat7", "2pl", "3pl"], help=argparse.SUPPRESS)
    p.add_argument("--worker-out", help=argparse.SUPPRESS)
    p.add_argument("--worker-tol", type=float, help=argparse.SUPPRESS)
    p.add_argument("--worker-repeats", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    if args.render:
        result = json.loads(args.out.read_text())
        result["benchmark_rows"] = benchmark_rows(result)
        write_results(args.out, result, markdown, echo=True)
        return 0
    if args.quick:
        args.items, args.models, args.repeats, args.repeats_small = 20, 1000, 1, 3

    t_start = time.perf_counter()
    source = source_state()
    load_start = [round(x, 2) for x in os.getloadavg()]
    threads_before = _nthreads()
    cases = {}
    for case in args.cases:
        try:
            cases[case] = run_case(case, args)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            cases[case] = {"status": "failed", "error": _err(e)}
    first = next((c["threads"] for c in cases.values() if "threads" in c), None)
    result = {
        "config": {k: getattr(args, k) for k in ("items", "models", "seed", "quadrature", "repeats", "repeats_small",
                                                 "prior_repeats", "quick", "cases", "skip")},
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "processor": platform.processor()},
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": _versions(),
        "bayesirt_source": source,
        "blas_main_process": _blas_info(),
        "env_RAYON_NUM_THREADS": os.environ.get("RAYON_NUM_THREADS"),
        "process_threads_at_start": threads_before,
        "mirt_rayon_threads_added": (first["process_threads_after"] - first["process_threads_before_mirt_warmup"]) if first else None,
        "loadavg_start": load_start,
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "cases": cases,
        "total_wall_s": time.perf_counter() - t_start,
    }
    result["benchmark_rows"] = benchmark_rows(result)
    write_results(args.out, result, markdown, echo=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
