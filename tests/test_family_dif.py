"""The Bayesian family-DIF layer: the posterior mode is NT's converged ridge estimate, the
log-density against NumPy, the gap of NT's five-cycle schedule, posterior anchor probabilities
(decisive with plentiful data, spread with scarce data, on planted truth), the per-draw anchor ->
reversal chain against the deterministic building blocks, fold pooling by hand, and bad input."""

import numpy as np
import pytest
import xarray as xr
from scipy.special import expit

from bayesirt.audit.bayes.posterior import (fit_family_dif_posterior, pool_folds, propagate_posterior, schedule_gap,
                                  stacked_draws)
from bayesirt.audit.engine.anchors import anchor_weights, blueprint_cells, select_anchors
from bayesirt.audit.engine.dif import fit_family_dif
from bayesirt.audit.engine.ranking import near_tie_pairs, pair_reversals, reversal_counts, weighted_scores
from bayesirt.audit.engine.resampling import matched_random_weights
from bayesirt.errors import ConfigError, DataError
from bayesirt.models.family_dif import build_family_dif

# module fixtures fit models (seconds to minutes under load): the whole module is in the slow tier
pytestmark = pytest.mark.slow

FAMILIES = ["gemma", "llama", "qwen"]


def _simulate(n_items=40, n_models=300, n_families=3, seed=0, missing=0.1):
    rng = np.random.default_rng(seed)
    family = np.arange(n_models) % n_families
    offsets = np.outer(rng.uniform(0.5, 1.5, n_items), rng.normal(size=n_models))
    delta = rng.normal(0, 0.7, (n_items, n_families))
    delta -= delta.mean(axis=1, keepdims=True)
    y = rng.random((n_items, n_models)) < expit(rng.normal(size=(n_items, 1)) + offsets + delta[:, family])
    observed = rng.random(y.shape) >= missing
    return np.where(observed, y, -1).astype(np.int8), observed, offsets, family


@pytest.fixture(scope="module")
def small():
    return _simulate()


@pytest.fixture(scope="module")
def planted():
    """Two item groups sharing 3 x 150 models: "plentiful" items answered by all of them, "scarce"
    items by 10 models per family. In each group, easiness sits in 4 well-separated clusters of 6
    items (so blueprint cells are stable) and 3 of every 6 items carry DIF (+1.2, -1.2, 0)."""
    rng = np.random.default_rng(5)
    per_group, n_families, per_family = 24, 3, 150
    family = np.repeat(np.arange(n_families), per_family)
    n_items, n_models = 2 * per_group, family.size
    easiness = np.tile(np.repeat([-1.5, -0.5, 0.5, 1.5], 6), 2) + rng.normal(0, 0.1, n_items)
    has_dif = np.tile(np.arange(6) >= 3, 8)
    delta = np.where(has_dif[:, None], [1.2, -1.2, 0.0], 0.0)
    offsets = np.outer(rng.uniform(0.5, 1.5, n_items), rng.normal(size=n_models))
    y = (rng.random((n_items, n_models)) < expit(easiness[:, None] + offsets + delta[:, family])).astype(np.int8)
    observed = rng.random(y.shape) >= 0.05
    scarce_models = np.isin(np.arange(n_models) % per_family, np.arange(10))
    observed[per_group:, ~scarce_models] = False
    group = np.repeat(["plentiful", "scarce"], per_group)
    tree = fit_family_dif_posterior(y, observed, offsets, family, n_families, method="advi", draws=300, seed=1,
                                    easiness_prior="normal", item_ids=[f"q{i:02d}" for i in range(n_items)],
                                    family_names=FAMILIES, advi_iterations=20_000)
    target = (rng.random((n_items, 60)) < expit(rng.normal(size=(1, 60)) + easiness[:, None])).astype(np.int8)
    return {"tree": tree, "group": group, "has_dif": has_dif, "target": target}


def test_map_is_converged_newton(small):
    y, observed, offsets, family = small
    tree = fit_family_dif_posterior(y, observed, offsets, family, 3, method="joint_map")
    newton = fit_family_dif(y, observed, offsets, family, 3, cycles=500, tolerance=1e-12)
    post = tree["posterior"]
    assert post.sizes["draw"] == 1 and post.sizes["chain"] == 1
    np.testing.assert_allclose(post["family_effect"].values[0, 0], newton.family_effect, atol=1e-3)
    np.testing.assert_allclose(post["easiness"].values[0, 0], newton.easiness, atol=1e-3)
    np.testing.assert_allclose(post["dif_range"].values[0, 0], newton.dif_range, atol=1e-3)


def test_schedule_gap(small):
    y, observed, offsets, family = small
    gap = schedule_gap(y == 1, observed, offsets, family, 3)
    one_cycle = schedule_gap(y == 1, observed, offsets, family, 3, cycles=1)
    assert gap["cycles"] <= 5 and gap["reference_last_change"] < 1e-12
    # seen: five cycles stop 1.0e-10 from the optimum here (one cycle 6.3e-3, three 8.0e-7)
    assert 0 <= gap["max_abs_delta_diff"] < 1e-6 < one_cycle["max_abs_delta_diff"]
    assert gap["max_abs_dif_range_diff"] <= 2 * gap["max_abs_delta_diff"]


def _numpy_log_posterior(y, observed, offsets, family, easiness, delta, sd, easiness_prior, hierarchical):
    eta = easiness[:, None] + offsets + delta[:, family]
    value = np.sum(observed * ((y == 1) * eta - np.logaddexp(0, eta))) - np.sum(delta**2) / (2 * sd**2)
    if easiness_prior == "normal":
        value -= np.sum(easiness**2) / (2 * 2.0**2)
    if hierarchical:  # F - 1 degrees of freedom per item, HalfNormal(1) and the log-transform Jacobian
        value += -delta.shape[0] * (delta.shape[1] - 1) * np.log(sd) - sd**2 / 2 + np.log(sd)
    return value


@pytest.mark.parametrize("prior, easiness_prior", [("ridge", "flat"), ("hierarchical", "normal")])
def test_logp_matches_numpy(prior, easiness_prior):
    y, observed, offsets, family = _simulate(n_items=7, n_models=40, n_families=4, seed=3, missing=0.25)
    m = build_family_dif(y, observed, offsets, family, 4, prior=prior, delta_sd=1.3, easiness_prior=easiness_prior)
    logp = m.compile_logp(mode="FAST_COMPILE")
    dlogp = m.compile_dlogp(vars=[m["easiness"]], mode="FAST_COMPILE")
    constrained = [m["family_effect"]] + ([m["family_effect_sd"]] if prior == "hierarchical" else [])
    delta_of = m.compile_fn(m.replace_rvs_by_values(constrained), inputs=m.value_vars, on_unused_input="ignore",
                            mode="FAST_COMPILE")
    rng = np.random.default_rng(0)
    values, references = [], []
    for _ in range(2):  # random points of the unconstrained space
        point = {name: rng.normal(0, 0.5, np.shape(value)) for name, value in m.initial_point().items()}
        delta, *sd = delta_of(point)
        sd = sd[0] if sd else 1.3
        assert np.abs(delta.sum(axis=1)).max() < 1e-12
        args = (y, observed, offsets, family, point["easiness"], delta, sd, easiness_prior, prior == "hierarchical")
        values.append(logp(point))
        references.append(_numpy_log_posterior(*args))
        p = expit(point["easiness"][:, None] + offsets + delta[:, family])
        grad = np.sum(observed * ((y == 1) - p), axis=1) - (point["easiness"] / 4 if easiness_prior == "normal" else 0)
        np.testing.assert_allclose(dlogp(point), grad, rtol=1e-10)
    np.testing.assert_allclose(values[0] - values[1], references[0] - references[1], rtol=1e-10)


def test_advi_returns_labelled_draws(planted):
    tree = planted["tree"]
    post = tree["posterior"]
    assert post["family_effect"].dims == ("chain", "draw", "item", "family")
    assert post.sizes["draw"] == 300 and tree.attrs["advi_converged"] == 1
    assert list(post["family"].values) == FAMILIES and post["item"].values[7] == "q07"
    assert np.abs(post["family_effect"].sum("family")).max() < 1e-9
    delta = post["family_effect"]
    xr.testing.assert_allclose(post["dif_range"], delta.max("family") - delta.min("family"))
    delta, easiness = stacked_draws(tree)
    assert delta.shape == (300, 48, 3) and easiness.shape == (300, 48)


def test_anchor_probability_decisive_when_plentiful_spread_when_scarce(planted):
    delta, easiness = stacked_draws(planted["tree"])
    target = planted["target"]
    full = weighted_scores(target, np.ones(target.shape[0]))
    pairs = near_tie_pairs(full, np.arange(60), np.arange(60) % 3, epsilon=0.05)
    fold = propagate_posterior(delta, easiness, item_group=planted["group"], anchor_fraction=0.5, y_target=target,
                               observed_target=np.ones(target.shape, bool), full=full, pairs=pairs,
                               item_ids=planted["tree"]["posterior"]["item"].values)
    probability = fold["anchor_probability"].values
    plentiful, scarce = planted["group"] == "plentiful", planted["group"] == "scarce"
    # seen: every plentiful item below .05 or above .95; all 24 scarce items in (.1, .9)
    decisive = (probability < 0.05) | (probability > 0.95)
    assert decisive[plentiful].mean() >= 0.9
    np.testing.assert_array_equal(probability[plentiful] > 0.5, ~planted["has_dif"][plentiful])  # planted truth
    assert ((probability > 0.1) & (probability < 0.9))[scarce].mean() >= 0.5
    assert fold["reversed"].dims == ("draw", "pair") and fold.sizes["pair"] == pairs[0].size > 0


def _hand_case():
    """8 items of one group: cells {0,1} {2,3} {4,5} {6,7} by easiness; the lowest D of each cell
    is items 0, 3, 4, 7 (weight 2 each). Anchor scores: model 0 = 1, models 1 and 2 = .75."""
    d = np.array([0.1, 0.5, 0.9, 0.2, 0.3, 0.4, 0.6, 0.05])
    delta = np.stack([-d / 2, d / 2], axis=1)
    y = np.array([[1, 1, 1], [0, 1, 0], [0, 0, 1], [1, 1, 1], [1, 1, 0], [0, 1, 0], [1, 0, 0], [1, 0, 1]])
    full = np.array([0.50, 0.505, 0.51])  # frozen: 0 < 1 < 2
    pairs = (np.array([0, 0, 1]), np.array([1, 2, 2]))
    return delta, np.arange(8.0), y, full, pairs


def test_identical_draws_give_the_deterministic_answer():
    delta, easiness, y, full, pairs = _hand_case()
    fold = propagate_posterior(np.repeat(delta[None], 5, axis=0), np.repeat(easiness[None], 5, axis=0),
                               item_group=np.zeros(8), anchor_fraction=0.5, y_target=y, observed_target=np.ones(y.shape, bool),
                               full=full, pairs=pairs, model_ids=["m0", "m1", "m2"])
    np.testing.assert_array_equal(fold["anchor_probability"], [1, 0, 0, 1, 1, 0, 0, 1])
    np.testing.assert_allclose(fold["anchor_score"].values, np.tile([1.0, 0.75, 0.75], (5, 1)))
    np.testing.assert_array_equal(fold["reversal_probability"], [1, 1, 0])  # pair (1, 2) is tied under the anchor
    assert (fold["n_eligible"] == 2).all() and (fold["n_reversed"] == 2).all()
    assert list(fold["model_i"].values) == ["m0", "m0", "m1"] and list(fold["model_j"].values) == ["m1", "m2", "m2"]


def test_propagation_matches_the_per_draw_chain():
    rng = np.random.default_rng(4)
    n_draws, n_items, n_models = 20, 30, 25
    delta, easiness = rng.normal(size=(n_draws, n_items, 4)), rng.normal(size=(n_draws, n_items))
    group = np.where(np.arange(n_items) < 17, "algebra", "geometry")
    y, observed = rng.integers(0, 2, (n_items, n_models)), rng.random((n_items, n_models)) > 0.1
    full = weighted_scores(y, np.ones(n_items), observed)
    pairs = near_tie_pairs(full, np.arange(n_models), np.arange(n_models) % 3, epsilon=0.1)
    delta[1], easiness[1] = delta[0], easiness[0]  # two identical draws: paired controls must coincide
    fold = propagate_posterior(delta, easiness, item_group=group, anchor_fraction=0.3, y_target=y, observed_target=observed,
                               full=full, pairs=pairs, controls=7, seed=11)
    for s in range(n_draws):
        cell = blueprint_cells(group, easiness[s])
        selected = select_anchors(cell, np.ptp(delta[s], axis=1), 0.3)
        weights = anchor_weights(cell, selected)
        scores = weighted_scores(y, weights, observed)
        eligible, reversed_ = reversal_counts(full, scores, pairs)
        np.testing.assert_array_equal(fold["anchor"].values[s], selected)
        np.testing.assert_allclose(fold["anchor_score"].values[s], scores, rtol=1e-12)
        assert (fold["n_eligible"].values[s], fold["n_reversed"].values[s]) == (eligible, reversed_)
        # the draw's own null: k_c random items of each of its own cells, the same keys in every draw
        random = matched_random_weights(cell, weights, 7, 11)
        assert (np.count_nonzero(random, axis=1) == selected.sum()).all()
        counts = reversal_counts(full, weighted_scores(y, random, observed), pairs)
        np.testing.assert_array_equal(fold["control_eligible"].values[s], counts[0])
        np.testing.assert_array_equal(fold["control_reversed"].values[s], counts[1])
        # per pair: the share of the draw's controls that reverse it
        _, per_pair = pair_reversals(full, weighted_scores(y, random, observed), pairs)
        np.testing.assert_allclose(fold["control_reversal_rate"].values[s], per_pair.mean(axis=0), rtol=1e-6)
    np.testing.assert_array_equal(fold["control_reversed"].values[0], fold["control_reversed"].values[1])
    assert not np.array_equal(fold["control_reversed"].values[0], fold["control_reversed"].values[2])


def test_pool_folds_by_hand():
    """Two folds, four draws, three controls per draw drawn from the draw's own cells."""
    def fold(eligible, reversed_, control_eligible, control_reversed):
        return xr.Dataset({"n_eligible": ("draw", eligible), "n_reversed": ("draw", reversed_),
                           "control_eligible": (("draw", "replicate"), control_eligible),
                           "control_reversed": (("draw", "replicate"), control_reversed)},
                          coords={"draw": np.arange(4)})

    a = fold([2, 2, 4, 0], [1, 0, 2, 0], [[2, 2, 2], [2, 2, 2], [4, 4, 4], [0, 0, 0]],
             [[0, 0, 2], [0, 0, 1], [1, 1, 2], [0, 0, 0]])
    b = fold([2, 0, 4, 0], [1, 0, 0, 0], [[2, 2, 2], [2, 2, 0], [4, 4, 4], [0, 0, 0]],
             [[0, 1, 0], [0, 0, 0], [1, 1, 2], [0, 0, 0]])
    tree = pool_folds([a, b])
    np.testing.assert_allclose(tree["low_dif_reversal_rate"], [0.5, 0.0, 0.25, np.nan])
    np.testing.assert_allclose(tree["control_rate"], [[0, 0.25, 0.5], [0, 0, 0.5], [0.25, 0.25, 0.5], [np.nan] * 3])
    np.testing.assert_allclose(tree["control_median"], [0.25, 0.0, 0.25, np.nan])
    np.testing.assert_allclose(tree["excess_pp"], [25.0, 0.0, 0.0, np.nan])
    assert int(tree["undefined_draws"]) == 1
    # per-draw plus-one p, (1 + #{T_r >= T_DIF}) / (R + 1): draw 0 (1 + 1) / 4, draws 1 and 2 (1 + 3) / 4
    np.testing.assert_allclose(tree["draw_p_value"], [0.5, 1.0, 1.0, np.nan])
    np.testing.assert_allclose(tree["draw_p_value_quantiles"], np.quantile([0.5, 1.0, 1.0], [0.05, 0.5, 0.95]))
    assert float(tree["share_draws_p_le_05"]) == 0.0
    assert "prob_exceeds_random" not in tree.to_dataset()
    assert float(tree["excess_pp_quantiles"].sel(quantile=0.5)) == pytest.approx(0.0)
    assert set(tree.children) == {"fold_0", "fold_1"}
    with pytest.raises(DataError, match="no per-draw controls"):
        pool_folds([a.drop_vars(["control_eligible", "control_reversed"])])


@pytest.mark.parametrize("change, error, message", [
    ({"prior": "lasso"}, ConfigError, r"The 'prior' parameter of build_family_dif must be one of .*; got 'lasso'"),
    ({"easiness_prior": "cauchy"}, ConfigError, r"The 'easiness_prior' parameter .*; got 'cauchy'."),
    ({"delta_sd": 0.0}, ConfigError, r"The 'delta_sd' parameter .* a number > 0; got 0.0."),
    ({"family": np.arange(40) % 4}, DataError, r"family indices must lie in 0..2; got 0..3"),
    ({"offsets": np.zeros((5, 40))}, DataError, r"offsets must be a finite array of the shape of y \(6, 40\)"),
    ({"item_ids": ["a"]}, DataError, r"item_ids has shape \(1,\) but there are 6"),
    ({"y": np.ones((6, 40), np.int8)}, DataError, r"6 item\(s\) .* improper posterior; .* easiness_prior='normal'"),
])
def test_builder_rejects_bad_input(change, error, message):
    y, observed, offsets, family = _simulate(n_items=6, n_models=40, missing=0.0)
    args = {"y": y, "observed": observed, "offsets": offsets, "family": family, "n_families": 3} | change
    with pytest.raises(error, match=message):
        build_family_dif(**args)


def test_propagation_rejects_bad_input():
    delta, easiness, y, full, pairs = _hand_case()
    good = {"item_group": np.zeros(8), "anchor_fraction": 0.5, "y_target": y, "observed_target": np.ones(y.shape, bool),
            "full": full, "pairs": pairs}
    with pytest.raises(DataError, match=r"draws_delta must be \(draw, item, family\)"):
        propagate_posterior(delta, easiness, **good)
    with pytest.raises(DataError, match=r"pairs must be two 1-D integer arrays .* the 3 target models"):
        propagate_posterior(delta[None], easiness[None], **good | {"pairs": (np.array([0]), np.array([3]))})
    with pytest.raises(DataError, match=r"every fold must hold the same number of draws"):
        pool_folds([xr.Dataset(coords={"draw": [0]}), xr.Dataset(coords={"draw": [0, 1]})])
