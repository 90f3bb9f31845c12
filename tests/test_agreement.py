"""The Bayes-versus-MML agreement report: nothing flagged where the posterior and the classical
fits should agree (LSAT6, a simulated 2PL), shrunken items flagged under a deliberately strong
prior, an injected discrepancy flagged as unexplained, bad input named."""

import numpy as np
import pytest

from bayesirt.data import load_dataset, simulate_pl
from bayesirt.errors import DataError
from bayesirt.frequentist import compare_estimates, fit_mml
from bayesirt.inference.fitting import fit
from bayesirt.models.specs import load_spec

NUTS = {"method": "nuts", "draws": 500, "tune": 500, "chains": 2, "seed": 1, "progress": False}


def _check(responses, spec):
    tree = fit(responses, spec, **NUTS)
    ml = fit_mml(responses, spec)
    map_fit = fit_mml(responses, spec, priors=True, se=False)
    return tree, ml, map_fit, compare_estimates(tree, ml, map_fit)


@pytest.fixture(scope="module")
def simulated():
    responses, truth = simulate_pl("2pl", n_items=40, n_models=300, seed=7)
    return responses, truth, _check(responses, load_spec("2pl"))


@pytest.mark.slow
def test_lsat6_agrees_with_mml():
    responses = load_dataset("lsat6")
    _, ml, _, agreement = _check(responses, load_spec("2pl"))
    assert agreement.flagged.empty, agreement.flagged
    el = agreement.elements.set_index(["parameter", "element"])
    for name in ("discrimination", "intercept"):
        assert (el.loc[name, "diff_ml"].abs() < 0.1).all()  # slope and intercept within 0.1 of MML
    assert set(agreement.summary["parameter"]) == {"discrimination", "intercept", "theta"}


@pytest.mark.slow
def test_simulated_2pl_agrees_with_mml(simulated):
    _, _, (_, _, _, agreement) = simulated
    assert agreement.flagged.empty, agreement.flagged
    summary = agreement.summary.set_index("parameter")
    assert (summary["corr_ml"] > 0.99).all()
    assert (summary["max_abs_diff_map_sd"] < np.sqrt(3)).all()


@pytest.mark.slow
def test_strong_prior_flags_the_shrunken_items(simulated, tmp_path):
    responses, _, (_, ml, _, _) = simulated
    text = load_spec("2pl").text.replace('name = "2pl"', 'name = "strong"')
    (tmp_path / "strong.toml").write_text(text.replace("mu = 0.0\nsigma = 0.5", "mu = 0.0\nsigma = 0.1"))
    strong = load_spec(tmp_path / "strong.toml")  # true slopes spread as LogNormal(0, 0.5)
    assert strong.priors["discrimination"].params["sigma"] == 0.1
    tree = fit(responses, strong, **NUTS)
    agreement = compare_estimates(tree, ml, fit_mml(responses, strong, priors=True, se=False))
    a = agreement.elements[agreement.elements["parameter"] == "discrimination"]
    log_ml = np.log(a["ml"])
    assert (a.loc[log_ml.abs() > 0.4, "flag"] == "prior").all()  # > 4 prior sds from the prior median
    assert (a.loc[log_ml.abs() < 0.1, "flag"] == "").all()
    assert (agreement.elements["flag"] != "unexplained").all()


@pytest.mark.slow
def test_injected_discrepancy_is_unexplained(simulated):
    _, _, (tree, ml, map_fit, _) = simulated
    post = tree["posterior"].to_dataset()
    sd = float(post["intercept"].sel(item="i0003").std())
    shifted = post.copy(deep=True)
    shifted["intercept"].loc[{"item": "i0003"}] += 3 * sd
    agreement = compare_estimates(shifted, ml, map_fit)
    flagged = agreement.flagged
    assert list(zip(flagged["parameter"], flagged["element"], flagged["flag"])) == [("intercept", "i0003", "unexplained")]


@pytest.mark.slow
def test_mismatched_fits_are_named(simulated):
    responses, _, (tree, _, _, _) = simulated
    other = fit_mml(responses.isel(item=slice(0, 30)), "2pl", se=False)
    with pytest.raises(DataError, match="cover different items"):
        compare_estimates(tree, other, other)
    with pytest.raises(DataError, match="threshold_sd must be positive"):
        compare_estimates(tree, other, other, threshold_sd=0)
