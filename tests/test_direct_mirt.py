"""The direct nutpie model of a MIRT posterior (``bayesirt.inference.direct_mirt``) against its oracle, PyMC's
log density of ``build_mirt``'s model (the PyTensor graph): value and gradient at random unconstrained points,
exploratory and confirmatory, with 2 and 3 dimensions, complete and with missing cells; the structure of a fit's
draws by it against the PyMC path's; and a short fit each way with the same posterior means within Monte Carlo
error."""

import ctypes
import json

import arviz as az
import numpy as np
import pytest

import bayesirt.inference.fitting as fitting
from bayesirt.data import make_responses, simulate_pl
from bayesirt.inference import direct_mirt
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


@pytest.mark.parametrize("missing", [0.0, 0.4, 0.9])  # the dense kernel, masked; at 0.9 the observed cells
@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("structure", ["exploratory", "confirmatory"])
def test_value_and_gradient_equal_pymc(structure, dims, missing, monkeypatch):
    responses = _responses(13, 9, missing, dims)
    if missing > 0.8:  # a matrix this small keeps 13% of its cells observed (simulate_pl): its cells' layout
        monkeypatch.setattr(direct_mirt, "CELLS_BELOW", 0.2)
    spec = _spec(structure, dims)
    assert direct_mirt_eligible(responses, spec)
    pm_model = build_mirt(responses, spec)
    logp, dlogp = pm_model.compile_logp(jacobian=True), pm_model.compile_dlogp(jacobian=True)
    model, anchors = direct_mirt_model(responses, spec)
    observed = float((responses["responses"].values >= 0).mean())
    assert (observed < direct_mirt.CELLS_BELOW) == (missing > 0.8)  # the layouts this test means to cover
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


def _two_factor(n_items, n_models, seed, missing=0.0):
    """Half the items load mainly on factor 1, half on factor 2; the item groups name the factors."""
    rng = np.random.default_rng(seed)
    half = n_items // 2
    loading = rng.uniform(0.0, 0.2, (n_items, 2))
    loading[:half, 0] = rng.uniform(1.0, 2.0, half)
    loading[half:, 1] = rng.uniform(1.0, 2.0, n_items - half)
    theta = rng.normal(size=(n_models, 2))
    p = 1 / (1 + np.exp(-(loading @ theta.T + rng.normal(0, 0.8, n_items)[:, None])))
    y = (rng.uniform(size=p.shape) < p).astype(np.int8)
    y[rng.uniform(size=y.shape) < missing] = -1
    return make_responses(y, item_group=np.where(np.arange(n_items) < half, "verbal", "spatial"))


def _fit(responses, spec, *, pymc_path=False, monkeypatch=None, **kwargs):
    if pymc_path:  # the private way to the PyMC path: nothing is eligible for the direct model
        monkeypatch.setattr("bayesirt.inference.direct_mirt.direct_mirt_eligible", lambda responses, spec: False)
    try:
        return fitting.fit(responses, spec, method="nuts", progress=False, **kwargs)
    finally:
        if pymc_path:
            monkeypatch.undo()


@pytest.mark.parametrize("name", ["mirt", "mirt-confirmatory"])
def test_fit_has_the_structure_of_the_pymc_paths(name, monkeypatch):
    spec, responses = load_spec(name), _two_factor(16, 12, seed=2, missing=0.2)
    direct = _fit(responses, spec, draws=20, tune=20, chains=2, seed=4)
    pymc = _fit(responses, spec, pymc_path=True, monkeypatch=monkeypatch, draws=20, tune=20, chains=2, seed=4)
    assert json.loads(direct.attrs["bayesirt_settings"])["nutpie_model"] == "direct"
    assert json.loads(pymc.attrs["bayesirt_settings"])["nutpie_model"] == "pymc"
    settings = [json.loads(t.attrs["bayesirt_settings"]) for t in (direct, pymc)]
    assert settings[0] == settings[1] | {"nutpie_model": "direct"}
    assert set(json.loads(direct.attrs["bayesirt_timings"])) == set(json.loads(pymc.attrs["bayesirt_timings"]))
    assert direct.attrs.get("bayesirt_anchor_items") == pymc.attrs.get("bayesirt_anchor_items")
    assert ("bayesirt_anchor_items" in direct.attrs) == (name == "mirt")
    assert set(direct.children) == set(pymc.children)
    for group in direct.children:
        got, want = direct[group].to_dataset(), pymc[group].to_dataset()
        assert set(got.data_vars) == set(want.data_vars), group
        assert dict(got.sizes) == dict(want.sizes), group
        assert set(got.coords) == set(want.coords), group
        for coord in got.coords:
            np.testing.assert_array_equal(got[coord].values, want[coord].values)
        for var in got.data_vars:
            assert (got[var].dims, got[var].dtype) == (want[var].dims, want[var].dtype), (group, var)
    assert list(direct.posterior.data_vars) == list(pymc.posterior.data_vars)
    if name == "mirt":  # align_signs ran: every anchor's diagonal loading is positive in every draw
        anchors = json.loads(direct.attrs["bayesirt_anchor_items"])
        diagonal = direct.posterior["loading"].sel(item=anchors).values.diagonal(axis1=-2, axis2=-1)
        assert (diagonal > 0).all()
    else:
        correlation = direct.posterior["factor_correlation"].values
        np.testing.assert_allclose(correlation.diagonal(axis1=-2, axis2=-1), 1.0, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["mirt", "mirt-confirmatory"])
def test_posterior_means_agree_with_the_pymc_path(name, monkeypatch):
    """A simulated 2-factor design, 30 items x 60 models with 10% missing: the direct model's posterior means
    equal the PyMC path's within Monte Carlo error (|difference| < 4 combined MCSEs of the mean, ESS-based,
    for all but 1% of the parameters, median below 1.5). 4 chains x 2,000 draws: the exploratory echelon's
    rotation mixes slowly, and with 2 x 500 the ESS-based MCSEs of both paths were too small (median z 1.9
    over loadings and abilities; 0.35-0.5 with these settings, max 3.0)."""
    responses = _two_factor(30, 60, seed=11, missing=0.1)
    settings = {"draws": 2000, "tune": 1000, "chains": 4, "seed": 21}
    direct = _fit(responses, name, **settings)
    pymc = _fit(responses, name, pymc_path=True, monkeypatch=monkeypatch, **settings)
    z = []
    names = ["loading", "intercept", "theta"] + ["factor_correlation"] * (name == "mirt-confirmatory")
    for var in names:
        means = [t.posterior[var].mean(("chain", "draw")).values for t in (direct, pymc)]
        se = [az.mcse(t.posterior.to_dataset()[[var]])[var].values for t in (direct, pymc)]
        with np.errstate(invalid="ignore", divide="ignore"):  # the echelon's zero loadings: equal, no MCSE
            z.append(np.where(means[0] == means[1], 0.0,
                              np.abs(means[0] - means[1]) / np.sqrt(se[0] ** 2 + se[1] ** 2)).ravel())
    z = np.concatenate(z)
    assert np.isfinite(z).all() and np.sum(z >= 4.0) <= max(1, z.size // 100), np.sort(z)[-5:]
    assert np.median(z) < 1.5  # a shifted posterior would move most means, not a few


def _expand(model, x):
    """The draw's reported variables by the direct model's expand callback, by name."""
    compiled = model.compiled
    out = np.empty(compiled.n_expanded)
    double = ctypes.POINTER(ctypes.c_double)
    code = compiled.compiled_expand_func.ctypes(x.size, out.size, x.ctypes.data_as(double),
                                                out.ctypes.data_as(double), compiled.user_data.ctypes.data)
    assert code == 0
    names, _, shapes = compiled.shape_info
    values, k = {}, 0
    for name, shape in zip(names, shapes):
        size = int(np.prod(shape))
        values[name] = out[k:k + size].reshape(shape)
        k += size
    return values


@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("structure", ["exploratory", "confirmatory"])
def test_expanded_draws_equal_pymcs_deterministics(structure, dims):
    responses = _responses(11, 8, 0.2, dims, seed=5)
    spec = _spec(structure, dims)
    pm_model = build_mirt(responses, spec)
    model, _ = direct_mirt_model(responses, spec)
    names = pm_model.reported_variables
    assert list(model.reported_variables) == names
    outputs = pm_model.replace_rvs_by_values([pm_model[n] for n in names])  # of the point, not random draws
    reported = pm_model.compile_fn(outputs, inputs=pm_model.value_vars, on_unused_input="ignore")
    rng = np.random.default_rng(dims)
    for _ in range(3):
        x = rng.normal(0.0, 0.8, model.compiled.n_dim)
        got = _expand(model, x)
        for name, want in zip(names, reported(_pymc_point(pm_model, x))):
            np.testing.assert_allclose(got[name], want, rtol=1e-12, atol=1e-12, err_msg=name)
