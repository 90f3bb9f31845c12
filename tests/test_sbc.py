"""Simulation-based calibration: ranks by hand and against simuk, the uniformity test (exact
posteriors pass even with dependent elements, shrunk or shifted posteriors fail, its false-alarm
rate is nominal), the whole pipeline with a calibrated and a miscalibrated stand-in fit, a small
real NUTS run through two Dask workers, and the CLI."""

import json

import numpy as np
import pytest
import xarray as xr
from scipy import stats

from bayesirt.cli.main import main
from bayesirt.errors import BayesIRTError, ConfigError
from bayesirt.workflow.sbc import rank_statistics, simulation_based_calibration, uniformity_test

# ---------------------------------------------------------------------------------------------
# ranks


def test_ranks_of_a_hand_made_case():
    truth = np.array([0.5, -1.0, 2.0])
    draws = np.array([[0.0, -2.0, 3.0],
                      [1.0, -0.5, 1.0],
                      [0.4, -1.5, 2.5],
                      [0.6, -1.0, 1.9]])  # a tie (-1.0 == -1.0) does not count as below
    np.testing.assert_array_equal(rank_statistics(truth, draws), [2, 2, 2])
    np.testing.assert_array_equal(rank_statistics(10.0, np.arange(5.0)), 5)
    np.testing.assert_array_equal(rank_statistics(-10.0, np.arange(5.0)), 0)
    with pytest.raises(BayesIRTError, match="draws have element shape"):
        rank_statistics(truth, draws.T)


def test_ranks_agree_with_simuk_on_the_same_draws_and_truth():
    simuk = pytest.importorskip("simuk")
    import pymc as pm

    n_rep, m, n_draws = 12, 4, 25
    rng = np.random.default_rng(11)
    truth = rng.normal(size=(n_rep, m))
    draws = rng.normal(0.3, 1.2, size=(n_rep, n_draws, m))
    with pm.Model(coords={"element": range(m)}) as toy:
        theta = pm.Normal("theta", 0, 1, dims="element")
        pm.Normal("y", theta, 1, observed=np.zeros(m), dims="element")
    sbc = simuk.SBC(toy, num_simulations=n_rep, seed=0, progress_bar=False)
    # simuk ranks its stored reference draws among its stored posteriors; give it ours
    sbc.ref_params = xr.Dataset({"theta": (("sample", "element"), truth)})
    sbc.posteriors = [xr.Dataset({"theta": (("sample", "element"), draws[r])}) for r in range(n_rep)]
    theirs = sbc.compute_rank_statistics()["prior_sbc"]["theta"].values[0]
    ours = np.stack([rank_statistics(truth[r], draws[r]) for r in range(n_rep)])
    np.testing.assert_array_equal(ours, theirs)


# ---------------------------------------------------------------------------------------------
# the uniformity test


def _gaussian_sbc(rng, n_rep, m, n_draws, *, shrink=1.0, shift=0.0, sigma=0.15, tau=3.0):
    """Exact SBC of a conjugate Gaussian model with correlated elements: theta ~ N(0, I),
    y = theta + noise, noise ~ N(0, sigma^2 I + tau^2 11'). The posterior is Gaussian; its draws
    are exact unless shrunk or shifted. As in IRT's common ability shift, the data fix the
    differences between elements well and their common level poorly, so the posterior errors of
    one replicate, and so its ranks, are strongly correlated."""
    noise_cov = sigma**2 * np.eye(m) + tau**2 * np.ones((m, m))
    post_cov = np.linalg.inv(np.eye(m) + np.linalg.inv(noise_cov))
    chol = np.linalg.cholesky(post_cov)
    gain = post_cov @ np.linalg.inv(noise_cov)
    noise_chol = np.linalg.cholesky(noise_cov)
    ranks = np.empty((n_rep, m), dtype=int)
    for r in range(n_rep):
        theta = rng.normal(size=m)
        y = theta + noise_chol @ rng.normal(size=m)
        mean = gain @ y
        draws = mean + shift + shrink * rng.normal(size=(n_draws, m)) @ chol.T
        ranks[r] = rank_statistics(theta, draws)
    return ranks


def test_exact_posterior_passes_and_the_design_effect_is_what_makes_it_pass():
    rng = np.random.default_rng(1)
    ranks = _gaussian_sbc(rng, 300, 20, 99)
    result = uniformity_test(ranks, 99, bins=10)
    assert result["p_value"] > 0.01
    assert result["design_effect"] > 2.5  # shared level: ranks of a replicate move together
    assert stats.chi2.sf(result["pearson_x2"], 9) < 1e-4  # the naive pooled test rejects this exact posterior
    assert 0.85 < result["coverage_90"] < 0.95
    # one element per replicate: independent ranks, design effect near 1
    single = uniformity_test(ranks[:, 0], 99, bins=10)
    assert 0.7 < single["design_effect"] < 1.4 and single["p_value"] > 0.01


@pytest.mark.parametrize("shrink, shift", [(0.5, 0.0), (1.0, 0.6)])
def test_shrunk_or_shifted_posteriors_are_detected(shrink, shift):
    rng = np.random.default_rng(2)
    result = uniformity_test(_gaussian_sbc(rng, 300, 20, 99, shrink=shrink, shift=shift), 99, bins=20)
    assert result["p_value"] < 1e-4
    if shrink < 1:
        assert result["rank_sd"] > 0.31 and result["coverage_90"] < 0.8  # U-shaped: intervals too narrow
    else:
        assert result["rank_mean"] < 0.4  # posterior above the truth: small ranks


def test_false_alarm_rate_is_nominal_with_dependent_ranks():
    """Uniform ranks with equicorrelated elements (Gaussian copula, rho 0.5): the corrected test
    rejects 2-9% at the 5% level (7% here); the naive pooled Pearson test about half the time."""
    rng = np.random.default_rng(3)
    n_sets, n_rep, m, n_draws, rho = 300, 100, 20, 99, 0.5
    p, naive = [], []
    for _ in range(n_sets):
        z = np.sqrt(rho) * rng.normal(size=(n_rep, 1)) + np.sqrt(1 - rho) * rng.normal(size=(n_rep, m))
        ranks = np.minimum((stats.norm.cdf(z) * (n_draws + 1)).astype(int), n_draws)
        res = uniformity_test(ranks, n_draws, bins=10)
        p.append(res["p_value"])
        naive.append(stats.chi2.sf(res["pearson_x2"], 9))
    rate = np.mean(np.array(p) < 0.05)
    assert 0.02 < rate < 0.09, rate
    assert np.mean(np.array(naive) < 0.05) > 0.4  # about half


def test_uniformity_test_bin_shares_are_exact_when_bins_do_not_divide():
    # L = 10: 11 rank values in 3 bins hold 4, 4, 3 values; all ranks equally often -> X2 = 0
    ranks = np.tile(np.arange(11), 6).reshape(6, 11)
    res = uniformity_test(ranks, 10, bins=3)
    assert res["pearson_x2"] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ConfigError, match=r"The 'bins' parameter of uniformity_test must be an integer in \[2, 11\]"):
        uniformity_test(ranks, 10, bins=12)
    with pytest.raises(BayesIRTError, match="ranks must lie in 0..10"):
        uniformity_test(ranks + 1, 10, bins=3)


# ---------------------------------------------------------------------------------------------
# the pipeline with stand-in fits (no sampling: fast, and the truth about calibration is known)


def _prior_fit(responses, spec, *, seed, draws, chains, shrink=1.0, **_):
    """A 'posterior' made of fresh draws from the 2PL priors. It ignores the data, so it is
    exactly calibrated in SBC (the prior is its own average posterior); shrunk, it is not."""
    rng = np.random.default_rng(seed)
    n_items, n_models = responses.sizes["item"], responses.sizes["model"]
    theta = shrink * rng.normal(0, 1, (chains, draws, n_models))
    a = np.exp(rng.normal(0, 0.5, (chains, draws, n_items)))
    d = rng.normal(0, 2, (chains, draws, n_items))
    post = xr.Dataset({"theta": (("chain", "draw", "model"), theta),
                       "discrimination": (("chain", "draw", "item"), a),
                       "intercept": (("chain", "draw", "item"), d),
                       "difficulty": (("chain", "draw", "item"), -d / a)})
    return xr.DataTree.from_dict({"posterior": post})


def _shrunk_prior_fit(responses, spec, **kw):
    return _prior_fit(responses, spec, shrink=0.5, **kw)


STAND_IN = {"replicates": 40, "draws": 100, "chains": 2, "thin": 2, "bins": 10, "seed": 0, "workers": 1,
            "progress": False}


@pytest.mark.slow
def test_pipeline_passes_a_calibrated_fit_and_catches_a_shrunk_one():
    good = simulation_based_calibration("2pl", (20, 8), fit_function=_prior_fit, **STAND_IN)
    tests = good.tests.set_index("family")
    assert list(tests.index) == ["theta", "discrimination", "difficulty", "intercept"]
    assert (tests["p_value"] > 0.01).all(), tests
    assert good.ranks.attrs["draws_L"] == 100
    assert good.ranks["theta"].dims == ("replicate", "model") and good.ranks["theta"].shape == (40, 20)
    assert good.ranks["discrimination"].dims == ("replicate", "item")
    bad = simulation_based_calibration("2pl", (20, 8), fit_function=_shrunk_prior_fit, **STAND_IN)
    t_bad = bad.tests.set_index("family")
    assert t_bad.loc["theta", "p_value"] < 1e-6 and t_bad.loc["theta", "rank_sd"] > 0.33
    assert (t_bad.loc[["discrimination", "intercept"], "p_value"] > 0.01).all()  # only theta was shrunk
    # same seed, same truths and seeds: the true values differ only through the fit
    np.testing.assert_array_equal(good.ranks["seed"].values, bad.ranks["seed"].values)


def test_the_truth_is_drawn_from_the_spec_priors():
    """With the stand-in fit, the truths are visible through the ranks' seed-independent part:
    check the prior draws directly (2PL: theta ~ N(0, 1), log a ~ N(0, 0.5), d ~ N(0, 2))."""
    from bayesirt.workflow.sbc import _prior_draws
    from bayesirt.models.specs import load_spec

    prior = _prior_draws(load_spec("2pl"), (50, 20), 200, seed=4)
    assert prior["theta"].shape == (200, 50) and prior["discrimination"].shape == (200, 20)
    assert abs(prior["theta"].std() - 1) < 0.05 and abs(np.log(prior["discrimination"]).std() - 0.5) < 0.03
    assert abs(prior["intercept"].std() - 2) < 0.1
    np.testing.assert_allclose(prior["difficulty"], -prior["intercept"] / prior["discrimination"])


@pytest.mark.parametrize("kwargs, message", [
    ({"method": "map"}, "The 'method' parameter of simulation_based_calibration must be one of"),
    ({"replicates": 1}, "The 'replicates' parameter of simulation_based_calibration must be an integer >= 2; got 1"),
    ({"thin": 0}, "The 'thin' parameter .* must be a positive integer or None; got 0"),
    ({"draws": 20, "thin": 10, "chains": 1}, "2 posterior draws after thinning give 3 possible ranks, fewer than bins=20"),
    ({"workers": 0}, "The 'workers' parameter .* must be a positive integer or None; got 0"),
    ({"design": (1, 40)}, "design must be \\(n_models, n_items\\), each an integer of at least 2"),
])
def test_bad_arguments_are_one_line_errors(kwargs, message):
    args = {"design": (20, 8), "replicates": 4, "workers": 1, "progress": False} | kwargs
    design = args.pop("design")
    with pytest.raises(BayesIRTError, match=message):
        simulation_based_calibration("2pl", design, **args)


# ---------------------------------------------------------------------------------------------
# real inference


@pytest.mark.slow
def test_small_real_nuts_sbc_runs_end_to_end_on_two_workers():
    res = simulation_based_calibration("2pl", (30, 10), replicates=6, method="nuts", draws=100, tune=150, chains=2,
                                       thin=5, bins=5, seed=3, workers=2, progress=False)
    assert res.ranks.attrs["draws_L"] == 40
    for fam in ("theta", "discrimination", "difficulty", "intercept"):
        r = res.ranks[fam].values
        assert r.min() >= 0 and r.max() <= 40
    d = res.diagnostics
    assert len(d) == 6 and d["max_rhat"].between(0.99, 1.2).all() and (d["divergences"] >= 0).all()
    assert d["advi_converged"].isna().all()
    # no bug-sized miscalibration (6 replicates cannot show a subtle one)
    assert (res.tests["p_value"] > 1e-3).all(), res.tests


@pytest.mark.slow
def test_cli_sbc_writes_its_folder_and_refuses_bad_arguments(tmp_path, capsys):
    out = tmp_path / "sbc"
    argv = ["sbc", "--model", "2pl", "--design", "10x5", "--replicates", "2", "--draws", "50", "--tune", "50",
            "--chains", "1", "--thin", "1", "--bins", "5", "--workers", "1", "--no-progress", "--out", str(out)]
    assert main(argv) == 0
    assert {p.name for p in out.iterdir()} == {"sbc.nc", "sbc_tests.csv", "sbc_diagnostics.csv",
                                               "rank_histograms.png", "report.md"}
    ranks = xr.open_dataset(out / "sbc.nc", engine="h5netcdf")
    assert ranks["theta"].shape == (2, 10) and json.loads(ranks.attrs["bayesirt_settings"])["replicates"] == 2
    ranks.close()
    assert "## Simulation-based calibration" in (out / "report.md").read_text()
    capsys.readouterr()
    for bad, message in ((["--design", "10by5"], "design must look like MODELSxITEMS"),
                         (["--replicates", "1"], "The 'replicates' parameter"),
                         (["--bins", "500"], "fewer than bins=500")):
        assert main(argv[:-2] + bad + ["--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    assert main(argv) == 3 and "already exists" in capsys.readouterr().err
