"""Factor structure of abilities measured with error (issue 20): the correction for attenuation
recovers the latent correlations that noisy estimates understate, the bootstrap over models gives
intervals that contain their own estimate and cover known loadings, and a negatively loading
benchmark keeps its sign."""

import numpy as np
import pandas as pd
import pytest

from bayesirt.errors import BayesIRTError
from bayesirt.structure.factor import factor_analysis
from bayesirt.structure.reliability import (bootstrap_factor_analysis, disattenuated_correlation,
                                            marginal_reliability)

LOADINGS = np.array([0.9, 0.8, 0.7, -0.6, 0.75])  # one factor; the fourth benchmark loads negatively
NAMES = ["arc", "gsm8k", "mmlu", "refusal", "winogrande"]


def _estimates(n_models: int, error_sd, seed: int):
    """Latent abilities with one-factor structure, observed as shrunken posterior means.

    theta_j = lambda_j f + e_j (unit variance); a benchmark measures theta_j with error sd s_j;
    under a N(0, 1) prior the posterior mean is rho_j (theta_j + noise), rho_j = 1 / (1 + s_j^2),
    and the posterior sd is sqrt(rho_j) s_j: what a per-benchmark 2PL's EAP and its sd look like.
    """
    rng = np.random.default_rng(seed)
    f = rng.standard_normal(n_models)
    theta = np.outer(f, LOADINGS) + rng.standard_normal((n_models, 5)) * np.sqrt(1 - LOADINGS ** 2)
    s = np.asarray(error_sd, dtype=float)
    rho = 1 / (1 + s ** 2)
    est = rho * (theta + rng.standard_normal(theta.shape) * s)
    sd = np.broadcast_to(np.sqrt(rho) * s, est.shape)
    return pd.DataFrame(est, columns=NAMES), pd.DataFrame(sd, columns=NAMES)


def test_disattenuation_recovers_the_latent_correlations():
    est, sd = _estimates(20_000, [0.6, 0.8, 0.5, 0.7, 1.0], seed=0)
    d = disattenuated_correlation(est, sd)
    truth = np.outer(LOADINGS, LOADINGS)
    np.fill_diagonal(truth, 1)
    off = ~np.eye(5, dtype=bool)
    assert np.abs(d.observed.to_numpy()[off] - truth[off]).max() > 0.15  # the estimates understate them
    np.testing.assert_allclose(d.corrected.to_numpy()[off], truth[off], atol=0.03)
    np.testing.assert_allclose(d.reliability, 1 / (1 + np.array([0.6, 0.8, 0.5, 0.7, 1.0]) ** 2), atol=0.02)
    assert not d.smoothed
    sol = factor_analysis(d.corrected, 1, correlation=True, n_obs=d.n_obs)
    signs = np.sign(sol.loadings[0, 0])
    np.testing.assert_allclose(signs * sol.loadings[:, 0], LOADINGS, atol=0.03)
    assert signs * sol.loadings[3, 0] < 0  # the negative benchmark's sign is recovered


@pytest.mark.slow
def test_bootstrap_intervals_cover_the_loadings_near_nominally():
    """Over 30 simulated cohorts of 300 models, the 90% intervals (100 replicates) of the five
    loadings cover the truth at about 90% (binomial sd 2.4 pp over 150 intervals) and contain their
    own estimate."""
    hits, own = [], []
    for seed in range(30):
        est, sd = _estimates(300, [0.6, 0.8, 0.5, 0.7, 1.0], seed=seed + 1)
        d = disattenuated_correlation(est, sd)
        target = factor_analysis(d.corrected, 1, correlation=True, n_obs=d.n_obs)
        sign = np.sign(target.loadings[0, 0])
        boot = bootstrap_factor_analysis(est, sd, target, replicates=100, ci=0.90, seed=seed, progress=False)
        lo, hi = sign * boot["loadings_lower"].values[:, 0], sign * boot["loadings_upper"].values[:, 0]
        lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
        hits.append((lo <= LOADINGS) & (LOADINGS <= hi))
        estimate = sign * target.loadings[:, 0]
        own.append((lo <= estimate) & (estimate <= hi))
        assert boot.attrs["failed_replicates"] == 0
    coverage = np.mean(hits)
    assert 0.83 <= coverage <= 0.97, coverage
    assert np.all(own)


def test_errors_are_named():
    est, sd = _estimates(50, [0.5] * 5, seed=3)
    with pytest.raises(BayesIRTError, match="same shape"):
        marginal_reliability(est, sd.iloc[:, :4])
    target = factor_analysis(disattenuated_correlation(est, sd).corrected, 1, correlation=True, n_obs=50)
    with pytest.raises(BayesIRTError, match="benchmarks"):
        bootstrap_factor_analysis(est.iloc[:, ::-1], sd, target, replicates=10)
    with pytest.raises(BayesIRTError, match="replicates"):
        bootstrap_factor_analysis(est, sd, target, replicates=1)


def test_pair_distinguishability_against_a_direct_count():
    from bayesirt.structure.ability_structure import pair_distinguishability

    est, sd = _estimates(60, [0.6, 0.8, 0.5, 0.7, 1.0], seed=9)
    est.iloc[3, 2] = np.nan  # a model missing on one benchmark leaves every pair it is in
    share = pair_distinguishability(est, sd, chunk=7)
    keep = est.notna().all(axis=1).to_numpy()
    e, s = est.to_numpy()[keep], sd.to_numpy()[keep]
    hits, either, pairs = np.zeros(5), 0, 0
    for a in range(len(e)):
        for b in range(a + 1, len(e)):
            sure = np.abs(e[a] - e[b]) > 1.959963984540054 * np.sqrt(s[a] ** 2 + s[b] ** 2)
            hits, either, pairs = hits + sure, either + sure.any(), pairs + 1
    np.testing.assert_allclose(share.to_numpy(), np.r_[hits, either] / pairs)
    assert share["any"] >= share.drop("any").max()
