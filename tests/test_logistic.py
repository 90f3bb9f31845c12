"""The 1PL-4PL builder against two references: the same spec written naively (iid abilities,
one ``pm.Bernoulli`` over the observed cells), which must have the same log-density up to a
constant under the builder's reparameterization, and SciPy's Bernoulli pmf."""

import numpy as np
import pymc as pm
import pytest
import xarray as xr
from scipy import stats
from scipy.special import expit

from bayesirt.data import MISSING, simulate_pl
from bayesirt.models.information import item_information
from bayesirt.models.logistic import build_logistic, pointwise_log_likelihood
from bayesirt.models.response import response_probability
from bayesirt.models.specs import Prior, load_spec, parse_spec
from hierarchical_specs import HIERARCHICAL, hierarchical_spec
from pymc_points import value_point

KINDS = {"rasch": "1pl", "2pl": "2pl", "3pl": "3pl", "4pl": "4pl", "difficulty-2pl": "2pl"}

DIFFICULTY_2PL = """name = "difficulty-2pl"
parameterization = "difficulty"
[priors.theta]
distribution = "normal"
mu = 0.3
sigma = 1.4
[priors.discrimination]
distribution = "lognormal"
mu = 0.0
sigma = 0.5
[priors.difficulty]
distribution = "normal"
mu = -0.5
sigma = 2.0
"""


def _spec(name, tmp_path):
    if name != "difficulty-2pl":
        return load_spec(name)
    path = tmp_path / "difficulty.toml"
    path.write_text(DIFFICULTY_2PL)
    return load_spec(path)


def _reference_model(responses, spec):
    """The same spec written naively: iid abilities and one pm.Bernoulli over the observed cells."""
    y = responses["responses"].values
    ii, mm = np.nonzero(y != MISSING)
    pri = {k: v.params for k, v in spec.priors.items()}
    with pm.Model(coords={"item": responses["item"].values, "model": responses["model"].values}) as ref:
        theta = pm.Normal("theta", pri["theta"]["mu"], pri["theta"]["sigma"], dims="model")
        if spec.discrimination_structure == "item":
            a = pm.LogNormal("discrimination", 0, 0.5, dims="item")
            a_cell = a[ii]
        elif spec.discrimination_structure == "common":
            a = a_cell = pm.LogNormal("discrimination", 0, 0.5)
        else:
            a = a_cell = spec.discrimination_value
        loc = pri[spec.location]
        if spec.location == "intercept":
            d = pm.Normal("intercept", loc["mu"], loc["sigma"], dims="item")
        else:
            d = -a * pm.Normal("difficulty", loc["mu"], loc["sigma"], dims="item")
        c = pm.Beta("guessing", 5, 17, dims="item")[ii] if spec.has_guessing else 0.0
        s = pm.Beta("slip", 2, 18, dims="item")[ii] if spec.has_slip else 0.0
        p = c + (1 - c - s) * pm.math.sigmoid(a_cell * theta[mm] + d[ii])
        pm.Bernoulli("y", p=p, observed=y[ii, mm])
    return ref


def _random_parameters(rng, spec, n_items, n_models):
    theta = rng.normal(0.5, 1.0, n_models)
    a = {"item": rng.lognormal(0, 0.4, n_items), "common": rng.lognormal(0, 0.4), "fixed": spec.discrimination_value}
    out = {"theta": theta, "discrimination": a[spec.discrimination_structure], "intercept": rng.normal(0, 1.5, n_items),
           "guessing": rng.beta(5, 17, n_items), "slip": rng.beta(2, 18, n_items)}
    out["difficulty"] = -out["intercept"] / out["discrimination"]
    return out


def _as_builder_point(params, spec):
    """The builder's coordinates of (theta, a, d): theta = mean + zero-sum deviation, location shifted."""
    m = params["theta"].mean()
    scaled = {"theta_deviation_scaled": params["discrimination"] * (params["theta"] - m)} \
        if spec.discrimination_structure == "common" else {}
    return {**params, **scaled, "theta_mean": m, "theta_deviation": params["theta"] - m,
            "intercept_centered": params["intercept"] + params["discrimination"] * m,
            "difficulty_centered": params["difficulty"] - m}


@pytest.mark.parametrize("name", list(KINDS))
@pytest.mark.parametrize("missing", [0.0, 0.25, 0.5])
@pytest.mark.slow
def test_builder_logp_equals_naive_iid_model_up_to_a_constant(name, missing, tmp_path):
    """Exactness of the reparameterization: log-density differences between random parameter
    points agree with the naive model to 1e-9, and the Deterministics return (theta, a, b, d).
    At 50% missing the likelihood runs in long format (below ``DENSE_FROM``)."""
    spec = _spec(name, tmp_path)
    responses, _ = simulate_pl(KINDS[name], n_items=7, n_models=11, seed=5, missing=missing)
    ours, ref = build_logistic(responses, spec), _reference_model(responses, spec)
    ours_logp, ref_logp = ours.compile_logp(jacobian=False), ref.compile_logp(jacobian=False)
    rng = np.random.default_rng(0)
    points = [_random_parameters(rng, spec, 7, 11) for _ in range(4)]
    # a common slope's scaled deviation u = a * (theta - mean) has density a^-(n - 1) times the deviation's
    jacobian = [(11 - 1) * np.log(p["discrimination"]) if spec.discrimination_structure == "common" else 0.0
                for p in points]
    ours_vals = [ours_logp(value_point(ours, _as_builder_point(p, spec))) + j for p, j in zip(points, jacobian)]
    ref_vals = [ref_logp(value_point(ref, p)) for p in points]
    assert np.ptp(np.diff(ref_vals)) > 1.0  # the points differ enough for the check to bite
    np.testing.assert_allclose(np.diff(ours_vals), np.diff(ref_vals), rtol=1e-9, atol=1e-9)
    names = ("theta", "discrimination", "intercept", "difficulty")
    det = ours.compile_fn(ours.replace_rvs_by_values([ours[v] for v in names]), inputs=ours.value_vars, on_unused_input="ignore")
    for got, want in zip(det(value_point(ours, _as_builder_point(points[0], spec))),
                         [points[0][v] for v in names]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _hierarchical_spec(name):
    return load_spec(name) if name == "2pl-hierarchical" else hierarchical_spec(name)


def _naive_rv(name, prior, dims=None):
    """The spec's prior written directly, its learned hyperparameters as plain random variables."""
    p = {k: _naive_rv(f"{name}_{k}", v) if isinstance(v, Prior) else v for k, v in prior.params.items()}
    make = {"normal": pm.Normal, "lognormal": pm.LogNormal, "halfnormal": pm.HalfNormal, "beta": pm.Beta}
    return make[prior.distribution](name, **p, dims=dims)


def _random_hierarchical_point(rng, spec, n_items, n_models):
    """(theta, a, b, d, c and the hyperparameters) at random, and the slope scale g they imply."""
    point = _random_parameters(rng, spec, n_items, n_models)
    hyper = {"mu": lambda: rng.normal(0, 0.4), "sigma": lambda: rng.uniform(0.3, 1.5)}
    for name in ("discrimination", spec.location):
        point |= {f"{name}_{k}": hyper[k]() for k, v in spec.priors[name].params.items() if isinstance(v, Prior)}
    disc = spec.priors["discrimination"]
    g = np.exp(point["discrimination_mu"]) if disc.distribution == "lognormal" else point["discrimination_sigma"]
    return point, g


def _scale_free_point(p, g, spec):
    """build_logistic's scale-free coordinates of a point (see its body): m = g theta_mean, u = g deviation,
    r = a / g, beta = g (b - theta_mean) and the difficulty's hyperparameters times g."""
    m = p["theta"].mean()
    return {**p, "theta_mean_scaled": g * m, "theta_deviation_scaled": g * (p["theta"] - m),
            "discrimination_relative": p["discrimination"] / g,
            "intercept_centered": p["intercept"] + p["discrimination"] * m,
            "difficulty_centered_scaled": g * (p["difficulty"] - m),
            **{f"difficulty_{k}_scaled": g * p[f"difficulty_{k}"] for k in ("mu", "sigma") if f"difficulty_{k}" in p}}


@pytest.mark.parametrize("name", ["2pl-hierarchical", *HIERARCHICAL])
@pytest.mark.parametrize("missing", [0.0, 0.5])
@pytest.mark.slow
def test_hierarchical_builder_logp_equals_naive_model_after_the_change_of_variables(name, missing):
    """Specs whose slopes have a learned scale g are sampled in units of g (``build_logistic``): against the
    same spec written naively (iid abilities, the item priors and hyperpriors as written, one pm.Bernoulli),
    the unconstrained log densities differ by the change of variables' log Jacobian, -(n_models + n_items +
    [learned difficulty mu]) log g in the difficulty form (theta, b and mu_b are divided by g; sigma_b's log
    and log a are shifts) and -n_models log g in the slope-intercept form, up to a constant; the
    Deterministics return the point. The test fails without the Jacobian's item term."""
    spec = _hierarchical_spec(name)
    n_items, n_models = 7, 11
    responses, _ = simulate_pl("3pl" if spec.has_guessing else "2pl", n_items=n_items, n_models=n_models, seed=5,
                               missing=missing)
    y = responses["responses"].values
    ii, mm = np.nonzero(y != MISSING)
    with pm.Model(coords={"item": responses["item"].values, "model": responses["model"].values}) as ref:
        theta = pm.Normal("theta", **spec.priors["theta"].params, dims="model")
        a = _naive_rv("discrimination", spec.priors["discrimination"], dims="item")
        location = _naive_rv(spec.location, spec.priors[spec.location], dims="item")
        eta = a[ii] * (theta[mm] - location[ii]) if spec.location == "difficulty" else a[ii] * theta[mm] + location[ii]
        c = _naive_rv("guessing", spec.priors["guessing"], dims="item")[ii] if spec.has_guessing else 0.0
        pm.Bernoulli("y", p=c + (1 - c) * pm.math.sigmoid(eta), observed=y[ii, mm])
    ours = build_logistic(responses, spec)
    assert spec.learned_slope_scale and "discrimination_relative" in ours.named_vars
    hyper = [v for v in ref.free_RVs if v.name.endswith(("_mu", "_sigma"))]
    assert {v.name for v in hyper} <= set(ours.reported_variables)
    ours_logp, ref_logp = ours.compile_logp(jacobian=True), ref.compile_logp(jacobian=True)
    rng = np.random.default_rng(1)
    points = [_random_hierarchical_point(rng, spec, n_items, n_models) for _ in range(4)]
    learned_mu = isinstance(spec.priors[spec.location].params["mu"], Prior)
    per_log_g = n_models + (n_items + learned_mu if spec.location == "difficulty" else 0)
    ours_vals = [ours_logp(value_point(ours, _scale_free_point(p, g, spec))) + per_log_g * np.log(g)
                 for p, g in points]
    ref_vals = [ref_logp(value_point(ref, p)) for p, _ in points]
    assert np.ptp(np.diff(ref_vals)) > 1.0  # the points differ enough for the check to bite
    np.testing.assert_allclose(np.diff(ours_vals), np.diff(ref_vals), rtol=1e-9, atol=1e-9)
    names = ("theta", "discrimination", "intercept", "difficulty", *(v.name for v in hyper))
    det = ours.compile_fn(ours.replace_rvs_by_values([ours[v] for v in names]), inputs=ours.value_vars,
                          on_unused_input="ignore")
    p, g = points[0]
    for got, v in zip(det(value_point(ours, _scale_free_point(p, g, spec))), names):
        np.testing.assert_allclose(got, p[v], rtol=1e-12, atol=1e-12)


def test_scale_free_only_for_a_learned_slope_scale():
    """Fixed item priors, a learned slope spread alone (it does not scale the slopes) and a learned
    location keep build_logistic's plain coordinates."""
    assert load_spec("2pl-hierarchical").learned_slope_scale and not load_spec("2pl").learned_slope_scale
    spread = HIERARCHICAL["intercept form"].replace('mu = { distribution = "normal", mu = 0.2, sigma = 0.4 }',
                                                      "mu = 0.2", 1)
    assert spread != HIERARCHICAL["intercept form"]
    spec = parse_spec(spread)
    assert spec.hierarchical and not spec.learned_slope_scale
    responses, _ = simulate_pl("2pl", n_items=4, n_models=5, seed=1)
    assert {v.name for v in build_logistic(responses, spec).free_RVs} >= {"theta_mean", "theta_deviation",
                                                                         "discrimination"}


@pytest.mark.filterwarnings("ignore:The effect of Potentials:UserWarning")
def test_builder_prior_matches_the_spec():
    """Prior draws of theta and intercept follow the spec's iid priors (mean, sd), although the
    builder samples a mean, a zero-sum deviation and shifted intercepts."""
    responses, _ = simulate_pl("2pl", n_items=5, n_models=40, seed=1)
    with build_logistic(responses, load_spec("2pl")):
        prior = pm.sample_prior_predictive(draws=4000, random_seed=3, var_names=["theta", "intercept"]).prior
    theta, d = prior["theta"].values.ravel(), prior["intercept"].values.ravel()
    assert abs(theta.mean()) < 0.03 and abs(theta.std() - 1.0) < 0.02
    assert abs(d.mean()) < 0.06 and abs(d.std() - 2.0) < 0.04
    corr = np.corrcoef(prior["theta"].values.reshape(-1, 40).T)
    assert np.abs(corr[np.triu_indices(40, 1)]).max() < 0.1  # independent across models


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


@pytest.mark.parametrize("name", list(KINDS))
@pytest.mark.slow
def test_long_and_dense_layouts_give_the_same_log_density(name, tmp_path, monkeypatch):
    """The observed-cell (long) likelihood equals the dense masked one at random points."""
    import bayesirt.models.logistic as logistic

    spec = _spec(name, tmp_path)
    responses, _ = simulate_pl(KINDS[name], n_items=9, n_models=13, seed=2, missing=0.3)
    monkeypatch.setattr(logistic, "DENSE_FROM", 0.0)
    dense = build_logistic(responses, spec)
    monkeypatch.setattr(logistic, "DENSE_FROM", 2.0)
    long = build_logistic(responses, spec)
    f_dense, f_long = dense.compile_logp(), long.compile_logp()
    rng = np.random.default_rng(1)
    for _ in range(3):
        point = value_point(dense, _as_builder_point(_random_parameters(rng, spec, 9, 13), spec))
        np.testing.assert_allclose(f_long(point), f_dense(point), rtol=1e-12)


@pytest.mark.parametrize("dense_from", [0.0, 2.0])
@pytest.mark.slow
def test_float32_model_is_float32_and_agrees_with_float64(dense_from, monkeypatch):
    """Under floatX=float32 the whole log density (dense or long layout, with asymptotes) is
    float32 and agrees with float64 to float32 precision (benchmarks/float32_advi.py times it)."""
    import pytensor

    import bayesirt.models.logistic as logistic

    spec = load_spec("4pl")
    responses, _ = simulate_pl("4pl", n_items=40, n_models=30, seed=4, missing=0.2)
    monkeypatch.setattr(logistic, "DENSE_FROM", dense_from)
    wide = build_logistic(responses, spec)
    with pytensor.config.change_flags(floatX="float32"):
        narrow = build_logistic(responses, spec)
        f32 = narrow.compile_logp()
    f64 = wide.compile_logp()
    rng = np.random.default_rng(5)
    for _ in range(3):
        point = value_point(wide, _as_builder_point(_random_parameters(rng, spec, 40, 30), spec))
        value = f32({k: v.astype("float32") for k, v in point.items()})
        assert value.dtype == np.float32
        np.testing.assert_allclose(value, f64(point), rtol=2e-6)


def test_minibatch_likelihood_is_an_unbiased_estimate(monkeypatch):
    """The scaled minibatch log-likelihood averages to the full one (new blocks at every call;
    480 cells in 69 blocks of 7, the last padded), and a batch larger than the data is refused."""
    import bayesirt.models.logistic as logistic
    from bayesirt.errors import ConfigError

    monkeypatch.setattr(logistic, "MINIBATCH_BLOCK", 7)  # 69 blocks, 5 padding cells
    responses, _ = simulate_pl("2pl", n_items=20, n_models=30, seed=4, missing=0.2)
    spec = load_spec("2pl")
    full, batched = build_logistic(responses, spec), build_logistic(responses, spec, batch_size=63)
    point = full.initial_point()
    rng = np.random.default_rng(0)
    point = {k: v + rng.normal(0, 0.3, np.shape(v)) for k, v in point.items()}
    f_full, f_batch = (m.compile_fn(m.potentiallogp, inputs=m.value_vars, on_unused_input="ignore")
                       for m in (full, batched))
    draws = np.array([f_batch(point) for _ in range(3000)])
    assert np.unique(draws).size > 2900  # a fresh batch at every evaluation
    se = draws.std() / np.sqrt(draws.size)
    assert abs(draws.mean() - f_full(point)) < 4 * se
    with pytest.raises(ConfigError, match=r"The 'batch_size' parameter of fit must be an integer <= 480 \(the observed cells\), or None for the full likelihood; got 481."):
        build_logistic(responses, spec, batch_size=481)
