"""The paired accuracy model of the near-tie leaderboard (issue 29; bayesirt.audit.bayes.paired): exact
against the beta function with one group, against a literal Monte Carlo of the model with several,
calibrated against truths drawn from its own prior, McNemar against a hand count, and a seeded
null / real-difference pair of simulated models."""

import numpy as np
import pandas as pd
import pytest
from scipy.special import betainc
from scipy.stats import binomtest

from bayesirt.audit.bayes.paired import (MIN_STRATUM, PAIR_DRAWS, PRIOR, discordant_counts, mcnemar_p, paired_accuracy,
                                          paired_strata)
from bayesirt.errors import DataError


def test_one_group_probability_is_the_exact_beta_tail():
    n10 = np.array([[0], [2], [3], [7], [12], [5]])
    n01 = np.array([[0], [0], [0], [2], [15], [5]])
    n = np.full((6, 1), 250)
    got = paired_accuracy(n10, n01, n, seed=1)
    exact = 1 - betainc(n10[:, 0] + PRIOR, n01[:, 0] + PRIOR, 0.5)
    np.testing.assert_allclose(got["prob_a_ahead"], exact, rtol=0, atol=1e-12)
    assert got["prob_a_ahead"].iloc[1] == pytest.approx(0.924413, abs=1e-6)  # two discordant items, both a's
    assert got["prob_a_ahead"].iloc[0] == pytest.approx(0.5) and got["prob_a_ahead"].iloc[5] == pytest.approx(0.5)


def _literal(n10, n01, n, draws, seed):
    """The model as written in the module notes, one pair at a time with numpy's Dirichlet."""
    rng = np.random.default_rng(seed)
    w = n / n.sum()
    gap = np.zeros(draws)
    for g in range(n.size):
        a = PRIOR * w[g]
        pi = rng.dirichlet([n10[g] + a, n01[g] + a, n[g] - n10[g] - n01[g] + a], size=draws)
        gap += w[g] * (pi[:, 0] - pi[:, 1])
    return gap


@pytest.mark.parametrize("counts", [([3, 0, 1], [0, 2, 0], [40, 25, 10]), ([6, 1], [1, 4], [60, 90]),
                                    ([0, 0, 5, 2], [1, 0, 0, 2], [8, 12, 30, 50])])
def test_several_groups_match_a_literal_monte_carlo_of_the_model(counts):
    n10, n01, n = (np.array(c) for c in counts)
    ref = _literal(n10, n01, n, 400_000, seed=5)
    got = paired_accuracy(n10[None], n01[None], n[None], draws=100_000, seed=2).iloc[0]
    se = np.sqrt(0.25 / 100_000)
    assert abs(got["prob_a_ahead"] - (ref > 0).mean()) < 4 * se + 4 * np.sqrt(0.25 / 400_000)
    assert got["gap_mean"] == pytest.approx(ref.mean(), abs=4 * ref.std() / np.sqrt(100_000))
    lo, hi = np.quantile(ref, [0.05, 0.95])
    assert got["gap_lower"] == pytest.approx(lo, abs=0.02 * ref.std() + 1e-3)
    assert got["gap_upper"] == pytest.approx(hi, abs=0.02 * ref.std() + 1e-3)


@pytest.mark.slow
def test_probabilities_and_intervals_are_calibrated_against_truths_drawn_from_the_prior():
    """If the posterior is computed right, truths drawn from the prior fall above 0 as often as the
    posterior says and inside the 90% interval 90% of the time (in expectation over the prior)."""
    rng = np.random.default_rng(11)
    sims, sizes = 3000, np.array([12, 20, 8])
    w = sizes / sizes.sum()
    pi = np.stack([rng.dirichlet([PRIOR * wg] * 3, size=sims) for wg in w], axis=1)  # (sim, group, cell)
    truth = (w * (pi[..., 0] - pi[..., 1])).sum(axis=1)
    cells = np.stack([[rng.multinomial(sizes[g], pi[s, g]) for g in range(3)] for s in range(sims)])
    got = paired_accuracy(cells[..., 0], cells[..., 1], np.broadcast_to(sizes, (sims, 3)), draws=2000, seed=3)
    above = truth > 0
    prob = got["prob_a_ahead"].to_numpy()
    assert abs(above.mean() - prob.mean()) < 3 * np.sqrt(0.25 / sims)
    for lo, hi in ((0.0, 0.1), (0.9, 1.0), (0.3, 0.7)):
        sel = (prob >= lo) & (prob <= hi)
        assert sel.sum() > 100
        assert abs(above[sel].mean() - prob[sel].mean()) < 3 * np.sqrt(0.25 / sel.sum()) + 0.01
    covered = (truth >= got["gap_lower"]) & (truth <= got["gap_upper"])
    assert abs(covered.mean() - 0.90) < 3 * np.sqrt(0.09 / sims)


def test_mcnemar_p_by_hand_and_against_scipy():
    # 7 vs 2 discordant: 2 * (C(9,0) + C(9,1) + C(9,2)) / 2^9 = 92 / 512
    assert mcnemar_p(7, 2) == pytest.approx(92 / 512, abs=1e-15)
    assert mcnemar_p(2, 7) == pytest.approx(92 / 512, abs=1e-15)
    assert mcnemar_p(0, 0) == 1.0 and mcnemar_p(3, 3) == 1.0
    for a in range(0, 15):
        for b in range(0, 15):
            if a + b:
                assert mcnemar_p(a, b) == pytest.approx(binomtest(a, a + b, 0.5).pvalue, abs=1e-12)


def test_discordant_counts_follow_the_items_both_models_answered():
    y = np.array([[1, 0, 1], [1, 1, 0], [0, 1, 1], [1, 0, 0], [0, 0, 1]])
    observed = np.array([[1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 0, 1], [1, 1, 0]], dtype=bool)
    group = np.array(["x", "x", "y", "y", "y"])
    n10, n01, n = discordant_counts(y, observed, group, (np.array([0, 2]), np.array([1, 0])))
    # pair (0, 1): x: item0 a right b wrong, item1 both right; y: item2 b right, item3 unobserved for b,
    # item4 both wrong. Pair (2, 0): x: item1 b right; y: item2 a right, item3 b right, item4 unobserved for a
    np.testing.assert_array_equal(n10, [[1, 0], [0, 1]])
    np.testing.assert_array_equal(n01, [[0, 1], [1, 1]])
    np.testing.assert_array_equal(n, [[2, 2], [2, 2]])
    with pytest.raises(DataError):
        paired_accuracy([[3]], [[2]], [[4]])


def _simulate_pair(gap, items, seed):
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(10), items // 10)
    difficulty = rng.normal(0, 1.5, items) + rng.normal(0, 1, 10)[groups]
    p_a = 1 / (1 + np.exp(difficulty - 0.5 - gap))
    p_b = 1 / (1 + np.exp(difficulty - 0.5))
    y = np.stack([rng.random(items) < p_a, rng.random(items) < p_b], axis=1).astype(int)
    return y, groups


def test_a_seeded_null_pair_is_not_called_and_a_real_difference_is():
    y, groups = _simulate_pair(0.0, 500, seed=0)
    counts = discordant_counts(y, np.ones_like(y, dtype=bool), groups, (np.array([0]), np.array([1])))
    null = paired_accuracy(*counts, seed=0).iloc[0]
    assert 0.05 < null["prob_a_ahead"] < 0.95 and null["gap_lower"] < 0 < null["gap_upper"]
    y, groups = _simulate_pair(0.6, 500, seed=0)  # about +10 pp expected accuracy for a
    counts = discordant_counts(y, np.ones_like(y, dtype=bool), groups, (np.array([0]), np.array([1])))
    real = paired_accuracy(*counts, seed=0).iloc[0]
    assert real["prob_a_ahead"] > 0.99 and real["gap_lower"] > 0 and real["mcnemar_p"] < 0.01


def test_paired_strata_pool_groups_under_the_minimum():
    group = np.repeat(["a", "b", "c", "d"], [30, 5, 40, 18])
    stratum, weights, pooled = paired_strata(group)
    assert pooled == 2 and len(set(stratum)) == 3
    assert set(stratum[group == "b"]) == set(stratum[group == "d"]) == {f"pooled groups of < {MIN_STRATUM} items"}
    np.testing.assert_allclose(weights, np.array([30, 23, 40]) / 93)  # order of first appearance
    stratum, weights, pooled = paired_strata(np.repeat(["a", "b", "c"], [30, 5, 40]))  # 5 items cannot stand alone
    assert pooled == 1 and list(stratum[30:35]) == ["a"] * 5 and np.allclose(weights, [35 / 75, 40 / 75])
    stratum, weights, pooled = paired_strata(np.arange(12))  # every group one item: one stratum
    assert pooled == 12 and len(set(stratum)) == 1 and np.allclose(weights, [1.0])
    stratum, weights, pooled = paired_strata(np.repeat(["a", "b"], [20, 25]))  # nothing to pool
    assert pooled == 0 and list(stratum) == list(np.repeat(["a", "b"], [20, 25]))


def _small_group_coverage(pool: bool, sims=150, groups=40, size=2, seed=5) -> float:
    """90% coverage of the gap over fixed groups whose cell probabilities differ (group populations),
    each observed through ``size`` items."""
    rng = np.random.default_rng(seed)
    covered = 0
    for s in range(sims):
        p10 = rng.uniform(0.0, 0.4, groups)
        p01 = rng.uniform(0.0, 0.4, groups)
        truth = (p10 - p01).mean()
        u = rng.random((groups, size))
        cell = np.where(u < p10[:, None], 0, np.where(u < (p10 + p01)[:, None], 1, 2)).ravel()
        label = np.repeat(np.arange(groups), size)
        strata = paired_strata(label)[0] if pool else label
        codes = pd.factorize(strata)[0]
        n10 = np.bincount(codes, cell == 0)[None]
        n01 = np.bincount(codes, cell == 1)[None]
        n = np.bincount(codes)[None]
        got = paired_accuracy(n10, n01, n, draws=300, seed=s).iloc[0]
        covered += got["gap_lower"] <= truth <= got["gap_upper"]
    return covered / sims


@pytest.mark.slow  # a coverage study over simulated pairs
def test_pooled_strata_keep_the_coverage_that_tiny_groups_lose():
    """Two items per group: as strata (the Jeffreys mass split over 40 groups) the interval is far too
    narrow; pooled, the 90% interval covers the group-population gap about 90% of the time or more."""
    assert _small_group_coverage(False) < 0.8
    assert 0.86 <= _small_group_coverage(True) <= 0.99


def test_design_weights_and_monte_carlo_error():
    n10, n01, n = np.array([[4, 1, 3]]), np.array([[2, 3, 1]]), np.array([[30, 25, 40]])
    own = paired_accuracy(n10, n01, n, draws=20_000, seed=1).iloc[0]
    design = paired_accuracy(n10, n01, n, weights=[30, 25, 40], draws=20_000, seed=2).iloc[0]
    assert design["prob_a_ahead"] == pytest.approx(own["prob_a_ahead"], abs=0.01)  # complete data: the same weights
    # a stratum without common items keeps its design weight, and its prior widens the interval
    gone = paired_accuracy([[4, 0, 3]], [[2, 0, 1]], [[30, 0, 40]], weights=[30, 25, 40], seed=3).iloc[0]
    dropped = paired_accuracy([[4, 0, 3]], [[2, 0, 1]], [[30, 0, 40]], seed=3).iloc[0]
    assert gone["gap_upper"] - gone["gap_lower"] > 1.5 * (dropped["gap_upper"] - dropped["gap_lower"])
    # the MCSE is the spread of prob_a_ahead over seeds; 0 with one stratum (exact)
    probs = [paired_accuracy(n10, n01, n, draws=500, seed=s).iloc[0] for s in range(40)]
    spread = np.std([p["prob_a_ahead"] for p in probs], ddof=1)
    assert np.mean([p["prob_a_ahead_mcse"] for p in probs]) == pytest.approx(spread, rel=0.35)
    assert paired_accuracy([[4]], [[2]], [[30]]).iloc[0]["prob_a_ahead_mcse"] == pytest.approx(0, abs=1e-12)
    with pytest.raises(DataError, match="weights"):
        paired_accuracy(n10, n01, n, weights=[1, 2])


def test_borderline_calls_are_drawn_again_with_more_draws():
    """A two-group pair whose P(a ahead) lies within 2 MCSE of .95 gets BORDERLINE_DRAWS draws (its
    MCSE is that of a 20,000-draw run); a pair near .5 keeps the default draws (its MCSE is ~sqrt(10)
    that of a 20,000-draw run)."""
    from bayesirt.audit.bayes.paired import BORDERLINE_DRAWS, PAIR_DRAWS

    assert BORDERLINE_DRAWS == 10 * PAIR_DRAWS
    n = np.array([[60, 60], [60, 60]])
    n10, n01 = np.array([[9, 7], [6, 5]]), np.array([[3, 5], [5, 6]])  # P(a ahead) .951 and ~.5
    got = paired_accuracy(n10, n01, n, weights=[0.5, 0.5], seed=0)
    big = paired_accuracy(n10, n01, n, weights=[0.5, 0.5], draws=BORDERLINE_DRAWS, seed=5)
    p, mcse, big_mcse = (x.to_numpy() for x in (got["prob_a_ahead"], got["prob_a_ahead_mcse"], big["prob_a_ahead_mcse"]))
    assert abs(p[0] - 0.95) <= 2 * mcse[0] * np.sqrt(10) and 0.3 < p[1] < 0.7  # the first is borderline at 2,000 draws
    np.testing.assert_allclose(mcse[0], big_mcse[0], rtol=0.2)  # drawn again at 20,000
    np.testing.assert_allclose(mcse[1], np.sqrt(10) * big_mcse[1], rtol=0.2)  # not borderline: 2,000 draws
    assert abs(p[0] - big["prob_a_ahead"].iloc[0]) < 5 * np.hypot(mcse[0], big_mcse[0])


def test_pairs_whose_shared_draws_would_not_fit_go_in_blocks(monkeypatch):
    """Many pairs with distinct counts in several groups (missing cells): past the memory budget of the
    shared draws the pairs go in blocks of their own draws. Same posterior within Monte Carlo error,
    reproducible for a seed, and exact (no Monte Carlo) for one-group pairs."""
    import bayesirt.audit.bayes.paired as paired

    rng = np.random.default_rng(4)
    n = rng.integers(30, 60, (300, 4))
    n10 = rng.binomial(n, 0.15)
    n01 = rng.binomial(n, 0.12)
    whole = paired_accuracy(n10, n01, n, weights=[1, 2, 3, 4], seed=2)
    monkeypatch.setattr(paired, "_TABLE_CELLS", 40 * PAIR_DRAWS * 4)  # 40 pairs' keys: 8 blocks
    blocks = paired_accuracy(n10, n01, n, weights=[1, 2, 3, 4], seed=2)
    pd.testing.assert_frame_equal(blocks, paired_accuracy(n10, n01, n, weights=[1, 2, 3, 4], seed=2))
    assert not blocks["prob_a_ahead"].equals(whole["prob_a_ahead"])  # other draws ...
    gap = np.abs(blocks["prob_a_ahead"] - whole["prob_a_ahead"])
    assert np.all(gap <= 5 * np.hypot(blocks["prob_a_ahead_mcse"], whole["prob_a_ahead_mcse"]) + 1e-12)  # ... same posterior
    np.testing.assert_allclose(blocks["gap_mean"], whole["gap_mean"], atol=0.007)  # sd 0.04 over 2,000 draws, 300 pairs
    one = [x[:, :1] for x in (n10, n01, n)]
    pd.testing.assert_series_equal(paired_accuracy(*one, seed=2)["prob_a_ahead"],
                                   paired_accuracy(*one, seed=9)["prob_a_ahead"])
