"""The blinded content audit (NT D.4) on small constructed label tables: kappa, exact McNemar,
BH, the confirmatory rule, Wilcoxon, the family permutation test, bad input and the CLI."""

import json
from math import comb

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from bayesirt.audit.diagnostics.content import (
    BINARY_AXES, CONTROL, HIGH, ORDINAL_AXES, annotator_agreement, benchmark_directions, cohen_kappa,
    confirmatory_rule, content_audit, family_permutation_tests, mcnemar_exact, paired_binary_tests,
    paired_ordinal_tests, validate_labels,
)
from bayesirt.cli.main import main
from bayesirt.errors import DataError

AXES = (*BINARY_AXES, *ORDINAL_AXES)


def _table(high_a, control_a, high_b=None, control_b=None, *, benchmarks=5, families=None, stable=None):
    """Long label table of two annotators from per-pair label matrices of shape (pair, 13 axes).

    Pairs are split into ``benchmarks`` contiguous blocks; ``families`` (one per pair) is the
    advantaged family of both halves unless ``stable`` marks the pair's high item unstable."""
    n = high_a.shape[0]
    high_b = high_a if high_b is None else high_b
    control_b = control_a if control_b is None else control_b
    families = ["gemma"] * n if families is None else families
    stable = np.ones(n, bool) if stable is None else stable
    rows = []
    for annotator, high, control in (("annotator_a", high_a, control_a), ("annotator_b", high_b, control_b)):
        for p in range(n):
            meta = {"annotator": annotator, "model": "m", "benchmark": f"bench{p * benchmarks // n}",
                    "pair_id": f"pair_{p:03d}", "common_blueprint_cell": f"cell_{p}"}
            for k, (group, x) in enumerate(((HIGH, high[p]), (CONTROL, control[p]))):
                validation = families[p] if group == CONTROL or stable[p] else "other"
                rows.append(meta | {"blinded_id": f"record_{2 * p + k:04d}", "group": group,
                                    "discovery_advantaged_family": families[p],
                                    "validation_advantaged_family": validation} | dict(zip(AXES, map(int, x))))
    return pd.DataFrame(rows)


def _zeros(n=50):
    return np.zeros((n, len(AXES)), int)


# --- Cohen's kappa -------------------------------------------------------------------------------

def test_kappa_worked_example():
    # 2x2 table: both 1: 20, a only: 5, b only: 10, both 0: 15 -> p_o = .7, p_e = .5*.6 + .5*.4 = .5
    x = np.r_[np.ones(25), np.zeros(25)]
    y = np.r_[np.ones(20), np.zeros(5), np.ones(10), np.zeros(15)]
    assert cohen_kappa(x, y) == pytest.approx(0.4, abs=1e-12)


def test_kappa_matches_sklearn():
    rng = np.random.default_rng(1)
    for prevalence in (0.1, 0.5, 0.8):
        x = (rng.random(200) < prevalence).astype(int)
        y = np.where(rng.random(200) < 0.8, x, 1 - x)
        assert cohen_kappa(x, y) == pytest.approx(cohen_kappa_score(x, y), abs=1e-12)
    constant, varying = np.zeros(20, int), np.r_[np.ones(5, int), np.zeros(15, int)]
    assert cohen_kappa(constant, varying) == pytest.approx(cohen_kappa_score(constant, varying), abs=1e-12)
    assert np.isnan(cohen_kappa(constant, constant))  # undefined: both annotators constant


def test_agreement_medians_skip_degenerate_axes():
    rng = np.random.default_rng(2)
    high, control = (rng.integers(0, 2, (40, len(AXES))) for _ in range(2))
    high[:, 10:], control[:, 10:] = rng.integers(0, 4, (2, 40, 3))
    high[:, 0] = control[:, 0] = 0  # quantitative_symbolic: constant for both -> kappa undefined
    flip = rng.random((40, len(AXES))) < 0.15
    high_b = np.where(flip, 1 - high, high)
    high_b[:, 0] = 0
    high_b[:, 10:] = np.clip(high[:, 10:] + rng.integers(-1, 2, (40, 3)), 0, 3)
    labels = validate_labels(_table(high, control, high_b, control))
    table = annotator_agreement(labels)
    kappa = table[table["kind"] == "binary"].set_index("axis")["value"]
    assert np.isnan(kappa["quantitative_symbolic"]) and kappa.notna().sum() == 9
    a, b = (labels[labels["annotator"] == n].set_index("blinded_id").sort_index()
            for n in ("annotator_a", "annotator_b"))
    assert kappa["spatial_temporal"] == pytest.approx(cohen_kappa_score(a["spatial_temporal"], b["spatial_temporal"]))
    rho = table[table["kind"] == "ordinal"].set_index("axis")["value"]
    assert rho["context_burden"] == pytest.approx(stats.spearmanr(a["context_burden"], b["context_burden"]).statistic)
    result = content_audit(labels, permutations=9)
    assert result.summary["reliability"]["median_kappa"] == pytest.approx(kappa.dropna().median())
    assert result.summary["reliability"]["n_kappa_axes"] == 9
    assert result.summary["reliability"]["median_spearman"] == pytest.approx(rho.median())


# --- McNemar and BH ------------------------------------------------------------------------------

def test_mcnemar_exact_by_hand():
    # 3 high-only and 12 control-only pairs: 2 * P(Bin(15, 1/2) <= 3)
    by_hand = 2 * sum(comb(15, k) for k in range(4)) / 2 ** 15
    assert by_hand == pytest.approx(0.03515625)
    assert mcnemar_exact(3, 12) == pytest.approx(by_hand, rel=1e-12)
    assert mcnemar_exact(12, 3) == pytest.approx(by_hand, rel=1e-12)
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(5, 5) == 1.0


def test_paired_tests_bh_worked_example():
    # axis j has k_j high-only pairs and no control-only pair: p_j = min(1, 2 ** (1 - k_j))
    discordant = [10, 8, 6, 5, 4, 3, 2, 1, 0, 0]
    high, control = _zeros(), _zeros()
    for j, k in enumerate(discordant):
        high[:k, j] = 1
    table = paired_binary_tests(validate_labels(_table(high, control)))
    a = table[table["annotator"] == "annotator_a"]
    np.testing.assert_allclose(a["p"], [min(1.0, 2.0 ** (1 - k)) for k in discordant], rtol=1e-12)
    # BH by hand: p * 10 / rank, then the running minimum from the largest p down
    q = [0.001953125 * 10, 0.0078125 * 5, 0.03125 * 10 / 3, 0.0625 * 10 / 4, 0.125 * 2, 0.25 * 10 / 6,
         0.5 * 10 / 7, 1, 1, 1]
    np.testing.assert_allclose(a["q"], q, rtol=1e-12)
    np.testing.assert_allclose(a["q"], stats.false_discovery_control(a["p"].to_numpy()), rtol=1e-12)
    np.testing.assert_allclose(a["difference"], np.array(discordant) / 50)
    np.testing.assert_allclose(a["high_prevalence"], np.array(discordant) / 50)
    assert (a["control_prevalence"] == 0).all() and (a["n_pairs"] == 50).all()


# --- per-benchmark directions and the confirmatory rule ------------------------------------------

def _confirmatory_table():
    """50 pairs in 5 benchmarks of 10. spatial_temporal: high-only in 4 pairs of every benchmark
    for both annotators (passes). negation_exception: +20 pairs for A, -20 for B (directions
    differ). formal_rule_reasoning: +10 pairs in each of bench0 and bench1 only (2 benchmarks)."""
    high_a, control_a, high_b, control_b = _zeros(), _zeros(), _zeros(), _zeros()
    j = BINARY_AXES.index
    rows = np.r_[[p for b in range(5) for p in range(10 * b, 10 * b + 4)]]
    high_a[rows, j("spatial_temporal")] = high_b[rows, j("spatial_temporal")] = 1
    high_a[rows, j("negation_exception")] = control_b[rows, j("negation_exception")] = 1
    high_a[:20, j("formal_rule_reasoning")] = high_b[:20, j("formal_rule_reasoning")] = 1
    return validate_labels(_table(high_a, control_a, high_b, control_b))


def test_benchmark_directions_counts():
    directions = benchmark_directions(_confirmatory_table())
    formal = directions[(directions["axis"] == "formal_rule_reasoning") & (directions["annotator"] == "annotator_a")]
    assert formal.set_index("benchmark")["direction"].to_dict() == {
        "bench0": 1, "bench1": 1, "bench2": 0, "bench3": 0, "bench4": 0}
    assert formal["difference"].tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]


def test_confirmatory_rule_exactly_one_axis_passes():
    labels = _confirmatory_table()
    binary = paired_binary_tests(labels)
    rule = confirmatory_rule(binary, benchmark_directions(labels)).set_index("axis")
    assert rule.index[rule["passes"]].tolist() == ["spatial_temporal"]
    assert rule.loc["spatial_temporal", ["benchmarks_annotator_a", "benchmarks_annotator_b"]].tolist() == [5, 5]
    negation = rule.loc["negation_exception"]
    assert not negation["same_direction"] and negation["q_le_max"] and negation["size_ge_min"]
    formal = rule.loc["formal_rule_reasoning"]
    assert formal["same_direction"] and formal["q_le_max"] and formal["size_ge_min"]
    assert not formal["benchmarks_ge_min"] and formal["benchmarks_annotator_a"] == 2
    assert not rule.loc["contextual_reading", "same_direction"]  # zero difference has no direction
    # the thresholds are options: a 50-point minimum difference fails the 40-point spatial effect
    strict = confirmatory_rule(binary, benchmark_directions(labels), min_difference=0.5)
    assert not strict["passes"].any()
    summary = content_audit(labels, permutations=9).summary
    assert summary["confirmatory"] == {"passes": True, "axes_passing": ["spatial_temporal"]}


def test_ordinal_wilcoxon_matches_scipy():
    rng = np.random.default_rng(3)
    high, control = _zeros(), _zeros()
    high[:, 10:], control[:, 10:] = rng.integers(0, 4, (2, 50, 3))
    high[:, 12] = control[:, 12]  # ambiguity_degree: every pair tied
    table = paired_ordinal_tests(validate_labels(_table(high, control)))
    table = table[table["annotator"] == "annotator_b"].set_index("axis")
    d = high[:, 10] - control[:, 10]
    expected = stats.wilcoxon(d)
    assert table.loc["reasoning_steps", "p"] == pytest.approx(expected.pvalue, rel=1e-12)
    assert table.loc["reasoning_steps", "statistic"] == pytest.approx(expected.statistic)
    assert table.loc["ambiguity_degree", "p"] == 1.0 and table.loc["ambiguity_degree", "n_nonzero"] == 0
    np.testing.assert_allclose(table["q"], stats.false_discovery_control(table["p"].to_numpy()))


# --- exploratory family permutation test ---------------------------------------------------------

def _family_table():
    """Per benchmark of 10 pairs: gemma high items have spatial_temporal = 1, qwen ones 0; the
    other axes are random. Pairs 0, 10, 20, ... are unstable (validation family differs)."""
    rng = np.random.default_rng(4)
    high, control = _zeros(), _zeros()
    high[:, :10] = rng.integers(0, 2, (50, 10))
    families = ["gemma" if p % 2 else "qwen" for p in range(50)]
    high[:, BINARY_AXES.index("spatial_temporal")] = [f == "gemma" for f in families]
    stable = np.arange(50) % 10 != 0
    return validate_labels(_table(high, control, families=families, stable=stable))


def test_family_permutation_finds_an_obvious_signal():
    table = family_permutation_tests(_family_table(), permutations=999, seed=0)
    a = table[table["annotator"] == "annotator_a"].set_index("axis")
    assert (a["n_items"] == 45).all() and (a["n_families"] == 2).all()
    assert a.loc["spatial_temporal", "p"] == pytest.approx(0.001)  # no permutation reaches it
    assert a.loc["spatial_temporal", "q"] <= 0.05
    assert (a.drop("spatial_temporal")["q"] > 0.05).all()
    assert (a["p"] >= 1 / 1000).all() and (a["p"] <= 1).all()


def test_family_permutation_reproducible_by_seed():
    labels = _family_table()
    first = family_permutation_tests(labels, permutations=199, seed=7)
    pd.testing.assert_frame_equal(first, family_permutation_tests(labels, permutations=199, seed=7))
    other = family_permutation_tests(labels, permutations=199, seed=8)
    np.testing.assert_array_equal(first["statistic"], other["statistic"])
    assert not np.array_equal(first["p"], other["p"])
    with pytest.raises(DataError, match="permutations must be a positive integer"):
        family_permutation_tests(labels, permutations=0)


# --- bad input -----------------------------------------------------------------------------------

def test_missing_columns_are_named():
    labels = _table(_zeros(10), _zeros(10)).drop(columns=["pair_id", "ambiguity_degree"])
    with pytest.raises(DataError, match="lack column.*pair_id, ambiguity_degree; give the NT"):
        validate_labels(labels)


def test_annotator_count_must_be_two():
    labels = _table(_zeros(10), _zeros(10))
    third = labels[labels["annotator"] == "annotator_a"].assign(annotator="annotator_c")
    with pytest.raises(DataError, match=r"3 annotator\(s\) \(annotator_a, annotator_b, annotator_c\).*exactly two"):
        validate_labels(pd.concat([labels, third]))
    with pytest.raises(DataError, match=r"1 annotator\(s\) \(annotator_a\)"):
        validate_labels(labels[labels["annotator"] == "annotator_a"])


def test_other_bad_input_messages():
    labels = _table(_zeros(10), _zeros(10))
    with pytest.raises(DataError, match=r"axis spatial_temporal must hold only \[0, 1\]; recode"):
        validate_labels(labels.assign(spatial_temporal=2))
    with pytest.raises(DataError, match=r"axis context_burden must hold only \[0, 1, 2, 3\]"):
        validate_labels(labels.assign(context_burden=4))
    with pytest.raises(DataError, match="missing values in negation_exception"):
        validate_labels(labels.assign(negation_exception=np.nan))
    with pytest.raises(DataError, match="one stable_high_dif and one matched_control"):
        validate_labels(labels.assign(group=HIGH))
    moved = labels.copy()
    moved.loc[moved["blinded_id"] == "record_0001", "benchmark"] = "bench4"
    with pytest.raises(DataError, match="one stable_high_dif and one matched_control item of the same benchmark"):
        validate_labels(moved)
    other = labels.copy()
    other.loc[(other["annotator"] == "annotator_b") & (other["blinded_id"] == "record_0000"), "pair_id"] = "pair_009"
    with pytest.raises(DataError, match="label different items or disagree on their metadata"):
        validate_labels(other)
    with pytest.raises(DataError, match="labels a blinded_id twice"):
        validate_labels(pd.concat([labels, labels.iloc[:1]]))


# --- command line --------------------------------------------------------------------------------

def test_cli_writes_its_folder(tmp_path, capsys):
    path = tmp_path / "labels.csv"
    _confirmatory_table().to_csv(path, index=False)
    out = tmp_path / "audit"
    assert main(["content-audit", str(path), "--out", str(out), "--permutations", "99", "--seed", "3"]) == 0
    assert {p.name for p in out.iterdir()} == {
        "summary.json", "report.md", "agreement.csv", "binary_tests.csv", "benchmark_directions.csv",
        "confirmatory.csv", "ordinal_tests.csv", "family_permutation.csv"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["confirmatory"]["axes_passing"] == ["spatial_temporal"]
    assert summary["family"] | {"axes_q_le_05": None} == {
        "n_stable": 50, "n_high_dif": 50, "permutations": 99, "seed": 3, "axes_q_le_05": None}
    assert "passes on spatial_temporal" in (out / "report.md").read_text()
    assert len(pd.read_csv(out / "binary_tests.csv")) == 20
    assert main(["content-audit", str(path), "--out", str(out)]) == 3  # output refused
    assert "already exists; pass --force" in capsys.readouterr().err
    missing = tmp_path / "nope.csv"
    assert main(["content-audit", str(missing), "--out", str(tmp_path / "x")]) == 2
    assert "nope.csv not found" in capsys.readouterr().err and not (tmp_path / "x").exists()
