"""Blueprint cells, within-cell selection, restoring weights and purification (NT 3.3, C.5)."""

import numpy as np
import pytest

from bayesirt.audit.engine.anchors import anchor_weights, blueprint_cells, purify, select_anchors
from bayesirt.errors import ConfigError, DataError


def test_cells_cut_each_group_into_near_equal_easiness_strata_with_index_ties():
    group = np.array(["a"] * 10 + ["b"] * 2 + ["c"])
    easiness = np.r_[np.arange(10)[::-1], 0.0, 0.0, 5.0]  # group a decreasing; group b tied
    cell = blueprint_cells(group, easiness)
    # group a: ordered 9..0 by easiness, strata of 3, 3, 2, 2 items (larger first)
    assert cell[[9, 8, 7]].tolist() == [0, 0, 0] and cell[[6, 5, 4]].tolist() == [1, 1, 1]
    assert cell[[3, 2]].tolist() == [2, 2] and cell[[1, 0]].tolist() == [3, 3]
    assert cell[10] == 4 and cell[11] == 5  # a tie: item order decides
    assert cell[12] == 6  # a one-item group is one cell


def test_cells_of_many_draws_at_once_equal_one_draw_at_a_time():
    rng = np.random.default_rng(1)
    group = rng.choice(["a", "b", "c"], size=50)
    easiness = rng.integers(0, 6, size=(7, 50)).astype(float)  # many ties
    cells = blueprint_cells(group, easiness)
    assert cells.shape == (7, 50)
    for s in range(7):
        np.testing.assert_array_equal(cells[s], blueprint_cells(group, easiness[s]))


def test_selection_counts_round_half_to_even_and_break_ties_by_index():
    cell = np.repeat([0, 1, 2, 3], [3, 5, 1, 4])
    dif = np.array([0.3, 0.1, 0.2, 1, 1, 1, 0, 1, 9, 0.5, 0.5, 0.5, 0.1])
    keep = select_anchors(cell, dif, 0.5)
    # k = max(1, round(.5 n)): 3 -> 2, 5 -> 2 (2.5 to even), 1 -> 1, 4 -> 2
    assert np.bincount(cell, weights=keep).tolist() == [2, 2, 1, 2]
    assert np.flatnonzero(keep).tolist() == [1, 2, 3, 6, 8, 9, 12]
    with pytest.raises(ConfigError, match="anchor_fraction"):
        select_anchors(cell, dif, 0.0)


def test_weights_restore_every_cell_mass_and_sum_to_the_item_count():
    rng = np.random.default_rng(0)
    cell = rng.integers(0, 7, size=200)
    keep = select_anchors(cell, rng.random(200), 0.3)
    w = anchor_weights(cell, keep)
    np.testing.assert_allclose(np.bincount(cell, weights=w), np.bincount(cell))
    assert w.sum() == pytest.approx(200) and (w[~keep] == 0).all()
    with pytest.raises(DataError, match="no selected item"):
        anchor_weights(cell, np.zeros(200, bool))


def test_purification_finds_planted_dif_and_records_its_rounds():
    from scipy.special import expit

    rng = np.random.default_rng(4)
    n_items, per_family = 120, 150
    family = np.repeat(np.arange(3), per_family)
    theta = rng.normal(size=(family.size, 2))
    loading = np.c_[rng.uniform(0.5, 1.5, n_items), rng.normal(0, 0.4, n_items)]
    planted = rng.permutation(n_items) < n_items // 2  # spread over the item groups
    delta = rng.normal(0, 1.0, (n_items, 3)) * planted[:, None]
    delta -= delta.mean(axis=1, keepdims=True)
    y = rng.random((n_items, family.size)) < expit(rng.normal(size=(n_items, 1)) + loading @ theta.T + delta[:, family])
    group = np.array([f"g{i % 4}" for i in range(n_items)])
    result = purify(y.astype(np.int8), np.ones(y.shape, bool), family, 3, group, 2, seed=0)
    assert list(result.rounds["round"]) == [1, 2, 3] and result.rounds["jaccard_with_previous"].between(0, 1).all()
    assert result.weights.sum() == pytest.approx(n_items)
    assert planted[result.selected].mean() < 0.25  # anchors are mostly clean items
    d = result.final_fit.dif_range
    assert np.median(d[planted]) > 2 * np.median(d[~planted])
