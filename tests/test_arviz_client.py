"""Plain ArviZ and xarray as clients: every kind of file bayesirt writes (fit, ppc, mml, compare,
audit) is opened in a subprocess that imports only arviz, xarray and numpy, and the calls a user
of those libraries would make run on it (issue 18, item 2). The writers' compression and float32
storage are checked here too (item 3)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import xarray as xr

from bayesirt.cli.main import main
from bayesirt.data import load, save_responses, simulate_dif_benchmark
from bayesirt.utils.outputs import write_netcdf

QUIET = ["--no-progress"]

CLIENT = textwrap.dedent("""
    import json, sys, warnings
    import matplotlib
    matplotlib.use("Agg")
    import arviz as az
    import numpy as np
    import xarray as xr
    warnings.simplefilter("ignore")
    kind, path = sys.argv[1], sys.argv[2]
    tree = xr.open_datatree(path)
    out = {"groups": sorted(tree.children)}
    if kind in ("fit", "ppc", "gaps"):
        summary = az.summary(tree)
        out["summary_rows"] = list(summary.index)
        out["ess_vars"] = sorted(az.ess(tree).to_dataset().data_vars)  # the posterior group's
        out["rhat_max"] = float(max(np.nanmax(v.values) for v in az.rhat(tree).to_dataset().data_vars.values()))
        az.plot_forest(tree, var_names=["discrimination"])
        observed = tree["observed_data"]["responses"]
        out["observed_dims"] = list(observed.dims)
        out["observed_nan"] = int(observed.isnull().sum())
        out["constant_data"] = sorted(tree["constant_data"].data_vars)
    if kind in ("fit", "ppc"):
        loo = az.loo(tree, pointwise=True)
        out["loo_elpd"], out["loo_dims"] = float(loo.elpd), list(loo.elpd_i.dims)
    if kind == "gaps":  # missing cells are NaN; the README's recipe scores the observed ones
        ll = tree["log_likelihood"]["responses"]
        out["ll_dims"], out["ll_nan"] = list(ll.dims), int(ll.isel(chain=0, draw=0).isnull().sum())
        cells = ll.stack(cell=("item", "model")).dropna("cell")
        loo = az.loo(xr.DataTree.from_dict({"posterior": tree["posterior"].to_dataset(),
                                             "log_likelihood": cells.to_dataset()}))
        out["loo_elpd"], out["loo_n"] = float(loo.elpd), int(loo.n_data_points)
    if kind == "ppc":
        out["pp_dims"] = list(tree["posterior_predictive"]["responses"].dims)
        pit = az.loo_pit(tree)
        values = pit["responses"].values
        out["pit_range"] = [float(np.nanmin(values)), float(np.nanmax(values))]
        az.plot_ppc_dist(tree)
        az.plot_loo_pit(tree)
        out["ppc_statistics_dims"] = sorted(tree["ppc_statistics"].dims)
    if kind == "mml":
        items = tree["items"].to_dataset().to_dataframe()
        out["items_columns"] = sorted(items.columns)
        out["n_items"] = len(items)
    if kind == "compare":
        elpd = tree.to_dataset()["elpd_i"]
        out["elpd_dims"] = list(elpd.dims)
        out["elpd_totals"] = elpd.sum("model").values.tolist()
    if kind == "audit":
        bayes = az.summary(tree, group="bayes", var_names=["excess_pp", "low_dif_reversal_rate"])
        out["bayes_rows"] = list(bayes.index)
        dif = az.summary(tree["bayes"], group="fold_0", var_names=["dif_range"])
        out["dif_rows"] = len(dif)
    out["imported_bayesirt"] = "bayesirt" in sys.modules
    print(json.dumps(out))
""")


def _client(kind: str, path) -> dict:
    """Run the client script on ``path`` in a fresh interpreter; its JSON report."""
    done = subprocess.run([sys.executable, "-c", CLIENT, kind, str(path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report.pop("imported_bayesirt") is False
    return report


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """One output folder of each kind, written by the command-line tool."""
    root = tmp_path_factory.mktemp("kinds")
    nuts = ["--method", "nuts", "--draws", "150", "--tune", "150", "--chains", "2", "--seed", "3"]
    assert main(["fit", "lsat6", *nuts, "--log-likelihood", "--out", str(root / "fit"), *QUIET]) == 0
    assert main(["ppc", "lsat6", *nuts, "--ppc-draws", "50", "--out", str(root / "ppc"), *QUIET]) == 0
    gaps = load("lsat7")
    y = gaps["responses"].values.copy()
    y[np.random.default_rng(1).random(y.shape) < 0.1] = -1
    save_responses(gaps.assign(responses=(gaps["responses"].dims, y, gaps["responses"].attrs)), root / "gaps.nc")
    assert main(["fit", str(root / "gaps.nc"), *nuts, "--log-likelihood", "--out", str(root / "gaps"), *QUIET]) == 0
    assert main(["mml", "lsat6", "--out", str(root / "mml"), *QUIET]) == 0
    assert main(["compare", "lsat6", "--specs", "rasch,2pl", "--method", "advi", "--draws", "100", "--kfold", "never",
                 "--out", str(root / "compare"), *QUIET]) == 0
    bench, _ = simulate_dif_benchmark(n_owners=60, n_items=120, seed=2)
    save_responses(bench, root / "bench.nc")
    assert main(["audit", str(root / "bench.nc"), "--quick", "--controls", "19", "--composition-bootstrap", "19", "--bayes",
                 "--bayes-draws", "60", "--out", str(root / "audit"), *QUIET]) == 0
    return root


@pytest.mark.slow
def test_a_fit_is_summarized_plotted_and_scored_by_plain_arviz(outputs):
    report = _client("fit", outputs / "fit" / "posterior.nc")
    rows = report["summary_rows"]
    # the spec's parameters only: no sampler coordinates (theta_mean, theta_deviation, intercept_centered)
    assert {r.split("[")[0] for r in rows} == {"theta", "discrimination", "intercept"}
    assert len(rows) == 1000 + 5 + 5 and "discrimination[Q3]" in rows
    assert report["ess_vars"] == ["discrimination", "intercept", "theta"] and 1.0 <= report["rhat_max"] < 1.2
    assert report["observed_dims"] == ["item", "model"] and report["observed_nan"] == 0
    assert report["constant_data"] == ["family", "item_group", "owner"]
    assert report["loo_dims"] == ["item", "model"] and -2600 < report["loo_elpd"] < -2300


@pytest.mark.slow
def test_missing_cells_are_nan_in_observed_data_and_log_likelihood(outputs):
    report = _client("gaps", outputs / "gaps" / "posterior.nc")
    tree = xr.open_datatree(outputs / "gaps" / "posterior.nc")
    n_missing = int(tree["observed_data"]["responses"].isnull().sum())
    assert n_missing > 300 and report["observed_nan"] == n_missing
    assert report["ll_dims"] == ["chain", "draw", "item", "model"] and report["ll_nan"] == n_missing
    assert report["loo_n"] == 5 * 1000 - n_missing and np.isfinite(report["loo_elpd"])


@pytest.mark.slow
def test_ppc_file_has_replicated_responses_for_loo_pit_and_ppc_plots(outputs):
    report = _client("ppc", outputs / "ppc" / "posterior.nc")
    assert {"posterior_predictive", "observed_data", "log_likelihood", "ppc_statistics"} <= set(report["groups"])
    assert report["pp_dims"] == ["chain", "draw", "item", "model"]
    assert 0 <= report["pit_range"][0] <= report["pit_range"][1] <= 1
    assert report["ppc_statistics_dims"] == ["item", "model", "replicate"]
    tree = xr.open_datatree(outputs / "ppc" / "posterior.nc")
    replicated, observed = tree["posterior_predictive"]["responses"], tree["observed_data"]["responses"]
    assert replicated.sizes["draw"] == tree["posterior"].sizes["draw"] == 150
    assert set(np.unique(replicated.values)) <= {0.0, 1.0}
    # replicated proportions correct track the observed ones (LSAT6 items are easy, Q3 hardest)
    np.testing.assert_allclose(replicated.mean(("chain", "draw", "model")), observed.mean("model"), atol=0.03)


@pytest.mark.slow
def test_mml_compare_and_audit_files_open_with_their_labels(outputs):
    mml = _client("mml", outputs / "mml" / "mml.nc")
    assert mml["n_items"] == 5 and {"discrimination", "discrimination_se", "difficulty"} <= set(mml["items_columns"])
    compare = _client("compare", outputs / "compare" / "elpd.nc")
    assert compare["elpd_dims"] == ["spec", "model"] and len(compare["elpd_totals"]) == 2
    audit = _client("audit", outputs / "audit" / "audit.nc")
    assert audit["bayes_rows"] == ["excess_pp", "low_dif_reversal_rate"] and audit["dif_rows"] == 120


def test_every_numeric_variable_is_compressed_and_float32_halves_the_draws(tmp_path):
    rng = np.random.default_rng(0)
    draws = xr.Dataset({"a": (("chain", "draw", "item"), rng.normal(size=(2, 300, 400)))})
    data = xr.Dataset({"y": (("item",), rng.integers(0, 2, 400).astype("int8")),
                       "label": (("item",), np.array([f"i{k}" for k in range(400)]))})
    source = xr.DataTree.from_dict({"posterior": draws, "observed_data": data})
    write_netcdf(source, tmp_path / "f64.nc")
    write_netcdf(source, tmp_path / "f32.nc", float32=True)
    f64, f32 = (xr.open_datatree(tmp_path / name) for name in ("f64.nc", "f32.nc"))
    for group, name in (("posterior", "a"), ("observed_data", "y")):
        encoding = f64[group][name].encoding
        assert encoding["zlib"] and encoding["shuffle"], (group, name)
    assert f64["posterior"]["a"].dtype == "float64" and f32["posterior"]["a"].dtype == "float32"
    assert f32["observed_data"]["y"].dtype == "int8"  # only draws change precision
    np.testing.assert_array_equal(f64["posterior"]["a"], draws["a"])
    np.testing.assert_allclose(f32["posterior"]["a"], draws["a"], rtol=1e-7)
    size64, size32 = ((tmp_path / n).stat().st_size for n in ("f64.nc", "f32.nc"))
    assert size32 < 0.6 * size64
