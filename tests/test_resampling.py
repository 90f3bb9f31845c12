"""Resampling references (NT C.6, C.7, D.1): matched-random subtests (exact cell counts, restoring
weights, uniformity, block-layout invariance), the randomization summary (plus-one p-value, ties
counting as >=, undefined replicates), fold pooling of the controls, the composition bootstrap
(eq. 38 against explicit item duplication, units, reproducibility), the owner bootstrap (owners
move as a whole) and one serial-versus-Dask equality check."""

import numpy as np
import pytest
from scipy import stats

from bayesirt.audit.engine import resampling
from bayesirt.audit.engine.bootstrap import bootstrap_units, composition_bootstrap, owner_bootstrap, recomposed_scores
from bayesirt.audit.engine.ranking import (kendall_tau_b, near_tie_pairs, percentile_ranks, pooled_rate, reversal_counts,
                              weighted_scores)
from bayesirt.audit.engine.resampling import (TargetFold, control_blocks, matched_random_controls, matched_random_weights,
                                 randomization_summary)
from bayesirt.errors import BayesIRTError, DataError
from bayesirt.utils.parallel import spawn_seeds

CELL = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3])  # n_c = 4, 3, 5, 2
ANCHORS = np.zeros(CELL.size)
ANCHORS[[1, 3]] = 2.0  # k_0 = 2
ANCHORS[[6]] = 3.0  # k_1 = 1
ANCHORS[[7, 9, 11]] = 5 / 3  # k_2 = 3
ANCHORS[[12]] = 2.0  # k_3 = 1
K = np.array([2, 1, 3, 1])
EPSILON = 0.05  # near-tie band of the simulated folds (40 items)
N = np.array([4, 3, 5, 2])


def test_matched_weights_keep_cell_counts_weights_and_mass():
    weights = matched_random_weights(CELL, ANCHORS, 300, 5)
    assert weights.dtype == np.float32 and weights.shape == (300, CELL.size)
    for c in range(4):
        in_cell = weights[:, CELL == c]
        np.testing.assert_array_equal((in_cell > 0).sum(axis=1), K[c])  # exactly k_c items every time
        np.testing.assert_allclose(in_cell[in_cell > 0], N[c] / K[c], rtol=1e-7)  # weight n_c / k_c
        np.testing.assert_allclose(in_cell.sum(axis=1), N[c], rtol=1e-6)  # cell mass preserved
    np.testing.assert_allclose(weights.sum(axis=1), CELL.size, rtol=1e-6)  # weights sum to I
    np.testing.assert_array_equal(weights, matched_random_weights(CELL, ANCHORS, 300, 5))
    assert not np.array_equal(weights, matched_random_weights(CELL, ANCHORS, 300, 6))


def test_matched_weights_include_each_item_with_probability_k_over_n():
    replicates = 4000
    share = (matched_random_weights(CELL, ANCHORS, replicates, 9) > 0).mean(axis=0)
    expected = (K / N)[CELL]
    sd = np.sqrt(expected * (1 - expected) / replicates)
    assert np.all(np.abs(share - expected) <= 4 * sd + 1e-12), (share, expected)


def test_a_cell_without_anchors_gets_no_control_item():
    anchors = np.where(CELL == 1, 0.0, ANCHORS)
    weights = matched_random_weights(CELL, anchors, 20, 1)
    np.testing.assert_array_equal(weights[:, CELL == 1], 0)
    np.testing.assert_array_equal((weights[:, CELL == 2] > 0).sum(axis=1), 3)


def test_matched_weights_do_not_depend_on_the_block_layout():
    # Replicate r's generator is child r of SeedSequence(seed), built directly from its spawn key.
    child = np.random.SeedSequence(3).spawn(8)[7]
    assert np.array_equal(np.random.SeedSequence(3, spawn_key=(7,)).generate_state(4), child.generate_state(4))
    whole = matched_random_weights(CELL, ANCHORS, 23, 3)
    assert control_blocks(23, block=10) == [(0, 10), (10, 20), (20, 23)]
    for block in (1, 5, 10, 50):
        parts = [matched_random_weights(CELL, ANCHORS, stop - start, 3, start=start)
                 for start, stop in control_blocks(23, block=block)]
        np.testing.assert_array_equal(np.concatenate(parts), whole)


def test_randomization_summary_plus_one_rule_ties_and_undefined_replicates():
    summary = randomization_summary(0.5, [0.3, 0.4, 0.5, 0.5, 0.6, np.nan])
    assert summary["undefined"] == 1 and summary["median"] == 0.5
    assert summary["p_value"] == pytest.approx((1 + 3) / (5 + 1))  # T_r == T_DIF counts as >=
    assert summary["excess_pp"] == 0.0 and summary["min_resolvable_p"] == pytest.approx(1 / 6)
    summary = randomization_summary(0.45, [0.1, 0.2, 0.3, 0.4])
    assert summary["excess_pp"] == pytest.approx(100 * (0.45 - 0.25))
    assert summary["p_value"] == summary["min_resolvable_p"] == pytest.approx(1 / 5)
    assert summary["lower"] == pytest.approx(0.1075) and summary["upper"] == pytest.approx(0.3925)
    empty = randomization_summary(0.2, [np.nan, np.nan])
    assert np.isnan(empty["p_value"]) and np.isnan(empty["median"]) and empty["undefined"] == 2


def _fold(rng, models, items=40, missing=False, cells=8):
    theta, difficulty = rng.normal(0, 0.5, models), rng.normal(size=items)
    y = (rng.random((items, models)) < 1 / (1 + np.exp(difficulty[:, None] - theta[None]))).astype(np.int8)
    observed = rng.random((items, models)) > 0.1 if missing else None
    cell = np.arange(items) % cells
    weights = np.zeros(items)
    for c in range(cells):
        members = np.flatnonzero(cell == c)
        chosen = rng.choice(members, max(1, members.size // 2), replace=False)
        weights[chosen] = members.size / chosen.size
    full = weighted_scores(y, np.ones(items), observed)
    owner, family = rng.integers(0, models // 2, models), rng.integers(0, 3, models)
    return TargetFold(y=y, cell=cell, anchor_weights=weights, observed=observed, full=full,
                      pairs=near_tie_pairs(full, owner, family, epsilon=EPSILON),
                      extra_pairs={"within": near_tie_pairs(full, owner, family, epsilon=EPSILON, pair_type="within")})


@pytest.fixture(scope="module")
def folds():
    rng = np.random.default_rng(4)
    return [_fold(rng, 30, missing=True), _fold(rng, 26)]


def test_controls_pool_folds_per_replicate_and_match_a_direct_computation(folds):
    result = matched_random_controls(folds, replicates=12, epsilon=EPSILON, seed=7, workers=1, progress=False)
    assert list(result["pair_set"].values) == ["primary", "within"]
    fold_seeds = spawn_seeds(7, 2)
    counts, taus = [], []
    for fold, seed in zip(folds, fold_seeds, strict=True):
        scores = weighted_scores(fold.y, matched_random_weights(fold.cell, fold.anchor_weights, 12, seed),
                                 fold.observed)
        counts.append(reversal_counts(fold.full, scores, fold.pairs))
        taus.append(kendall_tau_b(fold.full, scores))
    eligible, reversed_ = (np.array([c[k] for c in counts]) for k in range(2))
    primary = result.sel(pair_set="primary")
    np.testing.assert_array_equal(primary["eligible"], eligible)
    np.testing.assert_array_equal(primary["reversed"], reversed_)
    np.testing.assert_array_equal(primary["rate"], pooled_rate(reversed_, eligible))
    np.testing.assert_allclose(result["mean_tau_b"], np.mean(taus, axis=0))
    anchor = [reversal_counts(f.full, weighted_scores(f.y, f.anchor_weights, f.observed), f.pairs) for f in folds]
    assert float(primary["observed_rate"]) == pooled_rate(np.array([a[1] for a in anchor]),
                                                          np.array([a[0] for a in anchor]))
    summary = randomization_summary(float(primary["observed_rate"]), primary["rate"].values)
    for key, value in summary.items():
        assert float(primary[key]) == pytest.approx(value, nan_ok=True)


def test_controls_do_not_depend_on_the_block_size(folds, monkeypatch):
    options = {"epsilon": EPSILON, "seed": 2, "workers": 1, "progress": False}
    reference = matched_random_controls(folds, replicates=11, **options)
    monkeypatch.setattr(resampling, "CONTROL_BLOCK", 4)
    assert reference.identical(matched_random_controls(folds, replicates=11, **options))
    longer = matched_random_controls(folds, replicates=15, **options)
    np.testing.assert_array_equal(longer["rate"][:, :11], reference["rate"])  # a longer run extends a shorter


def test_replicates_without_eligible_pairs_are_counted_and_left_out():
    # One cell of 4 items, one anchor: a control scores each model on one random item, so the pair
    # (0, 1) is tied when the item is one of the first three (answered alike), in both folds 9/16.
    y = np.array([[1, 1], [0, 0], [1, 1], [0, 1]])
    fold = {"y": y, "cell": np.zeros(4, dtype=int), "anchor_weights": np.array([4.0, 0, 0, 0]),
            "pairs": (np.array([0]), np.array([1]))}
    result = matched_random_controls([fold, fold], replicates=40, seed=1, epsilon=0.25, workers=1,
                                     progress=False)
    rate = result["rate"].sel(pair_set="primary").values
    undefined = np.isnan(rate)
    assert 0 < undefined.sum() < 40 and int(result["undefined"][0]) == undefined.sum()
    assert float(result["min_resolvable_p"][0]) == pytest.approx(1 / (40 - undefined.sum() + 1))
    assert np.isnan(float(result["observed_rate"][0]))  # the anchor (item 0) ties the pair
    assert np.isnan(float(result["p_value"][0]))


@pytest.mark.parametrize("change, message", [
    ({"anchor_weights": "mask"}, r"fold 1: anchor_weights are not n_c / k_c on the anchors"),
    ({"full": np.zeros(30)}, "fold 1: full does not equal the mean observed response"),
    ({"extra_pairs": {}}, r"fold 1 has pair sets \['primary'\] but fold 0 has \['primary', 'within'\]"),
    ({"cell": np.arange(39)}, "fold 1: cell must be 40 nonnegative integer cell indices"),
    ({"pairs": (np.array([0]), np.array([30]))}, "pairs index models outside 0..29"),
])
def test_bad_folds_raise_one_clear_error(folds, change, message):
    if change.get("anchor_weights") == "mask":  # a selection mask instead of the restoring weights
        change = {"anchor_weights": (folds[0].anchor_weights > 0).astype(float)}
    bad = TargetFold(**{**folds[0].__dict__, **change})
    with pytest.raises(DataError, match=message):
        matched_random_controls([folds[1], bad], replicates=2, workers=1, progress=False)


def test_bad_counts_and_seeds_are_refused(folds):
    with pytest.raises(BayesIRTError, match=r"The 'replicates' parameter of matched_random_controls must be a "
                                            r"positive integer; got 0."):
        matched_random_controls(folds, replicates=0, progress=False)
    with pytest.raises(BayesIRTError, match=r"The 'seed' parameter of composition_bootstrap must be a non-negative"):
        composition_bootstrap(folds, seed=-1, progress=False)
    with pytest.raises(DataError, match="a fold mapping does not match TargetFold"):
        matched_random_controls([{"y": folds[0].y}], replicates=2, progress=False)
    with pytest.raises(DataError, match="item_group has 39 labels but the folds have 40 items"):
        composition_bootstrap(folds, item_group=np.arange(39) % 5, progress=False)
    with pytest.raises(DataError, match=r"shift \(2,\), family \(3,\), owner \(2,\) must be 1-D arrays"):
        owner_bootstrap([0.5, 0.6], ["X", "Y", "Y"], ["a", "b"])
    with pytest.raises(BayesIRTError, match=r"The 'epsilon' parameter of matched_random_controls must be a number in \(0, 1\]"):
        matched_random_controls(folds, epsilon=-0.01, progress=False)
    with pytest.raises(DataError, match=r"fold 0: the primary pairs have full-score gaps up to .*, more than "
                                        r"epsilon=0.01; pass the epsilon the pairs were frozen with"):
        matched_random_controls(folds, replicates=2, epsilon=0.01, workers=1, progress=False)
    with pytest.raises(BayesIRTError, match=r"The 'start' parameter of matched_random_weights must be a "
                                            r"non-negative integer; got -1."):
        matched_random_weights(CELL, ANCHORS, 2, 0, start=-1)


def test_recomposed_scores_follow_eq_38_by_explicit_item_duplication():
    rng = np.random.default_rng(8)
    y = rng.integers(0, 2, (12, 7))
    observed = rng.random((12, 7)) > 0.2
    w = rng.choice([0.0, 1.5, 3.0], 12)
    unit = np.repeat(np.arange(4), 3)
    multiplicities = np.array([[1, 1, 1, 1], [0, 2, 1, 1], [4, 0, 0, 0], [0, 0, 3, 1]])
    scores = recomposed_scores(y, w, unit, multiplicities, observed=observed)
    np.testing.assert_allclose(scores[0], weighted_scores(y, w, observed), rtol=1e-13)  # all multiplicities 1
    for row, counts in zip(scores, multiplicities, strict=True):
        items = np.concatenate([np.flatnonzero(unit == b) for b in range(4) for _ in range(counts[b])])
        np.testing.assert_allclose(row, weighted_scores(y[items], w[items], observed[items]), rtol=1e-13)


def test_bootstrap_units_are_groups_or_contiguous_clusters():
    groups = np.array(["b", "a", "c", "d", "e", "a"])
    np.testing.assert_array_equal(bootstrap_units(groups), [0, 1, 2, 3, 4, 1])
    units = bootstrap_units(np.repeat(["x", "y", "z", "w"], 63))  # 4 groups: 252 items in 100 clusters
    assert units.max() == 99 and np.all(np.diff(units) >= 0)
    assert sorted(set(np.bincount(units))) == [2, 3] and np.bincount(units)[:52].min() == 3
    np.testing.assert_array_equal(bootstrap_units(items=30), np.arange(30))  # fewer items than clusters


def test_bootstrap_clusters_keep_testlets_whole():
    """With testlet labels the contiguous clusters never split a testlet: 250 testlets (sizes 1-7, one not
    contiguous) cut into 100 units of about equal item counts, numbered 0..99; groups as units ignore them."""
    rng = np.random.default_rng(2)
    label = np.repeat(np.arange(250), rng.integers(1, 8, 250))
    label[[3, -1]] = label[-1], label[3]  # an item of the first testlets sits at the end
    units = bootstrap_units(np.repeat("one", label.size), testlet=label)
    assert all(np.unique(units[label == t]).size == 1 for t in np.unique(label))
    assert units.max() == 99 and np.array_equal(np.unique(units), np.arange(100))
    items = np.bincount(units)
    assert items.max() - items.min() <= 2 * 7  # about equal: within two testlets
    one = bootstrap_units(np.repeat("one", 40), testlet=np.repeat(np.arange(8), 5))  # fewer testlets than clusters
    np.testing.assert_array_equal(one, np.repeat(np.arange(8), 5))
    big = bootstrap_units(np.repeat("one", 300), testlet=np.r_[np.zeros(200), np.arange(1, 101)])  # a 200-item testlet
    assert np.array_equal(np.unique(big), np.arange(big.max() + 1)) and np.unique(big[:200]).size == 1
    groups = np.arange(40) % 5
    np.testing.assert_array_equal(bootstrap_units(groups, testlet=np.arange(40) // 4), groups)
    with pytest.raises(DataError, match="one testlet per item"):
        bootstrap_units(np.repeat("one", 40), testlet=np.arange(10))
    with pytest.raises(DataError, match="must not be missing"):
        bootstrap_units(np.repeat("one", 3), testlet=np.array(["t1", None, "t2"], dtype=object))


def test_composition_bootstrap_is_reproducible_and_consistent(folds):
    groups = np.arange(40) % 5
    first = composition_bootstrap(folds, item_group=groups, replicates=60, seed=3, workers=1, progress=False)
    assert first.attrs["units"] == "item groups" and first["multiplicity"].shape == (60, 5)
    np.testing.assert_array_equal(first["multiplicity"].sum("unit"), 5)
    again = composition_bootstrap(folds, item_group=groups, replicates=60, seed=3, workers=1, progress=False)
    assert first.identical(again)
    other = composition_bootstrap(folds, item_group=groups, replicates=60, seed=4, workers=1, progress=False)
    assert not np.array_equal(first["rate"], other["rate"])
    controls = matched_random_controls(folds, replicates=2, epsilon=EPSILON, seed=0, workers=1, progress=False)
    np.testing.assert_allclose(first["observed_rate"], controls["observed_rate"])  # same T_DIF
    assert float(first["observed_mean_tau_b"]) == pytest.approx(float(controls["observed_mean_tau_b"]))
    rate = first["rate"].sel(pair_set="primary").values
    np.testing.assert_allclose([first["rate_lower"][0], first["rate_upper"][0]], np.percentile(rate, [2.5, 97.5]))
    # Replicate 5 by hand: both scores recomposed, the sign of each taken in the replicate.
    r, counts = 5, first["multiplicity"].values[5:6]
    expected = []
    for fold in folds:
        full, anchor = (recomposed_scores(fold.y, w, groups, counts, observed=fold.observed)
                        for w in (np.ones(40), fold.anchor_weights))
        expected.append(reversal_counts(full, anchor, fold.pairs))
    np.testing.assert_array_equal(first["eligible"].sel(pair_set="primary")[:, r], [e[0][0] for e in expected])
    np.testing.assert_array_equal(first["reversed"].sel(pair_set="primary")[:, r], [e[1][0] for e in expected])
    clusters = composition_bootstrap(folds, replicates=5, seed=3, workers=1, progress=False)
    assert clusters.attrs["units"] == "contiguous clusters" and clusters.sizes["unit"] == 40
    whole = composition_bootstrap(folds, testlet=np.arange(40) // 4, replicates=5, seed=3, workers=1, progress=False)
    assert whole.attrs["units"] == "contiguous clusters of whole testlets" and whole.sizes["unit"] == 10
    np.testing.assert_array_equal(whole["unit"], np.arange(40) // 4)


def test_owner_bootstrap_moves_all_records_of_an_owner_together():
    # Family X: owner A has two records (shifts 1 and 3), owner B one (shift 10). Drawing owners, a
    # replicate mean of X is (4a + 10b) / (2a + b); drawing records, 1 or 3 alone would appear.
    owner = np.array(["A", "A", "B", "C", "D"])
    family = np.array(["X", "X", "X", "Y", "Y"])
    full = np.array([0.5, 0.5, 0.2, 0.6, 0.7])
    anchor = full + np.array([1.0, 3.0, 10.0, -1.0, 0.0])
    result = owner_bootstrap(anchor - full, family, owner, replicates=500, seed=1)
    possible = {(4 * a + 10 * b) / (2 * a + b) for a in range(5) for b in range(5) if 0 < a + b <= 4}
    means = result["shift"].sel(family="X").values
    defined = means[~np.isnan(means)]
    assert all(any(abs(m - p) < 1e-12 for p in possible) for m in defined)
    assert {2.0, 10.0} <= {round(m, 12) for m in defined} and 1.0 not in defined
    assert float(result["observed_shift"].sel(family="X")) == pytest.approx(14 / 3)
    assert int(result["records"].sel(family="X")) == 3 and int(result["owners"].sel(family="X")) == 2
    assert int(result["undefined"].sel(family="X")) == np.isnan(means).sum()
    assert result.identical(owner_bootstrap(anchor - full, family, owner, replicates=500, seed=1))
    assert "percentile_shift" not in result
    lower, upper = np.percentile(defined, [2.5, 97.5])
    assert float(result["shift_lower"].sel(family="X")) == pytest.approx(lower)
    assert float(result["shift_upper"].sel(family="X")) == pytest.approx(upper)


def test_percentile_ranks_are_mid_ranks():
    np.testing.assert_allclose(percentile_ranks([0.1, 0.2, 0.3, 0.4]), [12.5, 37.5, 62.5, 87.5])
    scores = np.random.default_rng(3).integers(0, 9, 40) / 8
    expected = [stats.percentileofscore(scores, s, kind="mean") for s in scores]
    np.testing.assert_allclose(percentile_ranks(scores), expected, rtol=1e-12)
    np.testing.assert_allclose(percentile_ranks([0.5, 0.5 + 1e-15, 0.7]), [100 / 3, 100 / 3, 250 / 3])
    full, anchor = np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.4, 0.3, 0.2, 0.1])
    result = owner_bootstrap(anchor - full, ["X", "X", "Y", "Y"], ["a", "b", "c", "d"], replicates=50,
                             percentile_shift=percentile_ranks(anchor) - percentile_ranks(full))
    np.testing.assert_allclose(result["observed_percentile_shift"], [50.0, -50.0])  # (75 + 25) / 2, -(25 + 75) / 2
    np.testing.assert_allclose(result["observed_shift"], [0.2, -0.2])
    # Both shifts come from the same owner draws: a replicate without owner a or b has X undefined in both.
    np.testing.assert_array_equal(np.isnan(result["shift"]), np.isnan(result["percentile_shift"]))


@pytest.mark.slow
def test_one_and_two_workers_give_identical_controls(folds, monkeypatch):
    serial = matched_random_controls(folds, replicates=8, epsilon=EPSILON, seed=12, workers=1, progress=False)
    monkeypatch.setattr(resampling, "CONTROL_BLOCK", 3)  # several tasks per worker
    cluster = matched_random_controls(folds, replicates=8, epsilon=EPSILON, seed=12, workers=2, progress=False)
    assert serial.identical(cluster)


def test_composition_bootstrap_band_counts_by_hand(folds):
    # The band diagnostics of the report's note: among each replicate's eligible pairs, those whose
    # recomposed full gap is still <= epsilon, counted and reversed with the same rule.
    groups = np.arange(40) % 5
    boot = composition_bootstrap(folds, item_group=groups, replicates=30, seed=3, epsilon=EPSILON, workers=1,
                                 progress=False)
    counts = boot["multiplicity"].values
    inside = np.zeros((2, 30), int)
    reversed_in = np.zeros((2, 30), int)
    for h, fold in enumerate(folds):
        full, anchor = (recomposed_scores(fold.y, w, groups, counts, observed=fold.observed)
                        for w in (np.ones(40), fold.anchor_weights))
        for i, j in zip(*fold.pairs, strict=True):
            for r in range(30):
                d_full, d_anchor = full[r, i] - full[r, j], anchor[r, i] - anchor[r, j]
                if abs(d_full) > 1e-12 and abs(d_anchor) > 1e-12 and abs(d_full) <= EPSILON + 1e-9:
                    inside[h, r] += 1
                    reversed_in[h, r] += d_full * d_anchor < 0
    primary = boot.sel(pair_set="primary")
    np.testing.assert_array_equal(primary["eligible_in_band"], inside)
    np.testing.assert_array_equal(primary["reversed_in_band"], reversed_in)
    eligible, reversed_ = int(primary["eligible"].sum()), int(primary["reversed"].sum())
    assert float(primary["in_band_share"]) == pytest.approx(inside.sum() / eligible)
    assert float(primary["rate_in_band"]) == pytest.approx(reversed_in.sum() / inside.sum())
    assert float(primary["rate_out_band"]) == pytest.approx((reversed_ - reversed_in.sum())
                                                             / (eligible - inside.sum()))
    assert float(primary["rate_mean"]) == pytest.approx(np.nanmean(primary["rate"].values))
    assert float(primary["band"]) == EPSILON and boot.attrs["unit_count"] == 5
    # A named band applies to its own pair set only; an unknown name is refused.
    wide = composition_bootstrap(folds, item_group=groups, replicates=30, seed=3, epsilon=EPSILON,
                                 bands={"within": 1.0}, workers=1, progress=False)
    assert float(wide["band"].sel(pair_set="within")) == 1.0
    np.testing.assert_array_equal(wide["eligible_in_band"].sel(pair_set="within"),
                                  wide["eligible"].sel(pair_set="within"))
    with pytest.raises(DataError, match="bands names"):
        composition_bootstrap(folds, replicates=3, bands={"nope": 0.1}, progress=False)
