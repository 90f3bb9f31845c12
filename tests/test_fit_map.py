"""``bayesirt fit --method map`` (issue 18 item 6, issue 32 item 4): the marginal MAP of the item
parameters under the spec's priors (MAP-EM, abilities integrated out; the numbers of ``bayesirt mml
--priors``), written in the shape of a sampled fit: the same files (``map.nc`` for
``posterior.nc``), the same items.csv / models.csv columns, order and sorting, with the columns
whose meaning differs (SEs, Wald intervals, a point rank, a normal-approximation
prob_ahead_of_next) filled and documented. The joint MAP over abilities and items, which diverges
on short tests (LSAT6 discriminations of 3 to several hundred), is not offered
(``fit(method="map")`` is refused: test_inference.py)."""

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy.stats import norm, rankdata

from bayesirt.cli.main import main
from bayesirt.data import load_dataset, simulate_pl
from bayesirt.frequentist import fit_mml
from bayesirt.jobs.fit import run_fit_job
from bayesirt.report.figures import ability_forest_figure, item_curves_figure
from bayesirt.safety.bank import read_bank

# LSAT6 2PL by marginal ML, R ltm (21-point Gauss-Hermite): the reference of test_mml.py
LSAT6_A = [0.8254, 0.7229, 0.8905, 0.6886, 0.6575]
LSAT6_B = [-3.3597, -1.3696, -0.2799, -1.8659, -3.1236]
FIT_FILES = {"items.csv", "models.csv", "summary.json", "report.md", "item_curves.png", "abilities.png"}
MAP_FILES = FIT_FILES | {"map.nc"}
QUIET = ["--no-progress"]
Z90 = norm.ppf(0.95)


@pytest.fixture(scope="module")
def lsat6_map(tmp_path_factory):
    out = tmp_path_factory.mktemp("map") / "fit"
    assert main(["fit", "lsat6", "--model", "2pl", "--method", "map", *QUIET, "--out", str(out)]) == 0
    return out


def test_lsat6_map_files_and_item_estimates(lsat6_map):
    assert {p.name for p in lsat6_map.iterdir()} == MAP_FILES  # map.nc for posterior.nc: there are no draws
    items = pd.read_csv(lsat6_map / "items.csv")
    ref = fit_mml(load_dataset("lsat6"), "2pl", priors=True).items
    assert list(items["item_id"]) == ["Q1", "Q2", "Q3", "Q4", "Q5"]
    for name in ("discrimination", "difficulty", "intercept"):
        est, se = ref[name].values, ref[f"{name}_se"].values
        np.testing.assert_allclose(items[f"{name}_mean"], est, rtol=0, atol=1e-8, err_msg=name)
        np.testing.assert_allclose(items[f"{name}_sd"], se, rtol=0, atol=1e-8, err_msg=name)  # sd = SE
        np.testing.assert_allclose(items[f"{name}_q5"], est - Z90 * se, rtol=0, atol=1e-8)  # Wald interval
        np.testing.assert_allclose(items[f"{name}_q95"], est + Z90 * se, rtol=0, atol=1e-8)
        assert (se > 0).all()
    # near the published MML (the priors shrink a little: the slopes toward 1, the mode of the log-normal prior
    # in log a, so the easiest item's difficulty moves 0.25, 0.3 of its SE); the joint MAP gave a = 3.4 ... several hundred
    np.testing.assert_array_less(np.abs(items["discrimination_mean"] - LSAT6_A), 0.1)
    np.testing.assert_array_less(np.abs(items["difficulty_mean"] - LSAT6_B), 0.3)


def test_lsat6_map_models_sorted_with_point_ranks_and_normal_ahead(lsat6_map):
    models = pd.read_csv(lsat6_map / "models.csv")
    abil = fit_mml(load_dataset("lsat6"), "2pl", priors=True).abilities.to_dataframe()
    assert len(models) == 1000 and models["theta_mean"].is_monotonic_decreasing
    mine = abil.loc[models["model_id"].astype(str)]
    np.testing.assert_allclose(models["theta_mean"], mine["map"], rtol=0, atol=1e-8)
    np.testing.assert_allclose(models["theta_sd"], mine["map_se"], rtol=0, atol=1e-8)
    np.testing.assert_allclose(models["theta_q5"], mine["map"] - Z90 * mine["map_se"], rtol=0, atol=1e-8)
    np.testing.assert_array_equal(models["rank_mean"], rankdata(-models["theta_mean"].to_numpy(), method="min"))
    assert models["rank_q5"].isna().all() and models["rank_q95"].isna().all()  # no draws, no rank interval
    th, se = models["theta_mean"].to_numpy(), models["theta_sd"].to_numpy()
    hand = norm.cdf((th[:-1] - th[1:]) / np.sqrt(se[:-1] ** 2 + se[1:] ** 2))
    np.testing.assert_allclose(models["prob_ahead_of_next"].iloc[:-1], hand, rtol=0, atol=1e-12)
    assert np.isnan(models["prob_ahead_of_next"].iloc[-1])
    tied = th[:-1] == th[1:]  # LSAT6 has 32 patterns: the same pattern, the same ability, 1/2 ahead
    assert tied.any() and np.allclose(models["prob_ahead_of_next"].iloc[:-1][tied], 0.5)


def test_lsat6_map_tree_has_the_fit_groups_and_the_mml_groups(lsat6_map):
    tree = xr.open_datatree(lsat6_map / "map.nc")
    assert {"posterior", "observed_data", "constant_data", "items", "abilities", "trace", "covariance"} <= set(tree.children)
    post = tree["posterior"]
    assert post.sizes["chain"] == 1 and post.sizes["draw"] == 1
    np.testing.assert_allclose(post["discrimination"].values[0, 0], tree["items"]["discrimination"].values)
    np.testing.assert_allclose(post["theta"].values[0, 0], tree["abilities"]["map"].values)
    assert "not a posterior" in tree.attrs["bayesirt_estimates"]
    assert json.loads(tree.attrs["bayesirt_settings"])["method"] == "map"


def test_lsat6_map_summary_and_report_say_estimate_and_se(lsat6_map):
    summary = json.loads((lsat6_map / "summary.json").read_text())
    assert summary["settings"]["method"] == "map" and summary["map_em"]["converged"]
    assert "marginal MAP" in summary["estimator"] and "MAP-EM" in summary["estimator"]
    assert summary["data"] == "lsat6" and summary["spec"] == "2pl" and "ignored_options" not in summary
    assert "standard error" in summary["columns"]["<parameter>_sd"] and "Wald" in summary["columns"]["theta_q<lo>, theta_q<hi>"]
    assert "NaN" in summary["columns"]["rank_q<lo>, rank_q<hi>"]
    assert {"person_fit", "item_fit", "ability_vs_accuracy"} <= set(summary["fit_checks"])
    report = (lsat6_map / "report.md").read_text()
    assert "not a posterior" in report and "90% Wald interval" in report and "P(ahead of next)" in report
    assert "## Model ranking" in report and "## Fit checks" in report and "`map.nc`" in report
    models = pd.read_csv(lsat6_map / "models.csv")
    top = models.iloc[0]
    assert f"| 1 | {top.model_id} | " in report and f"{top.theta_mean:.2f} [{top.theta_q5:.2f}, {top.theta_q95:.2f}]" in report


@pytest.mark.parametrize("spec", ["2pl", "1pl"])
@pytest.mark.slow
def test_map_and_advi_write_the_same_files_and_columns(tmp_path, spec):
    """The acceptance of issue 32 item 4: scripts do not break when the method changes. Fails on any
    future drift of the table definitions that the MAP tables do not follow."""
    data, _ = simulate_pl("1pl" if spec == "1pl" else "2pl", n_items=12, n_models=40, seed=3)
    advi = run_fit_job(data, tmp_path / "advi", spec=spec, method="advi", draws=100, progress=False)
    mapped = run_fit_job(data, tmp_path / "map", spec=spec, method="map", progress=False)
    assert {p.name for p in advi.iterdir()} == FIT_FILES | {"posterior.nc"}
    assert {p.name for p in mapped.iterdir()} == MAP_FILES
    for name in ("items.csv", "models.csv"):
        a, m = pd.read_csv(advi / name), pd.read_csv(mapped / name)
        assert list(a.columns) == list(m.columns), name
        assert list(a.dtypes[a.columns.str.endswith(("_mean", "_sd", "accuracy"))]) == \
            list(m.dtypes[m.columns.str.endswith(("_mean", "_sd", "accuracy"))])
    a, m = pd.read_csv(advi / "models.csv"), pd.read_csv(mapped / "models.csv")
    assert a["theta_mean"].is_monotonic_decreasing and m["theta_mean"].is_monotonic_decreasing
    assert np.corrcoef(a.set_index("model_id").loc[m["model_id"], "theta_mean"], m["theta_mean"])[0, 1] > 0.95
    sa, sm = (json.loads((out / "summary.json").read_text()) for out in (advi, mapped))
    assert set(sa) <= set(sm) and set(sa["fit_checks"]) == set(sm["fit_checks"])
    for out in (advi, mapped):
        tree = xr.open_datatree(out / ("map.nc" if out == mapped else "posterior.nc"))
        assert {"posterior", "observed_data", "constant_data"} <= set(tree.children)


def test_map_ignores_sampling_options_and_says_so(tmp_path):
    out = tmp_path / "rasch"
    with pytest.warns(UserWarning, match=r"method 'map' \(marginal MAP, MAP-EM\) ignores draws=50, seed=3 "):
        assert main(["fit", "lsat6", "--model", "rasch", "--method", "map", "--draws", "50", "--seed", "3", *QUIET,
                     "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ignored_options"] == {"draws": 50, "seed": 3}
    assert "Ignored options" in (out / "report.md").read_text()
    reference = fit_mml(load_dataset("lsat6"), "rasch", priors=True).items
    items = pd.read_csv(out / "items.csv")
    np.testing.assert_allclose(items["difficulty_mean"], reference["difficulty"], rtol=0, atol=1e-8)
    assert np.ptp(items["discrimination_mean"]) == 0  # one shared slope


def test_map_ci_sets_the_wald_level(tmp_path):
    out = tmp_path / "ci"
    assert main(["fit", "lsat6", "--method", "map", "--ci", "0.5", *QUIET, "--out", str(out)]) == 0
    items = pd.read_csv(out / "items.csv")
    z = norm.ppf(0.75)
    np.testing.assert_allclose(items["intercept_q75"] - items["intercept_q25"], 2 * z * items["intercept_sd"], atol=1e-10)
    assert "ignored_options" not in json.loads((out / "summary.json").read_text())


@pytest.mark.parametrize("spec", ["mirt", "mirt-confirmatory"])
def test_mirt_map_is_refused_in_one_line(tmp_path, capsys, spec):
    out = tmp_path / "x"
    assert main(["fit", "lsat6", "--model", spec, "--method", "map", *QUIET, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "MIRT" in err and "--method advi" in err
    assert not out.exists()


def test_other_commands_do_not_offer_map(tmp_path, capsys):
    """map is the fit command's MAP-EM job; the commands that sample (check, ppc, compare) refuse it."""
    assert main(["check", "lsat6", "--method", "map", "--out", str(tmp_path / "c")]) == 2
    assert "The 'method' parameter of check must be one of" in capsys.readouterr().err


def test_analysis_file_map_runs_map_em(tmp_path):
    spec = tmp_path / "a.toml"
    spec.write_text(f'[analysis]\nkind = "fit"\ndata = "lsat6"\nmodel = "2pl"\nout = "{tmp_path / "res"}"\n'
                    '[fit]\nmethod = "map"\n')
    assert main(["run", str(spec), "--no-progress"]) == 0
    out = tmp_path / "res"
    assert {p.name for p in out.iterdir()} == MAP_FILES
    assert json.loads((out / "summary.json").read_text())["settings"]["method"] == "map"
    reference = fit_mml(load_dataset("lsat6"), "2pl", priors=True).items
    items = pd.read_csv(out / "items.csv")
    for name in ("discrimination", "difficulty"):
        np.testing.assert_allclose(items[f"{name}_mean"], reference[name], rtol=0, atol=1e-8, err_msg=name)
        np.testing.assert_allclose(items[f"{name}_sd"], reference[f"{name}_se"], rtol=0, atol=1e-8, err_msg=name)


def test_map_nc_is_read_as_an_mml_bank(lsat6_map):
    """select/score read map.nc as they read mml.nc (Laplace draws from the covariance), not as a
    posterior of one draw."""
    bank = read_bank(lsat6_map / "map.nc", draws=50)
    assert "Laplace" in bank.kind and np.ptp(bank.discrimination, axis=0).min() > 0


def test_map_figures_name_the_point_estimates_and_wald_intervals(lsat6_map):
    """The figures of a MAP fit say what they draw: no zero-width 'credible band' around a single
    draw, curves labelled as at the MAP, ability intervals labelled Wald (read back from the figures)."""
    tree = xr.open_datatree(lsat6_map / "map.nc")
    items, models = pd.read_csv(lsat6_map / "items.csv"), pd.read_csv(lsat6_map / "models.csv")
    curves = item_curves_figure(tree, items, ci=0.9)
    labels = [t.get_text() for t in curves.axes[0].get_legend().get_texts()]
    assert "at the MAP estimates" in labels and not any("credible" in t for t in labels)
    assert not curves.axes[0].collections and not curves.axes[1].collections  # no band (fill_between) drawn
    forest = ability_forest_figure(models, ci=0.9, interval="Wald")
    assert "90% Wald intervals" in forest._suptitle.get_text()
    assert "credible" not in forest._suptitle.get_text()
