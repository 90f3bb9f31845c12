"""Where the direct model's compile time goes (issue 43): numba's compile events, per function.

In a fresh subprocess with an empty ``NUMBA_CACHE_DIR`` per run, ``direct_model`` builds the 1PL-4PL callbacks
for a simulated 200 x 500 matrix (``simulate_pl``, seed 1; ``--spec mirt-confirmatory``: ``direct_mirt_model`` on
``_nuts_families``' 2-D data). Listeners on numba's ``numba:compile`` events give
each function's compile time, with its callees' (inclusive) and without (exclusive), and on ``numba:llvm_lock``
the LLVM time, charged to the function being compiled (``<callbacks>``: the C callbacks' own modules, which
numba compiles outside a dispatcher). Compile times vary by about +-1.5 s between identical runs, so each
figure is given per run.

Usage::

    .venv/bin/python benchmarks/direct_compile_profile.py --spec 2pl --runs 3 \\
        --out benchmarks/results/direct_compile_profile.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import report, run_header, run_header_lines  # noqa: E402


def profile(spec_name: str, missing: float) -> dict:
    """This process's compile profile of ``direct_model`` (run it with an empty numba cache)."""
    import collections

    from numba.core import event

    stack, exclusive, inclusive, llvm = [], collections.Counter(), collections.Counter(), collections.Counter()

    class Compile(event.Listener):
        def on_start(self, e):
            dispatcher = e.data["dispatcher"]
            stack.append([getattr(getattr(dispatcher, "py_func", None), "__qualname__", str(dispatcher)),
                          time.perf_counter(), 0.0])

        def on_end(self, e):
            name, start, children = stack.pop()
            seconds = time.perf_counter() - start
            inclusive[name] += seconds
            exclusive[name] += seconds - children
            if stack:
                stack[-1][2] += seconds

    class Llvm(event.Listener):
        def on_start(self, e):
            self.start = time.perf_counter()

        def on_end(self, e):
            llvm[stack[-1][0] if stack else "<callbacks>"] += time.perf_counter() - self.start

    event.register("numba:compile", Compile())
    event.register("numba:llvm_lock", Llvm())
    import nutpie  # noqa: F401  (imported before the timer, as fit does)

    from bayesirt.data.datasets.simulate import simulate_pl
    from bayesirt.inference.nutpie_direct import direct_model
    from bayesirt.models.specs import load_spec

    spec = load_spec(spec_name)
    if spec_name.startswith("mirt"):  # the 2-D data of benchmarks/_nuts_families.py
        from _nuts_families import _mirt_data

        from bayesirt.inference.direct_mirt import direct_mirt_model as direct_model

        responses = _mirt_data(200, 500, 1, missing, spec_name == "mirt-confirmatory")
    else:
        responses, _ = simulate_pl(spec_name.split("-")[0], n_items=500, n_models=200, seed=1, missing=missing)
    start = time.perf_counter()
    direct_model(responses, spec)
    return {"direct_model_s": time.perf_counter() - start, "llvm_s": sum(llvm.values()),
            "functions": sorted(({"name": k, "exclusive_s": exclusive[k], "inclusive_s": inclusive[k],
                                  "llvm_s": llvm[k]} for k in exclusive), key=lambda f: -f["exclusive_s"])[:15],
            "callbacks_llvm_s": llvm["<callbacks>"]}


def markdown(result: dict) -> str:
    lines = [f"# Compile profile of the direct model: {result['spec']}, 200 x 500, {result['missing']:.0%} missing",
             "", *run_header_lines(result),
             "Per run (each a fresh process with an empty numba cache): `direct_model` wall s, LLVM s in all, of it "
             "the callbacks' own modules.", "", "| run | direct_model s | LLVM s | callbacks' LLVM s |",
             "|---:|---:|---:|---:|"]
    for k, run in enumerate(result["runs"], 1):
        lines.append(f"| {k} | {run['direct_model_s']:.2f} | {run['llvm_s']:.2f} | {run['callbacks_llvm_s']:.2f} |")
    lines += ["", "Functions of the first run, by exclusive compile s (inclusive: with the functions compiled "
              "inside it; LLVM: its share of LLVM):", "", "| function | exclusive s | inclusive s | LLVM s |",
              "|---|---:|---:|---:|"]
    for f in result["runs"][0]["functions"]:
        lines.append(f"| `{f['name']}` | {f['exclusive_s']:.2f} | {f['inclusive_s']:.2f} | {f['llvm_s']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--spec", default="2pl", choices=["rasch", "2pl", "3pl", "4pl", "2pl-hierarchical",
                                                                "mirt-confirmatory"])
    p.add_argument("--missing", type=float, default=0.0)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help="results JSON (a Markdown beside it)")
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(profile(args.spec, args.missing)))
        return 0
    runs = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as cache:
            done = subprocess.run([sys.executable, __file__, "--worker", "--spec", args.spec, "--missing",
                                   str(args.missing)], env=dict(os.environ, NUMBA_CACHE_DIR=cache),
                                  capture_output=True, text=True, check=True)
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    result = {**run_header(__file__, argv), "spec": args.spec, "missing": args.missing, "runs": runs}
    return report(args.out, result, markdown)


if __name__ == "__main__":
    sys.exit(main())
