"""Why the hierarchical 2PL mixes slowly under NUTS (issue 43): the latent scale's direction.

The 2PL's likelihood depends on a_i (theta_m - b_i) only, so it is unchanged when every ability and
difficulty is multiplied by k and every slope divided by it. With fixed item priors the slopes' prior pins
that direction (the mean log slope of 500 items has prior sd 0.5 / sqrt(500)); in ``2pl-hierarchical`` the
slopes' location ``discrimination_mu`` is learned, so only the abilities' N(0, 1) prior pins it (about
1 / sqrt(2 n_models) in log scale), and a move along it changes every ability, slope and difficulty together,
which a diagonal mass matrix cannot do in one step.

For each generator seed, the direct model of ``fit`` (``bayesirt.inference.nutpie_direct``) with the spec's
nutpie settings samples 2 chains x (500 + 500) of ``benchmarks/_nuts_families.py``'s 2pl-hierarchical data
(200 models x 500 items). Reported: bulk ESS and R-hat of the four hyperparameters, of the log of the
abilities' spread (the sd of theta over models, per draw) and of the mean log slope, and the within-chain
correlation of those two (near -1: the draws move along the scale direction).

Since the package samples this spec in scale-free coordinates (``build_logistic``: with g = exp(discrimination_mu),
u = g theta_deviation, m = g theta_mean, r = a / g, beta = g (b - theta_mean) and the difficulty's
hyperparameters times g, the likelihood r_i (u_m - beta_i) no longer holds discrimination_mu, which then moves
alone), ``--model direct`` measures those; ``--model plain`` samples the coordinates before that change (theta
mean and deviation, log a ~ N(discrimination_mu, discrimination_sigma), b_centered ~ N(mu_b - theta_mean,
sigma_b)) as a PyMC model through nutpie's PyMC path with the same settings, for the comparison.

Usage::

    .venv/bin/python benchmarks/hierarchical_scale.py --out benchmarks/results/hierarchical_scale.json
    .venv/bin/python benchmarks/hierarchical_scale.py --model plain \
        --out benchmarks/results/hierarchical_scale_plain.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import report, run_header, run_header_lines  # noqa: E402
from _nuts_families import FAMILIES  # noqa: E402

MODELS = {"direct": "fit's direct nutpie model, in build_logistic's (scale-free) coordinates",
          "plain": "the coordinates before the scale-free ones, a PyMC model through nutpie's PyMC path"}
HYPER = ("discrimination_mu", "discrimination_sigma", "difficulty_mu", "difficulty_sigma")


def plain_model(responses):
    """The PyMC model of 2pl-hierarchical's posterior in the coordinates before the scale-free ones (module
    text): theta = theta_mean + theta_deviation, log a ~ N(discrimination_mu, discrimination_sigma), b =
    difficulty_centered + theta_mean."""
    import pymc as pm

    from bayesirt.data.responses import MISSING

    y = responses["responses"].values
    items, models = np.nonzero(y != MISSING)
    n_models = y.shape[1]
    with pm.Model(coords={"item": responses["item"].values, "model": responses["model"].values}) as model:
        theta_mean = pm.Normal("theta_mean", 0.0, 1.0 / np.sqrt(n_models))
        deviation = pm.ZeroSumNormal("theta_deviation", sigma=1.0, dims="model")
        mu_a = pm.Normal("discrimination_mu", 0.0, 0.5)
        a = pm.LogNormal("discrimination", mu_a, pm.HalfNormal("discrimination_sigma", 0.5), dims="item")
        mu_b, sigma_b = pm.Normal("difficulty_mu", 0.0, 1.0), pm.HalfNormal("difficulty_sigma", 2.0)
        b_c = pm.Normal("difficulty_centered", mu_b - theta_mean, sigma_b, dims="item")
        pm.Bernoulli("y", logit_p=a[items] * (deviation[models] - b_c[items]), observed=y[items, models])
        pm.Deterministic("theta", theta_mean + deviation, dims="model")
    return model


def diagnose(data_seed: int, sampler_seed: int, n_models: int, n_items: int, model: str = "direct") -> dict:
    """The ESS, R-hat and correlations of one fit (see the module text)."""
    import arviz as az
    import nutpie
    import xarray as xr

    from bayesirt.inference.nutpie_direct import direct_model
    from bayesirt.inference.nutpie_settings import responses_per_item, spec_nutpie_settings
    from bayesirt.models.specs import load_spec

    spec = load_spec("2pl-hierarchical")
    responses, _ = FAMILIES["2pl-hierarchical"].simulate(n_models, n_items, data_seed, 0.0)
    compiled = (direct_model(responses, spec).compiled if model == "direct"
                else nutpie.compile_pymc_model(plain_model(responses)))
    tree = nutpie.sample(compiled, draws=500, tune=500, chains=2, cores=2, seed=sampler_seed, progress_bar=False,
                         **spec_nutpie_settings(spec, responses_per_item(responses)))
    post = tree["posterior"].to_dataset()
    spread = np.log(post["theta"].std("model"))
    mean_log_slope = np.log(post["discrimination"]).mean("item")
    summary = xr.Dataset({**{v: post[v] for v in HYPER}, "log_theta_spread": spread, "mean_log_slope": mean_log_slope})
    ess, rhat = az.ess(summary, method="bulk"), az.rhat(summary)
    corr = [float(np.corrcoef(spread.values[c], mean_log_slope.values[c])[0, 1]) for c in range(spread.sizes["chain"])]
    return {"data_seed": data_seed, "sampler_seed": sampler_seed, "model": model,
            "ess": {v: float(ess[v]) for v in summary}, "rhat": {v: float(rhat[v]) for v in summary},
            "mean": {v: float(summary[v].mean()) for v in summary}, "sd": {v: float(summary[v].std()) for v in summary},
            "within_chain_correlation": corr}


def markdown(result: dict) -> str:
    names = [*HYPER, "log_theta_spread", "mean_log_slope"]
    lines = ["# The hierarchical 2PL's scale direction under NUTS (issue 43)", "",
             f"Model: {result.get('model', 'direct')} ({MODELS[result.get('model', 'direct')]})", "",
             *run_header_lines(result),
             "200 models x 500 items of `benchmarks/_nuts_families.py`'s 2pl-hierarchical generator, the model above "
             "with the spec's nutpie settings, 2 chains x (500 + 500). Bulk ESS (R-hat) of the hyperparameters, of the "
             "log of the abilities' spread over models and of the mean log slope, per draw; r: their correlation "
             "within each chain.", "",
             "| data seed | " + " | ".join(names) + " | r (chain 1 / 2) |", "|---|" + "---:|" * (len(names) + 1)]
    for r in result["runs"]:
        lines.append(f"| {r['data_seed']} | " + " | ".join(f"{r['ess'][v]:.0f} ({r['rhat'][v]:.2f})" for v in names)
                     + " | " + " / ".join(f"{c:.2f}" for c in r["within_chain_correlation"]) + " |")
    lines += ["", "Posterior mean (sd) of the same quantities:", "", "| data seed | " + " | ".join(names) + " |",
              "|---|" + "---:|" * len(names)]
    for r in result["runs"]:
        lines.append(f"| {r['data_seed']} | " + " | ".join(f"{r['mean'][v]:.3f} ({r['sd'][v]:.3f})" for v in names)
                     + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-seeds", default="20261129,20261130,20261131")
    p.add_argument("--sampler-seed", type=int, default=1)
    p.add_argument("--size", default="200x500", help="MODELSxITEMS")
    p.add_argument("--model", choices=list(MODELS), default="direct")
    p.add_argument("--out", type=Path, help="results JSON (a Markdown beside it)")
    args = p.parse_args(argv)
    n_models, n_items = map(int, args.size.split("x"))
    result = {**run_header(__file__, argv), "model": args.model,
              "runs": [diagnose(int(s), args.sampler_seed, n_models, n_items, args.model)
                       for s in args.data_seeds.split(",")]}
    return report(args.out, result, markdown)


if __name__ == "__main__":
    sys.exit(main())
