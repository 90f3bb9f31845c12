"""Split-half retention (SAFE "The 2PL IRT Model"): the statistic recomputed by hand from the
fits, the regularization effect it exists to show, reproducibility and bad input."""

import warnings

import numpy as np
import pytest

from bayesirt.data import simulate_pl
from bayesirt.errors import DataError, SpecError
from bayesirt.frequentist import fit_mml, split_half_retention

# module fixtures fit models (seconds to minutes under load): the whole module is in the slow tier
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def small_cohort():
    # 60 models x 60 items: 30 models per half, where ML slopes of items that split a half
    # perfectly run to their bound; the regime in which SAFE needed its priors.
    responses, _ = simulate_pl("2pl", n_items=60, n_models=60, seed=11)
    return responses, split_half_retention(responses, splits=5, top=10, seed=1, progress=False)


def test_retention_is_the_ratio_of_summed_top_slopes(small_cohort):
    responses, ds = small_cohort
    order = np.random.default_rng(1).permutation(60)
    halves = [responses.isel(model=np.sort(h)) for h in (order[:30], order[30:])]
    with warnings.catch_warnings():  # slopes of some splits run to their bound (test_priors_stabilise_retention)
        warnings.simplefilter("ignore", RuntimeWarning)
        a1, a2 = (fit_mml(h, "2pl", se=False).items["discrimination"].values for h in halves)
    top = np.argsort(-a1, kind="stable")[:10]
    assert ds["retention"].sel(split=0, fit="ml").item() == pytest.approx(a2[top].sum() / a1[top].sum(), rel=1e-12)
    assert ds["top_count"].sel(fit="ml").sum().item() == 5 * 10


def test_priors_stabilise_retention(small_cohort):
    _, ds = small_cohort
    ml, map_ = ds["retention"].sel(fit="ml").values, ds["retention"].sel(fit="map").values
    assert ds["warnings"].sel(fit="ml").sum() > 0 and ds["warnings"].sel(fit="map").sum() == 0
    assert np.std(ml) > 3 * np.std(map_)
    assert 0.6 <= map_.mean() <= 1.0  # MAP slopes of the selected items shrink back only a little
    # the bulk of the slope distribution moves by less than the top does
    assert abs(ds["median_half1"].sel(fit="map").mean() - ds["median_half2"].sel(fit="map").mean()) < 0.15


def test_same_seed_same_splits(small_cohort):
    responses, ds = small_cohort
    again = split_half_retention(responses, splits=2, top=10, seed=1, progress=False)
    np.testing.assert_array_equal(again["retention"].values, ds["retention"].isel(split=slice(0, 2)).values)


@pytest.mark.parametrize("kwargs, message", [
    ({"top": 60}, "top must be between 1"),
    ({"splits": 0}, "splits must be at least 1"),
    ({"spec": "1pl"}, "no per-item discrimination"),
])
def test_bad_arguments_are_named(small_cohort, kwargs, message):
    responses, _ = small_cohort
    with pytest.raises((DataError, SpecError), match=message):
        split_half_retention(responses, progress=False, **kwargs)
