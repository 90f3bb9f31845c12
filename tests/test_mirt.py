"""MIRT specs and the PyMC MIRT builder: identification, reparameterization, signs, rotation."""

import json
import numpy as np
import pytest
import xarray as xr
from scipy.special import log_expit

from bayesirt.data import make_responses
from bayesirt.errors import BayesIRTError, SpecError
from bayesirt.inference.fitting import fit
from bayesirt.models.logistic import pointwise_log_likelihood
from bayesirt.models.mirt import align_signs, anchor_items, build_mirt
from bayesirt.structure.loadings import loading_table, rotate_posterior
from bayesirt.models.rotation import tucker_congruence
from bayesirt.models.specs import load_spec, parse_spec


def two_factor(n_models=150, n_items=40, seed=0, missing=0.0):
    """Half the items load on factor 1, half on factor 2 (plus small cross-loadings)."""
    rng = np.random.default_rng(seed)
    half = n_items // 2
    loading = rng.uniform(0.0, 0.2, (n_items, 2))
    loading[:half, 0] = rng.uniform(1.0, 2.0, half)
    loading[half:, 1] = rng.uniform(1.0, 2.0, n_items - half)
    theta = rng.normal(size=(n_models, 2))
    d = rng.normal(0, 0.8, n_items)
    p = 1 / (1 + np.exp(-(loading @ theta.T + d[:, None])))
    y = (rng.uniform(size=p.shape) < p).astype(np.int8)
    y[rng.uniform(size=y.shape) < missing] = -1
    groups = np.where(np.arange(n_items) < half, "verbal", "spatial")
    return make_responses(y, item_group=groups), loading


@pytest.fixture(scope="module")
def data():
    return two_factor(missing=0.05)


@pytest.fixture(scope="module")
def advi_fit(data):
    return fit(data[0], load_spec("mirt"), method="advi", draws=300, seed=1, progress=False)


def _point_values(pm_model, names, seed=0):
    """Values of named variables at a random point of the sampler's space."""
    rng = np.random.default_rng(seed)
    point = {k: rng.normal(0, 0.5, np.shape(v)) for k, v in pm_model.initial_point().items()}
    fn = pm_model.compile_fn([pm_model[n] for n in names], inputs=pm_model.value_vars, on_unused_input="ignore")
    return dict(zip(names, fn(point)))


@pytest.mark.parametrize("spec_name", ["mirt", "mirt-confirmatory"])
@pytest.mark.slow
def test_likelihood_is_bernoulli_in_the_reported_parameters(data, spec_name):
    """The zero-sum/centred reparameterization leaves eta = loading . theta + intercept exactly."""
    responses = data[0]
    pm_model = build_mirt(responses, load_spec(spec_name))
    v = _point_values(pm_model, ["loading", "theta", "intercept", "response_loglik"])
    y = responses["responses"].values
    eta = v["loading"] @ v["theta"].T + v["intercept"][:, None]
    expected = np.where(y == 1, log_expit(eta), np.where(y == 0, log_expit(-eta), 0.0)).sum()
    assert v["response_loglik"] == pytest.approx(expected, rel=1e-10)


def test_exploratory_echelon_pattern(data):
    responses = data[0]
    pm_model = build_mirt(responses, load_spec("mirt").with_dimensions(3))
    v = _point_values(pm_model, ["loading"])
    anchors = [list(responses["item"].values).index(a) for a in pm_model.anchor_items]
    for k, row in enumerate(anchors):
        assert np.all(v["loading"][row, k + 1:] == 0) and v["loading"][row, k] != 0


def test_confirmatory_pattern_and_unit_factor_correlation(data):
    responses = data[0]
    pm_model = build_mirt(responses, load_spec("mirt-confirmatory"))
    v = _point_values(pm_model, ["loading", "factor_correlation"])
    groups = responses["item_group"].values
    dims = list(pm_model.coords["dim"])
    assert dims == ["spatial", "verbal"]
    for i, g in enumerate(groups):
        assert v["loading"][i, dims.index(g)] > 0 and v["loading"][i, 1 - dims.index(g)] == 0
    np.testing.assert_allclose(np.diag(v["factor_correlation"]), 1.0)


def test_anchors_come_from_different_factors(data):
    a1, a2 = anchor_items(data[0], 2)
    assert (int(a1) < 20) != (int(a2) < 20)


def test_align_signs_flips_loadings_and_abilities_together():
    post = xr.Dataset({
        "loading": (("chain", "draw", "item", "dim"), np.array([[[[-1.0, 0.0], [0.5, 2.0]], [[1.0, 0.0], [0.5, -2.0]]]])),
        "theta": (("chain", "draw", "model", "dim"), np.ones((1, 2, 3, 2))),
    }, coords={"item": ["i0", "i1"], "dim": ["dim1", "dim2"]})
    out = align_signs(post, ["i0", "i1"])
    np.testing.assert_array_equal(out["loading"].values[0, 0], [[1.0, 0.0], [-0.5, 2.0]])
    np.testing.assert_array_equal(out["theta"].values[0, 0, 0], [-1.0, 1.0])
    np.testing.assert_array_equal(out["loading"].values[0, 1], [[1.0, 0.0], [0.5, 2.0]])  # draw 1 flips dim2
    prod = np.einsum("cdid,cdmd->cdim", post["loading"].values, post["theta"].values)
    np.testing.assert_allclose(np.einsum("cdid,cdmd->cdim", out["loading"].values, out["theta"].values), prod)


@pytest.mark.slow
def test_advi_fit_recovers_the_two_factors_after_rotation(data, advi_fit):
    assert advi_fit.attrs["bayesirt_spec_kind"] == "mirt"
    assert np.all(advi_fit.posterior["loading"].sel(item=xr.DataArray(
        json.loads(advi_fit.attrs["bayesirt_anchor_items"]), dims="dim")).values.diagonal(axis1=-2, axis2=-1) >= 0)
    rotated = rotate_posterior(advi_fit.posterior.to_dataset(), "oblimin")
    mean = rotated["loading"].mean("sample").values
    truth = data[1]
    congruence = np.abs(tucker_congruence(mean, truth))
    if congruence.sum() < np.abs(tucker_congruence(mean[:, ::-1], truth)).sum():
        congruence = np.abs(tucker_congruence(mean[:, ::-1], truth))
    assert congruence.min() > 0.9, congruence
    table = loading_table(advi_fit, rotation="varimax")
    assert set(table.columns) == {"item", "dim", "mean", "sd", "lower", "upper"} and len(table) == 80


@pytest.mark.slow  # the advi_fit fixture
def test_pointwise_log_likelihood_of_a_mirt_posterior(data, advi_fit):
    ll = pointwise_log_likelihood(advi_fit.posterior.to_dataset(), data[0])
    post = advi_fit.posterior
    cell = 7
    i, m = str(ll["item"].values[cell]), ll["model"].values[cell]
    eta = (post["loading"].sel(item=i) * post["theta"].sel(model=m)).sum("dim") + post["intercept"].sel(item=i)
    y = int(data[0]["responses"].sel(item=i, model=m))
    np.testing.assert_allclose(ll.isel(cell=cell).values, log_expit(eta.values if y else -eta.values))


@pytest.mark.parametrize(("text", "message"), [
    ('kind = "mirt"\nstructure = "confirmatory"\n[priors.loading]\ndistribution = "lognormal"\nmu = 0\nsigma = 1\n'
     '[priors.intercept]\ndistribution = "normal"\nmu = 0\nsigma = 2\n[priors.factor_correlation]\ndistribution = "lkj"\n'
     'eta = 2\n', "needs item_map"),
    ('kind = "mirt"\n[priors.loading]\ndistribution = "normal"\nmu = 1\nsigma = 1\n[priors.intercept]\n'
     'distribution = "normal"\nmu = 0\nsigma = 2\n', "must have mu = 0"),
    ('kind = "mirt"\n[priors.loading]\ndistribution = "normal"\nmu = 0\nsigma = 1\n', "exactly the priors"),
    ('kind = "mirt"\ndimensions = 0\n[priors.loading]\ndistribution = "normal"\nmu = 0\nsigma = 1\n[priors.intercept]\n'
     'distribution = "normal"\nmu = 0\nsigma = 2\n', "positive integer"),
])
def test_bad_mirt_specs_are_refused(text, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(text)


def test_confirmatory_map_must_be_an_item_coordinate(data):
    spec = load_spec("mirt-confirmatory")
    with pytest.raises(BayesIRTError, match="not an item coordinate"):
        build_mirt(data[0].drop_vars("item_group"), spec)
    with pytest.raises(SpecError, match="takes its dimensions from item_map"):
        spec.with_dimensions(3)
