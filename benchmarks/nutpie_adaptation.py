"""nutpie adaptation settings on bayesirt's 2PL: ESS per gradient and per sampling second, pooled over seeds.

For each seed (the data seed and the sampler's) a simulated complete 2PL of 300 models x 1,000 items,
the direct nutpie model ``fit`` samples (``bayesirt.inference.nutpie_direct``), and 2 chains x (500
tune + 500 draws) under each setting. Reported per run and pooled over seeds: the smallest bulk ESS
over theta, discrimination and intercept, the gradient evaluations of tuning and draws together
(nutpie's ``n_steps``), ESS per 1,000 of them, sampling seconds and mean leapfrog steps per draw.

Usage::

    python benchmarks/nutpie_adaptation.py            # the settings below, seeds 20261129-31 (~5 min)
    python benchmarks/nutpie_adaptation.py --settings '{"cur": {"adaptation": "draw_diag"}}'
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

SETTINGS = {
    # fit's NUTPIE_SETTINGS until 0e39bbc, which added "step_size_jitter": 0.0 (results/nutpie_adaptation.md)
    "cur": {"adaptation": "draw_diag", "mass_matrix_switch_freq": 120},
    "ta85": {"adaptation": "draw_diag", "mass_matrix_switch_freq": 120, "target_accept": 0.85},
    "ta9": {"adaptation": "draw_diag", "mass_matrix_switch_freq": 120, "target_accept": 0.9},
    "sw200": {"adaptation": "draw_diag", "mass_matrix_switch_freq": 200},
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--settings", type=json.loads, default=SETTINGS, help="JSON: name -> nutpie.sample keywords")
    p.add_argument("--seeds", type=int, default=3, help="seeds 20261129, 20261130, ... (default 3)")
    args = p.parse_args(argv)
    import arviz as az
    import nutpie

    from bayesirt.data import simulate_pl
    from bayesirt.inference.nutpie_direct import direct_model
    from bayesirt.models.specs import load_spec

    spec, pooled = load_spec("2pl"), {}
    for seed in range(20261129, 20261129 + args.seeds):
        responses, _ = simulate_pl("2pl", n_items=1000, n_models=300, seed=seed)
        model = direct_model(responses, spec).compiled
        for name, settings in args.settings.items():
            t = time.perf_counter()
            tree = nutpie.sample(model, draws=500, tune=500, chains=2, cores=2, seed=seed, save_warmup=True,
                                 progress_bar=False, **settings)
            seconds = time.perf_counter() - t
            post = tree["posterior"].to_dataset()
            ess = min(float(az.ess(post[[v]], method="bulk")[v].min()) for v in ("theta", "discrimination", "intercept"))
            stats, warm = tree["sample_stats"].to_dataset(), tree["warmup_sample_stats"].to_dataset()
            grads = int(stats["n_steps"].sum() + warm["n_steps"].sum())
            row = {"settings": name, "seed": seed, "min_bulk_ess": round(ess), "gradients": grads,
                   "ess_per_1k_gradients": round(1000 * ess / grads, 1), "sampling_s": round(seconds, 1),
                   "leapfrog_per_draw": round(float(stats["n_steps"].mean()), 1), "load": os.getloadavg()[0]}
            print(json.dumps(row), flush=True)
            pooled.setdefault(name, []).append(row)
    print("| settings | pooled min bulk ESS | ESS per 1k gradients | ESS per sampling s |\n|---|---:|---:|---:|")
    for name, rows in pooled.items():
        ess, grads, secs = (sum(r[k] for r in rows) for k in ("min_bulk_ess", "gradients", "sampling_s"))
        print(f"| {name} | {ess} | {1000 * ess / grads:.1f} | {ess / secs:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
