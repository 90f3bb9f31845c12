"""The shared-grid marginal likelihood (one ability dimension) against brute-force integration and
against adaptive Gauss-Hermite (the slow path it replaces)."""

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from bayesirt.comparison import grid
from bayesirt.comparison.grid import Patterns, grid_log_marginal
from bayesirt.comparison.grid_kernel import grid_log_q_sums, grid_log_terms
from bayesirt.comparison.marginal import ItemDraws, pattern_log_marginal, quadrature_rule
from bayesirt.models.response import log_probabilities


def _brute(y, observed, draw, half_width=8.0, n=40_001):
    """Riemann sum of prod_i p(y_i | theta) N(theta; mean, sd) on a very fine regular grid."""
    x = float(draw.mean[0]) + np.sqrt(draw.covariance[0, 0]) * np.linspace(-half_width, half_width, n)
    log_p, log_q = log_probabilities(np.outer(x, draw.loading[:, 0]) + draw.intercept, draw.guessing, draw.slip)
    loglik = log_p @ np.where(observed, y, 0).T + log_q @ np.where(observed, 1 - y, 0).T
    log_prior = stats.norm.logpdf(x, float(draw.mean[0]), np.sqrt(draw.covariance[0, 0]))
    return logsumexp(loglik + log_prior[:, None], axis=0) + np.log(x[1] - x[0])


def _design(n_items, guessing, slip, seed, *, missing=0.1, n_models=30, mean=0.0, sd=1.0, spread=1.0):
    rng = np.random.default_rng(seed)
    a = np.abs(rng.normal(1.2, 0.5, (n_items, 1)))
    d = rng.normal(size=n_items)
    c = np.full(n_items, guessing) if guessing else 0.0
    s = np.full(n_items, slip) if slip else 0.0
    draw = ItemDraws(a, d, c, s, np.array([mean]), np.array([[sd**2]]))
    theta = mean + spread * sd * rng.normal(size=n_models)
    p = guessing + (1 - guessing - slip) / (1 + np.exp(-(np.outer(theta, a[:, 0]) + d)))
    y = (rng.uniform(size=p.shape) < p).astype(float)
    observed = rng.uniform(size=y.shape) >= missing
    return y, observed, draw


@pytest.mark.parametrize(("n_items", "guessing", "slip", "missing", "tol"), [
    (400, 0.0, 0.0, 0.0, 1e-8),     # 2PL, long complete patterns: narrow peaks, matrix-vector path
    (400, 0.0, 0.0, 0.2, 1e-8),     # 2PL with missing responses: the observed-mask product
    (60, 0.25, 0.0, 0.1, 1e-8),     # 3PL: skewed integrand with a floor
    (300, 0.2, 0.1, 0.0, 1e-8),     # 4PL
    (8, 0.0, 0.0, 0.0, 1e-8),       # short patterns: wide peaks, close to the population
])
@pytest.mark.slow
def test_grid_matches_brute_force(n_items, guessing, slip, missing, tol):
    y, observed, draw = _design(n_items, guessing, slip, seed=n_items, missing=missing)
    values, unresolved = grid_log_marginal(Patterns.of(y, observed), draw)
    assert not unresolved.any()
    np.testing.assert_allclose(values, _brute(y, observed, draw), rtol=0, atol=tol)


def test_grid_agrees_with_adaptive_gauss_hermite_off_the_standard_population():
    y, observed, draw = _design(200, 0.0, 0.0, seed=4, mean=0.7, sd=1.6, spread=1.5)
    values, unresolved = grid_log_marginal(Patterns.of(y, observed), draw)
    assert not unresolved.any()
    np.testing.assert_allclose(values, pattern_log_marginal(y, observed, draw, quadrature_rule(1)), rtol=0, atol=1e-7)
    np.testing.assert_allclose(values, _brute(y, observed, draw), rtol=0, atol=1e-8)


def test_an_unobserved_pattern_integrates_the_population_to_one():
    y, observed, draw = _design(20, 0.0, 0.0, seed=6)
    observed[0] = False
    values, unresolved = grid_log_marginal(Patterns.of(y, observed), draw)
    assert not unresolved[0] and values[0] == pytest.approx(0.0, abs=1e-10)


def test_models_the_bounded_grid_cannot_resolve_are_returned_unresolved(monkeypatch):
    """With the grid capped at a few points, narrow peaks fail the spacing check and are left, as
    NaN, for adaptive Gauss-Hermite; the resolved ones stay exact."""
    y, observed, draw = _design(400, 0.0, 0.0, seed=8, n_models=10)
    y[0] = 0.0  # an extreme pattern far from the others widens the grid
    monkeypatch.setattr(grid, "GRID_MAX_POINTS", 60)
    values, unresolved = grid_log_marginal(Patterns.of(y, observed), draw)
    assert unresolved.any() and np.isnan(values[unresolved]).all()
    if (~unresolved).any():
        np.testing.assert_allclose(values[~unresolved], _brute(y, observed, draw)[~unresolved], rtol=0, atol=1e-8)


def test_bands_cover_every_model_once_and_each_models_columns():
    first = np.array([0, 5, 40, 42, 100, 3])
    last = np.array([20, 25, 60, 70, 130, 22])
    order = np.argsort((first + last) / 2)
    bands = grid._bands(first, last, order)
    covered = np.concatenate([rows for rows, _ in bands])
    assert sorted(covered.tolist()) == list(range(6))
    for rows, cols in bands:
        assert (first[rows] >= cols.start).all() and (last[rows] < cols.stop).all()
        assert cols.stop - cols.start - 1 <= int((last - first).max()) + grid._BAND_SLACK


def test_compiled_grid_terms_are_log_probabilities():
    # comparison.grid_kernel is models.response.log_probabilities at outer(theta, a) + d, compiled: the same
    # values, in the bulk and in both tails (eta of +/- 60, items with zero guessing or slip)
    rng = np.random.default_rng(4)
    theta = np.concatenate([np.linspace(-6, 6, 101), [-40.0, 40.0]])
    a, d = rng.lognormal(0, 0.6, 40), rng.normal(0, 1.5, 40)
    c = np.where(np.arange(40) % 3 == 0, 0.0, rng.beta(2, 18, 40))
    s = np.where(np.arange(40) % 4 == 0, rng.beta(1, 30, 40), 0.0)
    eta = np.outer(theta, a) + d
    log_p, log_q = log_probabilities(eta, c, s)
    ratio, q = grid_log_terms(theta, a, d, c, s, True)
    np.testing.assert_allclose(q, log_q, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(ratio, log_p - log_q, rtol=1e-12, atol=1e-13)
    assert np.isfinite(ratio).all() and (np.abs(eta) > 40).any()
    log_p, log_q = log_probabilities(eta)
    empty, q = grid_log_terms(theta, a, d, np.zeros(40), np.zeros(40), False)
    assert empty.shape == (0, 0)
    np.testing.assert_allclose(q, log_q, rtol=1e-12, atol=1e-13)


def test_compiled_log_q_sums_are_the_sums_of_log_q():
    # the complete 1PL/2PL's per-point sums over items (one log per point, products renormalized every 512 items)
    # equal the per-cell terms summed, to the relative error of the vectorized exp; 1,300 items cross two
    # renormalizations, and eta reaches +/- 700 (an exploding ability) without overflow
    rng = np.random.default_rng(5)
    theta = np.concatenate([np.linspace(-6, 6, 37), [-300.0, 300.0]])
    a, d = rng.lognormal(0, 0.6, 1300), rng.normal(0, 1.5, 1300)
    log_q = log_probabilities(np.outer(theta, a) + d)[1]
    sums = grid_log_q_sums(theta, a, d)
    np.testing.assert_allclose(sums, log_q.sum(axis=1), rtol=1e-13)
    assert np.abs(np.outer(theta, a) + d).max() > 700
    # as many items as one renormalization block, and one item
    for n in (512, 1):
        np.testing.assert_allclose(grid_log_q_sums(theta, a[:n], d[:n]), log_q[:, :n].sum(axis=1), rtol=1e-13)
