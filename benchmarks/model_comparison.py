"""Model comparison on simulated data with known truth (issue 9 acceptance), and its costs.

1. Two-factor data (300 models x 120 items): MIRT D = 1, 2, 3 by NUTS, compared by
   leave-one-model-out elpd (PSIS over the ability-integrated likelihood, or exact 5-fold by model
   when Pareto k flags more than 5% of models); Tucker congruence of the oblimin-rotated posterior
   mean loadings with the truth.
2. 3PL data with guessing 0.25, and 2PL data (300 x 40): 2PL against 3PL, both by NUTS.
3. Costs: MIRT D = 2 fit time by NUTS and ADVI on 300 x 1,000; leave-one-model-out and cell-level
   LOO time and peak memory on a 1,000 x 5,000 2PL posterior (ADVI, 1,000 draws).

    .venv/bin/python benchmarks/model_comparison.py [--part comparisons|costs] [--quick]

Writes benchmarks/results/model_comparison_<part>.{json,md} (updated after every stage, so an
interrupted run keeps what it finished).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import versions  # noqa: E402

from bayesirt.comparison.loo import compare_table, kfold_models, loo_cells, loo_models  # noqa: E402
from bayesirt.data import make_responses  # noqa: E402
from bayesirt.data.datasets.simulate import simulate_pl  # noqa: E402
from bayesirt.inference.fitting import fit  # noqa: E402
from bayesirt.structure.loadings import rotate_posterior  # noqa: E402
from bayesirt.models.rotation import align_loadings  # noqa: E402
from bayesirt.models.specs import load_spec  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def two_factor(n_models, n_items, seed):
    rng = np.random.default_rng(seed)
    half = n_items // 2
    loading = rng.uniform(0.0, 0.3, (n_items, 2))
    loading[:half, 0] = rng.uniform(0.8, 2.0, half)
    loading[half:, 1] = rng.uniform(0.8, 2.0, n_items - half)
    theta = rng.normal(size=(n_models, 2))
    d = rng.normal(0, 1, n_items)
    p = 1 / (1 + np.exp(-(loading @ theta.T + d[:, None])))
    return make_responses((rng.uniform(size=p.shape) < p).astype(np.int8)), loading


def compare(responses, specs, nuts, label):
    """LOMO PSIS for every spec; exact 5-fold by model for all when k flags > 5% of models."""
    trees, results, seconds = {}, {}, {}
    for name, spec in specs.items():
        t0 = time.perf_counter()
        trees[name] = fit(responses, spec, progress=False, **nuts)
        seconds[name] = time.perf_counter() - t0
        results[name] = loo_models(trees[name], progress=False)
    flagged = max(float((r.pareto_k > r.good_k).mean()) for r in results.values())
    method = "psis"
    if flagged > 0.05:
        method = "kfold"
        results = {name: kfold_models(responses, spec, folds=5, seed=0, full_fit=trees[name], workers=2,
                                      progress=False, **nuts) for name, spec in specs.items()}
    table = compare_table(results)
    print(label, method, f"(worst Pareto-k share {flagged:.1%})\n", table.round(2).to_string(), flush=True)
    return trees, table, method, flagged, seconds


def _write(part: str, out: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"model_comparison_{part}.json").write_text(json.dumps(out, indent=2))
    lines = [f"# Model comparison on simulated data (issue 9): {part}", "",
             f"Date {out['date']}; versions {out['versions']}; NUTS {out.get('nuts')}.", "",
             f"Command: `.venv/bin/python benchmarks/model_comparison.py --part {part}`", ""]
    for key in ("two_factor", "3pl_data", "2pl_data"):
        if key not in out:
            continue
        rows = out[key]["table"]
        lines += [f"## {key} ({out[key]['method']}; worst share of models with bad Pareto k "
                  f"{out[key]['worst_bad_k_share']:.1%})", "",
                  "| spec | elpd | se | elpd_diff | dse | p | weight | bad_k |", "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['spec']} | {r['elpd']:.1f} | {r['se']:.1f} | {r['elpd_diff']:.1f} | {r['dse']:.1f} | "
                  f"{r['p']:.1f} | {r['weight']:.3f} | {r['bad_k']} |" for r in rows]
        lines.append("")
    if "two_factor" in out:
        lines += [f"Tucker congruence (oblimin-rotated posterior mean, D = 2, vs truth): "
                  f"{out['two_factor']['tucker_congruence_oblimin']}", ""]
    if "costs" in out:
        lines += ["## Costs", "", *[f"- {k}: {v:.1f}" if isinstance(v, float) else f"- {k}: {v}"
                                    for k, v in out["costs"].items()]]
    (RESULTS / f"model_comparison_{part}.md").write_text("\n".join(lines) + "\n")


def comparisons(out: dict, nuts: dict) -> None:
    responses, truth = two_factor(300, 120, seed=3)
    mirt = load_spec("mirt")
    trees, table, method, flagged, seconds = compare(
        responses, {f"{d}d": mirt.with_dimensions(d) for d in (1, 2, 3)}, nuts, "two-factor")
    rotated = rotate_posterior(trees["2d"]["posterior"].to_dataset(), "oblimin")["loading"].mean("sample").values
    _, _, _, congruence = align_loadings(rotated, truth)
    out["two_factor"] = {"table": json.loads(table.reset_index().to_json(orient="records")), "method": method,
                         "worst_bad_k_share": flagged, "fit_seconds": seconds,
                         "tucker_congruence_oblimin": congruence.tolist()}
    _write("comparisons", out)
    for kind in ("3pl", "2pl"):
        data, _ = simulate_pl(kind, n_items=40, n_models=300, seed=7, guessing=0.25 if kind == "3pl" else None)
        _, table, method, flagged, _ = compare(data, {"2pl": load_spec("2pl"), "3pl": load_spec("3pl")}, nuts,
                                               f"{kind} data")
        out[f"{kind}_data"] = {"table": json.loads(table.reset_index().to_json(orient="records")), "method": method,
                               "worst_bad_k_share": flagged}
        _write("comparisons", out)


def costs(out: dict, draws: int, mirt_methods: tuple[str, ...]) -> None:
    mirt = load_spec("mirt")
    out["costs"] = costs = {}
    big, _ = two_factor(300, 1000, seed=4)
    for method in mirt_methods:
        options = {"method": method, "draws": 500, "seed": 1} | ({"tune": 500, "chains": 2} if method == "nuts" else {})
        t0 = time.perf_counter()
        fit(big, mirt.with_dimensions(2), progress=False, **options)
        costs[f"mirt2_300x1000_{method}_s"] = time.perf_counter() - t0
        _write("costs", out)
    large, _ = simulate_pl("2pl", n_items=5000, n_models=1000, seed=9)
    tree = fit(large, "2pl", method="advi", draws=draws, seed=1, progress=False)
    costs["loo_posterior_draws"] = draws
    for name, function in (("loo_models", loo_models), ("loo_cells", loo_cells)):
        tracemalloc.start()
        t0 = time.perf_counter()
        result = function(tree, progress=False)
        costs[f"{name}_1000x5000_s"] = time.perf_counter() - t0
        costs[f"{name}_1000x5000_peak_traced_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        costs[f"{name}_bad_k"] = int((result.pareto_k > result.good_k).sum())
        costs["process_max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        _write("costs", out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", choices=("comparisons", "costs"), default="comparisons")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--loo-draws", type=int, default=1000, help="posterior draws of the 1,000 x 5,000 fit")
    parser.add_argument("--mirt-methods", default="advi,nuts", help="MIRT D = 2 fits to time ('' for none)")
    args = parser.parse_args()
    nuts = {"method": "nuts", "draws": 300 if args.quick else 500, "tune": 300 if args.quick else 500, "chains": 2,
            "seed": 1}
    record = {"versions": versions(["bayesirt", "pymc", "nutpie", "arviz", "numpy"]), "quick": args.quick,
              "date": time.strftime("%Y-%m-%d"), "nuts": nuts}
    if args.part == "comparisons":
        comparisons(record, nuts)
    else:
        costs(record, args.loo_draws, tuple(m for m in args.mirt_methods.split(",") if m))
