"""Issue 44 items 4-5: the prompted sandbagging mode (coherent shift plus item-level errors), zero-variance
items dropped and named by the jobs, the fingerprint item-selection rule, separate item sets for the two
detectors of ``sandbag --reference``, the parallel-analysis remark and ``mirt_mml`` as an optional suite step."""

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from bayesirt.data import make_responses, simulate_pl
from bayesirt.data.io import save_responses
from bayesirt.data.responses import drop_constant_items
from bayesirt.errors import BayesIRTError, DataError
from bayesirt.frequentist.mml import fit_mml
from bayesirt.safety.fingerprint import fingerprint_items
from bayesirt.safety.sandbag_sim import change_probability, full_ability, sandbag
from bayesirt.safety.personfit import item_parameters
from bayesirt.safety.sandbagging import score_suspects


@pytest.fixture(scope="module")
def cohort():
    rng = np.random.default_rng(3)
    responses, _ = simulate_pl("2pl", n_items=40, n_models=200, seed=11, theta=rng.normal(size=200),
                               discrimination=rng.lognormal(0.2, 0.3, 40), intercept=rng.normal(0, 1.5, 40))
    return responses, fit_mml(responses, "2pl", priors=True, se=False).items


def test_prompted_mode_is_the_shift_plus_item_level_errors(cohort):
    responses, items = cohort
    shift = sandbag(responses, scope="uniform", mode="ability_shift", shift=1.5, items=items, seed=4)
    same = sandbag(responses, scope="uniform", mode="prompted", shift=1.5, noise=0.0, items=items, seed=4)
    np.testing.assert_array_equal(same["responses"].values, shift["responses"].values)  # noise 0: the pure shift
    mixed = sandbag(responses, scope="uniform", mode="prompted", shift=1.5, noise=0.3, items=items, seed=4)
    # common random numbers: every cell the shift changes, the mix changes too, and more
    assert (mixed["changed"].values >= shift["changed"].values).all()
    y = responses["responses"].values.astype(np.int8)
    bank = item_parameters(items, responses["item"].values)
    coherent = change_probability(bank, full_ability(y, bank).theta, 1.5, "down")
    sure = (coherent < 0.1) & (y == 1)  # cells the shift barely touches (items the model is sure of)
    assert sure.sum() > 200
    # there the mix changes about `noise` of the correct answers (1 - (1 - c)(1 - .3), c < .1): the
    # inconsistency person fit sees
    assert 0.27 <= mixed["changed"].values[sure].mean() <= 0.42
    assert shift["changed"].values[sure].mean() < 0.1
    assert "noise=0.3" in mixed.attrs["sandbagging"]
    with pytest.raises(BayesIRTError, match="'noise' parameter of sandbag"):
        sandbag(responses, scope="uniform", mode="prompted", noise=1.0, items=items)


def test_drop_constant_items_names_them():
    y = np.array([[1, 1, 1, 1], [0, 1, 0, 1], [0, 0, 0, 0], [1, 0, 0, 1]], dtype=float)
    ds = make_responses(y, item_id=["all", "mid", "none", "other"], model_id=list("abcd"))
    kept, notes = drop_constant_items(ds)
    assert kept["item"].values.tolist() == ["mid", "other"]
    assert len(notes) == 1 and notes[0].startswith("2 zero-variance item(s) dropped") and notes[0].endswith(": all, none")
    assert drop_constant_items(kept) == (kept, [])
    with pytest.raises(DataError, match="every item"):
        drop_constant_items(ds.isel(item=[0, 2]))


def test_ladder_and_splithalf_jobs_drop_and_name_zero_variance_items(tmp_path):
    from bayesirt.jobs.frequentist import run_ladder_job

    responses, _ = simulate_pl("2pl", n_items=6, n_models=150, seed=5)
    y = responses["responses"].values.astype(float)
    y[0] = 1.0  # item 0: every model right
    ds = make_responses(y, item_id=[f"q{i}" for i in range(6)], model_id=responses["model"].values)
    out = run_ladder_job(ds, tmp_path / "ladder", max_iter=50)
    summary = json.loads((out / "summary.json").read_text())
    assert any("1 zero-variance item(s) dropped" in w and w.endswith(": q0") for w in summary["warnings"])
    assert "zero-variance item(s) dropped" in (out / "report.md").read_text()
    assert "5 items x 150 models" in (out / "report.md").read_text()


def test_fingerprint_items_rule_by_hand():
    # proportions correct over 4 models: .25, .5, 1, .75, .5 -> disagreement 2p(1-p)m/(m-1): .5, .667, 0, .5, .667
    y = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 0], [0, 0, 1, 1]], dtype=float)
    ds = make_responses(y, item_id=list("abcde"), model_id=list("wxyz"))
    assert fingerprint_items(ds, 2).tolist() == ["b", "e"]
    assert fingerprint_items(ds, 3).tolist() == ["a", "b", "e"]  # ties to the lowest index: a before d
    assert fingerprint_items(ds, 9).tolist() == list("abcde")
    grouped = make_responses(y, item_id=list("abcde"), model_id=list("wxyz"), item_group=["g", "g", "g", "h", "h"])
    # proportional quotas 2 + 1 (the h item is the best of h, not the second of all)
    assert fingerprint_items(grouped, 3).tolist() == ["a", "b", "e"]
    assert fingerprint_items(grouped, 2).tolist() == ["b", "e"]
    with pytest.raises(BayesIRTError, match="positive integer"):
        fingerprint_items(ds, 0)


@pytest.mark.slow
def test_fingerprint_job_restricts_to_the_selected_items(tmp_path):
    """(slow: the figure's font cache may start a subprocess)"""
    from bayesirt.jobs.safety import run_fingerprint_job

    responses, _ = simulate_pl("2pl", n_items=30, n_models=40, seed=6)
    query = responses.isel(model=np.arange(5))
    out = run_fingerprint_job(responses, query, tmp_path / "fp", items=12, null="resampling", resamples=3)
    chosen = fingerprint_items(responses, 12)
    assert chosen.size == 12
    by_hand = run_fingerprint_job(responses.sel(item=chosen), query.sel(item=chosen), tmp_path / "hand",
                                  null="resampling", resamples=3)
    whole = run_fingerprint_job(responses, query, tmp_path / "whole", null="resampling", resamples=3)
    table = pd.read_csv(out / "disagreement.csv", index_col=0)
    pd.testing.assert_frame_equal(table, pd.read_csv(by_hand / "disagreement.csv", index_col=0))
    assert not table.equals(pd.read_csv(whole / "disagreement.csv", index_col=0))


def test_reference_scoring_uses_all_items_for_person_fit_and_a_static_test_for_the_shift(cohort):
    responses, _ = cohort
    suspects = responses.isel(model=np.arange(10))
    scored, genuine, settings = score_suspects(suspects, responses, test_length=15, null="in_sample")
    assert settings["personfit_items"] == 40 and settings["shift_items"] == 15
    assert len(settings["shift_item_ids"]) == 15 and set(settings["shift_item_ids"]) <= set(responses["item"].values)
    whole = score_suspects(suspects, responses, test_length=None, null="in_sample")
    assert whole[2]["shift_items"] == 40
    # person fit reads the same 40 items either way; the ability-shift estimate differs with its item set
    np.testing.assert_allclose(scored["lz"].values, whole[0]["lz"].values)
    assert not np.allclose(scored["theta_test"].values, whole[0]["theta_test"].values)


def test_parallel_analysis_beyond_the_fitted_solutions_is_remarked():
    from bayesirt.report.factors import _beyond_fitted

    solutions = [SimpleNamespace(n_factors=k, variables=list("abcde")) for k in (1, 2)]
    note = _beyond_fitted(solutions, SimpleNamespace(n_factors=3))
    assert len(note) == 1 and "retains 3 factor(s), more than the 2 that could be fitted to 5 benchmarks" in note[0]
    assert _beyond_fitted(solutions, SimpleNamespace(n_factors=2)) == []


def test_mirt_mml_is_an_optional_suite_step():
    from bayesirt.jobs.frequentist import run_mirt_mml_job
    from bayesirt.jobs.suite import DEFAULT_STEPS, SAFETY_STEPS, _step_jobs, check_step_options

    assert "mirt_mml" in SAFETY_STEPS and "mirt_mml" not in DEFAULT_STEPS
    assert _step_jobs()["mirt_mml"] is run_mirt_mml_job
    check_step_options(["mirt_mml"], {"mirt_mml": {"dims": [1, 2], "folds": 2}})
    with pytest.raises(BayesIRTError, match="unknown option 'dimz'"):
        check_step_options(["mirt_mml"], {"mirt_mml": {"dimz": [1]}})


@pytest.mark.slow
def test_suite_runs_mirt_mml_on_the_pooled_benchmarks(tmp_path):
    from bayesirt.jobs.suite import run_safety_suite

    files = []
    for k in range(2):
        responses, _ = simulate_pl("2pl", n_items=8, n_models=80, seed=40 + k)
        files.append(str(save_responses(responses, tmp_path / f"bench{k}.nc")))
    out = run_safety_suite(files, tmp_path / "suite", steps=["mirt_mml"],
                           options={"mirt_mml": {"dims": [1, 2], "folds": 2, "max_iter": 30}}, progress=False)
    table = pd.read_csv(out / "mirt_mml" / "mirt_mml.csv")
    assert table["n_dims"].tolist() == [1, 2]
    assert "16 items" in (out / "mirt_mml" / "report.md").read_text().replace(",", "")


def test_representative_design_takes_one_item_per_difficulty_stratum_by_the_full_score_error():
    """13 items (difficulties every 0.5 logits, discrimination 2) for the two-cluster cohort of
    test_adaptive: the design takes one item from each of 5 strata of expected proportion correct (sizes
    3, 3, 3, 2, 2 from the hardest), so the test spans the whole test's difficulty as max_information does
    not; its first item is the one that most lowers the cohort-averaged expected squared error of the
    predicted full number correct (computed here by brute force), with quotas it keeps them."""
    from bayesirt.models.information import item_information
    from bayesirt.models.response import response_probability
    from bayesirt.safety.adaptive import quota_counts, static_test

    b = np.arange(-3.0, 3.01, 0.5)
    a = np.full_like(b, 2.0)
    d = -a * b
    theta = np.r_[np.full(80, -1.5), np.full(20, 1.5)]
    chosen = static_test(a, d, theta, 5, design="representative")
    strata = [set(range(13)[s]) for s in (slice(10, 13), slice(7, 10), slice(4, 7), slice(2, 4), slice(0, 2))]
    assert sorted(next(j for j, s in enumerate(strata) if i in s) for i in chosen) == [0, 1, 2, 3, 4]
    nodes = np.quantile(theta, (np.arange(100) + 0.5) / 100)  # the cohort's quantiles the criterion averages over
    p = response_probability(nodes, a, d)
    slope = a[:, None] * p * (1 - p)
    info = item_information(nodes, a, d)

    def error(i):
        rest = np.ones(13, dtype=bool)
        rest[i] = False
        return np.mean((p * (1 - p))[rest].sum(0) + slope[rest].sum(0) ** 2 / (1.0 + info[i]))

    assert chosen[0] == min(range(13), key=error)
    assert not np.all(b[chosen] <= 0.0)  # reaches the strong models
    groups = np.array(list("aaaaaaabbbbbb"))
    prop = static_test(a, d, theta, 5, groups=groups, design="representative")
    assert {g: int(np.sum(groups[prop] == g)) for g in "ab"} == quota_counts(groups, 5)
    assert len(set(prop.tolist())) == 5


def test_representative_design_keeps_the_banks_mix_of_discriminations():
    """25 items every 0.25 logits, discriminations alternating 3 and 1 (12 items below the median 3), for
    the two-cluster cohort: the criterion alone prefers the discriminating items (0 of 5 and 2 of 8 of
    discrimination 1); the design takes the bank's share of less discriminating items, round(5 * 12/25) =
    2 and round(8 * 12/25) = 4 (OLL GSM8K: a test of the most
    discriminating items predicted the full score worse than random items)."""
    from bayesirt.safety.adaptive import static_test

    b = np.arange(-3.0, 3.01, 0.25)
    a = np.where(np.arange(25) % 2 == 0, 3.0, 1.0)
    theta = np.r_[np.full(80, -1.5), np.full(20, 1.5)]
    for k, n_low in ((5, 2), (8, 4)):
        chosen = static_test(a, -a * b, theta, k, design="representative")
        assert int(np.sum(a[chosen] == 1.0)) == n_low and len(set(chosen.tolist())) == k


@pytest.mark.slow
def test_prompted_uniform_runs_are_flagged_by_person_fit_at_safe_levels():
    """(slow: sandbagging_experiment on SAFE's audit size.) At SAFE's median uniform shift (1.69 logits), a
    pure shift is flagged by person fit at about the false-positive rate; the prompted mode at its default
    noise lands in SAFE's real-run range for uniform runs (18-35%, allowing sampling error of 171 runs), while
    the 40-item shift test still catches nearly all of them (SAFE: 84%)."""
    rng = np.random.default_rng(0)
    responses, _ = simulate_pl("2pl", n_items=196, n_models=171, seed=1, theta=rng.normal(size=171),
                               discrimination=rng.lognormal(0.3, 0.4, 196), intercept=rng.normal(0.5, 1.5, 196))
    from bayesirt.safety.sandbagging import sandbagging_experiment

    rates = {}
    for mode in ("ability_shift", "prompted"):
        result = sandbagging_experiment(responses, mode=mode, shifts=(1.69,), scopes=("uniform",), seed=0,
                                        progress=False)
        rates[mode] = result.detection.set_index("scope").loc["uniform"]
    assert rates["ability_shift"]["personfit_rate"] <= 0.1
    assert 0.12 <= rates["prompted"]["personfit_rate"] <= 0.4
    assert rates["prompted"]["shift_rate"] >= 0.84
