"""The direct nutpie model of the residual family-DIF posterior (``bayesirt.inference.direct_dif``) against its
oracle, PyMC's graph of ``build_family_dif``: value and gradient at random unconstrained points for both
family-effect priors and both easiness priors, on complete matrices and with missing cells (an (item, family)
group with none observed among them); the draws' reported variables; and (slow) a fit through the audit's
NUTS path against ``sample_model`` on the PyMC graph: the same tree, the same posterior within Monte Carlo
error."""

import ctypes
import json
import math

import arviz as az
import numpy as np
import pytest

from bayesirt.audit.bayes.posterior import fit_family_dif_posterior
from bayesirt.errors import ConfigError
from bayesirt.inference.direct_dif import family_dif_model, sample_family_dif
from bayesirt.inference.fitting import sample_model
from bayesirt.models.family_dif import EASINESS_SD, build_family_dif

#: Every test here compiles numba kernels and PyMC graphs, or samples (minutes under load): the slow tier.
pytestmark = pytest.mark.slow

#: PyMC evaluates Normal(0, 2)'s log(sigma) in float32 (its literal 2.0 is a float32 constant): the direct
#: model's exact constant differs by this per item, and only by this (checked to 1e-10).
_FLOAT32_LOG_SD = float(np.log(np.float32(EASINESS_SD))) - math.log(EASINESS_SD)


def _design(n_items, n_models, n_families, missing, seed):
    """Simulated responses with offsets, unequal families and ``missing`` of the cells unobserved."""
    rng = np.random.default_rng(seed)
    family = rng.permutation(np.arange(n_models) % n_families)
    family[: n_models // 3] = 0  # family 0 the largest
    offsets = rng.normal(0.0, 1.0, (n_items, n_models))
    delta = rng.normal(0.0, 0.5, (n_items, n_families))
    delta -= delta.mean(axis=1, keepdims=True)
    eta = rng.normal(0.0, 1.0, (n_items, 1)) + offsets + delta[:, family]
    y = (rng.random(eta.shape) < 1.0 / (1.0 + np.exp(-eta))).astype(np.int8)
    observed = rng.random(eta.shape) >= missing
    if missing:
        observed[0, family == n_families - 1] = False  # an (item, family) group with no observed cell
        y[~observed] = -1
    for i in range(n_items):  # every item some 0 and some 1 (a flat easiness prior needs them)
        cells = np.flatnonzero(observed[i])
        y[i, cells[:2]] = (0, 1)
    return y, observed, offsets, family


def _pymc_point(pm_model, x):
    """PyMC's value variables (easiness, log sd, the zero-sum coordinates: the direct model's order) from ``x``."""
    start, point, k = pm_model.initial_point(), {}, 0
    for var in pm_model.value_vars:
        shape = start[var.name].shape
        size = int(np.prod(shape))
        point[var.name] = x[k:k + size].reshape(shape)
        k += size
    assert k == x.size
    return point


@pytest.mark.parametrize("n_models", [37, 290])
@pytest.mark.parametrize("missing", [0.0, 0.3])
@pytest.mark.parametrize("easiness_prior", ["flat", "normal"])
@pytest.mark.parametrize("prior", ["ridge", "hierarchical"])
def test_log_density_and_gradient_equal_pymcs(prior, easiness_prior, missing, n_models):
    """Value and gradient at random points equal PyMC's to 1e-10 (relative to the largest); the value up to
    PyMC's float32 log(2) of the normal easiness prior, which is checked to 1e-10 too. With 290 models an
    item's cells fill the kernel's blocks of 128 (its remainder path alone with 37), and the last point puts
    an item's logits above the clip of exp (36)."""
    n_items, n_families = 11, 4
    data = _design(n_items, n_models, n_families, missing, seed=n_models + int(10 * missing))
    settings = {"prior": prior, "easiness_prior": easiness_prior, "delta_sd": 0.7}
    model = family_dif_model(*data, n_families, **settings)
    pm_model = build_family_dif(*data, n_families, **settings)
    logp, dlogp = pm_model.compile_logp(jacobian=True), pm_model.compile_dlogp(jacobian=True)
    assert model.compiled.n_dim == sum(v.size for v in pm_model.initial_point().values())
    constant = n_items * _FLOAT32_LOG_SD if easiness_prior == "normal" else 0.0
    rng = np.random.default_rng(1)
    for scale in (0.3, 1.0, 2.5, 2.6):
        x = rng.normal(0.0, scale, model.compiled.n_dim)
        if scale == 2.6:
            x[3] = 45.0  # item 3's easiness: exp(eta) clipped
        value, gradient = model.logp(x)
        point = _pymc_point(pm_model, x)
        want = logp(point)
        assert abs(value - want - constant) <= 1e-10 * abs(want)
        np.testing.assert_allclose(gradient, dlogp(point), rtol=1e-10, atol=1e-10 * np.abs(gradient).max())


@pytest.mark.parametrize("n_families", [2, 5])
def test_two_and_five_families(n_families):
    """The zero-sum transform's edge (one free coordinate per item) and more families, 20% missing."""
    data = _design(7, 41, n_families, 0.2, seed=n_families)
    model = family_dif_model(*data, n_families, prior="hierarchical")
    pm_model = build_family_dif(*data, n_families, prior="hierarchical")
    logp, dlogp = pm_model.compile_logp(jacobian=True), pm_model.compile_dlogp(jacobian=True)
    x = np.random.default_rng(n_families).normal(0.0, 1.0, model.compiled.n_dim)
    value, gradient = model.logp(x)
    point = _pymc_point(pm_model, x)
    assert abs(value - logp(point)) <= 1e-10 * abs(value)
    np.testing.assert_allclose(gradient, dlogp(point), rtol=1e-10, atol=1e-10 * np.abs(gradient).max())


@pytest.mark.parametrize("prior", ["ridge", "hierarchical"])
def test_expand_callback_gives_pymcs_reported_variables(prior):
    """The draws' variables (the expand callback nutpie calls) equal PyMC's at the same point, dif_range too."""
    import pymc as pm

    data = _design(9, 23, 3, 0.1, seed=2)
    model, pm_model = family_dif_model(*data, 3, prior=prior), build_family_dif(*data, 3, prior=prior)
    compiled, double = model.compiled, ctypes.POINTER(ctypes.c_double)
    assert model.reported_variables == [v.name for v in pm_model.free_RVs + pm_model.deterministics]
    outputs = pm_model.replace_rvs_by_values([pm_model[n] for n in model.reported_variables])
    fn = pm.pytensorf.compile(pm_model.value_vars, outputs, on_unused_input="ignore")
    rng = np.random.default_rng(3)
    for _ in range(3):
        x, out = rng.normal(0.0, 0.7, compiled.n_dim), np.empty(compiled.n_expanded)
        assert compiled.compiled_expand_func.ctypes(compiled.n_dim, compiled.n_expanded, x.ctypes.data_as(double),
                                                    out.ctypes.data_as(double), compiled.user_data.ctypes.data) == 0
        point = _pymc_point(pm_model, x)
        want = np.concatenate([np.ravel(v) for v in fn(*(point[v.name] for v in pm_model.value_vars))])
        np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)


def test_wrong_dimension_start_and_refused_settings():
    """A point of the wrong length is refused (nutpie's code -1); the start is U(-1, 1) jitter around PyMC's
    support point (zero in these coordinates), the same for the same seed; bad settings get the messages of
    ``build_family_dif`` and ``sample_model``, before any work."""
    data = _design(6, 15, 3, 0.0, seed=4)
    model = family_dif_model(*data, 3, prior="hierarchical")
    n_dim = model.compiled.n_dim
    with pytest.raises(ValueError, match=f"a point of {n_dim + 1} coordinates for a model of {n_dim}"):
        model.logp(np.zeros(n_dim + 1))
    start = model.initial_point(5)
    np.testing.assert_array_equal(start, model.initial_point(5))
    assert np.all(np.abs(start) <= 1.0) and np.std(start) > 0.3
    with pytest.raises(ConfigError, match="'prior' parameter of build_family_dif"):
        family_dif_model(*data, 3, prior="ridged")
    with pytest.raises(ConfigError, match="'draws' parameter of sample_family_dif"):
        sample_family_dif(*data, 3, draws=0)


def _pymc_tree(data, n_families, *, prior="ridge", easiness_prior="flat", **options):
    """Today's path before the direct model: ``sample_model`` on the PyMC graph, nutpie compiling it."""
    tree = sample_model(build_family_dif(*data, n_families, prior=prior, easiness_prior=easiness_prior),
                        method="nuts", sampler="nutpie", progress=False, **options)
    tree.attrs["bayesirt_family_dif"] = json.dumps({"prior": prior, "delta_sd": 1.0, "easiness_prior": easiness_prior,
                                                    "n_families": n_families})
    return tree


@pytest.mark.parametrize("prior", ["ridge", "hierarchical"])
def test_audit_fit_has_the_structure_of_the_pymc_paths(prior):
    data = _design(12, 30, 3, 0.2, seed=5)
    settings = {"draws": 30, "tune": 30, "chains": 2, "seed": 4}
    direct = fit_family_dif_posterior(*data, 3, method="nuts", prior=prior, easiness_prior="normal", **settings)
    pymc = _pymc_tree(data, 3, prior=prior, easiness_prior="normal", **settings)
    assert set(direct.attrs) == set(pymc.attrs)
    for name in ("bayesirt_settings", "bayesirt_family_dif"):
        assert direct.attrs[name] == pymc.attrs[name]
    assert set(json.loads(direct.attrs["bayesirt_timings"])) == set(json.loads(pymc.attrs["bayesirt_timings"]))
    assert set(direct.children) == set(pymc.children) == {"posterior", "sample_stats"}
    for group in direct.children:
        got, want = direct[group].to_dataset(), pymc[group].to_dataset()
        assert list(got.data_vars) == list(want.data_vars), group
        assert dict(got.sizes) == dict(want.sizes) and set(got.coords) == set(want.coords), group
        assert set(got.attrs) == set(want.attrs), group
        for coord in got.coords:
            np.testing.assert_array_equal(got[coord].values, want[coord].values)
        for var in got.data_vars:
            assert (got[var].dims, got[var].dtype) == (want[var].dims, want[var].dtype), (group, var)
    delta = direct.posterior["family_effect"].values
    np.testing.assert_allclose(delta.sum(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(direct.posterior["dif_range"].values, np.ptp(delta, axis=-1), rtol=1e-12)


def test_posterior_agrees_with_the_pymc_path():
    """A simulated 40-item x 60-model design, 3 families, 15% missing, hierarchical prior: the direct model's
    posterior means equal the PyMC graph's within Monte Carlo error (|difference| < 4 combined ESS-based
    MCSEs for all but 2 of the 201 parameters, median below 1.5), and the same seed gives the same draws."""
    data = _design(40, 60, 3, 0.15, seed=11)
    settings = {"draws": 400, "tune": 400, "chains": 2, "seed": 12}
    direct = fit_family_dif_posterior(*data, 3, method="nuts", prior="hierarchical", **settings)
    again = fit_family_dif_posterior(*data, 3, method="nuts", prior="hierarchical", **settings)
    pymc = _pymc_tree(data, 3, prior="hierarchical", **settings)
    z = []
    for var in ("easiness", "family_effect", "family_effect_sd"):
        np.testing.assert_array_equal(direct.posterior[var].values, again.posterior[var].values)
        means = [t.posterior[var].mean(("chain", "draw")).values.ravel() for t in (direct, pymc)]
        se = [az.mcse(t.posterior.to_dataset()[[var]])[var].values.ravel() for t in (direct, pymc)]
        z.append(np.abs(means[0] - means[1]) / np.sqrt(se[0] ** 2 + se[1] ** 2))
    z = np.concatenate(z)
    assert z.size == 40 + 120 + 1 and np.sum(z >= 4.0) <= 2, np.sort(z)[-5:]
    assert np.median(z) < 1.5  # a shifted posterior would move most means, not a few
