"""Posterior tables on a hand-made posterior: the item information column against the
(draw, item, model) array it no longer builds, ranks and P(ahead) against direct formulas."""

import numpy as np
import pytest
import xarray as xr

from bayesirt.data.responses import make_responses, to_observed_data
import bayesirt.inference.summaries as summaries
from bayesirt.data.responses import from_observed_data
from bayesirt.inference.summaries import ahead_matrix, item_table, model_table
from bayesirt.models.information import item_information

SAMPLE = ("chain", "draw")


def _tree(*, chains=2, draws=250, n_items=5, n_models=7, common_slope=False, guessing=False):
    rng = np.random.default_rng(7)
    shape = (chains, draws)
    post = {"theta": (("chain", "draw", "model"), rng.normal(0, 1, (*shape, n_models))),
            "intercept": (("chain", "draw", "item"), rng.normal(0, 1, (*shape, n_items)))}
    post["discrimination"] = (SAMPLE, rng.lognormal(0, 0.2, shape)) if common_slope else \
        (("chain", "draw", "item"), rng.lognormal(0, 0.4, (*shape, n_items)))
    if guessing:
        post["guessing"] = (("chain", "draw", "item"), rng.uniform(0, 0.3, (*shape, n_items)))
    y = rng.integers(0, 2, (n_items, n_models)).astype(np.int8)
    y[rng.random(y.shape) < 0.2] = -1  # missing
    y[:, 0], y[0] = 1, 0  # every item and model observed at least once
    responses = make_responses(y, item_id=[f"i{j}" for j in range(n_items)], model_id=[f"m{k}" for k in range(n_models)])
    posterior = xr.Dataset(post, coords={"item": responses["item"].values, "model": responses["model"].values})
    observed, constant = to_observed_data(responses)
    return xr.DataTree.from_dict({"posterior": posterior, "observed_data": observed, "constant_data": constant})


def _old_information(post: xr.Dataset) -> np.ndarray:
    """The formula item_table used before (its draws x items x models array): the oracle."""
    stacked = post.stack(sample=SAMPLE).transpose("sample", ...)
    take = stacked.isel(sample=slice(None, None, max(1, stacked.sizes["sample"] // 200)))

    def arr(name, default):
        return take[name].values if name in take else default

    info = item_information(arr("theta", 0.0), np.asarray(arr("discrimination", 1.0)).reshape(take.sizes["sample"], -1),
                            arr("intercept", 0.0), arr("guessing", 0.0), arr("slip", 0.0))
    return info.mean(axis=(0, 2))


@pytest.mark.parametrize("common_slope, guessing, draws", [(False, False, 250), (True, False, 250), (False, True, 60)])
@pytest.mark.slow
def test_item_information_column_equals_the_full_array_formula(common_slope, guessing, draws):
    tree = _tree(common_slope=common_slope, guessing=guessing, draws=draws)
    table = item_table(tree)
    np.testing.assert_allclose(table["information"], _old_information(tree["posterior"].to_dataset()), rtol=1e-12)


def test_counts_and_metadata_read_in_blocks_match_the_rebuilt_responses(monkeypatch):
    """Tables count observed and correct responses a block of items at a time; the oracle is the
    response Dataset rebuilt whole (from_observed_data), which a file without constant_data still uses."""
    tree = _tree(n_items=9, n_models=6)
    responses = from_observed_data(tree)
    y = responses["responses"].values
    monkeypatch.setattr(summaries, "_MARGIN_CELLS", 13)  # two items (of six models) per block
    items, models = item_table(tree), model_table(tree).set_index("model_id").loc[responses["model"].values]
    np.testing.assert_array_equal(items["n_observed"], (y >= 0).sum(axis=1))
    np.testing.assert_allclose(items["proportion_correct"], (y == 1).sum(axis=1) / (y >= 0).sum(axis=1))
    np.testing.assert_array_equal(models["n_observed"], (y >= 0).sum(axis=0))
    np.testing.assert_allclose(models["accuracy"], (y == 1).sum(axis=0) / (y >= 0).sum(axis=0))
    assert list(models["family"]) == list(responses["family"].values)
    bare = xr.DataTree.from_dict({"posterior": tree["posterior"].to_dataset(),
                                  "observed_data": tree["observed_data"].to_dataset()})
    assert item_table(bare).equals(items)


def test_model_table_ranks_and_prob_ahead_from_the_draws():
    tree = _tree(n_models=6)
    theta = tree["posterior"]["theta"].stack(sample=SAMPLE).transpose("sample", "model").values  # (draws, models)
    table = model_table(tree, ci=0.9).set_index("model_id").loc[[f"m{k}" for k in range(6)]]
    ranks = 1 + (theta[:, None, :] > theta[:, :, None]).sum(axis=2)  # 1 + how many models are above, per draw
    np.testing.assert_allclose(table["rank_mean"], ranks.mean(axis=0))
    ordered = table.sort_values("theta_mean", ascending=False)
    order = [int(m[1:]) for m in ordered.index]
    np.testing.assert_allclose(ordered["prob_ahead_of_next"].values[:-1],
                               (theta[:, order[:-1]] > theta[:, order[1:]]).mean(axis=0))
    pairs = ahead_matrix(tree)["prob_ahead"].values
    np.testing.assert_allclose(pairs[0, 1], (theta[:, 0] > theta[:, 1]).mean(), rtol=1e-6)
