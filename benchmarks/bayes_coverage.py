"""Coverage of the Bayesian audit's DIF posterior: the per-item Laplace approximation (the default of
``--bayes``) and ADVI against NUTS.

Data are drawn from the residual family-DIF model itself (``bayesirt.models.family_dif``), with
the truth drawn from its priors, so a correct posterior covers the truth at the nominal rate:

    logit P(Y_im = 1) = b_i + o_im + delta_{i, f(m)},  b_i ~ N(0, 2^2),  delta_i. ~ ZeroSumNormal(1),
    o_im = a_i . theta_m (a fixed rank-3 offset, a_i ~ N(0, 0.5^2 I), theta_m ~ N(0, I)),

with 3 families x 60 models (one audit half of the small NT-style designs) and 120 items. Each
replicate is fitted by ``laplace_draws`` (500 draws) and by ``fit_family_dif_posterior`` (ridge prior,
N(0, 2) easiness prior) with ADVI (500 draws) and NUTS (2 chains x 500 + 500), and the share of the true family effects
(item x family) and DIF ranges D_i inside the posterior's 90% equal-tailed intervals is counted.

Usage::

    python benchmarks/bayes_coverage.py [--replicates 10]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine, versions, write_results  # noqa: E402

N_ITEMS, N_PER_FAMILY, N_FAMILIES, RANK = 120, 60, 3, 3
METHODS = {"laplace": {"method": "laplace", "draws": 500},
           "advi": {"method": "advi", "draws": 500},
           "nuts": {"method": "nuts", "draws": 500, "tune": 500, "chains": 2, "cores": 1}}


def _replicate(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    family = np.repeat(np.arange(N_FAMILIES), N_PER_FAMILY)
    offsets = rng.normal(0, 0.5, (N_ITEMS, RANK)) @ rng.normal(0, 1, (RANK, family.size))
    easiness = rng.normal(0, 2, N_ITEMS)
    raw = rng.normal(0, 1, (N_ITEMS, N_FAMILIES))
    # ZeroSumNormal(1): iid N(0, 1) draws centred over the families (an isotropic N(0, 1) on the
    # zero-sum subspace, so each coordinate has variance (F - 1) / F)
    delta = raw - raw.mean(axis=1, keepdims=True)
    eta = easiness[:, None] + offsets + delta[:, family]
    y = (rng.random(eta.shape) < 1 / (1 + np.exp(-eta))).astype(np.int8)
    return {"y": y, "offsets": offsets, "family": family, "delta": delta, "dif_range": np.ptp(delta, axis=1)}


def _covered(draws: np.ndarray, truth: np.ndarray) -> np.ndarray:
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    return (truth >= lo) & (truth <= hi)


def run(replicates: int) -> dict:
    from bayesirt.audit.bayes.posterior import fit_family_dif_posterior
    from bayesirt.audit.bayes.laplace import laplace_draws

    rows = []
    for r in range(replicates):
        data = _replicate(20261201 + r)
        for name, options in METHODS.items():
            t0 = time.perf_counter()
            observed = np.ones_like(data["y"], bool)
            if name == "laplace":
                delta, _, _ = laplace_draws(data["y"], observed, data["offsets"], data["family"], N_FAMILIES,
                                            draws=options["draws"], seed=r, easiness_sd=2.0)
                dif = np.ptp(delta, axis=2)
            else:
                tree = fit_family_dif_posterior(data["y"], observed, data["offsets"], data["family"], N_FAMILIES,
                                                prior="ridge", easiness_prior="normal", seed=r, **options)
                post = tree["posterior"].to_dataset().stack(sample=("chain", "draw"))
                delta = post["family_effect"].transpose("sample", "item", "family").values
                dif = post["dif_range"].transpose("sample", "item").values
            rows.append({"replicate": r, "method": name, "seconds": time.perf_counter() - t0,
                         "delta_coverage": float(_covered(delta, data["delta"]).mean()),
                         "dif_range_coverage": float(_covered(dif, data["dif_range"]).mean()),
                         "delta_width": float(np.subtract(*np.quantile(delta, [0.95, 0.05], axis=0)).mean())})
            print(f"replicate {r} {name}: delta {rows[-1]['delta_coverage']:.3f}, D {rows[-1]['dif_range_coverage']:.3f},"
                  f" {rows[-1]['seconds']:.1f} s", flush=True)
    summary = {}
    for name in METHODS:
        sel = [x for x in rows if x["method"] == name]
        summary[name] = {k: float(np.mean([x[k] for x in sel])) for k in ("delta_coverage", "dif_range_coverage",
                                                                         "delta_width", "seconds")}
        summary[name]["delta_coverage_replicate_range"] = [min(x["delta_coverage"] for x in sel),
                                                           max(x["delta_coverage"] for x in sel)]
    return {"summary": summary, "rows": rows}


def markdown(result: dict) -> str:
    lines = ["# Coverage of the 90% intervals of the residual-DIF posterior: Laplace and ADVI vs NUTS", "",
             f"{result['date']}; {result['machine']}; command `{result['command']}`.",
             f"Versions: {', '.join(f'{k} {v}' for k, v in result['versions'].items())}.", "",
             "| method | replicates | family effects covered (range over replicates) | D_i covered | "
             "mean 90% width of delta | s per fit |", "|---|---|---|---|---|---|"]
    n = len({r["replicate"] for r in result["rows"]})
    for name, s in result["summary"].items():
        lo, hi = s["delta_coverage_replicate_range"]
        lines.append(f"| {name} | {n} | {s['delta_coverage']:.3f} ({lo:.3f}-{hi:.3f}) | {s['dif_range_coverage']:.3f} | "
                     f"{s['delta_width']:.3f} | {s['seconds']:.1f} |")
    lines += ["", f"{N_ITEMS} items x {N_FAMILIES} families x {N_PER_FAMILY} models, data drawn from the model with "
              "the truth from its priors: nominal coverage 0.90.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicates", type=int, default=10)
    args = parser.parse_args()
    result = run(args.replicates) | {"date": time.strftime("%Y-%m-%d"), "machine": machine(),
                                     "command": f"python benchmarks/bayes_coverage.py --replicates {args.replicates}",
                                     "versions": versions(("bayesirt", "pymc", "nutpie", "numpy"))}
    write_results(Path(__file__).parent / "results" / "bayes_coverage.json", result, markdown, echo=True)


if __name__ == "__main__":
    main()
