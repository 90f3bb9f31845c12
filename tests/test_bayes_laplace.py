"""The per-item Laplace approximation of the residual-DIF posterior (``bayes_method="laplace"``, the
default of ``--bayes``): its mode is the converged ridge estimate, its covariance the inverse of the
log posterior's Hessian (checked by finite differences), and its spread matches NUTS on the same
model."""

import numpy as np
import pytest
from scipy.linalg import null_space
from scipy.special import log1p

from bayesirt.audit import AuditConfig, run_audit
from bayesirt.audit.bayes.laplace import laplace_draws
from bayesirt.audit.bayes.posterior import fit_family_dif_posterior, stacked_draws
from bayesirt.audit.engine.dif import fit_family_dif
from bayesirt.errors import ConfigError, DataError


def _data(n_items=30, sizes=(20, 50, 90), seed=0):
    """Unequal family sizes (so b and delta are correlated a posteriori), a rank-2 offset, 5% missing."""
    rng = np.random.default_rng(seed)
    family = np.repeat(np.arange(len(sizes)), sizes)
    offsets = rng.normal(0, 0.5, (n_items, 2)) @ rng.normal(0, 1, (2, family.size))
    raw = rng.normal(0, 0.8, (n_items, len(sizes)))
    delta = raw - raw.mean(axis=1, keepdims=True)
    eta = rng.normal(0, 1, n_items)[:, None] + offsets + delta[:, family]
    y = (rng.random(eta.shape) < 1 / (1 + np.exp(-eta))).astype(np.int8)
    observed = rng.random(eta.shape) > 0.05
    return y, observed, offsets, family


def _log_posterior(theta, y, observed, offsets, family, q):
    """Item 0's log posterior in (b, z) coordinates, flat b, z ~ N(0, I): written out directly."""
    b, delta = theta[0], q @ theta[1:]
    eta = b + offsets[0] + delta[family]
    loglik = np.where(observed[0], y[0] * eta - (np.maximum(eta, 0) + log1p(np.exp(-np.abs(eta)))), 0).sum()
    return loglik - 0.5 * theta[1:] @ theta[1:]


@pytest.mark.slow
def test_mode_is_the_converged_ridge_estimate_and_covariance_the_inverse_hessian():
    y, observed, offsets, family = _data()
    delta, b, info = laplace_draws(y, observed, offsets, family, 3, draws=20_000, seed=1)
    assert info["newton_steps"] < 15 and info["last_step"] < 1e-10
    ref = fit_family_dif(y, observed, offsets, family, 3, cycles=2000, tolerance=1e-13)
    # the draws are centred on the mode (Gaussian): their mean is the mode up to Monte Carlo error
    np.testing.assert_allclose(delta.mean(axis=0), ref.family_effect, atol=0.02)
    np.testing.assert_allclose(info["mode_dif_range"], ref.dif_range, atol=1e-6)
    # covariance of item 0 in (b, z) coordinates against a finite-difference Hessian
    q = null_space(np.ones((1, 3)))
    mode = np.r_[ref.easiness[0], q.T @ ref.family_effect[0]]
    h, eps = np.zeros((3, 3)), 1e-4
    for i in range(3):
        for j in range(3):
            e_i, e_j = np.eye(3)[i] * eps, np.eye(3)[j] * eps
            f = lambda t: _log_posterior(t, y, observed, offsets, family, q)  # noqa: E731
            h[i, j] = -(f(mode + e_i + e_j) - f(mode + e_i - e_j) - f(mode - e_i + e_j) + f(mode - e_i - e_j)) / (4 * eps**2)
    one_delta, one_b, _ = laplace_draws(y[:1], observed[:1], offsets[:1], family, 3, draws=400_000, seed=2)
    sample = np.column_stack([one_b[:, 0], one_delta[:, 0] @ q])  # items are independent: item 0 alone
    np.testing.assert_allclose(np.cov(sample, rowvar=False), np.linalg.inv(h), rtol=0.02, atol=2e-3)
    assert np.abs(np.corrcoef(sample, rowvar=False)[0, 1:]).max() > 0.3  # b and delta correlated: full rank per item


@pytest.mark.slow
def test_spread_matches_nuts():
    y, observed, offsets, family = _data(n_items=12, seed=3)
    delta, b, _ = laplace_draws(y, observed, offsets, family, 3, draws=4000, seed=0)
    tree = fit_family_dif_posterior(y, observed, offsets, family, 3, method="nuts", draws=500, tune=500, chains=2,
                                    cores=1, seed=0)
    nuts_delta, nuts_b = stacked_draws(tree)
    ratio = delta.std(axis=0) / nuts_delta.std(axis=0)
    assert 0.85 < np.median(ratio) < 1.15 and np.all((ratio > 0.6) & (ratio < 1.6))
    assert np.abs(delta.mean(axis=0) - nuts_delta.mean(axis=0)).max() < 0.5 * nuts_delta.std(axis=0).max()
    assert 0.85 < np.median(b.std(axis=0) / nuts_b.std(axis=0)) < 1.15


def test_errors_are_named():
    y, observed, offsets, family = _data(n_items=4)
    y[0] = 1
    with pytest.raises(DataError, match="all correct or all wrong"):
        laplace_draws(y, observed, offsets, family, 3)
    delta, _, _ = laplace_draws(y, observed, offsets, family, 3, draws=5, easiness_sd=2.0)
    assert np.isfinite(delta).all()
    with pytest.raises(ConfigError, match="draws"):
        laplace_draws(y, observed, offsets, family, 3, draws=0, easiness_sd=2.0)
    with pytest.raises(ConfigError, match="learns the family-effect scale"):
        AuditConfig(bayes=True, bayes_prior="hierarchical")  # the Laplace default has the fixed ridge scale
    with pytest.raises(ConfigError, match="adjustment='spectral'"):
        AuditConfig(bayes=True, bayes_method="bootstrap", adjustment="direct-mirt")


def test_newton_step_caps_are_counted_and_warned_about(monkeypatch):
    """A mode search stopped at its step cap is flagged (laplace_draws' info, fit_family_dif's
    newton_capped), and the audit warns and counts the affected draws (issue 29 item 5)."""
    import bayesirt.audit.bayes.laplace as laplace
    from bayesirt.data import simulate_dif_benchmark

    y, observed, offsets, family = _data()
    assert fit_family_dif(y, observed, offsets, family, 3).newton_capped == 0
    assert fit_family_dif(y, observed, offsets, family, 3, newton_iterations=1).newton_capped > 0
    _, _, info = laplace_draws(y, observed, offsets, family, 3, draws=5)
    assert not info["newton_capped"]
    monkeypatch.setattr(laplace, "MAX_NEWTON", 1)
    _, _, info = laplace_draws(y, observed, offsets, family, 3, draws=5)
    assert info["newton_capped"] and info["newton_steps"] == 1
    ds, _ = simulate_dif_benchmark(n_owners=60, n_items=120, seed=2)
    result = run_audit(ds, AuditConfig(quick=True, controls=9, composition_bootstrap=0, owner_bootstrap=0, bayes=True, bayes_draws=8,
                                       bayes_controls=3, bayes_ability_spec=None), progress=False)
    assert result.summary["bayes"]["newton_capped_draws"] == [8, 8]
    assert result.bayes.attrs["newton_capped_draws"] == 16
    assert any("step cap" in w for w in result.warnings)
