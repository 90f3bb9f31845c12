"""Marginal likelihood of response patterns (abilities integrated out) against brute-force integration."""

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from bayesirt.errors import BayesIRTError
from bayesirt.comparison.marginal import ItemDraws, pattern_log_marginal, quadrature_rule


def _brute(y, observed, draw, half_width=7.0, n=None):
    """Riemann sum of prod_i p(y_i | theta) N(theta; mean, cov) on a fine regular grid."""
    dims = draw.loading.shape[1]
    n = n or {1: 4001, 2: 401}[dims]
    x = np.linspace(-half_width, half_width, n)
    pts = np.stack([g.ravel() for g in np.meshgrid(*([x] * dims), indexing="ij")], axis=1)
    eta = pts @ draw.loading.T + draw.intercept
    p = draw.guessing + (1 - draw.guessing - draw.slip) / (1 + np.exp(-eta))
    loglik = np.log(p) @ np.where(observed, y, 0).T + np.log1p(-p) @ np.where(observed, 1 - y, 0).T
    log_prior = stats.multivariate_normal(draw.mean, draw.covariance).logpdf(pts)
    return logsumexp(loglik + log_prior[:, None], axis=0) + dims * np.log(x[1] - x[0])


def _design(dims, n_items, guessing, seed, cov=None, n_models=25):
    rng = np.random.default_rng(seed)
    a = np.abs(rng.normal(1.0, 0.4, (n_items, dims)))
    d = rng.normal(size=n_items)
    cov = np.eye(dims) if cov is None else cov
    c = np.full(n_items, guessing) if guessing else 0.0
    draw = ItemDraws(a, d, c, 0.0, np.zeros(dims), cov)
    theta = rng.normal(size=(n_models, dims)) @ np.linalg.cholesky(cov).T
    p = guessing + (1 - guessing) / (1 + np.exp(-(theta @ a.T + d)))
    y = (rng.uniform(size=p.shape) < p).astype(float)
    observed = rng.uniform(size=y.shape) > 0.1
    return y, observed, draw


@pytest.mark.parametrize(("dims", "n_items", "guessing", "cov", "tol"), [
    (1, 200, 0.0, None, 1e-9),          # a long pattern: the ability posterior is narrow
    (1, 60, 0.2, None, 1e-6),           # 3PL: skewed integrand with a floor
    (2, 120, 0.0, np.array([[1.0, 0.4], [0.4, 1.0]]), 1e-5),
])
@pytest.mark.slow
def test_adaptive_gauss_hermite_matches_brute_force(dims, n_items, guessing, cov, tol):
    y, observed, draw = _design(dims, n_items, guessing, seed=dims, cov=cov)
    got = pattern_log_marginal(y, observed, draw, quadrature_rule(dims))
    np.testing.assert_allclose(got, _brute(y, observed, draw), atol=tol, rtol=0)


def test_importance_sampling_agrees_with_quadrature_within_monte_carlo_error():
    y, observed, draw = _design(3, 40, 0.0, seed=3)
    exact = pattern_log_marginal(y, observed, draw, quadrature_rule(3, nodes=11))
    sampled = pattern_log_marginal(y, observed, draw, quadrature_rule(3, samples=4000, seed=1))
    assert np.abs(sampled - exact).max() < 0.02
    assert quadrature_rule(4)[0].shape == (2000, 4)  # D >= 4 defaults to importance sampling


def test_model_blocks_do_not_change_the_result():
    y, observed, draw = _design(2, 30, 0.0, seed=5)
    rule = quadrature_rule(2)
    whole = pattern_log_marginal(y, observed, draw, rule)
    blocked = pattern_log_marginal(y, observed, draw, rule, chunk_elements=30 * rule[0].shape[0] * 3)
    np.testing.assert_allclose(whole, blocked, rtol=1e-13)


def test_an_unobserved_pattern_has_marginal_likelihood_one():
    y, observed, draw = _design(1, 10, 0.0, seed=6)
    observed[0] = False
    assert pattern_log_marginal(y, observed, draw, quadrature_rule(1))[0] == pytest.approx(0.0, abs=1e-12)


def test_gauss_hermite_weights_integrate_the_standard_normal():
    z, log_w, log_g = quadrature_rule(2, nodes=7)
    assert np.exp(log_w).sum() == pytest.approx(1.0)
    assert np.exp(log_w) @ (z[:, 0] ** 2) == pytest.approx(1.0)
    np.testing.assert_allclose(log_g, stats.norm.logpdf(z).sum(axis=1))


def test_a_singular_ability_covariance_is_refused():
    y, observed, draw = _design(2, 10, 0.0, seed=7)
    bad = ItemDraws(draw.loading, draw.intercept, 0.0, 0.0, np.zeros(2), np.ones((2, 2)))
    with pytest.raises(BayesIRTError, match="not positive definite"):
        pattern_log_marginal(y, observed, bad, quadrature_rule(2))
