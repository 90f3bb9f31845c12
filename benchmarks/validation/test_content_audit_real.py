"""The NT content audit (sections 4.5, 5.4, App. B.8, D.4) reproduced from the released labels in
../shared/data/content_audit/labels.csv (skipped when absent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bayesirt.audit.diagnostics.content import content_audit, read_labels
from bayesirt.jobs.audit import run_content_audit_job

LABELS = Path(__file__).resolve().parents[3] / "shared" / "data" / "content_audit" / "labels.csv"


@pytest.fixture(scope="module")
def audit():
    if not LABELS.is_file():
        pytest.skip(f"{LABELS} not available (../shared/data is absent)")
    return content_audit(read_labels(LABELS), permutations=10_000, seed=0)


def _row(table, annotator, axis):
    return table[(table["annotator"] == annotator) & (table["axis"] == axis)].iloc[0]


def test_design_250_pairs_50_per_benchmark(audit):
    s = audit.summary
    assert (s["n_pairs"], s["n_items"]) == (250, 500)
    assert set(s["pairs_per_benchmark"].values()) == {50} and len(s["pairs_per_benchmark"]) == 5


def test_reliability_medians(audit):
    r = audit.summary["reliability"]
    assert round(r["median_kappa"], 3) == 0.715 and r["n_kappa_axes"] == 10  # no axis is degenerate here
    assert round(r["median_spearman"], 3) == 0.800 and r["n_spearman_axes"] == 3
    assert r["passes"]


def test_spatial_temporal_differences(audit):
    a = _row(audit.binary, "annotator_a", "spatial_temporal")
    b = _row(audit.binary, "annotator_b", "spatial_temporal")
    assert round(100 * a["difference"], 1) == -9.6 and round(a["q"], 3) == 0.106
    assert round(100 * b["difference"], 1) == -0.8 and round(b["q"], 3) == 0.902
    assert audit.summary["largest_difference"]["annotator_a"]["axis"] == "spatial_temporal"


def test_annotator_b_largest_is_distractor_discrimination(audit):
    largest = audit.summary["largest_difference"]["annotator_b"]  # B.8: +4.0 points, q = .902
    assert largest["axis"] == "distractor_discrimination"
    assert round(100 * largest["difference"], 1) == 4.0 and round(largest["q"], 3) == 0.902


def test_no_axis_passes_the_confirmatory_rule(audit):
    assert audit.summary["confirmatory"] == {"passes": False, "axes_passing": []}
    assert not audit.confirmatory["q_le_max"].any()  # no axis reaches q <= .05 for both annotators


def test_stable_family_items_and_no_exploratory_signal(audit):
    family = audit.summary["family"]
    assert (family["n_stable"], family["n_high_dif"]) == (158, 250)
    assert family["axes_q_le_05"] == {"annotator_a": [], "annotator_b": []}


def test_job_writes_the_folder(tmp_path):
    if not LABELS.is_file():
        pytest.skip(f"{LABELS} not available (../shared/data is absent)")
    out = run_content_audit_job(LABELS, tmp_path / "content", permutations=999)
    summary = json.loads((out / "summary.json").read_text())
    assert round(summary["reliability"]["median_kappa"], 3) == 0.715
    assert "no axis passes" in (out / "report.md").read_text()
