"""Scoring suspect runs against a separate genuine cohort from the CLI (issue 20): ``bayesirt
personfit SUSPECTS --reference COHORT`` calibrates items and the cut-off on the cohort, on the
items the suspects answered, and flags aberrant runs while genuine ones pass at about the FPR."""

import json

import numpy as np
import pandas as pd
import pytest

from bayesirt.cli.main import main
from bayesirt.data import save_responses, simulate_pl


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("reference")
    full, truth = simulate_pl("2pl", n_items=60, n_models=440, seed=11)
    cohort = full.isel(model=slice(0, 400))
    save_responses(cohort, root / "cohort.nc")
    # 40 held-out models answer a 40-item test; the last 20 sandbag selectively: wrong on the 15 easiest
    # items, right on the 10 hardest (an ability profile no genuine model shows)
    test_items = full["item"].values[10:50]
    suspects = full.isel(model=slice(400, 440)).sel(item=test_items).copy(deep=True)
    y = suspects["responses"].values
    order = np.argsort(full["responses"].values[10:50, :400].mean(axis=1))
    y[np.ix_(order[-15:], np.arange(20, 40))] = 0
    y[np.ix_(order[:10], np.arange(20, 40))] = 1
    suspects["responses"].values[:] = y
    save_responses(suspects, root / "suspects.nc")
    return root


def test_suspects_are_scored_against_the_reference_cohort(files, tmp_path):
    out = tmp_path / "pf"
    assert main(["personfit", str(files / "suspects.nc"), "--reference", str(files / "cohort.nc"), "--fpr", "0.1",
                 "--out", str(out), "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reference_models"] == 400 and summary["items_scored"] == 40 and summary["models"] == 40
    models = pd.read_csv(out / "models.csv")
    genuine, sandbag = models["flagged"][:20], models["flagged"][20:]
    assert genuine.mean() <= 0.3 and sandbag.mean() >= 0.8
    assert "Scored against the reference cohort" in (out / "report.md").read_text()


def test_reference_must_cover_the_items(files, tmp_path):
    code = main(["personfit", str(files / "cohort.nc"), "--reference", str(files / "suspects.nc"), "--out",
                 str(tmp_path / "x"), "--no-progress"])
    assert code == 2 and not (tmp_path / "x").exists()
