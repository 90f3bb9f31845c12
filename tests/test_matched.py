"""Discrimination- and reliability-matched diagnostic control (NT 4.1, B.2, D.1 eq. 42-50):
strata follow the blueprint cutting rule, every control keeps the anchors' count in every refined
stratum with cell-restoring weights, the balance diagnostics match hand computations, the
low-DIF values are the audit's, and the numbers depend on the seed only."""

import dataclasses

import numpy as np
import pytest

from bayesirt.audit import AuditConfig, run_audit
from bayesirt.audit.diagnostics import matched
from bayesirt.audit.diagnostics.matched import DIAGNOSTICS, balance_diagnostics, corrected_item_total, discrimination_matched_controls, discrimination_strata
from bayesirt.audit.engine.ranking import pooled_rate, reversal_counts, weighted_scores
from bayesirt.audit.engine.resampling import matched_random_weights, randomization_summary
from bayesirt.data import simulate_dif_benchmark
from bayesirt.data.responses import MISSING
from bayesirt.errors import BayesIRTError, DataError
from bayesirt.report.audit_sections import matched_section
from bayesirt.utils.parallel import spawn_seeds

REPLICATES = 40
SEED = 5


@pytest.fixture(scope="module")
def bench():
    return simulate_dif_benchmark(n_owners=80, n_items=150, missing=0.02, seed=3)[0]


@pytest.fixture(scope="module")
def audit(bench):
    return run_audit(bench, AuditConfig(quick=True, controls=19, composition_bootstrap=19, owner_bootstrap=19), progress=False)


@pytest.fixture(scope="module")
def controls(bench, audit):
    return discrimination_matched_controls(audit, bench, replicates=REPLICATES, seed=SEED)


def _target(bench, fold):
    values = bench["responses"].values[:, fold.target_index]
    return np.where(values == MISSING, 0, values), values != MISSING


def _hand_diagnostics(y, w, g, observed=None):
    """NT eq. 44-50 written out item by item with np.corrcoef and np.var; missing cells as in the
    scores: statistics over the models that answered, totals renormalized over answered items."""
    observed = np.ones(y.shape, bool) if observed is None else observed
    items = y.shape[0]
    r, s2 = np.full(items, np.nan), np.zeros(items)
    for i in range(items):
        others = np.delete(observed, i, axis=0).sum(axis=0)
        rest = np.delete(y * observed, i, axis=0).sum(axis=0) / np.maximum(others, 1) * (items - 1)
        keep = observed[i] & (others > 0)
        if np.ptp(y[i, keep]) > 0 and np.ptp(rest[keep]) > 0:
            r[i] = np.corrcoef(y[i, keep], rest[keep])[0, 1]
        s2[i] = y[i, observed[i]].var(ddof=1)
    defined = ~np.isnan(r)
    total = (w @ (y * observed)) / (w @ observed) * w.sum()
    k = np.count_nonzero(w)
    alpha = k / (k - 1) * (1 - np.sum(w**2 * s2) / np.var(total, ddof=1))
    return np.array([w @ g / w.sum(), w[defined] @ r[defined] / w[defined].sum(), np.sqrt(np.sum(w**2 * s2)) / w.sum(),
                     alpha])


def test_strata_cut_each_cell_by_g_with_ties_by_item_index():
    cell = np.array([0, 0, 0, 0, 0, 0, 1, 1, 2, 0])
    g = np.array([0.5, 0.1, 0.5, 0.9, 0.3, 0.2, 0.4, 0.4, 1.0, 0.0])
    # cell 0 (7 items) sorted by g, ties by index: 9, 1, 5, 4, 0, 2, 3 -> array_split into 2, 2, 2, 1
    expected = np.array([2, 0, 2, 3, 1, 1, 4, 5, 6, 0])
    np.testing.assert_array_equal(discrimination_strata(cell, g), expected)


def test_fold_strata_are_nested_near_equal_and_ordered_by_g(audit, controls):
    for h, fold in enumerate(audit.folds):
        cell, g = fold.purification.cell, fold.purification.offsets_sd
        strata = discrimination_strata(cell, g)
        np.testing.assert_array_equal(controls["stratum"].sel(fold=h), strata)
        for c in np.unique(cell):
            members = cell == c
            parts = [np.flatnonzero(members & (strata == s)) for s in np.unique(strata[members])]
            assert len(parts) == min(4, members.sum())  # q_c = min(4, n_c), all nonempty
            assert max(map(len, parts)) - min(map(len, parts)) <= 1
            parts.sort(key=lambda p: g[p].min())
            assert all(g[a].max() <= g[b].min() for a, b in zip(parts, parts[1:], strict=False))


def test_every_control_keeps_the_anchor_counts_per_stratum_and_restores_cells(audit):
    for fold in audit.folds:
        cell, anchors = fold.purification.cell, fold.purification.weights
        strata = discrimination_strata(cell, fold.purification.offsets_sd)
        w = matched_random_weights(cell, anchors, 200, 11, strata=strata)
        for s in np.unique(strata):
            np.testing.assert_array_equal((w[:, strata == s] > 0).sum(axis=1), (anchors[strata == s] > 0).sum())
        n, k = np.bincount(cell), np.bincount(cell, weights=anchors > 0)
        for c in np.flatnonzero(k):
            in_cell = w[:, cell == c]
            np.testing.assert_allclose(in_cell[in_cell > 0], n[c] / k[c], rtol=1e-6)  # weight n_c / k_c
            np.testing.assert_allclose(in_cell.sum(axis=1), n[c], rtol=1e-5)  # cell mass preserved
        np.testing.assert_allclose(w.sum(axis=1), cell.size, rtol=1e-5)  # weights sum to I
        assert (w > 0).any(axis=0).sum() > (anchors > 0).sum()  # the controls are not the anchors
        np.testing.assert_array_equal(matched_random_weights(cell, anchors, 5, 11, strata=cell),
                                      matched_random_weights(cell, anchors, 5, 11))  # cells as strata: eq. 35


def test_replicates_are_scored_and_diagnosed_on_the_target_half_as_computed_directly(bench, audit, controls):
    for h, (fold, seed) in enumerate(zip(audit.folds, spawn_seeds(SEED, 2), strict=True)):
        y, obs = _target(bench, fold)
        strata = discrimination_strata(fold.purification.cell, fold.purification.offsets_sd)
        w = matched_random_weights(fold.purification.cell, fold.purification.weights, REPLICATES, seed, strata=strata)
        scores = weighted_scores(y, w, obs)
        for name, pairs in (("primary", fold.pairs), ("within", fold.within_pairs)):
            eligible, reversed_ = reversal_counts(fold.target["full"].to_numpy(), scores, pairs)
            np.testing.assert_array_equal(controls["eligible"].sel(pair_set=name, fold=h), eligible)
            np.testing.assert_array_equal(controls["reversed"].sel(pair_set=name, fold=h), reversed_)
        np.testing.assert_allclose(controls["balance"].sel(fold=h).values.T,
                                   balance_diagnostics(y, w, fold.purification.offsets_sd, observed=obs), rtol=1e-12)
    rate = pooled_rate(controls["reversed"].sel(pair_set="primary").values,
                       controls["eligible"].sel(pair_set="primary").values)
    np.testing.assert_array_equal(controls["rate"].sel(pair_set="primary"), rate)  # eq. 36 per replicate index


def test_low_dif_values_are_the_audits_and_summaries_follow_from_replicates(bench, audit, controls):
    primary = controls.sel(pair_set="primary")
    assert float(primary["observed_rate"]) == audit.summary["low_dif_reversal_rate"]
    np.testing.assert_array_equal(primary["observed_eligible"], [f.eligible for f in audit.folds])
    np.testing.assert_array_equal(primary["observed_reversed"], [f.reversed for f in audit.folds])
    assert float(controls.sel(pair_set="within")["observed_rate"]) == float(
        audit.controls.sel(pair_set="within")["observed_rate"])
    for h, fold in enumerate(audit.folds):
        y, obs = _target(bench, fold)
        np.testing.assert_array_equal(controls["observed_balance"].sel(fold=h), balance_diagnostics(
            y, fold.purification.weights, fold.purification.offsets_sd, observed=obs))
    for name in ("primary", "within"):
        s = controls.sel(pair_set=name)
        for key, value in randomization_summary(float(s["observed_rate"]), s["rate"].values).items():
            assert float(s[key]) == pytest.approx(value, nan_ok=True)
    low = controls["observed_balance"].mean("fold")
    median = controls["balance"].mean("fold").median("replicate")  # averaged across directions, then the median
    np.testing.assert_allclose(controls["observed_mean_balance"], low)
    np.testing.assert_allclose(controls["control_median_balance"], median)
    for k, name in enumerate(("g", "citc", "sem")):
        assert float(controls[f"{name}_ratio"]) == pytest.approx(float(low[k] / median[k]))
    assert float(controls["abs_delta_alpha"]) == pytest.approx(abs(float(low[3] - median[3])))
    assert 0.8 < float(controls["g_ratio"]) < 1.2 and 0.8 < float(controls["sem_ratio"]) < 1.2  # matched
    assert list(controls["diagnostic"].values) == list(DIAGNOSTICS)
    assert controls.attrs["reference"] == "NT 4.1, B.2, D.1 eq. 42-50" and controls.attrs["seed"] == SEED


def test_diagnostics_match_a_hand_computation_on_a_tiny_matrix():
    y = np.array([[1, 0, 1, 1, 0, 1, 0, 1],
                  [1, 1, 1, 1, 1, 1, 1, 1],  # constant: no CITC, left out of the CITC mean
                  [0, 0, 1, 1, 0, 1, 0, 0],
                  [1, 0, 0, 1, 1, 1, 0, 1],
                  [0, 1, 1, 0, 0, 1, 1, 1]])
    g = np.array([0.4, 0.1, 0.8, 0.5, 0.3])
    r = corrected_item_total(y)
    assert np.isnan(r[1])
    assert r[0] == pytest.approx(np.corrcoef(y[0], y.sum(axis=0) - y[0])[0, 1], abs=1e-14)
    w = np.array([2.0, 1.0, 0.0, 1.5, 1.5])
    np.testing.assert_allclose(balance_diagnostics(y, w, g), _hand_diagnostics(y, w, g), rtol=1e-12)
    ones = np.ones(5)  # unit weights: the textbook alpha k/(k-1) (1 - sum s_i^2 / var(total))
    textbook = 5 / 4 * (1 - y.var(axis=1, ddof=1).sum() / y.sum(axis=0).var(ddof=1))
    assert balance_diagnostics(y, ones, g)[3] == pytest.approx(textbook, rel=1e-12)
    np.testing.assert_allclose(balance_diagnostics(y, np.stack([w, ones]), g),
                               [balance_diagnostics(y, w, g), balance_diagnostics(y, ones, g)], rtol=1e-12)
    single = balance_diagnostics(y, np.array([0.0, 0, 3, 0, 0]), g)  # K_w = 1: no alpha
    assert np.isnan(single[3]) and single[0] == pytest.approx(0.8)


def test_missing_cells_are_handled_as_in_the_scores():
    rng = np.random.default_rng(2)
    y = (rng.random((6, 12)) < 0.6).astype(np.int8)
    observed = rng.random((6, 12)) > 0.2
    w, g = rng.uniform(0, 2, 6), rng.uniform(0.2, 1, 6)
    np.testing.assert_allclose(balance_diagnostics(y, w, g, observed=observed), _hand_diagnostics(y, w, g, observed),
                               rtol=1e-12)
    np.testing.assert_allclose(balance_diagnostics(y, w, g, observed=np.ones(y.shape, bool)),
                               balance_diagnostics(y, w, g), rtol=1e-14)


def test_same_seed_same_numbers_whatever_the_blocks(bench, audit, controls, monkeypatch):
    monkeypatch.setattr(matched, "CONTROL_BLOCK", 7)
    assert controls.identical(discrimination_matched_controls(audit, bench, replicates=REPLICATES, seed=SEED))
    shorter = discrimination_matched_controls(audit, bench, replicates=10, seed=SEED)
    for name in ("rate", "eligible", "balance"):  # a shorter run is the start of a longer one
        np.testing.assert_array_equal(shorter[name], controls[name].isel(replicate=slice(10)))
    other = discrimination_matched_controls(audit, bench, replicates=10, seed=SEED + 1)
    assert not np.array_equal(other["balance"], shorter["balance"])
    np.testing.assert_array_equal(other["observed_balance"], controls["observed_balance"])


def test_section_reports_reversals_and_balance(controls):
    text = "\n".join(matched_section(controls))
    assert "| pair set | eligible pairs | low-DIF (%) | control median (%) | excess (pp) | p |" in text
    assert "| primary |" in text and "| within |" in text and "Cronbach alpha" in text


def test_bad_inputs_raise_one_clear_error(bench, audit):
    with pytest.raises(BayesIRTError, match="'result' parameter .* must be the AuditResult of run_audit"):
        discrimination_matched_controls(audit.summary, bench)
    with pytest.raises(DataError, match=r"not the Dataset this audit ran on \(its SHA-256 differs\)"):
        discrimination_matched_controls(audit, bench.isel(item=slice(1, None)))
    with pytest.raises(DataError, match=r"not the Dataset this audit ran on \(its SHA-256 differs\)"):
        discrimination_matched_controls(audit, bench.isel(model=slice(None, None, -1)))
    with pytest.raises(DataError, match="responses must be the response Dataset"):
        discrimination_matched_controls(audit, bench["responses"])
    with pytest.raises(BayesIRTError, match="'replicates' parameter .* must be a positive integer; got 0"):
        discrimination_matched_controls(audit, bench, replicates=0)
    with pytest.raises(BayesIRTError, match="'seed' parameter .* must be a non-negative integer; got -1"):
        discrimination_matched_controls(audit, bench, seed=-1)
    flat = dataclasses.replace(audit, summary={**audit.summary, "status": "not estimable"})
    with pytest.raises(DataError, match="no eligible near-tie pair"):
        discrimination_matched_controls(flat, bench)
    with pytest.raises(DataError, match="strata nested in the cells"):
        matched_random_weights([0, 0, 1, 1], [2.0, 0, 2, 0], 3, 0, strata=[0, 1, 1, 2])
    with pytest.raises(DataError, match="stratum must be 4 nonnegative integer stratum indices"):
        matched_random_weights([0, 0, 1, 1], [2.0, 0, 2, 0], 3, 0, strata=[0, 1, 2])
    with pytest.raises(DataError, match="cell .* and g .* must be 1-D arrays of the same length"):
        discrimination_strata([0, 0, 1], [0.1, np.nan, 0.3])
    y = np.array([[1, 0, 1], [0, 1, 1]])
    with pytest.raises(DataError, match=r"w \(3,\) and g \(2,\) must have one entry per item \(2\)"):
        balance_diagnostics(y, np.ones(3), np.ones(2))
    with pytest.raises(DataError, match="positive sum per subtest"):
        balance_diagnostics(y, np.zeros(2), np.ones(2))
    with pytest.raises(DataError, match="at least 2 target models"):
        corrected_item_total(y[:, :1])
