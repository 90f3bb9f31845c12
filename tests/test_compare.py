"""Model comparison: leave-one-model-out with integrated abilities, chunked cell LOO, K-fold, tables, job."""

import arviz as az
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import matplotlib.pyplot as plt

from bayesirt.jobs.comparison import _fit_settings, run_compare_job
from bayesirt.report.compare import comparison_figure
from bayesirt.cli.main import main
from bayesirt.comparison.loo import (_item_draws, compare_table, kfold_models, kfold_specs, loo_cells, loo_models,
                              marginal_log_likelihood)
from bayesirt.data.datasets.simulate import simulate_pl
from bayesirt.errors import BayesIRTError, ConfigError, SpecError
from bayesirt.inference.fitting import fit
from bayesirt.comparison.marginal import pattern_log_marginal, quadrature_rule
from bayesirt.models.logistic import pointwise_log_likelihood

FIT = {"method": "advi", "draws": 200, "seed": 2, "progress": False}


@pytest.fixture(scope="module")
def data():
    return simulate_pl("2pl", n_items=25, n_models=80, seed=11, missing=0.05)[0]


@pytest.fixture(scope="module")
def fits(data):
    """ADVI fits of the rasch and 2pl (the tests that use them are marked slow: an ADVI fit is a sampler run)."""
    return {name: fit(data, name, **FIT) for name in ("rasch", "2pl")}


@pytest.mark.slow  # the fits fixture: two ADVI fits
def test_marginal_log_likelihood_is_the_kernel_per_draw(fits, data):
    tree = fits["2pl"]
    ll = marginal_log_likelihood(tree, progress=False)
    assert ll.dims == ("chain", "draw", "model") and ll.sizes["model"] == 80
    draw = _item_draws(tree)[5]
    y = data["responses"].values.T
    # one dimension: the shared grid, which agrees with the adaptive Gauss-Hermite path (the old
    # computation, kept as the oracle) to quadrature accuracy
    assert ll.attrs["integration"] == "shared grid"
    adaptive = pattern_log_marginal((y == 1).astype(float), y != -1, draw, quadrature_rule(1))
    np.testing.assert_allclose(ll.isel(chain=0, draw=5).values, adaptive, rtol=0, atol=1e-6)
    slow = marginal_log_likelihood(tree, nodes=21, progress=False)
    assert slow.attrs["integration"] == "adaptive Gauss-Hermite"
    np.testing.assert_array_equal(slow.isel(chain=0, draw=5).values, adaptive)
    np.testing.assert_allclose(ll.values, slow.values, rtol=0, atol=1e-6)
    # draws in threads: each draw's row is computed alone, so any thread count gives the same numbers
    for threads in (1, 3):
        np.testing.assert_array_equal(marginal_log_likelihood(tree, progress=False, threads=threads).values, ll.values)
        np.testing.assert_array_equal(marginal_log_likelihood(tree, nodes=21, progress=False, threads=threads).values,
                                      slow.values)
    # the 2PL population is the spec's theta prior, N(0, 1)
    assert draw.mean.tolist() == [0.0] and draw.covariance.tolist() == [[1.0]]


@pytest.mark.slow  # the fits fixture: two ADVI fits
def test_rasch_common_slope_broadcasts_to_every_item(fits):
    draw = _item_draws(fits["rasch"])[0]
    assert draw.loading.shape == (25, 1) and np.unique(draw.loading).size == 1


@pytest.mark.slow  # the fits fixture: two ADVI fits
def test_leave_one_model_out_is_psis_over_the_integrated_likelihood(fits):
    tree = fits["2pl"]
    res = loo_models(tree, progress=False)
    assert res.pareto_k.dims == ("model",) and res.n_data_points == 80
    ll = marginal_log_likelihood(tree, progress=False)
    dt = xr.DataTree.from_dict({"posterior": tree["posterior"].to_dataset()[["intercept"]],
                                "log_likelihood": ll.to_dataset(name="y")})
    direct = az.loo(dt, pointwise=True, var_name="y", reff=1.0)  # ADVI: one chain, r_eff = 1
    assert res.elpd == pytest.approx(direct.elpd, rel=1e-12)
    np.testing.assert_allclose(res.pareto_k.values, direct.pareto_k.values)
    assert (res.elpd_i < 0).all()  # the log probability of a binary pattern is negative


@pytest.mark.slow  # the fits fixture: two ADVI fits
def test_chunked_cell_loo_equals_arviz_in_one_pass(fits, data):
    tree = fits["2pl"]
    chunked = loo_cells(tree, chunk_cells=400, progress=False)  # 5 items per chunk
    ll = pointwise_log_likelihood(tree["posterior"].to_dataset(), data)
    dt = xr.DataTree.from_dict({"posterior": tree["posterior"].to_dataset()[["intercept"]],
                                "log_likelihood": ll.to_dataset(name="y")})
    whole = az.loo(dt, pointwise=True, var_name="y", reff=1.0)
    assert chunked.n_data_points == ll.sizes["cell"]
    assert chunked.elpd == pytest.approx(whole.elpd, rel=1e-12)
    assert chunked.se == pytest.approx(whole.se, rel=1e-9)
    assert chunked.p == pytest.approx(whole.p, rel=1e-9)
    np.testing.assert_allclose(np.sort(chunked.pareto_k.values), np.sort(whole.pareto_k.values))
    np.testing.assert_allclose(chunked.elpd_i.values, whole.elpd_i.values, rtol=1e-10)  # same cell order


@pytest.mark.slow
def test_kfold_scores_every_model_once_and_is_reproducible(data):
    kw = {"folds": 2, "seed": 4, "workers": 1, "progress": False, "method": "advi", "draws": 100}
    first = kfold_models(data, "2pl", **kw)
    assert first.kind == "loo_kfold" and first.n_folds == 2 and first.n_samples == 100
    assert first.elpd_i.sizes["model"] == 80 and np.isfinite(first.elpd_i).all()
    assert first.elpd == pytest.approx(float(first.elpd_i.sum()))
    np.testing.assert_array_equal(first.elpd_i.values, kfold_models(data, "2pl", **kw).elpd_i.values)
    # p = lpd(full fit) - elpd: from the full fit, or from a PSIS-LOO result's elpd + p (lpd), the same
    full = fit(data, "2pl", **FIT)
    psis = loo_models(full, progress=False)
    from_fit = kfold_models(data, "2pl", full_fit=full, **kw)
    assert from_fit.p == pytest.approx(kfold_models(data, "2pl", full_lpd=psis.elpd + psis.p, **kw).p, rel=1e-9)
    with pytest.raises(ConfigError, match=r"The 'folds' parameter of kfold_specs must be an integer in \[2, "):
        kfold_models(data, "2pl", folds=1)
    # several specs in one pool of refits: the same folds and seeds, so the same numbers as one at a time
    both = kfold_specs(data, {"rasch": "rasch", "2pl": "2pl"}, full_lpd={"2pl": psis.elpd + psis.p}, **kw)
    np.testing.assert_array_equal(both["2pl"].elpd_i.values, first.elpd_i.values)
    assert both["2pl"].p == pytest.approx(from_fit.p, rel=1e-9) and np.isnan(both["rasch"].p)
    np.testing.assert_array_equal(both["rasch"].elpd_i.values, kfold_models(data, "rasch", **kw).elpd_i.values)


@pytest.mark.slow  # the fits fixture: two ADVI fits
def test_compare_table_columns_and_ranks(fits):
    results = {name: loo_models(tree, progress=False) for name, tree in fits.items()}
    table = compare_table(results)
    assert list(table.columns) == ["rank", "elpd", "se", "elpd_diff", "dse", "p_worse", "p", "weight",
                                   "stacking_weight", "pseudo_bma_plus_weight", "method", "bad_k", "n_units"]
    assert table.loc[table["rank"] == 0, "elpd_diff"].item() == 0
    assert table["weight"].sum() == pytest.approx(1.0) == table["pseudo_bma_plus_weight"].sum()
    with pytest.raises(BayesIRTError, match="at least two fits"):
        compare_table({"2pl": results["2pl"]})


@pytest.mark.slow  # the fits fixture: two ADVI fits
def test_compare_table_refuses_different_units(fits, data):
    a = loo_models(fits["2pl"], progress=False)
    b = loo_cells(fits["rasch"], progress=False)
    with pytest.raises(BayesIRTError, match="different numbers of units"):
        compare_table({"2pl": a, "rasch": b})


@pytest.mark.slow
def test_compare_job_and_cli(tmp_path, data, capsys):
    out = run_compare_job(data, tmp_path / "cmp", specs=["rasch", "2pl"], kfold="never", **(FIT | {"progress": True}))
    lines = capsys.readouterr().err.splitlines()
    stages = [line for line in lines if line.startswith("compare: ")]
    assert stages[0] == "compare: fit method: advi, as requested (--method)"
    assert stages[1] == "compare: spec 1 of 2: rasch - fitting (advi) to 80 models x 25 items"
    assert any(line.startswith("compare: spec 1 of 2: rasch - fitted in ") and line.endswith(
        "marginal likelihood of 80 held-out models") for line in stages)
    table = pd.read_csv(out / "compare.csv", index_col="spec")
    elpd_line = next(line for line in stages if line.startswith("compare: spec 2 of 2: 2pl - elpd "))
    assert f"elpd {table.loc['2pl', 'elpd']:,.1f} (SE {table.loc['2pl', 'se']:,.1f})" in elpd_line
    report = (out / "report.md").read_text()
    settings = report.split("## Settings")[1]
    assert "- method: advi" in settings and "- draws: 200" in settings
    assert not any(f"- {key}:" in settings for key in ("sampler", "tune", "chains"))  # NUTS-only settings
    assert "mean-field ADVI, which under-disperses" in report
    assert {"compare.csv", "compare.png", "elpd.nc", "summary.json", "report.md"} <= {p.name for p in out.iterdir()}
    table = pd.read_csv(out / "compare.csv", index_col="spec")
    assert set(table.index) == {"rasch", "2pl"}
    pointwise = xr.open_dataset(out / "elpd.nc", engine="h5netcdf")
    assert pointwise["elpd_i"].dims == ("spec", "model")
    assert "PSIS-LOO" in (out / "report.md").read_text()
    kfold_out = run_compare_job(data, tmp_path / "kf", specs=["rasch", "2pl"], kfold="always", folds=2, workers=1,
                                **(FIT | {"progress": True}))
    stages = [line for line in capsys.readouterr().err.splitlines() if line.startswith("compare: ")]
    assert any(line.startswith("compare: exact 2-fold cross-validation by model on request: 4 refits (2 specs x 2 "
                               "folds), in this process; expected about ") for line in stages)
    kf_table = pd.read_csv(kfold_out / "compare.csv", index_col="spec")
    assert (kf_table["method"] == "loo_kfold").all()
    assert any(line.startswith(f"compare: spec 2 of 2: 2pl - 2-fold elpd {kf_table.loc['2pl', 'elpd']:,.1f}")
               for line in stages)
    with pytest.raises(SpecError, match="exactly one of --specs"):
        run_compare_job(data, tmp_path / "x", specs=["2pl"], dims=[1, 2])
    with pytest.raises(SpecError, match="at least two"):
        run_compare_job(data, tmp_path / "x", specs=["2pl"])


def test_cli_refuses_bad_dimension_lists(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "lsat6", "--dims", "one,two", "--out", "x"])
    assert "comma-separated integers" in capsys.readouterr().err


def _table(specs, elpd, se, diff, dse):
    return pd.DataFrame({"rank": range(len(specs)), "elpd": elpd, "se": se, "elpd_diff": diff, "dse": dse},
                        index=pd.Index(specs, name="spec"))


def _plotted(table, unit="model"):
    """Per spec, what the figure draws: (elpd, its error-bar half-width, elpd_diff, its half-width,
    y position), read from the matplotlib artists, and the y tick labels with their positions."""
    fig = comparison_figure(table, unit=unit)
    left, right = fig.axes
    out = {}
    for ax, key in ((left, "elpd"), (right, "diff")):
        (container,) = ax.containers
        data_line, _, (bars,) = container.lines
        xs, ys = data_line.get_xdata(), data_line.get_ydata()
        for x, y, seg in zip(xs, ys, bars.get_segments()):
            (x0, y0), (x1, y1) = seg
            assert y0 == y1 == y and (x0 + x1) / 2 == pytest.approx(x)
            out.setdefault(y, {})[key] = (x, (x1 - x0) / 2)
    fig.canvas.draw()
    for ax in (left, right):  # each x tick label states its own position (no "-1, -1, -0" rounding)
        positions = ax.get_xticks()
        shown = [float(t.get_text().replace(",", "").replace("\u2212", "-")) for t in ax.get_xticklabels()]
        step = np.diff(positions).min()
        np.testing.assert_allclose(shown, positions, atol=step / 10)
        assert len(set(shown)) == len(shown)
    ticks = {label.get_text(): pos for label, pos in zip(left.get_yticklabels(), left.get_yticks())}
    top = min(left.get_ylim())  # the axis is inverted: the smallest y is drawn at the top
    legend_box = fig.legends[0].get_window_extent(fig.canvas.get_renderer())
    data_boxes = [ax.get_window_extent(fig.canvas.get_renderer()) for ax in fig.axes]
    plt.close(fig)
    return out, ticks, top, legend_box, data_boxes


def test_figure_draws_the_tables_numbers_best_at_the_top():
    """The issue's case: 3pl best, 2pl -3,952, rasch -13,645 (rows in any order)."""
    table = _table(["3pl", "2pl", "rasch"], [-120_000.0, -123_952.0, -133_645.0], [310.0, 320.0, 350.0],
                   [0.0, -3_952.0, -13_645.0], [0.0, 95.0, 160.0]).iloc[[2, 0, 1]]
    points, ticks, top, legend_box, data_boxes = _plotted(table)
    for spec, row in table.iterrows():
        drawn = points[ticks[spec]]
        assert drawn["elpd"] == pytest.approx((row["elpd"], row["se"]))
        assert drawn["diff"] == pytest.approx((row["elpd_diff"], row["dse"]))
    assert ticks["3pl"] < ticks["2pl"] < ticks["rasch"] and abs(ticks["3pl"] - top) < 1  # best at the top
    assert points[ticks["rasch"]]["diff"][0] < points[ticks["2pl"]]["diff"][0] < 0  # the worst furthest left
    assert all(legend_box.y1 <= box.y0 for box in data_boxes)  # the legend is below both panels


def test_figure_ticks_of_small_differences_are_labelled_with_decimals():
    table = _table(["rasch", "2pl"], [-2472.5, -2473.05], [38.7, 38.9], [0.0, -0.55], [0.0, 0.6])
    points, ticks, *_ = _plotted(table)
    assert points[ticks["2pl"]]["diff"] == pytest.approx((-0.55, 0.6))


@pytest.mark.slow
def test_figure_of_a_compare_run_matches_its_csv(tmp_path, data):
    out = run_compare_job(data, tmp_path / "cmp", specs=["rasch", "2pl"], kfold="never", **FIT)
    table = pd.read_csv(out / "compare.csv", index_col="spec")
    points, ticks, _, _, _ = _plotted(table)
    assert set(ticks) == set(table.index)
    for spec, row in table.iterrows():
        drawn = points[ticks[spec]]
        assert drawn["elpd"] == pytest.approx((row["elpd"], row["se"]), rel=1e-12)
        assert drawn["diff"] == pytest.approx((row["elpd_diff"], row["dse"]), rel=1e-12, abs=1e-12)


def test_report_settings_are_those_of_the_method_used():
    advi = _fit_settings({"method": "advi", "draws": 300})
    assert advi["draws"] == 300 and advi["advi_iterations"] == 50_000 and not {"sampler", "tune", "chains"} & set(advi)
    nuts = _fit_settings({})
    assert nuts["method"] == "nuts" and (nuts["sampler"], nuts["tune"], nuts["chains"]) == ("nutpie", 1000, 4)
    assert not any(k.startswith("advi") for k in nuts)
