"""The direct MIRT model (``bayesirt.inference.direct_mirt``) against PyTensor's graph of ``build_mirt`` compiled by
nutpie: CPU ms of one logp + gradient (complete and 50% missing), and one NUTS fit each way (wall and CPU seconds,
compile and sampling seconds, the smallest bulk ESS over loadings, intercepts and abilities).

    nice -n 19 .venv/bin/python benchmarks/direct_mirt.py --size 200x500 --dims 2 [--no-fit]
    nice -n 19 .venv/bin/python benchmarks/direct_mirt.py --layouts --size 200x500 --dims 2

Writes benchmarks/results/direct_mirt.json and .md; ``--layouts`` (the direct model's logp + gradient with the dense
masked kernel and with the observed-cells kernel, at several observed shares: where ``direct_mirt.CELLS_BELOW`` comes from) writes
benchmarks/results/direct_mirt_layouts.md. CPU seconds are the process's (nutpie's chains are its
threads); the load average is recorded before and after each measurement (the machine may be shared).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fmt, loadavg, machine, parse_size, source_state, versions, write_results  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "direct_mirt.json"


def two_factor(n_models: int, n_items: int, dims: int, missing: float, seed: int = 1):
    """A simple-structure design: item i loads mainly on dimension i mod dims (uniform 1-2, small
    cross-loadings), standard normal abilities, normal intercepts; ``missing`` of the cells at random."""
    from bayesirt.data import make_responses

    rng = np.random.default_rng(seed)
    main = np.arange(n_items) % dims
    loading = rng.uniform(0.0, 0.2, (n_items, dims))
    loading[np.arange(n_items), main] = rng.uniform(1.0, 2.0, n_items)
    theta = rng.normal(size=(n_models, dims))
    p = 1 / (1 + np.exp(-(loading @ theta.T + rng.normal(0, 0.8, n_items)[:, None])))
    y = (rng.uniform(size=p.shape) < p).astype(np.int8)
    y[rng.uniform(size=y.shape) < missing] = -1
    return make_responses(y, item_group=np.array([f"f{k + 1}" for k in range(dims)])[main])


def _median_cpu_ms(call, evals: int) -> float:
    for _ in range(3):
        call()
    times = []
    for _ in range(evals):
        c = time.thread_time()
        call()
        times.append(time.thread_time() - c)
    return 1e3 * float(np.median(times))


def gradient_ms(responses, spec, evals: int) -> dict:
    """CPU ms (one thread, median of ``evals``) of one logp + gradient at the direct model's start point: the
    direct model's callback, and the C callback nutpie compiles from PyTensor's graph, called the same way."""
    import nutpie
    import pytensor

    from bayesirt.inference.direct_mirt import direct_mirt_model
    from bayesirt.models.mirt import build_mirt

    model, _ = direct_mirt_model(responses, spec)
    x = model.initial_point(0)
    direct = _median_cpu_ms(lambda: model.logp(x), evals)
    with pytensor.config.change_flags(numba__fastmath=False):  # as fit compiles it
        compiled = nutpie.compile_pymc_model(build_mirt(responses, spec))
    gradient, value = np.empty(x.size), np.empty(1)
    double = ctypes.POINTER(ctypes.c_double)
    args = (x.size, *(v.ctypes.data_as(double) for v in (x, gradient, value)), compiled.user_data.ctypes.data)
    graph = _median_cpu_ms(lambda: compiled.compiled_logp_func.ctypes(*args), evals)
    same = abs(value[0] - model.logp(x)[0]) <= 1e-8 * abs(value[0])
    return {"direct_ms": direct, "graph_ms": graph, "graph_over_direct": graph / direct, "same_value": bool(same)}


def one_fit(responses, spec, *, direct: bool, draws: int, tune: int, chains: int, seed: int) -> dict:
    """One ``fit`` (NUTS, nutpie) by the direct model or, with it made ineligible, by PyMC's graph."""
    import arviz as az

    from bayesirt.inference.fitting import fit

    patch = mock.patch("bayesirt.inference.direct_mirt.direct_mirt_eligible", lambda r, s: False)
    load = loadavg()
    w, c = time.perf_counter(), time.process_time()
    if direct:
        tree = fit(responses, spec, draws=draws, tune=tune, chains=chains, seed=seed, progress=False)
    else:
        with patch:
            tree = fit(responses, spec, draws=draws, tune=tune, chains=chains, seed=seed, progress=False)
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    settings, timings = json.loads(tree.attrs["bayesirt_settings"]), json.loads(tree.attrs["bayesirt_timings"])
    post = tree.posterior.to_dataset()
    ess = az.ess(post[["loading", "intercept", "theta"]], method="bulk")
    values = np.concatenate([ess[v].values.ravel() for v in ess.data_vars])
    return {"nutpie_model": settings["nutpie_model"], "wall_s": wall, "cpu_s": cpu,
            "compile_s": timings.get("compile_s"), "sample_s": timings.get("sample_s"),
            "min_bulk_ess": float(np.nanmin(values)),  # the echelon's structural zero loadings have none
            "divergences": int(tree.sample_stats["diverging"].sum()),
            "mean_steps": float(tree.sample_stats["n_steps"].mean()), "load_before": load, "load_after": loadavg()}


def layouts(models: int, items: int, dims: int, evals: int, out: Path) -> None:
    """``--layouts``: CPU ms of one logp + gradient of the direct model (exploratory spec) with the dense masked
    kernel and with the observed-cells kernel, at several observed shares."""
    from bayesirt.inference import direct_mirt
    from bayesirt.models.specs import load_spec

    spec = load_spec("mirt").with_dimensions(dims)
    lines = [f"# Direct MIRT model: dense (masked) against observed-cells kernel, {models} models x {items} items, "
             f"D = {dims}", "", f"`nice -n 19 .venv/bin/python benchmarks/direct_mirt.py --layouts --size "
             f"{models}x{items} --dims {dims}`; CPU ms of one logp + gradient, median of {evals}; load average before: "
             f"{loadavg()}.", "", "| observed share | dense ms | cells ms | cells / dense |", "|---|---|---|---|"]
    for share in (1.0, 0.5, 0.3, 0.25, 0.2, 0.1, 0.05):
        responses = two_factor(models, items, dims, 1.0 - share)
        ms = []
        for below in (0.0, 1.01):  # every matrix dense; every matrix by its observed cells
            with mock.patch.object(direct_mirt, "CELLS_BELOW", below):
                model, _ = direct_mirt.direct_mirt_model(responses, spec)
            x = model.initial_point(0)
            ms.append(_median_cpu_ms(lambda: model.logp(x), evals))
        lines.append(f"| {share:.2f} | {ms[0]:.3f} | {ms[1]:.3f} | {ms[1] / ms[0]:.2f} |")
        print(lines[-1], flush=True)
    lines.append(f"\nload average after: {loadavg()}")
    out.write_text("\n".join(lines) + "\n")


def markdown(r: dict) -> str:
    lines = [f"# Direct MIRT model against PyTensor's graph compiled by nutpie ({r['size']}, D = {r['dims']}, "
             f"spec {r['spec']})", "", f"`{r['command']}` at {r['source'].get('head', '?')[:7]}; {r['machine']}.", "",
             "One logp + gradient, CPU ms (one thread, median of "
             f"{r['evals']} at the direct model's start point):", "",
             "| missing | direct ms | graph ms | graph / direct | load before |", "|---|---|---|---|---|"]
    for g in r["gradient"]:
        lines.append(f"| {g['missing']:.0%} | {g['direct_ms']:.3f} | {g['graph_ms']:.3f} | "
                     f"{g['graph_over_direct']:.1f} | {g['load_before']} |")
    if r.get("fits"):
        lines += ["", f"One fit, {r['chains']} chains x ({r['tune']} + {r['draws']}), complete matrix, seed "
                  f"{r['seed']} (CPU seconds of the process, nutpie's chains included):", "",
                  "| model | wall s | CPU s | compile s | sample s | min bulk ESS | divergences | mean steps | "
                  "load before / after |", "|---|---|---|---|---|---|---|---|---|"]
        for f in r["fits"]:
            lines.append(f"| {f['nutpie_model']} | {f['wall_s']:.1f} | {f['cpu_s']:.1f} | {fmt(f['compile_s'])} | "
                         f"{fmt(f['sample_s'])} | {f['min_bulk_ess']:.0f} | {f['divergences']} | "
                         f"{f['mean_steps']:.1f} | {f['load_before']} / {f['load_after']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="200x500", help="MODELSxITEMS")
    parser.add_argument("--dims", type=int, default=2)
    parser.add_argument("--spec", default="mirt", help="mirt or mirt-confirmatory (dimensions from the item groups)")
    parser.add_argument("--evals", type=int, default=200)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-fit", action="store_true", help="time one logp + gradient only")
    parser.add_argument("--layouts", action="store_true", help="time the two likelihood kernels only")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    from bayesirt.models.specs import load_spec

    models, items = parse_size(args.size)
    if args.layouts:
        layouts(models, items, args.dims, args.evals, OUT.with_name("direct_mirt_layouts.md"))
        return
    spec = load_spec(args.spec)
    if spec.structure == "exploratory":
        spec = spec.with_dimensions(args.dims)
    result = {"size": args.size, "dims": args.dims, "spec": args.spec, "evals": args.evals, "draws": args.draws,
              "tune": args.tune, "chains": args.chains, "seed": args.seed, "machine": machine(),
              "command": "nice -n 19 .venv/bin/python benchmarks/direct_mirt.py " + " ".join(argv or sys.argv[1:]),
              "source": source_state(), "versions": versions(["bayesirt", "pymc", "pytensor", "nutpie", "numba"]),
              "gradient": [], "fits": []}
    for missing in (0.0, 0.5):
        load = loadavg()
        g = gradient_ms(two_factor(models, items, args.dims, missing), spec, args.evals)
        result["gradient"].append({"missing": missing, "load_before": load, **g})
        print(result["gradient"][-1], flush=True)
        write_results(args.out, result, markdown)
    if not args.no_fit:
        responses = two_factor(models, items, args.dims, 0.0)
        for direct in (True, False):
            result["fits"].append(one_fit(responses, spec, direct=direct, draws=args.draws, tune=args.tune,
                                          chains=args.chains, seed=args.seed))
            print(result["fits"][-1], flush=True)
            write_results(args.out, result, markdown)
    write_results(args.out, result, markdown, echo=True)


if __name__ == "__main__":
    main()
