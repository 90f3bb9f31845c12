"""The compiled CAT and fixed-test scoring loops against a plain per-respondent reference."""

import numpy as np
import pytest
from scipy.special import expit, logsumexp

from bayesirt.models.information import item_bank
from bayesirt.safety.adaptive import ability_grid, run_cat, score_test
from bayesirt.safety.cat_kernels import fixed_test_eap


def _bank_and_responses(n_items=40, n_models=30, seed=0, missing=0.1, guessing=0.0):
    rng = np.random.default_rng(seed)
    a, d = rng.lognormal(0.3, 0.5, n_items), rng.normal(0, 1.5, n_items)
    theta = rng.normal(0, 1, n_models)
    p = guessing + (1 - guessing) * expit(a[:, None] * theta[None, :] + d[:, None])
    y = (rng.random(p.shape) < p).astype(np.int8)
    y[rng.random(p.shape) < missing] = -1
    return item_bank(a, d, guessing), y


def _eap_reference(log_post, nodes):
    w = np.exp(log_post - logsumexp(log_post))
    mean = float(w @ nodes)
    return mean, float(np.sqrt(w @ (nodes - mean) ** 2))


def _cat_reference(y, bank, budget, groups_path=None, min_sd=None, points=241):
    """The adaptive test one respondent at a time, in plain Python (the old NumPy code's steps)."""
    nodes, logw = ability_grid(points)
    lp, lq = bank.log_pq(nodes)
    n_items, n_models = y.shape
    items = np.full((n_models, budget), -1)
    theta, sd = np.empty((n_models, budget + 1)), np.empty((n_models, budget + 1))
    for m in range(n_models):
        log_post = logw.copy()
        theta[m, 0], sd[m, 0] = _eap_reference(log_post, nodes)
        open_ = y[:, m] >= 0
        stop = budget
        for t in range(budget):
            allowed = open_.copy()
            if groups_path is not None and (open_ & groups_path[t]).any():
                allowed = open_ & groups_path[t]
            if not allowed.any() or (min_sd is not None and t > 0 and sd[m, t] < min_sd):
                stop = t
                break
            a, d, c, s = bank
            p = c + (1 - c - s) * expit(a * theta[m, t] + d)
            info = a**2 * (1 - c - s) ** 2 * (expit(a * theta[m, t] + d) * expit(-(a * theta[m, t] + d))) ** 2 \
                / (p * (1 - p))
            j = int(np.argmax(np.where(allowed, info, -np.inf)))
            items[m, t], open_[j] = j, False
            log_post = log_post + (lp[j] if y[j, m] == 1 else lq[j])
            theta[m, t + 1], sd[m, t + 1] = _eap_reference(log_post, nodes)
        theta[m, stop + 1:], sd[m, stop + 1:] = theta[m, stop], sd[m, stop]
    return items, theta, sd


@pytest.mark.parametrize("guessing", [0.0, 0.2])
def test_fisher_cat_matches_the_reference_loop(guessing):
    bank, y = _bank_and_responses(guessing=guessing)
    out = run_cat(y, *bank[:2], guessing=bank.guessing, budget=25)
    items, theta, sd = _cat_reference(y, bank, 25)
    np.testing.assert_array_equal(out.items, items)
    np.testing.assert_allclose(out.theta, theta, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out.sd, sd, rtol=1e-11)
    np.testing.assert_array_equal(out.n_items, (items >= 0).sum(1))


def test_fisher_cat_quotas_and_stopping_match_the_reference_loop():
    bank, y = _bank_and_responses(n_items=30, n_models=25, seed=3, missing=0.3)
    groups = np.repeat(["A", "B", "C"], [5, 10, 15])
    out = run_cat(y, *bank[:2], budget=30, groups=groups, min_sd=0.45)
    from bayesirt.safety.adaptive import quota_counts  # noqa: F401 (the path below is run_cat's)
    from bayesirt.safety import adaptive

    path = np.array([groups == g for g in adaptive._quota_path(groups, 30)])
    items, theta, sd = _cat_reference(y, bank, 30, groups_path=path, min_sd=0.45)
    assert (out.n_items < 30).any()  # some respondents stopped early (min_sd or no items left)
    np.testing.assert_array_equal(out.items, items)
    np.testing.assert_allclose(out.theta, theta, rtol=0, atol=1e-12)


def test_fixed_test_eap_matches_the_reference():
    bank, y = _bank_and_responses(seed=4, missing=0.2)
    nodes, logw = ability_grid(241)
    lp, lq = bank.log_pq(nodes)
    tests = np.array([[3, 7, 1, -1, -1], [0, 1, 2, 3, 4], [39, 20, 10, 5, -1]])
    theta, sd = fixed_test_eap(y, tests, bank, nodes, logw)
    for r, test in enumerate(tests):
        for m in range(y.shape[1]):
            log_post = logw.copy()
            for j in test[test >= 0]:
                log_post += lp[j] if y[j, m] == 1 else lq[j] if y[j, m] == 0 else 0
            ref = _eap_reference(log_post, nodes)
            assert theta[r, m] == pytest.approx(ref[0], abs=1e-12) and sd[r, m] == pytest.approx(ref[1], rel=1e-11)
    one = score_test(y, *bank[:2], tests[1])
    np.testing.assert_array_equal(one.theta, theta[1])


def test_fixed_test_eap_with_guessing_adds_rows():
    bank, y = _bank_and_responses(seed=6, missing=0.0, guessing=0.2)
    nodes, logw = ability_grid(241)
    lp, lq = bank.log_pq(nodes)
    test = np.array([[5, 6, 7, 8]])
    theta = fixed_test_eap(y, test, bank, nodes, logw)[0][0]
    for m in range(y.shape[1]):
        log_post = logw + sum(lp[j] if y[j, m] == 1 else lq[j] for j in test[0])
        assert theta[m] == pytest.approx(_eap_reference(log_post, nodes)[0], abs=1e-12)


def test_score_calibration_is_the_scikit_learn_pipeline():
    """The written-out spline + ridge equals SplineTransformer + Ridge (the study's former pipeline),
    inside and beyond the calibration range."""
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import SplineTransformer

    from bayesirt.safety.cat_study import score_calibration

    rng = np.random.default_rng(2)
    for _ in range(5):
        s, t = rng.integers(0, 26, 500) / 25, rng.normal(0, 1.3, 500)
        y = np.clip(0.2 + 0.5 * s + 0.05 * t + rng.normal(0, 0.05, 500), 0, 1)
        old = make_pipeline(SplineTransformer(n_knots=5, degree=3, extrapolation="linear"), Ridge(alpha=1e-3))
        old.fit(np.c_[s, t], y)
        s2, t2 = rng.uniform(-0.3, 1.3, 300), rng.normal(0, 2.5, 300)
        assert ((s2 < 0) | (s2 > 1)).any() and (np.abs(t2) > np.abs(t).max()).any()  # extrapolates
        np.testing.assert_allclose(score_calibration(s, t, y)(s2, t2), np.clip(old.predict(np.c_[s2, t2]), 0, 1),
                                   rtol=0, atol=1e-12)
