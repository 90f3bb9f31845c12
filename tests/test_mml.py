"""Tests of the marginal maximum likelihood (Bock-Aitkin EM) reference engine.

Published values: LSAT6 2PL and Rasch from R ltm (21-point Gauss-Hermite), LSAT7 2PL from
/work/shared/data/README.md; ltm's printed 2PL standard errors and empirical-Bayes (MAP)
scores for the all-wrong and all-right patterns from ``summary(ltm(LSAT ~ z1))`` and
``factor.scores``.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
import xarray as xr
from numpy.polynomial.hermite_e import hermegauss
from scipy import stats

from bayesirt.data import MISSING, load_dataset, make_responses, simulate_pl
from bayesirt.errors import BayesIRTError, ConfigError, DataError
from bayesirt.frequentist import MMLResult, fit_mml
from bayesirt.models.specs import Prior, load_spec

LSAT6_B = [-3.3597, -1.3696, -0.2799, -1.8659, -3.1236]
LSAT6_A = [0.8254, 0.7229, 0.8905, 0.6886, 0.6575]
LSAT6_B_SE = [0.8669, 0.3073, 0.0997, 0.4341, 0.8700]  # ltm summary, std.err
LSAT6_A_SE = [0.2581, 0.1867, 0.2326, 0.1852, 0.2100]
RASCH_B = [-3.6153, -1.3224, -0.3176, -1.7301, -2.7802]
LSAT7_A = [0.9875, 1.0808, 1.7075, 0.7650, 0.7357]
LSAT7_D = [1.8559, 0.8080, 1.8052, 0.4860, 1.8545]


@pytest.fixture(scope="module")
def lsat6():
    return load_dataset("lsat6")


@pytest.fixture(scope="module")
def lsat6_2pl(lsat6):
    return fit_mml(lsat6, "2pl")


def _marginal_loglik(y, a, d, c=None, s=None, n_nodes=61):
    """Independent vectorized marginal log-likelihood (complete data), for Hessian checks."""
    c = np.zeros_like(a) if c is None else c
    s = np.zeros_like(a) if s is None else s
    x, w = hermegauss(n_nodes)
    p = c[:, None] + (1 - c - s)[:, None] / (1 + np.exp(-(a[:, None] * x + d[:, None])))
    like = np.exp(y.T @ np.log(p) + (1 - y).T @ np.log(1 - p)) @ (w / w.sum())
    return np.log(like).sum()


def _hessian(f, v, h=1e-3):
    """Second differences of a scalar function (a different code path from fit_mml's)."""
    n = v.size
    hess = np.empty((n, n))
    for i in range(n):
        for j in range(i, n):
            ei, ej = np.eye(n)[i] * h, np.eye(n)[j] * h
            hess[i, j] = hess[j, i] = (f(v + ei + ej) - f(v + ei - ej) - f(v - ei + ej) + f(v - ei - ej)) / (4 * h * h)
    return hess


def test_lsat6_2pl_matches_ltm(lsat6_2pl):
    fit = lsat6_2pl
    assert isinstance(fit, MMLResult) and fit.converged
    assert fit.loglik == pytest.approx(-2466.653, abs=0.005)
    assert fit.n_parameters == 10
    np.testing.assert_allclose(fit.items["discrimination"], LSAT6_A, atol=0.005)
    np.testing.assert_allclose(fit.items["difficulty"], LSAT6_B, atol=0.005)
    np.testing.assert_allclose(fit.items["intercept"], -fit.items["discrimination"] * fit.items["difficulty"])
    # standard errors from the observed information (ltm: numerical Hessian at its optimum)
    np.testing.assert_allclose(fit.items["discrimination_se"], LSAT6_A_SE, atol=0.002)
    np.testing.assert_allclose(fit.items["difficulty_se"], LSAT6_B_SE, atol=0.002)
    assert (fit.items["guessing"] == 0).all() and fit.items["guessing_se"].isnull().all()
    assert not fit.attrs["map_asymptotes"] and fit.attrs["active_priors"] == "none"


def test_lsat6_rasch_matches_ltm(lsat6):
    fit = fit_mml(lsat6, "rasch")
    assert fit.loglik == pytest.approx(-2466.938, abs=0.005)
    assert fit.n_parameters == 6
    np.testing.assert_allclose(fit.items["discrimination"], 0.7551, atol=0.005)
    np.testing.assert_allclose(fit.items["difficulty"], RASCH_B, atol=0.005)
    assert np.ptp(fit.items["discrimination_se"].values) == 0  # one shared slope


def test_lsat7_2pl_published():
    fit = fit_mml(load_dataset("lsat7"), "2pl", se=False)
    assert fit.loglik == pytest.approx(-2658.805, abs=0.005)
    np.testing.assert_allclose(fit.items["discrimination"], LSAT7_A, atol=0.005)
    np.testing.assert_allclose(fit.items["intercept"], LSAT7_D, atol=0.005)
    assert fit.covariance is None and fit.items["discrimination_se"].isnull().all()


def test_quadrature_size_barely_matters(lsat6, lsat6_2pl):
    fit21 = fit_mml(lsat6, "2pl", quadrature=21, se=False)
    assert fit21.loglik == pytest.approx(lsat6_2pl.loglik, abs=1e-3)
    np.testing.assert_allclose(fit21.items["difficulty"], lsat6_2pl.items["difficulty"], atol=2e-3)


@pytest.mark.parametrize("spec", ["2pl", "3pl"])
def test_em_never_decreases(lsat6, spec):
    fit = fit_mml(lsat6, spec, se=False)
    # EM maximizes loglik + active log priors (the 3PL carries Beta priors on c): monotone
    trace = fit.objective_trace
    assert trace.size == fit.iterations + 1
    assert (np.diff(trace) >= -1e-8 * np.abs(trace[1:])).all()
    if spec == "2pl":
        np.testing.assert_array_equal(fit.loglik_trace, trace)
    else:
        assert fit.attrs["map_asymptotes"] and fit.log_prior != 0
        assert fit.objective == pytest.approx(fit.loglik + fit.log_prior)


def test_se_equals_independent_hessian():
    ds = load_dataset("lsat7")
    y = ds["responses"].values.astype(float)
    fit = fit_mml(ds, "2pl", tol=1e-9, ll_tol=1e-15)
    a, d = fit.items["discrimination"].values, fit.items["intercept"].values
    hess = _hessian(lambda v: _marginal_loglik(y, v[:5], v[5:]), np.r_[a, d])
    se = np.sqrt(np.diag(np.linalg.inv(-hess)))
    np.testing.assert_allclose(fit.items["discrimination_se"], se[:5], rtol=1e-3)
    np.testing.assert_allclose(fit.items["intercept_se"], se[5:], rtol=1e-3)
    assert fit.covariance.dims == ("parameter", "parameter_") and fit.covariance.shape == (10, 10)


def test_se_3pl_includes_beta_prior_curvature(lsat6):
    """3PL (MAP on c): SEs from the curvature of loglik + Beta log prior, checked independently."""
    y = lsat6["responses"].values.astype(float)
    fit = fit_mml(lsat6, "3pl", tol=1e-9, ll_tol=1e-15)
    it = fit.items

    def logpost(v):
        a, d, c = v[:5], v[5:10], v[10:]
        return _marginal_loglik(y, a, d, c) + stats.beta.logpdf(c, 5, 17).sum()

    v = np.r_[it["discrimination"].values, it["intercept"].values, it["guessing"].values]
    se = np.sqrt(np.diag(np.linalg.inv(-_hessian(logpost, v, h=1e-4))))
    np.testing.assert_allclose(it["discrimination_se"], se[:5], rtol=1e-3)
    np.testing.assert_allclose(it["guessing_se"], se[10:], rtol=1e-3)
    assert fit.objective == pytest.approx(logpost(v), abs=1e-6)


def _spec_with(name, **priors):
    spec = load_spec(name)
    return dataclasses.replace(spec, priors={**spec.priors, **priors})


def _log_posterior(y, spec, priors, a, d, c, s):
    """Independent marginal log posterior with missing cells (-1) and the priors fit_mml activates."""
    x, w = hermegauss(61)
    p = c[:, None] + (1 - c - s)[:, None] / (1 + np.exp(-(a[:, None] * x + d[:, None])))
    ll = np.log(np.exp((y == 1).T @ np.log(p) + (y == 0).T @ np.log(1 - p)) @ (w / w.sum())).sum()
    pr = {k: v for k, v in spec.priors.items() if k != "theta" and (priors or k in ("guessing", "slip"))}
    if "discrimination" in pr:
        one = a[:1] if spec.discrimination_structure == "common" else a
        par = pr["discrimination"].params
        ll += (stats.lognorm.logpdf(one, s=par["sigma"], scale=np.exp(par["mu"])) if pr["discrimination"].distribution
               == "lognormal" else stats.halfnorm.logpdf(one, scale=par["sigma"])).sum()
        ll += np.log(one).sum()  # the density of log a: the mode in the sampler's coordinates (LOG_SLOPE)
    for name, value in (("intercept", d), ("difficulty", -d / a)):
        if name in pr:
            ll += stats.norm.logpdf(value, pr[name].params["mu"], pr[name].params["sigma"]).sum()
    for name, value in (("guessing", c), ("slip", s)):
        if name in pr:
            ll += stats.beta.logpdf(value, pr[name].params["alpha"], pr[name].params["beta"]).sum()
    return ll


@pytest.mark.parametrize(("name", "priors", "extra", "size"), [
    ("1pl", True, {"difficulty": Prior("normal", {"mu": 0.0, "sigma": 1.5})}, (6, 400)),  # shared slope + b prior
    ("2pl", False, {}, (6, 400)),
    ("2pl", True, {"discrimination": Prior("halfnormal", {"sigma": 1.5}),
                   "difficulty": Prior("normal", {"mu": 0.5, "sigma": 1.0})}, (6, 400)),
    ("2pl", True, {}, (16, 12)),  # fewer response patterns than items: the other summation order
    ("3pl", True, {}, (6, 400)),
    ("4pl", True, {}, (6, 400)),
])
@pytest.mark.slow
def test_observed_information_is_the_exact_hessian(name, priors, extra, size):
    """Louis' identity in fit_mml vs second differences of an independent log posterior, with
    missing cells, a shared slope and every kind of prior (lognormal, halfnormal, normal on d or b, beta)."""
    spec = _spec_with(name, **extra)
    if "difficulty" in extra:
        spec = dataclasses.replace(spec, priors={k: v for k, v in spec.priors.items() if k != "intercept"})
    ds, _ = simulate_pl("4pl" if name == "4pl" else "2pl", n_items=size[0], n_models=size[1], seed=11)
    y = ds["responses"].values.copy()
    y[np.random.default_rng(2).random(y.shape) < 0.15] = MISSING
    ds = make_responses(y)
    fit = fit_mml(ds, spec, priors=priors, tol=1e-10, ll_tol=1e-15)
    it = {k: fit.items[k].values for k in ("discrimination", "intercept", "guessing", "slip")}
    it["guessing"], it["slip"] = np.nan_to_num(it["guessing"]), np.nan_to_num(it["slip"])
    item_index = {str(i): k for k, i in enumerate(fit.items["item"].values)}
    where = []  # (slot, item position or None for the shared slope) of each covariance row
    for label in fit.covariance["parameter"].values:
        slot, _, item = str(label).partition("[")
        where.append((slot, item_index[item[:-1]] if item else None))

    def f(v):
        par = {k: x.copy() for k, x in it.items()}
        for (k, i), value in zip(where, v, strict=True):
            if i is None:
                par[k][:] = value
            else:
                par[k][i] = value
        return _log_posterior(y, spec, priors, par["discrimination"], par["intercept"], par["guessing"], par["slip"])

    v = np.array([it[k][0 if i is None else i] for k, i in where])
    expected = np.linalg.inv(-_hessian(f, v, h=2e-4))
    assert fit.attrs["se_method"].startswith("inverse observed information (exact")
    np.testing.assert_allclose(np.sqrt(np.diag(fit.covariance.values)), np.sqrt(np.diag(expected)), rtol=2e-4)
    np.testing.assert_allclose(fit.covariance.values, expected, atol=2e-4 * np.abs(expected).max())


def test_priors_true_is_a_mode_of_the_log_posterior(lsat6):
    y = lsat6["responses"].values.astype(float)
    fit = fit_mml(lsat6, "2pl", priors=True, tol=1e-9, ll_tol=1e-15, se=False)

    def logpost(v):
        a, d = v[:5], v[5:]
        return _marginal_loglik(y, a, d) + stats.norm.logpdf(np.log(a), 0, 0.5).sum() + stats.norm.logpdf(d, 0, 2).sum()

    v = np.r_[fit.items["discrimination"].values, fit.items["intercept"].values]
    grad = [(logpost(v + e) - logpost(v - e)) / 2e-5 for e in np.eye(10) * 1e-5]
    np.testing.assert_allclose(grad, 0, atol=1e-3)
    assert fit.objective == pytest.approx(logpost(v), abs=1e-6)
    assert "discrimination ~ LogNormal" in fit.attrs["active_priors"]


def test_missing_cells_loglik_matches_reference_loop():
    full = load_dataset("lsat7")
    y = full["responses"].values.copy()
    rng = np.random.default_rng(42)
    y.flat[rng.choice(y.size, size=y.size // 10, replace=False)] = MISSING
    ds = make_responses(y, item_id=full["item"].values, model_id=full["model"].values)
    fit = fit_mml(ds, "2pl", se=False)
    assert fit.converged
    a, d = fit.items["discrimination"].values, fit.items["intercept"].values
    x, w = hermegauss(61)
    w = w / w.sum()
    total = 0.0
    for m in range(y.shape[1]):  # slow reference: one model at a time, observed items only
        obs = y[:, m] != MISSING
        p = 1 / (1 + np.exp(-(a[obs, None] * x + d[obs, None])))
        total += np.log(np.prod(np.where(y[obs, m][:, None] == 1, p, 1 - p), axis=0) @ w)
    assert fit.loglik == pytest.approx(total, rel=1e-10)
    np.testing.assert_allclose(fit.items["discrimination"], LSAT7_A, atol=0.25)


def test_abilities_eap_and_map(lsat6, lsat6_2pl):
    fit = lsat6_2pl
    y = lsat6["responses"].values
    first = lambda pattern: int(np.flatnonzero((y.T == pattern).all(axis=1))[0])  # noqa: E731
    wrong, right, mixed = first([0] * 5), first([1] * 5), first([1, 0, 1, 0, 1])
    ab = fit.abilities
    assert ab["eap"][right] > ab["eap"][wrong]
    np.testing.assert_array_equal(ab["theta"], ab["eap"])
    # EAP = posterior mean by brute-force integration on a fine grid
    a, d = fit.items["discrimination"].values, fit.items["intercept"].values
    grid = np.linspace(-12, 12, 48_001)
    p = 1 / (1 + np.exp(-(a[:, None] * grid + d[:, None])))
    like = np.prod(np.where(y[:, mixed][:, None] == 1, p, 1 - p), axis=0) * stats.norm.pdf(grid)
    mean = np.trapezoid(like * grid, grid) / np.trapezoid(like, grid)
    sd = np.sqrt(np.trapezoid(like * grid**2, grid) / np.trapezoid(like, grid) - mean**2)
    assert float(ab["eap"][mixed]) == pytest.approx(mean, abs=1e-6)
    assert float(ab["eap_sd"][mixed]) == pytest.approx(sd, abs=1e-6)
    # MAP and its SE: ltm's empirical-Bayes scores (-1.895, 0.795) and (0.606, 0.855)
    assert float(ab["map"][wrong]) == pytest.approx(-1.895, abs=2e-3)
    assert float(ab["map_se"][wrong]) == pytest.approx(0.795, abs=2e-3)
    assert float(ab["map"][right]) == pytest.approx(0.606, abs=2e-3)
    assert float(ab["map_se"][right]) == pytest.approx(0.855, abs=2e-3)
    theta_map = fit_mml(lsat6, "2pl", theta_method="map", se=False).abilities
    np.testing.assert_allclose(theta_map["theta"], ab["map"], atol=1e-6)


def test_labelled_like_the_responses(lsat6, lsat6_2pl):
    items, ab = lsat6_2pl.items, lsat6_2pl.abilities
    assert items["discrimination"].dims == ("item",) and ab["eap"].dims == ("model",)
    np.testing.assert_array_equal(items["item"], lsat6["item"])
    np.testing.assert_array_equal(ab["model"], lsat6["model"])
    assert "item_group" in items.coords and "family" in ab.coords
    shuffled = items["discrimination"].isel(item=[4, 2, 0, 1, 3])
    np.testing.assert_allclose(items["discrimination"] - shuffled, 0)  # aligned by coordinate
    tree = lsat6_2pl.to_datatree()
    assert isinstance(tree, xr.DataTree)
    assert set(tree.children) >= {"items", "abilities", "trace", "covariance"}
    assert tree.attrs["loglik"] == lsat6_2pl.loglik


@pytest.mark.parametrize(
    ("kind", "n_models", "mu_a", "sd_b", "tol"),
    [("3pl", 3000, 0.2, 1.0, {"a": 0.85, "b": 0.95}), ("4pl", 3000, 0.5, 1.5, {"a": 0.7, "b": 0.9})],
)
def test_recovery_with_asymptotes(kind, n_models, mu_a, sd_b, tol):
    """3,000 models x 30 items: the asymptotes are weakly identified, so the bar is modest:
    a and b correlate with the truth, and c (and s) beat the prior mean in mean absolute error."""
    rng = np.random.default_rng(3)
    a = np.exp(rng.normal(mu_a, 0.3, 30))
    b = rng.normal(0.5 if kind == "3pl" else 0.0, sd_b, 30)
    ds, truth = simulate_pl(kind, n_items=30, n_models=n_models, seed=11, discrimination=a, intercept=-a * b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a 4PL slope may run to the bound
        fit = fit_mml(ds, kind, se=False)
    it = fit.items
    assert np.corrcoef(it["discrimination"], truth["discrimination"])[0, 1] > tol["a"]
    assert np.corrcoef(it["difficulty"], truth["difficulty"])[0, 1] > tol["b"]
    assert float(abs(it["guessing"] - truth["guessing"]).mean()) < float(abs(5 / 22 - truth["guessing"]).mean())
    if kind == "4pl":
        assert float(abs(it["slip"] - truth["slip"]).mean()) < float(abs(0.1 - truth["slip"]).mean())
    assert np.corrcoef(fit.abilities["eap"], truth["theta"])[0, 1] > 0.85


def test_bad_input(lsat6):
    with pytest.raises(ConfigError, match=r"^The 'quadrature' parameter of fit_mml must be an integer in \[5, 201\]; "
                                          r"got 4\.$"):
        fit_mml(lsat6, "2pl", quadrature=4)
    with pytest.raises(ConfigError, match=r"^The 'theta_method' parameter of fit_mml must be one of \{'eap', 'map'\}"):
        fit_mml(lsat6, "2pl", theta_method="wle")
    for bad in ({"max_iter": 0}, {"tol": -1}, {"tol": 0.0}, {"ll_tol": -1e-3}, {"threads": 0}, {"priors": "yes"}):
        with pytest.raises(ConfigError, match=rf"^The '{next(iter(bad))}' parameter of fit_mml must be"):
            fit_mml(lsat6, "2pl", **bad)
    with pytest.raises(BayesIRTError, match="unknown model spec"):
        fit_mml(lsat6, "grm")
    with pytest.raises(ConfigError, match="'spec' parameter of fit_mml must be a spec name"):
        fit_mml(lsat6, 3)
    odd = load_spec("2pl")
    odd = dataclasses.replace(odd, priors={**odd.priors, "theta": Prior("lognormal", {"mu": 0.0, "sigma": 1.0})})
    with pytest.raises(ConfigError, match="normal theta"):
        fit_mml(lsat6, odd)
    with pytest.raises(DataError, match="response Dataset"):
        fit_mml(lsat6["responses"], "2pl")


def test_warns_on_iteration_cap_and_bounds(lsat6):
    with pytest.warns(RuntimeWarning, match="iteration cap"):
        fit = fit_mml(lsat6, "2pl", max_iter=3, se=False)
    assert not fit.converged and fit.iterations == 3
    y = lsat6["responses"].values.copy()
    y[0] = 1  # an all-correct item: its intercept runs off under ML
    ds = make_responses(y, item_id=lsat6["item"].values, model_id=lsat6["model"].values)
    with pytest.warns(RuntimeWarning, match="bound|iteration cap"):
        fit_mml(ds, "2pl", se=False, max_iter=200)


def test_no_global_rng(lsat6):
    np.random.seed(0)
    before = np.random.random()
    np.random.seed(0)
    fit_mml(lsat6, "rasch", se=False)
    assert np.random.random() == before


def test_warm_start(lsat6):
    three = fit_mml(lsat6, "3pl", se=False)
    again = fit_mml(lsat6, "3pl", se=False, start=three)  # from its own optimum: stays there
    assert again.iterations <= 3
    np.testing.assert_allclose(again.items["intercept"], three.items["intercept"], atol=1e-4)
    two = fit_mml(lsat6, "2pl", se=False)
    warm = fit_mml(lsat6, "3pl", se=False, start=two)  # asymptotes start at 0.01
    # the starting curves are the 2PL's to within 1%: ~1,200 wrong answers each lose log(0.99)
    assert abs(warm.loglik_trace[0] - two.loglik) < 15
    assert warm.objective >= warm.objective_trace[0]
    with pytest.raises(ConfigError, match="same items"):
        fit_mml(lsat6.isel(item=slice(0, 4)), "3pl", start=two)


def test_eap_of_a_long_test_is_integrated_on_a_dense_grid():
    """On 400 items the ability posterior is narrower than the EM's node spacing (a 61-node EAP SD
    was 0.064); the dense-grid EAP SD agrees with the MAP's curvature SE, as it should for a
    near-normal posterior."""
    from bayesirt.data.datasets.simulate import simulate_pl

    ds, _ = simulate_pl("2pl", n_items=400, n_models=60, seed=1)
    abilities = fit_mml(ds, "2pl", priors=True, se=False).abilities
    np.testing.assert_allclose(abilities["eap_sd"], abilities["map_se"], rtol=0.1)
    np.testing.assert_allclose(abilities["eap"], abilities["map"], atol=0.05)


@pytest.mark.parametrize(("spec", "priors", "n_items", "n_models"), [
    ("2pl", True, 300, 150), ("2pl", False, 300, 150), ("3pl", True, 40, 400), ("rasch", False, 40, 400)])
def test_squarem_reaches_the_fixed_point_of_plain_em(spec, priors, n_items, n_models):
    """SQUAREM (the default) and plain EM stop at the same optimum (at tight tolerances), SQUAREM in
    fewer EM steps; where the grid is refined (after the plain pilot steps), SQUAREM runs on the
    refined grid only (the same grid in both fits). 300 items make the posteriors sharp enough to refine
    the grid; 150 models suffice for that (the cost is plain EM's ~400 steps over models x items)."""
    ds, _ = simulate_pl("3pl" if spec == "3pl" else "2pl", n_items=n_items, n_models=n_models, seed=5)
    tight = {"tol": 1e-8, "ll_tol": 1e-14, "se": False, "priors": priors, "max_iter": 3000}
    fast = fit_mml(ds, spec, **tight)
    plain = fit_mml(ds, spec, accelerate=False, **tight)
    assert fast.converged and plain.converged
    assert fast.attrs["accelerate"] == "SQUAREM" and plain.attrs["accelerate"] == "none"
    assert fast.attrs["grid"] == plain.attrs["grid"]
    refined = "refined after EM iteration 5" in fast.attrs["grid"]
    assert refined or n_items < 300
    assert fast.objective == pytest.approx(plain.objective, abs=1e-6)
    for name in ("discrimination", "intercept", "guessing"):
        np.testing.assert_allclose(fast.items[name], plain.items[name], atol=1e-4)
    assert fast.iterations < plain.iterations
    trace = fast.objective_trace
    assert trace.size == fast.iterations + 1
    switched = 5 if refined else 0  # the trace holds the objective on both grids
    assert (np.diff(trace[switched:]) >= -1e-9 * np.abs(trace[switched + 1:])).all()
