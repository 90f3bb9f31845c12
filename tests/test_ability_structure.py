"""Factor structure of fitted abilities (bayesirt.structure.ability_structure): the per-benchmark ability
matrix, the per-draw Bayesian factor analysis and the ``bayesirt factors`` job."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

# shared data fixture (test_factor.py; tests/ is on sys.path)
from test_factor import two_factor  # noqa: F401

from bayesirt.jobs.structure import run_factors_job
from bayesirt.structure.ability_structure import ability_matrix, read_abilities
from bayesirt.data.datasets.simulate import simulate_pl
from bayesirt.data.io import save_responses
from bayesirt.errors import BayesIRTError, DataError, OutputError
from bayesirt.structure.factor import factor_analysis


def _err(match):
    return pytest.raises(BayesIRTError, match=match)


def test_error_messages(two_factor, tmp_path):
    x = two_factor
    with pytest.raises(DataError, match="no such file"):
        read_abilities(tmp_path / "absent.csv")
    (tmp_path / "text.csv").write_text("model,a,b\nm1,0.1,high\nm2,0.2,low\n")
    with pytest.raises(DataError, match=r"column\(s\) \['b'\] are not numeric"):
        read_abilities(tmp_path / "text.csv")
    (tmp_path / "dup.csv").write_text("model,a,b\nm1,0.1,0.2\nm1,0.2,0.3\n")
    with pytest.raises(DataError, match="model ids in the first column repeat"):
        read_abilities(tmp_path / "dup.csv")
    with _err("at least 3 benchmarks; got 2"):
        ability_matrix({"a": None, "b": None})
    with _err("'method' parameter of ability_matrix"):
        ability_matrix({"a": None, "b": None, "c": None}, method="mml")
    with _err("'cohort' parameter of run_factors_job"):
        run_factors_job([tmp_path / "dup.csv"], tmp_path / "out", cohort="listwise")
    with _err(r"run_factors_job: loading_bootstrap must be 0 \(no intervals\) or at least 2 resamples; got 1"):
        run_factors_job([tmp_path / "dup.csv"], tmp_path / "out", loading_bootstrap=1)
    with _err("'rotation' parameter of run_factors_job"):
        run_factors_job([tmp_path / "dup.csv"], tmp_path / "out", rotation="promax")
    with _err("at least 3, one per benchmark, with distinct file names"):
        run_factors_job([tmp_path / "a" / "x.csv", tmp_path / "b" / "x.csv", tmp_path / "y.csv"], tmp_path / "out")
    with _err("The 'n_factors' parameter of run_factors_job must be a list of positive integers"):
        run_factors_job([tmp_path / "x.csv", tmp_path / "y.csv", tmp_path / "z.csv"], tmp_path / "out", n_factors=())
    (tmp_path / "taken").mkdir()
    with pytest.raises(OutputError, match="already exists; pass --force"):
        run_factors_job([tmp_path / "dup.csv"], tmp_path / "taken")


@pytest.fixture(scope="module")
def fitted():
    """Three simulated benchmarks (40 models x 30 items) sharing one ability, MAP-EM fits; one item of
    bench0 is made all-correct (it must be dropped)."""
    rng = np.random.default_rng(5)
    common = rng.standard_normal(40)
    datasets, truth = {}, {}
    for j, weight in enumerate((0.95, 0.9, 0.85)):
        truth[f"bench{j}"] = weight * common + np.sqrt(1 - weight ** 2) * rng.standard_normal(40)
        datasets[f"bench{j}"] = simulate_pl("2pl", n_items=30, n_models=40, seed=10 + j, theta=truth[f"bench{j}"])[0]
    datasets["bench0"]["responses"][0] = 1
    abilities = ability_matrix(datasets, seed=1, progress=False)
    return datasets, abilities, truth


def test_ability_matrix_by_map(fitted):
    datasets, abilities, truth = fitted
    assert abilities.attrs["method"] == "map" and set(abilities.data_vars) == {"ability", "ability_sd", "eap", "eap_sd"}
    assert abilities.attrs["estimate"] == "mode"  # SAFE: the posterior mode under a standard-normal prior
    assert list(abilities["benchmark"].values) == ["bench0", "bench1", "bench2"]
    dropped = json.loads(abilities.attrs["dropped_items"])
    assert dropped == {"bench0": [str(datasets["bench0"]["item"].values[0])], "bench1": [], "bench2": []}
    assert all(f["converged"] == 1 for f in json.loads(abilities.attrs["fits"]).values())
    means = abilities["ability"].to_pandas()
    assert all(np.corrcoef(means[b], truth[b])[0, 1] > 0.8 for b in means)
    assert np.all((abilities["ability_sd"] > 0.1) & (abilities["ability_sd"] < 1))  # MAP standard errors
    assert np.all((abilities["eap_sd"] > 0.1) & (abilities["eap_sd"] < 1))  # EAP posterior sds
    gap = np.abs(abilities["ability"] - abilities["eap"])  # two estimates of one posterior: close, not equal
    assert float(gap.max()) > 1e-3 and float(gap.mean()) < 0.2


@pytest.mark.slow
def test_job_on_ability_csv_writes_every_file(two_factor, tmp_path):
    frame = two_factor.set_axis([f"m{i:03d}" for i in range(300)])
    frame.to_csv(tmp_path / "abilities.csv", index_label="model")
    out = run_factors_job([tmp_path / "abilities.csv"], tmp_path / "out", n_factors=(1, 2, 3), parallel_iter=100,
                          progress=False)
    names = {p.name for p in out.iterdir()}
    assert names == {"factors.nc", "fit_indices.csv", "loadings_1.csv", "loadings_2.csv", "loadings_3.csv",
                     "phi_2.csv", "phi_3.csv", "parallel.csv", "polarity.csv", "composite.csv", "alignment.csv",
                     "report.md", "factor_selection.png"}
    table = pd.read_csv(out / "fit_indices.csv")
    assert list(table.columns[:6]) == ["n_factors", "chi2", "dof", "rmsea", "cfi", "tli"]
    assert table["cfi"].iloc[1] > 0.99 and table["rmsea"].iloc[0] > 0.1
    assert pd.read_csv(out / "parallel.csv").shape == (8, 5)
    tree = xr.open_datatree(out / "factors.nc", engine="h5netcdf")
    sol = tree["solutions"].to_dataset()
    assert dict(sol["loadings"].sizes) == {"n_factors": 3, "benchmark": 8, "factor": 3}
    assert np.isnan(sol["loadings"].sel(n_factors=1, factor="F2")).all()
    assert tree["abilities"]["ability"].dims == ("model", "benchmark")
    assert "CFI first reaches 0.95 at: 2" in (out / "report.md").read_text()
    run_factors_job([tmp_path / "abilities.csv"], out, n_factors=2, parallel_iter=20, progress=False, force=True)
    assert not (out / "loadings_1.csv").exists()


@pytest.mark.slow
def test_job_on_response_files_adds_bootstrap_intervals(fitted, tmp_path, monkeypatch):
    """The response-file branch, reusing the fitted abilities (ability_matrix is tested above)."""
    datasets, abilities, _ = fitted
    paths = []
    for name, ds in datasets.items():
        save_responses(ds, tmp_path / f"{name}.nc")
        paths.append(tmp_path / f"{name}.nc")
    seen = {}
    monkeypatch.setattr("bayesirt.structure.ability_structure.ability_matrix", lambda data, **kw: seen.update(data) or abilities)
    out = run_factors_job(paths, tmp_path / "out", n_factors=1, loading_bootstrap=50, parallel_iter=20, disattenuate=True,
                          progress=False)
    assert sorted(seen) == ["bench0", "bench1", "bench2"]
    raw = pd.read_csv(out / "loadings_1.csv")
    corrected_loadings = pd.read_csv(out / "loadings_corrected_1.csv")
    assert np.all(corrected_loadings["F1"].abs() > raw["F1"].abs())  # raw is the primary analysis, corrected beside
    assert {"fit_indices_corrected.csv", "parallel_corrected.csv"} <= {p.name for p in out.iterdir()}
    loadings = pd.read_csv(out / "loadings_1.csv")
    assert {"F1_lower", "F1_upper"} <= set(loadings.columns)
    assert np.all((loadings["F1_lower"] <= loadings["F1"]) & (loadings["F1"] <= loadings["F1_upper"]))
    tree = xr.open_datatree(out / "factors.nc", engine="h5netcdf")
    assert tree["bootstrap"]["loadings"].dims == ("n_factors", "replicate", "benchmark", "factor")
    corr = tree["correlation"].to_dataset()
    off = ~np.eye(3, dtype=bool)
    assert np.all(np.abs(corr["corrected"].values[off]) > np.abs(corr["correlation"].values[off]))  # disattenuated
    assert np.all((corr["reliability"] > 0.5) & (corr["reliability"] < 1))
    report = (out / "report.md").read_text()
    assert "from 50 bootstrap resamples of the models" in report and "Items without variance" in report
    assert "# Corrected for measurement error (option)" in report and "CFI corrected" in report
    assert "## Pair distinguishability" in report
    shares = pd.read_csv(out / "distinguishability.csv", index_col=0)["full_benchmark"]
    assert list(shares.index) == ["bench0", "bench1", "bench2", "any"] and 0 < shares["any"] <= 1
    polarity = pd.read_csv(out / "polarity.csv", index_col=0)
    assert list(polarity["polarity"]) == [1, 1, 1]
    out2 = run_factors_job(paths, tmp_path / "declared", n_factors=1, loading_bootstrap=0, parallel_iter=20,
                           polarity={"bench2": -1}, cohort="complete", progress=False)
    polarity = pd.read_csv(out2 / "polarity.csv", index_col=0)
    assert polarity.loc["bench2", "polarity"] == -1 and not polarity.loc["bench2", "agree"]
    assert "contradicts the sign" in (out2 / "report.md").read_text()
    composite = pd.read_csv(out2 / "composite.csv", index_col=0)["composite"]
    z = (abilities["ability"].to_pandas() - abilities["ability"].to_pandas().mean()) / abilities["ability"].to_pandas().std()
    np.testing.assert_allclose(composite.to_numpy(), ((z["bench0"] + z["bench1"] - z["bench2"]) / 3).to_numpy())


def _one_factor_abilities(loadings, n_models=150, seed=3):
    rng = np.random.default_rng(seed)
    g = rng.standard_normal(n_models)
    lam = np.asarray(loadings)
    x = g[:, None] * lam + rng.standard_normal((n_models, lam.size)) * np.sqrt(1 - lam ** 2)
    return pd.DataFrame(x, columns=[f"b{j}" for j in range(lam.size)],
                        index=pd.Index([f"m{i:03d}" for i in range(n_models)], name="model"))


@pytest.mark.parametrize("seed", [3, 4])
@pytest.mark.slow
def test_polarity_reverses_only_declared_and_auto_only_strong_negatives(tmp_path, seed):
    """SAFE App. D: only declared benchmarks are reversed; a strong negative loading (-.7) is named in
    report.md with its interval and reversed by auto, a weak one (-.15) never reversed."""
    frame = _one_factor_abilities([.8, .8, .7, .7, -.15, -.7], seed=seed)
    frame.to_csv(tmp_path / "abilities.csv")
    with pytest.warns(RuntimeWarning, match=r"b5: general-factor loading .* declare --polarity b5=-1 to reverse"):
        out = run_factors_job([tmp_path / "abilities.csv"], tmp_path / "default", n_factors=1, loading_bootstrap=200,
                              parallel_iter=20, seed=seed, progress=False)
    table = pd.read_csv(out / "polarity.csv", index_col="benchmark")
    assert (table["polarity"] == 1).all() and (table["source"] == "default").all()  # nothing reversed by default
    assert table.loc["b5", "upper"] < -0.3 and table.loc["b5", "auto_reversible"]
    assert not table.loc["b4", "auto_reversible"] and table.loc["b4", "lower"] < -0.15 < table.loc["b4", "upper"]
    assert (table.loc[["b0", "b1", "b2", "b3"], "lower"] > 0.4).all()
    report = (out / "report.md").read_text()
    assert "declare --polarity b5=-1 to reverse" in report and "Credibly negative, not reversed" in report
    composite = pd.read_csv(out / "composite.csv", index_col=0)["composite"]
    z = (frame - frame.mean()) / frame.std()
    np.testing.assert_allclose(composite.to_numpy(), z.mean(axis=1).to_numpy())  # as scored
    auto = run_factors_job([tmp_path / "abilities.csv"], tmp_path / "auto", n_factors=1, loading_bootstrap=200,
                           parallel_iter=20, seed=seed, polarity="auto", progress=False)
    table = pd.read_csv(auto / "polarity.csv", index_col="benchmark")
    assert table["polarity"].to_dict() == {"b0": 1, "b1": 1, "b2": 1, "b3": 1, "b4": 1, "b5": -1}
    assert table.loc["b5", "source"] == "auto"
    alignment = pd.read_csv(auto / "alignment.csv")
    row = alignment.set_index("composite").loc["composite"]
    assert row["flips"] == "b5" and row["signed"] > row["unflipped"] + 0.1
    declared = run_factors_job([tmp_path / "abilities.csv"], tmp_path / "declared", n_factors=1, loading_bootstrap=200,
                               parallel_iter=20, seed=seed, polarity={"b4": -1, "auto": True}, progress=False)
    table = pd.read_csv(declared / "polarity.csv", index_col="benchmark")
    assert table.loc["b4", "polarity"] == -1 and table.loc["b5", "polarity"] == -1
    assert list(table["source"]) == ["default"] * 4 + ["declared", "auto"]


def test_auto_polarity_needs_the_bootstrap(tmp_path):
    _one_factor_abilities([.8, .8, .7, -.7]).to_csv(tmp_path / "abilities.csv")
    with _err("polarity='auto' reverses only loadings whose bootstrap interval"):
        run_factors_job([tmp_path / "abilities.csv"], tmp_path / "out", loading_bootstrap=0, polarity="auto")
    with _err("The 'polarity' parameter of parse_polarity must be 'auto' or a mapping"):
        run_factors_job([tmp_path / "abilities.csv"], tmp_path / "out", polarity="detect")
    with _err("disattenuate needs response files"):
        run_factors_job([tmp_path / "abilities.csv"], tmp_path / "out", disattenuate=True)


def test_short_test_distinguishability_and_ability_matched_pairs(fitted):
    """SAFE's 40-item check: abilities from a short maximum-information test separate fewer pairs than
    the full benchmark; pairs it cannot separate anywhere are listed with their item disagreements."""
    from bayesirt.structure.ability_structure import ability_matched_pairs, pair_distinguishability

    datasets, _, _ = fitted
    abilities = ability_matrix(datasets, seed=1, test_length=8, progress=False)
    assert abilities.attrs["test_length"] == 8
    short, short_sd = abilities["test_ability"].to_pandas(), abilities["test_ability_sd"].to_pandas()
    assert (short_sd.to_numpy() > abilities["ability_sd"].to_numpy()).mean() > 0.9  # 8 items: wider
    full = pair_distinguishability(abilities["ability"].to_pandas(), abilities["ability_sd"].to_pandas())
    brief = pair_distinguishability(short, short_sd)
    assert brief["any"] < full["any"]
    pairs, summary = ability_matched_pairs(short, short_sd, datasets)
    assert summary["pairs"] == 40 * 39 // 2 and summary["matched"] == len(pairs) > 0
    assert summary["distinguished_share"] == pytest.approx(brief["any"])
    assert (pairs["largest_z"] <= 1.96).all() and (pairs["shared_items"] <= 90).all()
    a, b = pairs.iloc[0][["model_a", "model_b"]]
    manual = sum(int(((ds["responses"].sel(model=a) >= 0) & (ds["responses"].sel(model=b) >= 0)
                      & (ds["responses"].sel(model=a) != ds["responses"].sel(model=b))).sum())
                 for ds in datasets.values())
    assert pairs.iloc[0]["disagreements"] == manual


def test_polarity_option_forms_and_the_suite_accepts_them():
    from bayesirt.jobs.suite import check_step_options
    from bayesirt.structure.polarity import parse_polarity

    assert parse_polarity(None) == ({}, False) and parse_polarity("auto") == ({}, True)
    assert parse_polarity({"orbench_hard": -1}) == ({"orbench_hard": -1}, False)
    assert parse_polarity({"orbench_hard": -1, "auto": True}) == ({"orbench_hard": -1}, True)
    with _err("The 'polarity' parameter of parse_polarity must be a mapping whose 'auto' is true or false"):
        parse_polarity({"auto": "yes"})
    for value in ("auto", {"orbench_hard": -1, "auto": True}):
        check_step_options(["factors"], {"factors": {"polarity": value, "disattenuate": True, "test_length": 40}})
