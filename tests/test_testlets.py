"""Testlet labels (issue 46 item 6): the design effect of the paired model against hand-computed
cases, its reduction to the independent-items model, the clustered McNemar test, gap coverage on
clustered pairs with and without the labels, and the labels carried by the readers."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy.special import betainc
from scipy.stats import chi2

from bayesirt.audit.bayes.paired import (PRIOR, clustered_mcnemar_p, design_effects, pair_posterior, paired_accuracy,
                                          paired_strata)
from bayesirt.data import attach_metadata, load, make_responses, save_responses
from bayesirt.data.responses import from_observed_data, to_observed_data
from bayesirt.errors import DataError


def test_design_effect_of_a_hand_computed_pair():
    """Three testlets of two items; item differences +1 +1 | -1 0 | +1 0: n = 6, D = 2, Q = 4,
    r = 1/3, V_iid = (4 - 6 r^2) / 30, V_cl = 3/2 sum_c (D_c - 2 r)^2 / 36 -> deff 1.75."""
    got = design_effects([[2, 0, 1]], [[0, 1, 0]], [[2, 2, 2]], [0, 0, 0], [1.0])
    r = 1 / 3
    v_iid = (4 - 6 * r ** 2) / 30
    v_cl = 1.5 * sum((d - 2 * r) ** 2 for d in (2, -1, 1)) / 36
    assert got[0] == pytest.approx(v_cl / v_iid, rel=1e-12) and got[0] == pytest.approx(1.75, rel=1e-12)


def test_design_effect_of_testlets_that_move_together_is_their_size_and_count():
    """Every item of a testlet has its testlet's difference: deff = (m K - 1) / (K - 1) for K testlets
    of m items (V_iid = S / (K (mK - 1)), V_cl = S / (K (K - 1)), S = sum_c (d_c - r)^2)."""
    rng = np.random.default_rng(4)
    k, m = 20, 5
    d = rng.choice([-1, 0, 1], k, p=[0.2, 0.5, 0.3])
    got = design_effects([m * (d == 1)], [m * (d == -1)], [np.full(k, m)], np.zeros(k, dtype=int), [1.0])
    assert got[0] == pytest.approx((m * k - 1) / (k - 1), rel=1e-12)


def test_design_effect_is_one_for_one_item_testlets_and_floored_at_one():
    rng = np.random.default_rng(5)
    diff = rng.choice([-1, 0, 1], (3, 80), p=[0.2, 0.6, 0.2])
    one = design_effects((diff == 1).astype(int), (diff == -1).astype(int), np.ones((3, 80), dtype=int),
                         np.repeat([0, 1], 40), [0.3, 0.7])
    np.testing.assert_allclose(one, 1.0, rtol=1e-12)
    # testlets that balance inside (+1 -1 in every one): less spread than independent items; floored at 1
    assert design_effects([[1] * 10], [[1] * 10], [[2] * 10], np.zeros(10, dtype=int), [1.0])[0] == 1.0
    # no discordant item, or one testlet in the only stratum (no between-testlet variance): 1
    assert design_effects([[0, 0]], [[0, 0]], [[5, 5]], [0, 0], [1.0])[0] == 1.0
    assert design_effects([[3]], [[1]], [[5]], [0], [1.0])[0] == 1.0


def test_design_effect_weighs_the_strata_by_the_design():
    """Two strata, clumped discordance in the first only: the pooled ratio of the weighted variances."""
    n10, n01, n = np.array([[5, 0, 0, 1, 0, 1, 0]]), np.array([[0, 5, 0, 0, 1, 0, 0]]), np.array([[5, 5, 5, 1, 1, 1, 1]])
    stratum = np.array([0, 0, 0, 1, 1, 1, 1])
    w = np.array([0.6, 0.4])
    got = design_effects(n10, n01, n, stratum, w)[0]
    per = []
    for g, (items, k) in enumerate(((15, 3), (4, 4))):
        d, m = (n10 - n01)[0, stratum == g], n[0, stratum == g]
        r = d.sum() / items
        q = (n10 + n01)[0, stratum == g].sum()
        per.append(((q - items * r ** 2) / (items * (items - 1)), k / (k - 1) * ((d - r * m) ** 2).sum() / items ** 2))
    expected = sum(w[g] ** 2 * per[g][1] for g in range(2)) / sum(w[g] ** 2 * per[g][0] for g in range(2))
    assert got == pytest.approx(expected, rel=1e-12) and got > 1


def test_paired_accuracy_divides_the_counts_by_the_design_effect():
    """One stratum: exact, P(a ahead) = 1 - I_1/2(n10 / deff + a, n01 / deff + a)."""
    n10, n01, n = np.array([[12], [12]]), np.array([[4], [4]]), np.array([[200], [200]])
    got = paired_accuracy(n10, n01, n, design_effect=[1.0, 3.0], seed=0)
    exact = 1 - betainc(n10[:, 0] / [1.0, 3.0] + PRIOR, n01[:, 0] / [1.0, 3.0] + PRIOR, 0.5)
    np.testing.assert_allclose(got["prob_a_ahead"], exact, rtol=0, atol=1e-12)
    assert got["prob_a_ahead"].iloc[1] < got["prob_a_ahead"].iloc[0]
    assert (got["gap_upper"] - got["gap_lower"]).iloc[1] > 1.5 * (got["gap_upper"] - got["gap_lower"]).iloc[0]
    assert got["n10"].tolist() == [12, 12] and got["design_effect"].tolist() == [1.0, 3.0]  # the counts as observed
    with pytest.raises(DataError, match="design_effect"):
        paired_accuracy(n10, n01, n, design_effect=[0.5, 1.0])


def test_pair_posterior_without_or_with_one_item_testlets_is_the_stratified_model():
    rng = np.random.default_rng(6)
    y = rng.integers(0, 2, (150, 12))
    observed = rng.random(y.shape) > 0.1
    group = np.repeat(["a", "b", "c", "d"], [70, 50, 20, 10])  # "d" is pooled
    pairs = (np.arange(6), np.arange(6, 12))
    stratum, weights, _ = paired_strata(group)
    from bayesirt.audit.bayes.paired import discordant_counts

    plain = pair_posterior(y, observed, group, pairs, seed=3)
    direct = paired_accuracy(*discordant_counts(y, observed, stratum, pairs), weights=weights, seed=3)
    pd.testing.assert_frame_equal(plain, direct)
    single = pair_posterior(y, observed, group, pairs, testlet=np.arange(150), seed=3)
    np.testing.assert_allclose(single["design_effect"], 1.0, rtol=1e-12)
    np.testing.assert_allclose(single["prob_a_ahead"], plain["prob_a_ahead"], atol=1e-9)
    with pytest.raises(DataError, match="one testlet per item"):
        pair_posterior(y, observed, group, pairs, testlet=np.arange(10))


def test_clustered_mcnemar_by_hand_and_with_one_item_testlets():
    # D_c = 2, -1, 3, 0: (sum D)^2 / sum D^2 = 16 / 14
    assert clustered_mcnemar_p([[3, 0, 3, 1]], [[1, 1, 0, 1]])[0] == pytest.approx(chi2.sf(16 / 14, 1), rel=1e-12)
    # one-item testlets: the asymptotic McNemar test (b - c)^2 / (b + c)
    b, c = 9, 3
    assert clustered_mcnemar_p([[1] * b + [0] * c + [0] * 20], [[0] * b + [1] * c + [0] * 20])[0] == pytest.approx(
        chi2.sf((b - c) ** 2 / (b + c), 1), rel=1e-12)
    assert clustered_mcnemar_p([[0, 0]], [[0, 0]])[0] == 1.0


def _clustered_pairs(n_pairs, k, m, seed):
    """Pairs of models whose item differences are their testlet's (+1, -1 or 0 for all m items of a
    testlet), symmetric: the population gap is 0. Columns 2p, 2p + 1 are pair p."""
    rng = np.random.default_rng(seed)
    kind = rng.choice([-1, 0, 1], (k, n_pairs), p=[0.15, 0.7, 0.15])
    diff = np.repeat(kind, m, axis=0)
    base = rng.integers(0, 2, diff.shape)  # concordant items: both right or both wrong
    y = np.empty((k * m, 2 * n_pairs), dtype=np.int8)
    y[:, 0::2] = np.where(diff == 0, base, diff == 1)
    y[:, 1::2] = np.where(diff == 0, base, diff == -1)
    return y, np.repeat(np.arange(k), m)


def test_testlet_labels_restore_gap_coverage_on_clustered_pairs():
    """400 pairs, 40 testlets of 5 items whose items move together, true gap 0: the 90% intervals
    that take the items as independent cover 0 about half the time; with the labels about 90%."""
    n_pairs = 400
    y, testlet = _clustered_pairs(n_pairs, 40, 5, seed=7)
    pairs = (np.arange(0, 2 * n_pairs, 2), np.arange(1, 2 * n_pairs, 2))
    observed = np.ones(y.shape, dtype=bool)
    group = np.repeat("all", y.shape[0])
    coverage = {}
    for name, labels in (("items", None), ("testlets", testlet)):
        t = pair_posterior(y, observed, group, pairs, testlet=labels, seed=1)
        coverage[name] = float(((t["gap_lower"] <= 0) & (0 <= t["gap_upper"])).mean())
    assert coverage["items"] < 0.7
    assert 0.85 <= coverage["testlets"] <= 0.95  # SE of a share of 400 at .9: .015


def test_make_responses_keeps_testlets_and_a_blank_label_is_its_own_testlet(tmp_path):
    y = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 0, 1]])
    ds = make_responses(y, item_id=["q1", "q2", "q3", "q4"], testlet=["p1", "p1", None, " "])
    assert ds["testlet"].values.tolist() == ["p1", "p1", "item:q3", "item:q4"]
    assert "testlet" not in make_responses(y).coords  # no labels: no coordinate
    with pytest.raises(DataError, match="one label per item"):
        make_responses(y, testlet="p1")
    with pytest.raises(DataError, match="one label per item"):
        make_responses(y, testlet=["p1", "p2"])
    save_responses(ds, tmp_path / "r.nc")
    assert load(tmp_path / "r.nc")["testlet"].values.tolist() == ds["testlet"].values.tolist()
    observed, constant = to_observed_data(ds)
    tree = xr.DataTree.from_dict({"observed_data": observed, "constant_data": constant})
    assert from_observed_data(tree)["testlet"].values.tolist() == ds["testlet"].values.tolist()
    dropped = make_responses(np.array([[1, 0], [np.nan, np.nan], [0, 1]]), testlet=["a", "b", "c"], drop_empty=True)
    assert dropped["testlet"].values.tolist() == ["a", "c"]


def test_readers_take_a_testlet_column(tmp_path):
    long = tmp_path / "long.csv"
    long.write_text("model,item,correct,testlet\nm1,i1,1,p\nm1,i2,0,p\nm1,i3,1,\nm2,i1,0,p\nm2,i2,1,p\nm2,i3,1,\n")
    assert load(long)["testlet"].values.tolist() == ["p", "p", "item:i3"]
    items = tmp_path / "items.csv"
    items.write_text("item_id,testlet\ni1,x\ni2,\ni3,x\n")
    ds = attach_metadata(load(long), items, "item")
    assert ds["testlet"].values.tolist() == ["x", "item:i2", "x"]
    varies = tmp_path / "varies.csv"
    varies.write_text("model,item,correct,testlet\nm1,i1,1,p\nm2,i1,0,q\nm1,i2,1,p\nm2,i2,1,p\n")
    with pytest.raises(DataError, match="testlet"):
        load(varies)
    npz = tmp_path / "r.npz"
    np.savez(npz, responses=np.array([[1, 0], [0, 1], [1, 1]], dtype=float), item_id=np.array(["a", "b", "c"]),
             model_id=np.array(["m1", "m2"]), testlet=np.array(["t", "t", "u"]))
    assert load(npz)["testlet"].values.tolist() == ["t", "t", "u"]


def test_design_effects_in_pair_chunks_equal_one_block(monkeypatch):
    """pair_posterior forms the (pair, testlet) counts a chunk of pairs at a time: the design effects and
    clustered McNemar p are those of all pairs at once."""
    import bayesirt.audit.bayes.paired as paired

    y, testlet = _clustered_pairs(60, 30, 4, seed=3)
    pairs = (np.arange(0, 120, 2), np.arange(1, 120, 2))
    observed = np.random.default_rng(1).random(y.shape) >= 0.2
    group = np.arange(y.shape[0]) // 40
    whole = pair_posterior(y, observed, group, pairs, testlet=testlet, seed=1)
    monkeypatch.setattr(paired, "_TESTLET_CHUNK", 7 * 30)  # 7 pairs at once
    chunked = pair_posterior(y, observed, group, pairs, testlet=testlet, seed=1)
    pd.testing.assert_frame_equal(chunked, whole)
    assert whole["design_effect"].max() > 1.5
