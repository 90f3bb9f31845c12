"""The held-out distillation study (SAFE Fig. 3 protocol), its jobs and their files."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bayesirt.safety.cat_study import DESIGNS, cat_study, combine_benchmarks, score_calibration, summarize_study
from bayesirt.jobs.safety import run_cat_job, run_information_job
from bayesirt.data import make_responses
from bayesirt.data.datasets.simulate import simulate_pl
from bayesirt.errors import BayesIRTError, ConfigError, DataError, OutputError


@pytest.fixture(scope="module")
def data():
    ds, _ = simulate_pl("2pl", n_items=90, n_models=48, seed=5, missing=0.05)
    return ds.assign_coords(item_group=("item", np.repeat(["A", "B"], [40, 50])))


@pytest.fixture(scope="module")
def study(data):
    return cat_study(data, budgets=(5, 15, 500), splits=3, random_subsets=4, seed=1, workers=1, progress=False)


def test_score_calibration_recovers_a_known_function():
    rng = np.random.default_rng(0)
    score, theta = rng.uniform(0, 1, 400), rng.normal(0, 1, 400)

    def truth(s, t):
        return 0.1 + 0.5 * s**2 + 0.1 * np.tanh(t)

    predict = score_calibration(score, theta, truth(score, theta))
    s_new, t_new = rng.uniform(0.05, 0.95, 200), rng.uniform(-1.5, 1.5, 200)
    assert np.max(np.abs(predict(s_new, t_new) - truth(s_new, t_new))) < 0.01
    assert np.all((predict([5.0], [9.0]) <= 1) & (predict([-5.0], [-9.0]) >= 0))  # clipped proportions


def test_study_layout_and_values(study, data):
    assert dict(study.sizes) == {"benchmark": 1, "split": 3, "design": 3, "budget": 3, "subset": 4}
    assert list(study["design"].values) == list(DESIGNS)
    ok = study.sel(budget=[5, 15])
    assert np.isfinite(ok["rmse"]).all() and np.isfinite(ok["random_rmse"]).all()
    assert np.isnan(study["rmse"].sel(budget=500)).all()  # above the bank size
    assert ((ok["rmse"] > 0) & (ok["rmse"] < 0.5)).all() and (np.abs(ok["spearman"]) <= 1).all()
    np.testing.assert_allclose(ok["rmse"].sel(design="random"), ok["random_rmse"].mean("subset"))
    assert study.attrs["n_models"] == data.sizes["model"]


@pytest.mark.slow
def test_study_is_seeded(data, study):
    again = cat_study(data, budgets=(5, 15, 500), splits=3, random_subsets=4, seed=1, workers=1, progress=False)
    xr.testing.assert_identical(study, again)


def test_summary_intervals_by_hand(study):
    curves = summarize_study(study)
    row = curves.query("metric == 'rmse' and design == 'cat' and budget == 5").iloc[0]
    values = study["rmse"].sel(design="cat", budget=5).values.ravel()
    half = 4.302652729911275 * values.std(ddof=1) / np.sqrt(3)  # t(0.975, 2)
    assert row["mean"] == pytest.approx(values.mean())
    assert (row["lower"], row["upper"]) == pytest.approx((values.mean() - half, values.mean() + half))
    assert set(curves["metric"]) == {"rmse", "spearman", "theta_rmse"} and row["splits"] == 3


def test_combine_benchmarks_outer_joins_models():
    one = make_responses([[1, 0, 1], [0, 1, 1]], item_id=["q1", "q2"], model_id=["m1", "m2", "m3"])
    two = make_responses([[1, 1], [0, 1]], item_id=["q1", "q3"], model_id=["m3", "m4"])
    ds = combine_benchmarks({"one": one, "two": two})
    assert list(ds["item"].values) == ["one/q1", "one/q2", "two/q1", "two/q3"]  # ids clashed: prefixed
    assert list(ds["item_group"].values) == ["one", "one", "two", "two"]
    assert list(ds["model"].values) == ["m1", "m2", "m3", "m4"]
    assert ds["responses"].sel(item="two/q3").values.tolist() == [-1, -1, 0, 1]


@pytest.mark.slow
def test_run_cat_job_writes_every_file(tmp_path, data):
    out = run_cat_job(data, tmp_path / "cat", budgets=(5, 10), splits=2, random_subsets=2, per_benchmark=True,
                      workers=1, progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["cat.nc", "cat_curves.csv", "cat_curves.png", "report.md",
                                                       "static_tests.csv"]
    with xr.open_dataset(out / "cat.nc", engine="h5netcdf") as saved:
        assert list(saved["benchmark"].values) == ["A", "B"]
    curves = pd.read_csv(out / "cat_curves.csv")
    assert set(curves["benchmark"]) == {"A", "B"} and set(curves["design"]) == set(DESIGNS)
    report = (out / "report.md").read_text()
    assert "## A" in report and "CAT full-score RMSE relative to random" in report
    with pytest.raises(OutputError, match="already exists"):
        run_cat_job(data, out, budgets=(5,), splits=2, random_subsets=1, workers=1, progress=False)


@pytest.mark.slow
def test_run_cat_job_combines_benchmark_files(tmp_path, data):
    from bayesirt.data.io import save_responses

    paths = [save_responses(data.isel(item=slice(0, 40)), tmp_path / "alpha.nc"),
             save_responses(data.isel(item=slice(40, 90)), tmp_path / "beta.nc")]
    out = run_cat_job(paths, tmp_path / "combined", budgets=(6,), splits=2, random_subsets=1, workers=1,
                      progress=False)
    assert (out / "report.md").read_text().startswith("# Short tests on held-out models: alpha+beta")
    with xr.open_dataset(out / "cat.nc", engine="h5netcdf") as saved:
        # 90 items, one of which (i0082) every model answers correctly: removed
        assert saved.attrs["n_items"] == 89 and list(saved["benchmark"].values) == ["all"]
    with pytest.raises(BayesIRTError, match="distinct names"):
        run_cat_job([paths[0], paths[0]], tmp_path / "dup", splits=2, workers=1, progress=False)


def test_run_information_job_from_data_posterior_and_items(tmp_path, data):
    out = run_information_job(data, tmp_path / "info")
    assert sorted(p.name for p in out.iterdir()) == ["information.csv", "information.nc", "information.png",
                                                     "report.md"]
    table = pd.read_csv(out / "information.csv")
    np.testing.assert_allclose(table["information_A"] + table["information_B"], table["test_information"])
    rng = np.random.default_rng(0)
    post = xr.Dataset({"discrimination": (("chain", "draw", "item"), rng.lognormal(0, 0.3, (2, 10, 5))),
                       "intercept": (("chain", "draw", "item"), rng.normal(0, 1, (2, 10, 5)))},
                      coords={"item": [f"i{j}" for j in range(5)]})
    tree = xr.DataTree.from_dict({"posterior": post})
    tree.to_netcdf(tmp_path / "posterior.nc", engine="h5netcdf")
    out = run_information_job(tmp_path / "posterior.nc", tmp_path / "post_info")
    assert "posterior-averaged over 20 draws" in (out / "report.md").read_text()
    items = post.mean(("chain", "draw"))
    out = run_information_job(items, tmp_path / "item_info", theta=np.linspace(-2, 2, 5))
    assert len(pd.read_csv(out / "information.csv")) == 5


@pytest.mark.parametrize("kwargs, match", [
    ({"budgets": ()}, r"The 'budgets' parameter of cat_study must be a list of distinct positive integers; got \(\)."),
    ({"budgets": (5, 5)}, r"The 'budgets' parameter of cat_study must be a list of distinct positive integers; got \(5, 5\)."),
    ({"budgets": ("x",)}, "The 'budgets' parameter of cat_study must be a list of distinct positive integers"),
    ({"budgets": (1000,)}, "cat_study: every budget exceeds the 89 items"),  # 90 less one without variance
    ({"splits": 1}, "The 'splits' parameter of cat_study must be an integer >= 2; got 1."),
    ({"random_subsets": 0}, "The 'random_subsets' parameter of cat_study must be a positive integer; got 0."),
    ({"calibration": 1.0}, r"The 'calibration' parameter of cat_study must be a share in \(0, 1\) leaving at least 3 of the 48 models"),
    ({"rule": "random"}, "The 'rule' parameter of cat_study must be one of"),
    ({"estimator": "mle"}, "The 'estimator' parameter of cat_study must be one of"),
])
def test_study_errors(data, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        cat_study(data, **{"splits": 2, "workers": 1, "progress": False} | kwargs)


def test_other_errors():
    with pytest.raises(BayesIRTError, match="no benchmarks given"):
        combine_benchmarks({})
    with pytest.raises(BayesIRTError, match="score calibration needs equally long finite"):
        score_calibration([0.1, 0.2], [0.0, 1.0], [0.3, 0.4])
    with pytest.raises(DataError, match="not a response Dataset"):
        cat_study(xr.Dataset(), splits=2)


@pytest.mark.slow
def test_items_without_variance_are_removed_and_listed(data, tmp_path):
    """An item every model gets right and one every model gets wrong carry no information; SAFE drops
    them before the study (they flatter random subsets), and the folder says which."""
    import json

    y = data["responses"].values.copy()
    observed = y >= 0
    y[0] = np.where(observed[0], 1, y[0])
    y[1] = np.where(observed[1], 0, y[1])
    constant = data.copy(data={"responses": y})
    study = cat_study(constant, budgets=(5,), splits=2, random_subsets=2, seed=1, workers=1, progress=False)
    removed = ["i0000", "i0001", "i0082"]  # i0082: every one of the 48 models answers it correctly
    assert json.loads(study.attrs["removed_items"]) == removed and study.attrs["n_items"] == 87
    out = run_cat_job(constant, tmp_path / "cat", budgets=(5,), splits=2, random_subsets=2, progress=False)
    assert "3 item(s) that every model answered alike were removed" in (out / "report.md").read_text()
    assert not set(pd.read_csv(out / "static_tests.csv")["item"]) & set(removed)


def test_composite_target_weighs_benchmarks_equally_and_quotas_only_on_request():
    """Issue 33: one target across the suite (the unweighted mean of the member benchmarks'
    proportions correct on a pooled bank, the proportion correct on one benchmark), and per-group
    quotas only when asked for."""
    from bayesirt.data import simulate_pl
    from bayesirt.safety.cat_study import _resolve_target, combine_benchmarks, full_score, static_tests

    big, _ = simulate_pl("2pl", n_items=60, n_models=40, seed=1)
    small, _ = simulate_pl("2pl", n_items=10, n_models=40, seed=2)
    pooled = combine_benchmarks({"big": big, "small": small})
    assert _resolve_target(pooled, "auto") == "benchmark_mean" and _resolve_target(big, "auto") == "proportion"
    y = pooled["responses"].values
    groups = pooled["item_group"].values
    expected = ((big["responses"].values == 1).mean(axis=0) + (small["responses"].values == 1).mean(axis=0)) / 2
    np.testing.assert_allclose(full_score(y, groups, "benchmark_mean"), expected)
    np.testing.assert_allclose(full_score(y, groups, "proportion"), (y == 1).mean(axis=0))
    free = static_tests(pooled, [10])
    kept = static_tests(pooled, [10], quotas=True)
    assert (kept["item_group"] == "small").sum() == round(10 * 10 / 70)  # proportional quota
    assert len(free) == len(kept) == 10
    study = cat_study(pooled, budgets=(5,), splits=2, random_subsets=2, workers=1, progress=False)
    assert study.attrs["target"] == "benchmark_mean" and study.attrs["quotas"] == 0
