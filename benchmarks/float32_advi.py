"""Does float32 make bayesirt's ADVI faster? The 2PL in float64 (the default) and float32.

The 1PL-4PL model follows PyTensor's ``floatX``: under ``pytensor.config.change_flags(floatX=
"float32")`` the responses, the variational parameters and every intermediate are float32. Per
precision, on ``simulate_pl("2pl", n_items=ITEMS, n_models=MODELS, seed=20261129)``:

  * ``step_ms`` / ``loss_ms`` -- CPU milliseconds of one mean-field ADVI optimizer step (Adam
    0.01, the step ``fit`` runs) and of one loss evaluation, medians of ``--repeats`` rounds of
    100 calls, the two precisions alternating round by round so both see the same machine load;
  * a whole ``fit(..., method="advi", seed=1)`` in that precision: wall and CPU seconds, steps,
    and the correlations of the posterior means with the truth.

Usage::

    python benchmarks/float32_advi.py            # 300 models x 1,000 items
    python benchmarks/float32_advi.py --quick    # 60 x 200, 2 rounds
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from _common import command_line, machine, versions, write_results  # noqa: E402 (benchmarks/ is on sys.path when run as a script)

HERE = Path(__file__).resolve().parent
PRECISIONS = ("float64", "float32")


def _step_and_loss(responses, precision):
    import pymc as pm
    import pytensor

    from bayesirt.inference.advi import step_function
    from bayesirt.models.logistic import build_logistic
    from bayesirt.models.specs import load_spec

    with pytensor.config.change_flags(floatX=precision):
        advi = pm.ADVI(model=build_logistic(responses, load_spec("2pl")), random_seed=1)
        return step_function(advi.objective, pm.adam(learning_rate=0.01), 1), advi.objective.score_function()


def _cpu_ms(fn, calls=100) -> float:
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls * 1e3


def _fit(responses, truth, precision) -> dict:
    import pytensor

    from bayesirt.inference.fitting import fit

    with pytensor.config.change_flags(floatX=precision):
        wall, cpu = time.perf_counter(), time.process_time()
        tree = fit(responses, "2pl", method="advi", seed=1, draws=500, progress=False)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    post = tree.posterior.mean(("chain", "draw"))
    return {"wall_s": wall, "cpu_s": cpu, "steps": int(tree.attrs["advi_iterations_run"]),
            "theta_dtype": str(tree.posterior["theta"].dtype),
            "r_truth": {k: float(np.corrcoef(post[k].values, truth[k].values)[0, 1])
                        for k in ("theta", "discrimination", "difficulty")}}


def markdown(result: dict) -> str:
    rows = result["precisions"]
    lines = [f"# ADVI in float64 and float32 ({result['size']} 2PL)", "",
             f"{result['machine']}; {result['date']}; {', '.join(f'{k} {v}' for k, v in result['versions'].items())}. "
             f"Command: `{result['command']}`. Load average at start {result['loadavg_start']}, at end {result['loadavg_end']}.",
             "", "| precision | step (ms CPU, median) | loss (ms CPU, median) | fit wall s | fit CPU s | steps | "
                 "r(truth) theta / a / b |", "|---|---:|---:|---:|---:|---:|---|"]
    for p in PRECISIONS:
        r = rows[p]
        f = r["fit"]
        lines.append(f"| {p} | {r['step_ms']:.2f} | {r['loss_ms']:.2f} | {f['wall_s']:.1f} | {f['cpu_s']:.1f} | {f['steps']:,} | "
                     + " / ".join(f"{f['r_truth'][k]:.4f}" for k in ("theta", "discrimination", "difficulty")) + " |")
    ratio = rows["float64"]["step_ms"] / rows["float32"]["step_ms"]
    lines += ["", f"float64 / float32 step time: {ratio:.2f}x. Step and loss times are medians of {result['repeats']} "
                  "rounds of 100 calls, the precisions alternating. The fit times include compiling the model's graphs.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="60 x 200, 2 rounds")
    p.add_argument("--repeats", type=int, default=7, help="rounds of 100 step / loss calls per precision")
    p.add_argument("--out", type=Path, default=HERE / "results" / "float32_advi.json")
    args = p.parse_args(argv)
    models, items, repeats = (60, 200, 2) if args.quick else (300, 1000, args.repeats)

    import os

    from bayesirt.data import simulate_pl

    responses, truth = simulate_pl("2pl", n_items=items, n_models=models, seed=20261129)
    load_start = os.getloadavg()
    fns = {prec: _step_and_loss(responses, prec) for prec in PRECISIONS}
    times = {prec: {"step": [], "loss": []} for prec in PRECISIONS}
    for prec, (step, loss) in fns.items():  # warm up
        _cpu_ms(step, 10), _cpu_ms(loss, 10)
    for _ in range(repeats):
        for prec, (step, loss) in fns.items():
            times[prec]["step"].append(_cpu_ms(step))
            times[prec]["loss"].append(_cpu_ms(loss))
    rows = {prec: {"step_ms": float(np.median(times[prec]["step"])), "loss_ms": float(np.median(times[prec]["loss"])),
                   "step_ms_all": times[prec]["step"], "loss_ms_all": times[prec]["loss"],
                   "fit": _fit(responses, truth, prec)} for prec in PRECISIONS}
    result = {"size": f"{models} x {items:,}", "repeats": repeats, "precisions": rows,
              "command": command_line(__file__, argv),
              "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(),
              "versions": versions(("bayesirt", "pymc", "pytensor", "numpy")),
              "loadavg_start": [round(x, 2) for x in load_start], "loadavg_end": [round(x, 2) for x in os.getloadavg()]}
    write_results(args.out, result, markdown, echo=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
