"""benchmarks/hierarchical_scale.py's scale-free coordinates are an exact change of variables of
2pl-hierarchical's posterior: its log density at the mapped point is build_logistic's plus the log
Jacobian, -(n_models + 2) discrimination_mu."""

import sys
from pathlib import Path

import numpy as np
import pytest

from bayesirt.data import simulate_pl
from bayesirt.models.logistic import build_logistic
from bayesirt.models.specs import load_spec
from pymc_points import value_point

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from hierarchical_scale import scale_free_model  # noqa: E402


@pytest.mark.parametrize("missing", [0.0, 0.3])
@pytest.mark.slow  # compiles two PyMC log densities
def test_scale_free_coordinates_are_a_change_of_variables(missing):
    n_items, n_models = 7, 11
    responses, _ = simulate_pl("2pl", n_items=n_items, n_models=n_models, seed=5, missing=missing)
    ours, free = build_logistic(responses, load_spec("2pl-hierarchical")), scale_free_model(responses)
    ours_logp, free_logp = ours.compile_logp(jacobian=False), free.compile_logp(jacobian=False)
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
        values.append(ours_logp(value_point(ours, old)))
        gaps.append(free_logp(value_point(free, new)) - values[-1] + (n_models + 2) * mu_a)
        # and the scale-free model's reported variables are the point's
        names = ("theta", "discrimination", "difficulty_mu", "difficulty_sigma")
        det = free.compile_fn(free.replace_rvs_by_values([free[v] for v in names]), inputs=free.value_vars,
                              on_unused_input="ignore")
        for got, want in zip(det(value_point(free, new)), (theta, a, mu_b, sigma_b)):
            np.testing.assert_allclose(got, want, rtol=1e-12)
    # equal up to a constant (a Bernoulli likelihood there, build_logistic's Potential here), at points whose
    # densities differ enough for the check to bite
    assert np.ptp(values) > 1.0
    np.testing.assert_allclose(np.diff(gaps), 0.0, atol=1e-9)
