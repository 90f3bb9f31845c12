"""``select`` / ``score`` say how their numbers were made (issues 42.4, 46.3-4): the calibration responses come
from the bank (map.nc, mml.nc) by default, every fallback and rescaling is a note in the console, report.md and
summary.json, summary.json names the interval used, and models outside the bank's support are warned about and
get the extrapolation envelope. Fast unit tests of the envelope and the fallback logic; CLI runs marked slow."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from bayesirt.data import make_responses
from bayesirt.data.datasets.simulate import simulate_pl
from bayesirt.errors import ConfigError
from bayesirt.safety.bank import CALIBRATION_ORIGINS, Bank
from bayesirt.safety.scores import MIN_CALIBRATED_MODELS, envelope, score_models
from bayesirt.safety.scoring import outside_calibration, predict_accuracy


def _bank(n_cal: int, *, calibration: bool = True, seed: int = 3, spread: float = 1.0) -> Bank:
    """A 2PL bank at its true item parameters (one draw) with ``n_cal`` calibration models drawn from it
    (abilities ``Normal(0, spread)``)."""
    rng = np.random.default_rng(seed)
    n_items = 30
    a, d = rng.lognormal(0, 0.3, n_items), rng.normal(0, 1, n_items)
    theta = rng.normal(0, spread, n_cal)
    p = 1 / (1 + np.exp(-(a[:, None] * theta[None] + d[:, None])))
    y = (rng.random(p.shape) < p).astype(np.int8)
    cal = make_responses(y, item_id=[f"i{j}" for j in range(n_items)], model_id=[f"c{k}" for k in range(n_cal)])
    z = np.zeros((1, n_items))
    return Bank(np.array([f"i{j}" for j in range(n_items)]), np.full(n_items, "all"), a[None], d[None], z, z, theta,
                cal if calibration else None, kind="point estimates", source="test",
                calibration_origin=CALIBRATION_ORIGINS[0 if calibration else 2])


def _new(bank: Bank, theta, items, seed: int = 4):
    rng = np.random.default_rng(seed)
    p = 1 / (1 + np.exp(-(bank.discrimination[0][:, None] * np.asarray(theta)[None] + bank.intercept[0][:, None])))
    y = (rng.random(p.shape) < p).astype(np.int8)
    ids = [f"n{k}" for k in range(y.shape[1])]
    return make_responses(y[items], item_id=list(bank.item_ids[items]), model_id=ids), (y == 1).mean(0)


def test_envelope_holds_every_interval_it_is_given_and_nothing_more():
    lo, hi = envelope([0.40, 0.5], [0.60, 0.7], [0.35, 0.52], [0.65, 0.68], [0.45, 0.3], [0.80, 0.69])
    np.testing.assert_allclose(lo, [0.35, 0.3])
    np.testing.assert_allclose(hi, [0.80, 0.7])


def test_interval_falls_back_to_model_based_and_says_why():
    bank = _bank(MIN_CALIBRATED_MODELS - 1)
    data, _ = _new(bank, [0.0, 0.5], np.arange(10))
    scores = score_models(bank, data, samples=200)
    assert scores.data.attrs["interval"] == "model"
    assert any("model-based, not calibrated" in n and f"only {MIN_CALIBRATED_MODELS - 1}" in n for n in scores.notes)
    bare = _bank(300, calibration=False)
    scores = score_models(bare, data, samples=200)
    assert scores.data.attrs["interval"] == "model"
    assert any("no calibration responses" in n for n in scores.notes)
    with pytest.raises(ConfigError, match="calibration responses"):
        score_models(bare, data, interval="calibrated")


def test_calibrated_interval_states_its_factor_and_prior():
    bank = _bank(400)
    data, _ = _new(bank, [0.0, 0.3, -0.2], np.arange(12))
    scores = score_models(bank, data, samples=300, ability_prior="wide")
    assert scores.data.attrs["interval"] == "calibrated"
    factor = [n for n in scores.notes if n.startswith("interval: calibrated")]
    assert len(factor) == 1 and f"{scores.data['scale'].values[0]:.2f}" in factor[0]
    assert any("Normal(0, 3)" in n for n in scores.notes)
    assert scores.data.attrs["ability_prior_sd"] == 3.0


def test_wide_prior_lets_a_strong_model_move_further_from_the_population():
    bank = _bank(300)
    y = np.full((bank.n_items, 1), -1, dtype=np.int8)
    y[:15, 0] = 1  # every item run right
    narrow = predict_accuracy(bank, y, samples=300).theta_mean[0]
    wide = predict_accuracy(bank, y, samples=300, prior_scale=3.0).theta_mean[0]
    assert wide > narrow + 0.5


def test_models_beyond_the_support_are_warned_and_their_interval_holds_both_priors():
    bank = _bank(400, spread=0.5)  # a narrow cohort: a model 4.5 SD up is beyond every calibration score
    items = np.arange(20)
    data, _ = _new(bank, [0.0, 0.1, 4.5], items)
    scores = score_models(bank, data, samples=300)
    ds = scores.data
    assert ds["outside_range"].values.tolist() == [False, False, True]
    assert any("'n2'" in w and "outside" in w for w in scores.warnings)
    assert any(n.startswith("extrapolation: 1 model(s) outside") for n in scores.notes)
    plain = score_models(bank, data, samples=300, extrapolation="none").data
    assert not plain["extrapolated"].values.any()
    lo, hi, lo0, hi0 = ds["lower"].values, ds["upper"].values, plain["lower"].values, plain["upper"].values
    assert (lo <= lo0).all() and (hi >= hi0).all()
    np.testing.assert_array_equal(ds["extrapolated"].values, (lo < lo0) | (hi > hi0))
    y = np.full((bank.n_items, 1), -1, dtype=np.int8)
    y[items, 0] = data["responses"].values[:, 2]
    wide = predict_accuracy(bank, y, samples=300, prior_scale=3.0)
    assert lo[2] <= wide.model_lower[0] and hi[2] >= wide.model_upper[0]
    assert lo[2] <= ds["model_lower"].values[2] and hi[2] >= ds["model_upper"].values[2]


def test_edge_rule_marks_a_wider_tail_than_the_outside_rule():
    bank = _bank(400)
    y = np.full((bank.n_items, 200), -1, dtype=np.int8)
    data, _ = _new(bank, np.linspace(-3, 3, 200), np.arange(30))
    y[:] = data["responses"].values
    theta = predict_accuracy(bank, y, samples=200).theta_mean
    outside = outside_calibration(bank, y, theta)
    edge = outside_calibration(bank, y, theta, tail=0.05, ability_tail=0.05)
    assert (edge >= outside).all() and edge.sum() > outside.sum()


def _simulated_fit(root):
    from bayesirt.jobs.frequentist import run_mml_job

    responses, _ = simulate_pl("2pl", n_items=40, n_models=330, seed=2)
    data = make_responses(responses["responses"].values, item_id=[f"q{i}" for i in range(40)],
                          model_id=[f"m{k:03d}" for k in range(330)])
    cal, new = data.isel(model=slice(0, 300)), data.isel(model=slice(300, None))
    run_mml_job(cal, root / "fit", spec="2pl", priors=True)
    return cal, new


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "bayesirt", *map(str, args)], capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow
def test_select_and_score_through_the_cli_use_the_stored_responses_and_say_so(tmp_path):
    cal, new = _simulated_fit(tmp_path)
    bank = tmp_path / "fit" / "mml.nc"
    sel = _cli("select", bank, "--budget", 10, "--selection-rule", "score", "--out", tmp_path / "test")
    assert sel.returncode == 0, sel.stderr
    summary = json.loads((tmp_path / "test" / "summary.json").read_text())
    assert summary["selection_rule"] == "score" and summary["bank"]["calibration_origin"] == "stored in the fit"
    assert "calibration responses: 300 models, stored in the fit" in sel.stderr
    items = pd.read_csv(tmp_path / "test" / "test_items.csv")["item_id"].astype(str).tolist()
    run = tmp_path / "run.csv"
    part = new.sel(item=items)
    frame = pd.DataFrame(part["responses"].values.T, columns=items)
    frame.insert(0, "model", part["model"].values)
    frame.to_csv(run, index=False)
    out = _cli("score", bank, run, "--out", tmp_path / "scores", "--samples", 300)
    assert out.returncode == 0, out.stderr
    summary = json.loads((tmp_path / "scores" / "summary.json").read_text())
    assert summary["interval"] == "calibrated" and summary["interval_requested"] is None
    assert any(n.startswith("interval: calibrated") for n in summary["notes"])
    assert "bayesirt: note: interval: calibrated" in out.stderr and "score: models" in out.stderr
    report = (tmp_path / "scores" / "report.md").read_text()
    assert "Interval used: **calibrated**" in report and "## How these numbers were made" in report
    assert "model-based posterior predictive interval (" not in report
    scores = pd.read_csv(tmp_path / "scores" / "scores.csv")
    assert {"outside_range", "extrapolated"} <= set(scores.columns) and len(scores) == 30


@pytest.mark.slow
def test_score_without_calibration_responses_falls_back_aloud(tmp_path):
    import xarray as xr

    cal, new = _simulated_fit(tmp_path)
    tree = xr.open_datatree(tmp_path / "fit" / "mml.nc").load()
    bare = xr.DataTree.from_dict({k: tree[k].to_dataset() for k in tree.children
                                  if k not in ("observed_data", "constant_data")})
    bare.attrs = dict(tree.attrs)
    bare.to_netcdf(tmp_path / "old.nc", engine="h5netcdf")
    run = tmp_path / "run.nc"
    new.isel(item=slice(0, 12)).to_netcdf(run)
    out = _cli("score", tmp_path / "old.nc", run, "--out", tmp_path / "scores", "--samples", 300)
    assert out.returncode == 0, out.stderr
    summary = json.loads((tmp_path / "scores" / "summary.json").read_text())
    assert summary["interval"] == "model" and summary["cutoff_method"] == "parametric"
    assert any("model-based, not calibrated" in n for n in summary["notes"])
    assert "calibration responses: none" in out.stderr
    sel = _cli("select", tmp_path / "old.nc", "--budget", 5, "--out", tmp_path / "test")
    assert sel.returncode == 0, sel.stderr
    assert json.loads((tmp_path / "test" / "summary.json").read_text())["selection_rule"] == "sample"
    assert "selection: the strata are of the items' expected proportion correct" in sel.stderr
