"""Direct penalized joint logistic MIRT (NT App. B.1)."""

import functools

import numpy as np
import pytest
from scipy.special import expit

from bayesirt.audit.adjustment import joint_mirt
from bayesirt.audit.adjustment.joint_mirt import (direct_offsets, fit_coordinates, fit_item_parameters, fit_joint_mirt,
                                             select_dimension_direct)
from bayesirt.audit.adjustment.spectral import select_dimension
from bayesirt.errors import ConfigError, DataError


def _simulate(n_items, n_models, *, seed, missing=0.0, intercept_sd=1.5):
    """Two-dimensional compensatory logistic MIRT."""
    rng = np.random.default_rng(seed)
    loading = rng.normal(0.0, 1.0, (n_items, 2))
    intercept = rng.normal(0.0, intercept_sd, n_items)
    theta = rng.normal(0.0, 1.0, (n_models, 2))
    p = expit(intercept[:, None] + loading @ theta.T)
    y = (rng.random(p.shape) < p).astype(np.int8)
    observed = rng.random(p.shape) >= missing
    return y, observed, loading, intercept, theta, p


@pytest.fixture(scope="module")
def mirt():
    y, observed, loading, intercept, theta, p = _simulate(100, 400, seed=0, missing=0.03)
    owner = np.array([f"owner{m // 2}" for m in range(400)])  # two checkpoints per owner
    group = np.repeat(["g1", "g2", "g3", "g4"], 25)
    return dict(y=y, observed=observed, loading=loading, intercept=intercept, theta=theta, p=p, owner=owner,
                group=group)


def _canonical_correlations(a, b):
    qa, _ = np.linalg.qr(a - a.mean(axis=0))
    qb, _ = np.linalg.qr(b - b.mean(axis=0))
    return np.linalg.svd(qa.T @ qb, compute_uv=False)


def test_analytic_gradient_matches_finite_differences_with_missing_cells():
    rng = np.random.default_rng(3)
    y = (rng.random((7, 9)) < 0.5).astype(float)
    observed = rng.random((7, 9)) > 0.3
    y0, weight = joint_mirt._data("test", y, observed)
    params = [rng.normal(size=7), rng.normal(size=(7, 3)), rng.normal(size=(9, 3))]
    lam, eta = 0.3, 0.2  # large enough that the penalty gradients matter

    def objective(ps):
        return joint_mirt._objective(ps[1] @ ps[2].T + ps[0][:, None], ps, y0, weight, lam, eta)

    grads = joint_mirt._gradients(params[1] @ params[2].T + params[0][:, None], params, y0, weight, lam, eta,
                                  (True, True, True))
    h = 1e-6
    for block, grad in zip(range(3), grads):
        numeric = np.zeros_like(params[block])
        for index in np.ndindex(params[block].shape):
            up = [p.copy() for p in params]
            down = [p.copy() for p in params]
            up[block][index] += h
            down[block][index] -= h
            numeric[index] = (objective(up) - objective(down)) / (2 * h)
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)
    frozen = joint_mirt._gradients(params[1] @ params[2].T + params[0][:, None], params, y0, weight, lam, eta,
                                   (False, True, False))
    assert frozen[0] is None and frozen[2] is None


def test_objective_ignores_missing_cells_and_is_the_mean_over_observed_cells():
    y = np.array([[1, 0], [0, 1]])
    observed = np.array([[True, False], [True, True]])
    y0, weight = joint_mirt._data("test", np.where(observed, y, 7), observed)  # a missing value is ignored
    params = [np.zeros(2), np.zeros((2, 1)), np.zeros((2, 1))]  # no penalty, so z is free to set
    value = joint_mirt._objective(np.array([[1.0, 2.0], [3.0, 4.0]]), params, y0, weight, 0.01, 5e-5)
    cells = [np.log1p(np.e) - 1, np.log1p(np.e ** 3), np.log1p(np.e ** 4) - 4]  # (0, 1) is missing
    assert value == pytest.approx(np.mean(cells), rel=1e-12)


def test_recovers_a_two_dimensional_compensatory_mirt(mirt):
    fit = fit_joint_mirt(mirt["y"], mirt["observed"], 2, seed=1)
    assert fit.converged and fit.updates < 6000 and fit.updates % 20 == 0
    assert fit.loading.shape == (100, 2) and fit.theta.shape == (400, 2) and fit.intercept.shape == (100,)
    assert _canonical_correlations(mirt["loading"], fit.loading).min() > 0.9
    assert _canonical_correlations(mirt["theta"], fit.theta).min() > 0.9
    predicted = expit(fit.intercept[:, None] + fit.loading @ fit.theta.T)
    assert np.corrcoef(predicted.ravel(), mirt["p"].ravel())[0, 1] > 0.95
    y0, weight = joint_mirt._data("test", mirt["y"], mirt["observed"])
    z = fit.intercept[:, None] + fit.loading @ fit.theta.T
    params = [fit.intercept, fit.loading, fit.theta]
    assert fit.objective == pytest.approx(joint_mirt._objective(z, params, y0, weight, 0.01, 5e-5), rel=1e-12)


def test_coordinate_and_item_only_fits_move_only_their_block(mirt):
    y, observed = mirt["y"], mirt["observed"]
    coords = fit_coordinates(y, observed, mirt["intercept"], mirt["loading"])
    assert coords.converged
    np.testing.assert_array_equal(coords.loading, mirt["loading"])
    np.testing.assert_array_equal(coords.intercept, mirt["intercept"])
    assert np.corrcoef(coords.theta[:, 0], mirt["theta"][:, 0])[0, 1] > 0.9
    items = fit_item_parameters(y, observed, mirt["theta"], np.zeros(100), np.zeros((100, 2)))
    assert items.converged
    np.testing.assert_array_equal(items.theta, mirt["theta"])
    assert min(np.corrcoef(items.loading[:, d], mirt["loading"][:, d])[0, 1] for d in range(2)) > 0.9
    assert np.corrcoef(items.intercept, mirt["intercept"])[0, 1] > 0.9


def test_plateau_rule_stops_after_patience_small_changes():
    y, observed, *_ = _simulate(20, 40, seed=2)
    loose = fit_joint_mirt(y, observed, 1, seed=0, init=1, tolerance=1.0)  # every change counts as small
    assert loose.converged and loose.updates == 60  # checks at 0 (reference), 20, 40, 60
    loose = fit_joint_mirt(y, observed, 1, seed=0, init=1, tolerance=1.0, check_every=5, patience=2)
    assert loose.converged and loose.updates == 10
    capped = fit_joint_mirt(y, observed, 1, seed=0, init=1, tolerance=0.0, max_updates=50)
    assert not capped.converged and capped.updates == 50
    tight = fit_joint_mirt(y, observed, 1, seed=0, init=1)
    assert tight.converged and tight.objective < capped.objective


def test_joint_fit_keeps_the_start_with_the_lower_objective(monkeypatch):
    y, observed, *_ = _simulate(20, 40, seed=4)
    runs = []
    adam = joint_mirt._adam

    def recording(*args):
        runs.append(adam(*args))
        return runs[-1]

    monkeypatch.setattr(joint_mirt, "_adam", recording)
    fit = fit_joint_mirt(y, observed, 3, seed=5, max_updates=40)  # short runs: the starts end apart
    assert len(runs) == 2 and runs[0].objective != runs[1].objective
    assert fit is min(runs, key=lambda r: r.objective)
    first = fit_joint_mirt(y, observed, 3, seed=5, init=1, max_updates=40)
    np.testing.assert_array_equal(first.loading, runs[0].loading)  # starts are drawn in turn


@pytest.fixture(scope="module")
def selection(mirt):
    return select_dimension_direct(mirt["y"], mirt["observed"], mirt["owner"], mirt["group"], seed=0, grid=(1, 2, 8))


def test_direct_held_out_loss_beats_spectral_at_the_true_dimension(mirt, selection):
    spectral = select_dimension(mirt["y"], mirt["observed"], mirt["owner"], mirt["group"], seed=0, grid=(1, 2, 8))
    assert selection.validation_owners == spectral.validation_owners  # one nested split for both
    direct, working = selection.table.set_index("k"), spectral.table.set_index("k")
    assert direct.at[2, "models"] == working.at[2, "models"]
    assert direct.at[2, "mean_loss"] < working.at[2, "mean_loss"]


def test_select_dimension_direct_picks_the_true_dimension(mirt, selection):
    assert selection.k == 2 and selection.k_best == 2
    table = selection.table
    assert table["k"].tolist() == [1, 2, 8] and table["selected"].tolist() == [False, True, False]
    assert table["converged"].all() and (table["joint_updates"] < 6000).all()
    assert table.at[1, "mean_loss"] < table.at[2, "mean_loss"]  # K = 8 overfits
    capped = select_dimension_direct(mirt["y"][:, :60], mirt["observed"][:, :60], mirt["owner"][:60], mirt["group"],
                                     seed=0, grid=(1, 2, 8), max_k=1)
    assert capped.table["k"].tolist() == [1] and capped.k == 1


def test_direct_offsets_recover_the_ability_term_and_are_centred(mirt):
    y, observed = mirt["y"], mirt["observed"]
    truth = mirt["loading"] @ (mirt["theta"] - mirt["theta"].mean(axis=0)).T
    offsets, rank = direct_offsets(y, observed, np.arange(100), 2, seed=3)
    assert offsets.shape == (100, 400) and rank == 2 and np.abs(offsets).max() <= 6.0
    assert np.corrcoef(offsets.ravel(), truth.ravel())[0, 1] > 0.9
    unclipped = np.abs(offsets).max(axis=1) < 6.0
    np.testing.assert_allclose(offsets[unclipped].mean(axis=1), 0.0, atol=1e-8)  # centred theta, no intercept
    rows = np.arange(0, 100, 2)
    half, _ = direct_offsets(y, observed, rows, 2, seed=3)
    outside = np.setdiff1d(np.arange(100), rows)  # items whose loadings start at zero still get a term
    assert np.corrcoef(half[outside].ravel(), truth[outside].ravel())[0, 1] > 0.8


def test_direct_offsets_take_indices_or_a_mask_and_lower_k():
    y, observed, *_ = _simulate(20, 40, seed=6)
    mask = np.zeros(20, bool)
    mask[:12] = True
    np.testing.assert_array_equal(direct_offsets(y, observed, mask, 2, seed=3)[0],
                                  direct_offsets(y, observed, np.arange(12), 2, seed=3)[0])
    assert direct_offsets(y, observed, np.arange(3), 8, seed=3)[1] == 3  # k lowered to the rows


def test_fits_that_hit_the_update_cap_warn(monkeypatch):
    y, observed, *_ = _simulate(20, 40, seed=6)
    capped = functools.partial(fit_joint_mirt, max_updates=20)
    monkeypatch.setattr(joint_mirt, "fit_joint_mirt", capped)
    with pytest.warns(UserWarning, match="hit the update cap"):
        direct_offsets(y, observed, np.arange(10), 2, seed=0)
    owner = np.array([f"o{m}" for m in range(40)])
    with pytest.warns(UserWarning, match="treat the selection with care"):
        selection = select_dimension_direct(y, observed, owner, np.zeros(20), seed=0, grid=(1,))
    assert not selection.table["converged"].any() and (selection.table["joint_updates"] == 20).all()


def test_fits_are_reproducible_given_the_seed():
    y, observed, *_ = _simulate(24, 60, seed=8, missing=0.05)
    one, two = fit_joint_mirt(y, observed, 2, seed=7), fit_joint_mirt(y, observed, 2, seed=7)
    np.testing.assert_array_equal(one.loading, two.loading)
    np.testing.assert_array_equal(one.theta, two.theta)
    assert one.objective == two.objective and one.updates == two.updates
    other = fit_joint_mirt(y, observed, 2, seed=8)
    assert not np.array_equal(one.theta, other.theta)
    owner, group = np.array([f"o{m}" for m in range(60)]), np.repeat(["a", "b"], 12)
    first = select_dimension_direct(y, observed, owner, group, seed=1, grid=(1, 2))
    again = select_dimension_direct(y, observed, owner, group, seed=1, grid=(1, 2))
    assert first.table.equals(again.table) and first.validation_owners == again.validation_owners


def test_bad_inputs_raise_one_line_messages(mirt):
    y, observed = mirt["y"][:10, :20], mirt["observed"][:10, :20]
    with pytest.raises(DataError, match="one \\(item, model\\) shape"):
        fit_joint_mirt(y, observed[:, :5], 1, seed=0)
    with pytest.raises(ConfigError, match="The 'k' parameter of fit_joint_mirt must be a positive integer; got 0"):
        fit_joint_mirt(y, observed, 0, seed=0)
    with pytest.raises(ConfigError, match="'init' parameter"):
        fit_joint_mirt(y, observed, 1, seed=0, init=0)
    with pytest.raises(ConfigError, match="'learning_rate' parameter of fit_joint_mirt must be a positive number"):
        fit_joint_mirt(y, observed, 1, seed=0, learning_rate=0.0)
    with pytest.raises(ConfigError, match="'max_updates'"):
        fit_joint_mirt(y, observed, 1, seed=0, max_updates=2.5)
    with pytest.raises(ConfigError, match="'clip_norm' parameter of fit_coordinates"):
        fit_coordinates(y, observed, np.zeros(10), np.zeros((10, 1)), clip_norm=-1.0)
    with pytest.raises(ConfigError, match="'threads' parameter of fit_item_parameters must be a positive integer or None"):
        fit_item_parameters(y, observed, np.zeros((20, 1)), np.zeros(10), np.zeros((10, 1)), threads=0)
    with pytest.raises(DataError, match="0/1 responses"):
        fit_joint_mirt(np.full((10, 20), 2), observed, 1, seed=0)
    with pytest.raises(DataError, match="no observed cell"):
        fit_joint_mirt(y, np.zeros_like(observed), 1, seed=0)
    with pytest.raises(DataError, match="an intercept per item"):
        fit_coordinates(y, observed, np.zeros(9), np.zeros((10, 1)))
    with pytest.raises(DataError, match="theta of shape"):
        fit_item_parameters(y, observed, np.zeros((20, 2)), np.zeros(10), np.zeros((10, 1)))
    with pytest.raises(DataError, match="no fitting item"):
        direct_offsets(y, observed, np.array([], dtype=int), 1, seed=0)
    owner = np.array([f"o{m}" for m in range(20)])
    with pytest.raises(DataError, match="single item"):
        select_dimension_direct(y, observed, owner, np.arange(10), seed=0)
    with pytest.raises(DataError, match="no candidate K"):
        select_dimension_direct(y, observed, owner, np.zeros(10), seed=0, grid=(64,))
    with pytest.raises(DataError, match="at least 2"):
        select_dimension_direct(y, observed, np.zeros(20), np.zeros(10), seed=0)
