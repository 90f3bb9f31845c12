"""Evaluating a new model on a few items of a calibrated bank (issue 34): the bank readers, the ability
posterior against brute-force integration, select -> harness run -> score end to end, id errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy import integrate, stats
from scipy.special import expit

from bayesirt.data import load, make_responses
from bayesirt.data.datasets.simulate import simulate_pl
from bayesirt.errors import BayesIRTError, ConfigError, DataError
from bayesirt.jobs.frequentist import run_mml_job
from bayesirt.frequentist.mml import fit_mml
from bayesirt.safety.bank import Bank, read_bank
from bayesirt.jobs.bank import run_score_job, run_select_job
from bayesirt.safety.scoring import align_responses, predict_accuracy
from bayesirt.safety.short_test import AdaptiveTest, harness_ids, select_items
from lm_eval_runs import write_lm_eval_run

TASK = "arc_challenge"


def _tiny_bank(draws: int = 3) -> Bank:
    rng = np.random.default_rng(5)
    a = rng.lognormal(0.0, 0.3, (draws, 4))
    d = rng.normal(0.0, 1.0, (draws, 4))
    z = np.zeros_like(d)
    return Bank(np.array(["i0", "i1", "i2", "i3"]), np.full(4, "all"), a, d, z + 0.1, z + 0.05,
                np.linspace(-2, 2, 50), kind="posterior draws", source="tiny")


def test_ability_posterior_and_predicted_accuracy_match_brute_force_integration():
    bank = _tiny_bank()
    y = np.array([[1, 0, 1], [0, 0, 1], [-1, 1, -1], [-1, -1, -1]], dtype=np.int8)  # items x models

    def prob(s, j, t):
        return bank.guessing[s, j] + (1 - bank.guessing[s, j] - bank.slip[s, j]) * expit(
            bank.discrimination[s, j] * t + bank.intercept[s, j])

    def lik(s, m, t):
        out = stats.norm.pdf(t)
        for j in range(4):
            if y[j, m] >= 0:
                p = prob(s, j, t)
                out *= p if y[j, m] == 1 else 1 - p
        return out

    pred = predict_accuracy(bank, y, samples=400)
    for m in range(3):
        z = [integrate.quad(lambda t, s=s: lik(s, m, t), -12, 12, epsabs=1e-13)[0] for s in range(bank.n_draws)]
        total = sum(z)
        mean = sum(integrate.quad(lambda t, s=s: t * lik(s, m, t), -12, 12, epsabs=1e-13)[0]
                   for s in range(bank.n_draws)) / total
        second = sum(integrate.quad(lambda t, s=s: t * t * lik(s, m, t), -12, 12, epsabs=1e-13)[0]
                     for s in range(bank.n_draws)) / total
        rest = [j for j in range(4) if y[j, m] < 0]
        expected = sum(integrate.quad(lambda t, s=s: sum(prob(s, j, t) for j in rest) * lik(s, m, t), -12, 12,
                                      epsabs=1e-13)[0] for s in range(bank.n_draws)) / total
        assert pred.theta_mean[m] == pytest.approx(mean, abs=1e-6)
        assert pred.theta_sd[m] == pytest.approx(np.sqrt(second - mean**2), abs=1e-6)
        assert pred.predicted_accuracy[m] == pytest.approx(((y[:, m] == 1).sum() + expected) / 4, abs=1e-6)
        # the draws are mixed by the marginal likelihood of the answers: ESS below the number of draws
        w = np.array(z) / total
        assert pred.draw_ess[m] == pytest.approx(1 / np.sum(w**2), rel=1e-5)
        assert pred.lower[m] <= pred.predicted_accuracy[m] <= pred.upper[m]


def test_fixed_items_versus_item_uncertainty_widens_the_interval():
    bank = _tiny_bank(draws=40)
    fixed = Bank(bank.item_ids, bank.item_group, *(getattr(bank, k).mean(0, keepdims=True) for k in
                                                    ("discrimination", "intercept", "guessing", "slip")),
                 bank.abilities)
    y = np.array([[1], [1], [-1], [-1]], dtype=np.int8)
    assert predict_accuracy(bank, y).theta_sd[0] > predict_accuracy(fixed, y).theta_sd[0]


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """A 2PL bank fitted by MAP-EM (bayesirt mml --priors) to 500 simulated models on 80 items with plain
    integer ids (as the leaderboard CSVs have), plus 40 new models from the same population."""
    root = tmp_path_factory.mktemp("bank")
    responses, truth = simulate_pl("2pl", n_items=80, n_models=540, seed=11)
    ids = [str(100 + 3 * i) for i in range(80)]
    data = make_responses(responses["responses"].values, item_id=ids,
                          model_id=[f"m{k:03d}" for k in range(540)])
    cal, new = data.isel(model=slice(0, 500)), data.isel(model=slice(500, None))
    cal_path = root / "calibration.nc"
    cal.to_netcdf(cal_path)
    run_mml_job(cal, root / "fit", spec="2pl", priors=True)
    return root, cal, new


@pytest.mark.slow
def test_select_then_harness_run_then_score_end_to_end(calibrated, tmp_path):
    root, cal, new = calibrated
    bank_path = root / "fit" / "mml.nc"
    run_select_job(bank_path, tmp_path / "test", budget=20, task=TASK, calibration=root / "calibration.nc")
    items = pd.read_csv(tmp_path / "test" / "test_items.csv", dtype={"item_id": str})
    assert list(items.columns[:1]) == ["item_id"] and len(items) == 20
    samples = json.loads((tmp_path / "test" / "lm_eval_samples.json").read_text())
    assert list(samples) == [TASK] and samples[TASK] == [int(i) for i in items["item_id"]]
    assert json.loads((tmp_path / "test" / "inspect_sample_ids.json").read_text()) == samples
    # the harness runs exactly those docs for three new models
    run = tmp_path / "run"
    full = {}
    for k in range(3):
        model = f"org/new-{k}"
        answers = new["responses"].sel(model=new["model"].values[k], item=items["item_id"].values).values
        write_lm_eval_run(run, model, TASK, samples[TASK], answers)
        full[model] = float(new["responses"].isel(model=k).values.mean())
    assert load(run)["item"].values[0].startswith(f"{TASK}/")
    run_score_job(bank_path, run, tmp_path / "scores", task=TASK, calibration=root / "calibration.nc")
    scores = pd.read_csv(tmp_path / "scores" / "scores.csv")
    assert list(scores.columns[:6]) == ["model", "n_items", "predicted_accuracy", "lower", "upper", "person_fit_flag"]
    assert (scores["n_items"] == 20).all()
    for row in scores.itertuples():
        assert row.lower <= full[row.model] <= row.upper, (row.model, full[row.model], row.lower, row.upper)
    nc = xr.open_dataset(tmp_path / "scores" / "scores.nc")
    assert set(nc["model"].values) == set(full) and nc.attrs["cutoff_method"] == "empirical"
    report = (tmp_path / "scores" / "report.md").read_text()
    assert "org/new-0" in report and "Laplace draws (joint covariance)" in report


@pytest.mark.slow
def test_held_out_coverage_from_selected_items(calibrated):
    _, cal, new = calibrated
    bank = read_bank(fit_mml(cal, "2pl", priors=True, se=True), draws=100, calibration=cal)
    y = new["responses"].values
    for method in ("score", "information"):
        chosen = select_items(bank, 15, method=method)
        part = np.full_like(y, -1)
        part[chosen] = y[chosen]
        pred = predict_accuracy(bank, part, samples=1000, calibrate=True)
        for lo, hi in ((pred.lower, pred.upper), (pred.model_lower, pred.model_upper)):
            inside = (y.mean(0) >= lo) & (y.mean(0) <= hi)
            assert inside.mean() >= 0.8, method  # 40 models: 90% nominal, Binomial(40, 0.9) is >= 32 w.p. 0.96
        # the data follow the 2PL: the calibration cohort needs about the model's own interval
        assert 0.75 < pred.scale[0] < 1.35 and np.all(pred.scale == pred.scale[0])
        nearest = predict_accuracy(bank, part, samples=1000, calibrate=True, rule="nearest")
        assert nearest.scale[0] <= pred.scale[0]  # never beyond the conservative (>= 90%) factor
    with pytest.raises(ConfigError, match="The 'rule' parameter of predict_accuracy must be one of"):
        predict_accuracy(bank, part, calibrate=True, rule="median")


def test_unknown_item_ids_are_refused_with_their_names(calibrated, tmp_path):
    root, cal, new = calibrated
    bank = read_bank(root / "fit" / "mml.nc")
    bad = new.assign_coords(item=[*new["item"].values[:-2], "999999", "nope"])
    with pytest.raises(DataError, match=r"^2 item id\(s\) are not in the item bank \(.*mml\.nc, 80 items, e\.g\. '100'\): "
                                        r"'999999', 'nope'; use the bank's item ids"):
        align_responses(bank, bad)
    with pytest.raises(DataError, match=r"^1 model id\(s\) are not in the responses: 'ghost'"):
        align_responses(bank, new, models=["m500", "ghost"])
    with pytest.raises(DataError, match="not in the item bank"):
        AdaptiveTest(bank, budget=5).record("nope", 1)
    with pytest.raises(DataError, match="no item bank at"):
        read_bank(tmp_path / "missing.nc")


def test_harness_id_rule():
    assert harness_ids(["arc_easy/3", "arc_easy/x7", "mmlu_anatomy/2"]) == {"arc_easy": [3, "x7"], "mmlu_anatomy": [2]}
    assert harness_ids(["anatomy.12", "virology.4"], task="mmlu") == {"mmlu_anatomy": [12], "mmlu_virology": [4]}
    assert harness_ids(["5", "9"], ["gsm8k", "gsm8k"]) == {"gsm8k": [5, 9]}
    with pytest.raises(DataError, match=r"cannot tell the harness task and document of item '5'.*pass task=NAME"):
        harness_ids(["5"])


def test_adaptive_test_gives_each_item_once_and_tracks_the_grid_posterior(calibrated):
    root, _, new = calibrated
    bank = read_bank(root / "fit" / "mml.nc")
    answers = dict(zip(new["item"].values.astype(str), new["responses"].isel(model=0).values, strict=True))
    test = AdaptiveTest(bank, budget=12)
    while (item := test.next_item()) is not None:
        test.record(item, answers[item])
    assert len(set(test.given)) == 12 and test.done
    y = test.responses()
    assert (y >= 0).sum() == 12
    again = predict_accuracy(Bank(bank.item_ids, bank.item_group, *(getattr(bank, k).mean(0, keepdims=True) for k in
                                                                     ("discrimination", "intercept", "guessing",
                                                                      "slip")), bank.abilities), y[:, None])
    assert again.theta_mean[0] == pytest.approx(test.theta, abs=1e-6)
    with pytest.raises(ConfigError, match=r"The 'budget' parameter of AdaptiveTest must be an integer in \[1, 80\]; got 0."):
        AdaptiveTest(bank, budget=0)


def test_posterior_bank_keeps_joint_draws_groups_and_its_calibration_responses():
    responses, truth = simulate_pl("2pl", n_items=12, n_models=60, seed=4, missing=0.1)
    rng = np.random.default_rng(0)
    a = truth["discrimination"].values * np.exp(0.1 * rng.standard_normal((2, 50, 12)))
    d = truth["intercept"].values + 0.1 * rng.standard_normal((2, 50, 12))
    post = xr.Dataset({"discrimination": (("chain", "draw", "item"), a), "intercept": (("chain", "draw", "item"), d),
                       "theta": (("chain", "draw", "model"), rng.standard_normal((2, 50, 60)))},
                      coords={"item": responses["item"].values, "model": responses["model"].values})
    obs = responses["responses"].where(responses["responses"] >= 0).astype(float)
    groups = xr.Dataset({"item_group": ("item", np.repeat(["x", "y"], 6))}, coords={"item": responses["item"].values})
    tree = xr.DataTree.from_dict({"posterior": post, "observed_data": obs.to_dataset(name="responses"),
                                  "constant_data": groups})
    bank = read_bank(tree, draws=30, seed=1)
    assert bank.kind == "posterior draws" and bank.n_draws == 30 and list(np.unique(bank.item_group)) == ["x", "y"]
    flat = a.reshape(100, 12)
    rows = [int(np.flatnonzero((flat == bank.discrimination[s]).all(1))[0]) for s in range(30)]
    np.testing.assert_array_equal(bank.intercept, d.reshape(100, 12)[rows])  # whole draws, items kept together
    np.testing.assert_array_equal(bank.calibration["responses"].values, responses["responses"].values)
    chosen = select_items(bank, 4, method="score", stratify=True)
    assert sorted(bank.item_group[chosen]) == ["x", "x", "y", "y"]


def test_aberrant_and_out_of_range_models_are_flagged(calibrated):
    _, cal, new = calibrated
    bank = read_bank(fit_mml(cal, "2pl", priors=True, se=True), draws=50, calibration=cal)
    chosen = select_items(bank, 30, method="information")
    easy_first = chosen[np.argsort(-bank.point().intercept[chosen])]
    y = np.full((bank.n_items, 4), -1, dtype=np.int8)
    y[chosen, 0] = new["responses"].values[chosen, 0]  # a genuine model
    y[easy_first, 1] = np.r_[np.zeros(15), np.ones(15)]  # easy items wrong, hard ones right
    far = expit(bank.point().discrimination * 6.0 + bank.point().intercept)  # ability 6 SDs up
    y[chosen, 2] = 1  # all 30 right: the test's ceiling, which some calibration models reach too
    y[:, 3] = (far > 0.5).astype(np.int8)  # every item, as a model 6 SDs up would answer them
    from bayesirt.safety.scoring import at_ceiling, outside_calibration, person_fit_flags

    fit = person_fit_flags(bank, y[:, :3])
    assert fit.method == "empirical" and not fit.flag[0] and fit.flag[1]
    assert np.all(fit.cutoff == fit.cutoff[0])  # one cut-off for one set of items
    pred = predict_accuracy(bank, y, samples=500)
    assert outside_calibration(bank, y, pred.theta_mean).tolist() == [False, False, False, True]
    assert at_ceiling(y).tolist() == [False, False, True, y[:, 3].all()]


def test_large_banks_compute_the_unobserved_items_on_the_fly(monkeypatch):
    import bayesirt.safety.scoring as scoring

    bank = _tiny_bank(draws=5)
    y = np.array([[1, 0], [0, -1], [-1, 1], [-1, -1]], dtype=np.int8)
    table = predict_accuracy(bank, y, samples=4000, seed=3)
    monkeypatch.setattr(scoring, "_TABLE_LIMIT", 10)
    fly = predict_accuracy(bank, y, samples=4000, seed=3)
    np.testing.assert_allclose(fly.predicted_accuracy, table.predicted_accuracy, rtol=1e-6)
    np.testing.assert_array_equal(fly.lower, table.lower)  # the same draws, the same uniforms
    np.testing.assert_array_equal(fly.upper, table.upper)
