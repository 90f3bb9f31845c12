"""Side-by-side benchmark: bayesirt's mean-field ADVI 2PL vs py-irt's 2PL (Pyro SVI).

py-irt (PyPI ``py-irt``, Lalor & Rodriguez) fits IRT models by stochastic variational inference
in Pyro. It needs Python < 3.12 and PyTorch, so it runs in its own Python 3.11 virtual
environment, created on demand at ``benchmarks/.peer-venvs/pyirt`` (git-ignored):

  * a Python 3.11 is found by running the candidates (``/root/.pyenv/versions/3.11*/bin/python3``,
    ``python3.11``, ``python3``) and checking the version each reports;
  * ``python -m venv`` + ``pip install torch==2.13.0 py-irt`` (CPU wheel; when 2.13.0 cannot be
    installed, whatever ``torch`` pip resolves, and the version is recorded);
  * an existing venv that imports ``py_irt`` is reused.

If the venv cannot be made or py-irt fails to install or run, the run still finishes and its
row says "peer failed to install/run: <reason>"; the peer is never dropped.

Per data size (simulated complete 2PL matrices with known truth, ``simulate_pl("2pl", ...)``,
the same data and seed for both tools):

  * ``bayesirt`` -- ``fit(responses, SPEC, method="advi", seed=..., progress=False)`` in this
    process, at fit's defaults (Adam, learning rate annealed 0.1 -> 0.0008 on loss plateaus, loss
    windows of 200 steps). Timed: ``fit_s`` from the result's ``bayesirt_timings`` (the ADVI
    optimization, compiling the step and loss included; ``compile_s`` is that part) and the wall
    time of the whole call (model build, fit, 1,000 draws from the approximation, labelling). Each
    fit runs twice: the first is the row's figure, the repeat shows the same fit with PyTensor's
    on-disk numba cache warm. Whether the first fit found its compiled functions in that cache
    is recorded (``compile_cache``: "cold" when it wrote new cache files, i.e. compiled them).
    On large matrices ``advi_batch_size`` (observed cells per ADVI step) is passed when ``fit``
    accepts it.
  * ``py-irt`` -- the responses are written as py-irt's jsonlines
    (``{"subject_id": model, "responses": {item: 0/1}}`` per line), then a subprocess of the peer
    venv builds ``IrtModelTrainer(data_path=..., config=IrtConfig(model_type="2pl", ...))``
    (py-irt's own loader: ``load_s``) and runs ``trainer.train()`` (timed: ``fit_s``), py-irt's
    defaults unless overridden: 2,000 epochs of full-batch SVI, Adam lr 0.1 with exponential
    decay 0.9999 per epoch, ``priors="vague"``.

py-irt's 2PL (``py_irt/models/two_param_logistic.py``) is ``logit P = a * (theta - b)`` with
``theta ~ N(0, 1)``, ``b ~ N(0, 0.1)``, ``a ~ LogNormal(0, 0.1)`` and a mean-field guide
(Normal for theta and b, LogNormal for a). That is bayesirt's difficulty parameterization
(``logit P = a * theta + d``, ``b = -d / a``), with ``a > 0`` in both tools, so the orientation
is identified and the correlations with the truth are reported as they come (no sign flips).
Estimates compared: posterior means -- bayesirt's draws averaged; py-irt's variational means
(``loc_ability``, ``loc_diff``, ``exp(loc_slope + scale_slope**2 / 2)``). The correlations of
py-irt's exported point estimates (``disc = exp(loc_slope)``, the variational median) are
recorded too.

Two pairings, each a BENCHMARKS.md row with the target: defaults against defaults (bayesirt's
``2pl`` spec, py-irt's ``priors="vague"``), and hierarchical priors against hierarchical priors
(bayesirt's ``2pl-hierarchical`` spec, which learns the location and scale of log a and of b, against
py-irt's ``priors="hierarchical"``, which learns the same), the latter on matrices up to
``--pyirt-extra-max-cells``. py-irt's default priors are tight for this simulation (truth
b ~ N(0, 1), a ~ LogNormal(0, 0.5)); its hierarchical option recovers a and b better.

Usage::

    python benchmarks/advi_pyirt.py --quick --out /tmp/advi_pyirt_quick.json   # 100 x 200
    python benchmarks/advi_pyirt.py --sizes 300x1000                           # one size
    python benchmarks/advi_pyirt.py                                            # 300x1000 and 2000x5000
    python benchmarks/advi_pyirt.py --render        # re-render the Markdown from the existing --out JSON
    python benchmarks/advi_pyirt.py --sizes 300x1000 --update   # remeasure one size, keep the others

Sizes are "MODELSxITEMS" (models = respondents). Writes ``--out`` (JSON, with the BENCHMARKS.md
rows under ``benchmark_rows``) and the same stem with ``.md``, and prints the Markdown.
"""

from __future__ import annotations

import argparse
import glob
import inspect
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

from _common import (  # noqa: E402 (benchmarks/ is on sys.path when run as a script)
    benchmark_row, ensure_peer_venv, fmt as _f, last_line as _short, loadavg as _load, machine, parse_size,
    peer_python, peer_versions, run_command as _run, source_state, versions, write_results,
)

HERE = Path(__file__).resolve().parent
PEER_VENV = HERE / ".peer-venvs" / "pyirt"
PEER_TORCH = "2.13.0"
PACKAGES = ("bayesirt", "pymc", "pytensor", "numpy", "xarray")
PEER_PACKAGES = ("py-irt", "torch", "pyro-ppl", "numpy")
AXES = ("theta", "discrimination", "difficulty")
TASK = "Variational 2PL (ADVI vs py-irt SVI)"
TARGET = ">= 3x faster at equal or better correlation with truth"
QUALITY_SLACK = 0.005  # on each of theta, a and b, bayesirt's correlation may trail py-irt's by at most this
#: A row's target is judged only when the 1-min load average stayed at most this per CPU during its fits.
LOAD_LIMIT = 0.75
#: py-irt priors -> the bayesirt spec fitted against them (one BENCHMARKS.md row per pair)
PAIRS = {"vague": "2pl", "hierarchical": "2pl-hierarchical"}
DEFAULT_SIZES = "300x1000,2000x5000"
QUICK_SIZES = "100x200"
# "auto" batch size: full batch up to this many observed cells, else LARGE_BATCH cells per step
# (when fit() accepts advi_batch_size). 300 x 1,000 (300,000 cells) stays full batch.
FULL_BATCH_MAX_CELLS = 1_000_000
LARGE_BATCH = 300_000
PIP_TIMEOUT_S = 3600
PEER_FIT_TIMEOUT_S = 6 * 3600


# ---------------------------------------------------------------------------------- the peer venv
def find_python311(log: list) -> str | None:
    """The first candidate interpreter that runs and reports Python 3.11 (pyenv shims may refuse to
    run a version that is not selected, so every candidate is run, not just looked up)."""
    candidates = sorted(glob.glob("/root/.pyenv/versions/3.11*/bin/python3"), reverse=True)
    candidates += [p for p in (shutil.which("python3.11"), "/usr/bin/python3.11", shutil.which("python3")) if p]
    seen = set()
    for cand in candidates:
        if cand in seen:
            continue
        seen.add(cand)
        try:
            p = _run([cand, "-c", "import sys, venv; print('%d.%d.%d' % sys.version_info[:3])"], timeout=60)
        except Exception as e:  # noqa: BLE001
            log.append(f"{cand}: {type(e).__name__}: {e}")
            continue
        ver = p.stdout.strip()
        log.append(f"{cand}: rc={p.returncode} version={ver or '?'} {_short(p.stderr, 100) if p.returncode else ''}".strip())
        if p.returncode == 0 and ver.startswith("3.11."):
            return cand
    return None


#: Run in the py-irt venv: the versions it holds and torch's thread count, printed as JSON.
PEER_VERSIONS_CODE = ("import json, platform, py_irt, torch\nfrom importlib.metadata import version\n"
                      "out = {'python': platform.python_version()}\n"
                      f"for p in {PEER_PACKAGES!r}:\n    out[p] = version(p)\n"
                      "out['torch_num_threads'] = torch.get_num_threads()\nprint(json.dumps(out))")


def ensure_pyirt_venv(reinstall: bool = False) -> dict:
    """Create (or reuse) the py-irt venv with a Python 3.11 (py-irt's pins need it): the pinned torch
    first, any torch if that fails (see ``_common.ensure_peer_venv``)."""
    info = ensure_peer_venv(PEER_VENV, lambda: peer_versions(PEER_VENV, PEER_VERSIONS_CODE),
                            [[f"torch=={PEER_TORCH}", "py-irt"], ["torch", "py-irt"]], base_python=find_python311,
                            reinstall=reinstall, timeout=PIP_TIMEOUT_S)
    if info["ok"] and not info["versions"].get("torch", "").startswith(PEER_TORCH):
        info["log"].append(f"torch {PEER_TORCH} could not be installed; using torch {info['versions'].get('torch')}")
    return info


# The program run by the peer venv's Python. It only calls py-irt's public API (IrtConfig,
# IrtModelTrainer) and reads the fitted variational parameters from Pyro's param store.
PEER_RUNNER = r'''
import json, random, sys, time
import numpy as np
import torch, pyro
from pyro.infer import SVI
from py_irt.config import IrtConfig
from py_irt.training import IrtModelTrainer

spec = json.load(open(sys.argv[1]))
seed = spec["seed"]
random.seed(seed); np.random.seed(seed); torch.manual_seed(seed); pyro.set_rng_seed(seed)  # as `py-irt train --seed`
if spec.get("threads"):
    torch.set_num_threads(spec["threads"])
config = IrtConfig(model_type="2pl", **spec["config"])

losses = []  # record the ELBO loss of every epoch (a float per step; negligible next to the step)
_step = SVI.step
def _recording_step(self, *a, **k):
    loss = _step(self, *a, **k)
    losses.append(float(loss))
    return loss
SVI.step = _recording_step

t0, c0 = time.perf_counter(), time.process_time()
trainer = IrtModelTrainer(data_path=spec["data_path"], config=config, verbose=False)
load_s, load_cpu_s = time.perf_counter() - t0, time.process_time() - c0
t0, c0 = time.perf_counter(), time.process_time()
trainer.train(device="cpu")
fit_s, fit_cpu_s = time.perf_counter() - t0, time.process_time() - c0

store = pyro.get_param_store()
get = lambda name: store[name].detach().cpu().numpy().astype(float).tolist()
exported = trainer.last_params
n_items, n_subjects = len(exported["item_ids"]), len(exported["subject_ids"])
out = {
    "load_s": load_s, "load_cpu_s": load_cpu_s, "fit_s": fit_s, "fit_cpu_s": fit_cpu_s,
    "torch_num_threads": torch.get_num_threads(), "priors_used": config.priors or "vague",
    "config": json.loads(config.model_dump_json()) if hasattr(config, "model_dump_json") else config.dict(),
    "epochs_run": len(losses), "loss_first": losses[0] if losses else None,
    "loss_last_mean_100": float(np.mean(losses[-100:])) if losses else None,
    "loss_prev_mean_100": float(np.mean(losses[-200:-100])) if len(losses) >= 200 else None,
    "loss_every_100": losses[::100],
    "subject_ids": [exported["subject_ids"][i] for i in range(n_subjects)],
    "item_ids": [exported["item_ids"][i] for i in range(n_items)],
    "exported": {k: exported[k] for k in ("ability", "diff", "disc")},
    "params": {k: get(k) for k in ("loc_ability", "scale_ability", "loc_diff", "scale_diff", "loc_slope", "scale_slope")},
}
json.dump(out, open(spec["out_path"], "w"))
'''


def write_pyirt_jsonlines(responses, path: Path) -> None:
    """py-irt's input: one line per subject (model), {"subject_id": ..., "responses": {item_id: 0/1}}."""
    y = responses["responses"].values  # item x model, -1 = missing
    items = [str(i) for i in responses["item"].values]
    with open(path, "w") as f:
        for j, model in enumerate(responses["model"].values):
            col = y[:, j]
            line = {"subject_id": str(model), "responses": {it: int(v) for it, v in zip(items, col) if v >= 0}}
            f.write(json.dumps(line, separators=(",", ":")))
            f.write("\n")


def run_pyirt(responses, truth, args, workdir: Path, peer: dict) -> dict:
    if not peer.get("ok"):
        raise PeerFailure(peer.get("reason", "venv not available"))
    t0 = time.perf_counter()
    data_path = workdir / "responses.jsonlines"
    write_pyirt_jsonlines(responses, data_path)
    write_s = time.perf_counter() - t0
    config = {k: v for k, v in {"epochs": args.pyirt_epochs, "lr": args.pyirt_lr, "lr_decay": args.pyirt_lr_decay,
                                "priors": args.pyirt_priors, "seed": args.seed}.items() if v is not None}
    spec = {"seed": args.seed, "threads": args.pyirt_threads, "config": config, "data_path": str(data_path), "out_path": str(workdir / "pyirt_out.json")}
    (workdir / "spec.json").write_text(json.dumps(spec))
    (workdir / "runner.py").write_text(PEER_RUNNER)
    t0 = time.perf_counter()
    try:
        p = _run([peer_python(PEER_VENV), workdir / "runner.py", workdir / "spec.json"], timeout=PEER_FIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise PeerFailure(f"py-irt did not finish within {PEER_FIT_TIMEOUT_S} s") from None
    subprocess_s = time.perf_counter() - t0
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-4000:])
        raise PeerFailure(f"py-irt exited with {p.returncode}: {_short(p.stderr, 160)}")
    res = json.loads((workdir / "pyirt_out.json").read_text())
    data_mb = data_path.stat().st_size / 1e6
    data_path.unlink()

    # Map py-irt's index order back to the responses' model / item order.
    models = [str(m) for m in responses["model"].values]
    items = [str(i) for i in responses["item"].values]
    s_ix = {s: k for k, s in enumerate(res["subject_ids"])}
    i_ix = {s: k for k, s in enumerate(res["item_ids"])}
    if set(s_ix) != set(models) or set(i_ix) != set(items):
        raise PeerFailure("py-irt returned a different set of subjects/items than it was given")
    sm = np.array([s_ix[m] for m in models])
    im = np.array([i_ix[i] for i in items])
    par = {k: np.asarray(v) for k, v in res.pop("params").items()}
    means = {"theta": par["loc_ability"][sm], "difficulty": par["loc_diff"][im],
             "discrimination": np.exp(par["loc_slope"] + 0.5 * par["scale_slope"] ** 2)[im]}
    exp = res.pop("exported")
    exported = {"theta": np.asarray(exp["ability"])[sm], "difficulty": np.asarray(exp["diff"])[im],
                "discrimination": np.asarray(exp["disc"])[im]}
    res.pop("subject_ids"), res.pop("item_ids")
    out = {"write_s": write_s, "data_mb": data_mb, "subprocess_s": subprocess_s, **res,
           "corr_truth": corr_truth(means, truth), "corr_truth_exported": corr_truth(exported, truth),
           "median_sd": {"theta": float(np.median(par["scale_ability"])), "difficulty": float(np.median(par["scale_diff"])),
                         "log_discrimination": float(np.median(par["scale_slope"]))}}
    return out, means


class PeerFailure(RuntimeError):
    """py-irt could not be installed or run (reported as the row's status)."""


# ------------------------------------------------------------------------------------- bayesirt
def fit_accepts_batch_size() -> bool:
    from bayesirt.inference.fitting import fit

    return "advi_batch_size" in inspect.signature(fit).parameters


def resolve_batch_size(requested: str, cells: int, accepted: bool) -> tuple[int | None, str]:
    """The advi_batch_size to pass (None = full batch / not passed) and a note saying why."""
    req = str(requested).lower()
    if req == "none":
        return None, "full batch (requested)"
    if req == "auto":
        if cells <= FULL_BATCH_MAX_CELLS:
            return None, f"full batch ({cells:,} cells <= {FULL_BATCH_MAX_CELLS:,})"
        if not accepted:
            return None, "full batch (fit() has no advi_batch_size option yet)"
        return LARGE_BATCH, f"{LARGE_BATCH:,} cells per step (auto: {cells:,} cells > {FULL_BATCH_MAX_CELLS:,})"
    n = int(req)
    if not accepted:
        return None, f"full batch: {n:,} requested but fit() has no advi_batch_size option"
    return n, f"{n:,} cells per step (requested)"


def _numba_cache_files() -> int | None:
    """Files in PyTensor's on-disk numba cache (None when it cannot be listed)."""
    try:
        import pytensor

        folder = Path(pytensor.config.compiledir).parent / "numba"
        if not folder.is_dir():
            folder = Path(pytensor.config.base_compiledir) / "numba"
        return sum(1 for _ in folder.iterdir()) if folder.is_dir() else 0
    except Exception:  # noqa: BLE001
        return None


def _one_bayesirt_fit(responses, spec, kwargs) -> tuple[dict, object]:
    from bayesirt.inference.fitting import fit

    files0 = _numba_cache_files()
    # CPU seconds of the whole call (build, fit, draws): fit() does not report CPU time, and its
    # ADVI loop is internal, so the only implementation-independent span is the call. It slightly
    # over-counts bayesirt's fit (build and draws take about a second).
    c0, t0 = _cpu(), time.perf_counter()
    tree = fit(responses, spec, method="advi", **kwargs)
    wall, call_cpu = time.perf_counter() - t0, _cpu() - c0
    files1 = _numba_cache_files()
    timings = json.loads(tree.attrs["bayesirt_timings"])
    new_files = None if files0 is None or files1 is None else files1 - files0
    return {"fit_s": timings["fit_s"], "compile_s": timings.get("compile_s"), "build_s": timings.get("build_s"),
            "wall_s": wall, "fit_cpu_s": call_cpu, "new_numba_cache_files": new_files,
            "compile_cache": "unknown" if new_files is None else ("cold" if new_files > 0 else "warm")}, tree


#: The warm-up fit's design (models x items): another size, so its compiled whole-model functions
#: are not those of the timed fit (their cache keys hold the sizes), while the compiled operations
#: they are made of are (see ``run_bayesirt``).
WARMUP_SIZE = (40, 50)


def run_bayesirt(responses, truth, args, batch_size, spec: str = "2pl") -> tuple[dict, dict]:
    from bayesirt.data import simulate_pl

    kwargs = {"seed": args.seed, "progress": False}
    out: dict = {}
    if args.bayesirt_warmup:
        # The first fit of a spec on a machine compiles every PyTensor operation of its model (numba,
        # cached on disk for every later fit of any size: a one-time cost, e.g. after installing);
        # the first fit at a new data size compiles the whole-model step and loss anew. The warm-up
        # fits the same spec on a small matrix, so the timed fit pays the second cost, not the first.
        small, _ = simulate_pl("2pl", n_models=WARMUP_SIZE[0], n_items=WARMUP_SIZE[1], seed=args.seed + 1)
        warm, _ = _one_bayesirt_fit(small, spec, {"seed": args.seed, "progress": False})
        out["warmup"] = {"size": list(WARMUP_SIZE)} | warm
    if batch_size is not None:
        kwargs["advi_batch_size"] = batch_size
    first, tree = _one_bayesirt_fit(responses, spec, kwargs)
    post = with_difficulty(tree["posterior"].to_dataset())
    means = {v: post[v].mean(("chain", "draw")).values for v in AXES}
    sds = {v: float(np.median(post[v].std(("chain", "draw")).values)) for v in AXES}
    out = {"spec": spec, **first, **out, "fit_cpu_scope": "whole fit() call",
           "iterations": int(tree.attrs["advi_iterations_run"]), "converged": bool(tree.attrs["advi_converged"]),
           "rate_changes": json.loads(tree.attrs.get("advi_rate_changes", "[]")),
           "final_loss": float(tree.attrs.get("advi_final_loss", np.nan)),
           "settings": json.loads(tree.attrs["bayesirt_settings"]), "advi_batch_size": batch_size,
           "corr_truth": corr_truth(means, truth), "median_sd": sds,
           "hyperparameters": {k: float(post[k].mean()) for k in post.data_vars if post[k].ndim == 2}}
    if args.bayesirt_repeat:
        repeat, again = _one_bayesirt_fit(responses, spec, kwargs)
        out["repeat"] = repeat | {"same_estimates": bool(all(
            np.array_equal(again.posterior[v].values, tree.posterior[v].values) for v in tree.posterior.data_vars))}
    return out, means


# ------------------------------------------------------------------------------------- helpers
def _cpu() -> float:
    """CPU seconds used so far by this process, all threads."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def with_difficulty(post):
    """b = -d / a of every draw when the fit stores the intercept only (slope-intercept specs)."""
    from bayesirt.models.logistic import with_difficulty as derive

    return derive(post)


def corr_truth(est: dict, truth) -> dict:
    """Pearson correlation of each estimate with the simulated truth (no sign flips: a > 0 in
    both tools identifies the orientation)."""
    return {v: float(np.corrcoef(np.asarray(est[v], dtype=float), truth[v].values)[0, 1]) for v in AXES}


def _r3(c: dict | None) -> str:
    return "/".join(f"{c[v]:.3f}" for v in AXES) if c else "—"


# ---------------------------------------------------------------------------------------- rows
def _pair(size: dict, priors: str) -> tuple[dict, dict]:
    """(bayesirt run, py-irt run) of one pairing; the defaults pair is stored as size["bayesirt"] /
    size["pyirt"], the others under size["bayesirt_variants"] / size["pyirt_variants"]."""
    if priors == "vague":
        return size["bayesirt"], size["pyirt"]
    return (size.get("bayesirt_variants") or {}).get(priors, {"status": "not run"}), \
        (size.get("pyirt_variants") or {}).get(priors, {"status": "not run"})


def target_met(b: dict, p: dict, ratio: float | None) -> bool | None:
    """>= 3x, and on each of theta, a and b a correlation with the truth at least py-irt's - QUALITY_SLACK."""
    if ratio is None:
        return None
    return bool(ratio >= 3 and all(b["corr_truth"][v] >= p["corr_truth"][v] - QUALITY_SLACK for v in AXES))


def _peer_settings(p: dict) -> str:
    c = p["config"]
    return (f"SVI, {c['epochs']} epochs full batch, Adam lr {c['lr']} x {c['lr_decay']}/epoch, priors={p['priors_used']}, "
            f"{p.get('torch_num_threads', '?')} torch threads")


def make_row(size: dict, priors: str, command: str, date: str, peer_label: str) -> dict:
    b, p = _pair(size, priors)
    spec = b.get("spec", PAIRS[priors])
    data_size = f"{size['models']:,} models x {size['items']:,} items (simulated 2PL, complete, seed {size['data_seed']})"
    b_ok, p_ok = b.get("status") == "ok", p.get("status") == "ok"
    if b_ok:
        batch = "full batch" if b["advi_batch_size"] is None else f"batch {b['advi_batch_size']:,}"
        bay = f"{b['fit_s']:.1f} s fit (spec {spec}, ADVI, {b['iterations']:,} it., {batch}"
        if b.get("compile_s") is not None:
            bay += f"; compile {b['compile_s']:.1f} s, numba cache {b.get('compile_cache', '?')}"
        if b.get("repeat"):
            bay += f"; repeat fit {b['repeat']['fit_s']:.1f} s"
        bay += ")"
    else:
        bay = f"{b.get('status')}: {b.get('error', '')}".strip(": ")
    peer_fig = f"{p['fit_s']:.1f} s fit ({p['epochs_run']:,} epochs)" if p_ok else "—"
    ratio = p["fit_s"] / b["fit_s"] if b_ok and p_ok else None
    quality = f"r(theta/a/b) with truth: bayesirt {_r3(b.get('corr_truth'))}, py-irt {_r3(p.get('corr_truth'))}"
    if b_ok and b.get("repeat") and p_ok:
        quality += f"; ratio with the repeat (warm-cache) bayesirt fit {p['fit_s'] / b['repeat']['fit_s']:.2f}x"
    if p_ok and b_ok:
        status = "ok"
    elif not p_ok:
        status = p.get("status", "peer failed to install/run: unknown")
    else:
        status = f"bayesirt failed: {b.get('error', '?')}"
    label = "defaults" if priors == "vague" else f"{priors} priors"
    peer = f"{peer_label}: {_peer_settings(p)}" if p_ok else peer_label
    met = target_met(b, p, ratio) if b_ok and p_ok else None
    # The load before each fit is other jobs' (after a fit it includes the fit's own threads: py-irt's
    # two torch threads alone bring the 1-minute average to about 1.5 on 2 CPUs).
    load = max([pair[0][0] for r in (b, p) for pair in [r.get("loadavg_before_after") or []] if pair] or [0.0])
    if met is not None and load > LOAD_LIMIT * (os.cpu_count() or 1):
        # A busy machine slows py-irt's two torch threads far more than bayesirt's single-threaded
        # loop (each thread waits for the other at every step), so the ratio says little.
        status = (f"{status}; target not judged: 1-min load average up to {load:.1f} on {os.cpu_count()} CPUs before "
                  "these fits (other jobs), so the wall times are not those of an idle machine; rerun there")
        met = None
    return benchmark_row(task=f"{TASK}, {label}", data_size=data_size, bayesirt=bay, peer=peer, peer_figure=peer_fig,
                         ratio=ratio, ratio_meaning="py-irt fit s / bayesirt fit s (first fit)"
                         + (f"; CPU s {p['fit_cpu_s'] / b['fit_cpu_s']:.1f}x" if b_ok and p_ok else ""),
                         target=TARGET, target_met=met, quality=quality, status=status, command=command, date=date)


def kept_sizes(previous: dict, measured: list[dict]) -> list[dict]:
    """The sizes of an earlier results JSON that ``measured`` does not cover, each with the metadata
    of the run that measured it (``--update``)."""
    done = {(x["models"], x["items"]) for x in measured}
    run = {"date": previous.get("date"), "command": previous.get("command"),
           "bayesirt_head": (previous.get("bayesirt_source") or {}).get("head"),
           "loadavg_start": previous.get("loadavg_start"), "loadavg_end": previous.get("loadavg_end")}
    return [{"run": run} | x for x in previous.get("sizes", []) if (x["models"], x["items"]) not in done]


def markdown(result: dict) -> str:
    cfg = result["config"]
    peer = result["peer_venv"]
    pv = peer.get("versions") or {}
    lines = [
        "# Variational 2PL: bayesirt ADVI vs py-irt (Pyro SVI)",
        "",
        f"{result['date']}; {result['machine']}. Seed {cfg['seed']}. Total wall time {result['total_wall_s']:.0f} s. "
        f"Load average at start {result['loadavg_start']}, at end {result['loadavg_end']} (2 cores shared with other "
        "jobs: wall times are only comparable on an otherwise idle machine; CPU seconds are given too).",
        "",
        f"bayesirt {result['versions'].get('bayesirt')} (PyMC {result['versions'].get('pymc')}, Python "
        f"{result['versions'].get('python')}); py-irt {pv.get('py-irt', '—')} (torch {pv.get('torch', '—')}, pyro "
        f"{pv.get('pyro-ppl', '—')}, Python {pv.get('python', '—')}, {pv.get('torch_num_threads', '?')} torch threads) "
        f"in `{peer['path']}` ({'created in this run' if peer.get('created') else 'reused'}"
        f"{'' if peer.get('ok') else ': FAILED: ' + str(peer.get('reason'))}). bayesirt source: HEAD "
        f"{str(result['bayesirt_source'].get('head'))[:10]}, {len(result['bayesirt_source'].get('uncommitted') or [])} "
        f"uncommitted file(s) under bayesirt/ (sha256 of its .py files {result['bayesirt_source']['bayesirt_py_sha256']}).",
        "",
    ]
    earlier = [x for x in result["sizes"] if x.get("run") and x["run"]["date"] != result["date"]]
    if earlier:
        lines += ["Sizes measured by an earlier run (kept by `--update`; each row is from one run): " + "; ".join(
            f"{x['models']:,} x {x['items']:,} on {x['run']['date']} (`{x['run']['command']}`, bayesirt HEAD "
            f"{str(x['run']['bayesirt_head'])[:10]}, load average {x['run']['loadavg_start']} to {x['run']['loadavg_end']})"
            for x in earlier) + ". The header above describes the latest run.", ""]
    lines += [
        "| size (models x items) | tool | settings | fit s | compile s | fit CPU s | wall s | steps | r(theta) | r(a) "
        "| r(b) | py-irt s / bayesirt s |",
        "|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for s in result["sizes"]:
        label = f"{s['models']:,} x {s['items']:,}"
        for priors in PAIRS:
            b, p = _pair(s, priors)
            if priors != "vague" and b.get("status") == "not run" and p.get("status") == "not run":
                continue
            if b.get("status") == "not run":  # a run from before the pairs: only py-irt's sensitivity fit
                pass
            elif b.get("status") == "ok":
                c = b["corr_truth"]
                batch = "full batch" if b["advi_batch_size"] is None else f"batch {b['advi_batch_size']:,} cells"
                st = b["settings"]
                rate = st.get("advi_learning_rate")
                rate = f"{rate[0]} -> {rate[-1]} annealed ({len(rate)} rates)" if isinstance(rate, list) else rate
                conv = "converged" if b["converged"] else "NOT converged"
                cache = f", numba cache {b['compile_cache']}" if b.get("compile_cache") else ""
                lines.append(
                    f"| {label} | bayesirt, spec {b.get('spec', '2pl')} | ADVI, Adam {rate}, {batch}, plateau tol "
                    f"{st.get('advi_tolerance')}{cache} | {b['fit_s']:.1f} | {_f(b.get('compile_s'))} "
                    f"| {_f(b.get('fit_cpu_s'))} | {b['wall_s']:.1f} | {b['iterations']:,} it. ({conv}) "
                    f"| {c['theta']:.3f} | {c['discrimination']:.3f} | {c['difficulty']:.3f} | |")
                if b.get("warmup"):
                    w = b["warmup"]
                    lines.insert(len(lines) - 1,
                        f"| {label} | bayesirt, spec {b.get('spec', '2pl')}, warm-up (untimed) | the same spec on a "
                        f"{w['size'][0]} x {w['size'][1]} matrix before the timed fits (numba cache {w.get('compile_cache', '?')}, "
                        f"{w.get('new_numba_cache_files', '?')} files written) | {w['fit_s']:.1f} | {_f(w.get('compile_s'))} "
                        f"| {_f(w.get('fit_cpu_s'))} | {w['wall_s']:.1f} | | | | | |")
                if b.get("repeat"):
                    r = b["repeat"]
                    lines.append(
                        f"| {label} | bayesirt, spec {b.get('spec', '2pl')}, repeat fit | the same fit again (numba cache "
                        f"{r.get('compile_cache', '?')}; estimates {'identical' if r.get('same_estimates') else 'DIFFERENT'}) "
                        f"| {r['fit_s']:.1f} | {_f(r.get('compile_s'))} | {_f(r.get('fit_cpu_s'))} | {r['wall_s']:.1f} "
                        "| | | | | |")
            else:
                lines.append(f"| {label} | bayesirt, spec {PAIRS[priors]} | {b.get('status')}: {b.get('error', '')} "
                             "| | | | | | | | | |")
            if p.get("status") != "ok":
                lines.append(f"| {label} | py-irt, priors={priors} | {p.get('status', '?')} | | | | | | | | | |")
                continue
            c = p["corr_truth"]
            ratio = p["fit_s"] / b["fit_s"] if b.get("status") == "ok" else None
            lines.append(
                f"| {label} | py-irt, priors={priors} | {_peer_settings(p)} | {p['fit_s']:.1f} | — | {p['fit_cpu_s']:.1f} "
                f"| {p['write_s'] + p['subprocess_s']:.1f} | {p['epochs_run']:,} epochs | {c['theta']:.3f} "
                f"| {c['discrimination']:.3f} | {c['difficulty']:.3f} | **{_f(ratio, '{:.2f}x')}** |")
    lines += [
        "",
        "fit s: bayesirt = the ADVI optimization (`bayesirt_timings.fit_s`: compiling the step and loss functions, "
        "`compile s`, included); py-irt = `IrtModelTrainer.train()` (its full-batch SVI loop, including its per-epoch "
        "bookkeeping). numba cache: `cold` when the fit compiled its functions (wrote new files to PyTensor's on-disk "
        "numba cache), `warm` when it found them there from an earlier fit of a model of the same structure and size; "
        "the repeat fit is the same call again, for the warm figure. The untimed warm-up fits the same spec on a small "
        "matrix first, so the timed first fit compiles its whole-model functions (their cache keys hold the data "
        "size) but finds the compiled operations they are made of, as on any machine where that spec was fitted "
        "before; the warm-up's own figures, in a run started with an empty cache (PYTENSOR_FLAGS=base_compiledir=<new "
        "folder> in the command), are the one-time cost of a first fit after installing. "
        "wall s: bayesirt = the whole `fit(...)` call "
        "(build, fit, 1,000 draws, labelling); py-irt = writing the jsonlines + the subprocess (interpreter start, "
        "imports, py-irt's loader, fit, export). fit CPU s: CPU time, all threads, of the same span (py-irt) or of the "
        "whole `fit(...)` call (bayesirt: ADVI is internal to it). "
        "r(.) = Pearson correlation with the simulated truth of the posterior means (bayesirt: "
        "mean of 1,000 draws, b = -d/a per draw for the slope-intercept spec; py-irt: variational means, "
        "a = exp(loc + scale^2 / 2)); a > 0 in both tools, so no sign flips. b = difficulty (py-irt's `diff`, "
        "logit = a (theta - b)). Pairs: bayesirt's `2pl` spec (log a ~ N(0, 0.5), d ~ N(0, 2)) against py-irt's "
        "default `vague` priors (b ~ N(0, 0.1), log a ~ N(0, 0.1)); bayesirt's `2pl-hierarchical` spec (log a ~ N(mu_a, "
        "sigma_a), b ~ N(mu_b, sigma_b), the four learned) against py-irt's `hierarchical` priors (theta ~ N(mu, 1/u), "
        "b ~ N(mu_b, 1/u_b), a ~ LogNormal(mu_a, 1/u_a) with hyperpriors).",
        "",
        "## BENCHMARKS.md rows",
        "",
        "| pair | data size | bayesirt | py-irt | ratio (fit s) | target met | quality | status |",
        "|---|---|---|---|---:|---|---|---|",
    ]
    for s in result["sizes"]:
        for r in s.get("rows") or [s["row"]]:
            met = "—" if r["target_met"] is None else ("yes" if r["target_met"] else "no")
            lines.append(f"| {r['task'].removeprefix(TASK).strip(', ') or 'defaults'} | {r['data_size']} | {r['bayesirt']} "
                         f"| {r['peer_figure']} | {_f(r['ratio'], '{:.2f}x')} | {met} | {r['quality']} | {r['status']} |")
    lines += ["", f"Target: {TARGET} (ratio >= 3 and, on each of theta, a and b, r of bayesirt >= r of py-irt - "
                  f"{QUALITY_SLACK}; rows measured before that rule used the minimum r over the three).", ""]
    notes = []
    for s in result["sizes"]:
        p = s["pyirt"]
        if p.get("status") == "ok":
            notes.append(f"- {s['models']:,} x {s['items']:,}: py-irt load (jsonlines -> Dataset) {p['load_s']:.1f} s, "
                         f"writing the jsonlines ({p['data_mb']:.0f} MB) {p['write_s']:.1f} s; r with its exported point "
                         f"estimates (a = exp(loc)) {_r3(p['corr_truth_exported'])}; loss mean of the last 100 epochs "
                         f"{_f(p.get('loss_last_mean_100'), '{:.1f}')} vs the 100 before {_f(p.get('loss_prev_mean_100'), '{:.1f}')}. "
                         f"Tools agree: r(bayesirt, py-irt) {_r3(s.get('corr_between'))}.")
        if s["bayesirt"].get("status") == "ok":
            notes.append(f"- {s['models']:,} x {s['items']:,}: bayesirt batch size: {s['batch_note']}.")
    if notes:
        lines += ["## Notes", "", *notes, ""]
    return "\n".join(lines)


def attempt_bayesirt(responses, truth, args, batch, spec) -> tuple[dict, dict | None]:
    """One bayesirt fit (and its repeat): (result with "status", posterior means or None)."""
    l0, means = _load(), None
    try:
        res, means = run_bayesirt(responses, truth, args, batch, spec)
        res = {"status": "ok"} | res
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        res = {"status": "failed", "spec": spec,
               "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]}
    res["loadavg_before_after"] = [l0, _load()]
    print(f"--- bayesirt: { {k: v for k, v in res.items() if not isinstance(v, (dict, list))} }", flush=True)
    return res, means


def attempt_pyirt(responses, truth, args, peer) -> tuple[dict, dict | None]:
    """One py-irt fit: (result with "status", posterior means or None). Failures are reported, never dropped."""
    l0, means = _load(), None
    with tempfile.TemporaryDirectory(prefix="advi_pyirt_") as tmp:
        try:
            res, means = run_pyirt(responses, truth, args, Path(tmp), peer)
            res = {"status": "ok"} | res
        except PeerFailure as e:
            res = {"status": f"peer failed to install/run: {e}"}
        except Exception as e:  # noqa: BLE001 (a failing peer is reported, never dropped)
            traceback.print_exc()
            res = {"status": f"peer failed to install/run: {type(e).__name__}: {str(e)[:150]}"}
    res["loadavg_before_after"] = [l0, _load()]
    print(f"--- py-irt: { {k: v for k, v in res.items() if not isinstance(v, (dict, list))} }", flush=True)
    return res, means


# ---------------------------------------------------------------------------------------- main
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=DEFAULT_SIZES, help=f"comma-separated MODELSxITEMS (default {DEFAULT_SIZES})")
    p.add_argument("--quick", action="store_true", help=f"smoke test: one small size ({QUICK_SIZES})")
    p.add_argument("--seed", type=int, default=20261129, help="data seed and both tools' fit seed")
    p.add_argument("--bayesirt-batch-size", default="auto",
                   help="advi_batch_size for bayesirt: 'auto' (full batch up to 1,000,000 cells, else 300,000 "
                        "cells per step when fit() accepts the option), 'none' (full batch) or an integer")
    p.add_argument("--pyirt-epochs", type=int, default=None, help="py-irt epochs (default: py-irt's, 2000)")
    p.add_argument("--pyirt-lr", type=float, default=None, help="py-irt Adam learning rate (default: py-irt's, 0.1)")
    p.add_argument("--pyirt-lr-decay", type=float, default=None, help="py-irt per-epoch lr decay (default: py-irt's, 0.9999)")
    p.add_argument("--pyirt-priors", default=None, choices=("vague", "hierarchical"),
                   help="py-irt 2PL priors (default: py-irt's, vague)")
    p.add_argument("--pyirt-threads", type=int, default=None,
                   help="torch intra-op threads for py-irt (default: torch's, one per CPU); recorded as torch_num_threads")
    p.add_argument("--pyirt-extra-priors", default="hierarchical",
                   help="comma-separated py-irt priors to fit as well, each against the bayesirt spec that PAIRS "
                        "matches with it (hierarchical: 2pl-hierarchical), each pair a row; 'none' to skip "
                        "(default: hierarchical)")
    p.add_argument("--pyirt-extra-max-cells", type=int, default=FULL_BATCH_MAX_CELLS,
                   help="skip those pairs on larger matrices (default 1,000,000 cells: runs at 300x1000, "
                        "not at 2000x5000)")
    p.add_argument("--bayesirt-repeat", type=int, choices=(0, 1), default=1,
                   help="1 (default): fit each bayesirt spec a second time (the warm numba cache figure); 0: once")
    p.add_argument("--bayesirt-warmup", type=int, choices=(0, 1), default=1,
                   help="1 (default): before the timed fits, fit the same spec on a 40 x 50 matrix, so the timed "
                        "first fit compiles its whole-model functions but finds the compiled operations in "
                        "PyTensor's cache, as on any machine where bayesirt has fitted that spec before; 0: no warm-up")
    p.add_argument("--reinstall-peer", action="store_true", help="delete and re-create the py-irt venv first")
    p.add_argument("--render", action="store_true",
                   help="no fits: rebuild the rows and the Markdown from the numbers in the existing --out JSON")
    p.add_argument("--update", action="store_true",
                   help="keep the sizes of the existing --out JSON that this run does not measure (each size's rows "
                        "keep the date, command and source of the run that measured them)")
    p.add_argument("--out", type=Path, default=HERE / "results" / "advi_pyirt.json")
    args = p.parse_args(argv)
    if args.render:
        result = json.loads(args.out.read_text())
        pv = (result.get("peer_venv") or {}).get("versions") or {}
        label = f"py-irt {pv.get('py-irt', '?')} (Pyro SVI, torch {pv.get('torch', '?')})" if pv else "py-irt"
        for size in result["sizes"]:
            if "rows" in size:  # rebuilt by this version of make_row (rows of older runs are kept as stored)
                sources = [r.get("source") for r in size["rows"]]
                size["rows"] = [make_row(size, priors, size["run"]["command"], size["run"]["date"], label)
                                for priors in PAIRS if priors == "vague" or _pair(size, priors)[1].get("status") == "ok"]
                for row, src in zip(size["rows"], sources):
                    row["source"] = src
        result["benchmark_rows"] = [r for s in result["sizes"] for r in (s.get("rows") or [s["row"]])]
        write_results(args.out, result, markdown, echo=True)
        return 0
    sizes = [parse_size(s) for s in (QUICK_SIZES if args.quick else args.sizes).split(",") if s.strip()]

    import pymc  # noqa: F401  (import before timing anything)

    from bayesirt.data import simulate_pl

    load_start, t_start = _load(), time.perf_counter()
    date = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    # the environment that shapes the timings is part of the command: PyTensor's flags (e.g. a fresh, empty
    # compile cache: base_compiledir=...) and the scheduling priority (nice) the run had on a shared machine
    env = [f"PYTENSOR_FLAGS={os.environ['PYTENSOR_FLAGS']}"] if os.environ.get("PYTENSOR_FLAGS") else []
    niceness = os.nice(0)
    command = " ".join([*env, *(["nice", "-n", str(niceness)] if niceness else []), ".venv/bin/python",
                        "benchmarks/advi_pyirt.py", *(argv if argv is not None else sys.argv[1:])])

    print("--- py-irt venv ...", flush=True)
    peer = ensure_pyirt_venv(args.reinstall_peer)
    print(f"--- py-irt venv: {'ok' if peer['ok'] else 'FAILED: ' + peer.get('reason', '?')} "
          f"({peer['seconds']:.0f} s) {peer.get('versions') or ''}", flush=True)
    pv = peer.get("versions") or {}
    peer_label = f"py-irt {pv.get('py-irt', '?')} (Pyro SVI, torch {pv.get('torch', '?')})" if peer["ok"] else "py-irt"
    accepted = fit_accepts_batch_size()
    source = source_state()

    results = []
    for models, items in sizes:
        print(f"=== {models} models x {items} items", flush=True)
        responses, truth = simulate_pl("2pl", n_items=items, n_models=models, seed=args.seed)
        size = {"models": models, "items": items, "cells": models * items, "data_seed": args.seed,
                "mean_response": float((responses["responses"].values == 1).mean())}
        batch, size["batch_note"] = resolve_batch_size(args.bayesirt_batch_size, models * items, accepted)
        est = {}

        print(f"--- bayesirt ADVI, spec {PAIRS['vague']} ({size['batch_note']}) ...", flush=True)
        size["bayesirt"], means = attempt_bayesirt(responses, truth, args, batch, PAIRS["vague"])
        if means is not None:
            est["bayesirt"] = means

        print(f"--- py-irt (priors {args.pyirt_priors or 'vague (default)'}) ...", flush=True)
        size["pyirt"], means = attempt_pyirt(responses, truth, args, peer)
        if means is not None:
            est["pyirt"] = means
        # The other pairings: py-irt with other priors against the matching bayesirt spec (PAIRS).
        extra = [x.strip() for x in args.pyirt_extra_priors.split(",") if x.strip() and x.strip().lower() != "none"]
        extra = [x for x in extra if x != (args.pyirt_priors or "vague")]
        size["pyirt_variants"], size["bayesirt_variants"] = {}, {}
        for priors in extra:
            if models * items > args.pyirt_extra_max_cells:
                skipped = {"status": f"skipped ({models * items:,} cells > --pyirt-extra-max-cells "
                                     f"{args.pyirt_extra_max_cells:,})"}
                size["pyirt_variants"][priors] = size["bayesirt_variants"][priors] = skipped
                continue
            if priors in PAIRS:
                print(f"--- bayesirt ADVI, spec {PAIRS[priors]} ...", flush=True)
                size["bayesirt_variants"][priors], _ = attempt_bayesirt(responses, truth, args, batch, PAIRS[priors])
            print(f"--- py-irt (priors {priors}) ...", flush=True)
            size["pyirt_variants"][priors], _ = attempt_pyirt(responses, truth, argparse.Namespace(**{**vars(args), "pyirt_priors": priors}), peer)

        if len(est) == 2:
            size["corr_between"] = {v: float(np.corrcoef(est["bayesirt"][v], est["pyirt"][v])[0, 1]) for v in AXES}
        if size["bayesirt"].get("status") == "ok" and size["pyirt"].get("status") == "ok" and size["bayesirt"]["fit_cpu_s"]:
            size["cpu_ratio"] = size["pyirt"]["fit_cpu_s"] / size["bayesirt"]["fit_cpu_s"]
        size["rows"] = [make_row(size, priors, command, date, peer_label) for priors in PAIRS
                        if priors == "vague" or _pair(size, priors)[1].get("status") == "ok"]
        results.append(size)

    run = {"date": date, "command": command, "bayesirt_head": source.get("head"), "loadavg_start": load_start,
           "loadavg_end": _load()}
    for size in results:
        size["run"] = run
    dirty = len(source.get("uncommitted") or [])
    for size in results:
        for row in size["rows"]:
            row["source"] = f"run at {str(source.get('head'))[:10]}" + (
                f" + {dirty} uncommitted file(s) under bayesirt/" if dirty else "")
    if args.update and args.out.exists():
        kept = kept_sizes(json.loads(args.out.read_text()), results)
        for size in kept:
            for row in size.get("rows") or [size["row"]]:
                row.setdefault("source", f"run at {str(size['run'].get('bayesirt_head'))[:10]}")
        results = sorted(results + kept, key=lambda x: x["cells"])

    result = {
        "task": TASK,
        "command": command,
        "date": date,
        "machine": machine(),
        "versions": versions(PACKAGES),
        "bayesirt_source": source,
        "config": {"sizes": [f"{m}x{i}" for m, i in sizes], "quick": args.quick, "seed": args.seed,
                   "bayesirt_batch_size": args.bayesirt_batch_size, "fit_accepts_advi_batch_size": accepted,
                   "pyirt_threads": args.pyirt_threads,
                   "pyirt_overrides": {"epochs": args.pyirt_epochs, "lr": args.pyirt_lr,
                                       "lr_decay": args.pyirt_lr_decay, "priors": args.pyirt_priors},
                   "pyirt_extra_priors": args.pyirt_extra_priors, "pyirt_extra_max_cells": args.pyirt_extra_max_cells,
                   "pyirt_model": "2pl: logit = a * (theta - b); vague priors theta ~ N(0, 1), b ~ N(0, 0.1), "
                                  "a ~ LogNormal(0, 0.1); mean-field guide; Trace_ELBO, full batch"},
        "peer_venv": peer,
        "loadavg_start": load_start,
        "loadavg_end": _load(),
        "total_wall_s": time.perf_counter() - t_start,
        "sizes": results,
        "benchmark_rows": [r for s in results for r in (s.get("rows") or [s["row"]])],
    }
    write_results(args.out, result, markdown, echo=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
