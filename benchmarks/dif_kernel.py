"""Micro-benchmark: one start and one Newton step of the family-DIF fit, NumPy against the compiled
kernels of ``bayesirt/audit/engine/dif_kernel.py``, on an audit half of the NT MMLU size.

The NumPy side is the code the kernels replaced (``start``: exp(-clip(o + delta[:, family]));
``step``: q = 1 / (E u + 1), then the per-family sums of q and q^2 by matrix products with the
family indicator). Prints wall seconds per call (mean of 5 after one warm-up) and the largest
relative difference of the results.

Usage::

    python benchmarks/dif_kernel.py [--items 14042] [--models 2500] [--families 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bayesirt.audit.engine.dif_kernel import NO_WEIGHTS, family_moments, negative_exp


def _mean_seconds(call, repeats: int = 5) -> float:
    call()
    t0 = time.perf_counter()
    for _ in range(repeats):
        call()
    return (time.perf_counter() - t0) / repeats


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", type=int, default=14042)
    p.add_argument("--models", type=int, default=2500)
    p.add_argument("--families", type=int, default=3)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    offsets = rng.normal(0, 1, (args.items, args.models))
    family = rng.integers(0, args.families, args.models)
    delta = rng.normal(0, 0.3, (args.items, args.families))
    factor = np.exp(-rng.normal(0, 0.3, (args.items, args.families)))
    onehot = np.eye(args.families)[family]
    e_np, e_kernel, q = (np.empty(offsets.shape) for _ in range(3))

    def numpy_start():
        np.negative(offsets + delta[:, family], out=e_np)
        np.clip(e_np, -700, 700, out=e_np)
        np.exp(e_np, out=e_np)

    def numpy_step():
        np.multiply(e_np, factor[:, family], out=q)
        np.add(q, 1.0, out=q)
        np.reciprocal(q, out=q)
        return q @ onehot, (q * q) @ onehot

    start = {"numpy": _mean_seconds(numpy_start),
             "kernel": _mean_seconds(lambda: negative_exp(offsets, delta, family, e_kernel))}
    step = {"numpy": _mean_seconds(numpy_step),
            "kernel": _mean_seconds(lambda: family_moments(e_kernel, factor, family, NO_WEIGHTS))}
    want, got = numpy_step(), family_moments(e_kernel, factor, family, NO_WEIGHTS)
    rel = max(float(np.max(np.abs(g - w) / np.abs(w))) for g, w in zip(got, want))
    print(f"{args.items:,} items x {args.models:,} models, {args.families} families")
    print(f"start: NumPy {start['numpy']:.3f} s, kernel {start['kernel']:.3f} s "
          f"(max rel. diff of E {float(np.max(np.abs(e_kernel / e_np - 1))):.1e})")
    print(f"step:  NumPy {step['numpy']:.3f} s, kernel {step['kernel']:.3f} s (max rel. diff of the sums {rel:.1e})")


if __name__ == "__main__":
    main()
