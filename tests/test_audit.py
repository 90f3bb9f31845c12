"""The primary near-tie audit end to end (NT 3, C, D.1): cross-fitting never lets a half's
responses choose its own anchors, planted DIF is recovered, outputs are complete and labelled,
and the numbers do not depend on the number of workers."""

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy.stats import rankdata

from bayesirt.audit import AuditConfig, run_audit
from bayesirt.cli.main import main
from bayesirt.data import simulate_dif_benchmark
from bayesirt.jobs.audit import run_audit_job
from bayesirt.report.audit_files import write_audit

SMALL = AuditConfig(quick=True, controls=39, composition_bootstrap=39, owner_bootstrap=39)


@pytest.fixture(scope="module")
def bench():
    return simulate_dif_benchmark(n_owners=90, n_items=120, seed=3)


@pytest.fixture(scope="module")
def audit(bench):
    return run_audit(bench[0], SMALL, progress=False)


def _auc(score, label):
    r = rankdata(score)
    n1, n0 = label.sum(), (~label).sum()
    return (r[label].sum() - n1 * (n1 + 1) / 2) / (n1 * n0)


def test_owners_are_never_in_both_halves_and_targets_are_the_other_half(audit):
    pop = audit.population
    retained = pop[pop["status"] == "retained"]
    assert (retained.groupby("owner")["fold"].nunique() == 1).all()
    for fold in audit.folds:
        target_owners = set(fold.target["owner"])
        audit_owners = set(retained.loc[retained["fold"] == fold.audit_fold, "owner"])
        assert target_owners and not target_owners & audit_owners
        assert set(fold.selection.validation_owners) <= audit_owners


def test_summary_pools_counts_and_weights_restore_cells(audit):
    s = audit.summary
    assert s["status"] == "estimated"
    assert s["eligible_pairs"] == sum(f.eligible for f in audit.folds) > 0
    assert s["low_dif_reversal_rate"] == pytest.approx(sum(f.reversed for f in audit.folds) / s["eligible_pairs"])
    c = audit.controls.sel(pair_set="primary")
    assert float(c["observed_rate"]) == pytest.approx(s["low_dif_reversal_rate"])
    assert c.sizes["replicate"] == 39 and float(c["min_resolvable_p"]) == pytest.approx(1 / 40)
    for fold in audit.folds:
        pur = fold.purification
        assert pur.weights.sum() == pytest.approx(120)
        np.testing.assert_allclose(np.bincount(pur.cell, weights=pur.weights), np.bincount(pur.cell))
        assert fold.selection.k <= 32  # quick


def test_a_half_never_chooses_its_anchors_from_the_other_halfs_responses(bench, audit):
    ds = bench[0]
    pop = audit.population
    other = np.flatnonzero((pop["fold"] == 1).to_numpy())
    y = ds["responses"].values.copy()
    rng = np.random.default_rng(0)
    for m in other:  # shuffle items within each fold-1 model: accuracies (hence the population) unchanged
        y[:, m] = rng.permutation(y[:, m])
    perturbed = ds.copy(deep=True)
    perturbed["responses"].values[:] = y
    again = run_audit(perturbed, SMALL, progress=False)
    assert again.population.equals(pop)
    before, after = audit.folds[0], again.folds[0]  # audit half 0 chose these from its own responses
    assert after.selection.k == before.selection.k
    np.testing.assert_array_equal(after.purification.selected, before.purification.selected)
    np.testing.assert_array_equal(after.purification.weights, before.purification.weights)
    assert not np.array_equal(after.target["anchor"], before.target["anchor"])  # its targets did change


@pytest.mark.slow
def test_planted_dif_ranks_above_clean_items():
    ds, truth = simulate_dif_benchmark(n_owners=400, n_items=120, seed=5)  # ~200 models per family per half
    result = run_audit(ds, SMALL, progress=False)
    for fold in result.folds:
        assert _auc(fold.purification.final_fit.dif_range, truth["dif_items"]) >= 0.9


def test_no_eligible_pair_is_an_explicit_non_estimable_result(bench):
    result = run_audit(bench[0], AuditConfig(quick=True, epsilon=1e-4), progress=False)  # below 1/120
    assert result.summary["status"] == "not estimable" and "no different-owner" in result.summary["reason"]
    assert result.controls is None and result.summary["eligible_pairs"] == 0


@pytest.mark.slow
def test_same_numbers_with_one_and_two_workers(bench, audit):
    two = run_audit(bench[0], SMALL, workers=2, progress=False)
    xr.testing.assert_identical(two.controls, audit.controls)
    xr.testing.assert_identical(two.composition, audit.composition)


@pytest.mark.slow
def test_job_writes_every_table_and_a_labelled_tree(bench, tmp_path):
    out = run_audit_job(bench[0], tmp_path / "audit", config=SMALL, progress=False)
    names = {p.name for p in out.iterdir()}
    assert {"audit.nc", "summary.json", "report.md", "controls.png", "population.csv", "random_controls.csv",
            "composition_bootstrap.csv", "owner_bootstrap.csv"} <= names
    for h in (0, 1):
        assert {f"fold{h}_{t}.csv" for t in ("dimension_cv", "purification", "anchors", "scores")} <= names
    summary = json.loads((out / "summary.json").read_text())
    for key in ("eligible_pairs", "reversals", "low_dif_reversal_rate", "matched_random_median", "excess_pp",
                "p_value", "min_resolvable_p", "mean_tau_b", "selected_k", "anchor_counts", "status", "warnings",
                "config", "input_sha256"):
        assert key in summary
    assert len(summary["folds"][0]["dimension_cv"]) >= 3
    tree = xr.open_datatree(out / "audit.nc")
    assert {"population", "fold0", "fold1", "controls", "composition", "owners", "replication_signatures",
            "replication_groups", "replication_contributions"} <= set(tree.children)
    assert set(summary["replication"]) == {"median_rho", "overlap", "agreement"}
    assert "signature replication" in (out / "report.md").read_text()
    assert tree["fold0"]["family_effect"].dims == ("item", "family")
    assert list(tree["fold0"]["item"].values[:2]) == list(bench[0]["item_id"].values[:2])


@pytest.mark.slow
def test_cli_audit_and_its_errors(bench, tmp_path, capsys):
    path = tmp_path / "bench.nc"
    bench[0].to_netcdf(path)
    assert main(["audit", str(path), "--out", str(tmp_path / "a"), "--quick", "--controls", "19", "--composition-bootstrap", "19",
                 "--matched", "--profiles", "--no-progress"]) == 0
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert set(summary["matched_controls"]) >= {"excess_pp", "p_value", "g_ratio", "citc_ratio"}
    assert {"matched", "profiles"} <= set(xr.open_datatree(tmp_path / "a" / "audit.nc").children)
    assert set(summary["profiles"]) == {"unconstrained", "caliper 0.25", "caliper 0.5", "caliper 1.0", "random"}
    assert main(["audit", str(path), "--out", str(tmp_path / "a"), "--quick", "--no-progress"]) == 3  # exists
    assert "exists" in capsys.readouterr().err
    assert main(["audit", str(path), "--out", str(tmp_path / "b"), "--min-family-size", "500", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayesirt: error:") and "famil" in err


@pytest.mark.slow
def test_declared_audit_analysis_runs_through_bayesirt_run(tmp_path):
    from bayesirt.jobs.analysis import load_analysis, run_analysis

    declared = load_analysis("analyses/near_tie_audit.toml")
    assert declared["kind"] == "audit" and declared["options"]["controls"] == 1000
    small = tmp_path / "a.toml"
    small.write_text('[analysis]\nkind = "audit"\ndata = "simulate_dif_benchmark"\nout = "' + str(tmp_path / "o")
                     + '"\n[simulate]\nn_owners = 60\nn_items = 80\nseed = 1\n[audit]\nquick = true\ncontrols = 9\n'
                     'composition_bootstrap = 9\nowner_bootstrap = 9\n')
    out = run_analysis(small, progress=False)
    assert json.loads((out / "summary.json").read_text())["config"]["controls"] == 9


@pytest.mark.slow
def test_bayesian_layer_reports_posterior_summaries_and_writes_them(tmp_path):
    ds, _ = simulate_dif_benchmark(n_owners=60, n_items=120, seed=2)
    config = AuditConfig(quick=True, controls=19, composition_bootstrap=19, owner_bootstrap=19, bayes=True, bayes_draws=60,
                         bayes_controls=20, bayes_method="advi", bayes_prior="hierarchical")
    result = run_audit(ds, config, progress=False)
    bayes = result.summary["bayes"]
    lo, mid, hi = bayes["excess_pp_q05_q50_q95"]
    assert lo <= mid <= hi and 0 < bayes["draw_p_value_q05_q50_q95"][1] <= 1 and bayes["controls_per_draw"] == 20
    assert all(g["max_abs_delta_diff"] < 1e-2 for g in bayes["schedule_gap"])
    for fold in result.folds:
        p = fold.posterior["anchor_probability"]
        assert p.dims == ("item",) and float(p.sum()) == pytest.approx(
            float(fold.posterior["anchor"].sum("item").mean()))  # expected anchor count
    out = write_audit(result, ds, tmp_path / "b")
    tree = xr.open_datatree(out / "audit.nc")
    assert "excess_pp" in tree["bayes"] and "anchor_probability" in tree["bayes"]["fold_0"]
    assert "learned common scale" in (out / "report.md").read_text()


def test_within_family_specificity_by_hand(audit):
    from bayesirt.audit.diagnostics.specificity import within_family_specificity

    w = audit.summary["within_family"]
    c = audit.controls
    cross, within = c["rate"].sel(pair_set="primary").values, c["rate"].sel(pair_set="within").values
    g_obs = float(c["observed_rate"].sel(pair_set="primary") - c["observed_rate"].sel(pair_set="within"))
    g = (cross - within)[np.isfinite(cross - within)]
    assert w["specificity_pp"] == pytest.approx(100 * (g_obs - np.median(g)))
    assert w["specificity_p"] == pytest.approx((1 + (g >= g_obs).sum()) / (g.size + 1))
    assert 0 < w["within_pairs"] <= sum(f.within_pairs[0].size for f in audit.folds)  # ties leave the denominator
    assert within_family_specificity(c) == w


@pytest.mark.slow
def test_threshold_and_fraction_curves_reuse_the_primary_run(bench, audit, tmp_path):
    config = AuditConfig(quick=True, controls=39, composition_bootstrap=39, owner_bootstrap=39, sensitivity=True)
    result = run_audit(bench[0], config, progress=False)
    s = result.sensitivity
    primary = s.sel(anchor_fraction=0.5, threshold=1.0)
    assert float(primary["low_dif_rate"]) == pytest.approx(audit.summary["low_dif_reversal_rate"])
    c = audit.controls.sel(pair_set="primary")  # same seed: the primary replicates at the primary settings
    assert float(primary["random_median"]) == pytest.approx(float(c["median"]))
    assert float(primary["p_value"]) == pytest.approx(float(c["p_value"]))
    assert (np.diff(s["eligible"].values, axis=1) >= 0).all()  # wider bands hold more pairs
    assert list(s["anchors"].sel(anchor_fraction=0.5).values) == audit.summary["anchor_counts"]
    assert (s["anchors"].sel(anchor_fraction=0.3).values < s["anchors"].sel(anchor_fraction=0.7).values).all()
    out = write_audit(result, bench[0], tmp_path / "s")
    assert {"sensitivity.csv", "sensitivity.png"} <= {p.name for p in out.iterdir()}
    assert "Score-gap thresholds" in (out / "report.md").read_text()


@pytest.mark.parametrize("kwargs, message", [
    ({"anchor_fraction": 0}, r"The 'anchor_fraction' parameter of AuditConfig must be a number in \(0, 1\]; got 0."),
    ({"controls": 0}, r"The 'controls' parameter of AuditConfig must be a positive integer; got 0."),
    ({"bayes_method": "mcmc"}, r"The 'bayes_method' parameter of AuditConfig must be one of"),
    ({"bayes_prior": "flat"}, r"The 'bayes_prior' parameter of AuditConfig must be one of"),
    ({"max_k": 0}, r"'max_k' parameter of AuditConfig must be a positive integer or None"),
])
def test_bad_settings_fail_before_any_work(kwargs, message):
    from bayesirt.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        AuditConfig(**kwargs)


@pytest.mark.slow
def test_population_perturbations_freeze_k_and_rerun_each_population(bench, audit):
    from dataclasses import replace

    from bayesirt.audit.perturbations import perturbation_pass, perturbations, population_perturbations

    configs = perturbations(audit)
    assert set(configs) == {"owner cap 1", "owner cap 3", "lexicographic representative", "lineage filter",
                            "omit Gemma", "omit Llama", "omit Qwen"}
    assert all(c.fixed_k == tuple(audit.summary["selected_k"]) and c.controls == 200 for c in configs.values())
    small = replace(audit, config=replace(audit.config, controls=19))
    table = population_perturbations(small, bench[0])
    assert len(table) == 7
    # with one model per owner and family already, caps 1 and 3 and the lexicographic rule keep the population
    same = table.set_index("perturbation").loc[["owner cap 1", "owner cap 3", "lexicographic representative"]]
    assert (same["low_dif_rate"] == audit.summary["low_dif_reversal_rate"]).all()
    omit = table.set_index("perturbation").loc["omit Qwen"]
    assert omit["models"] < (audit.population["status"] == "retained").sum()
    both = perturbation_pass(pd.DataFrame([[1.0, -1.0]] * 3 + [[-1.0, 1.0]] * 2, columns=["a", "b"]),
                             pd.DataFrame([[0.01, 0.5]] * 5, columns=["a", "b"]))
    assert both["passes"].tolist() == [True, False] and both["G_dir"].tolist() == [3, 2]


@pytest.mark.slow
def test_direct_mirt_adjustment_runs_the_same_audit_with_its_own_k_rule():
    ds, _ = simulate_dif_benchmark(n_owners=60, n_items=120, n_dims=2, seed=4)
    result = run_audit(ds, AuditConfig(quick=True, controls=9, composition_bootstrap=9, owner_bootstrap=9,
                                       adjustment="direct-mirt", max_k=4), progress=False)
    for fold in result.folds:
        assert "joint_updates" in fold.selection.table  # selected by the direct model's held-out loss
        assert fold.purification.adjustment == "direct-mirt"
        assert fold.purification.weights.sum() == pytest.approx(120)
    assert result.summary["status"] == "estimated"


@pytest.mark.slow
def test_bayes_mirt_adjustment_offsets_track_the_direct_ones():
    """The PyMC MIRT adjustment gives offsets of the same shape and close to the direct MIRT's."""
    from bayesirt.audit.adjustment.bayes_mirt import bayes_mirt_offsets
    from bayesirt.audit.adjustment.joint_mirt import direct_offsets

    ds, _ = simulate_dif_benchmark(n_owners=40, n_items=80, n_dims=2, seed=6)
    y = ds["responses"].values
    observed = y != -1
    rows = np.arange(0, 80, 2)
    bayes, rank = bayes_mirt_offsets(y, observed, rows, 2, seed=1)
    direct, _ = direct_offsets(y, observed, rows, 2, seed=1)
    assert bayes.shape == y.shape and rank == 2 and np.abs(bayes).max() <= 6
    assert np.corrcoef(bayes.ravel(), direct.ravel())[0, 1] > 0.8


def test_max_k_above_the_training_rank_is_named_not_silently_capped(bench):
    config = AuditConfig(max_k=500, controls=9, composition_bootstrap=9, owner_bootstrap=9)
    with pytest.warns(UserWarning, match=r"max_k = 500 is above the rank a 120 items x \d+ models training matrix "
                                         r"supports \(\d+\); K is chosen from \[1, 2, 4"):
        result = run_audit(bench[0], config, progress=False)
    assert all(k <= 120 for k in result.summary["selected_k"])
