"""benchmarks/hierarchical_scale.py's plain coordinates (those before build_logistic's scale-free ones) are an
exact change of variables of build_logistic's 2pl-hierarchical posterior: build_logistic's unconstrained log
density at the mapped point is the plain model's minus (n_models + n_items + 1) discrimination_mu, the log
Jacobian of theta, b and difficulty_mu divided by g = exp(discrimination_mu)."""

import sys
from pathlib import Path

import numpy as np
import pytest

from bayesirt.data import simulate_pl
from bayesirt.models.logistic import build_logistic
from bayesirt.models.specs import load_spec
from pymc_points import value_point

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from hierarchical_scale import plain_model  # noqa: E402


@pytest.mark.parametrize("missing", [0.0, 0.3])
@pytest.mark.slow  # compiles two PyMC log densities
def test_plain_coordinates_are_a_change_of_variables(missing):
    n_items, n_models = 7, 11
    responses, _ = simulate_pl("2pl", n_items=n_items, n_models=n_models, seed=5, missing=missing)
    ours, plain = build_logistic(responses, load_spec("2pl-hierarchical")), plain_model(responses)
    ours_logp, plain_logp = ours.compile_logp(jacobian=True), plain.compile_logp(jacobian=True)
    rng = np.random.default_rng(2)
    gaps, values = [], []
    for _ in range(4):
        theta, a, b = rng.normal(0.3, 1, n_models), rng.lognormal(0, 0.4, n_items), rng.normal(0, 1.2, n_items)
        mu_a, sigma_a = rng.normal(0, 0.4), rng.uniform(0.2, 0.8)
        mu_b, sigma_b = rng.normal(0, 0.5), rng.uniform(0.5, 2)
        mean, g = theta.mean(), np.exp(mu_a)
        hyper = {"discrimination_mu": mu_a, "discrimination_sigma": sigma_a}
        old = hyper | {"theta_mean": mean, "theta_deviation": theta - mean, "discrimination": a,
                       "difficulty_centered": b - mean, "difficulty_mu": mu_b, "difficulty_sigma": sigma_b}
        new = hyper | {"theta_mean_scaled": g * mean, "theta_deviation_scaled": g * (theta - mean),
                       "discrimination_relative": a / g, "difficulty_centered_scaled": g * (b - mean),
                       "difficulty_mu_scaled": g * mu_b, "difficulty_sigma_scaled": g * sigma_b}
        values.append(plain_logp(value_point(plain, old)))
        gaps.append(ours_logp(value_point(ours, new)) - values[-1] + (n_models + n_items + 1) * mu_a)
    # equal up to a constant (a Bernoulli likelihood there, build_logistic's Potential here), at points whose
    # densities differ enough for the check to bite
    assert np.ptp(values) > 1.0
    np.testing.assert_allclose(np.diff(gaps), 0.0, atol=1e-9)
