"""Vectorized PSIS / PSIS-LOO against ArviZ (arviz_stats), the oracle, plus invariants.

The log-likelihood matrices mix normal-model columns with an increasingly surprising observation,
2PL Bernoulli columns, Student-t posterior columns and a few Cauchy columns whose tail ArviZ
cannot fit (k = NaN), so Pareto k spans roughly -0.2 to 5.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr
from arviz_stats import loo
from arviz_stats.base import array_stats
from scipy import stats
from scipy.special import log_expit, logsumexp

from bayesirt.comparison import psis
from bayesirt.errors import BayesIRTError
from bayesirt.comparison.psis import PsisLoo, psis_log_weights, psis_loo

TOL = 1e-8


def _log_lik(seed: int, n_samples: int, n_obs: int = 40) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = (n_obs - 4) // 3
    normal = stats.norm.logpdf(np.linspace(0, 4, q), rng.normal(0, 0.4, (n_samples, q)), 1.0)
    theta = rng.normal(0, 0.8, (n_samples, q))
    bernoulli = log_expit(-np.linspace(0.5, 3, q) * (theta + 1.5))
    r = n_obs - 4 - 2 * q
    heavy = stats.norm.logpdf(np.linspace(0, 2.5, r), 0.3 * rng.standard_t(4, (n_samples, r)), 0.6)
    wild = stats.norm.logpdf(3.0, rng.standard_cauchy((n_samples, 4)), 0.5)
    return np.concatenate([normal, bernoulli, heavy, wild], axis=1)


def _arviz_psislw(log_lik: np.ndarray, r_eff: float) -> tuple[np.ndarray, np.ndarray]:
    """arviz_stats's per-observation PSIS (it takes the log-likelihood and negates it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        log_weights, k = array_stats.psislw(log_lik.T, r_eff=r_eff, axis=-1)
    return log_weights.T, k


@pytest.mark.parametrize(("n_samples", "r_eff"), [(100, 1.0), (200, 0.7), (400, 1.0), (400, 0.7),
                                                  (1000, 0.7), (4000, 1.0)])
def test_weights_and_k_match_arviz(n_samples, r_eff):
    log_lik = _log_lik(n_samples, n_samples)
    log_weights, k = psis_log_weights(-log_lik, r_eff=r_eff)
    ref_weights, ref_k = _arviz_psislw(log_lik, r_eff)
    assert np.nanmin(k) < 0.5 and np.nanmax(k) > 1.0  # both regimes are exercised
    np.testing.assert_array_equal(np.isnan(k), np.isnan(ref_k))
    np.testing.assert_allclose(k, ref_k, rtol=0, atol=TOL, equal_nan=True)
    np.testing.assert_allclose(log_weights, ref_weights, rtol=0, atol=TOL)


@pytest.mark.parametrize("r_eff", [1.0, 0.7])
def test_loo_matches_arviz_loo(r_eff):
    log_lik = _log_lik(3, 1000, n_obs=24)
    tree = xr.DataTree.from_dict({
        "posterior": xr.Dataset({"mu": (("chain", "draw"), np.zeros((1, 1000)))}),
        "log_likelihood": xr.Dataset({"y": (("chain", "draw", "obs"), log_lik[None])}),
    })
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # ArviZ's high-k warning
        ref = loo(tree, pointwise=True, reff=r_eff)
    res = psis_loo(log_lik, r_eff=r_eff)
    assert isinstance(res, PsisLoo)
    assert res.good_k == ref.good_k == pytest.approx(1 - 1 / 3)
    np.testing.assert_allclose(res.pareto_k, ref.pareto_k.values, rtol=0, atol=TOL, equal_nan=True)
    np.testing.assert_allclose(res.elpd_i, ref.elpd_i.values, rtol=0, atol=TOL)
    np.testing.assert_allclose(res.p_loo_i.sum(), ref.p, rtol=0, atol=TOL)


def test_loo_is_consistent_with_weights():
    log_lik = _log_lik(4, 400)
    res = psis_loo(log_lik, r_eff=0.8)
    log_weights, k = psis_log_weights(-log_lik, r_eff=0.8)
    np.testing.assert_array_equal(res.pareto_k, k)
    np.testing.assert_allclose(res.elpd_i, logsumexp(log_weights + log_lik, axis=0), rtol=0, atol=1e-12)
    lpd = logsumexp(log_lik, axis=0) - np.log(400)
    np.testing.assert_allclose(res.p_loo_i, lpd - res.elpd_i, rtol=0, atol=1e-12)
    assert res.good_k == pytest.approx(1 - 1 / np.log10(400))  # below the 0.7 cap


def test_weights_sum_to_one_and_ignore_a_constant_shift():
    log_ratios = -_log_lik(5, 1000)
    log_weights, k = psis_log_weights(log_ratios)
    np.testing.assert_allclose(np.exp(log_weights).sum(axis=0), 1.0, rtol=0, atol=1e-12)
    shifted, k_shifted = psis_log_weights(log_ratios + np.linspace(-50, 50, log_ratios.shape[1]))
    np.testing.assert_allclose(shifted, log_weights, rtol=1e-13, atol=1e-9)
    np.testing.assert_allclose(k_shifted, k, rtol=0, atol=1e-9, equal_nan=True)


def test_chunking_and_float32_input_do_not_change_results(monkeypatch):
    log_lik = _log_lik(6, 400).astype(np.float32)
    whole = psis_loo(log_lik.astype(np.float64))
    monkeypatch.setattr(psis, "_CHUNK_ELEMENTS", 3 * 400)  # 3 observations per chunk
    chunked = psis_loo(log_lik)
    np.testing.assert_array_equal(chunked.elpd_i, whole.elpd_i)
    np.testing.assert_array_equal(chunked.pareto_k, whole.pareto_k)


def test_constant_column_gives_its_value_where_arviz_raises():
    log_lik = _log_lik(7, 400, n_obs=10)
    log_lik[:, 2] = -0.75
    res = psis_loo(log_lik)
    assert res.elpd_i[2] == pytest.approx(-0.75, abs=1e-14)
    assert res.p_loo_i[2] == pytest.approx(0.0, abs=1e-14)
    assert np.isnan(res.pareto_k[2])
    log_weights, _ = psis_log_weights(-log_lik)
    np.testing.assert_allclose(log_weights[:, 2], -np.log(400), rtol=0, atol=1e-14)
    with pytest.raises(ValueError, match="All tail values are the same"):
        _arviz_psislw(log_lik[:, 2:3], 1.0)


@pytest.mark.parametrize(("ary", "r_eff", "message"), [
    (np.zeros(100), 1.0, r"log_lik must be 2-D \(sample, observation\); got 1 dimension"),
    (np.zeros((24, 3)), 1.0, r"at least 5 tail draws, but 24 samples with r_eff=1.0 give 4"),
    (np.zeros((100, 3)), 0.0, r"The 'r_eff' parameter of psis_\w+ must be a number > 0; got 0.0"),
    (np.zeros((100, 3)), np.nan, r"The 'r_eff' parameter of psis_\w+ must be a number > 0; got nan"),
    (np.where(np.arange(300).reshape(100, 3) == 151, -np.inf, 0.0), 1.0,
     r"log_lik has non-finite values \(first in observation 1\)"),
])
def test_bad_input_messages(ary, r_eff, message):
    with pytest.raises(BayesIRTError, match=message):
        psis_loo(ary, r_eff=r_eff)
    with pytest.raises(BayesIRTError, match=message.replace("log_lik", "log_ratios")):
        psis_log_weights(ary, r_eff=r_eff)
