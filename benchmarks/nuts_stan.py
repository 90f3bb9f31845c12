"""Side-by-side benchmark: bayesirt's NUTS 2PL vs Stan (PyStan 3), in two formulations.

One simulated, complete 2PL matrix per size (``bayesirt.data.simulate_pl("2pl", ...)``, the same
data and seed for every row), the priors of bayesirt's ``models/2pl.toml`` (theta ~ N(0, 1),
a ~ LogNormal(0, 0.5), d ~ N(0, 2)) and the same chains, tuning and draws (default 2 chains x
(500 tune + 500 draws)) for every row:

  * ``bayesirt``       -- ``fit(responses, "2pl", method="nuts", ...)`` in this process: nutpie on
                          bayesirt's model (abilities as mean + zero-sum deviation, the shift moved
                          into the intercepts; ``bayesirt/models/logistic.py``) at bayesirt's defaults.
  * ``Stan reparam``   -- Stan given that same parameterization (``benchmarks/stan/2pl_reparam.stan``:
                          ``sum_to_zero_vector`` deviations, ``d_centered ~ normal(a * theta_mean, 2)``).
  * ``Stan naive``     -- the 2PL as the Stan User's Guide writes an IRT model
                          (``benchmarks/stan/2pl_naive.stan``: one vectorized ``bernoulli_logit``).
  * ``naive + nutpie`` -- the naive PyMC model of ``nuts_2pl.py`` compiled and sampled by nutpie
                          (control: what nutpie alone gives).

Stan runs in its own virtual environment, never in bayesirt's: ``benchmarks/.peer-venvs/stan``
(git-ignored), created on first use with the interpreter of bayesirt's venv and
``pip install pystan==3.14.0 numpy`` (PyStan 3.14 brings httpstan 4.17, i.e. Stan 2.39); an existing
venv that imports ``stan`` is reused (``--reinstall-peer`` re-creates it; ``make bench-stan`` runs
this script). Each Stan run is a subprocess of that venv: the data go in as JSON (long format:
``I``, ``M``, ``N``, ``ii``, ``mm``, ``y``), the draws come back as ``.npz``. Stan's settings are
PyStan's defaults (``hmc_nuts_diag_e_adapt``: diagonal metric, windowed adaptation, delta 0.8,
max depth 10, inits uniform(-2, 2) on the unconstrained scale; the model compiled by httpstan with
``-O3``), with the same chains, warmup, draws and seed as bayesirt. Every Stan run gets a fresh,
empty httpstan cache (``XDG_CACHE_HOME`` in a temporary folder), so its compile is timed and no
cached fit is reused (``--reuse-stan-build`` keeps one cache for the whole run, for development).

The bayesirt and naive + nutpie rows also run in subprocesses (of bayesirt's venv), with an empty
PyTensor ``compiledir`` and ``NUMBA_CACHE_DIR``, so their compile is timed from scratch as Stan's is
(``--warm-cache``: this user's caches instead).

Reported per row: compile s (bayesirt: PyMC model build + nutpie's numba compile; Stan:
``stan.build``), sampling s (tuning + draws; Stan: ``posterior.sample``, which includes PyStan's
transfer of the draws), wall s (bayesirt and nutpie: the whole ``fit`` / build + compile + sample
call; Stan: writing the data JSON plus the runner from after ``import stan`` to the draws on disk;
no row counts the interpreter's start-up and imports), minimum bulk ESS over every element of theta,
discrimination and intercept (``arviz.ess``, ArviZ 1.x / arviz-stats, computed here the same way
for every row), ESS per wall second and per sampling second, max R-hat, divergences, mean leapfrog
steps per draw, and the correlation of posterior means with the truth. Ratios: bayesirt ESS/s /
peer ESS/s, by wall time (compile included) and by sampling time. Per size also the CPU cost of
one logp + gradient of bayesirt's model with its fused kernel (``bayesirt.models.kernels``) and
with the PyTensor graph it replaces, and of the naive model.

Usage::

    python benchmarks/nuts_stan.py                          # 300x1000 and 300x300 (MODELSxITEMS), ~1 h on 2 cores
    python benchmarks/nuts_stan.py --sizes 300x300          # one size
    python benchmarks/nuts_stan.py --quick --out /tmp/nuts_stan_quick.json   # 50 x 100, 100 + 100 draws
    python benchmarks/nuts_stan.py --sizes 300x300 --update # remeasure one size, keep the others
    python benchmarks/nuts_stan.py --render                 # re-render the Markdown from the existing JSON
    python benchmarks/nuts_stan.py --sizes 300x1000 --data-seed 1000 --seed 1   # another dataset, sampler seed 1

Sizes are "MODELSxITEMS" (models = respondents), as in ``advi_pyirt.py``; "300x1000" is the
matrix of ``nuts_2pl.py`` (1,000 items answered by 300 models). Writes ``--out`` (JSON, with the
BENCHMARKS.md rows under ``benchmark_rows``) and the same stem with ``.md``. A row that fails
(Stan not installable, a crash) is reported as failed, never dropped.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # _common, nuts_2pl

from _common import (  # noqa: E402
    benchmark_row, command_line, ensure_peer_venv, fmt as _f, last_line as _short, loadavg as _load, machine, parse_size,
    peer_python, peer_versions, run_command as _run, source_state, versions, write_results,
)

PEER_VENV = HERE / ".peer-venvs" / "stan"
PEER_REQUIREMENTS = ("pystan==3.14.0", "numpy")
PEER_PACKAGES = ("pystan", "httpstan", "numpy")
PIP_TIMEOUT_S = 1800
STAN_PROGRAMS = {"reparam": HERE / "stan" / "2pl_reparam.stan", "naive": HERE / "stan" / "2pl_naive.stan"}
PACKAGES = ("bayesirt", "pymc", "pytensor", "nutpie", "arviz", "arviz-stats", "numpy", "xarray", "numba")
DEFAULT_SIZES = "300x1000,300x300"
QUICK_SIZES = "50x100"
AXES_NUTS = ("theta", "discrimination", "intercept")
AXES_TRUTH = ("theta", "discrimination", "difficulty")
TARGET_RATIO = 3.0  # issue 22: NUTS >= 3x Stan with the same reparameterization at 300 x 1,000, wall incl. compile
TARGET_SIZE = (300, 1000)
LOAD_LIMIT = 0.75  # per CPU, as advi_pyirt.py: above it the wall-time target is not judged

ROWS = {  # key -> label (the order is the run order)
    "bayesirt": "bayesirt fit (nutpie, reparameterized)",
    "stan_reparam": "Stan, bayesirt's reparameterization",
    "stan_naive": "Stan, naive model (vectorized)",
    "naive_nutpie": "naive PyMC model + nutpie (control)",
}


def _cpu() -> float:
    """CPU seconds of this process (all threads) and of its finished, waited-for children."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


# ---------------------------------------------------------------------------------- the Stan venv
#: Run in the Stan venv: the versions it holds (Stan's own from httpstan's headers), printed as JSON.
PEER_VERSIONS_CODE = ("import json, os, platform, re, httpstan, stan\nfrom importlib.metadata import version\n"
                      "out = {'python': platform.python_version()}\n"
                      f"for p in {PEER_PACKAGES!r}:\n    out[p] = version(p)\n"
                      "h = open(os.path.join(os.path.dirname(httpstan.__file__), 'include', 'stan', 'version.hpp')).read()\n"
                      "out['stan'] = '.'.join(re.search(r'define STAN_' + k + r' (\\d+)', h).group(1) for k in ('MAJOR', 'MINOR', 'PATCH'))\n"
                      "print(json.dumps(out))")


def _stan_versions() -> dict | None:
    """Versions inside the Stan venv and the C++ compiler's, or None when stan does not import there."""
    out = peer_versions(PEER_VENV, PEER_VERSIONS_CODE)
    if out is None:
        return None
    try:
        cxx = _run([os.environ.get("CXX", "g++"), "--version"], timeout=60).stdout.splitlines()
        out["c++ compiler"] = cxx[0] if cxx else "?"
    except Exception:  # noqa: BLE001
        out["c++ compiler"] = "?"
    return out


def ensure_stan_venv(reinstall: bool = False) -> dict:
    """Create (or reuse) the Stan venv (see ``_common.ensure_peer_venv``)."""
    return ensure_peer_venv(PEER_VENV, _stan_versions, [PEER_REQUIREMENTS], reinstall=reinstall, timeout=PIP_TIMEOUT_S)


# The program run by the Stan venv's Python: PyStan's public API only (stan.build, Model.sample).
PEER_RUNNER = r'''
import json, sys, time
import numpy as np
import stan

import aiohttp.client
import resource

def cpu():
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

t_start = time.perf_counter()  # after the imports (the interpreter's start-up is not timed for any row)
spec = json.load(open(sys.argv[1]))
data = json.load(open(spec["data_path"]))
code = open(spec["program"]).read()
# PyStan talks to its in-process httpstan server over HTTP with aiohttp's default 5-minute request
# timeout, which a C++ compile on a loaded machine can exceed; and httpstan gives stanc 1 s. Neither
# changes what Stan computes: the timeout is lifted, and a build that times out is retried, its
# time counted in build_s (attempts recorded).
aiohttp.client.DEFAULT_TIMEOUT = aiohttp.client.ClientTimeout(total=None, sock_connect=30)
t0, c0 = time.perf_counter(), cpu()
attempts = []
for attempt in range(5):
    try:
        posterior = stan.build(code, data=data, random_seed=spec["seed"])
        attempts.append("ok")
        break
    except TimeoutError as e:
        attempts.append(f"TimeoutError: {e}")
else:
    raise TimeoutError(f"stan.build timed out 5 times: {attempts}")
build_s, build_cpu_s = time.perf_counter() - t0, cpu() - c0  # stanc and g++ run as waited-for children
t0 = time.perf_counter()
fit = posterior.sample(num_chains=spec["chains"], num_warmup=spec["tune"], num_samples=spec["draws"], **spec["sample_args"])
sample_s = time.perf_counter() - t0
C, S = spec["chains"], spec["draws"]
arrays = {}
for name in spec["params"] + ["divergent__", "treedepth__", "n_leapfrog__", "stepsize__", "accept_stat__"]:
    v = np.asarray(fit[name])                        # param dims + (draws * chains,), chain-major
    v = v.reshape(*v.shape[:-1], C, S)
    v = np.moveaxis(v, (-2, -1), (0, 1))             # (chain, draw, *param dims)
    arrays[name] = v[..., 0] if name.endswith("__") or v.shape[2:] == (1,) and name in spec["scalars"] else v
np.savez(spec["out_path"], **arrays)
json.dump({"build_s": build_s, "build_cpu_s": build_cpu_s, "build_attempts": attempts, "sample_s": sample_s, "runner_s": time.perf_counter() - t_start},
          open(spec["json_out"], "w"))
'''


def stan_data(responses) -> dict:
    """The response matrix in the long format both Stan programs read (1-based indices, observed cells only)."""
    y = responses["responses"].values
    ii, mm = np.nonzero(y >= 0)
    return {"I": int(y.shape[0]), "M": int(y.shape[1]), "N": int(ii.size), "ii": (ii + 1).tolist(),
            "mm": (mm + 1).tolist(), "y": y[ii, mm].astype(int).tolist()}


def run_stan(kind: str, responses, truth, args, peer, workdir: Path) -> dict:
    """One Stan fit in the peer venv; the posterior is labelled like bayesirt's and diagnosed the same way."""
    import xarray as xr

    if not peer.get("ok"):
        raise RuntimeError(f"peer failed to install: {peer.get('reason', '?')}")
    wd = Path(tempfile.mkdtemp(prefix=f"stan_{kind}_", dir=workdir))
    t_data = time.perf_counter()
    (wd / "data.json").write_text(json.dumps(stan_data(responses)))
    data_s = time.perf_counter() - t_data
    params = ["theta", "a", "d"]
    spec = {"data_path": str(wd / "data.json"), "program": str(STAN_PROGRAMS[kind]), "seed": args.seed,
            "chains": args.chains, "tune": args.tune, "draws": args.draws, "sample_args": {},
            "params": params, "scalars": [], "out_path": str(wd / "draws.npz"), "json_out": str(wd / "timings.json")}
    (wd / "spec.json").write_text(json.dumps(spec))
    (wd / "runner.py").write_text(PEER_RUNNER)
    env = dict(os.environ)
    cache = workdir / "httpstan-cache" if args.reuse_stan_build else wd / "cache"
    env["XDG_CACHE_HOME"] = str(cache)  # a fresh httpstan cache: the compile is timed, no cached fit is reused
    t_proc, c_proc = time.perf_counter(), _cpu()
    p = _run([peer_python(PEER_VENV), wd / "runner.py", wd / "spec.json"], env=env, cwd=wd, timeout=args.stan_timeout)
    process_s, process_cpu_s = time.perf_counter() - t_proc, _cpu() - c_proc  # the runner and its chain processes
    (wd / "stderr.txt").write_text(p.stderr)
    if p.returncode != 0:
        log = HERE / "results" / "logs" / f"nuts_stan_{kind}_{responses.sizes['model']}x{responses.sizes['item']}.stderr"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(p.stderr)
        raise RuntimeError(f"PyStan run failed (rc {p.returncode}): {_short(p.stderr)} (stderr in {log.relative_to(HERE.parent)})")
    timings = json.loads((wd / "timings.json").read_text())
    grad = [float(x) for x in re.findall(r"Gradient evaluation took ([0-9.eE+-]+) seconds", p.stderr)]
    with np.load(wd / "draws.npz") as z:
        draws = {k: z[k] for k in z.files}
    coords = {"chain": np.arange(args.chains), "draw": np.arange(args.draws),
              "item": responses["item"].values, "model": responses["model"].values}
    post = xr.Dataset({"theta": (("chain", "draw", "model"), draws["theta"]),
                       "discrimination": (("chain", "draw", "item"), draws["a"]),
                       "intercept": (("chain", "draw", "item"), draws["d"])}, coords=coords)
    stats = xr.Dataset({"diverging": (("chain", "draw"), draws["divergent__"].astype(bool)),
                        "tree_depth": (("chain", "draw"), draws["treedepth__"]),
                        "n_steps": (("chain", "draw"), draws["n_leapfrog__"]),
                        "step_size": (("chain", "draw"), draws["stepsize__"])},
                       coords={"chain": coords["chain"], "draw": coords["draw"]})
    if not args.keep_stan_files:
        shutil.rmtree(wd, ignore_errors=True)
    # wall: writing the data + the runner from its start (after `import stan`) to the draws on disk
    out = {"compile_s": timings["build_s"], "sample_s": timings["sample_s"], "wall_s": data_s + timings["runner_s"],
           "process_s": process_s, "build_attempts": timings["build_attempts"],
           # CPU: the whole runner with its compiler and chain processes; sampling = that minus the build
           "cpu_s": process_cpu_s, "compile_cpu_s": timings["build_cpu_s"],
           "sample_cpu_s": process_cpu_s - timings["build_cpu_s"],
           "stan_gradient_s": grad, "step_size": [float(x) for x in stats["step_size"].isel(draw=0).values]}
    return out | diagnostics(post, stats, out, truth)


def run_bayesirt(responses, truth, args, call=None, variables=AXES_NUTS) -> dict:
    """bayesirt's ``fit`` of ``args.spec`` (or ``call()``, another public fitting call that returns a fit's
    DataTree), timed and diagnosed over ``variables``."""
    import nutpie

    from bayesirt.inference.fitting import fit

    sample_start = []
    original = nutpie.sample

    # fit starts nutpie.sample without blocking and waits for its chains (threads of this process) afterwards:
    # the sampling CPU time runs from that call to fit's return (the draws' DataTree built at the end included)
    def timed_sample(*a, **k):
        sample_start.append(_cpu())
        return original(*a, **k)

    nutpie.sample = timed_sample
    t0, c0 = time.perf_counter(), _cpu()
    try:
        tree = call() if call else fit(responses, getattr(args, "spec", "2pl"), method="nuts", draws=args.draws,
                                       tune=args.tune, chains=args.chains, seed=args.seed, progress=False)
    finally:
        nutpie.sample = original
    wall, cpu_end = time.perf_counter() - t0, _cpu()
    cpu, sample_cpu = cpu_end - c0, cpu_end - sample_start[0]
    timings = json.loads(tree.attrs["bayesirt_timings"])
    post = tree["posterior"].to_dataset()
    stats = tree["sample_stats"].to_dataset()
    out = {"compile_s": timings.get("build_s", 0.0) + timings.get("compile_s", 0.0), "sample_s": timings["sample_s"], "wall_s": wall,
           "cpu_s": cpu, "sample_cpu_s": sample_cpu, "compile_cpu_s": cpu - sample_cpu, "timings": timings, "settings": json.loads(tree.attrs["bayesirt_settings"]), "nutpie": nutpie.__version__}
    if "step_size" in stats:
        out["step_size"] = [float(x) for x in stats["step_size"].isel(draw=-1).values]
    return out | diagnostics(post, stats, out, truth, variables)


def run_naive_nutpie(responses, truth, args) -> dict:
    import nutpie

    from nuts_2pl import _rename_naive, naive_model

    t0, c0 = time.perf_counter(), _cpu()
    model = naive_model(responses)
    compiled = nutpie.compile_pymc_model(model)
    compile_s, compile_cpu = time.perf_counter() - t0, _cpu() - c0
    t1, c1 = time.perf_counter(), _cpu()
    tree = nutpie.sample(compiled, draws=args.draws, tune=args.tune, chains=args.chains, cores=args.chains,
                         seed=args.seed, save_warmup=False, progress_bar=False)
    sample_s, sample_cpu = time.perf_counter() - t1, _cpu() - c1
    post = _rename_naive(tree["posterior"].to_dataset())
    stats = tree["sample_stats"].to_dataset()
    out = {"compile_s": compile_s, "sample_s": sample_s, "wall_s": time.perf_counter() - t0,
           "cpu_s": compile_cpu + sample_cpu, "compile_cpu_s": compile_cpu, "sample_cpu_s": sample_cpu}
    return out | diagnostics(post, stats, out, truth)


def data_seed(args) -> int:
    """The generator seed of the simulated matrix: ``--data-seed``, by default ``--seed`` (the samplers' seed)."""
    return args.seed if getattr(args, "data_seed", None) is None else args.data_seed


def worker_env(out: Path, warm: bool) -> dict:
    """The environment of a worker subprocess: this one's, with empty PyTensor and numba caches under ``out``
    unless ``warm``."""
    env = dict(os.environ)
    if not warm:
        # base_compiledir, not only compiledir: PyTensor keeps its numba cache in base_compiledir/numba
        flags = [f for f in env.get("PYTENSOR_FLAGS", "").split(",") if f and not f.startswith(("compiledir=",
                                                                                             "base_compiledir="))]
        env["PYTENSOR_FLAGS"] = ",".join([*flags, f"base_compiledir={out / 'pytensor'}"])
        env["NUMBA_CACHE_DIR"] = str(out / "numba")
    return env


def run_in_worker(key: str, models: int, items: int, args, workdir: Path) -> dict:
    """Run a row of this process's venv (bayesirt or naive + nutpie) in a subprocess, by default with empty
    PyTensor and numba caches (a fresh ``base_compiledir``, which holds PyTensor's numba cache, and
    ``NUMBA_CACHE_DIR``), so its compile is timed from scratch as Stan's is."""
    out = Path(tempfile.mkdtemp(prefix=f"{key}_", dir=workdir))
    env = worker_env(out, args.warm_cache)
    cmd = [sys.executable, __file__, "--worker", key, "--sizes", f"{models}x{items}", "--draws", str(args.draws),
           "--tune", str(args.tune), "--chains", str(args.chains), "--seed", str(args.seed),
           "--data-seed", str(data_seed(args)), "--out", str(out / "row.json"),
           "--spec", getattr(args, "spec", "2pl"), "--missing", str(getattr(args, "missing", 0.0))]
    p = subprocess.run(cmd, env=env, cwd=HERE.parent, text=True, capture_output=True)
    sys.stdout.write(p.stdout[-2000:])
    if p.returncode != 0:
        raise RuntimeError(f"worker failed (rc {p.returncode}): {_short(p.stderr)}")
    row = json.loads((out / "row.json").read_text())
    shutil.rmtree(out, ignore_errors=True)
    return row | {"caches": "warm (this user's PyTensor/numba caches)" if args.warm_cache else
                  "cold (empty PyTensor base_compiledir and NUMBA_CACHE_DIR)"}


def worker(args) -> int:
    """``--worker ROW``: run one row in this process and write its numbers to ``--out``."""
    import pymc  # noqa: F401

    from bayesirt.data import simulate_pl

    (models, items), = [parse_size(s) for s in args.sizes.split(",")]
    responses, truth = simulate_pl(args.spec, n_items=items, n_models=models, seed=data_seed(args), missing=args.missing)
    row = (run_bayesirt if args.worker == "bayesirt" else run_naive_nutpie)(responses, truth, args)
    args.out.write_text(json.dumps(row, default=float))
    return 0


def gradient_cost(responses, evals: int, seed: int) -> dict:
    """CPU ms of one logp + gradient of bayesirt's 2PL (nutpie's numba function) with the fused kernel and
    with the PyTensor graph it replaces, and of the naive model, at one random point; round-robin repeats,
    so drift in machine speed hits all alike. Compiled with this user's caches (not timed)."""
    import nutpie

    from bayesirt.models.logistic import build_logistic
    from bayesirt.models.specs import load_spec
    from nuts_2pl import naive_model

    spec = load_spec("2pl")
    models = {"bayesirt, fused kernel (PyMC model; fit's direct model: nuts_numpyro.py's 1 logp+grad column)": build_logistic(responses, spec, fused_kernel=True),
              "bayesirt, PyTensor graph": build_logistic(responses, spec),
              "naive model (dense pm.Bernoulli)": naive_model(responses)}
    rng = np.random.default_rng(seed)
    fns, values = {}, {}
    x = None
    for name, model in models.items():
        compiled = nutpie.compile_pymc_model(model)
        if x is None or compiled.n_dim != x.size:  # the two bayesirt models share their coordinates
            x = rng.normal(0.0, 0.3, compiled.n_dim)
        fns[name] = (compiled.logp_func, x)
    for name, (f, xx) in fns.items():
        for _ in range(3):
            values[name] = f(xx)
    times = {k: [] for k in fns}
    for _ in range(evals):
        for name, (f, xx) in fns.items():
            c0 = time.thread_time()
            f(xx)
            times[name].append(time.thread_time() - c0)
    out = {"evals": evals, "rows": {k: {"median_cpu_ms": 1e3 * float(np.median(v)), "min_cpu_ms": 1e3 * float(np.min(v)),
                                        "q10_q90_cpu_ms": [1e3 * float(q) for q in np.quantile(v, [0.1, 0.9])]}
                                    for k, v in times.items()}}
    (lk, gk), (lg, gg) = (values[n] for n in list(models)[:2])
    out["kernel_minus_graph"] = {"logp": float(lk - lg), "max_abs_gradient": float(np.max(np.abs(np.asarray(gk) - gg)))}
    return out


def diagnostics(post, stats, times: dict, truth, variables=AXES_NUTS) -> dict:
    """Min bulk ESS over ``variables`` (default theta, discrimination and intercept; elements constant over
    the draws, which ArviZ gives NaN, are left out) (ArviZ), ESS per wall and sampling second, R-hat,
    divergences, leapfrog steps, and (with ``truth``) correlation of posterior means with the truth."""
    import arviz as az

    def as_ds(x):
        return x.to_dataset() if hasattr(x, "to_dataset") else x

    post = post[list(variables)]
    ess, rhat = as_ds(az.ess(post, method="bulk")), as_ds(az.rhat(post))
    min_ess = float(min(np.nanmin(ess[v].values) for v in variables))
    out = {
        "min_bulk_ess": min_ess,
        "min_bulk_ess_by_var": {v: float(np.nanmin(ess[v].values)) for v in variables},
        "median_bulk_ess_by_var": {v: float(np.nanmedian(ess[v].values)) for v in variables},
        "ess_per_wall_s": min_ess / times["wall_s"],
        "ess_per_sample_s": min_ess / times["sample_s"],
        "ess_per_cpu_s": min_ess / times["cpu_s"] if times.get("cpu_s") else None,
        "ess_per_sample_cpu_s": min_ess / times["sample_cpu_s"] if times.get("sample_cpu_s") else None,
        "max_rhat": float(max(np.nanmax(rhat[v].values) for v in variables)),
        "divergences": int(np.asarray(stats["diverging"].values).sum()),
    }
    if truth is not None:
        means = {"theta": post["theta"].mean(("chain", "draw")).values,
                 "discrimination": post["discrimination"].mean(("chain", "draw")).values,
                 "difficulty": (-post["intercept"] / post["discrimination"]).mean(("chain", "draw")).values}
        # none for a variable the fit reports as one value (the 1PL's common slope) or the truth holds constant
        out["corr_truth"] = {v: float(np.corrcoef(means[v], truth[v].values)[0, 1])
                             if np.shape(means[v]) == truth[v].shape and np.std(truth[v].values) > 0 else None
                             for v in AXES_TRUTH}
    for name, key in (("n_steps", "mean_leapfrog_steps"), ("tree_depth", "mean_tree_depth")):
        if name in stats:
            out[key] = float(np.asarray(stats[name].values).mean())
    if "mean_leapfrog_steps" in out:
        out["ess_per_1000_gradients"] = 1000 * min_ess / (out["mean_leapfrog_steps"] * stats.sizes["chain"] * stats.sizes["draw"])
    return out


# ---------------------------------------------------------------------------------------- output
def _source_label(src: dict | None, short: bool = False) -> str:
    if not src:
        return "?"
    head = (src.get("head") or "?")[:10 if short else 12]
    if short:
        n = len(src.get("uncommitted") or [])
        return f"run at {head}" + (f" + {n} uncommitted file(s) under bayesirt/" if n else "")
    return head + (f" + uncommitted bayesirt/ changes (sha256 {src.get('bayesirt_py_sha256')})" if src.get("uncommitted") else "")


def _stan_settings(cfg: dict, peer: dict) -> str:
    v = peer.get("versions") or {}
    return (f"Stan {v.get('stan', '?')} via PyStan {v.get('pystan', '?')} (httpstan {v.get('httpstan', '?')}, "
            f"{v.get('c++ compiler', '?')}, -O3), own venv {peer.get('path', '?')}; hmc_nuts_diag_e_adapt at PyStan defaults "
            f"(delta 0.8, max depth 10, windowed diagonal-metric adaptation, inits U(-2, 2)), {cfg['chains']} chains "
            f"in parallel x ({cfg['tune']} warmup + {cfg['draws']} draws), seed {cfg['seed']}, compile timed from an empty "
            "httpstan cache")


def _data_text(cfg: dict) -> str:
    return f"data seed {cfg.get('data_seed', cfg['seed'])}"


def make_rows(size: dict, result: dict) -> list[dict]:
    cfg, peer = result["config"], result["peer_venv"]
    run = size.get("run", {"date": result["date"], "command": result["command"], "source": result.get("bayesirt_source")})
    data_size = (f"{size['models']:,} models x {size['items']:,} items (simulated 2PL, complete, {_data_text(cfg)}); "
                 f"{cfg['chains']} chains x ({cfg['tune']} tune + {cfg['draws']} draws)")
    b = size["runs"]["bayesirt"]
    b_ok = b.get("status") == "ok"
    b_fig = (f"{b['ess_per_wall_s']:.3g} ESS/s wall incl. compile ({b['ess_per_sample_s']:.3g} sampling only): "
             f"min bulk ESS {b['min_bulk_ess']:.0f} in {b['wall_s']:.1f} s ({b['compile_s']:.1f} compile)") if b_ok else "—"
    rows = []
    pv = peer.get("versions") or {}
    labels = {"stan_reparam": f"Stan {pv.get('stan', '?')} (PyStan {pv.get('pystan', '?')}), bayesirt's reparameterization "
                              "(benchmarks/stan/2pl_reparam.stan)",
              "stan_naive": f"Stan {pv.get('stan', '?')} (PyStan {pv.get('pystan', '?')}), naive vectorized 2PL "
                            "(benchmarks/stan/2pl_naive.stan)",
              "naive_nutpie": f"naive PyMC 2PL (dense pm.Bernoulli) + nutpie {result['versions'].get('nutpie', '?')} (control)"}
    for key in ("stan_reparam", "stan_naive", "naive_nutpie"):
        r = size["runs"].get(key, {"status": "missing"})
        ok = r.get("status") == "ok"
        fig = (f"{r['ess_per_wall_s']:.3g} ESS/s wall ({r['ess_per_sample_s']:.3g} sampling only): min bulk ESS "
               f"{r['min_bulk_ess']:.0f} in {r['wall_s']:.1f} s ({r['compile_s']:.1f} compile)") if ok else "—"
        ratio = b["ess_per_wall_s"] / r["ess_per_wall_s"] if ok and b_ok else None
        ratio_s = b["ess_per_sample_s"] / r["ess_per_sample_s"] if ok and b_ok else None
        ratio_cpu = b["ess_per_cpu_s"] / r["ess_per_cpu_s"] if ok and b_ok and b.get("ess_per_cpu_s") and r.get("ess_per_cpu_s") else None
        is_target = key == "stan_reparam" and (size["models"], size["items"]) == TARGET_SIZE
        target = (f"bayesirt >= {TARGET_RATIO:g}x Stan with the same reparameterization (wall incl. compile)"
                  if is_target else "none at this size / formulation (ratio reported)")
        quality = []
        for name, x in (("bayesirt", b), ("peer", r)):
            if x.get("status") == "ok":
                c = x["corr_truth"]
                quality.append(f"{name}: max R-hat {x['max_rhat']:.3f}, {x['divergences']} divergences, "
                               f"r(truth) theta/a/b {c['theta']:.3f}/{c['discrimination']:.3f}/{c['difficulty']:.3f}")
        peer_settings = _stan_settings(cfg, peer) if key.startswith("stan") else (
            f"nutpie {result['versions'].get('nutpie', '?')} defaults, {cfg['chains']} chains x ({cfg['tune']} + {cfg['draws']})")
        status = "ok" if ok and b_ok else (r.get("error") or r.get("status")) if not ok else f"bayesirt failed: {b.get('error')}"
        met = None if not is_target or ratio is None else bool(ratio >= TARGET_RATIO)
        load = max([x[0] for x in (b, r) for pair in [x.get("loadavg_before_after") or []] for x in pair] or [0.0])
        if met is not None and load > LOAD_LIMIT * (os.cpu_count() or 1):
            # Other jobs may share the cores: the two rows ran at different moments, so their wall
            # times may have met different loads. The load average also counts the runs' own chains
            # (two busy processes on 2 CPUs bring it to about 2), so a high load alone does not void
            # a verdict: the CPU-time ratio, which other jobs barely move, must give the same one.
            cpu_met = ratio_cpu is not None and ratio_cpu >= TARGET_RATIO
            if cpu_met != met:
                status = (f"{status}; target not judged: 1-min load average up to {load:.1f} on {os.cpu_count()} "
                          f"CPUs around these runs and the CPU-time ratio ({_f(ratio_cpu, '{:.2f}x')}) gives the "
                          "other verdict; rerun on an idle machine")
                met = None
            else:
                status = (f"{status}; 1-min load average up to {load:.1f} on {os.cpu_count()} CPUs around these runs "
                          f"(their own chains count in it); the CPU-time ratio ({_f(ratio_cpu, '{:.2f}x')}) gives the "
                          "same verdict")
        rows.append(benchmark_row(
            task="2PL posterior sampling, NUTS vs " + ("Stan" if key.startswith("stan") else "nutpie on the naive model")
                 + " (min bulk ESS per second)",
            data_size=data_size, bayesirt=b_fig, peer=f"{labels[key]}; {peer_settings}", peer_figure=fig,
            ratio=ratio, ratio_meaning=f"bayesirt ESS/s / peer ESS/s, wall incl. compile; sampling only "
                                        f"{_f(ratio_s, '{:.2f}x')}; per CPU second incl. compile {_f(ratio_cpu, '{:.2f}x')}",
            target=target, target_met=met,
            quality="; ".join(quality) or "—", status=status, command=run["command"], date=run["date"],
            machine_description=result["machine"]))
        rows[-1]["source"] = _source_label(run.get("source"), short=True)
    return rows


def markdown(result: dict) -> str:
    cfg, peer = result["config"], result["peer_venv"]
    lines = [
        "# NUTS: bayesirt vs Stan (PyStan 3), same 2PL data, priors and draws",
        "",
        f"Command: `{result['command']}`  ",
        f"Date: {result['date']}; machine: {result['machine']}; load average at start {result['loadavg_start']}, "
        f"end {result['loadavg_end']}  ",
        f"bayesirt source: {_source_label(result.get('bayesirt_source'))}  ",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items()) + "  ",
        f"Stan venv: {'ok' if peer.get('ok') else 'FAILED: ' + str(peer.get('reason'))}; "
        + ", ".join(f"{k} {v}" for k, v in (peer.get("versions") or {}).items()),
        "",
        f"Priors theta ~ N(0, 1), a ~ LogNormal(0, 0.5), d ~ N(0, 2); {cfg['chains']} chains x ({cfg['tune']} tune + "
        f"{cfg['draws']} draws), seed {cfg['seed']}, {_data_text(cfg)}. Stan: {_stan_settings(cfg, peer)}.",
        "",
    ]
    for size in result["sizes"]:
        run = size.get("run", {})
        lines += [f"## {size['models']:,} models x {size['items']:,} items"
                  + (f" (measured {run.get('date')}, source {_source_label(run.get('source'))})" if run else ""), "",
                  "| run | compile s | sampling s | wall s | CPU s (compile) | min bulk ESS (theta / a / d) | ESS/s wall "
                  "| ESS/s sampling | ESS/CPU s | bayesirt ratio wall | ratio sampling | ratio CPU | leapfrog / draw "
                  "| ESS per 1k grads | max R-hat | div. | r truth theta/a/b | load before -> after |",
                  "|---|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
        b = size["runs"]["bayesirt"]
        ok_b = b.get("status") == "ok"

        def ratio(key, r):
            return _f(b[key] / r[key] if ok_b and b.get(key) and r.get(key) else None, "{:.2f}x")

        for key, label in ROWS.items():
            r = size["runs"].get(key, {"status": "missing"})
            if r.get("status") != "ok":
                lines.append(f"| {label} | {str(r.get('status', '?')).upper()}: {r.get('error', '')} |" + " |" * 17)
                continue
            by = r["min_bulk_ess_by_var"]
            c = r["corr_truth"]
            load = r.get("loadavg_before_after", [["?"], ["?"]])
            lines.append(
                f"| {label} | {r['compile_s']:.1f} | {r['sample_s']:.1f} | {r['wall_s']:.1f} | {_f(r.get('cpu_s'))} "
                f"({_f(r.get('compile_cpu_s'))}) | {r['min_bulk_ess']:.0f} "
                f"({by['theta']:.0f} / {by['discrimination']:.0f} / {by['intercept']:.0f}) | {r['ess_per_wall_s']:.3g} "
                f"| {r['ess_per_sample_s']:.3g} | {_f(r.get('ess_per_cpu_s'), '{:.3g}')} | {ratio('ess_per_wall_s', r)} "
                f"| {ratio('ess_per_sample_s', r)} | {ratio('ess_per_cpu_s', r)} | "
                f"{_f(r.get('mean_leapfrog_steps'))} | {_f(r.get('ess_per_1000_gradients'), '{:.1f}')} | "
                f"{r['max_rhat']:.3f} | {r['divergences']} | {c['theta']:.3f}/{c['discrimination']:.3f}/{c['difficulty']:.3f} "
                f"| {load[0][0]} -> {load[1][0]} |")
        lines.append("")
        g = size.get("gradient")
        if g and g.get("status") == "ok":
            lines += ["One logp + gradient (nutpie's numba function, CPU ms of one thread; median and 10-90% of "
                      f"{g['evals']} round-robin evaluations; load average before {g.get('loadavg_before')}):", "",
                      "| function | median CPU ms | 10%-90% |", "|---|---:|---|"]
            for name, x in g["rows"].items():
                lines.append(f"| {name} | {x['median_cpu_ms']:.2f} | {x['q10_q90_cpu_ms'][0]:.2f}-{x['q10_q90_cpu_ms'][1]:.2f} |")
            d = g["kernel_minus_graph"]
            lines += ["", f"Kernel minus graph at the same point: logp {d['logp']:.2e}, largest gradient difference "
                          f"{d['max_abs_gradient']:.1e}.", ""]
        stan_grad = {k: size["runs"][k].get("stan_gradient_s") for k in ("stan_reparam", "stan_naive")
                     if size["runs"].get(k, {}).get("status") == "ok"}
        if stan_grad:
            lines += ["Stan's own estimate of one gradient (its 'Gradient evaluation took' message, one evaluation per "
                      "chain): " + "; ".join(f"{ROWS[k]} {', '.join(f'{1e3 * v:.2f}' for v in vals)} ms"
                                             for k, vals in stan_grad.items()) + ".", ""]
    lines += [
        "compile s: bayesirt = model build + nutpie compile (numba); naive + nutpie = model build + compile; Stan = "
        "`stan.build` from an empty cache (stanc + C++). sampling s: tuning + draws (Stan: `posterior.sample`, including "
        "PyStan's transfer of the draws). wall s: the whole `fit` call (naive + nutpie: build, compile and sample; Stan: "
        "writing the data JSON plus the runner from after `import stan` to the draws on disk; no row counts the "
        "interpreter's start-up and imports). bayesirt and nutpie rows ran in subprocesses with empty PyTensor and "
        "numba caches (unless the config says warm_cache), Stan's from an empty httpstan cache. min bulk ESS: the smallest `arviz.ess(method='bulk')` over every element of theta, discrimination "
        "and intercept (computed in this process for every row). ratio: bayesirt ESS/s / the row's ESS/s. "
        "ESS per 1k grads: min bulk ESS per 1,000 logp+gradient evaluations of the kept draws (sampler efficiency "
        "without the cost of a gradient). CPU s: CPU time of all threads and processes of the row (Stan: the runner "
        "with its compiler and chain processes), less sensitive than wall time to other jobs on the machine; ratio "
        "CPU = bayesirt min bulk ESS per CPU second over the row's, compile included. load: 1-min load average "
        "before and after the row (2 CPUs; above 1.5 the wall-time verdict stands only when the CPU-time ratio "
        "gives the same one).",
        "",
    ]
    return "\n".join(lines)


def kept_sizes(previous: dict, measured: list[dict]) -> list[dict]:
    done = {(x["models"], x["items"]) for x in measured}
    run = {"date": previous.get("date"), "command": previous.get("command"), "source": previous.get("bayesirt_source")}
    return [({"run": run} | x) if "run" not in x else x for x in previous.get("sizes", [])
            if (x["models"], x["items"]) not in done]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=DEFAULT_SIZES, help=f"comma-separated MODELSxITEMS (default {DEFAULT_SIZES})")
    p.add_argument("--quick", action="store_true", help=f"smoke test: {QUICK_SIZES}, 100 tune + 100 draws")
    p.add_argument("--draws", type=int, default=500)
    p.add_argument("--tune", type=int, default=500)
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--seed", type=int, default=20261129, help="every sampler's seed (and the data seed)")
    p.add_argument("--data-seed", type=int, default=None, help="generator seed of the simulated matrices [--seed]: "
                                                               "nuts_numpyro.py --data-seeds's datasets, one per run")
    p.add_argument("--skip", default="", help=f"comma-separated rows to skip: {', '.join(ROWS)}, gradient")
    p.add_argument("--grad-evals", type=int, default=30, help="evaluations per logp + gradient timing")
    p.add_argument("--reinstall-peer", action="store_true", help="delete and re-create the Stan venv first")
    p.add_argument("--reuse-stan-build", action="store_true",
                   help="one httpstan cache for the whole run (compile times then exclude a cached build: development only)")
    p.add_argument("--keep-stan-files", action="store_true", help="keep each Stan run's data, draws and stderr")
    p.add_argument("--stan-timeout", type=float, default=4 * 3600, help="seconds per Stan run")
    p.add_argument("--render", action="store_true", help="only re-render the Markdown from the existing --out JSON")
    p.add_argument("--update", action="store_true", help="keep the sizes of the existing --out JSON this run does not measure")
    p.add_argument("--warm-cache", action="store_true",
                   help="bayesirt and nutpie rows with this user's PyTensor/numba caches (default: empty caches, "
                        "so their compile is timed from scratch as Stan's)")
    p.add_argument("--worker", choices=("bayesirt", "naive_nutpie"), help=argparse.SUPPRESS)
    p.add_argument("--spec", default="2pl", help=argparse.SUPPRESS)  # a worker's spec and missing share (nuts_numpyro.py)
    p.add_argument("--missing", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, default=HERE / "results" / "nuts_stan.json")
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    if args.render:
        result = json.loads(args.out.read_text())
        result["benchmark_rows"] = [row for s in result["sizes"] for row in make_rows(s, result)]
        write_results(args.out, result, markdown, echo=True)
        return 0
    if args.quick:
        args.sizes, args.draws, args.tune = QUICK_SIZES, 100, 100
    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if skip - set(ROWS) - {"gradient"}:
        p.error(f"unknown rows in --skip: {', '.join(sorted(skip - set(ROWS)))}")

    import pymc  # noqa: F401  (imported before anything is timed)

    from bayesirt.data import simulate_pl

    t_start, load_start = time.perf_counter(), _load()
    date = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    command = command_line(__file__, argv)
    print("--- Stan venv ...", flush=True)
    peer = ensure_stan_venv(args.reinstall_peer) if not {"stan_reparam", "stan_naive"} <= skip else {"ok": False, "reason": "skipped"}
    print(f"--- Stan venv: {'ok' if peer['ok'] else 'FAILED: ' + str(peer.get('reason'))} {peer.get('versions') or ''}", flush=True)
    source = source_state()
    workdir = Path(tempfile.mkdtemp(prefix="nuts_stan_"))
    runners = {"bayesirt": lambda r, t: run_in_worker("bayesirt", r.sizes["model"], r.sizes["item"], args, workdir),
               "stan_reparam": lambda r, t: run_stan("reparam", r, t, args, peer, workdir),
               "stan_naive": lambda r, t: run_stan("naive", r, t, args, peer, workdir),
               "naive_nutpie": lambda r, t: run_in_worker("naive_nutpie", r.sizes["model"], r.sizes["item"], args, workdir)}
    results = []
    try:
        for models, items in sizes:
            print(f"=== {models} models x {items} items", flush=True)
            responses, truth = simulate_pl("2pl", n_items=items, n_models=models, seed=data_seed(args))
            size = {"models": models, "items": items, "cells": models * items,
                    "mean_response": float((responses["responses"].values == 1).mean()), "runs": {}}
            if "gradient" not in skip:
                print("--- logp + gradient cost ...", flush=True)
                try:
                    size["gradient"] = {"status": "ok", "loadavg_before": _load()} | gradient_cost(responses, args.grad_evals, args.seed)
                except Exception as e:  # noqa: BLE001
                    traceback.print_exc()
                    size["gradient"] = {"status": "failed", "error": f"{type(e).__name__}: {e}"[:300]}
            for key, label in ROWS.items():
                if key in skip:
                    size["runs"][key] = {"status": "skipped"}
                    continue
                print(f"--- {label} ...", flush=True)
                l0, t0 = _load(), time.perf_counter()
                try:
                    r = {"status": "ok"} | runners[key](responses, truth)
                except Exception as e:  # noqa: BLE001 (a failing run is reported, never dropped)
                    traceback.print_exc()
                    r = {"status": "failed", "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]}
                r["loadavg_before_after"] = [l0, _load()]
                print(f"--- {label}: {time.perf_counter() - t0:.1f} s "
                      f"{ {k: v for k, v in r.items() if not isinstance(v, (dict, list))} }", flush=True)
                size["runs"][key] = r
            results.append(size)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    run = {"date": date, "command": command, "source": source}
    for s in results:
        s["run"] = run
    if args.update and args.out.exists():
        results = sorted(results + kept_sizes(json.loads(args.out.read_text()), results), key=lambda x: -x["cells"])
    result = {
        "command": command, "date": date, "machine": machine(), "versions": versions(PACKAGES),
        "bayesirt_source": source, "peer_venv": peer,
        "config": {"sizes": [f"{m}x{i}" for m, i in sizes], "draws": args.draws, "tune": args.tune,
                   "chains": args.chains, "seed": args.seed, "data_seed": data_seed(args), "quick": args.quick,
                   "skip": sorted(skip),
                   "reuse_stan_build": args.reuse_stan_build, "warm_cache": args.warm_cache},
        "loadavg_start": load_start, "loadavg_end": _load(), "total_wall_s": time.perf_counter() - t_start,
        "sizes": results,
    }
    result["benchmark_rows"] = [row for s in results for row in make_rows(s, result)]
    write_results(args.out, result, markdown, echo=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
