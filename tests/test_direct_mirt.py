"""The direct nutpie model of a MIRT posterior (``bayesirt.inference.direct_mirt``) against its oracle, PyMC's
log density of ``build_mirt``'s model (the PyTensor graph): value and gradient at random unconstrained points,
exploratory and confirmatory, with 2 and 3 dimensions, complete and with missing cells; the structure of a fit's
draws by it against the PyMC path's; and a short fit each way with the same posterior means within Monte Carlo
error."""

import json

import numpy as np
import pytest

import bayesirt.inference.fitting as fitting
from bayesirt.data import simulate_pl
from bayesirt.inference.direct_mirt import direct_mirt_eligible, direct_mirt_model
from bayesirt.models.mirt import build_mirt
from bayesirt.models.specs import load_spec, parse_spec

#: Every test here compiles numba kernels or PyTensor graphs, or samples (minutes under load): the slow tier.
pytestmark = pytest.mark.slow

#: Hyperparameters away from 0 and 1 so that every constant counts.
EXPLORATORY = """name = "mirt-test"
kind = "mirt"
structure = "exploratory"
dimensions = {dims}
[priors.loading]
distribution = "normal"
mu = 0.0
sigma = 1.3
[priors.intercept]
distribution = "normal"
mu = -0.4
sigma = 1.7
"""
CONFIRMATORY = """name = "mirt-confirmatory-test"
kind = "mirt"
structure = "confirmatory"
item_map = "item_group"
[priors.loading]
distribution = "lognormal"
mu = 0.2
sigma = 0.6
[priors.intercept]
distribution = "normal"
mu = 0.3
sigma = 1.8
[priors.factor_correlation]
distribution = "lkj"
eta = 1.7
"""


def _responses(n_items, n_models, missing, dims, seed=0):
    responses, _ = simulate_pl("2pl", n_items=n_items, n_models=n_models, seed=seed, missing=missing)
    groups = np.array([f"g{k}" for k in range(dims)])[np.arange(n_items) % dims]
    return responses.assign_coords(item_group=("item", groups))


def _spec(structure, dims):
    return parse_spec(EXPLORATORY.format(dims=dims) if structure == "exploratory" else CONFIRMATORY)


def _pymc_point(pm_model, x):
    """PyMC's value variables (in the model's order, the direct model's too) from the flat vector ``x``."""
    start, point, k = pm_model.initial_point(), {}, 0
    for var in pm_model.value_vars:
        shape = start[var.name].shape
        size = int(np.prod(shape))
        point[var.name] = x[k:k + size].reshape(shape)
        k += size
    assert k == x.size
    return point


@pytest.mark.parametrize("missing", [0.0, 0.4])
@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("structure", ["exploratory", "confirmatory"])
def test_value_and_gradient_equal_pymc(structure, dims, missing):
    responses = _responses(13, 9, missing, dims)
    spec = _spec(structure, dims)
    assert direct_mirt_eligible(responses, spec)
    pm_model = build_mirt(responses, spec)
    logp, dlogp = pm_model.compile_logp(jacobian=True), pm_model.compile_dlogp(jacobian=True)
    model, anchors = direct_mirt_model(responses, spec)
    if structure == "exploratory":
        np.testing.assert_array_equal(anchors, pm_model.anchor_items)
    rng = np.random.default_rng(dims + int(10 * missing))
    n_dim = sum(int(np.prod(v.shape)) for v in pm_model.initial_point().values())
    for _ in range(5):
        x = rng.normal(0.0, 0.8, n_dim)
        value, gradient = model.logp(x)
        point = _pymc_point(pm_model, x)
        np.testing.assert_allclose(value, logp(point), rtol=1e-10, atol=0)
        np.testing.assert_allclose(gradient, dlogp(point), rtol=1e-10, atol=1e-10)
