"""Posterior predictive checks: the statistics against direct computations, the guessing misfit
of a 2PL fitted to 3PL data found on the items that have it, no excess flags on 2PL data."""

import numpy as np
import pytest
import xarray as xr

from bayesirt.data import MISSING, simulate_pl
from bayesirt.errors import DataError
from bayesirt.inference.fitting import fit
from bayesirt.workflow.predictive import _item_rest_correlation, _ppp, _quadratic_contrast, posterior_predictive_check

N_ITEMS, N_MODELS = 30, 2000
SLOPE = 2.0
DIFFICULTY = np.linspace(-1.5, 2.5, N_ITEMS)
GUESSING = np.where(np.arange(N_ITEMS) % 2 == 0, 0.3, 0.02)  # every other item has a real lower asymptote
NUTS = {"method": "nuts", "draws": 300, "tune": 300, "chains": 2, "seed": 1, "progress": False}


def _fit_2pl_to(kind):
    a = np.full(N_ITEMS, SLOPE)
    responses, _ = simulate_pl(kind, n_items=N_ITEMS, n_models=N_MODELS, seed=5, discrimination=a,
                               intercept=-a * DIFFICULTY, guessing=GUESSING if kind == "3pl" else None)
    return fit(responses, "2pl", **NUTS)


@pytest.fixture(scope="module")
def misfit():
    return posterior_predictive_check(_fit_2pl_to("3pl"), draws=400, seed=0)


@pytest.mark.slow
def test_guessing_misfit_is_flagged_on_the_items_with_an_asymptote(misfit):
    items = misfit.items
    flagged = items.index[items["flag"].str.contains("guessing")]
    true = flagged[GUESSING[flagged] == 0.3]
    # the items with a lower asymptote, where it matters: above-average difficulty; there are 9 such
    # items, the 3 hardest (b > 1.8, above 96% of the abilities) look 2PL-like
    assert len(true) >= 5 and (DIFFICULTY[true] > 0).all()
    assert (items.loc[true, "curvature_ppp"] < 0.01).all()
    # a 2PL item may be flagged by chance (15 of them; the misfit also shifts the fitted scale that
    # their neighbours are read on): at most one, and with a weaker ppp than the real ones
    false = flagged.difference(true)
    assert len(false) <= 1 and (items.loc[false, "curvature_ppp"] > items.loc[true, "curvature_ppp"].max()).all()
    assert misfit.worst_items.index[0] in true
    # the omnibus X2 sees the same items, with less power; like the contrast it may flag one 2PL item by
    # chance (with seed 1 the hardest, b = 2.5, next to two guessing items whose misfit shifts the scale)
    x2 = items.index[items["flag"].str.contains("X2")]
    assert len(set(x2) & set(true)) >= 1 and len(set(x2) - set(true)) <= 1


@pytest.mark.slow
def test_no_excess_flags_on_data_from_the_fitted_model():
    result = posterior_predictive_check(_fit_2pl_to("2pl"), draws=400, seed=0)
    assert (result.items["flag"] != "").sum() <= 3  # 30 items at alpha .05: about 1.5 by chance
    assert (result.models["flag"] != "").mean() <= 0.05
    assert result.global_checks["flag"].eq("").all()


@pytest.mark.slow
def test_replicates_are_labelled_and_reproducible(misfit):
    rep = misfit.replicated
    assert rep["item_proportion"].dims == ("chain", "draw", "item") and rep.sizes["draw"] == 400
    assert rep["model_accuracy"].sizes["model"] == N_MODELS
    assert set(misfit.items.columns) >= {"proportion_ppp", "item_rest_corr_ppp", "outfit_ppp", "infit_ppp", "x2_ppp",
                                          "curvature_ppp", "fit_ppp"}


def test_item_rest_correlation_matches_direct_computation():
    rng = np.random.default_rng(0)
    y = (rng.random((6, 40)) < 0.5).astype(float)
    observed = rng.random((6, 40)) > 0.2
    y = np.where(observed, y, 0.0)
    got = _item_rest_correlation(y, observed)
    for i in range(6):
        others = np.delete(np.arange(6), i)
        rest = (y[others] * observed[others]).sum(0) / observed[others].sum(0)
        keep = observed[i]
        assert got[i] == pytest.approx(np.corrcoef(y[i, keep], rest[keep])[0, 1], rel=1e-12)


@pytest.mark.parametrize("n_groups", [3, 4, 10])
def test_curvature_contrast_is_orthonormal_and_positive_for_convex_residuals(n_groups):
    q = _quadratic_contrast(n_groups)
    x = np.arange(n_groups)
    assert q @ q == pytest.approx(1) and q.sum() == pytest.approx(0, abs=1e-12)
    assert q @ x == pytest.approx(0, abs=1e-12)  # a pure slope misfit leaves the curvature alone
    assert q @ (x - n_groups / 3) ** 2 > 0  # residuals high at both ends: a lower asymptote


def test_ppp_counts_ties_half():
    rep = np.array([[1.0], [2.0], [2.0], [3.0]])
    assert _ppp(rep, np.array([2.0]))[0] == pytest.approx(0.25 + 0.5 * 0.5)


def test_same_seed_same_result_and_bad_input():
    tree = xr.DataTree.from_dict({
        "posterior": _tiny_posterior(), "observed_data": xr.Dataset({"responses": _tiny_responses()}),
    })
    a, b = (posterior_predictive_check(tree, draws=5, seed=3) for _ in range(2))
    np.testing.assert_array_equal(a.items["x2_ppp"], b.items["x2_ppp"])
    with pytest.raises(DataError, match="alpha must be between 0 and 1"):
        posterior_predictive_check(tree, alpha=1.5)
    with pytest.raises(DataError, match="observed_data"):
        posterior_predictive_check(xr.DataTree.from_dict({"posterior": _tiny_posterior()}))


def _tiny_responses():
    y = np.array([[1, 0, 1, MISSING], [0, 0, 1, 1], [1, 1, 1, 0]], dtype="int8")
    return xr.DataArray(y, dims=("item", "model"), coords={"item": ["i1", "i2", "i3"], "model": list("abcd")})


def _tiny_posterior():
    rng = np.random.default_rng(1)
    return xr.Dataset(
        {"theta": (("chain", "draw", "model"), rng.normal(size=(1, 10, 4))),
         "discrimination": (("chain", "draw", "item"), rng.lognormal(size=(1, 10, 3))),
         "intercept": (("chain", "draw", "item"), rng.normal(size=(1, 10, 3)))},
        coords={"item": ["i1", "i2", "i3"], "model": list("abcd")},
    )


def test_prior_check_flags_priors_that_make_items_degenerate(tmp_path):
    from bayesirt.workflow.predictive import prior_predictive_check
    from bayesirt.models.specs import load_spec

    text = load_spec("2pl").text.replace("mu = 0.0\nsigma = 2.0", "mu = 0.0\nsigma = 30.0")
    (tmp_path / "wide.toml").write_text(text)
    wide = load_spec(tmp_path / "wide.toml")
    assert wide.priors["intercept"].params["sigma"] == 30.0
    simulated, table = prior_predictive_check(wide, design=(40, 30), draws=200, seed=1)
    degenerate = table.set_index("statistic").loc["share of all-0/all-1 items"]
    assert degenerate["prior_median"] > 0.5 and "narrow the intercept" in degenerate["flag"]
    _, table = prior_predictive_check(load_spec("2pl"), design=(40, 30), draws=200, seed=1)
    assert (table["flag"] == "").all()
    # the simulated abilities follow the spec's N(0, 1)
    assert abs(float(simulated["theta_sd"].mean()) - 1.0) < 0.05


def test_prior_check_chunks_draws_without_changing_the_result():
    from bayesirt.workflow.predictive import prior_predictive_check
    from bayesirt.models.specs import load_spec

    spec = load_spec("3pl")
    whole, _ = prior_predictive_check(spec, design=(30, 20), draws=40, seed=3)
    chunked, _ = prior_predictive_check(spec, design=(30, 20), draws=40, seed=3, chunk_cells=1_000)  # 1 draw a chunk
    xr.testing.assert_identical(whole, chunked)
