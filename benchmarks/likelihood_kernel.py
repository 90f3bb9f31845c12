"""The fused likelihood kernel alone: CPU time of one ``loglik_and_gradient`` call, by shape and loop order.

For each shape (items x models) a random complete response matrix and parameters (seed 0), then the
median CPU time of ``--calls`` calls of ``bayesirt.models.kernels.loglik_and_gradient`` with the loops
along models (rows = items) and along items (rows = models, the transposed matrix), after a warm-up
call that compiles or loads the kernel. ``BY_MODEL_BELOW`` in kernels.py is set from these figures.

Usage::

    python benchmarks/likelihood_kernel.py                 # 1000x300, 300x1000, 1000x64, 2854x22
    python benchmarks/likelihood_kernel.py --calls 50
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import loadavg, machine, source_state, versions  # noqa: E402

SHAPES = ((1000, 300), (300, 1000), (1000, 64), (2854, 22))  # items x models


def median_cpu_ms(call, calls: int) -> float:
    times = []
    for _ in range(calls):
        c = time.process_time()
        call()
        times.append(time.process_time() - c)
    return 1e3 * float(np.median(times))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=200, help="timed calls per shape and loop order (default 200)")
    args = p.parse_args(argv)
    from bayesirt.models.kernels import loglik_and_gradient

    print(f"{machine()}; {versions(('bayesirt', 'numba', 'numpy'))}; source {source_state().get('head')}; "
          f"load {loadavg()}")
    print("| items x models | by item rows (ms) | by model rows (ms) |\n|---|---:|---:|")
    rng = np.random.default_rng(0)
    for n_items, n_models in SHAPES:
        a, t, d = np.exp(rng.normal(0, 0.5, n_items)), rng.normal(size=n_models), rng.normal(size=n_items)
        y = (rng.random((n_items, n_models)) < 0.6).astype(np.int8)
        yt = np.ascontiguousarray(y.T)
        loglik_and_gradient(a, t, d, y, False), loglik_and_gradient(a, t, d, yt, True)
        by_item = median_cpu_ms(lambda: loglik_and_gradient(a, t, d, y, False), args.calls)
        by_model = median_cpu_ms(lambda: loglik_and_gradient(a, t, d, yt, True), args.calls)
        print(f"| {n_items:,} x {n_models:,} | {by_item:.3f} | {by_model:.3f} |", flush=True)
    print(f"load at end {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
