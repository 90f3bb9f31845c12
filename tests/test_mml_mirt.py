"""Tests of the item-level MIRT by marginal ML (SAFE App. C): the EM's likelihood against brute-force
integration, D = 1 against the unidimensional MML, recovery of simulated loadings, the choice of D by
held-out likelihood, bad input, and the ``mirt-mml`` command."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy import stats
from scipy.special import log_expit, logsumexp

from bayesirt.cli.main import main
from bayesirt.data import MISSING, load, load_dataset, make_responses, save_responses
from bayesirt.errors import ConfigError, DataError
from bayesirt.frequentist import (fit_mml, fit_mml_mirt, heldout_mirt, loadings_by_benchmark, mirt_grid,
                                  mirt_model_loglik, rotated_loadings)
from bayesirt.frequentist.mml_mirt_select import fold_assignment
from bayesirt.models.rotation import align_loadings, rotate


def simulate_mirt(loadings, intercepts, n_models, seed, *, missing=0.0, groups=None) -> xr.Dataset:
    """Responses of the compensatory 2PL with theta ~ N(0, I); ``missing`` cells at random."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=(n_models, loadings.shape[1]))
    p = 1.0 / (1.0 + np.exp(-(loadings @ theta.T + intercepts[:, None])))
    y = (rng.uniform(size=p.shape) < p).astype(float)
    y[rng.uniform(size=y.shape) < missing] = np.nan
    return make_responses(y, item_id=[f"i{k:02d}" for k in range(len(y))], item_group=groups, drop_empty=True)


def two_factor_truth(n_items=12, seed=7):
    """Simple structure: the first half of the items load on factor 1, the rest on factor 2 (slopes
    1.2-2.2, cross-loadings up to 0.2); the halves are two benchmarks."""
    rng = np.random.default_rng(seed)
    half = n_items // 2
    a = np.zeros((n_items, 2))
    a[:half, 0], a[half:, 1] = rng.uniform(1.2, 2.2, half), rng.uniform(1.2, 2.2, n_items - half)
    a[:half, 1], a[half:, 0] = rng.uniform(0, 0.2, half), rng.uniform(0, 0.2, n_items - half)
    return a, rng.normal(0, 0.8, n_items), ["bench_a"] * half + ["bench_b"] * (n_items - half)


@pytest.fixture(scope="module")
def two_dim():
    a, d, groups = two_factor_truth()
    return simulate_mirt(a, d, 600, seed=11, groups=groups), a, d


@pytest.fixture(scope="module")
def two_dim_fit(two_dim):
    return fit_mml_mirt(two_dim[0], 2)


def brute_force_loglik(ds, a, d, n=200, limit=8.0) -> float:
    """Marginal log-likelihood of a 2-D model on a dense 200 x 200 rectangle grid over [-8, 8]^2
    with the N(0, I) density (independent of the Gauss-Hermite code); missing cells skipped."""
    g = np.linspace(-limit, limit, n)
    t = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    log_w = stats.multivariate_normal(np.zeros(2), np.eye(2)).logpdf(t) + 2 * np.log(g[1] - g[0])
    eta = a @ t.T + d[:, None]
    y = ds["responses"].transpose("item", "model").values
    ll = (y == 1).astype(float).T @ log_expit(eta) + (y == 0).astype(float).T @ log_expit(-eta) + log_w
    return float(logsumexp(ll, axis=1).sum())


# ------------------------------------------------------------------- (a) the likelihood is right
@pytest.mark.parametrize("n_items, n_models, prior, missing", [(5, 40, 1.5, 0.0), (8, 400, None, 0.0),
                                                                 (8, 400, None, 0.15)],
                         ids=["tiny-MAP", "ML", "ML-missing"])
@pytest.mark.slow
def test_loglik_equals_brute_force_and_is_a_maximum(n_items, n_models, prior, missing):
    """The tiny case (5 items x 40 models) carries the N(0, 1.5^2) loading prior of SAFE App. C: by
    ML, 2-D fits of so few models run a loading to infinity (a Heywood case) on most seeds."""
    rng = np.random.default_rng(n_models)
    half = n_items // 2
    a = np.zeros((n_items, 2))
    a[:half, 0], a[half:, 1] = rng.uniform(0.8, 1.6, half), rng.uniform(0.8, 1.6, n_items - half)
    a += rng.uniform(0, 0.3, a.shape)
    ds = simulate_mirt(a, rng.normal(0, 0.7, n_items), n_models, seed=n_items + n_models, missing=missing)
    fit = fit_mml_mirt(ds, 2, loading_prior=prior, tol=1e-10, ll_tol=0.0, max_iter=5000)
    assert fit.converged
    est_a, est_d = fit.loadings.values, fit.intercepts.values
    assert est_a[0, 1] == 0.0  # echelon: the first item loads on dimension 1 only
    assert np.abs(est_a).max() < 8  # an interior optimum, where the grid integrates well
    truth = brute_force_loglik(ds, est_a, est_d)
    assert fit.loglik == pytest.approx(truth, rel=1e-4)
    assert float(mirt_model_loglik(fit, ds).sum()) == pytest.approx(fit.loglik, rel=1e-12)
    free = np.r_[est_a[0, :1], est_a[1:].ravel()]
    expected_prior = 0.0 if prior is None else float(stats.norm(0, prior).logpdf(free).sum())
    assert fit.log_prior == pytest.approx(expected_prior, rel=1e-10, abs=1e-12)
    assert fit.n_parameters == 3 * n_items - 1
    assert np.all(np.diff(fit.loglik_trace) >= -1e-9 * abs(fit.loglik))  # EM never goes down

    def objective(a_, d_):
        moved = dataclasses.replace(fit, loadings=fit.loadings.copy(data=a_), intercepts=fit.intercepts.copy(data=d_))
        kernel = 0.0 if prior is None else float(stats.norm(0, prior).logpdf(np.r_[a_[0, :1], a_[1:].ravel()]).sum())
        return float(mirt_model_loglik(moved, ds).sum()) + kernel

    best = objective(est_a, est_d)
    assert best == pytest.approx(fit.objective, rel=1e-12)
    for _ in range(20):  # no small move of the free parameters improves the optimum
        da, dd = rng.normal(0, 0.01, est_a.shape), rng.normal(0, 0.01, est_d.shape)
        da[0, 1] = 0.0
        assert objective(est_a + da, est_d + dd) <= best + 1e-9


def test_grid_is_pruned_by_the_stated_rule():
    nodes, weights = mirt_grid(4)
    full, w_full = mirt_grid(4, prune=0.0)
    assert full.shape == (9**4, 4) and len(nodes) == 2777
    assert weights.sum() == pytest.approx(1.0) and w_full.sum() == pytest.approx(1.0)
    dropped = w_full < 1e-6 * w_full.max()
    assert w_full[dropped].sum() < 2e-5 and len(nodes) == (~dropped).sum()
    assert nodes.T @ weights == pytest.approx(np.zeros(4), abs=1e-12)  # symmetric: mean 0
    assert (nodes**2).T @ weights == pytest.approx(np.ones(4), abs=1e-3)  # variance 1 up to the dropped mass
    assert [len(mirt_grid(k)[0]) for k in (1, 2, 3)] == [25, 269, 1045]


# --------------------------------------------------------------- (b) D = 1 is the unidimensional 2PL
def test_one_dimension_reproduces_fit_mml():
    ds = load_dataset("lsat6")
    uni = fit_mml(ds, "2pl", priors=False, se=False, tol=1e-9, ll_tol=0.0, max_iter=5000)
    one = fit_mml_mirt(ds, 1, prune=0.0, tol=1e-9, ll_tol=0.0, max_iter=5000)  # the same 61-node grid
    assert one.loglik == pytest.approx(uni.loglik, abs=1e-7)
    sign = np.sign(one.loadings.values[:, 0].sum() * uni.items["discrimination"].values.sum())
    np.testing.assert_allclose(sign * one.loadings.values[:, 0], uni.items["discrimination"].values, atol=1e-5)
    np.testing.assert_allclose(one.intercepts.values, uni.items["intercept"].values, atol=1e-5)
    assert one.n_parameters == uni.n_parameters == 10
    pruned = fit_mml_mirt(ds, 1)  # default pruning: 25 of the 61 nodes
    assert pruned.attrs["n_nodes"] == 25
    assert pruned.loglik == pytest.approx(uni.loglik, rel=1e-6)


# ------------------------------------------------------------------------ (c) parameter recovery
def test_recovers_two_dimensional_loadings(two_dim, two_dim_fit):
    ds, a, d = two_dim
    fit = two_dim_fit
    assert fit.converged and fit.n_dims == 2
    assert list(fit.loadings.dims) == ["item", "dim"] and list(fit.loadings["item_group"].values[:1]) == ["bench_a"]
    est = rotate(fit.loadings.values, "oblimin").loadings
    aligned, _, _, congruence = align_loadings(est, rotate(a, "oblimin").loadings)
    assert congruence.min() > 0.95
    assert np.corrcoef(fit.intercepts.values, d)[0, 1] > 0.95
    assert fit.aic == pytest.approx(-2 * fit.loglik + 2 * fit.n_parameters)
    assert fit.bic == pytest.approx(-2 * fit.loglik + fit.n_parameters * np.log(600))


def test_loadings_by_benchmark_separate_the_two_benchmarks(two_dim, two_dim_fit):
    table = loadings_by_benchmark(two_dim_fit)
    assert list(table.columns) == ["item_group", "factor", "n_items", "mean_loading", "sd_loading", "mean_abs_loading"]
    wide = table.pivot(index="item_group", columns="factor", values="mean_loading")
    main_factor = wide.abs().idxmax(axis=1)
    assert main_factor["bench_a"] != main_factor["bench_b"]
    for group, factor in main_factor.items():
        assert wide.loc[group, factor] > 0.55  # standardized slopes 1.2-2.2 are loadings of .58-.79
        assert abs(wide.loc[group, 3 - factor]) < 0.15
    assert set(table["n_items"]) == {6}
    rotated = rotated_loadings(two_dim_fit)
    assert np.all(np.abs(rotated["loading"].values) < 1) and rotated["phi"].shape == (2, 2)
    one = loadings_by_benchmark(fit_mml_mirt(two_dim[0], 1), ["x"] * 12)
    assert list(one["factor"]) == [1] and one["mean_loading"].iloc[0] > 0


# ------------------------------------------------------------------- (d) held-out choice of D
@pytest.mark.slow
def test_heldout_likelihood_selects_the_true_dimension(two_dim, two_dim_fit):
    ds = two_dim[0]
    table = heldout_mirt(ds, dims=(1, 2, 3), folds=5, seed=1, loading_prior=1.5, ll_tol=1e-7)
    frame = table.drop_dims("model").to_dataframe()
    assert list(frame.index) == [1, 2, 3]
    assert frame["heldout_loglik"].idxmax() == 2
    assert frame.loc[2, "heldout_gain"] > 3 * frame.loc[2, "heldout_gain_se"]
    assert frame["bic"].idxmin() == 2
    assert frame["folds_converged"].tolist() == [5, 5, 5]
    assert table["model_heldout_loglik"].sum("model").values == pytest.approx(frame["heldout_loglik"].values)
    np.testing.assert_array_equal(table["fold"].values, fold_assignment(600, 5, 1))
    assert frame.loc[2, "n_parameters"] == 12 * 3 - 1 and frame.loc[3, "n_parameters"] == 12 * 4 - 3
    # the full-data fits may be passed in, and are then used as given
    reused = heldout_mirt(ds, dims=(2,), folds=2, seed=1, full_fits={2: two_dim_fit})
    assert float(reused["loglik"].item()) == two_dim_fit.loglik


# --------------------------------------------------------------------------------- (e) bad input
@pytest.mark.parametrize("n_dims", [0, 5, -1, 2.0, True])
def test_bad_dimension(two_dim, n_dims):
    with pytest.raises(ConfigError, match=r"^The 'n_dims' parameter of fit_mml_mirt must be an integer in \[1, 4\]"):
        fit_mml_mirt(two_dim[0], n_dims)


def test_more_dimensions_than_items():
    ds = make_responses(np.array([[0, 1, 1, 0], [1, 1, 0, 0], [1, 0, 1, 1]]))
    with pytest.raises(ConfigError, match="needs more items than dimensions; the data have 3 item"):
        fit_mml_mirt(ds, 3)
    with pytest.raises(ConfigError, match="each smaller than the number of items"):
        heldout_mirt(ds, dims=(1, 3))


def test_missing_data_errors(two_dim):
    ds = two_dim[0].copy(deep=True)
    ds["responses"].values[:] = MISSING
    with pytest.raises(DataError, match="every response is missing"):
        fit_mml_mirt(ds, 1)
    ds = two_dim[0].copy(deep=True)
    ds["responses"].values[3, :] = MISSING
    with pytest.raises(DataError, match="1 item\\(s\\) have no observed response \\(e.g. item 'i03'\\)"):
        fit_mml_mirt(ds, 2)
    with pytest.raises(DataError, match="must be a response Dataset"):
        fit_mml_mirt(ds["responses"], 2)


def test_other_bad_options(two_dim, two_dim_fit):
    ds = two_dim[0]
    with pytest.raises(ConfigError, match="folds must be an integer between 2"):
        heldout_mirt(ds, dims=(1,), folds=1)
    with pytest.raises(ConfigError, match="dims must be a sequence of integers"):
        heldout_mirt(ds, dims="two")
    with pytest.raises(ConfigError, match="anchors must name 1 distinct item id"):
        fit_mml_mirt(ds, 2, anchors=["nope"])
    with pytest.raises(ConfigError, match=r"^The 'loading_prior' parameter of fit_mml_mirt must be a positive number"):
        fit_mml_mirt(ds, 2, loading_prior=0)
    with pytest.raises(ConfigError, match=r"^The 'quadrature' parameter of fit_mml_mirt must be an integer in \[3, 201\]"):
        fit_mml_mirt(ds, 2, quadrature=1)
    with pytest.raises(ConfigError, match=r"^The 'prune' parameter of fit_mml_mirt must be a number in \[0, 1\)"):
        fit_mml_mirt(ds, 2, prune=1.5)
    with pytest.raises(DataError, match="item_group must give one label per item"):
        loadings_by_benchmark(two_dim_fit, ["a", "b"])
    with pytest.raises(ConfigError, match="^The 'rotation' parameter of rotated_loadings must be one of"):
        rotated_loadings(two_dim_fit, "promax")
    with pytest.raises(DataError, match="the fitted items in the fitted order"):
        mirt_model_loglik(two_dim_fit, ds.isel(item=slice(0, 5)))


def test_anchors_change_the_orientation_not_the_fit(two_dim, two_dim_fit):
    other = fit_mml_mirt(two_dim[0], 2, anchors=["i08"])
    assert other.loadings.sel(item="i08", dim=2).item() == 0.0
    assert other.loglik == pytest.approx(two_dim_fit.loglik, abs=1e-3)


# ------------------------------------------------------------------------------------ (f) the CLI
def test_cli_writes_its_outputs(tmp_path, capsys):
    a, d, groups = two_factor_truth(n_items=8, seed=2)
    path = save_responses(simulate_mirt(a, d, 150, seed=5, groups=groups), tmp_path / "sim.nc")
    assert list(np.unique(load(path)["item_group"].values)) == ["bench_a", "bench_b"]
    out = tmp_path / "out"
    assert main(["mirt-mml", str(path), "--dims", "1,2", "--folds", "3", "--loading-prior", "1.5",
                 "--no-progress", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["loadings.csv", "mirt_mml.csv", "mirt_mml.nc", "report.md"]
    table = pd.read_csv(out / "mirt_mml.csv")
    assert table["n_dims"].tolist() == [1, 2] and {"heldout_loglik", "aic", "bic", "best_heldout"} <= set(table)
    loadings = pd.read_csv(out / "loadings.csv")
    assert set(loadings["item_group"]) == {"bench_a", "bench_b"} and len(loadings) == 2 * 1 + 2 * 2
    tree = xr.open_datatree(out / "mirt_mml.nc")
    assert tree["D2"]["loading"].shape == (8, 2) and tree["D2"]["rotated_loading"].shape == (8, 2)
    assert tree["model_heldout_loglik"].shape == (2, 150)
    tree.close()
    report = (out / "report.md").read_text()
    assert "## Dimensionality" in report and "bench_a" in report
    assert main(["mirt-mml", str(path), "--dims", "1,5", "--out", str(tmp_path / "bad")]) == 2
    assert "dims must be distinct integers from 1 to 4" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
