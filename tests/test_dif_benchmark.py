"""Tests of the planted-family-DIF benchmark simulator."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from bayesirt.data import (
    FAMILIES,
    MISSING,
    audit_population,
    derive_family,
    derive_owner,
    observed_mask,
    simulate_dif_benchmark,
)
from bayesirt.errors import ConfigError, DataError


def test_shapes_ids_and_truth():
    ds, truth = simulate_dif_benchmark(n_owners=7, models_per_owner_family=2, n_items=30, n_dims=2, seed=1)
    assert dict(ds.sizes) == {"item": 30, "model": 7 * 3 * 2}
    assert ds["responses"].dtype == np.int8 and ds.attrs["name"] == "simulated DIF benchmark"
    assert ds["item"].values[0] == "item00000" and ds["item"].values[-1] == "item00029"
    assert list(ds["model"].values[:3]) == ["owner0000/Qwen-ckpt-0", "owner0000/Qwen-ckpt-1", "owner0000/Llama-ckpt-0"]
    assert list(ds["item_group"].values[:5]) == ["g0", "g1", "g2", "g3", "g0"]
    assert truth["families"] == ("Qwen", "Llama", "Gemma")
    assert truth["dif_items"].shape == (30,) and truth["dif_items"].dtype == bool
    assert truth["family_effect"].shape == (30, 3) and truth["dif_range"].shape == (30,)
    assert truth["easiness"].shape == (30,) and truth["loading"].shape == (30, 2) and truth["theta"].shape == (42, 2)
    assert (truth["loading"][:, 0] > 0).all()
    assert (ds["responses"].values != MISSING).all()


def test_ids_recover_family_and_owner():
    ds, truth = simulate_dif_benchmark(n_owners=4, families=FAMILIES, models_per_owner_family=2, n_items=10, seed=2)
    ids = ds["model"].values
    np.testing.assert_array_equal(derive_family(ids), ds["family"].values)
    np.testing.assert_array_equal(derive_owner(ids), ds["owner"].values)
    expected_family = np.tile(np.repeat(np.array(FAMILIES), 2), 4)
    np.testing.assert_array_equal(ds["family"].values, expected_family)
    np.testing.assert_array_equal(ds["owner"].values, np.repeat([f"owner{o:04d}" for o in range(4)], 10))
    assert "owner0000/Mistral-Mixtral-ckpt-1" in ids


def test_planted_effects_centred_on_dif_items_only():
    _, truth = simulate_dif_benchmark(n_owners=3, n_items=200, dif_fraction=0.3, seed=4)
    dif, delta = truth["dif_items"], truth["family_effect"]
    assert dif.sum() == 60
    np.testing.assert_allclose(delta.sum(axis=1), 0.0, atol=1e-12)
    assert (delta[~dif] == 0).all() and (delta[dif] != 0).all()
    np.testing.assert_array_equal(truth["dif_range"], delta.max(axis=1) - delta.min(axis=1))
    assert (truth["dif_range"][dif] > 0).all()
    expected_sd = 0.8 * np.sqrt(2 / 3)  # centring 3 families shrinks the variance by (F - 1) / F
    assert delta[dif].std() == pytest.approx(expected_sd, rel=0.15)


@pytest.mark.parametrize("fraction", [0.0, 1.0])
def test_no_or_all_dif_items(fraction):
    _, truth = simulate_dif_benchmark(n_owners=3, n_items=20, dif_fraction=fraction, seed=0)
    assert truth["dif_items"].sum() == 20 * fraction


def test_reproducible_by_seed_and_global_seed_untouched():
    np.random.seed(0)
    before = np.random.random()
    np.random.seed(0)
    a, ta = simulate_dif_benchmark(n_owners=5, n_items=40, missing=0.1, seed=11)
    assert np.random.random() == before
    b, tb = simulate_dif_benchmark(n_owners=5, n_items=40, missing=0.1, seed=11)
    c, _ = simulate_dif_benchmark(n_owners=5, n_items=40, missing=0.1, seed=12)
    np.testing.assert_array_equal(a["responses"].values, b["responses"].values)
    for key in ta:
        np.testing.assert_array_equal(ta[key], tb[key])
    assert not np.array_equal(a["responses"].values, c["responses"].values)


@pytest.mark.parametrize("missing", [0.05, 0.3])
def test_missing_rate_masks_the_complete_data(missing):
    full, _ = simulate_dif_benchmark(n_owners=50, n_items=200, seed=5)
    ds, _ = simulate_dif_benchmark(n_owners=50, n_items=200, missing=missing, seed=5)
    obs = observed_mask(ds)
    assert abs((1.0 - obs.mean()) - missing) <= 0.01
    np.testing.assert_array_equal(ds["responses"].values[obs], full["responses"].values[obs])


def test_heavy_missing_keeps_every_model_and_item():
    ds, _ = simulate_dif_benchmark(n_owners=10, n_items=20, missing=0.97, seed=2)
    obs = observed_mask(ds)
    assert obs.any(axis=0).all() and obs.any(axis=1).all()


def test_planted_dif_is_visible_in_proportions():
    ds, truth = simulate_dif_benchmark(n_owners=300, n_items=200, seed=3)
    y, family = ds["responses"].values, ds["family"].values
    props = np.stack([y[:, family == f].mean(axis=1) for f in truth["families"]], axis=1)
    spread = props.max(axis=1) - props.min(axis=1)
    dif = truth["dif_items"]
    assert spread[dif].mean() > 1.4 * spread[~dif].mean()
    assert spearmanr(spread, truth["dif_range"]).statistic > 0.4


def test_feeds_audit_population():
    ds, _ = simulate_dif_benchmark(seed=0)
    pop = audit_population(ds)
    assert (pop["status"] == "retained").all() and pop["representative"].all()
    assert pop.groupby("owner")["fold"].nunique().eq(1).all()
    per_half = pop.groupby(["family", "fold"]).size().unstack()
    assert ((per_half[0] - per_half[1]).abs() <= 4).all()


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        (
            {"n_owners": 0},
            r"^The 'n_owners' parameter of simulate_dif_benchmark must be a positive integer; got 0\.$",
        ),
        ({"models_per_owner_family": 1.5}, r"'models_per_owner_family' parameter .*; got 1\.5"),
        ({"n_items": 1}, r"'n_items' parameter .* an integer >= 2; got 1"),
        ({"n_groups": 0}, r"'n_groups' parameter .* positive integer; got 0"),
        ({"n_items": 10, "n_groups": 11}, r"'n_groups' parameter .* at most n_items=10; got 11"),
        ({"n_dims": True}, r"'n_dims' parameter .*; got True"),
        ({"dif_fraction": 1.5}, r"'dif_fraction' parameter .* a number in \[0, 1\]; got 1\.5"),
        ({"missing": 1.0}, r"'missing' parameter .* a number in \[0, 1\); got 1\.0"),
        ({"missing": "0.1"}, r"'missing' parameter .*; got '0\.1'"),
        ({"dif_sd": -0.1}, r"'dif_sd' parameter .* a non-negative number; got -0\.1"),
        ({"dif_sd": float("inf")}, r"'dif_sd' parameter .*; got inf"),
        ({"families": ("Qwen",)}, r"'families' parameter .* at least 2 distinct names from \('Qwen'"),
        ({"families": ("Qwen", "Qwen")}, r"'families' parameter .*; got \('Qwen', 'Qwen'\)"),
        ({"families": ("Qwen", "GPT")}, r"'families' parameter .*; got \('Qwen', 'GPT'\)"),
        ({"families": "Qwen"}, r"'families' parameter .*; got 'Qwen'"),
        ({"seed": -1}, r"'seed' parameter .* non-negative integer; got -1"),
    ],
)
def test_bad_arguments(kwargs, pattern):
    with pytest.raises(ConfigError, match=pattern):
        simulate_dif_benchmark(**kwargs)
