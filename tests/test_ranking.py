"""Near-tie ranking statistics (NT eq. 8, 39-41): hand-computed cases, the one-point boundary,
tie exclusion, fold pooling, brute-force oracles for the pair set and the reversal counts (also
through the chunked paths), scipy as the tau-b oracle, and every bad-input message."""

import numpy as np
import pytest
from scipy import stats

from bayesirt.audit.engine import ranking
from bayesirt.audit.engine.ranking import (kendall_tau_b, near_tie_pairs, pair_reversals, pooled_rate, reversal_counts,
                              weighted_scores)
from bayesirt.errors import ConfigError, DataError

# Six models scored on 200 items (scores are k / 200). By hand, with epsilon = 0.01:
#   cross pairs (different owner and family, 0 < gap <= .01): (0,1) (0,5) (1,2) (2,3) (2,5)
#   (0,2) same family, (0,3) same owner, (1,3) (3,5) gap .015, (1,5) tied and same family.
#   (2,3) has a gap of exactly one percentage point (0.52 - 0.51 = 0.010000000000000009).
FULL = np.array([100, 101, 102, 104, 120, 101]) / 200
OWNER = np.array(["a", "b", "c", "a", "d", "e"])
FAMILY = np.array(["X", "Y", "X", "Z", "Y", "Y"])
CROSS = [(0, 1), (0, 5), (1, 2), (2, 3), (2, 5)]
# Alternative scores: (0,1) kept, (0,5) tied (up to float noise), (1,2) tied, (2,3) reversed, (2,5) kept.
ALT = np.array([0.40, 0.45, 0.45, 0.44, 0.70, 0.40 + 1e-15])


def _pairs(result):
    return list(zip(result[0].tolist(), result[1].tolist(), strict=True))


def test_hand_computed_pairs_ties_and_reversals():
    pairs = near_tie_pairs(FULL, OWNER, FAMILY)
    assert _pairs(pairs) == CROSS
    assert _pairs(near_tie_pairs(FULL, OWNER, FAMILY, pair_type="within")) == [(0, 2)]
    # "all": every different-owner, different-family pair with a nonzero gap, whatever its size.
    assert _pairs(near_tie_pairs(FULL, OWNER, FAMILY, pair_type="all")) == [
        (0, 1), (0, 4), (0, 5), (1, 2), (1, 3), (2, 3), (2, 4), (2, 5), (3, 4), (3, 5)]
    eligible, reversed_ = reversal_counts(FULL, ALT, pairs)
    assert (eligible, reversed_) == (3, 1)
    assert pooled_rate(np.array([reversed_]), np.array([eligible])) == pytest.approx(1 / 3)


def test_fold_pooling_sums_counts_instead_of_averaging_rates():
    second = reversal_counts(np.array([0.300, 0.305]), np.array([0.5, 0.4]), (np.array([0]), np.array([1])))
    assert second == (1, 1)
    first = reversal_counts(FULL, ALT, near_tie_pairs(FULL, OWNER, FAMILY))
    eligible, reversed_ = np.array([first[0], second[0]]), np.array([first[1], second[1]])
    assert pooled_rate(reversed_, eligible) == pytest.approx(2 / 4)  # not (1/3 + 1/1) / 2
    per_replicate = pooled_rate(np.array([[1, 0, 0], [1, 2, 0]]), np.array([[3, 0, 0], [1, 2, 0]]))
    np.testing.assert_allclose(per_replicate, [0.5, 1.0, np.nan])


def test_a_gap_of_exactly_epsilon_is_in_the_band_and_a_larger_one_is_not():
    owner, family = ["a", "b"], ["X", "Y"]
    for low, high, epsilon in [(0.51, 0.52, 0.01), (0.5, 0.505, 0.005), (0.71, 0.74, 0.03), (0.1, 0.1025, 0.0025)]:
        assert _pairs(near_tie_pairs([low, high], owner, family, epsilon=epsilon)) == [(0, 1)]
        assert _pairs(near_tie_pairs([low, high + 1e-6], owner, family, epsilon=epsilon)) == []
    assert 0.52 - 0.51 > 0.01  # the case the tolerance is for


def test_ties_are_excluded_under_either_score():
    pairs = (np.array([0, 0, 1]), np.array([1, 2, 2]))
    full = np.array([0.5, 0.5 + 1e-13, 0.51])  # (0,1) tied on the full score
    alt = np.array([0.3, 0.9, 0.3 + 5e-13])  # (0,2) tied on the alternative score
    assert reversal_counts(full, alt, pairs) == (1, 1)  # only (1,2) counts, and it is reversed
    assert reversal_counts(full, np.array([0.3, 0.9, np.nan]), pairs) == (0, 0)  # NaN scores are ties


def test_no_pairs_gives_nan_and_zero_counts():
    pairs = near_tie_pairs(FULL, ["a"] * 6, FAMILY)  # one owner: no pair at all
    assert pairs[0].size == 0 and pairs[0].dtype == np.int64
    assert reversal_counts(FULL, ALT, pairs) == (0, 0)
    counts = reversal_counts(FULL, np.tile(ALT, (4, 1)), pairs)
    np.testing.assert_array_equal(counts[0], np.zeros(4))
    assert np.isnan(pooled_rate(np.array([0, 0]), np.array([0, 0])))


def _oracle_pairs(full, owner, family, epsilon, pair_type):
    band = np.inf if pair_type == "all" else epsilon + 1e-9
    return [(a, b) for a in range(full.size) for b in range(a + 1, full.size)
            if owner[a] != owner[b] and ((family[a] == family[b]) == (pair_type == "within"))
            and 1e-12 < abs(full[a] - full[b]) <= band]


def _oracle_counts(full, alt, pairs):
    eligible = reversed_ = 0
    for a, b in pairs:
        d_full, d_alt = full[a] - full[b], alt[a] - alt[b]
        if abs(d_full) > 1e-12 and abs(d_alt) > 1e-12:
            eligible += 1
            reversed_ += d_full * d_alt < 0
    return eligible, reversed_


@pytest.fixture
def random_population():
    rng = np.random.default_rng(11)
    models, items = 60, 80
    full = rng.integers(30, 50, models) / items  # many ties and many near ties
    return rng, full, rng.integers(0, 15, models), rng.choice(["q", "l", "g", "m"], models)


@pytest.mark.parametrize("small_chunks", [False, True])
def test_pairs_and_counts_match_a_brute_force_oracle(random_population, small_chunks, monkeypatch):
    if small_chunks:  # exercise the block loops
        monkeypatch.setattr(ranking, "_CHUNK_ELEMENTS", 7)
        monkeypatch.setattr(ranking, "_CANDIDATES", 13)
    rng, full, owner, family = random_population
    for pair_type in ranking.PAIR_TYPES:
        for epsilon in (0.0125, 0.05):
            pairs = near_tie_pairs(full, owner, family, epsilon=epsilon, pair_type=pair_type)
            assert _pairs(pairs) == _oracle_pairs(full, owner, family, epsilon, pair_type)
    pairs = near_tie_pairs(full, owner, family, epsilon=0.05)
    oracle = _oracle_pairs(full, owner, family, 0.05, "cross")
    assert len(oracle) > 100
    alt = rng.integers(0, 12, (9, full.size)) / 12  # ties under the alternative too
    alt[2, :5] = np.nan
    boot_full = full + rng.integers(-1, 2, (9, full.size)) / 80  # bootstrap-like full scores per replicate
    one_d = [reversal_counts(full, a, pairs) for a in alt]
    assert one_d == [_oracle_counts(full, a, oracle) for a in alt]
    eligible, reversed_ = reversal_counts(full, alt, pairs)
    assert list(zip(eligible.tolist(), reversed_.tolist(), strict=True)) == one_d
    eligible, reversed_ = reversal_counts(boot_full, alt, pairs)
    expected = [_oracle_counts(f, a, oracle) for f, a in zip(boot_full, alt, strict=True)]
    assert list(zip(eligible.tolist(), reversed_.tolist(), strict=True)) == expected
    eligible, _ = reversal_counts(boot_full, alt[0], pairs)  # 2-D full against one alternative
    assert eligible.tolist() == [_oracle_counts(f, alt[0], oracle)[0] for f in boot_full]
    per_pair_eligible, per_pair_reversed = pair_reversals(boot_full, alt, pairs)  # the per-pair form, same rule
    assert per_pair_eligible.shape == (9, len(oracle))
    assert list(zip(per_pair_eligible.sum(1).tolist(), per_pair_reversed.sum(1).tolist(), strict=True)) == expected


def test_weighted_scores_follow_eq_8_and_renormalize_over_observed_items(monkeypatch):
    y = np.array([[1, 0, 1], [0, 0, 1], [1, 1, 0], [1, 0, 0]])
    w = np.array([2.0, 0.0, 1.0, 1.0])
    np.testing.assert_allclose(weighted_scores(y, w), [1.0, 0.25, 0.5])  # sum w y / sum w
    np.testing.assert_allclose(weighted_scores(y, np.ones(4)), y.mean(axis=0))
    observed = np.ones_like(y, dtype=bool)
    observed[0, 0] = observed[2, 1] = False
    y_missing = y.astype(float)
    y_missing[~observed] = np.nan  # whatever a missing cell holds is ignored
    np.testing.assert_allclose(weighted_scores(y_missing, w, observed), [1.0, 0.0, 0.5])  # (1+1)/2, 0/3, 2/4
    assert np.isnan(weighted_scores(y, np.array([0, 1.0, 0, 0]), ~np.eye(4, 3, k=-1, dtype=bool))[0])
    monkeypatch.setattr(ranking, "_SCORE_ROWS", 2)
    rows = np.random.default_rng(0).random((5, 4)).astype(np.float32)
    batch = weighted_scores(y, rows, observed)
    assert batch.dtype == np.float64 and batch.shape == (5, 3)
    np.testing.assert_array_equal(batch, [weighted_scores(y, r, observed) for r in rows])


def test_tau_b_is_scipys_with_noise_level_differences_as_ties():
    rng = np.random.default_rng(2)
    full = rng.integers(0, 20, 40) / 20
    alt = rng.integers(0, 10, (3, 40)) / 10
    expected = [stats.kendalltau(full, a, variant="b").statistic for a in alt]
    np.testing.assert_allclose(kendall_tau_b(full, alt), expected, rtol=1e-12)
    assert kendall_tau_b(full, alt[0]) == pytest.approx(expected[0], rel=1e-12)
    assert kendall_tau_b(full, alt[0] + rng.uniform(-1e-14, 1e-14, 40)) == pytest.approx(expected[0], rel=1e-12)
    np.testing.assert_allclose(kendall_tau_b(np.tile(full, (3, 1)), alt), expected, rtol=1e-12)


@pytest.mark.parametrize("call, message", [
    (lambda: near_tie_pairs(FULL, OWNER, FAMILY, pair_type="same"),
     r"The 'pair_type' parameter of near_tie_pairs must be one of .*; got 'same'"),
    (lambda: near_tie_pairs(FULL, OWNER, FAMILY, epsilon=0),
     r"The 'epsilon' parameter of near_tie_pairs must be a number > 0; got 0"),
])
def test_bad_settings_raise_one_clear_error(call, message):
    with pytest.raises(ConfigError, match=message):
        call()


@pytest.mark.parametrize("call, message", [
    (lambda: near_tie_pairs(FULL, OWNER[:5], FAMILY), r"owner has shape \(5,\) but there are 6 models"),
    (lambda: near_tie_pairs(FULL, OWNER, [None, "X", "X", "Y", "Y", "Y"]), "family has missing labels"),
    (lambda: near_tie_pairs([0.5, np.nan], ["a", "b"], ["X", "Y"]), "full must be a 1-D array of finite scores"),
    (lambda: weighted_scores([[0, 2]], [1.0]), "observed responses must be 0 or 1"),
    (lambda: weighted_scores([[0, np.nan]], [1.0]), "pass observed=False for missing cells"),
    (lambda: weighted_scores([[0, 1]], [1.0], observed=[[1, 1]]), "observed must be a boolean array"),
    (lambda: weighted_scores([[0, 1]], [1.0, 2.0]), r"w has shape \(2,\) but y has 1 items"),
    (lambda: weighted_scores([[0, 1]], [-1.0]), "w must hold finite nonnegative numbers"),
    (lambda: reversal_counts(FULL, ALT, (np.array([0]), np.array([6]))), "pairs index models outside 0..5"),
    (lambda: reversal_counts(FULL, ALT, (np.array([0.0]), np.array([1.0]))), "two 1-D integer arrays"),
    (lambda: reversal_counts(FULL, ALT, np.array([0, 1, 2])), r"pairs must be a tuple \(i, j\)"),
    (lambda: reversal_counts(FULL, ALT[:5], (np.array([0]), np.array([1]))), "the same number of models"),
    (lambda: reversal_counts(np.ones((2, 6)), np.ones((3, 6)), (np.array([0]), np.array([1]))),
     "full has 2 replicates but alt has 3"),
    (lambda: pooled_rate([1, 2], [3]), "must have the same shape"),
    (lambda: pooled_rate([3], [1]), r"pass \(n_reversed, n_eligible\) in this order"),
])
def test_bad_inputs_raise_one_clear_error(call, message):
    with pytest.raises(DataError, match=message):
        call()


def test_near_ties_with_missing_cells_are_selected_on_the_both_answered_gap():
    """Hand-made: three models on 200 items. Model 0 answered all and got 100 right (.50); model 1
    answered the first 100 items only and got 51 of them right (.51: a 1 pp full-score near tie
    with model 0), but on those 100 items model 0 got 60 right: a 9 pp both-answered gap, not a
    near tie. Model 2 answered all and got 98 right (.49: a 1 pp near tie with model 0 on both
    gaps, 55 vs 60 of the first 100 and 43 vs 40 of the rest); against model 1 it is 2 pp apart on
    the full scores but 4 pp on the 100 common items."""
    y = np.zeros((200, 3), dtype=np.int8)
    y[:60, 0] = 1
    y[100:140, 0] = 1  # model 0: 60 of the first 100, 40 of the rest: 100 / 200
    y[:51, 1] = 1  # model 1: 51 of the first 100 (answered only those)
    y[:55, 2] = 1
    y[100:143, 2] = 1  # model 2: 55 + 43 = 98 / 200
    observed = np.ones_like(y, dtype=bool)
    observed[100:, 1] = False
    full = weighted_scores(y, np.ones(200), observed)
    np.testing.assert_allclose(full, [0.50, 0.51, 0.49])
    gaps = ranking.both_answered_gaps(y, observed)
    np.testing.assert_allclose(gaps, [[0, 0.09, 0.01], [-0.09, 0, -0.04], [-0.01, 0.04, 0]], atol=1e-12)
    owner, family = np.array(["o1", "o2", "o3"]), np.array(["F", "G", "H"])
    on_full = _pairs(near_tie_pairs(full, owner, family, epsilon=0.01))
    on_both = _pairs(near_tie_pairs(full, owner, family, epsilon=0.01, gaps=gaps))
    assert on_full == [(0, 1), (0, 2)]  # both 1 pp on the own-item scores
    assert on_both == [(0, 2)]  # (0, 1) is 9 pp apart on the 100 items both answered
    assert _pairs(near_tie_pairs(full, owner, family, epsilon=0.05, gaps=gaps)) == [(0, 2), (1, 2)]


def test_complete_data_keeps_the_full_score_pair_set():
    """Without missing cells there are no separate both-answered gaps (None), and the gap matrix of
    a complete matrix selects exactly the full-score pairs (brute force on random scores)."""
    rng = np.random.default_rng(4)
    y = (rng.random((300, 40)) < rng.uniform(0.3, 0.7, 40)).astype(np.int8)
    assert ranking.both_answered_gaps(y, np.ones(y.shape, dtype=bool)) is None
    full = y.mean(axis=0)
    owner, family = rng.integers(0, 30, 40), rng.integers(0, 4, 40)
    gaps = full[:, None] - full[None, :]
    for pair_type in ("cross", "within"):
        expected = _pairs(near_tie_pairs(full, owner, family, epsilon=0.02, pair_type=pair_type))
        assert expected and _pairs(near_tie_pairs(full, owner, family, epsilon=0.02, pair_type=pair_type,
                                                  gaps=gaps)) == expected
