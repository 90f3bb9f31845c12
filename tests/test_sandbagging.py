"""Sandbagging: the simulators change exactly the intended cells, ability-shift detection rises
with strength while the genuine cohort stays near its false-positive rates, parallel runs equal
serial ones, the job writes its files, and every error message."""

import json

import numpy as np
import pytest
import xarray as xr

from bayesirt.data import make_responses, simulate_pl
from bayesirt.errors import BayesIRTError, ConfigError
from bayesirt.jobs.safety import run_sandbag_job
from bayesirt.safety.sandbagging import item_groups, sandbag, sandbagging_experiment


@pytest.fixture(scope="module")
def data():
    responses, _ = simulate_pl("2pl", n_items=60, n_models=300, seed=7, missing=0.05)
    return responses


@pytest.fixture(scope="module")
def grouped():
    responses, _ = simulate_pl("2pl", n_items=30, n_models=50, seed=8, missing=0.1)
    groups = np.repeat(["chem", "bio", "cyber"], 10)
    return make_responses(np.where(responses["responses"].values < 0, np.nan, responses["responses"].values),
                          item_id=responses["item"].values, model_id=responses["model"].values, item_group=groups)


def _check_only_scope_changes(before, after, direction):
    y0, y1 = before["responses"].values, after["responses"].values
    changed, scope = after["changed"].values, after["in_scope"].values
    np.testing.assert_array_equal(changed, y0 != y1)
    assert not (changed & ~scope).any()
    assert ((y0 == -1) == (y1 == -1)).all() and not (scope & (y0 == -1)).any()
    source, goal = (1, 0) if direction == "down" else (0, 1)
    assert (y0[changed] == source).all() and (y1[changed] == goal).all()


@pytest.mark.parametrize("direction", ["down", "up"])
def test_uniform_at_full_strength_changes_every_observed_source_cell(data, direction):
    out = sandbag(data, scope="uniform", mode="random_errors", strength=1.0, direction=direction, seed=1)
    _check_only_scope_changes(data, out, direction)
    y = data["responses"].values
    np.testing.assert_array_equal(out["changed"].values, y == (1 if direction == "down" else 0))


def test_partial_strength_changes_that_share_of_source_cells(data):
    out = sandbag(data, scope="uniform", mode="random_errors", strength=0.3, seed=2)
    _check_only_scope_changes(data, out, "down")
    share = out["changed"].values.sum() / (data["responses"].values == 1).sum()
    assert share == pytest.approx(0.3, abs=0.02)
    assert not sandbag(data, scope="uniform", mode="random_errors", strength=0.0, seed=2)["changed"].values.any()


@pytest.mark.parametrize("target", ["weakest", "strongest", "bio"])
def test_targeted_scope_is_each_models_chosen_group(grouped, target):
    out = sandbag(grouped, scope="targeted", mode="random_errors", strength=1.0, target=target, seed=3)
    _check_only_scope_changes(grouped, out, "down")
    y, groups = grouped["responses"].values, grouped["item_group"].values
    for m in range(y.shape[1]):
        seen = y[:, m] >= 0
        rate = {g: (y[:, m][seen & (groups == g)] == 1).mean() for g in sorted(set(groups))}
        pick = target if target == "bio" else (min if target == "weakest" else max)(rate, key=rate.get)
        np.testing.assert_array_equal(out["in_scope"].values[:, m], seen & (groups == pick))


def test_triggered_scope_is_a_fresh_item_subset_per_model(data):
    out = sandbag(data, scope="triggered", mode="random_errors", strength=1.0, trigger_fraction=0.25, seed=4)
    _check_only_scope_changes(data, out, "down")
    observed = data["responses"].values >= 0
    triggered = out["in_scope"].values | ~observed  # the 15 drawn items, some of them unanswered
    assert ((out["in_scope"].values).sum(0) <= 15).all() and (triggered.sum(0) >= 15).all()
    assert len({tuple(np.flatnonzero(col)) for col in out["in_scope"].values.T}) > 290
    again = sandbag(data, scope="triggered", mode="random_errors", strength=1.0, trigger_fraction=0.25, seed=4)
    np.testing.assert_array_equal(out["responses"].values, again["responses"].values)


def test_pseudo_groups_when_the_data_have_one_group(data, grouped):
    labels = item_groups(data, groups=6, seed=0)
    _, sizes = np.unique(labels, return_counts=True)
    assert sizes.tolist() == [10] * 6
    np.testing.assert_array_equal(labels, item_groups(data, groups=6, seed=0))
    assert not np.array_equal(labels, item_groups(data, groups=6, seed=1))
    np.testing.assert_array_equal(item_groups(grouped), grouped["item_group"].values)


@pytest.fixture(scope="module")
def experiment(data):
    return sandbagging_experiment(data, mode="random_errors", strengths=(0.25, 0.5, 1.0), test_length=20, seed=5,
                                  progress=False)


def test_ability_shift_detection_rises_with_strength(experiment):
    table = experiment.detection.set_index(["scope", "strength"])
    genuine = table.loc[("genuine", 0.0)]
    assert genuine["personfit_rate"] <= 0.1 and genuine["shift_rate"] <= 0.1  # cut-offs on re-collections
    assert experiment.settings["null"] == "recollection" and set(experiment.settings["crossfit_fpr"]) == {
        "personfit", "shift", "combined"}
    assert (np.diff(table.loc["uniform"]["shift_rate"].to_numpy()) > 0.1).all()
    assert table.loc[("uniform", 1.0), "shift_rate"] > 0.7
    assert table.loc[("triggered", 1.0), "shift_rate"] > table.loc[("triggered", 0.25), "shift_rate"]
    for scope in ("uniform", "triggered"):  # targeted runs at low strength are a subset of models
        assert (table.loc[scope]["median_shift"].diff().dropna() < 0).all(), scope
    assert (table["combined_rate"] >= table[["personfit_rate", "shift_rate"]].max(axis=1) - 1e-12).all()
    runs = experiment.runs
    assert runs["lz"].dims == ("scope", "strength", "model") and runs.sizes["strength"] == 3
    assert int(experiment.items["in_test"].sum()) == 20
    changed = runs["changed"].values  # common random numbers: more strength, a superset of changes
    assert (np.diff(changed, axis=1) >= 0).all()
    assert set(experiment.roc["scope"]) == {"uniform", "targeted", "triggered"}


@pytest.mark.slow
def test_parallel_workers_reproduce_the_serial_run(data, experiment):
    small = dict(mode="random_errors", strengths=(0.5,), scopes=("triggered",), test_length=20, seed=5,
                 progress=False)
    serial = sandbagging_experiment(data, workers=1, **small)
    parallel = sandbagging_experiment(data, workers=2, **small)
    xr.testing.assert_identical(serial.runs, parallel.runs)
    np.testing.assert_array_equal(serial.runs["lz"].values[0, 0],
                                  experiment.runs["lz"].sel(scope="triggered", strength=0.5).values)


@pytest.mark.slow
def test_job_writes_every_file(tmp_path, grouped):
    out = run_sandbag_job(grouped, tmp_path / "sb", shifts=(1.0,), test_length=10, progress=False)
    names = {p.name for p in out.iterdir()}
    assert names == {"sandbagging.nc", "detection.csv", "roc.csv", "gaps.csv", "genuine.csv", "summary.json",
                     "report.md", "lz.png", "roc.png", "shift.png"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["settings"]["groups"] == "item_group" and len(summary["detection"]) == 4
    saved = xr.open_datatree(out / "sandbagging.nc", engine="h5netcdf")
    assert {"genuine", "runs", "gaps", "items"} <= set(saved.children)


def test_error_messages(data, grouped):
    with pytest.raises(BayesIRTError, match="'scope' parameter of sandbag must be one of"):
        sandbag(data, scope="partial")
    with pytest.raises(BayesIRTError, match="'direction' parameter of sandbag must be one of"):
        sandbag(data, scope="uniform", direction="sideways")
    with pytest.raises(BayesIRTError, match=r"'strength' parameter of sandbag must be a number in \[0, 1\]"):
        sandbag(data, scope="uniform", mode="random_errors", strength=1.5)
    with pytest.raises(BayesIRTError, match=r"'trigger_fraction' parameter of sandbag must be a number in \(0, 1\)"):
        sandbag(data, scope="triggered", trigger_fraction=1.0)
    with pytest.raises(ConfigError, match=r"The 'target' parameter of sandbag must be 'weakest', 'strongest' or an item group such as \['bio', 'chem', 'cyber'\]; got 'law'."):
        sandbag(grouped, scope="targeted", target="law")
    with pytest.raises(BayesIRTError, match=r"labels must have one item group per item \(60\)"):
        sandbag(data, scope="targeted", labels=["a", "b"])
    with pytest.raises(ConfigError, match=r"The 'groups' parameter of item_groups must be an integer in \[2, 60\]; got 1."):
        item_groups(data, groups=1)
    with pytest.raises(BayesIRTError, match="'statistic' parameter of sandbagging_experiment must be one of"):
        sandbagging_experiment(data, statistic="ht")
    with pytest.raises(BayesIRTError, match="'scopes' parameter of sandbagging_experiment must be one of"):
        sandbagging_experiment(data, scopes=("everything",))
    with pytest.raises(BayesIRTError, match="must each name at least one condition"):
        sandbagging_experiment(data, mode="random_errors", strengths=())
    with pytest.raises(BayesIRTError, match="must each name at least one condition"):
        sandbagging_experiment(data, shifts=())
    with pytest.raises(BayesIRTError, match="'mode' parameter of sandbag must be one of"):
        sandbag(data, scope="uniform", mode="coin_flips")
    with pytest.raises(BayesIRTError, match="The 'shift' parameter of sandbag must be a number >= 0"):
        sandbag(data, scope="uniform", shift=-1)


@pytest.fixture(scope="module")
def harmbench_sized():
    """SAFE's audit size: 196 items, 171 models."""
    rng = np.random.default_rng(0)
    responses, _ = simulate_pl("2pl", n_items=196, n_models=171, seed=1, theta=rng.normal(size=171),
                               discrimination=rng.lognormal(0.3, 0.4, 196), intercept=rng.normal(0.5, 1.5, 196))
    return responses


@pytest.mark.slow
def test_coherent_uniform_shift_evades_person_fit_but_not_the_ability_test(harmbench_sized):
    """SAFE: uniform sandbagging looks like an honest weaker model to person fit (flagged near the
    cut-off's false-positive rate) and is caught by the 40-item ability check; random errors are an
    incoherent profile that person fit catches."""
    coherent = sandbagging_experiment(harmbench_sized, shifts=(1.5,), scopes=("uniform",), test_length=40, seed=0,
                                      null="in_sample", progress=False)  # SAFE's in-sample calibration, as SAFE reports it
    table = coherent.detection.set_index("scope")
    assert coherent.settings["mode"] == "ability_shift"
    assert table.loc["genuine", "personfit_rate"] == pytest.approx(0.1, abs=0.01)
    assert table.loc["uniform", "personfit_rate"] <= 0.2  # near the 10% false-positive rate
    assert 0.35 <= table.loc["uniform", "auc"] <= 0.65  # l_z cannot tell them from genuine models
    assert table.loc["uniform", "shift_rate"] >= 0.7
    assert -1.6 < table.loc["uniform", "median_shift"] < -1.0  # the shift, a little shrunk by the MAP
    errors = sandbagging_experiment(harmbench_sized, mode="random_errors", strengths=(0.5,), scopes=("uniform",),
                                    test_length=40, seed=0, progress=False)
    assert errors.detection.set_index("scope").loc["uniform", "personfit_rate"] >= 0.7


@pytest.mark.slow
def test_ability_shift_changes_follow_the_model(harmbench_sized):
    """The coupling: a correct response becomes incorrect with probability 1 - P(theta - d) / P(theta),
    so the changed share per cell matches it (and easy items barely change)."""
    from bayesirt.frequentist.mml import fit_mml
    from bayesirt.models.response import response_probability
    from bayesirt.safety.personfit import item_parameters
    from bayesirt.safety.sandbagging import change_probability, full_ability

    fit = fit_mml(harmbench_sized, "2pl", priors=True, se=False)
    bank = item_parameters(fit.items, harmbench_sized["item"].values)
    y = harmbench_sized["responses"].values.astype(np.int8)
    theta = full_ability(y, bank).theta
    chance = change_probability(bank, theta, 1.0, "down")
    p, shifted = response_probability(theta, *bank), response_probability(theta - 1.0, *bank)
    np.testing.assert_allclose(p * (1 - chance), shifted, rtol=1e-9)  # Bernoulli(P) thinned = Bernoulli(P shifted)
    up = change_probability(bank, theta, 1.0, "up")
    np.testing.assert_allclose(p + (1 - p) * up, response_probability(theta + 1.0, *bank), rtol=1e-9)
    runs = [sandbag(harmbench_sized, scope="uniform", shift=1.0, items=fit.items, seed=s)["changed"].values
            for s in range(20)]
    observed = np.mean(runs, axis=0)[y == 1]
    expected = chance[y == 1]
    assert abs(observed.mean() - expected.mean()) < 0.01
    assert np.corrcoef(observed, expected)[0, 1] > 0.8
    assert not sandbag(harmbench_sized, scope="uniform", shift=0.0, items=fit.items)["changed"].values.any()
