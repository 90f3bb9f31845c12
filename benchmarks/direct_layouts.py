"""Which likelihood kernel the direct nutpie model of a 1PL-4PL should use at a given observed share:
the dense matrix (``bayesirt.models.kernels``, missing cells masked; the 3PL's kernel with asymptotes)
or the observed cells (``bayesirt.models.cell_kernel``). CPU ms of one logp + gradient of the direct model (median of
``--evals`` calls, one thread) with each kernel, on simulated 2PL matrices with a share of their cells
missing at random; ``nutpie_direct.CELLS_BELOW`` is set from where the two cross.

Usage::

    python benchmarks/direct_layouts.py --size 200x500 --out benchmarks/results/direct_layouts.md
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from unittest import mock

import numpy as np

from bayesirt.data import simulate_pl
from bayesirt.inference import nutpie_direct
from bayesirt.models.specs import load_spec


def cost_ms(responses, spec, layout: int, evals: int) -> float:
    """Median CPU ms of one logp + gradient of the direct model with the kernel of ``layout``."""
    with mock.patch.object(nutpie_direct, "_layout", lambda y, spec: layout):
        model = nutpie_direct.direct_model(responses, spec)
    x = model.initial_point(0)
    model.logp(x)
    times = []
    for _ in range(evals):
        t = time.process_time()
        model.logp(x)
        times.append(time.process_time() - t)
    return 1e3 * float(np.median(times))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="200x500", help="MODELSxITEMS")
    p.add_argument("--evals", type=int, default=200)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    n_models, n_items = map(int, args.size.split("x"))
    by_2pl = nutpie_direct.BY_MODEL if n_models < nutpie_direct.BY_MODEL_BELOW else nutpie_direct.BY_ITEM
    lines = [f"# Direct model: dense against observed-cells kernel, {n_models} models x {n_items} items",
             "", f"CPU ms of one logp + gradient, median of {args.evals}; load average before: "
             f"{os.getloadavg()[0]:.2f} (a shared 2-core machine).", "",
             "| spec | observed share | dense ms | cells ms | cells / dense |", "|---|---|---|---|---|"]
    for name, dense in (("2pl", by_2pl), ("3pl", nutpie_direct.ASYMPTOTES)):
        spec = load_spec(name)
        for missing in (0.0, 0.5, 0.8, 0.9, 0.95):
            responses, _ = simulate_pl("2pl", n_items=n_items, n_models=n_models, seed=1, missing=missing)
            d = cost_ms(responses, spec, dense, args.evals)
            c = cost_ms(responses, spec, nutpie_direct.CELLS, args.evals)
            lines.append(f"| {name} | {1 - missing:.2f} | {d:.3f} | {c:.3f} | {c / d:.2f} |")
            print(lines[-1], flush=True)
    lines.append(f"\nload average after: {os.getloadavg()[0]:.2f}")
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
