"""fit(thin=k): the posterior keeps every k-th draw of each chain, sample_stats every iteration, and
the setting is recorded; thinning is refused for ADVI; and fit's NUTS with nutpie runs with bayesirt's
adaptation settings (NUTPIE_SETTINGS, recorded)."""

import json

import numpy as np
import pytest

from bayesirt.data import simulate_pl
from bayesirt.errors import BayesIRTError
from bayesirt.inference.fitting import NUTPIE_SETTINGS, fit
from bayesirt.inference.nutpie_settings import (ASYMPTOTE_TARGET_ACCEPT, CONFIRMATORY_MIRT_TARGET_ACCEPT,
                                               LEARNED_SCALE_DOUBLINGS, SPARSE_GUESSING_RESPONSES, responses_per_item,
                                               spec_nutpie_settings)
from bayesirt.models.specs import load_spec


@pytest.fixture(scope="module")
def thinned():
    responses, _ = simulate_pl("2pl", n_items=12, n_models=15, seed=3)
    return fit(responses, "2pl", draws=40, tune=30, chains=2, thin=4, seed=2, progress=False)


@pytest.mark.slow
def test_posterior_keeps_every_kth_draw_and_stats_every_iteration(thinned):
    post, stats = thinned["posterior"], thinned["sample_stats"]
    assert post.sizes["draw"] == 10 and post.sizes["chain"] == 2
    np.testing.assert_array_equal(post["draw"].values, np.arange(0, 40, 4))
    assert stats.sizes["draw"] == 40  # divergences and tree depths of every iteration
    settings = json.loads(thinned.attrs["bayesirt_settings"])
    assert settings["thin"] == 4 and settings["draws"] == 40
    assert settings["nutpie"] == NUTPIE_SETTINGS


def test_thin_is_for_nuts_only():
    responses, _ = simulate_pl("2pl", n_items=5, n_models=6, seed=1)
    with pytest.raises(BayesIRTError, match="thin applies to method='nuts'"):
        fit(responses, "2pl", method="advi", thin=2)
    with pytest.raises(BayesIRTError, match="thin"):
        fit(responses, "2pl", thin=0)


def test_specs_with_an_asymptote_sample_at_a_higher_target_accept():
    """The 3PL and 4PL run at ASYMPTOTE_TARGET_ACCEPT (the 3PL below SPARSE_GUESSING_RESPONSES per item at nutpie's
    default target), confirmatory MIRT at CONFIRMATORY_MIRT_TARGET_ACCEPT, the 1PL/2PL at nutpie's default target, all
    with NUTPIE_SETTINGS' adaptation; a learned slope scale adds LEARNED_SCALE_DOUBLINGS; exploratory MIRT at nutpie's
    defaults."""
    dense, sparse = SPARSE_GUESSING_RESPONSES, SPARSE_GUESSING_RESPONSES - 0.5
    higher = NUTPIE_SETTINGS | {"target_accept": ASYMPTOTE_TARGET_ACCEPT}
    for name in ("3pl", "4pl"):
        assert spec_nutpie_settings(load_spec(name), dense) == higher
    assert spec_nutpie_settings(load_spec("3pl"), sparse) == NUTPIE_SETTINGS
    assert spec_nutpie_settings(load_spec("4pl"), sparse) == higher
    assert ASYMPTOTE_TARGET_ACCEPT > 0.8
    for name in ("2pl", "rasch"):
        for per_item in (sparse, dense):
            assert spec_nutpie_settings(load_spec(name), per_item) == NUTPIE_SETTINGS
    assert spec_nutpie_settings(load_spec("2pl-hierarchical"), dense) == NUTPIE_SETTINGS | {
        "extra_doublings": LEARNED_SCALE_DOUBLINGS}
    assert CONFIRMATORY_MIRT_TARGET_ACCEPT > 0.8
    assert spec_nutpie_settings(load_spec("mirt-confirmatory"), sparse) == NUTPIE_SETTINGS | {
        "target_accept": CONFIRMATORY_MIRT_TARGET_ACCEPT}
    assert spec_nutpie_settings(load_spec("mirt"), dense) is None


@pytest.mark.slow
def test_a_sparse_3pl_fit_records_the_default_target():
    """responses_per_item counts the observed cells per item; a 3PL fit on fewer than SPARSE_GUESSING_RESPONSES per
    item records nutpie's default target (no target_accept), on more the higher one."""
    responses, _ = simulate_pl("3pl", n_items=8, n_models=30, seed=3, missing=0.5)
    y = responses["responses"].values
    assert responses_per_item(responses) == (y >= 0).sum() / 8 < SPARSE_GUESSING_RESPONSES
    tree = fit(responses, "3pl", draws=20, tune=20, chains=1, seed=1, progress=False)
    assert "target_accept" not in json.loads(tree.attrs["bayesirt_settings"])["nutpie"]
    dense, _ = simulate_pl("3pl", n_items=4, n_models=SPARSE_GUESSING_RESPONSES, seed=3)
    assert responses_per_item(dense) == SPARSE_GUESSING_RESPONSES
    tree = fit(dense, "3pl", draws=20, tune=20, chains=1, seed=1, progress=False)
    assert json.loads(tree.attrs["bayesirt_settings"])["nutpie"]["target_accept"] == ASYMPTOTE_TARGET_ACCEPT
