"""Report slips of issue 42 item 10, each through the command line or the report function: plain MML
is not titled "regularized", a guessed layout reads as a sentence, and an audit with fewer than 30
eligible near-tie pairs carries a small-sample note (console, report.md and summary.json)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bayesirt.audit.engine.settings import SMALL_SAMPLE_PAIRS
from bayesirt.cli.main import main
from bayesirt.data import load, simulate_dif_benchmark
from bayesirt.data.datasets.simulate import simulate_pl
from bayesirt.report.markdown import reading_lines


@pytest.fixture(scope="module")
def small_2pl(tmp_path_factory):
    """A 150-model x 15-item 2PL matrix, models in rows, with model-like ids."""
    ds, _ = simulate_pl("2pl", n_items=15, n_models=150, seed=4)
    path = tmp_path_factory.mktemp("mml") / "bench.csv"
    pd.DataFrame(ds["responses"].values.T, index=[f"org{i % 9}/model-{i}" for i in range(150)],
                 columns=[f"q{j}" for j in range(15)]).rename_axis("model").to_csv(path)
    return path


def test_mml_without_priors_is_titled_plain_mml_and_with_priors_map_em(small_2pl, tmp_path):
    assert main(["mml", str(small_2pl), "--out", str(tmp_path / "plain")]) == 0
    title = (tmp_path / "plain" / "report.md").read_text().splitlines()[0]
    assert "regularized" not in title and title.startswith("# Plain MML (maximum marginal likelihood, no item priors)")
    assert json.loads((tmp_path / "plain" / "summary.json").read_text())["priors"] is False
    assert main(["mml", str(small_2pl), "--priors", "--out", str(tmp_path / "map")]) == 0
    title = (tmp_path / "map" / "report.md").read_text().splitlines()[0]
    assert title.startswith("# Marginal MAP (MAP-EM), Two-parameter logistic (2PL), regularized")


def test_mml_of_a_3pl_says_its_asymptotes_keep_their_priors(tmp_path):
    ds, _ = simulate_pl("3pl", n_items=12, n_models=200, seed=5)
    path = tmp_path / "bench.csv"
    pd.DataFrame(ds["responses"].values.T, index=[f"org{i % 9}/model-{i}" for i in range(200)],
                 columns=[f"q{j}" for j in range(12)]).rename_axis("model").to_csv(path)
    assert main(["mml", str(path), "--model", "3pl", "--no-se", "--out", str(tmp_path / "out")]) == 0
    title = (tmp_path / "out" / "report.md").read_text().splitlines()[0]
    assert "regularized" not in title and "the asymptotes keep their Beta priors" in title


def test_a_guessed_layout_reads_as_a_sentence(tmp_path):
    rng = np.random.default_rng(7)
    pd.DataFrame((rng.random((40, 60)) < 0.5).astype(int)).to_csv(tmp_path / "generic.csv")  # ids 0..n: no hint
    with pytest.warns(UserWarning):
        ds = load(tmp_path / "generic.csv")
    line = next(x for x in reading_lines(ds) if x.startswith("- layout"))
    assert "from guessed" not in line
    assert ("guessed by the psychometric convention (rows = respondents), as nothing in the file tells which side "
            "holds the models") in line


def test_an_audit_with_few_near_tie_pairs_says_its_sample_is_small(tmp_path):
    ds, _ = simulate_dif_benchmark(n_owners=30, n_items=120, seed=3)
    path = tmp_path / "bench.nc"
    ds.to_netcdf(path)
    # epsilon just above one item (1/120): few pairs of representatives are that close
    with pytest.warns(UserWarning, match="eligible near-tie pairs") as seen:  # the console's "bayesirt: warning:"
        assert main(["audit", str(path), "--out", str(tmp_path / "a"), "--quick", "--epsilon", "0.009", "--controls",
                     "19", "--composition-bootstrap", "19", "--no-progress"]) == 0
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    n = summary["eligible_pairs"]
    assert 0 < n < SMALL_SAMPLE_PAIRS and "excess_pp" in summary
    note = summary["small_sample_note"]
    assert note.startswith(f"only {n} eligible near-tie pairs") and f"{100 / n:.1f} pp" in note
    assert note in [str(w.message) for w in seen]
    report = (tmp_path / "a" / "report.md").read_text()
    assert f"**Small sample**: {note}." in report and "(small sample: see the note below)" in report


def test_an_audit_with_enough_pairs_has_no_small_sample_note(tmp_path):
    ds, _ = simulate_dif_benchmark(n_owners=90, n_items=120, seed=3)
    path = tmp_path / "bench.nc"
    ds.to_netcdf(path)
    assert main(["audit", str(path), "--out", str(tmp_path / "a"), "--quick", "--controls", "19", "--composition-bootstrap", "19",
                 "--no-progress"]) == 0
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["eligible_pairs"] >= SMALL_SAMPLE_PAIRS and "small_sample_note" not in summary
    assert "Small sample" not in (tmp_path / "a" / "report.md").read_text()
