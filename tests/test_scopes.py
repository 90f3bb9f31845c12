"""The SAFE suite's item banks for several benchmarks (bayesirt.safety.scopes): each benchmark alone,
the sign-aligned composite with the reversed benchmark's responses flipped, one bank per latent
ability of the retained factor solution; and the suite running its item-level steps on each bank,
with the sandbagging direction reversed on a benchmark of polarity -1."""

import json

import numpy as np
import pandas as pd
import pytest

from bayesirt.data.datasets.simulate import simulate_pl
from bayesirt.data.io import save_responses
from bayesirt.errors import SpecError
from bayesirt.jobs.suite import _scope_options, read_structure, run_safety_suite
from bayesirt.safety.scopes import benchmark_scopes, pool_benchmarks


def _benchmarks(n_models=80, items=(12, 15, 10), seed=40):
    """Benchmarks of one ability; the last measures it reversed (its responses are 1 - y)."""
    theta = np.random.default_rng(seed).normal(size=n_models)
    out = {}
    for k, n in enumerate(items):
        ds, _ = simulate_pl("2pl", n_items=n, n_models=n_models, seed=seed + k, theta=theta)
        if k == len(items) - 1:
            y = ds["responses"].values
            ds = ds.copy(data={"responses": (1 - y).astype(y.dtype)})
        out[f"bench{k}"] = ds
    return out


def test_composite_reverses_the_negative_benchmark_and_keeps_the_others():
    data = _benchmarks()
    scopes = benchmark_scopes(data, {"bench0": 1, "bench1": 1, "bench2": -1})
    assert [s.name for s in scopes] == ["bench0", "bench1", "bench2", "composite"]
    assert [s.polarity for s in scopes] == [1, 1, -1, 1]
    composite = scopes[-1].responses
    assert composite.sizes["item"] == 37 and scopes[-1].members == {"bench0": 1, "bench1": 1, "bench2": -1}
    groups = composite["item_group"].values
    np.testing.assert_array_equal(composite["responses"].values[groups == "bench2"], 1 - data["bench2"]["responses"].values)
    np.testing.assert_array_equal(composite["responses"].values[groups == "bench0"], data["bench0"]["responses"].values)
    # aligned: every item's correlation with the pooled score is positive, as it is not without the flip
    y = composite["responses"].values.astype(float)
    rest = y.mean(axis=0)
    assert all(np.corrcoef(row, rest)[0, 1] > 0 for row in y)
    raw = pool_benchmarks(data).sel(item=composite["item"].values[groups == "bench2"])
    assert np.mean([np.corrcoef(row, rest)[0, 1] for row in raw["responses"].values.astype(float)]) < 0


def test_a_single_benchmark_is_its_own_and_only_bank():
    data = _benchmarks(items=(12,))
    scopes = benchmark_scopes(data, {"bench0": 1})
    assert len(scopes) == 1 and scopes[0].responses is data["bench0"]


def test_pooled_bank_names_are_reserved():
    data = _benchmarks()
    data["composite"] = data.pop("bench1")
    with pytest.raises(SpecError, match="rename those files"):
        benchmark_scopes(data, {})


def _factors_folder(tmp_path, loadings, retained, heywood=False):
    names = list(loadings.index)
    pd.DataFrame({"n_factors": [1, loadings.shape[1]], "heywood": [False, heywood]}).to_csv(
        tmp_path / "fit_indices.csv", index=False)
    pd.DataFrame({"benchmark": names, "polarity": [1, 1, 1, -1, 1, 1]}).to_csv(tmp_path / "polarity.csv", index=False)
    eig = np.array([3.0, 1.5, 0.8, 0.3, 0.2, 0.1])
    pd.DataFrame({"rank": range(1, 7), "observed_fa": eig,
                  "reference_fa": np.where(np.arange(6) < retained, eig - 0.1, eig + 0.1),
                  "observed_pc": eig, "reference_pc": eig}).to_csv(tmp_path / "parallel.csv", index=False)
    loadings.rename_axis("benchmark").to_csv(tmp_path / f"loadings_{loadings.shape[1]}.csv")
    pd.DataFrame({"F1": np.ones(6)}, index=pd.Index(names, name="benchmark")).to_csv(tmp_path / "loadings_1.csv")


def test_latent_abilities_from_the_retained_solution(tmp_path):
    names = ["harm", "sorry", "orb", "ahb", "truth", "dna"]
    loadings = pd.DataFrame({"F1": [0.9, 0.85, -0.7, 0.6, 0.05, 0.1], "F2": [0.1, 0.0, 0.2, 0.1, 0.8, 0.7]},
                            index=names)
    _factors_folder(tmp_path, loadings, retained=2)
    polarity, clusters = read_structure(tmp_path, names)
    assert polarity["ahb"] == -1 and polarity["harm"] == 1
    assert clusters == {"ability1": {"harm": 1, "sorry": 1, "orb": -1, "ahb": 1}, "ability2": {"truth": 1, "dna": 1}}
    # parallel analysis keeps one factor, or the two-factor solution is improper: no ability banks
    _factors_folder(tmp_path, loadings, retained=1)
    assert read_structure(tmp_path, names)[1] == {}
    _factors_folder(tmp_path, loadings, retained=2, heywood=True)
    assert read_structure(tmp_path, names)[1] == {}
    # no factors folder: the declared polarity, else +1
    assert read_structure(None, names, {"orb": -1}) == ({n: -1 if n == "orb" else 1 for n in names}, {})


def test_sandbagging_goes_the_other_way_on_a_reversed_benchmark():
    data = _benchmarks()
    scopes = {s.name: s for s in benchmark_scopes(data, {"bench2": -1})}
    assert _scope_options("sandbag", scopes["bench2"], {"direction": "up"})["direction"] == "down"
    assert _scope_options("sandbag", scopes["bench2"], {})["direction"] == "up"
    assert _scope_options("sandbag", scopes["composite"], {"direction": "up"})["direction"] == "up"
    assert _scope_options("cat", scopes["bench2"], {"splits": 2}) == {"splits": 2}


@pytest.mark.slow
def test_suite_runs_factors_first_and_each_step_on_every_bank(tmp_path):
    files = [str(save_responses(ds, tmp_path / f"{name}.nc")) for name, ds in _benchmarks().items()]
    out = run_safety_suite(files, tmp_path / "suite", steps=["sandbag", "cat", "factors"], progress=False,
                           options={"factors": {"loading_bootstrap": 0, "parallel_iter": 50, "polarity": {"bench2": -1}},
                                    "sandbag": {"test_length": 8, "shifts": [1.0]},
                                    "cat": {"budgets": [5], "splits": 2, "random_subsets": 3, "workers": 1}})
    record = json.loads((out / "summary.json").read_text())
    assert all(e["status"] == "finished" for e in record["steps"].values())
    assert pd.read_csv(out / "factors" / "polarity.csv", index_col="benchmark")["polarity"].to_dict() == {
        "bench0": 1, "bench1": 1, "bench2": -1}
    table = pd.read_csv(out / "sandbag" / "scopes.csv", index_col="scope")
    assert list(table.index) == ["bench0", "bench1", "bench2", "composite"]
    assert table["direction"].to_dict() == {"bench0": "down", "bench1": "down", "bench2": "up", "composite": "down"}
    assert table.loc["composite", "members"] == "bench0 bench1 -bench2" and table.loc["composite", "items"] == 37
    for scope in table.index:
        assert (out / "sandbag" / scope / "report.md").is_file() and (out / "cat" / scope / "cat.nc").is_file()
    tests = pd.read_csv(out / "cat" / "composite" / "static_tests.csv")
    assert len(tests) == 5 and set(tests["item_group"]) <= {"bench0", "bench1", "bench2"}
    assert "[composite](composite/report.md)" in (out / "cat" / "report.md").read_text()
    report = (out / "report.md").read_text()  # SAFE Table 5 across the suite, and the detectors per bank
    assert "## Composite alignment and recovery (SAFE Table 5)" in report and "cat_25_spearman" in report
    assert "## Sandbagging detectors per bank" in report and "| composite | uniform |" in report


@pytest.mark.slow
def test_two_latent_abilities_give_two_pooled_banks_with_their_static_tests(tmp_path):
    """Six benchmarks measuring two abilities (three each, correlated 0.3; each benchmark's own ability
    is 80% the shared one): the factors step retains two factors, and CAT runs on each ability's
    pooled bank, its static test drawn from its members."""
    rng = np.random.default_rng(60)
    n_models = 400
    theta = rng.multivariate_normal([0, 0], [[1, 0.3], [0.3, 1]], size=n_models)
    files = []
    for k in range(6):
        own = np.sqrt(0.8) * theta[:, k // 3] + np.sqrt(0.2) * rng.normal(size=n_models)
        ds, _ = simulate_pl("2pl", n_items=20, n_models=n_models, seed=70 + k, theta=own,
                            discrimination=rng.lognormal(0.5, 0.2, 20))
        files.append(str(save_responses(ds, tmp_path / f"b{k}.nc")))
    out = run_safety_suite(files, tmp_path / "suite", steps=["cat", "factors"], progress=False,
                           options={"factors": {"loading_bootstrap": 0, "parallel_iter": 50},
                                    "cat": {"budgets": [5], "splits": 2, "random_subsets": 2, "workers": 1}})
    table = pd.read_csv(out / "cat" / "scopes.csv", index_col="scope")
    assert list(table.index) == ["b0", "b1", "b2", "b3", "b4", "b5", "composite", "ability1", "ability2"]
    members = {table.loc[a, "members"] for a in ("ability1", "ability2")}
    assert members == {"b0 b1 b2", "b3 b4 b5"}
    for ability in ("ability1", "ability2"):
        tests = pd.read_csv(out / "cat" / ability / "static_tests.csv")
        assert set(tests["item_group"]) <= set(table.loc[ability, "members"].split()) and len(tests) == 5
