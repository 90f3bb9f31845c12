"""Real suspect runs scored against a separately calibrated genuine cohort (``sandbag --reference``):
re-runs of genuine models pass, sandbagging re-runs are caught by person fit or ability shift, the
reference cohort's own flag rates stay near the nominal level, and the command line writes it."""

import numpy as np
import pandas as pd
import pytest

from bayesirt.cli.main import main
from bayesirt.data.datasets.simulate import simulate_pl
from bayesirt.data.io import save_responses
from bayesirt.errors import DataError
from bayesirt.safety.sandbagging import score_suspects

N_ITEMS, N_MODELS, TEST = 60, 300, 40


@pytest.fixture(scope="module")
def cohort_and_suspects():
    rng = np.random.default_rng(8)
    theta = rng.normal(size=N_MODELS)
    a, d = rng.lognormal(0.3, 0.3, N_ITEMS), rng.normal(0, 1.2, N_ITEMS)
    reference, _ = simulate_pl("2pl", n_items=N_ITEMS, n_models=N_MODELS, seed=1, theta=theta, discrimination=a,
                               intercept=d)
    rerun, _ = simulate_pl("2pl", n_items=N_ITEMS, n_models=N_MODELS, seed=2, theta=theta, discrimination=a,
                           intercept=d)  # the same models answering again
    # 20 honest re-runs of any ability; 20 sandbagging re-runs of models above average (a model that
    # answers little correctly has little to hide), on a 40-item test
    able = np.flatnonzero(theta[20:] > 0)[:20] + 20
    suspects = rerun.isel(model=np.r_[np.arange(20), able], item=np.arange(TEST))
    y = suspects["responses"].values.copy()
    wrong = (rng.random(y.shape) < 0.6) & (y == 1)
    wrong[:, :20] = False
    y[wrong] = 0  # the sandbaggers turn 60% of their correct answers wrong
    return reference, suspects.copy(data={"responses": y})


@pytest.fixture(scope="module")
def rerun_disagreement():
    """Share of cells in which the simulated honest re-runs differ from the reference (rounded)."""
    return 0.32


def test_sandbaggers_are_caught_and_honest_reruns_pass(cohort_and_suspects):
    reference, suspects = cohort_and_suspects
    scored, genuine, settings = score_suspects(suspects, reference, fpr=0.1, null="in_sample")
    honest, sandbagging = scored.isel(model=slice(0, 20)), scored.isel(model=slice(20, 40))
    assert float(sandbagging["flag_combined"].mean()) >= 0.8
    assert float(honest["flag_combined"].mean()) <= 0.3
    assert float(sandbagging["shift"].median()) < -0.5 < float(honest["shift"].median())
    # the cut-off is the reference cohort's 10% quantile on the suspects' items
    assert settings["test_items"] == TEST and settings["suspects_with_history"] == 40
    assert 0.07 <= float(genuine["flag_personfit"].mean()) <= 0.13
    assert float(genuine["flag_shift"].mean()) <= 0.15


def test_cut_offs_on_re_collections_at_the_stated_self_disagreement(cohort_and_suspects, rerun_disagreement):
    """These honest re-runs are fresh 2PL draws, disagreeing with the reference in ~32% of cells: at that
    stated flip rate the cut-offs pass them; at SAFE's 2.8% (the default) the shift cut-off is tighter and
    flags most of them, as a re-run that noisy should be."""
    reference, suspects = cohort_and_suspects
    scored, genuine, settings = score_suspects(suspects, reference, fpr=0.1, flip_rate=rerun_disagreement)
    assert settings["null"] == "recollection" and "32.0% of its cells" in settings["null_description"]
    assert float(scored.isel(model=slice(0, 20))["flag_combined"].mean()) <= 0.1
    assert float(scored.isel(model=slice(20, 40))["flag_combined"].mean()) >= 0.6
    for detector in ("personfit", "shift"):  # cross-fitted over 5 folds of 300 models
        assert abs(settings["crossfit_fpr"][detector] - 0.1) <= 0.03
    strict = score_suspects(suspects, reference, fpr=0.1)[0]
    assert float(strict.isel(model=slice(0, 20))["flag_shift"].mean()) >= 0.4


def test_a_suspect_without_history_gets_person_fit_only(cohort_and_suspects):
    reference, suspects = cohort_and_suspects
    renamed = suspects.assign_coords(model=[f"new{k}" for k in range(suspects.sizes["model"])],
                                     model_id=("model", [f"new{k}" for k in range(suspects.sizes["model"])]))
    scored, _, settings = score_suspects(renamed, reference)
    assert settings["suspects_with_history"] == 0
    assert scored["theta"].isnull().all() and not scored["flag_shift"].any()
    assert scored["flag_personfit"].any()


def test_items_outside_the_reference_are_refused(cohort_and_suspects):
    reference, suspects = cohort_and_suspects
    with pytest.raises(DataError, match="not in the reference cohort"):
        score_suspects(suspects, reference.isel(item=np.arange(10, N_ITEMS)))


def test_command_line(tmp_path, cohort_and_suspects):
    reference, suspects = cohort_and_suspects
    ref, sus = save_responses(reference, tmp_path / "cohort.nc"), save_responses(suspects, tmp_path / "suspects.nc")
    assert main(["sandbag", str(sus), "--reference", str(ref), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    table = pd.read_csv(tmp_path / "out" / "suspects.csv")
    assert len(table) == 40 and table["flag_combined"].iloc[20:].mean() >= 0.8
    assert "scored against a reference cohort" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.slow
def test_labelled_runs_get_roc_and_auc(cohort_and_suspects, tmp_path):
    """Real runs labelled genuine / prompted to sandbag (here: 20 honest re-runs, 20 sandbagging ones)
    give each detector's AUC, pooled and per group, against the runs labelled genuine."""
    from bayesirt.jobs.safety import run_sandbag_job
    from bayesirt.safety.sandbagging import labelled_roc, read_run_labels

    reference, suspects = cohort_and_suspects
    ids = suspects["model"].values.astype(str)
    labels = pd.DataFrame({"model": ids, "label": ["genuine"] * 20 + ["sandbag"] * 20,
                           "group": ["-"] * 20 + ["plain"] * 10 + ["persona"] * 10})
    labels.to_csv(tmp_path / "labels.csv", index=False)
    out = run_sandbag_job(suspects, tmp_path / "out", reference=reference, labels=tmp_path / "labels.csv",
                          progress=False)
    auc = pd.read_csv(out / "auc_labelled.csv").set_index(["detector", "group"])
    assert set(auc.index.get_level_values("group")) == {"all", "plain", "persona"}
    assert auc.loc[("personfit", "all"), "auc"] > 0.8 and auc.loc[("personfit", "all"), "negatives"] == 20
    assert auc.loc[("combined", "all"), "tpr"] >= auc.loc[("personfit", "all"), "tpr"]
    assert "## ROC of the detectors on the labelled runs" in (out / "report.md").read_text()
    curves = pd.read_csv(out / "roc_labelled.csv")
    assert set(curves["detector"]) == {"personfit", "shift"}
    # without genuine labels the reference cohort serves as negatives
    scored, genuine, _ = score_suspects(suspects, reference)
    only = read_run_labels({m: "sandbag" for m in ids[20:]})
    table, _, negatives = labelled_roc(scored, genuine, only)
    assert "reference cohort" in negatives and table["negatives"].iloc[0] == N_MODELS
    with pytest.raises(DataError, match="neither genuine"):
        read_run_labels({ids[0]: "maybe"})
    with pytest.raises(DataError, match="not suspect runs"):
        labelled_roc(scored, genuine, read_run_labels({"nobody": "sandbag"}))
