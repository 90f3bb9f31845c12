"""Fitting: recovery of known truth, the published LSAT6 2PL, missing cells, determinism, the
shape of the returned DataTree, and the messages for bad arguments."""

import json

import numpy as np
import pytest
import xarray as xr

from bayesirt.data import load_dataset, simulate_pl
from bayesirt.inference.diagnostics import diagnose
from bayesirt.errors import BayesIRTError
from bayesirt.inference.fitting import fit
from bayesirt.models.logistic import with_difficulty

SAMPLE = ("chain", "draw")


def _posterior(tree):
    """The posterior with the difficulty b = -d / a derived (a slope-intercept fit stores d only)."""
    return with_difficulty(tree["posterior"].to_dataset())


def _corr(post, truth, name):
    return float(np.corrcoef(post[name].mean(SAMPLE).values, truth[name].values)[0, 1])


def _coverage(post, truth, name, prob=0.9):
    lo = post[name].quantile((1 - prob) / 2, SAMPLE)
    hi = post[name].quantile((1 + prob) / 2, SAMPLE)
    return float(((truth[name] >= lo) & (truth[name] <= hi)).mean())


@pytest.fixture(scope="session")
def sim2pl():
    # The design: 200 models x 100 items, theta, b ~ N(0, 1), a ~ LogNormal(0, 0.5).
    return simulate_pl("2pl", n_items=100, n_models=200, seed=11)


@pytest.fixture(scope="session")
def nuts2pl(sim2pl):
    return fit(sim2pl[0], "2pl", draws=500, tune=500, chains=2, seed=1, progress=False, log_likelihood=True)


@pytest.mark.slow
def test_2pl_nuts_recovers_truth(sim2pl, nuts2pl):
    post, truth = _posterior(nuts2pl), sim2pl[1]
    assert _corr(post, truth, "difficulty") >= 0.95
    assert _corr(post, truth, "theta") >= 0.95
    assert _corr(post, truth, "discrimination") >= 0.80
    assert 0.80 <= _coverage(post, truth, "difficulty") <= 0.97


@pytest.mark.slow
def test_fit_returns_labelled_datatree(sim2pl, nuts2pl):
    responses = sim2pl[0]
    assert set(nuts2pl.children) >= {"posterior", "sample_stats", "observed_data", "constant_data", "log_likelihood"}
    post = nuts2pl.posterior
    assert post["theta"].dims == ("chain", "draw", "model") and post.sizes["draw"] == 500
    assert post.sizes["chain"] == 2
    assert (post["model"].values == responses["model"].values).all()
    # the spec's parameters only (a, d and theta of a slope-intercept 2PL), no sampler coordinates
    # and no metadata coordinates (they live in constant_data, so az.summary can stack the group)
    assert set(post.data_vars) == {"theta", "discrimination", "intercept"}
    assert set(post.coords) == {"chain", "draw", "item", "model"}
    assert (post["discrimination"] > 0).all()
    assert set(nuts2pl["constant_data"].data_vars) == {"item_group", "family", "owner"}
    np.testing.assert_array_equal(nuts2pl["constant_data"]["family"], responses["family"])
    observed = nuts2pl["observed_data"]["responses"]
    assert observed.dims == ("item", "model") and observed.dtype == np.float32
    np.testing.assert_array_equal(observed, responses["responses"])  # complete data: 0/1 as given
    ll = nuts2pl["log_likelihood"]["responses"]
    assert ll.dims == ("chain", "draw", "item", "model") and nuts2pl["log_likelihood"].attrs["layout"] == "dense"
    # the log-likelihood of a cell is log P(y | a, d, theta) of that cell's draw
    p = 1 / (1 + np.exp(-(post["discrimination"] * post["theta"] + post["intercept"])))
    np.testing.assert_allclose(ll, np.log(np.where(responses["responses"] == 1, p, 1 - p)), rtol=1e-9, atol=1e-12)
    assert "[priors.discrimination]" in nuts2pl.attrs["bayesirt_spec_text"]
    settings = json.loads(nuts2pl.attrs["bayesirt_settings"])
    assert settings == {"method": "nuts", "seed": 1, "sampler": "nutpie", "draws": 500, "tune": 500, "chains": 2,
                        "nutpie": {"adaptation": "draw_diag", "mass_matrix_switch_freq": 120, "step_size_jitter": 0.0},
                        "nutpie_model": "direct"}
    assert {"pymc", "arviz", "nutpie"} <= set(json.loads(nuts2pl.attrs["bayesirt_versions"]))
    assert json.loads(nuts2pl.attrs["bayesirt_timings"])["sample_s"] > 0


@pytest.mark.slow
def test_netcdf_round_trip(nuts2pl, tmp_path):
    nuts2pl.to_netcdf(tmp_path / "posterior.nc", engine="h5netcdf")
    back = xr.open_datatree(tmp_path / "posterior.nc", engine="h5netcdf")
    xr.testing.assert_identical(back.posterior["theta"].load(), nuts2pl.posterior["theta"])
    assert back.attrs["bayesirt_spec_text"] == nuts2pl.attrs["bayesirt_spec_text"]


@pytest.mark.slow
def test_missing_cells_excluded_and_truth_recovered():
    # 20% of cells missing completely at random: the likelihood runs over observed cells only.
    responses, truth = simulate_pl("2pl", n_items=100, n_models=200, seed=11, missing=0.2)
    tree = fit(responses, "2pl", draws=500, tune=500, chains=2, seed=1, progress=False)
    post = _posterior(tree)
    # With 80% of the data the complete-data thresholds still hold (seen here: theta .965,
    # difficulty .970, discrimination .930): the design is far above where 2PL estimates degrade.
    assert _corr(post, truth, "difficulty") >= 0.95
    assert _corr(post, truth, "theta") >= 0.95
    assert _corr(post, truth, "discrimination") >= 0.80
    assert 0.80 <= _coverage(post, truth, "difficulty") <= 0.97


@pytest.mark.slow
def test_same_seed_same_arrays():
    responses, _ = simulate_pl("2pl", n_items=15, n_models=30, seed=4)
    a = fit(responses, "2pl", draws=50, tune=50, chains=2, seed=9, progress=False)
    b = fit(responses, "2pl", draws=50, tune=50, chains=2, seed=9, progress=False)
    c = fit(responses, "2pl", draws=50, tune=50, chains=2, seed=10, progress=False)
    for name in ("theta", "discrimination", "intercept"):
        np.testing.assert_array_equal(a.posterior[name].values, b.posterior[name].values)
    assert not np.array_equal(a.posterior["theta"].values, c.posterior["theta"].values)


LSAT6_A = np.array([0.8254, 0.7229, 0.8905, 0.6886, 0.6575])
LSAT6_B = np.array([-3.3597, -1.3696, -0.2799, -1.8659, -3.1236])
WEAK = (
    'name = "weak"\nparameterization = "difficulty"\n'
    '[priors.theta]\ndistribution = "normal"\nmu = 0\nsigma = 1\n'
    '[priors.discrimination]\ndistribution = "lognormal"\nmu = 0\nsigma = 1\n'
    '[priors.difficulty]\ndistribution = "normal"\nmu = 0\nsigma = 5\n'
)


@pytest.mark.slow
def test_lsat6_2pl_matches_published_mml(tmp_path):
    """Published MML 2PL of LSAT6 (R ltm; ../shared/data/README.md), under weak priors."""
    (tmp_path / "weak.toml").write_text(WEAK)
    tree = fit(load_dataset("lsat6"), tmp_path / "weak.toml", draws=1000, tune=1000, chains=4, seed=1, progress=False)
    post = _posterior(tree)
    for name, ref in (("discrimination", LSAT6_A), ("intercept", -LSAT6_A * LSAT6_B), ("difficulty", LSAT6_B)):
        mean, sd = post[name].mean(SAMPLE).values, post[name].std(SAMPLE).values
        if name != "difficulty":  # b of the easiest items is long-tailed: checked in sd units only
            assert np.abs(mean - ref).max() < 0.1, name
        assert (np.abs(mean - ref) / sd).max() < 0.75, name


# Asymptotes are weakly identified: they need many models below (guessing) and above (slip) each
# item, so these designs are the smallest where the data visibly beat the prior. They are judged by
# the mean absolute error of the posterior mean relative to that of the prior mean (the mean of the
# generating Beta, i.e. the best guess without data): a ratio of 1 means nothing was learned. Seen
# here with these seeds: 3PL theta .919, b .968, a .892, guessing ratio .64; 4PL theta .874, b .934,
# a .865, guessing .76, slip .87. Thresholds sit a few hundredths below.
@pytest.mark.parametrize(
    "kind, n_models, thresholds, error_ratio",
    [
        ("3pl", 1000, {"theta": 0.90, "difficulty": 0.93, "discrimination": 0.80}, {"guessing": 0.8}),
        ("4pl", 1500, {"theta": 0.85, "difficulty": 0.90, "discrimination": 0.80}, {"guessing": 0.85, "slip": 0.95}),
    ],
)
@pytest.mark.slow
def test_3pl_4pl_recover_truth(kind, n_models, thresholds, error_ratio):
    responses, truth = simulate_pl(kind, n_items=40, n_models=n_models, seed=12)
    post = _posterior(fit(responses, kind, draws=250, tune=250, chains=2, seed=1, progress=False))
    for name, minimum in thresholds.items():
        assert _corr(post, truth, name) >= minimum, name
    prior_mean = {"guessing": 5 / 22, "slip": 2 / 20}
    for name, ratio in error_ratio.items():
        error = float(np.abs(post[name].mean(SAMPLE) - truth[name]).mean())
        prior_error = float(np.abs(prior_mean[name] - truth[name]).mean())
        assert error < ratio * prior_error, name


@pytest.mark.slow
def test_advi_approximates_nuts(sim2pl, nuts2pl):
    tree = fit(sim2pl[0], "2pl", method="advi", draws=200, seed=1, progress=False)
    post, truth = _posterior(tree), sim2pl[1]
    assert post.sizes["chain"] == 1 and post.sizes["draw"] == 200
    assert _corr(post, truth, "theta") >= 0.95
    assert _corr(post, truth, "difficulty") >= 0.95
    # Compared in slope-intercept form: b = -d/a of extreme items is skewed (seen: max |d - d_NUTS| .17).
    nuts_mean = nuts2pl.posterior["intercept"].mean(SAMPLE)
    assert float(np.abs(post["intercept"].mean(SAMPLE) - nuts_mean).max()) < 0.5
    warnings = diagnose(tree)
    assert warnings and "ADVI" in warnings[0]
    assert tree.attrs["advi_converged"] == 1
    # a small design: the loss is evaluated at every step, up to the step that stopped the fit
    iterations = tree["variational_fit"]["iteration"].values
    np.testing.assert_array_equal(iterations, np.arange(1, tree.attrs["advi_iterations_run"] + 1))


@pytest.mark.slow
def test_advi_anneals_its_learning_rate_by_default(sim2pl):
    """Mean-field ADVI's default: Adam at 0.1, then 0.02, 0.004, 0.0008, each until the loss settles
    (windows of 200 steps), stopping when it settles at the last; a given rate stays constant."""
    from bayesirt.inference.advi import ANNEAL_RATES

    tree = fit(sim2pl[0], "2pl", method="advi", draws=50, seed=1, progress=False)
    settings = json.loads(tree.attrs["bayesirt_settings"])
    assert settings["advi_learning_rate"] == list(ANNEAL_RATES) == [0.1, 0.02, 0.004, 0.0008]
    changes = json.loads(tree.attrs["advi_rate_changes"])
    assert len(changes) == 3 and changes == sorted(changes) and all(c % 200 == 0 for c in changes)
    assert tree.attrs["advi_converged"] == 1 and tree.attrs["advi_iterations_run"] > changes[-1]
    loss = tree["variational_fit"]["advi_loss"].values
    assert loss[-200:].mean() < loss[changes[0] - 200:changes[0]].mean()  # the lower rates improved on the first
    constant = fit(sim2pl[0], "2pl", method="advi", draws=50, seed=1, advi_learning_rate=0.01, advi_iterations=300,
                   progress=False)
    assert json.loads(constant.attrs["bayesirt_settings"])["advi_learning_rate"] == 0.01
    assert "advi_rate_changes" not in constant.attrs


@pytest.mark.slow
def test_hierarchical_spec_fits_and_reports_its_hyperparameters(sim2pl):
    """models/2pl-hierarchical.toml: item priors with learned location and scale, reported in the
    posterior; the truth has log a ~ N(0, 0.5) and b ~ N(0, 1). MAP-EM refuses it (fixed priors only)."""
    from bayesirt.frequentist.mml import fit_mml

    responses, truth = sim2pl
    tree = fit(responses, "2pl-hierarchical", method="advi", draws=300, seed=1, progress=False)
    post = _posterior(tree)
    hyper = ("discrimination_mu", "discrimination_sigma", "difficulty_mu", "difficulty_sigma")
    assert set(post.data_vars) == {"theta", "discrimination", "intercept", "difficulty", *hyper}
    assert all(post[h].dims == SAMPLE for h in hyper)
    assert _corr(post, truth, "theta") >= 0.95 and _corr(post, truth, "difficulty") >= 0.95
    assert 0.6 < float(post["difficulty_sigma"].mean()) < 1.6 and 0.2 < float(post["discrimination_sigma"].mean()) < 0.9
    with pytest.raises(BayesIRTError, match=r"spec '2pl-hierarchical': MAP-EM \(priors=True\) needs fixed item priors"):
        fit_mml(responses, "2pl-hierarchical", priors=True)
    assert fit_mml(responses, "2pl-hierarchical").items.sizes["item"] == 100  # ML uses no item priors


def test_joint_map_is_refused(sim2pl):
    """Joint MAP over abilities and items diverges on short tests (issue 18 item 6): fit refuses it
    in one line and names the marginal MAP (MAP-EM) instead (sample_model keeps MAP for the audit's
    family-DIF model, which has no abilities: test_family_dif.py)."""
    with pytest.raises(BayesIRTError, match=r"^The 'method' parameter of fit must be one of .*; got 'map' \(a joint "
                       r"MAP over abilities and items diverges on short tests; .*bayesirt\.fit_mml\(responses, spec, priors=True\).*"
                       r"`bayesirt fit DATA --method map`") as err:
        fit(sim2pl[0], "2pl", method="map", progress=False)
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_minibatch_advi_recovers_truth(sim2pl, monkeypatch):
    """Minibatch ADVI (a quarter of the cells per step, the loss evaluated every 5th step as on
    large matrices) lands where full-batch ADVI does."""
    import bayesirt.inference.advi

    responses, truth = sim2pl
    n_cells = int((responses["responses"].values != -1).sum())
    full = _posterior(fit(responses, "2pl", method="advi", draws=200, seed=1, progress=False))
    monkeypatch.setattr(bayesirt.inference.advi, "SCORE_SPARSELY_FROM", 0)
    tree = fit(responses, "2pl", method="advi", advi_batch_size=n_cells // 4, draws=200, seed=1, progress=False)
    np.testing.assert_array_equal(tree["variational_fit"]["iteration"].values[:3], [5, 10, 15])
    post = _posterior(tree)
    assert tree.attrs["advi_converged"] == 1
    assert json.loads(tree.attrs["bayesirt_settings"])["advi_batch_size"] == n_cells // 4
    assert _corr(post, truth, "theta") >= 0.95 and _corr(post, truth, "difficulty") >= 0.95
    # Within 1.5 full-batch posterior sds (seen: 1.08 for theta, .60 for intercepts, after 2,000
    # steps): a batch of 4,096 of 20,000 cells is noisy, and the noise-aware stop ends the fit
    # as soon as windows no longer differ beyond that noise. Minibatches are for large matrices.
    for name in ("theta", "intercept"):
        gap = np.abs(post[name].mean(SAMPLE) - full[name].mean(SAMPLE)) / full[name].std(SAMPLE)
        assert float(gap.max()) < 1.5, name


@pytest.mark.slow
def test_sparse_loss_evaluation_leaves_the_steps_unchanged(sim2pl, monkeypatch):
    """On large matrices the full-batch loss is evaluated every 20th step; the optimizer steps,
    and so the estimates after a fixed number of steps, are those of the every-step run."""
    import bayesirt.inference.advi

    responses, _ = sim2pl
    every_step = fit(responses, "2pl", method="advi", advi_iterations=400, draws=50, seed=3, progress=False)
    monkeypatch.setattr(bayesirt.inference.advi, "SCORE_SPARSELY_FROM", 0)
    sparse = fit(responses, "2pl", method="advi", advi_iterations=400, draws=50, seed=3, progress=False)
    np.testing.assert_array_equal(sparse["variational_fit"]["iteration"].values[:3], [20, 40, 60])
    assert every_step["variational_fit"].sizes["iteration"] == 400
    xr.testing.assert_equal(sparse.posterior.to_dataset(), every_step.posterior.to_dataset())


@pytest.mark.slow
def test_fullrank_advi_matches_nuts_on_small_design():
    # Full-rank ADVI captures posterior correlations, so its sds should be close to NUTS's
    # (seen: median sd ratio .99 for intercepts, 1.01 for abilities; means within .07).
    responses, _ = simulate_pl("2pl", n_items=20, n_models=60, seed=11)
    nuts = _posterior(fit(responses, "2pl", draws=500, tune=500, chains=2, seed=1, progress=False))
    tree = fit(responses, "2pl", method="fullrank_advi", draws=500, seed=1, progress=False)
    post = _posterior(tree)
    assert tree.attrs["advi_converged"] == 1
    for name in ("intercept", "theta"):
        assert float(np.abs(post[name].mean(SAMPLE) - nuts[name].mean(SAMPLE)).max()) < 0.2, name
        ratio = float((post[name].std(SAMPLE) / nuts[name].std(SAMPLE)).median())
        assert 0.8 < ratio < 1.25, name


@pytest.mark.slow
def test_pymc_sampler_path():
    responses, truth = simulate_pl("1pl", n_items=10, n_models=40, seed=2)
    # cores=1: chains in turn, so PyMC does not fork a test worker that holds threads (pytest-xdist)
    tree = fit(responses, "rasch", sampler="pymc", draws=100, tune=100, chains=2, cores=1, seed=3, progress=False)
    post = _posterior(tree)
    assert post["discrimination"].dims == ("chain", "draw")  # one common slope
    assert _corr(post, truth, "difficulty") >= 0.9
    assert "diverging" in tree.sample_stats


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"method": "nut"}, r"The 'method' parameter of fit must be one of .*; got 'nut'"),
        ({"sampler": "stan"}, r"The 'sampler' parameter of fit must be one of .*; got 'stan'"),
        ({"draws": 0}, r"The 'draws' parameter of fit must be a positive integer; got 0."),
        ({"chains": 1.5}, r"The 'chains' parameter of fit must be a positive integer; got 1.5."),
        ({"cores": 0}, r"The 'cores' parameter of fit must be a positive integer or None; got 0."),
        ({"advi_batch_size": 0}, r"The 'advi_batch_size' parameter of fit must be a positive integer"),
        ({"advi_batch_size": 100}, r"advi_batch_size applies to method='advi' or 'fullrank_advi'"),
    ],
)
def test_bad_arguments(sim2pl, kwargs, message):
    with pytest.raises(BayesIRTError, match=message):
        fit(sim2pl[0], "2pl", **kwargs)


def test_hand_made_dataset_is_validated():
    bad = xr.Dataset({"responses": (("item", "model"), np.array([[0, 1], [2, 1]], dtype="int8"))})
    with pytest.raises(BayesIRTError, match="values other than 0, 1 or missing"):
        fit(bad, "2pl")
