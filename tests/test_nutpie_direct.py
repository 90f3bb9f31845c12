"""The direct nutpie model (``bayesirt.inference.nutpie_direct``) against its oracle, PyMC's log density
of ``build_logistic``'s model (the PyTensor graph, ``fused_kernel=False``): value and gradient at random
unconstrained points for a 2PL, a common slope, a fixed slope and the difficulty parameterization, with
and without missing cells, with few models (the kernel loops by model) and many; its start; and a fit by
it against a fit by the PyMC path (same output structure, same posterior means within Monte Carlo error,
the same draws for the same seed)."""

import ctypes
import functools
import json

import arviz as az
import numpy as np
import pytest
import xarray as xr

import bayesirt.inference.fitting as fitting
from bayesirt.data import simulate_pl
from bayesirt.inference import nutpie_direct
from bayesirt.inference.nutpie_callback import POINT
from bayesirt.inference.nutpie_direct import direct_eligible, direct_model
from bayesirt.models.kernels import BY_MODEL_BELOW
from bayesirt.models.logistic import build_logistic
from bayesirt.models.specs import BUILTIN_DIR, load_spec, parse_spec
from hierarchical_specs import DIRECT, hierarchical_spec

#: Every test here compiles numba kernels or samples (minutes under load): the slow tier.
pytestmark = pytest.mark.slow

_PRIORS = """
[priors.theta]
distribution = "normal"
mu = 0.3
sigma = 1.2

[priors.discrimination]
{discrimination}

[priors.{location}]
distribution = "normal"
mu = {location_mu}
sigma = 1.7
"""
#: Specs beyond the built-in 2pl, with hyperparameters away from 0 and 1 so that every constant counts.
SPECS = {
    "common slope (rasch)": "rasch",
    "fixed slope": ("slope-intercept", 'structure = "fixed"\nvalue = 1.3', "intercept", -0.4),
    "difficulty, item slopes": ("difficulty", 'distribution = "lognormal"\nmu = 0.2\nsigma = 0.6', "difficulty", 0.5),
    "difficulty, common slope": ("difficulty", 'structure = "common"\ndistribution = "lognormal"\nmu = -0.1\n'
                                               "sigma = 0.4", "difficulty", -0.2),
}


#: The shared specs with a learned slope scale (the scale-free coordinates), by the names of these tests.
HIERARCHICAL = {f"hierarchical, {name}": name for name in DIRECT}


def _spec(name):
    if name in HIERARCHICAL:
        return hierarchical_spec(HIERARCHICAL[name])
    if name not in SPECS:
        return load_spec(name)
    if name in SPECS and isinstance(SPECS[name], str):
        return load_spec(SPECS[name])
    parameterization, discrimination, location, location_mu = SPECS[name]
    text = f'name = "test"\nparameterization = "{parameterization}"\n' + _PRIORS.format(
        discrimination=discrimination, location=location, location_mu=location_mu)
    return parse_spec(text)


def _responses(n_items, n_models, missing, seed=0):
    responses, _ = simulate_pl("2pl", n_items=n_items, n_models=n_models, seed=seed, missing=missing)
    return responses


def _pymc_point(pm_model, x):
    """PyMC's value variables (in the model's order, the direct model's too) from the flat vector ``x``."""
    start, point = pm_model.initial_point(), {}
    k = 0
    for var in pm_model.value_vars:
        shape = start[var.name].shape
        size = int(np.prod(shape))
        point[var.name] = x[k:k + size].reshape(shape)
        k += size
    assert k == x.size
    return point


#: The built-in specs with asymptotes or learned hyperparameters (their likelihood, or their priors, are
#: not the 2PL's).
BUILTIN = ("3pl", "4pl", "2pl-hierarchical")


def _check_against_pymc(spec, responses, seed):
    """Value and gradient of the direct model at random points against PyMC's graph. The gradients agree to
    1e-10; the log densities agree to 1e-10 up to one constant: PyMC evaluates some normalizing constants
    from float32 literals (``pt.gammaln(5.0)`` is float32: Beta(5, 17)'s log B is 1.1e-6 off per item), where
    the direct model's are exact, so differences between points (all that sampling uses) are compared at
    1e-10 and the values themselves to within that constant (2e-6 per item)."""
    model = direct_model(responses, spec)
    pm_model = build_logistic(responses, spec)  # the PyTensor graph, not the kernel
    logp, dlogp = pm_model.compile_logp(jacobian=True), pm_model.compile_dlogp(jacobian=True)
    rng = np.random.default_rng(seed)
    values, want = [], []
    for scale in (0.3, 1.0, 2.0):
        x = rng.normal(0.0, scale, model.compiled.n_dim)
        value, grad = model.logp(x)
        point = _pymc_point(pm_model, x)
        assert isinstance(value, float) and grad.dtype == np.float64 and grad.flags.c_contiguous
        values.append(value)
        want.append(logp(point))
        np.testing.assert_allclose(grad, dlogp(point), rtol=1e-10, atol=1e-10 * np.abs(grad).max())
    np.testing.assert_allclose(values, want, rtol=0, atol=2e-6 * responses.sizes["item"])
    np.testing.assert_allclose(np.diff(values), np.diff(want), rtol=0, atol=1e-10 * np.abs(want).max())


@pytest.mark.parametrize("name", ["2pl", *SPECS, *HIERARCHICAL])
@pytest.mark.parametrize(("n_models", "missing"), [(9, 0.0), (9, 0.15), (BY_MODEL_BELOW + 6, 0.0),
                                                   (BY_MODEL_BELOW + 6, 0.15), (BY_MODEL_BELOW + 6, 0.93)])
def test_log_density_and_gradient_equal_pymcs(name, n_models, missing):
    """The 1PL/2PL specs on the dense kernel, by item and by model rows, and (93% missing) on the cells' kernel."""
    spec, responses = _spec(name), _responses(23, n_models, missing, seed=n_models)
    assert direct_eligible(responses, spec)
    assert (nutpie_direct._layout(responses["responses"].values, spec) == nutpie_direct.CELLS) == (missing > 0.9)
    _check_against_pymc(spec, responses, n_models + int(100 * missing))


@pytest.mark.parametrize("name", BUILTIN)
@pytest.mark.parametrize("missing", [0.0, 0.3, 0.93])
def test_asymptotes_and_hyperpriors_equal_pymcs(name, missing):
    """Guessing and slip (in log-odds) on the dense kernel with asymptotes and (93% missing) on the cells'
    kernel, and the learned hyperparameters of the hierarchical spec, on a complete matrix and ones with
    30% and 93% of their cells missing."""
    spec, responses = load_spec(name), _responses(23, 17, missing, seed=3)
    assert direct_eligible(responses, spec)
    layout = nutpie_direct._layout(responses["responses"].values, spec)
    assert layout == (nutpie_direct.CELLS if missing > 0.9 else nutpie_direct.ASYMPTOTES if spec.has_guessing
                      else nutpie_direct.BY_MODEL)
    _check_against_pymc(spec, responses, 7 + int(100 * missing))


@pytest.mark.parametrize("name", ["3pl", "2pl-hierarchical"])
def test_difficulty_form_and_common_slope_with_new_priors(name):
    """A 3PL in the difficulty form with a common slope, and hierarchical difficulty priors with item slopes:
    the other branches of the location and slope code beside asymptotes and hyperpriors."""
    text = (BUILTIN_DIR / f"{name}.toml").read_text()
    if name == "3pl":
        text = text.replace('parameterization = "slope-intercept"', 'parameterization = "difficulty"')
        text = text.replace("[priors.intercept]", "[priors.difficulty]").replace('structure = "item"', 'structure = "common"')
    else:
        text = text.replace('mu = { distribution = "normal", mu = 0.0, sigma = 0.5 }', "mu = 0.1")
    for missing in (0.3, 0.93):
        _check_against_pymc(parse_spec(text), _responses(19, 11, missing, seed=5), 11)


def test_callback_reports_wrong_dimension_and_non_finite_points():
    """The logp callback nutpie calls returns nutpie's codes: a point of the wrong length is refused
    (-1, raised by ``logp``), and a slope that overflows to infinity gives a non-finite result (3 or 4),
    which nutpie treats as a divergence, instead of a number."""
    model = direct_model(_responses(23, 9, 0.0, seed=1), _spec("2pl"))
    n_dim = model.compiled.n_dim
    with pytest.raises(ValueError, match=f"a point of {n_dim + 1} coordinates for a model of {n_dim}"):
        model.logp(np.zeros(n_dim + 1))
    logp_callback = model.compiled.compiled_logp_func.ctypes
    x, gradient, value = np.zeros(n_dim), np.empty(n_dim), np.empty(1)
    double = ctypes.POINTER(ctypes.c_double)

    def code(point):
        return logp_callback(n_dim, *(v.ctypes.data_as(double) for v in (point, gradient, value)),
                             model.compiled.user_data.ctypes.data)

    assert code(x) == 0 and np.isfinite(value[0])
    x[9] = 800.0  # the first item's log slope: the slope overflows
    assert code(x) in (3, 4) and not (np.isfinite(value[0]) and np.isfinite(gradient).all())


@pytest.mark.parametrize("name", ["4pl", "2pl-hierarchical", "difficulty, common slope", "fixed slope"])
def test_expanded_draws_give_pymcs_reported_variables(name):
    """The draws' reported variables (nutpie stores the unconstrained points, the expand callback copying them;
    the model's ``reported`` expands them) equal those of PyMC's model at the same unconstrained points, with
    PyMC's shapes and dims: theta, slopes, intercepts, difficulties, guessing, slip and learned hyperparameters."""
    import pymc as pm

    spec, responses = _spec(name), _responses(21, 13, 0.2, seed=2)
    model, pm_model = direct_model(responses, spec), build_logistic(responses, spec)
    compiled, double = model.compiled, ctypes.POINTER(ctypes.c_double)
    outputs = pm_model.replace_rvs_by_values([pm_model[n] for n in model.reported_variables])
    fn = pm.pytensorf.compile(pm_model.value_vars, outputs, on_unused_input="ignore")
    x = np.random.default_rng(3).normal(0.0, 0.7, (2, 3, compiled.n_dim))  # (chain, draw, point)
    stored = np.empty_like(x)
    for c, d in np.ndindex(2, 3):
        assert compiled.compiled_expand_func.ctypes(compiled.n_dim, compiled.n_expanded, x[c, d].ctypes.data_as(double),
                                                    stored[c, d].ctypes.data_as(double),
                                                    compiled.user_data.ctypes.data) == 0
    np.testing.assert_array_equal(stored, x)
    posterior = xr.Dataset({POINT: (("chain", "draw", "coordinate"), stored)},
                           coords={"chain": [0, 1], "draw": [0, 1, 2]})
    reported = model.reported(posterior)
    assert list(reported.data_vars) == model.reported_variables
    for c, d in np.ndindex(2, 3):
        point = _pymc_point(pm_model, x[c, d])
        for var, want in zip(model.reported_variables, fn(*(point[v.name] for v in pm_model.value_vars)), strict=True):
            got = reported[var].isel(chain=c, draw=d)
            assert got.dims == pm_model.named_vars_to_dims.get(var, ())
            np.testing.assert_allclose(got.values, want, rtol=1e-12, atol=1e-12)


def test_logp_callback_cache_is_not_used_after_a_kernel_edit(monkeypatch):
    """The logp callback inlines the kernel of another file, which numba's cache does not check: it is
    loaded from the cache while the digest of both files compiled into the cache matches today's, and
    compiled afresh (not loaded) when it does not, as after an edit to kernels.py alone; then cached
    again, with the new digest."""
    make = functools.partial(nutpie_direct._callbacks.__wrapped__, nutpie_direct.BY_ITEM, False, False)
    make()  # compiled, or loaded, and cached
    assert make()[0].from_cache
    monkeypatch.setattr(nutpie_direct, "_SOURCES", nutpie_direct._SOURCES + 1)  # as if a file had changed
    assert not make()[0].from_cache
    assert make()[0].from_cache
    monkeypatch.undo()  # the cache holds the changed digest: the next call compiles and caches again
    assert not make()[0].from_cache
    assert make()[0].from_cache


@pytest.mark.parametrize("name", ["2pl", "difficulty, common slope", "fixed slope", "2pl-hierarchical",
                                  *HIERARCHICAL])
def test_start_is_pymcs_support_point_plus_jitter(name):
    """The start: every free variable at PyMC's support point in the unconstrained space, evaluated at the
    jittered start of its parents (PyMC's ``support_point`` graph of each variable, through its transform),
    plus U(-1, 1) jitter; the same seed gives the same start."""
    from pymc.distributions.distribution import support_point

    spec, responses = _spec(name), _responses(11, 7, 0.0)
    model, pm_model = direct_model(responses, spec), build_logistic(responses, spec)
    supports = []
    for rv in pm_model.free_RVs:
        value = support_point(rv)
        transform = pm_model.rvs_to_transforms.get(rv)
        if transform is not None:
            value = transform.forward(value, *rv.owner.inputs)
        supports.append(value)
    support = pm_model.compile_fn(pm_model.replace_rvs_by_values(supports), inputs=pm_model.value_vars,
                                  on_unused_input="ignore")
    make = model.initial_point
    x = make(5)
    np.testing.assert_array_equal(x, make(5))
    assert not np.array_equal(x, make(6))
    start = _pymc_point(pm_model, x)
    for value_var, centre in zip(pm_model.value_vars, support(start)):
        gap = start[value_var.name] - centre
        assert np.all(np.abs(gap) <= 1.0) and (gap.size == 1 or np.std(gap) > 0.1), value_var.name  # jittered


def test_eligibility():
    """Every 1PL-4PL spec with a lognormal or fixed slope is eligible at any observed share; a half-normal
    slope, a MIRT spec and a matrix without an observed cell keep the PyMC path."""
    dense, sparse = _responses(10, 8, 0.0), _responses(10, 8, 0.7)
    for name in ("2pl", "rasch", "3pl", "4pl", "2pl-hierarchical"):
        assert direct_eligible(dense, load_spec(name)) and direct_eligible(sparse, load_spec(name)), name
    assert not direct_eligible(dense, load_spec("mirt"))
    empty = dense.copy(deep=True)
    empty["responses"].values[:] = -1
    assert not direct_eligible(empty, load_spec("2pl"))
    halfnormal = parse_spec('name = "h"\n' + _PRIORS.format(
        discrimination='distribution = "halfnormal"\nsigma = 1.0', location="intercept", location_mu=0.0))
    assert not direct_eligible(dense, halfnormal)


def _fit(responses, spec, *, pymc_path=False, monkeypatch=None, **kwargs):
    if pymc_path:  # the private way to the PyMC path: nothing is eligible for the direct model
        monkeypatch.setattr("bayesirt.inference.nutpie_direct.direct_eligible", lambda responses, spec: False)
    try:
        return fitting.fit(responses, spec, method="nuts", progress=False, **kwargs)
    finally:
        if pymc_path:
            monkeypatch.undo()


@pytest.mark.parametrize("name", ["2pl", "common slope (rasch)", "fixed slope", "difficulty, item slopes", "4pl",
                                  "2pl-hierarchical"])
def test_fit_has_the_structure_of_the_pymc_paths(name, monkeypatch):
    spec, responses = _spec(name), _responses(40, 20, 0.0)
    direct = _fit(responses, spec, draws=30, tune=30, chains=2, seed=4)
    pymc = _fit(responses, spec, pymc_path=True, monkeypatch=monkeypatch, draws=30, tune=30, chains=2, seed=4)
    assert json.loads(direct.attrs["bayesirt_settings"])["nutpie_model"] == "direct"
    assert json.loads(pymc.attrs["bayesirt_settings"])["nutpie_model"] == "pymc"
    settings = [json.loads(t.attrs["bayesirt_settings"]) for t in (direct, pymc)]
    assert settings[0]["nutpie"] == settings[1]["nutpie"] == fitting.spec_nutpie_settings(spec, fitting.responses_per_item(responses))
    assert set(json.loads(direct.attrs["bayesirt_timings"])) == set(json.loads(pymc.attrs["bayesirt_timings"]))
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
    if spec.discrimination_structure == "fixed":
        assert np.all(direct.posterior["discrimination"].values == spec.discrimination_value)


def test_posterior_means_agree_with_the_pymc_path(monkeypatch):
    """A simulated 60-item x 40-model 2PL: the direct model's posterior means equal the PyMC path's within
    Monte Carlo error (|difference| < 4 combined MCSEs of the mean, ESS-based, for all but 2 of the 160
    parameters), and the same seed gives the same draws, bit for bit."""
    responses, _ = simulate_pl("2pl", n_items=60, n_models=40, seed=11)
    settings = {"draws": 400, "tune": 400, "chains": 2, "seed": 12}
    direct = _fit(responses, "2pl", **settings)
    again = _fit(responses, "2pl", **settings)
    pymc = _fit(responses, "2pl", pymc_path=True, monkeypatch=monkeypatch, **settings)
    z = []
    for var in ("theta", "discrimination", "intercept"):
        np.testing.assert_array_equal(direct.posterior[var].values, again.posterior[var].values)
        means = [t.posterior[var].mean(("chain", "draw")).values for t in (direct, pymc)]
        se = [az.mcse(t.posterior.to_dataset()[[var]])[var].values for t in (direct, pymc)]
        z.append(np.abs(means[0] - means[1]) / np.sqrt(se[0] ** 2 + se[1] ** 2))
    z = np.concatenate(z)
    assert z.size == 160 and np.sum(z >= 4.0) <= 2, np.sort(z)[-5:]
    assert np.median(z) < 1.5  # a shifted posterior would move most means, not a few
    np.testing.assert_array_equal(direct.sample_stats["step_size"].values, again.sample_stats["step_size"].values)


def test_a_common_slope_mixes():
    """A common slope with the scaled deviation (``build_logistic``): on a 150-model x 300-item matrix, 2 chains
    x 300 draws, the slope's bulk ESS is above 300. Sampled as log a beside the unscaled deviation, a thin ridge
    (a * |deviation| fixed by the data) kept it at 55 here (at 063acae) (and 7-70 of 1,000 draws at 200 x 500 in
    ``benchmarks/nuts_numpyro.py``)."""
    responses, _ = simulate_pl("2pl", n_items=300, n_models=150, seed=3)
    tree = _fit(responses, "rasch", draws=300, tune=300, chains=2, seed=5)
    ess = float(az.ess(tree.posterior.to_dataset()[["discrimination"]])["discrimination"])
    assert ess > 300, ess
