"""The fused likelihood of the 1PL-4PL builder against two references: ``pm.Bernoulli`` over the
observed cells (value and gradient of the whole model logp) and SciPy's Bernoulli pmf."""

import numpy as np
import pymc as pm
import pytest
import xarray as xr
from scipy import stats
from scipy.special import expit

from bayesirt.data import MISSING, simulate_pl
from bayesirt.information import item_information
from bayesirt.models.logistic import build_logistic, pointwise_log_likelihood, response_probability
from bayesirt.specs import load_spec

KINDS = {"rasch": "1pl", "2pl": "2pl", "3pl": "3pl", "4pl": "4pl"}


def _reference_model(responses, spec):
    """The same spec written naively: one pm.Bernoulli over the observed cells (long format)."""
    y = responses["responses"].values
    ii, mm = np.nonzero(y != MISSING)
    with pm.Model(coords={"item": responses["item"].values, "model": responses["model"].values}) as ref:
        theta = pm.Normal("theta", 0, 1, dims="model")
        if spec.discrimination_structure == "item":
            a = pm.LogNormal("discrimination", 0, 0.5, dims="item")[ii]
        else:
            a = pm.LogNormal("discrimination", 0, 0.5)
        d = pm.Normal("intercept", 0, 2, dims="item")
        c = pm.Beta("guessing", 5, 17, dims="item")[ii] if spec.has_guessing else 0.0
        s = pm.Beta("slip", 2, 18, dims="item")[ii] if spec.has_slip else 0.0
        p = c + (1 - c - s) * pm.math.sigmoid(a * theta[mm] + d[ii])
        pm.Bernoulli("y", p=p, observed=y[ii, mm])
    return ref


@pytest.mark.parametrize("name", list(KINDS))
@pytest.mark.parametrize("missing", [0.0, 0.25])
def test_fused_logp_and_gradient_match_bernoulli_reference(name, missing):
    spec = load_spec(name)
    responses, _ = simulate_pl(KINDS[name], n_items=7, n_models=11, seed=5, missing=missing)
    ours, ref = build_logistic(responses, spec), _reference_model(responses, spec)
    rng = np.random.default_rng(0)
    point = {k: v + rng.normal(scale=0.3, size=np.shape(v)) for k, v in ours.initial_point().items()}
    assert set(point) == set(ref.initial_point())
    np.testing.assert_allclose(ours.compile_logp()(point), ref.compile_logp()(point), rtol=1e-10)
    np.testing.assert_allclose(ours.compile_dlogp()(point), ref.compile_dlogp()(point), rtol=1e-8, atol=1e-10)


def _posterior_from_truth(truth, names):
    return xr.Dataset({n: truth[n].expand_dims(chain=[0], draw=[0]) for n in names})


@pytest.mark.parametrize("kind", ["2pl", "4pl"])
def test_pointwise_log_likelihood_matches_scipy_and_skips_missing(kind):
    responses, truth = simulate_pl(kind, n_items=6, n_models=9, seed=2, missing=0.3)
    names = ["theta", "discrimination", "intercept"] + (["guessing", "slip"] if kind == "4pl" else [])
    ll = pointwise_log_likelihood(_posterior_from_truth(truth, names), responses, chunk_cells=7)
    y = responses["responses"].values
    assert ll.sizes["cell"] == int((y != MISSING).sum())
    p = response_probability(truth["theta"].values, truth["discrimination"].values, truth["intercept"].values,
                             truth["guessing"].values, truth["slip"].values)
    ii = [responses.indexes["item"].get_loc(i) for i in ll["item"].values]
    mm = [responses.indexes["model"].get_loc(m) for m in ll["model"].values]
    expected = stats.bernoulli.logpmf(y[ii, mm], p[ii, mm])
    np.testing.assert_allclose(ll.values[0, 0], expected, rtol=1e-10)


def test_likelihood_does_not_depend_on_item_order():
    spec = load_spec("3pl")
    responses, _ = simulate_pl("3pl", n_items=8, n_models=10, seed=3, missing=0.1)
    order = np.random.default_rng(1).permutation(8)
    a, b = build_logistic(responses, spec), build_logistic(responses.isel(item=order), spec)
    point = a.initial_point()
    permuted = {k: (v[order] if v.shape == (8,) else v) for k, v in point.items()}
    assert a.compile_logp()(point) == pytest.approx(b.compile_logp()(permuted), rel=1e-12)


def test_information_matches_finite_difference_fisher_information():
    theta = np.linspace(-3, 3, 13)
    a, d, c, s = np.array([1.7, 0.6]), np.array([0.4, -1.0]), np.array([0.2, 0.1]), np.array([0.05, 0.15])
    info = item_information(theta, a, d, c, s)
    h = 1e-6
    p = lambda t: response_probability(t, a, d, c, s)  # noqa: E731
    dp = (p(theta + h) - p(theta - h)) / (2 * h)
    np.testing.assert_allclose(info, dp**2 / (p(theta) * (1 - p(theta))), rtol=1e-6)
    two = item_information(theta, a, d)
    sig = expit(a[:, None] * theta + d[:, None])
    np.testing.assert_allclose(two, a[:, None] ** 2 * sig * (1 - sig), rtol=1e-12)
    assert (info >= 0).all()
