"""Tests of the IRT response simulators."""

from __future__ import annotations

import numpy as np
import pytest

from bayesirt.data import MISSING, observed_mask, simulate_pl
from bayesirt.errors import DataError


@pytest.mark.parametrize("kind", ["1pl", "2pl", "3pl", "4pl"])
def test_shapes_and_truth(kind):
    ds, truth = simulate_pl(kind, n_items=12, n_models=30, seed=3)
    assert dict(ds.sizes) == {"item": 12, "model": 30}
    assert ds["responses"].dtype == np.int8
    assert ds["item"].values[0] == "i0000" and ds["model"].values[-1] == "m029"
    assert truth["theta"].dims == ("model",) and truth["intercept"].dims == ("item",)
    np.testing.assert_array_equal(truth["item"].values, ds["item"].values)
    np.testing.assert_array_equal(truth["model"].values, ds["model"].values)
    np.testing.assert_allclose(truth["intercept"], -truth["discrimination"] * truth["difficulty"])
    if kind == "1pl":
        assert np.all(truth["discrimination"].values == 1.0)
    assert (truth["guessing"].values > 0).all() == (kind in ("3pl", "4pl"))
    assert (truth["slip"].values > 0).all() == (kind == "4pl")


def test_reproducible_by_seed():
    a, ta = simulate_pl("3pl", n_items=15, n_models=40, seed=11, missing=0.2)
    b, tb = simulate_pl("3pl", n_items=15, n_models=40, seed=11, missing=0.2)
    c, _ = simulate_pl("3pl", n_items=15, n_models=40, seed=12, missing=0.2)
    np.testing.assert_array_equal(a["responses"].values, b["responses"].values)
    for var in ta.data_vars:
        np.testing.assert_array_equal(ta[var].values, tb[var].values)
    assert not np.array_equal(a["responses"].values, c["responses"].values)


def test_global_seed_untouched():
    np.random.seed(0)
    before = np.random.random()
    np.random.seed(0)
    simulate_pl(n_items=5, n_models=5, seed=1)
    assert np.random.random() == before


@pytest.mark.parametrize("missing", [0.05, 0.3])
def test_missing_fraction(missing):
    ds, _ = simulate_pl(n_items=200, n_models=100, seed=5, missing=missing)
    frac = 1.0 - observed_mask(ds).mean()
    assert abs(frac - missing) <= 0.01


def test_heavy_missing_keeps_every_row_and_column():
    ds, _ = simulate_pl(n_items=30, n_models=30, seed=2, missing=0.97)
    obs = observed_mask(ds)
    assert obs.any(axis=0).all() and obs.any(axis=1).all()
    assert (ds["responses"].values[~obs] == MISSING).all()


def test_proportion_correct_tracks_intercept():
    ds, truth = simulate_pl("2pl", n_items=20, n_models=2000, seed=7)
    p_item = ds["responses"].values.mean(axis=1)
    r = np.corrcoef(p_item, truth["intercept"].values)[0, 1]
    assert r > 0.9


def test_overrides_are_used():
    theta = np.linspace(-2, 2, 500)
    ds, truth = simulate_pl(
        "4pl", n_items=4, n_models=500, seed=1, theta=theta, discrimination=1.5,
        intercept=[-1.0, 0.0, 1.0, 2.0], guessing=0.25, slip=0.05,
    )
    np.testing.assert_array_equal(truth["theta"].values, theta)
    np.testing.assert_allclose(truth["difficulty"].values, -np.array([-1.0, 0.0, 1.0, 2.0]) / 1.5)
    low = ds["responses"].values[:, :50].mean()  # theta near -2: close to the guessing floor
    high = ds["responses"].values[:, -50:].mean()  # theta near 2: capped by 1 - slip
    assert 0.2 < low < 0.45 and 0.85 < high <= 0.98


def test_all_ones_certainty():
    # c + (1 - c - s) * sigmoid(huge) == 1 - s = 1 when slip is 0: every cell correct
    ds, _ = simulate_pl("2pl", n_items=3, n_models=4, seed=0, theta=np.full(4, 50.0), discrimination=1.0)
    assert (ds["responses"].values == 1).all()


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"kind": "5pl"}, "unknown model kind '5pl'"),
        ({"n_items": 1}, "n_items must be an integer of at least 2"),
        ({"missing": 1.0}, r"missing must be a fraction in \[0, 1\)"),
        ({"kind": "2pl", "guessing": 0.2}, "guessing applies only to kind='3pl'/'4pl'"),
        ({"kind": "3pl", "slip": 0.1}, "slip applies only to kind='3plu'/'4pl'"),
        ({"kind": "1pl", "discrimination": [1.0, 2.0, 1.0]}, "needs one common discrimination"),
        ({"theta": [0.0, 1.0]}, r"theta has shape \(2,\) but there are 10 models"),
        ({"kind": "4pl", "guessing": 0.6, "slip": 0.5}, "guessing \\+ slip < 1"),
    ],
)
def test_bad_arguments(kwargs, pattern):
    args = {"kind": "2pl", "n_items": 3, "n_models": 10, "seed": 0} | kwargs
    kind = args.pop("kind")
    with pytest.raises(DataError, match=pattern):
        simulate_pl(kind, **args)
