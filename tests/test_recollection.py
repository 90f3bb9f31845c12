"""Detector cut-offs calibrated on simulated honest re-collections (issue 44 item 2): the flip
simulator, the cut-offs and their cross-fitted rates, and the stated rates holding on fresh
re-collections where the in-sample cut-offs do not."""

import numpy as np
import pytest

from bayesirt.data.datasets.simulate import simulate_pl
from bayesirt.errors import BayesIRTError, ConfigError
from bayesirt.safety.adaptive import score_test
from bayesirt.safety.personfit import item_parameters, lz_statistics
from bayesirt.safety.recollection import calibrate_null, describe_null, recollect
from bayesirt.safety.sandbagging import sandbagging_experiment


def test_recollect_flips_observed_cells_at_the_rate():
    y = np.random.default_rng(0).integers(0, 2, (200, 500)).astype(np.int8)
    y[:, :50] = -1
    z = recollect(y, 0.028, np.random.default_rng(1))
    assert np.all(z[:, :50] == -1) and set(np.unique(z[:, 50:])) == {0, 1}
    assert abs(np.mean(z[:, 50:] != y[:, 50:]) - 0.028) < 0.002  # 90,000 cells: sd 0.0006
    np.testing.assert_array_equal(z, recollect(y, 0.028, np.random.default_rng(1)))


def test_calibrate_null_by_hand():
    """100 runs with lz = 1..100 and ratio = 100..1: at 10%, lz <= 10 and ratio > 90 flag exactly 10 runs
    each; each fold's cut-off from the other 80 runs flags 8 of them, so the cross-fitted rates are
    close to 10% (the other folds' 10% points fall within a run or two of the full one)."""
    lz = np.arange(1.0, 101.0)
    ratio = lz[::-1].copy()
    cal = calibrate_null(lz, ratio, fpr=0.1, folds=5, seed=0)
    assert cal.personfit == 10.0 and cal.shift == 91.0
    assert np.sum(lz <= cal.personfit) == 10 and np.sum(ratio > cal.shift) == 9  # at most 10%, ties at 91 below
    assert all(0.05 <= cal.crossfit[k] <= 0.15 for k in ("personfit", "shift"))
    assert cal.crossfit["combined"] >= max(cal.crossfit["personfit"], cal.crossfit["shift"])
    with pytest.raises(ConfigError, match=r"The 'folds' parameter of calibrate_null must be an integer in \[2, "):
        calibrate_null(lz, ratio, fpr=0.1, folds=1)
    assert "in-sample" in describe_null("in_sample", 0.028, 5)
    assert "2.8% of its cells" in describe_null("recollection", 0.028, 5)


@pytest.fixture(scope="module")
def cohort():
    rng = np.random.default_rng(3)
    a, d = rng.lognormal(0.2, 0.3, 60), rng.normal(0, 1.5, 60)
    ds, _ = simulate_pl("2pl", n_items=60, n_models=800, seed=4, theta=rng.normal(size=800), discrimination=a,
                        intercept=d)
    return ds


def _measured(ds, result, replicates=2):
    """Shares of fresh honest re-collections (2.8% flips, unseen seeds) flagged at the result's cut-offs."""
    from bayesirt.frequentist.mml import fit_mml

    y = ds["responses"].values.astype(np.int8)
    bank = item_parameters(fit_mml(ds, "2pl", priors=True, se=False).items, ds["item"].values)
    history = score_test(y, *bank[:2], method="map").theta
    test = np.flatnonzero(result.items["in_test"].values)
    s, gap = result.settings, result.genuine["gap"].values
    rates = []
    for r in range(replicates):
        z = recollect(y, 0.028, np.random.default_rng(100 + r))
        lz = lz_statistics(z, score_test(z, *bank[:2], method="map").theta, *bank).lz
        shift = score_test(z, *bank[:2], test, method="map").theta - history
        rates.append([np.mean(lz <= s["cutoff"]), np.mean(np.abs(shift) > s["shift_multiplier"] * gap)])
    return np.mean(rates, axis=0)


@pytest.mark.slow  # false-positive rates measured on 1,600 fresh re-collections
def test_stated_rates_hold_on_fresh_re_collections(cohort):
    """Calibrated on re-collections, the stated 10% holds within 3 points for both detectors on fresh
    re-collections (800 models x 2: sd ~0.8 points), and the cross-fitted rates the report states are
    as close; calibrated in-sample (SAFE), person fit flags far more than 10% of honest re-runs."""
    kw = dict(fpr=0.1, scopes=("uniform",), shifts=(1.0,), test_length=20, seed=0, progress=False)
    fitted = sandbagging_experiment(cohort, **kw)
    personfit, shift = _measured(cohort, fitted)
    assert abs(personfit - 0.1) <= 0.03 and abs(shift - 0.1) <= 0.03
    assert all(abs(fitted.settings["crossfit_fpr"][k] - 0.1) <= 0.03 for k in ("personfit", "shift"))
    naive = sandbagging_experiment(cohort, null="in_sample", **kw)
    assert naive.settings["crossfit_fpr"] == {} and "in-sample" in naive.settings["null_description"]
    assert _measured(cohort, naive)[0] >= 0.2
    uniform = fitted.detection.set_index("scope").loc["uniform"]
    assert uniform["shift_rate"] >= 0.5  # one-logit sandbaggers still caught by the shift test
