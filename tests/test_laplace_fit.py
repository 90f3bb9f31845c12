"""``fit(..., method="laplace")``: the joint Gaussian at the joint posterior mode of the 2PL.

Oracle: on a tiny matrix with missing cells, the centre is the optimum (SciPy) over the items of
G = f(theta_hat(items), items) + 1/2 sum_m log h_m, the items' Laplace-marginal posterior written
out directly (each ability's conditional mode by its own Newton iterations, h_m its curvature),
with the abilities at those modes; the covariance of the draws is the inverse of the dense Hessian
of the negative log posterior f there, by PyTensor's automatic differentiation.
Calibration: with the truth drawn from the spec's priors, 90% intervals cover it at about 90%
(binomial error); the joint mode instead shrinks the abilities' scale (checked against the truth).
"""

import json

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from scipy.optimize import minimize

from bayesirt.data import make_responses, simulate_pl
from bayesirt.errors import ConfigError
from bayesirt.inference import fit
from bayesirt.inference.laplace_kernel import find_mode
from bayesirt.jobs.fit import run_fit_job
from bayesirt.models.specs import load_spec

PRIOR = np.array([1.0, 0.0, 0.5, 0.0, 2.0, 0.0])  # (sigma, mu) of theta, log a and d in models/2pl.toml


def _prior_truth(n_models, n_items, seed, missing=0.0):
    """Responses and truth with every parameter drawn from models/2pl.toml's priors."""
    rng = np.random.default_rng(seed)
    theta, a, d = rng.normal(0, 1, n_models), np.exp(rng.normal(0, 0.5, n_items)), rng.normal(0, 2, n_items)
    return simulate_pl("2pl", n_items=n_items, n_models=n_models, seed=seed + 1, theta=theta, discrimination=a,
                       intercept=d, missing=missing)


def _dense_hessian(y):
    """The negative log posterior f of (theta, log a, d) and its dense Hessian, by PyTensor."""
    n_items, n_models = y.shape
    x = pt.dvector("x")
    theta, alpha, d = x[:n_models], x[n_models:n_models + n_items], x[n_models + n_items:]
    eta = pt.exp(alpha)[:, None] * theta[None, :] + d[:, None]
    observed = (y >= 0).astype("float64")
    loglik = pt.sum(observed * (np.where(y > 0, 1.0, 0.0) * eta - pt.softplus(eta)))
    neg = -loglik + pt.sum(theta ** 2) / 2 + pt.sum(alpha ** 2) / (2 * 0.25) + pt.sum(d ** 2) / 8
    return (pytensor.function([x], neg), pytensor.function([x], pytensor.grad(neg, x)),
            pytensor.function([x], pytensor.gradient.hessian(neg, x)))


def _theta_hat(y, alpha, d):
    """Each ability's conditional mode given the items (Newton) and its curvature h_m."""
    observed, correct = y >= 0, np.where(y > 0, 1.0, 0.0)
    a, theta = np.exp(alpha), np.zeros(y.shape[1])
    for _ in range(60):
        p = 1 / (1 + np.exp(-(a[:, None] * theta[None, :] + d[:, None])))
        h = (observed * p * (1 - p) * a[:, None] ** 2).sum(axis=0) + 1.0
        theta -= (-(observed * a[:, None] * (correct - p)).sum(axis=0) + theta) / h
    return theta, h


def _marginal_oracle(y, start):
    """The minimum over the items of G (module notes), by BFGS; returns (theta, log a, d) stacked."""
    f, _, _ = _dense_hessian(y)
    n_items = y.shape[0]

    def g_value(items):
        theta, h = _theta_hat(y, items[:n_items], items[n_items:])
        return f(np.concatenate([theta, items])) + 0.5 * np.log(h).sum()

    res = minimize(g_value, start, method="BFGS", options={"gtol": 1e-8})
    return np.concatenate([_theta_hat(y, res.x[:n_items], res.x[n_items:])[0], res.x])


@pytest.mark.slow
def test_mode_and_covariance_match_a_dense_hessian_laplace():
    ds, _ = _prior_truth(12, 20, seed=3, missing=0.25)
    y = ds["responses"].values
    n_items, n_models = y.shape
    f, grad, hess = _dense_hessian(y)
    mode = find_mode(y, PRIOR)
    mode_ref = _marginal_oracle(y, np.concatenate([mode["alpha"], mode["d"]]) + 0.05)
    np.testing.assert_allclose(np.concatenate([mode["theta"], mode["alpha"], mode["d"]]), mode_ref, atol=2e-4)
    cov_ref = np.linalg.inv(hess(mode_ref))
    # not the joint mode of f, which volume=False finds
    joint_ref = minimize(f, mode_ref, jac=grad, hess=hess, method="trust-exact", options={"gtol": 1e-10}).x
    assert np.abs(joint_ref - mode_ref).max() > 0.05
    joint = find_mode(y, PRIOR, volume=False)
    np.testing.assert_allclose(np.concatenate([joint["theta"], joint["alpha"], joint["d"]]), joint_ref, atol=1e-5)
    # the abilities' marginal covariance is the inverse of the Schur complement
    precision = mode["factor"].T @ mode["factor"]
    np.testing.assert_allclose(np.linalg.inv(precision), cov_ref[:n_models, :n_models], rtol=1e-3, atol=1e-5)
    # the joint draws (theta, then items given theta) have the oracle's full covariance
    tree = fit(ds, "2pl", method="laplace", draws=60_000, seed=4, progress=False)
    post = tree["posterior"]
    sample = np.concatenate([post["theta"].values[0], np.log(post["discrimination"].values[0]),
                             post["intercept"].values[0]], axis=1)
    np.testing.assert_allclose(sample.mean(axis=0), mode_ref, atol=4 * np.sqrt(np.diag(cov_ref).max() / 60_000))
    scale = np.sqrt(np.outer(np.diag(cov_ref), np.diag(cov_ref)))
    np.testing.assert_allclose(np.cov(sample, rowvar=False) / scale, cov_ref / scale, atol=0.025)
    # the items' covariance with the abilities is not negligible: a mean-field approximation would fail here
    assert np.abs(cov_ref[:n_models, n_models:] / scale[:n_models, n_models:]).max() > 0.2


def test_the_fit_is_a_posterior_like_the_other_methods():
    ds, _ = _prior_truth(30, 40, seed=5, missing=0.5)
    tree = fit(ds, "2pl", method="laplace", draws=200, seed=0, progress=False)
    post = tree["posterior"]
    assert dict(post.sizes) == {"chain": 1, "draw": 200, "model": 30, "item": 40}
    assert set(post.data_vars) == {"theta", "discrimination", "intercept"}
    assert (post["discrimination"] > 0).all()
    assert np.isnan(tree["observed_data"]["responses"].values).mean() == pytest.approx(0.5, abs=0.01)
    settings = json.loads(tree.attrs["bayesirt_settings"])
    assert settings["method"] == "laplace" and "Gaussian" in settings["approximation"]
    assert "fixed" in settings and tree.attrs["laplace_last_step"] < 1e-4
    again = fit(ds, "2pl", method="laplace", draws=200, seed=0, progress=False)
    np.testing.assert_array_equal(again["posterior"]["theta"].values, post["theta"].values)


def _coverage(draws, truth, level=0.9):
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return (lo <= truth) & (truth <= hi)


def test_intervals_cover_the_prior_drawn_truth_at_their_level():
    hits = {"theta": [], "discrimination": [], "intercept": []}
    for rep in range(4):
        ds, truth = _prior_truth(100, 300, seed=100 + rep, missing=0.3 if rep % 2 else 0.0)
        post = fit(ds, "2pl", method="laplace", draws=1000, seed=rep, progress=False)["posterior"]
        for name in hits:
            hits[name].append(_coverage(post[name].values[0], truth[name].values))
    for name, h in hits.items():
        h = np.concatenate(h)
        se = np.sqrt(0.9 * 0.1 / h.size)
        assert abs(h.mean() - 0.9) < 3.5 * se, (name, h.mean(), h.size)


@pytest.mark.slow
def test_the_abilities_keep_their_scale_where_the_joint_mode_shrinks_it():
    """At 400 x 1,200 the joint mode's abilities spread about 4% less than the truth (3 times its
    posterior uncertainty); the centre used here keeps the truth's spread within that uncertainty."""
    ds, truth = _prior_truth(400, 1200, seed=7)
    y = ds["responses"].values
    spread = np.std(truth["theta"].values)
    centre = find_mode(y, PRIOR)["theta"]
    post = fit(ds, "2pl", method="laplace", draws=400, seed=0, progress=False)["posterior"]["theta"].values[0]
    uncertainty = post.std(axis=1).std()  # posterior sd of the abilities' spread
    assert abs(np.std(centre) - spread) < 3 * uncertainty
    assert np.std(find_mode(y, PRIOR, volume=False)["theta"]) < spread - 2 * uncertainty


def test_unsupported_specs_are_refused_with_the_way_out():
    ds, _ = _prior_truth(10, 12, seed=1)
    with pytest.raises(ConfigError, match="3pl spec"):
        fit(ds, "3pl", method="laplace", progress=False)
    with pytest.raises(ConfigError, match="difficulty"):
        fit(ds, "2pl-hierarchical", method="laplace", progress=False)
    hierarchical = load_spec("2pl").text.replace('mu = 0.0\nsigma = 0.5',
                                                 'mu = { distribution = "normal", mu = 0.0, sigma = 0.5 }\nsigma = 0.5')
    assert hierarchical != load_spec("2pl").text
    from bayesirt.models.specs import parse_spec  # noqa: PLC0415 (only this test needs it)

    with pytest.raises(ConfigError, match="fix them at numbers"):
        fit(ds, parse_spec(hierarchical, where="test"), method="laplace", progress=False)
    with pytest.raises(ConfigError, match="thin"):
        fit(make_responses(ds["responses"].values), "2pl", method="laplace", thin=2, progress=False)


def test_laplace_fit_report_says_it_is_one_gaussian(tmp_path):
    """The fit job's report and summary.json carry the Laplace caveat (diagnose), not NUTS checks."""
    data, _ = simulate_pl("2pl", n_items=60, n_models=40, seed=5)
    out = run_fit_job(data, tmp_path / "fit", method="laplace", draws=200, progress=False)
    summary = json.loads((out / "summary.json").read_text())
    assert any("one Gaussian approximation" in w for w in summary["warnings"])
    assert "one Gaussian approximation" in (out / "report.md").read_text()


@pytest.mark.slow  # the BFGS oracle and a 1,000-draw fit: minutes on 2 cores
def test_the_centre_search_converges_when_few_items_measure_each_model():
    """200 models x 30 items (like 755 x 100, issue 42): full near-centre steps grow 1.4-fold each
    (the ability-volume term's share of G's Jacobian exceeds one) and the search stopped after 40
    steps; halving the near-centre steps converges, to G's stationary point (the BFGS oracle), and
    the draws cover the prior-drawn truth."""
    ds, truth = _prior_truth(200, 30, seed=3)
    y = ds["responses"].values
    mode = find_mode(y, PRIOR)
    assert min(mode["record"]["damping"]) < 1  # the damped iteration was needed here
    oracle = _marginal_oracle(y, np.concatenate([mode["alpha"], mode["d"]]) + 0.05)
    np.testing.assert_allclose(np.concatenate([mode["theta"], mode["alpha"], mode["d"]]), oracle, atol=2e-3)
    post = fit(ds, "2pl", method="laplace", draws=1000, seed=0, progress=False)["posterior"]
    for name in ("theta", "discrimination", "intercept"):
        hits = _coverage(post[name].values[0], truth[name].values)
        assert abs(hits.mean() - 0.9) < 4 * np.sqrt(0.09 / hits.size), (name, hits.mean())


def test_a_line_search_without_descent_continues_with_damped_steps(monkeypatch):
    """Near an extreme item (OLL ARC, 4,280 models: a = 12, d = 12) G's Newton step is no descent
    direction of F: every line search halved 10 times and the search crept 6e-5 per step until its
    cap. After MAX_HALVINGS the steps are damped instead; forced from the first halving here, the
    search reaches the same centre as the default one."""
    import bayesirt.inference.laplace_kernel as kernel  # noqa: PLC0415 (the module whose constant is lowered)

    ds, _ = _prior_truth(200, 30, seed=3)
    y = ds["responses"].values
    default = find_mode(y, PRIOR)
    assert max(default["record"]["halvings"]) > 0  # the case has a halved line search to give up on
    monkeypatch.setattr(kernel, "MAX_HALVINGS", 0)
    damped = find_mode(y, PRIOR)
    first = damped["record"]["halvings"].index(next(h for h in damped["record"]["halvings"] if h > 0))
    assert all(h == 0 for h in damped["record"]["halvings"][first + 1:])  # no line search after giving up
    for name in ("theta", "alpha", "d"):
        np.testing.assert_allclose(damped[name], default[name], atol=1e-3)


def test_a_centre_search_that_fails_names_the_other_methods(monkeypatch):
    import bayesirt.inference.laplace_kernel as kernel  # noqa: PLC0415 (the module whose step cap is lowered)

    monkeypatch.setattr(kernel, "MAX_STEPS", 1)
    ds, _ = _prior_truth(200, 30, seed=3)
    with pytest.raises(ConfigError, match=r"did not converge in 1 Newton steps.*--method advi.*--method nuts"):
        fit(ds, "2pl", method="laplace", draws=10, seed=0, progress=False)
