"""Side-by-side benchmark: bayesirt's 2PL vs the naive PyMC 2PL (documentation style).

Runs in one run of this script (nutpie samples its chains in threads of this process, PyMC's NUTS in
worker processes), on one simulated 2PL data set (``simulate_pl``):

NUTS rows
  * ``bayesirt``          -- ``fit(responses, "2pl", method="nuts")`` (nutpie, fused-Potential likelihood)
  * ``naive + nutpie``    -- the naive model compiled and sampled by nutpie (isolates the sampler)
  * ``naive + PyMC NUTS`` -- the naive model with ``pm.NUTS`` / ``pm.sample`` (the baseline)

The naive model is ``pm.Bernoulli("y", logit_p=a[:, None] * theta[None, :] + d[:, None])``
over the dense item x model matrix with the same priors as ``models/2pl.toml``
(theta ~ N(0, 1), a ~ LogNormal(0, 0.5), d ~ N(0, 2)).

For each: compile time, sampling time (tuning + draws), minimum bulk ESS over every element of
theta, discrimination and intercept, min bulk ESS per second of sampling, max R-hat,
divergences, and correlation of posterior means with the truth. ``ratio`` is
ESS/s divided by the naive PyMC ESS/s.

ADVI rows
  * ``bayesirt ADVI`` -- ``fit(..., method="advi")`` (Adam 0.01, loss-plateau stop)
  * ``naive ADVI``    -- ``pm.fit(method="advi")`` on the naive model, PyMC defaults
                         (adagrad_window) + ``CheckParametersConvergence()``, n cap 50,000
Reported: time to fit, iterations, converged, and correlation / RMSE of the ADVI posterior means
against bayesirt's NUTS posterior means, plus the median ratio ADVI sd / NUTS sd.

Usage::

    python benchmarks/nuts_2pl.py                # 300 models x 1,000 items (slow: tens of minutes)
    python benchmarks/nuts_2pl.py --quick        # 60 x 200, 200 draws / 200 tune (smoke run)

Writes ``--out`` (JSON) and the same stem with ``.md`` (Markdown table), and prints the table.
Every run is wrapped in try/except: a failing run is reported as failed, never dropped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from _common import benchmark_row, fmt as _f, source_state, versions, write_results  # noqa: E402 (benchmarks/ is on sys.path when run as a script)

AXES_NUTS = ("theta", "discrimination", "intercept")  # the free parameters: ESS / R-hat over these
AXES_TRUTH = ("theta", "discrimination", "difficulty")  # compared with the truth / NUTS reference
PACKAGES = ("bayesirt", "pymc", "pytensor", "nutpie", "arviz", "arviz-stats", "numpy", "xarray", "numba")


# --------------------------------------------------------------------------------------- helpers
def _cpu() -> float:
    """CPU seconds used so far by this process (all threads) and its finished, waited-for children
    (PyMC's chain processes). Unlike wall time, it is not inflated by other jobs on the machine."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class _CpuTimed:
    """Wrap ``module.attr`` (e.g. ``nutpie.sample``, ``pymc.fit``) for the duration of a ``fit``
    call to record the CPU time of that step (fit only reports wall time). Only the benchmark
    process is affected; bayesirt is not edited."""

    def __init__(self, module, attr: str):
        self.module, self.attr, self.cpu_s = module, attr, None

    def __enter__(self):
        self._orig = orig = getattr(self.module, self.attr)

        def timed(*a, **k):
            c0 = _cpu()
            try:
                return orig(*a, **k)
            finally:
                self.cpu_s = _cpu() - c0

        setattr(self.module, self.attr, timed)
        return self

    def __exit__(self, *exc):
        setattr(self.module, self.attr, self._orig)
        return False


def _versions() -> dict:
    return versions(PACKAGES)


def _posterior(tree):
    """The posterior group as an xarray Dataset (DataTree or InferenceData)."""
    post = tree["posterior"]
    return post.to_dataset() if hasattr(post, "to_dataset") else post


def _with_difficulty(post):
    """Add difficulty = -d / a when the posterior lacks it (the naive model has no Deterministic)."""
    if "difficulty" not in post:
        post = post.assign(difficulty=-post["intercept"] / post["discrimination"])
    return post


def _rename_naive(post):
    return post.rename({k: v for k, v in {"a": "discrimination", "d": "intercept"}.items() if k in post})


def _min_over(ds) -> float:
    return float(min(np.nanmin(np.asarray(ds[v].values)) for v in ds.data_vars))


def _max_over(ds) -> float:
    return float(max(np.nanmax(np.asarray(ds[v].values)) for v in ds.data_vars))


def _as_dataset(x):
    return x.to_dataset() if hasattr(x, "to_dataset") else x


def nuts_diagnostics(post, sample_stats, sample_s: float, truth, sample_cpu_s=None) -> dict:
    """ESS, R-hat, divergences and recovery of the truth from a NUTS posterior Dataset."""
    import arviz as az

    post = _with_difficulty(post)
    free = post[list(AXES_NUTS)]
    ess = _as_dataset(az.ess(free, method="bulk"))
    rhat = _as_dataset(az.rhat(free))
    min_ess = _min_over(ess)
    out = {
        "min_bulk_ess": min_ess,
        "min_bulk_ess_by_var": {v: float(np.nanmin(ess[v].values)) for v in AXES_NUTS},
        "median_bulk_ess_by_var": {v: float(np.nanmedian(ess[v].values)) for v in AXES_NUTS},
        "ess_per_s": min_ess / sample_s,
        "sample_cpu_s": sample_cpu_s,
        "ess_per_cpu_s": min_ess / sample_cpu_s if sample_cpu_s else None,
        "max_rhat": _max_over(rhat),
        "max_rhat_by_var": {v: float(np.nanmax(rhat[v].values)) for v in AXES_NUTS},
        "divergences": int(np.asarray(sample_stats["diverging"].values).sum()) if sample_stats is not None else None,
    }
    if sample_stats is not None and "tree_depth" in sample_stats:
        out["mean_tree_depth"] = float(np.asarray(sample_stats["tree_depth"].values).mean())
    elif sample_stats is not None and "depth" in sample_stats:
        out["mean_tree_depth"] = float(np.asarray(sample_stats["depth"].values).mean())
    if sample_stats is not None and "n_steps" in sample_stats:
        out["mean_leapfrog_steps"] = float(np.asarray(sample_stats["n_steps"].values).mean())
    out["corr_truth"] = {v: float(np.corrcoef(post[v].mean(("chain", "draw")).values, truth[v].values)[0, 1]) for v in AXES_TRUTH}
    return out


def _stats(tree):
    try:
        return _as_dataset(tree["sample_stats"])
    except KeyError:
        return None


# ----------------------------------------------------------------------------------- naive model
def naive_model(responses):
    """The 2PL as PyMC's documentation writes it: a dense Bernoulli over the item x model matrix."""
    import pymc as pm

    y = responses["responses"].values
    if (y < 0).any():
        raise ValueError("the naive model takes a complete matrix; this data set has missing cells")
    coords = {"item": responses["item"].values, "model": responses["model"].values}
    with pm.Model(coords=coords) as model:
        theta = pm.Normal("theta", 0.0, 1.0, dims="model")
        a = pm.LogNormal("a", 0.0, 0.5, dims="item")
        d = pm.Normal("d", 0.0, 2.0, dims="item")
        pm.Bernoulli("y", logit_p=a[:, None] * theta[None, :] + d[:, None], observed=y, dims=("item", "model"))
    return model


# -------------------------------------------------------------------------------------- the runs
def run_bayesirt_nuts(responses, truth, args, ref):
    import nutpie

    from bayesirt.inference.fitting import fit

    t0 = time.perf_counter()
    with _CpuTimed(nutpie, "sample") as cpu:
        tree = fit(responses, "2pl", method="nuts", draws=args.draws, tune=args.tune, chains=args.chains,
                   seed=args.seed, progress=False)
    wall = time.perf_counter() - t0
    timings = json.loads(tree.attrs["bayesirt_timings"])
    post = _posterior(tree)
    ref["bayesirt NUTS"] = post
    out = {"compile_s": timings["compile_s"], "sample_s": timings["sample_s"], "build_s": timings["build_s"],
           "wall_s": wall}
    out |= nuts_diagnostics(post, _stats(tree), timings["sample_s"], truth, cpu.cpu_s)
    return out


def run_naive_nutpie(responses, truth, args, ref):
    import nutpie

    t0 = time.perf_counter()
    model = naive_model(responses)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    compiled = nutpie.compile_pymc_model(model)
    compile_s = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), _cpu()
    tree = nutpie.sample(compiled, draws=args.draws, tune=args.tune, chains=args.chains, cores=args.chains,
                         seed=args.seed, save_warmup=False, progress_bar=False)
    sample_s, sample_cpu = time.perf_counter() - t0, _cpu() - c0
    post = _rename_naive(_posterior(tree))
    ref["naive nutpie"] = post
    out = {"compile_s": compile_s, "sample_s": sample_s, "build_s": build, "wall_s": build + compile_s + sample_s}
    out |= nuts_diagnostics(post, _stats(tree), sample_s, truth, sample_cpu)
    return out


def run_naive_pymc(responses, truth, args, ref):
    import pymc as pm

    t0 = time.perf_counter()
    model = naive_model(responses)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    with model:
        step = pm.NUTS()  # compiles logp + gradient
    compile_s = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), _cpu()
    with model:
        # compute_convergence_checks=False so the timed span is sampling only (ESS/R-hat are computed
        # below for every row the same way).
        tree = pm.sample(draws=args.draws, tune=args.tune, chains=args.chains, cores=args.chains,
                         random_seed=args.seed, step=step, progressbar=False, compute_convergence_checks=False)
    sample_s, sample_cpu = time.perf_counter() - t0, _cpu() - c0
    post = _rename_naive(_posterior(tree))
    ref["naive PyMC"] = post
    out = {"compile_s": compile_s, "sample_s": sample_s, "build_s": build, "wall_s": build + compile_s + sample_s}
    out |= nuts_diagnostics(post, _stats(tree), sample_s, truth, sample_cpu)
    return out


def advi_agreement(post, nuts_post) -> dict:
    post, nuts_post = _with_difficulty(post), _with_difficulty(nuts_post)
    out = {"corr_nuts": {}, "rmse_nuts": {}, "sd_ratio_median": {}}
    for v in AXES_TRUTH:
        m_a = post[v].mean(("chain", "draw")).values
        m_n = nuts_post[v].mean(("chain", "draw")).values
        s_a = post[v].std(("chain", "draw")).values
        s_n = nuts_post[v].std(("chain", "draw")).values
        out["corr_nuts"][v] = float(np.corrcoef(m_a, m_n)[0, 1])
        out["rmse_nuts"][v] = float(np.sqrt(np.mean((m_a - m_n) ** 2)))
        out["sd_ratio_median"][v] = float(np.median(s_a / s_n))
    return out


def run_bayesirt_advi(responses, truth, args, ref):
    import pymc as pm

    from bayesirt.inference.fitting import fit

    t0 = time.perf_counter()
    with _CpuTimed(pm, "fit") as cpu:
        tree = fit(responses, "2pl", method="advi", draws=args.draws, seed=args.seed, advi_iterations=args.advi_cap,
                   progress=False)
    wall = time.perf_counter() - t0
    timings = json.loads(tree.attrs["bayesirt_timings"])
    post = _posterior(tree)
    ref["bayesirt ADVI"] = post
    return {"fit_s": timings["fit_s"], "fit_cpu_s": cpu.cpu_s, "build_s": timings["build_s"], "wall_s": wall,
            "iterations": int(tree.attrs["advi_iterations_run"]), "converged": bool(tree.attrs["advi_converged"]),
            "final_loss": float(tree.attrs.get("advi_final_loss", np.nan))}


def run_naive_advi(responses, truth, args, ref):
    import pymc as pm
    from pymc.variational.callbacks import CheckParametersConvergence

    class _Recording(CheckParametersConvergence):
        stopped_at = None

        def __call__(self, approx, loss, i):
            try:
                super().__call__(approx, loss, i)
            except StopIteration:
                self.stopped_at = i
                raise

    t0 = time.perf_counter()
    model = naive_model(responses)
    build = time.perf_counter() - t0
    cb = _Recording()
    t0, c0 = time.perf_counter(), _cpu()
    with model:
        approx = pm.fit(n=args.advi_cap, method="advi", random_seed=args.seed, progressbar=False, callbacks=[cb])
    fit_s, fit_cpu = time.perf_counter() - t0, _cpu() - c0
    hist = np.asarray(approx.hist)
    tree = approx.sample(args.draws, random_seed=args.seed)
    post = _rename_naive(_posterior(tree))
    ref["naive ADVI"] = post
    return {"fit_s": fit_s, "fit_cpu_s": fit_cpu, "build_s": build, "wall_s": build + fit_s, "iterations": int(hist.size),
            "converged": cb.stopped_at is not None,
            "final_loss": float(np.mean(hist[-500:])) if hist.size else float("nan")}


def gradient_cost(responses, args) -> dict:
    """Time one logp + gradient evaluation of each formulation, in PyMC's C backend (what
    ``pm.NUTS`` calls) and in the Numba function nutpie samples with, at one random point.
    This isolates the cost of the model formulation from the sampler and from MCMC noise."""
    import nutpie
    import pymc as pm  # noqa: F401

    from bayesirt.models.logistic import build_logistic
    from bayesirt.models.specs import load_spec

    rng = np.random.default_rng(args.seed)
    models = {"bayesirt (fused Potential)": build_logistic(responses, load_spec("2pl")),
              "naive (dense Bernoulli)": naive_model(responses)}
    out: dict = {"evals": args.grad_evals, "rows": {}}
    values, fns = {}, {}
    for name, model in models.items():
        ip = model.initial_point()
        n = sum(int(np.size(ip[v.name])) for v in model.value_vars)
        x = rng.normal(0.0, 0.3, n)  # a point in each model's own (unconstrained) coordinates
        c_fn = model.logp_dlogp_function(ravel_inputs=True)
        c_fn.set_extra_values({})
        compiled = nutpie.compile_pymc_model(model)
        fns[(name, "PyMC C")] = lambda f=c_fn: f(x)
        fns[(name, "nutpie Numba")] = lambda c=compiled: c.logp_func(x)
    for key, fn in fns.items():
        logp, grad = fn()
        values[key] = (float(logp), np.asarray(grad))
        for _ in range(3):
            fn()
    # Round-robin: every repetition evaluates all four functions, so drift in machine speed
    # (shared host, frequency changes) hits them alike.
    wall = {k: [] for k in fns}
    cpu = {k: [] for k in fns}
    for _ in range(args.grad_evals):
        for key, fn in fns.items():
            t0, c0 = time.perf_counter(), time.thread_time()
            fn()
            wall[key].append(time.perf_counter() - t0)
            cpu[key].append(time.thread_time() - c0)
    for (name, backend) in fns:
        out["rows"][f"{name} / {backend}"] = {
            "model": name, "backend": backend,
            "median_ms": 1e3 * float(np.median(wall[(name, backend)])),
            "median_cpu_ms": 1e3 * float(np.median(cpu[(name, backend)])),
            "min_cpu_ms": 1e3 * float(np.min(cpu[(name, backend)])),
            "q10_q90_cpu_ms": [1e3 * float(q) for q in np.quantile(cpu[(name, backend)], [0.1, 0.9])],
        }
    # The two backends of one model must agree; the two models are parameterized differently
    # (bayesirt samples theta as mean + zero-sum deviation), so their equivalence is a test
    # (tests/test_logistic.py), not a number here.
    pairs = [(values[(m, "PyMC C")], values[(m, "nutpie Numba")]) for m in models]
    out["max_abs_logp_diff"] = max(abs(c[0] - n[0]) for c, n in pairs)
    out["max_abs_grad_diff"] = max(float(np.abs(c[1] - n[1]).max()) for c, n in pairs)
    return out


def gradient_markdown(grad) -> list:
    if not grad:
        return []
    if grad.get("status") != "ok":
        return ["## Cost of one logp + gradient evaluation", "", f"{grad.get('status', '?').upper()}: "
                f"{grad.get('error', '')}", ""]
    rows = grad["rows"]
    lines = ["## Cost of one logp + gradient evaluation", "",
             "| model | backend | median ms | median CPU ms | CPU ms 10%-90% | naive / this (same backend, median CPU) |",
             "|---|---|---:|---:|---:|---:|"]
    for r in rows.values():
        naive = rows.get(f"naive (dense Bernoulli) / {r['backend']}")
        speed = naive["median_cpu_ms"] / r["median_cpu_ms"] if naive else None
        q = r.get("q10_q90_cpu_ms")
        spread = f"{q[0]:.1f}-{q[1]:.1f}" if q else "—"
        lines.append(f"| {r['model']} | {r['backend']} | {r['median_ms']:.2f} | {r['median_cpu_ms']:.2f} | {spread} "
                     f"| {_f(speed, '{:.2f}x')} |")
    lines += ["", f"{grad['evals']} round-robin evaluations of each at one random point, single thread. The PyMC C and nutpie "
              f"functions of each model agree: max |logp diff| = {grad['max_abs_logp_diff']:.2e}, max |grad diff| = {grad['max_abs_grad_diff']:.2e}.", ""]
    return lines


# ------------------------------------------------------------------------------------- reporting
def markdown(result: dict) -> str:
    cfg, nuts, advi = result["config"], result["nuts"], result["advi"]
    lines = [
        f"# 2PL benchmark: bayesirt vs naive PyMC ({cfg['models']} models x {cfg['items']} items)",
        "",
        f"{cfg['chains']} chains x ({cfg['tune']} tune + {cfg['draws']} draws), seed {cfg['seed']}; "
        f"{result['machine']['platform']}, {result['machine']['cpu_count']} CPUs; {result['date']}. "
        f"Total wall time {result['total_wall_s']:.0f} s.",
        "",
        *([f"bayesirt source: {src.get('head')} (uncommitted under bayesirt/: {len(src.get('uncommitted') or [])})", ""]
          if (src := result.get("bayesirt_source")) else []),
        "## NUTS",
        "",
        "| run | compile s | sample s | sample CPU s | CPU s / draw | min bulk ESS (theta / a / d) | ESS/s "
        "| ratio vs naive PyMC | ESS/CPU-s | CPU ratio | max R-hat | divergences | mean leapfrog steps "
        "| r(theta) | r(a) | r(b) |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    n_iter = cfg["chains"] * (cfg["tune"] + cfg["draws"])
    for name, r in nuts.items():
        if r.get("status") != "ok":
            lines.append(f"| {name} | {r.get('status', '?').upper()}: {r.get('error', '')} |" + " |" * 14)
            continue
        c, by = r["corr_truth"], r["min_bulk_ess_by_var"]
        cpu = r.get("sample_cpu_s")
        lines.append(
            f"| {name} | {_f(r['compile_s'])} | {_f(r['sample_s'], '{:.0f}')} | {_f(cpu, '{:.0f}')} "
            f"| {_f(cpu / n_iter if cpu else None, '{:.3f}')} "
            f"| **{r['min_bulk_ess']:.0f}** ({by['theta']:.0f} / {by['discrimination']:.0f} / {by['intercept']:.0f}) "
            f"| {_f(r['ess_per_s'], '{:.4f}')} | {_f(r.get('ratio_vs_naive_pymc'), '{:.2f}x')} "
            f"| {_f(r.get('ess_per_cpu_s'), '{:.4f}')} | {_f(r.get('cpu_ratio_vs_naive_pymc'), '{:.2f}x')} "
            f"| {_f(r['max_rhat'], '{:.3f}')} | {r['divergences']} | {_f(r.get('mean_leapfrog_steps'), '{:.1f}')} "
            f"| {c['theta']:.3f} | {c['discrimination']:.3f} | {c['difficulty']:.3f} |"
        )
    headline = result.get("headline_ratio")
    lines += [
        "",
        "ESS/s = min bulk ESS over all elements of theta, discrimination and intercept / sampling seconds "
        "(tuning + draws, both chains in parallel, wall clock). CPU s / draw counts tuning iterations too. ESS/CPU-s divides by the CPU seconds of the same span "
        "(all threads and chain processes), which other jobs on a shared machine do not inflate. r(.) = correlation of posterior means with the simulated truth "
        "(b = difficulty = -d/a).",
        "",
        f"**Headline: bayesirt ESS/s / naive PyMC ESS/s = {_f(headline, '{:.2f}x')}** (target >= 2x: "
        f"{'met' if headline is not None and headline >= 2 else 'NOT met' if headline is not None else 'n/a'}); "
        f"by CPU time: {_f(result.get('headline_ratio_cpu'), '{:.2f}x')}.",
        "",
        *gradient_markdown(result.get("gradient")),
        f"## ADVI (agreement with the {result.get('advi_reference', '?')} posterior)",
        "",
        "| run | fit s | fit CPU s | iterations | converged | r(theta) | r(a) | r(b) | RMSE theta | RMSE a | RMSE b "
        "| sd ratio theta | sd ratio a | sd ratio b |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in advi.items():
        if r.get("status") != "ok":
            lines.append(f"| {name} | {r.get('status', '?').upper()}: {r.get('error', '')} |" + " |" * 13)
            continue
        agree = r.get("agreement")
        if agree is None:
            cells = "| — " * 9
        else:
            cells = "".join(f"| {agree['corr_nuts'][v]:.3f} " for v in AXES_TRUTH)
            cells += "".join(f"| {agree['rmse_nuts'][v]:.3f} " for v in AXES_TRUTH)
            cells += "".join(f"| {agree['sd_ratio_median'][v]:.2f} " for v in AXES_TRUTH)
        lines.append(f"| {name} | {_f(r['fit_s'])} | {_f(r.get('fit_cpu_s'))} | {r['iterations']} | {'yes' if r['converged'] else 'no'} {cells}|")
    lines += [
        "",
        "fit s = time inside pm.fit (includes compiling the ELBO). sd ratio = median over elements of "
        "ADVI posterior sd / NUTS posterior sd.",
        "",
    ]
    return "\n".join(lines)


def _machine_description(result: dict) -> str:
    m = result["machine"]
    return f"{m['platform']}, {m['cpu_count']} CPUs, Python {result['versions']['python']}"


def benchmark_rows(result: dict) -> list[dict]:
    """BENCHMARKS.md rows of this run (``benchmarks/harness.py`` also calls this on JSONs written
    before the rows were stored), ratio = bayesirt min bulk ESS/s over the peer's, quality =
    correlation of posterior means with the truth: against the naive model sampled by nutpie (the
    control: the same sampler as bayesirt, so the ratio is what the model code gains) and against the
    naive model with PyMC's own NUTS (the baseline). The run's ADVI rows (bayesirt ADVI against
    ``pm.fit``) are not tabulated: they measured bayesirt's ADVI before its rewrite (constant Adam
    0.01) against a stopping rule that never fired at PyMC's defaults; the issue's ADVI target is
    against py-irt (``advi_pyirt.py``)."""
    cfg, nuts = result["config"], result["nuts"]
    pymc_v = result["versions"].get("pymc", "?")
    nutpie_v = result["versions"].get("nutpie", "?")
    size = f"{cfg['models']:,} models x {cfg['items']:,} items (simulated 2PL, complete)"
    common = dict(command=result["command"], date=result["date"], machine_description=_machine_description(result))
    bay = nuts.get("bayesirt (nutpie, fused likelihood)", {"status": "missing"})
    draws = f"{cfg['chains']} chains x ({cfg['tune']:,} tune + {cfg['draws']:,} draws), seed {cfg.get('seed', '?')}"
    naive = ("naive 2PL (dense pm.Bernoulli over the item x model matrix, theta ~ N(0, 1), a ~ LogNormal(0, 0.5), "
             "d ~ N(0, 2))")
    peers = (
        ("naive model + nutpie", f"{naive} + nutpie {nutpie_v} (nutpie.sample defaults: diag mass matrix adaptation; "
                                 f"{draws}, cores {cfg['chains']})", "naive model + nutpie ESS/s"),
        ("naive model + PyMC NUTS (baseline)", f"{naive} + PyMC {pymc_v} pm.NUTS() (defaults: target_accept 0.8, "
                                               f"diagonal mass matrix adaptation; {draws}, cores {cfg['chains']})",
         "naive PyMC ESS/s"),
    )

    def ess(r):
        return f"{r['ess_per_s']:.3g} ESS/s (min bulk ESS {r['min_bulk_ess']:.0f} in {r['sample_s']:,.0f} s sampling)"

    def corr(r):
        c = r["corr_truth"]
        return f"{c['theta']:.3f} / {c['discrimination']:.3f} / {c['difficulty']:.3f}"

    rows = []
    ok_b = bay.get("status") == "ok"
    for key, peer, meaning in peers:
        base = nuts.get(key, {"status": "missing"})
        ok_p = base.get("status") == "ok"
        quality = []
        if ok_b:
            quality.append(f"r(truth) theta / a / b: bayesirt {corr(bay)}")
        if ok_p:
            quality.append(f"peer {corr(base)}")
        if ok_b and ok_p:
            quality.append(f"max R-hat {bay['max_rhat']:.3f} vs {base['max_rhat']:.3f}")
        status = "ok" if ok_b and ok_p else (f"peer failed: {base.get('error', base.get('status'))}" if ok_b
                                             else f"bayesirt failed: {bay.get('error', bay.get('status'))}")
        ratio = bay["ess_per_s"] / base["ess_per_s"] if ok_b and ok_p else None
        cpu = (bay["ess_per_cpu_s"] / base["ess_per_cpu_s"]
               if ok_b and ok_p and bay.get("ess_per_cpu_s") and base.get("ess_per_cpu_s") else None)
        rows.append(benchmark_row(
            task="2PL posterior sampling, NUTS (min bulk ESS per second)",
            data_size=f"{size}; {draws}",
            bayesirt=(f"{ess(bay)}; fit(..., method='nuts'), nutpie {nutpie_v}" if ok_b else "—"),
            peer=peer, peer_figure=ess(base) if ok_p else "—", ratio=ratio,
            ratio_meaning=f"bayesirt ESS/s / {meaning} (wall)" + (f"; by CPU time {cpu:.1f}x" if cpu else ""),
            target="bayesirt >= 2x the naive model", target_met=None if ratio is None else bool(ratio >= 2),
            quality="; ".join(quality) or "—", status=status, **common))
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", type=int, default=1000)
    p.add_argument("--models", type=int, default=300)
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--tune", type=int, default=1000)
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--seed", type=int, default=20261129)
    p.add_argument("--advi-cap", type=int, default=50_000, help="iteration cap for both ADVI runs")
    p.add_argument("--quick", action="store_true", help="60 models x 200 items, 200 draws / 200 tune")
    p.add_argument("--grad-evals", type=int, default=30, help="evaluations per logp+gradient timing")
    p.add_argument("--grad-only", action="store_true",
                   help="only time logp+gradient; merge into an existing --out JSON and re-render its table")
    p.add_argument("--skip", nargs="*", default=[], help="run names to skip (e.g. 'naive PyMC')")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/nuts_2pl.json"))
    args = p.parse_args(argv)
    if args.quick:
        args.items, args.models, args.draws, args.tune = 200, 60, 200, 200

    import pymc  # noqa: F401  (import before timing anything)
    from bayesirt.data import simulate_pl

    t_start = time.perf_counter()
    source = source_state()
    responses, truth = simulate_pl("2pl", n_items=args.items, n_models=args.models, seed=args.seed)
    print(f"data: {args.items} items x {args.models} models, mean response {float((responses['responses'].values == 1).mean()):.3f}",
          flush=True)

    ref: dict = {}

    def gradient_section():
        print("--- gradient cost ...", flush=True)
        try:
            g = {"status": "ok"} | gradient_cost(responses, args)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            g = {"status": "failed", "error": f"{type(e).__name__}: {e}"[:200]}
        g["loadavg"] = list(os.getloadavg())
        return g

    if args.grad_only:
        gradient = gradient_section()
        result = json.loads(args.out.read_text()) if args.out.exists() else None
        if result is None or result["config"]["items"] != args.items or result["config"]["models"] != args.models:
            print(json.dumps(gradient, indent=2))
            print(f"(no matching {args.out} to merge into)")
            return 0
        result["gradient"] = gradient | {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "merged_later": True}
        result["benchmark_rows"] = benchmark_rows(result)
        write_results(args.out, result, markdown, echo=True)
        return 0

    gradient = gradient_section() if "gradient" not in args.skip else {"status": "skipped"}

    def attempt(name, fn):
        if name in args.skip:
            return {"status": "skipped"}
        print(f"--- {name} ...", flush=True)
        load0 = list(os.getloadavg())
        t0 = time.perf_counter()
        try:
            r = {"status": "ok"} | fn(responses, truth, args, ref)
        except Exception as e:  # noqa: BLE001  (a failing peer is reported, never dropped)
            traceback.print_exc()
            r = {"status": "failed", "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]}
        r["loadavg_before_after"] = [load0, list(os.getloadavg())]  # other processes on the machine skew timings
        print(f"--- {name} done in {time.perf_counter() - t0:.1f} s: "
              f"{ {k: v for k, v in r.items() if not isinstance(v, dict)} }", flush=True)
        return r

    nuts = {
        "bayesirt (nutpie, fused likelihood)": attempt("bayesirt", run_bayesirt_nuts),
        "naive model + nutpie": attempt("naive nutpie", run_naive_nutpie),
        "naive model + PyMC NUTS (baseline)": attempt("naive PyMC", run_naive_pymc),
    }
    base = nuts["naive model + PyMC NUTS (baseline)"]
    for r in nuts.values():
        if r.get("status") == "ok" and base.get("status") == "ok":
            r["ratio_vs_naive_pymc"] = r["ess_per_s"] / base["ess_per_s"]
            if r.get("ess_per_cpu_s") and base.get("ess_per_cpu_s"):
                r["cpu_ratio_vs_naive_pymc"] = r["ess_per_cpu_s"] / base["ess_per_cpu_s"]
    bay = nuts["bayesirt (nutpie, fused likelihood)"]
    headline = bay.get("ratio_vs_naive_pymc")
    headline_cpu = bay.get("cpu_ratio_vs_naive_pymc")

    advi = {
        "bayesirt ADVI (Adam 0.01, loss plateau)": attempt("bayesirt ADVI", run_bayesirt_advi),
        "naive ADVI (PyMC defaults, CheckParametersConvergence)": attempt("naive ADVI", run_naive_advi),
    }
    reference = next((k for k in ("bayesirt NUTS", "naive nutpie", "naive PyMC") if k in ref), None)
    for key, name in zip(advi, ("bayesirt ADVI", "naive ADVI")):
        if advi[key].get("status") == "ok" and reference is not None:
            try:
                advi[key]["agreement"] = advi_agreement(ref[name], ref[reference])
            except Exception as e:  # noqa: BLE001
                advi[key]["agreement_error"] = f"{type(e).__name__}: {e}"

    result = {
        "config": {k: getattr(args, k) for k in ("items", "models", "draws", "tune", "chains", "seed", "advi_cap", "quick")},
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "processor": platform.processor()},
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": _versions(),
        "bayesirt_source": source,
        "nuts": nuts,
        "gradient": gradient,
        "headline_ratio": headline,
        "headline_ratio_cpu": headline_cpu,
        "advi_reference": reference,
        "advi": advi,
        "total_wall_s": time.perf_counter() - t_start,
    }
    result["benchmark_rows"] = benchmark_rows(result)
    write_results(args.out, result, markdown, echo=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
