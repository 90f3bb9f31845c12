"""The near-tie leaderboard with uncertainty (issue 19 item 4): near_ties.csv of the Bayesian
audit, checked against the fold posteriors and a direct computation from the ability fit, and
P(a ahead of b) of ``bayesirt fit`` (models.csv ``prob_ahead_of_next``, ``--pairs all``)."""

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bayesirt.audit import AuditConfig, run_audit
from bayesirt.report.audit_files import write_audit
from bayesirt.audit.near_ties import CATEGORIES, COLUMNS, RESOLVED, ROBUST, categorize
from bayesirt.audit.ranking import pair_reversals
from bayesirt.cli.main import main
from bayesirt.data import simulate_dif_benchmark
from bayesirt.errors import DataError


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    ds, _ = simulate_dif_benchmark(n_owners=60, n_items=120, seed=2)
    config = AuditConfig(quick=True, controls=19, bootstrap=19, owner_bootstrap=19, bayes=True, bayes_draws=60,
                         bayes_controls=20)
    result = run_audit(ds, config, progress=False)
    out = write_audit(result, ds, tmp_path_factory.mktemp("ties") / "audit")
    return result, out, pd.read_csv(out / "near_ties.csv")


def test_near_ties_csv_lists_every_eligible_pair_with_model_a_ahead_on_the_full_score(audited):
    result, out, table = audited
    assert tuple(table.columns) == COLUMNS
    assert len(table) == result.summary["eligible_pairs"] > 0  # the deterministic eligibility
    for f in result.folds:
        rows = table[table["fold"] == f.audit_fold]
        target = f.target.set_index("model_id")
        full_a, full_b = target.loc[rows["model_a"], "full"].to_numpy(), target.loc[rows["model_b"], "full"].to_numpy()
        assert (full_a > full_b).all()
        np.testing.assert_allclose(rows["full_gap_pp"], 100 * (full_a - full_b))
        assert (target.loc[rows["model_a"], "family"].to_numpy() == rows["family_a"].to_numpy()).all()
        assert (target.loc[rows["model_b"], "owner"].to_numpy() == rows["owner_b"].to_numpy()).all()
        assert len(rows) == f.eligible == pair_reversals(target["full"], target["anchor"], f.pairs)[0].sum()
    for col in ("prob_a_ahead", "prob_reversal"):
        assert table[col].between(0, 1).all()


def test_prob_reversal_is_the_fold_posteriors_reversal_probability(audited):
    result, _, table = audited
    for f in result.folds:
        post = f.posterior
        by_pair = {frozenset(p): float(v) for p, v in zip(zip(post["model_i"].values.astype(str),
                                                              post["model_j"].values.astype(str)),
                                                          post["reversal_probability"].values)}
        rows = table[table["fold"] == f.audit_fold]
        expected = [by_pair[frozenset((a, b))] for a, b in zip(rows["model_a"], rows["model_b"])]
        np.testing.assert_allclose(rows["prob_reversal"], expected)
    assert table["prob_reversal"].nunique() > 1


def test_prob_a_ahead_agrees_with_the_fitted_ability_posterior(audited):
    result, _, table = audited
    theta = result.abilities["posterior"]["theta"]
    retained = result.population.loc[result.population["status"] == "retained", "model_id"].to_numpy(str)
    assert theta.sizes["model"] == retained.size  # all retained models, both halves
    draws = theta.stack(s=("chain", "draw")).transpose("s", "model").values
    pos = {m: k for k, m in enumerate(retained)}
    expected = [(draws[:, pos[a]] > draws[:, pos[b]]).mean() for a, b in zip(table["model_a"], table["model_b"])]
    np.testing.assert_allclose(table["prob_a_ahead"], expected)
    assert table["prob_a_ahead"].nunique() > 1
    assert result.summary["bayes"]["near_ties"]["draws"] == draws.shape[0] == 60
    assert result.summary["bayes"]["near_ties"]["method"] == "map"  # MAP-EM items, abilities given the items


def test_map_abilities_are_the_posterior_given_the_items():
    """fit_abilities(method="map"): draws of N(EAP, sd^2) from the MAP-EM items, so P(a ahead of b)
    approaches Phi((EAP_a - EAP_b) / sqrt(sd_a^2 + sd_b^2))."""
    from scipy.stats import norm

    from bayesirt.audit.near_ties import fit_abilities
    from bayesirt.data import simulate_pl
    from bayesirt.frequentist.mml import fit_mml

    ds = simulate_pl("2pl", n_items=60, n_models=30, seed=3)[0]
    tree = fit_abilities(ds, np.arange(30), draws=20_000, seed=1)
    theta = tree["posterior"]["theta"].values[0]
    ref = fit_mml(ds, "2pl", priors=True, se=False).abilities
    np.testing.assert_allclose(theta.mean(axis=0), ref["eap"].values, atol=0.02)
    np.testing.assert_allclose(theta.std(axis=0), ref["eap_sd"].values, rtol=0.03)
    a, b = 0, 1
    exact = norm.cdf((ref["eap"][a] - ref["eap"][b]) / np.hypot(ref["eap_sd"][a], ref["eap_sd"][b]))
    assert abs((theta[:, a] > theta[:, b]).mean() - exact) < 0.01


def test_categories_follow_the_thresholds_and_are_counted_in_summary_and_report(audited):
    result, out, table = audited
    resolved = table["prob_a_ahead"] >= RESOLVED
    expected = np.where(resolved & (table["prob_reversal"] <= ROBUST), CATEGORIES[0],
                        np.where(resolved, CATEGORIES[1], CATEGORIES[2]))
    assert (table["category"] == expected).all()
    info = json.loads((out / "summary.json").read_text())["bayes"]["near_ties"]
    assert info["counts"] == {c: int((table["category"] == c).sum()) for c in CATEGORIES}
    assert info["pairs"] == len(table) and info["ability_spec"] == "2pl"
    assert info["b_ahead_resolved"] == int((table["prob_a_ahead"] <= 1 - RESOLVED).sum())
    assert (out / "near_ties.png").stat().st_size > 0
    report = (out / "report.md").read_text()
    assert "## Near-tie leaderboard with uncertainty" in report and "near_ties.png" in report
    tree = xr.open_datatree(out / "audit.nc")
    group = tree["near_ties"].to_dataset()
    np.testing.assert_allclose(group["prob_a_ahead"].values, table["prob_a_ahead"])
    assert list(group["category"].values.astype(str)) == list(table["category"])


def test_categorize_at_the_boundaries():
    got = categorize([0.95, 0.95, 0.9499, 1.0, 0.2], [0.05, 0.0501, 0.0, 0.5, 0.9])
    assert list(got) == [CATEGORIES[0], CATEGORIES[1], CATEGORIES[2], CATEGORIES[1], CATEGORIES[2]]


def test_a_mirt_ability_spec_is_refused_before_any_work():
    ds, _ = simulate_dif_benchmark(n_owners=20, n_items=40, seed=1)
    with pytest.raises(DataError, match="needs a 1PL-4PL ability spec"):
        run_audit(ds, AuditConfig(quick=True, bayes=True, bayes_ability_spec="mirt"), progress=False)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    out = tmp_path_factory.mktemp("fit") / "lsat7"
    assert main(["fit", "lsat7", "--model", "2pl", "--method", "advi", "--advi-iterations", "500", "--draws", "50",
                 "--no-progress", "--pairs", "all", "--out", str(out)]) == 0
    return out


def test_models_csv_has_the_probability_of_being_ahead_of_the_next_model(fitted):
    models = pd.read_csv(fitted / "models.csv")
    theta = xr.open_datatree(fitted / "posterior.nc")["posterior"]["theta"]
    draws = theta.stack(s=("chain", "draw")).transpose("s", "model").sel(model=models["model_id"].to_numpy(str)).values
    expected = [(draws[:, k] > draws[:, k + 1]).mean() for k in range(len(models) - 1)]
    np.testing.assert_allclose(models["prob_ahead_of_next"].to_numpy()[:-1], expected)
    assert np.isnan(models["prob_ahead_of_next"].iloc[-1])
    assert models["prob_ahead_of_next"].iloc[:-1].between(0, 1).all()


def test_pairs_all_writes_the_full_matrix(fitted):
    pairs = xr.open_dataset(fitted / "pairs.nc")
    p = pairs["prob_ahead"]
    assert p.dtype == np.float32 and p.dims == ("model", "model_other")
    theta = xr.open_datatree(fitted / "posterior.nc")["posterior"]["theta"]
    draws = theta.stack(s=("chain", "draw")).transpose("s", "model").values
    assert list(pairs["model"].values.astype(str)) == list(theta["model"].values.astype(str))
    values = p.values.astype(np.float64)
    assert np.isnan(np.diag(values)).all()  # diagonal NaN: a model is not compared with itself
    ties = (draws[:, :, None] == draws[:, None, :]).mean(axis=0)
    off = ~np.eye(values.shape[0], dtype=bool)
    np.testing.assert_allclose((values + values.T + ties)[off], 1.0, atol=1e-6)  # antisymmetric up to ties
    for a, b in ((0, 1), (5, 900), (999, 3)):
        assert values[a, b] == pytest.approx((draws[:, a] > draws[:, b]).mean(), abs=1e-6)


def test_pairs_all_is_refused_for_the_marginal_map(tmp_path, capsys):
    assert main(["fit", "lsat7", "--method", "map", "--pairs", "all", "--no-progress", "--out",
                 str(tmp_path / "m")]) != 0
    assert "--pairs all needs posterior draws" in capsys.readouterr().err
