"""The residual family-DIF posterior: the direct nutpie model (``bayesirt.inference.direct_dif``) against
PyMC's graph of ``build_family_dif`` compiled by nutpie (the audit's NUTS path before it).

On a simulated audit half (items x models x families, offsets N(0, 1), family effects N(0, 0.5)
centred, easiness N(0, 1), a share of the cells missing at random), for each missing share:

- ``gradient``: CPU ms of one log density + gradient (``time.process_time``, single thread, median
  of ``--rounds`` rounds of ``--calls`` calls, both through the C callback nutpie calls, direct and
  graph interleaved round by round);
- ``layout``: CPU ms of the likelihood kernel alone (``bayesirt.models.dif_kernel``), over the observed
  cells grouped by (item, family), the direct model's layout, against the dense float64 offset matrix
  (columns grouped by family) with the missing cells masked by an offset of -inf (their factor
  1 + exp(eta) is then 1 and their sigmoid 1e-304: the cheapest masking, no mask array, the same
  arithmetic per cell);
- with ``--fit``: one NUTS fit each way (``--chains`` x ``--tune`` + ``--draws``, ridge prior, flat
  easiness), wall and CPU seconds (CPU of the whole process: nutpie's chains are its threads) with the
  compile, and the minimum bulk ESS over easiness and family_effect.

Run under ``nice -n 19`` on a shared machine and report the load (printed). Usage::

    python benchmarks/direct_dif.py [--items 1000] [--models 600] [--families 5] [--missing 0.1 0.5]
        [--fit] [--fit-items 1000] [--fit-models 600] [--out benchmarks/results/direct_dif.json]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import time

import numpy as np


def design(n_items, n_models, n_families, missing, seed=0):
    rng = np.random.default_rng(seed)
    family = rng.integers(0, n_families, n_models)
    offsets = rng.normal(0.0, 1.0, (n_items, n_models))
    delta = rng.normal(0.0, 0.5, (n_items, n_families))
    delta -= delta.mean(axis=1, keepdims=True)
    eta = rng.normal(0.0, 1.0, (n_items, 1)) + offsets + delta[:, family]
    y = (rng.random(eta.shape) < 1.0 / (1.0 + np.exp(-eta))).astype(np.int8)
    observed = rng.random(eta.shape) >= missing
    return y, observed, offsets, family


def cpu_ms(call, calls, rounds):
    """Median over rounds of the CPU ms per call."""
    call()
    out = []
    for _ in range(rounds):
        c = time.process_time()
        for _ in range(calls):
            call()
        out.append((time.process_time() - c) / calls * 1e3)
    return out


def callback(compiled):
    """One log density + gradient through the compiled model's C callback (as nutpie calls it)."""
    double = ctypes.POINTER(ctypes.c_double)
    x = np.random.default_rng(1).normal(0.0, 0.3, compiled.n_dim)
    grad, value = np.empty(compiled.n_dim), np.empty(1)
    args = (compiled.n_dim, *(v.ctypes.data_as(double) for v in (x, grad, value)), compiled.user_data.ctypes.data)
    fn = compiled.compiled_logp_func.ctypes
    return lambda: fn(*args)


def min_bulk_ess(tree):
    import arviz as az

    post = tree.posterior.to_dataset()[["easiness", "family_effect"]]
    ess = az.ess(post, method="bulk")
    return float(min(ess[v].min() for v in ess.data_vars))


def measure(args, missing, load):
    import nutpie
    import pytensor

    from bayesirt.inference.direct_dif import family_dif_model
    from bayesirt.models.dif_kernel import cells_by_family, family_dif_loglik_and_gradient
    from bayesirt.models.family_dif import build_family_dif

    y, observed, offsets, family = design(args.items, args.models, args.families, missing)
    row = {"missing": missing, "items": args.items, "models": args.models, "families": args.families,
           "observed_cells": int(observed.sum())}
    direct = family_dif_model(y, observed, offsets, family, args.families).compiled
    with pytensor.config.change_flags(numba__fastmath=False):  # as bayesirt.inference.fitting compiles it
        graph = nutpie.compile_pymc_model(build_family_dif(y, observed, offsets, family, args.families))
    calls = {"direct": callback(direct), "graph": callback(graph)}
    times = {k: [] for k in calls}
    for _ in range(args.rounds):  # interleaved
        for k, call in calls.items():
            times[k] += cpu_ms(call, args.calls, 1)
    row |= {f"{k}_gradient_ms": float(np.median(v)) for k, v in times.items()}
    # the likelihood kernel alone, both layouts
    rng = np.random.default_rng(2)
    b, delta = rng.normal(0, 1, args.items), rng.normal(0, 0.3, (args.items, args.families))
    onehot = np.eye(args.families)[family]
    correct = np.where(observed, y, 0).astype(np.float64) @ onehot
    start, cells = cells_by_family(observed, offsets, family, args.families)
    dense_start, dense = cells_by_family(np.ones_like(observed), np.where(observed, offsets, -np.inf), family,
                                         args.families)
    layouts = {"cells": lambda: family_dif_loglik_and_gradient(b, delta, correct, start, cells),
               "dense_masked": lambda: family_dif_loglik_and_gradient(b, delta, correct, dense_start, dense)}
    assert abs(layouts["cells"]()[0] - layouts["dense_masked"]()[0]) < 1e-8 * abs(layouts["cells"]()[0])
    times = {k: [] for k in layouts}
    for _ in range(args.rounds):
        for k, call in layouts.items():
            times[k] += cpu_ms(call, args.calls, 1)
    row |= {f"{k}_kernel_ms": float(np.median(v)) for k, v in times.items()}
    row["load_after"] = os.getloadavg()[0]
    print(json.dumps(row), flush=True)
    return row


def fit(args, missing):
    from bayesirt.audit.bayes.posterior import fit_family_dif_posterior
    from bayesirt.inference.fitting import sample_model
    from bayesirt.models.family_dif import build_family_dif

    y, observed, offsets, family = design(args.fit_items, args.fit_models, args.families, missing)
    settings = {"method": "nuts", "draws": args.draws, "tune": args.tune, "chains": args.chains, "seed": 1,
                "progress": False}
    rows = []
    for path in ("direct", "graph"):
        load, t0, c0 = os.getloadavg()[0], time.perf_counter(), time.process_time()
        if path == "direct":
            tree = fit_family_dif_posterior(y, observed, offsets, family, args.families, **settings)
        else:
            tree = sample_model(build_family_dif(y, observed, offsets, family, args.families), sampler="nutpie",
                                **settings)
        row = {"path": path, "missing": missing, "items": args.fit_items, "models": args.fit_models,
               "families": args.families, "chains": args.chains, "tune": args.tune, "draws": args.draws,
               "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
               "timings": json.loads(tree.attrs["bayesirt_timings"]), "min_bulk_ess": min_bulk_ess(tree),
               "divergences": int(tree.sample_stats["diverging"].sum()),
               "mean_tree_depth": float(tree.sample_stats["depth"].mean()), "load_before": load,
               "load_after": os.getloadavg()[0]}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", type=int, default=1000)
    p.add_argument("--models", type=int, default=600)
    p.add_argument("--families", type=int, default=5)
    p.add_argument("--missing", type=float, nargs="*", default=[0.1, 0.5])
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--fit", action="store_true")
    p.add_argument("--fit-items", type=int, default=1000)
    p.add_argument("--fit-models", type=int, default=600)
    p.add_argument("--fit-missing", type=float, default=0.1)
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--tune", type=int, default=500)
    p.add_argument("--draws", type=int, default=500)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    result = {"load_before": os.getloadavg()[0], "command": "python benchmarks/direct_dif.py " + " ".join(
        a for a in os.sys.argv[1:]), "gradient": [measure(args, m, None) for m in args.missing]}
    if args.fit:
        result["fit"] = fit(args, args.fit_missing)
    result["load_after"] = os.getloadavg()[0]
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()
