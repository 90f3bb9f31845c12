"""The 1PL-4PL response function (bayesirt.models.response): hand-computed values, finite differences of
the probability, information as p'^2 / (p (1 - p)), log-probabilities in the far tails against 50-digit
decimal arithmetic, and the numba compilation of the information formula against the NumPy form."""

from decimal import Decimal, localcontext

import numba
import numpy as np
import pytest

from bayesirt.models import information, kernels, response
from bayesirt.utils.numba_cache import sources_digest

KINDS = {  # a, d, c, s per item
    "1pl": (1.0, [-1.0, 0.3, 2.0], 0.0, 0.0),
    "2pl": ([0.4, 1.3, 2.5], [0.5, -1.0, 1.5], 0.0, 0.0),
    "3pl": ([0.8, 1.7, 2.2], [0.0, -0.7, 1.1], [0.2, 0.1, 0.25], 0.0),
    "4pl": ([0.9, 1.5, 2.4], [0.4, -1.2, 0.8], [0.15, 0.05, 0.2], [0.1, 0.2, 0.05]),
}
THETA = np.array([-3.0, -1.2, 0.0, 0.4, 2.7])


def _items(kind):
    """Each parameter as an (item, 1) column, to broadcast against abilities (1, theta)."""
    return [np.broadcast_to(np.asarray(v, float), (3,))[:, None] for v in KINDS[kind]]


def test_hand_computed_values_at_sigmoid_three_quarters():
    # eta = log 3: sigmoid = 3/4, sigmoid(-eta) = 1/4; c = 0.2, s = 0.1, so 1 - c - s = 0.7 and a = 2
    eta, a, c, s = np.log(3.0), 2.0, 0.2, 0.1
    p, q, sg, sm = response.curves(eta, c, s)
    assert (sg, sm) == pytest.approx((0.75, 0.25), rel=1e-15)
    assert response.probability(eta, c, s) == pytest.approx(0.725, rel=1e-15)  # 0.2 + 0.7 * 0.75
    assert (p, q) == pytest.approx((0.725, 0.275), rel=1e-15)
    dp = response.derivative(sg, sm, a, c, s)
    assert dp == pytest.approx(0.2625, rel=1e-15)  # 0.7 * 2 * 0.75 * 0.25
    assert response.second_derivative(dp, sg, sm, a) == pytest.approx(-0.2625, rel=1e-15)  # 0.2625 * 2 * (-0.5)
    assert response.information(eta, a, c, s) == pytest.approx(0.06890625 / 0.199375, rel=1e-14)  # dp^2 / (p q)
    log_p, log_q = response.log_probabilities(eta, c, s)
    assert (log_p, log_q) == pytest.approx((np.log(0.725), np.log(0.275)), rel=1e-15)
    assert response.log_likelihood(np.array([True, False]), np.array([eta, eta]), c, s) == pytest.approx(
        [np.log(0.725), np.log(0.275)], rel=1e-15)
    # the 2PL at eta = 0: P = 1/2, information a^2 / 4
    assert response.information(0.0, 1.5) == pytest.approx(1.5**2 / 4, rel=1e-15)


@pytest.mark.parametrize("kind", KINDS)
def test_derivatives_match_finite_differences(kind):
    a, d, c, s = _items(kind)
    h = 1e-4
    prob = lambda t: response.probability(a * t + d, c, s)  # noqa: E731
    p, q, sg, sm = response.curves(a * THETA + d, c, s)
    dp = response.derivative(sg, sm, a, c, s)
    np.testing.assert_allclose(dp, (prob(THETA + h) - prob(THETA - h)) / (2 * h), rtol=1e-7, atol=1e-11)
    np.testing.assert_allclose(response.second_derivative(dp, sg, sm, a),
                               (prob(THETA + h) - 2 * prob(THETA) + prob(THETA - h)) / h**2, rtol=1e-5, atol=1e-7)
    # information = p'^2 / (p (1 - p)), with p' from finite differences
    numeric = ((prob(THETA + h) - prob(THETA - h)) / (2 * h)) ** 2 / (prob(THETA) * (1 - prob(THETA)))
    np.testing.assert_allclose(response.information(a * THETA + d, a, c, s), numeric, rtol=1e-7)
    np.testing.assert_allclose(p + q, 1.0, rtol=1e-15)


@pytest.mark.parametrize("kind", KINDS)
def test_log_probabilities_and_likelihood_are_the_logs_of_the_curves(kind):
    a, d, c, s = _items(kind)
    eta = a * THETA + d
    log_p, log_q = response.log_probabilities(eta, c, s)
    p = response.probability(eta, c, s)
    np.testing.assert_allclose(log_p, np.log(p), rtol=1e-12)  # log(p) near p = 1 is the less exact side
    np.testing.assert_allclose(log_q, np.log1p(-p), rtol=1e-12)
    y = (np.arange(eta.size).reshape(eta.shape) % 2).astype(bool)
    np.testing.assert_array_equal(response.log_likelihood(y, eta, c, s), np.where(y, log_p, log_q))


def _exact_logs(eta: float, c: float, s: float) -> tuple[float, float]:
    """log P and log(1 - P) in 50-digit decimal arithmetic."""
    with localcontext() as ctx:
        ctx.prec = 50
        e, c_, s_ = Decimal(eta), Decimal(c), Decimal(s)
        sig = 1 / (1 + (-e).exp())
        sig_minus = 1 / (1 + e.exp())
        k = 1 - c_ - s_
        return float((c_ + k * sig).ln()), float((s_ + k * sig_minus).ln())


@pytest.mark.parametrize("c, s", [(0.0, 0.0), (0.2, 0.0), (0.0, 0.1), (0.2, 0.1)])
def test_log_probabilities_are_accurate_far_in_the_tails(c, s):
    eta = np.array([-1000.0, -800.0, -745.5, -700.0, -40.0, -3.0, 0.0, 3.0, 40.0, 700.0, 745.5, 800.0, 1000.0])
    log_p, log_q = response.log_probabilities(eta, c, s)
    exact = np.array([_exact_logs(float(e), c, s) for e in eta])
    assert response.log_probabilities(eta[0], c, s) == pytest.approx((log_p[0], log_q[0]), rel=1e-15)  # a scalar
    assert np.isfinite(log_p).all() and np.isfinite(log_q).all()
    assert (log_p <= 0).all() and (log_q <= 0).all()
    # absolute error in a log is relative error in P: near log 1 = 0 it is the rounding of P itself
    np.testing.assert_allclose(log_p, exact[:, 0], rtol=1e-14, atol=2e-16)
    np.testing.assert_allclose(log_q, exact[:, 1], rtol=1e-14, atol=2e-16)


def test_log_probabilities_with_asymptotes_on_some_items_only():
    # item 0 without guessing far below its difficulty, item 1 with guessing: only item 0's cell needs logaddexp
    eta = np.array([[-900.0, -900.0], [900.0, 900.0]])
    c, s = np.array([0.0, 0.2]), np.array([0.1, 0.0])
    log_p, log_q = response.log_probabilities(eta, c, s)
    np.testing.assert_allclose(log_p[0], [np.log(0.9) - 900.0, np.log(0.2)], rtol=1e-15)
    np.testing.assert_allclose(log_q[1], [np.log(0.1), np.log(0.8) - 900.0], rtol=1e-15)
    np.testing.assert_allclose(log_q[0], [np.log1p(-0.0), np.log(0.8)], atol=1e-300)


@pytest.mark.parametrize("kind", KINDS)
def test_extreme_eta_stays_finite_and_bounded(kind):
    a, d, c, s = _items(kind)
    eta = a * np.array([-5000.0, -40.0, 40.0, 5000.0]) + d
    p, q, sg, sm = response.curves(eta, c, s)
    assert (p >= response.TINY).all() and (q >= response.TINY).all()
    prob = response.probability(eta, c, s)
    assert (prob >= c).all() and (prob <= 1 - s).all()
    info = response.information(eta, a, c, s)
    assert np.isfinite(info).all() and (info >= 0).all()
    assert (info[:, [0, 3]] == 0).all()  # underflowed far in the tails, not NaN


@pytest.mark.parametrize("kind", KINDS)
def test_numba_information_agrees_with_numpy(kind):
    compiled = numba.njit(response.information_of_sigmoids)
    a, d, c, s = (np.broadcast_to(x, (3, THETA.size)) for x in _items(kind))
    eta = a * np.linspace(-30, 30, THETA.size) + d
    p, q, sg, sm = response.curves(eta, c, s)
    expected = response.information(eta, a, c, s)
    for idx in np.ndindex(eta.shape):
        got = compiled(sg[idx], sm[idx], a[idx], c[idx], s[idx])
        assert got == pytest.approx(expected[idx], rel=1e-12, abs=1e-300)


def test_the_information_sums_guard_covers_the_response_function():
    """The cached sums of bayesirt.models.information compile in the response function's formula, so its
    digest (utils.numba_cache) must change when response.py does."""
    assert information._SOURCES == sources_digest(information.__file__, kernels.__file__, response.__file__)


def test_response_probability_lays_out_items_by_models():
    theta = np.array([[-1.0, 0.0, 2.0], [0.5, 0.5, 0.5]])  # (draw, model)
    a, d = np.array([[1.0, 2.0], [0.5, 1.5]]), np.array([[0.0, -1.0], [1.0, 0.0]])  # (draw, item)
    c = np.array([[0.1, 0.2], [0.0, 0.3]])
    p = response.response_probability(theta, a, d, c)
    assert p.shape == (2, 2, 3)
    assert p[0, 1, 2] == pytest.approx(0.2 + 0.8 / (1 + np.exp(-(2.0 * 2.0 - 1.0))), rel=1e-15)
    # a scalar discrimination is a common slope
    np.testing.assert_allclose(response.response_probability(theta[0], 1.3, d[0]),
                               1 / (1 + np.exp(-(1.3 * theta[0][None, :] + d[0][:, None]))), rtol=1e-15)
