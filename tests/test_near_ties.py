"""The near-tie leaderboard with uncertainty (issues 19 item 4 and 29): near_ties.csv of the Bayesian
audit, checked against the fold posteriors, a direct count of each pair's discordant items, the
per-draw controls and a direct computation from the ability fit, and P(a ahead of b) of
``bayesirt fit`` (models.csv ``prob_ahead_of_next``, ``--pairs all``)."""

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy.stats import false_discovery_control

from bayesirt.audit import AuditConfig, run_audit
from bayesirt.audit.bayes.near_ties import CATEGORIES, COLUMNS, RESOLVED, ROBUST, SENSITIVE_P, excess_interval
from bayesirt.audit.engine.ranking import pair_reversals
from bayesirt.cli.main import main
from bayesirt.data import simulate_dif_benchmark
from bayesirt.errors import DataError
from bayesirt.report.audit_files import write_audit

# module fixtures fit models (seconds to minutes under load): the whole module is in the slow tier
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    ds, _ = simulate_dif_benchmark(n_owners=60, n_items=120, seed=2)
    config = AuditConfig(quick=True, controls=19, composition_bootstrap=19, owner_bootstrap=19, bayes=True, bayes_draws=60,
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
    for col in ("prob_a_ahead", "prob_theta_a_ahead", "prob_reversal", "random_reversal_rate", "mcnemar_p", "excess_p"):
        assert table[col].between(0, 1).all()
    assert (table["gap_lower_pp"] < table["gap_upper_pp"]).all()


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


def test_prob_theta_a_ahead_agrees_with_the_fitted_ability_posterior(audited):
    result, _, table = audited
    theta = result.abilities["posterior"]["theta"]
    retained = result.population.loc[result.population["status"] == "retained", "model_id"].to_numpy(str)
    assert theta.sizes["model"] == retained.size  # all retained models, both halves
    draws = theta.stack(s=("chain", "draw")).transpose("s", "model").values
    pos = {m: k for k, m in enumerate(retained)}
    expected = [(draws[:, pos[a]] > draws[:, pos[b]]).mean() for a, b in zip(table["model_a"], table["model_b"])]
    np.testing.assert_allclose(table["prob_theta_a_ahead"], expected)
    assert table["prob_theta_a_ahead"].nunique() > 1
    assert result.summary["bayes"]["near_ties"]["draws"] == draws.shape[0] == 60
    assert result.summary["bayes"]["near_ties"]["method"] == "map"  # MAP-EM items, abilities given the items


def test_prob_a_ahead_is_the_paired_accuracy_model_of_the_pairs_own_responses(audited):
    """Discordant counts recounted item by item from the response matrix, then the one-group exact
    formula or the paired model itself (the benchmark has several item groups)."""
    from bayesirt.audit.bayes.paired import paired_accuracy

    result, _, table = audited
    ds = result_responses()
    y, groups = ds["responses"].values, ds["item_group"].values.astype(str)
    ids = ds["model_id"].values.astype(str)
    col = {m: k for k, m in enumerate(ids)}
    labels = sorted(set(groups), key=list(groups).index)
    rows = table.sample(25, random_state=0)
    for _, row in rows.iterrows():
        ya, yb = y[:, col[row["model_a"]]], y[:, col[row["model_b"]]]
        n10 = [int(((ya == 1) & (yb == 0) & (groups == g)).sum()) for g in labels]
        n01 = [int(((ya == 0) & (yb == 1) & (groups == g)).sum()) for g in labels]
        n = [int((groups == g).sum()) for g in labels]
        assert (row["n10"], row["n01"]) == (sum(n10), sum(n01))
        ref = paired_accuracy([n10], [n01], [n], draws=50_000, seed=9).iloc[0]
        assert row["prob_a_ahead"] == pytest.approx(ref["prob_a_ahead"], abs=0.03)  # 2,000 draws in the audit
        assert row["gap_lower_pp"] == pytest.approx(100 * ref["gap_lower"], abs=1.0)  # quantile SE ~0.25 pp
        assert row["gap_upper_pp"] == pytest.approx(100 * ref["gap_upper"], abs=1.0)
        assert row["full_gap_pp"] == pytest.approx(100 * (sum(n10) - sum(n01)) / sum(n))  # complete data
    # the full-score gap is 1-2 items of 60 per half, so the accuracy data cannot resolve any pair
    assert (table["prob_a_ahead"] < RESOLVED).all() and (table["prob_a_ahead"] > 0.5).all()


def result_responses():
    return simulate_dif_benchmark(n_owners=60, n_items=120, seed=2)[0]


def test_random_reversal_rate_comes_from_the_draws_own_controls(audited):
    result, _, table = audited
    for f in result.folds:
        post = f.posterior
        rate = post["control_reversal_rate"].transpose("draw", "pair").values
        controls = post.sizes["replicate"]
        # every draw's per-pair rates add up to its pooled count of reversing controls
        np.testing.assert_allclose(rate.sum(axis=1) * controls, post["control_reversed"].sum("replicate").values,
                                   rtol=1e-5)
        by_pair = {frozenset(p): k for k, p in enumerate(zip(post["model_i"].values.astype(str),
                                                             post["model_j"].values.astype(str)))}
        rows = table[table["fold"] == f.audit_fold]
        k = [by_pair[frozenset((a, b))] for a, b in zip(rows["model_a"], rows["model_b"])]
        np.testing.assert_allclose(rows["random_reversal_rate"], rate[:, k].mean(axis=0), rtol=1e-6)
        excess, lower, upper = excess_interval(post["reversed"].transpose("draw", "pair").values[:, k], rate[:, k])
        np.testing.assert_allclose(rows["excess_reversal"], rows["prob_reversal"] - rows["random_reversal_rate"],
                                   atol=1e-6)
        np.testing.assert_allclose(rows["excess_lower"], lower, atol=1e-9)
    assert table["random_reversal_rate"].nunique() > 1


def test_excess_interval_by_hand():
    reversed_ = np.array([[1, 0], [1, 0], [0, 0], [1, 0]], dtype=bool)
    rate = np.array([[0.5, 0.0], [0.25, 0.0], [0.25, 0.0], [0.0, 0.0]])
    excess, lower, upper = excess_interval(reversed_, rate)
    e = np.array([0.5, 0.75, -0.25, 1.0])
    half = 1.6448536269514722 * e.std(ddof=1) / 2
    np.testing.assert_allclose(excess, [e.mean(), 0.0])
    np.testing.assert_allclose(lower, [e.mean() - half, 0.0])
    np.testing.assert_allclose(upper, [e.mean() + half, 0.0])


def test_map_abilities_are_the_posterior_given_the_items():
    """fit_abilities(method="map"): draws of N(EAP, sd^2) from the MAP-EM items, so P(a ahead of b)
    approaches Phi((EAP_a - EAP_b) / sqrt(sd_a^2 + sd_b^2))."""
    from scipy.stats import norm

    from bayesirt.audit.bayes.near_ties import fit_abilities
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
    resolved = (table["prob_a_ahead"] >= RESOLVED) | (table["prob_a_ahead"] <= 1 - RESOLVED)
    robust = (table["prob_reversal"] <= ROBUST) & (table["random_reversal_rate"] <= ROBUST)
    old = np.minimum(1, table["random_reversal_rate"] / table["prob_reversal"].where(table["prob_reversal"] > 0)).fillna(1)
    np.testing.assert_allclose(table["excess_p"], old, atol=1e-6)
    assert ((table["dif_p"] >= 1 / 1001 - 1e-12) & (table["dif_p"] <= 1)).all()  # floor 1 / (PERMUTATIONS + 1)
    np.testing.assert_allclose(table["dif_q"], false_discovery_control(table["dif_p"]))  # BH over the whole table
    assert (table["dif_sensitive"] == (table["dif_q"] <= SENSITIVE_P)).all()
    dif = table["dif_q"]
    expected = np.where(resolved, np.where(robust, CATEGORIES[0], np.where(dif <= SENSITIVE_P, CATEGORIES[1],
                                                                             CATEGORIES[2])), CATEGORIES[3])
    assert (table["category"] == expected).all()
    info = json.loads((out / "summary.json").read_text())["bayes"]["near_ties"]
    assert info["counts"] == {c: int((table["category"] == c).sum()) for c in CATEGORIES}
    assert info["pairs"] == len(table) and info["ability_spec"] == "2pl"
    assert info["b_ahead_resolved"] == int((table["prob_a_ahead"] <= 1 - RESOLVED).sum())
    assert (out / "near_ties.png").stat().st_size > 0
    report = (out / "report.md").read_text()
    assert "## Near-tie leaderboard with uncertainty" in report and "near_ties.png" in report
    for name in ("prob_a_ahead", "prob_a_ahead_mcse", "both_gap_pp", "prob_theta_a_ahead", "prob_reversal",
                 "random_reversal_rate", "mcnemar_p", "dif_p", "dif_q", "dif_sensitive"):
        assert f"- `{name}`: " in report  # one sentence per probability: what it is of, what it conditions on
    assert "never .95" not in report and "prob_exceeds_random" not in report
    assert "conditional on the spectral working model" in report
    tree = xr.open_datatree(out / "audit.nc")
    group = tree["near_ties"].to_dataset()
    np.testing.assert_allclose(group["prob_a_ahead"].values, table["prob_a_ahead"])
    assert "expected accuracy" in group["prob_a_ahead"].attrs["description"]
    assert list(group["category"].values.astype(str)) == list(table["category"])
    assert "conditional on the spectral working model" in tree["bayes"].attrs["conditional_on"]
    assert tree.attrs["bayes_intervals"].startswith("conditional on the spectral working model")
    assert tree["bayes"].attrs["newton_capped_draws"] == 0


def test_excess_p_is_valid_when_the_anchors_are_a_random_recomposition():
    """Under the null the anchors of every draw are a blueprint-matched random subset: a pair that
    random subsets reverse at rate r reverses in each draw with probability r. Whether the draws
    share one subset (a concentrated posterior) or not (a diffuse one), P(excess_p <= .05) <= .05."""
    from bayesirt.audit.bayes.near_ties import excess_p

    rng = np.random.default_rng(3)
    for r in (0.01, 0.04, 0.05, 0.2, 0.6):
        one = rng.random(20_000) < r  # every draw the same subset
        many = (rng.random((20_000, 50)) < r).mean(axis=1)  # 50 draws, independent subsets
        for prob in (one.astype(float), many):
            assert (excess_p(prob, np.full(prob.size, r)) <= SENSITIVE_P).mean() <= SENSITIVE_P + 0.005
    np.testing.assert_allclose(excess_p([0.0, 0.5, 0.9, 0.2], [0.0, 0.01, 0.9, np.nan]), [1.0, 0.02, 1.0, np.nan])


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


def test_pair_dif_p_by_hand_valid_under_the_null_and_powerful_under_dif():
    """T = sum_i d_i (y_ia - y_ib) against within-stratum permutations of d: a hand case; under the
    null (d unrelated to the responses) P(p <= .05) <= .05; DIF that favours a's family on its items
    is found at a near tie."""
    from bayesirt.audit.bayes.pair_dif import pair_dif_p

    y = np.array([[1, 0], [1, 0], [0, 1], [1, 1]])
    obs = np.ones_like(y, dtype=bool)
    delta = np.array([[1.0, 0.0], [0.5, 0.0], [0.0, 0.0], [-1.0, 0.0]])  # family 0 favoured on items 0-1
    pairs = (np.array([0]), np.array([1]))
    p = pair_dif_p(y, obs, np.zeros(4), delta, [0], [1], pairs, permutations=2000, seed=1)
    # T = 1 + .5 - 0 = 1.5 with e = (1, 1, -1, 0); the exact p is the share of the 24 arrangements of d
    # over the items (one stratum) with T_r >= 1.5 (the +1 of the randomization test is negligible at 2,000)
    arrangements = [(d0, d1, d2) for d0 in range(4) for d1 in range(4) for d2 in range(4) if len({d0, d1, d2}) == 3]
    values = np.array([1.0, 0.5, 0.0, -1.0])
    exact = np.mean([values[i] + values[j] - values[k] >= 1.5 - 1e-12 for i, j, k in arrangements])
    assert p[0] == pytest.approx(exact, abs=0.03)
    rng = np.random.default_rng(4)
    n_items, n_pairs = 200, 400
    y = (rng.random((n_items, 2 * n_pairs)) < 0.6).astype(int)
    obs = rng.random(y.shape) > 0.1
    a, b = np.arange(0, 2 * n_pairs, 2), np.arange(1, 2 * n_pairs, 2)
    delta = rng.normal(0, 1, (n_items, 3))
    fam_a = rng.integers(0, 3, n_pairs)
    fam_b = (fam_a + rng.integers(1, 3, n_pairs)) % 3
    null = pair_dif_p(y, obs, np.repeat(["g1", "g2"], 100), delta, fam_a, fam_b, (a, b), permutations=99, seed=2)
    assert (null <= SENSITIVE_P).mean() <= SENSITIVE_P + 0.025 and null.min() >= 1 / 100
    # DIF of sd 1 logit on the pair's families: a wins where its family is favoured
    fa, fb = np.zeros(n_pairs, int), np.ones(n_pairs, int)
    eta = rng.normal(0, 1, n_items)
    ya = rng.random((n_items, n_pairs)) < 1 / (1 + np.exp(-(eta + delta[:, 0])[:, None]))
    yb = rng.random((n_items, n_pairs)) < 1 / (1 + np.exp(-(eta + delta[:, 1])[:, None]))
    y = np.empty((n_items, 2 * n_pairs), dtype=int)
    y[:, a], y[:, b] = ya, yb
    noisy = delta + rng.normal(0, 0.5, delta.shape)  # the audit half's estimate
    power = pair_dif_p(y, np.ones_like(y, dtype=bool), np.zeros(n_items), noisy, fa, fb, (a, b), permutations=99)
    assert (power <= SENSITIVE_P).mean() > 0.8


@pytest.fixture(scope="module")
def audited_testlets():
    """The audit of ``audited``'s benchmark with testlets of 4 consecutive items within each item group."""
    ds = result_responses()
    group = ds["item_group"].values.astype(str)
    position = pd.Series(group).groupby(group).cumcount().to_numpy()
    ds = ds.assign_coords(testlet=("item", np.char.add(np.char.add(group, "/"), (position // 4).astype(str))))
    config = AuditConfig(quick=True, controls=19, composition_bootstrap=19, owner_bootstrap=19, bayes=True, bayes_draws=60,
                         bayes_controls=20)
    return ds, run_audit(ds, config, progress=False)


def test_testlet_labels_divide_each_pairs_counts_by_its_design_effect(audited, audited_testlets):
    """The same pairs as without labels (the deterministic audit ignores testlets); design_effect is
    pair_posterior's on the pair's responses, >= 1; prob_a_ahead moves toward 1/2 where it is > 1."""
    from bayesirt.audit.bayes.paired import pair_posterior

    plain = audited[0].near_ties
    ds, result = audited_testlets
    table = result.near_ties
    assert tuple(table.columns) == COLUMNS
    assert table[["fold", "model_a", "model_b"]].equals(plain[["fold", "model_a", "model_b"]])
    assert (plain["design_effect"] == 1).all() and (table["design_effect"] >= 1).all()
    assert (table["design_effect"] > 1).any()
    y, observed = ds["responses"].values, ds["responses"].values >= 0
    ids = list(ds["model_id"].values.astype(str))
    for _, row in table.sample(10, random_state=1).iterrows():
        pair = ([ids.index(row["model_a"])], [ids.index(row["model_b"])])
        ref = pair_posterior(y, observed, ds["item_group"].values, pair, testlet=ds["testlet"].values, draws=50_000)
        assert row["design_effect"] == pytest.approx(ref["design_effect"].iloc[0], rel=1e-12)
        assert row["prob_a_ahead"] == pytest.approx(ref["prob_a_ahead"].iloc[0], abs=0.03)
        assert row["mcnemar_p"] == pytest.approx(ref["mcnemar_p"].iloc[0], rel=1e-12)  # the clustered test
    wider = table["design_effect"] > 1.2
    assert ((table["gap_upper_pp"] - table["gap_lower_pp"])[wider]
            > (plain["gap_upper_pp"] - plain["gap_lower_pp"])[wider]).all()
    info = result.summary["bayes"]["near_ties"]
    assert info["testlets"] == np.unique(ds["testlet"].values).size and "design effect" in info["paired_model"]
