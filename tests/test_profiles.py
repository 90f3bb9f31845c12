"""Capability-profile overlap diagnostic (NT App. G): the profile distance is the RMS difference of
predicted offsets, the within-cell assignment is optimal (brute force), calipers maximize the
number of admissible pairs before minimizing cost, paired-mixture controls keep every cell's count
and mass without duplicates, the all-swapped subtest is the complement of the low-DIF endpoints,
the counts match hand scoring, and the numbers depend on the seed only."""

import dataclasses
import itertools

import numpy as np
import pytest

from bayesirt.audit import AuditConfig, run_audit
from bayesirt.audit.adjustment.spectral import MAX_OFFSET, spectral_loadings, working_responses
from bayesirt.audit.diagnostics.profiles import PROFILE_CALIPERS, capability_profiles, paired_mixture_weights, profile_matching, profile_pairs, random_pairs
from bayesirt.audit.engine.ranking import pooled_rate, reversal_counts, weighted_scores
from bayesirt.audit.engine.resampling import randomization_summary
from bayesirt.data import simulate_dif_benchmark
from bayesirt.data.responses import MISSING
from bayesirt.errors import BayesIRTError, ConfigError, DataError
from bayesirt.report.audit_sections import profiles_section
from bayesirt.utils.parallel import spawn_seeds

REPLICATES = 60
SEED = 11
SCENARIOS = ["unconstrained", "caliper 0.25", "caliper 0.5", "caliper 1.0", "random"]


@pytest.fixture(scope="module")
def bench():
    return simulate_dif_benchmark(n_owners=80, n_items=160, seed=2)[0]


@pytest.fixture(scope="module")
def audit(bench):
    return run_audit(bench, AuditConfig(quick=True, controls=19, composition_bootstrap=19, owner_bootstrap=19), progress=False)


@pytest.fixture(scope="module")
def profiles(bench, audit):
    return profile_matching(audit, bench, replicates=REPLICATES, seed=SEED)


def _half(bench, audit, h, target=False):
    columns = audit.folds[h].target_index if target else np.flatnonzero(audit.population["fold"].to_numpy() == h)
    values = bench["responses"].values[:, columns]
    return np.where(values == MISSING, 0, values), values != MISSING


def _swap_all(weights, partner):
    out = weights.copy()
    low = np.flatnonzero(partner >= 0)
    out[partner[low]], out[low] = weights[low], 0.0
    return out


def test_profile_distance_is_rms_offset_difference(bench, audit, profiles):
    for h, fold in enumerate(audit.folds):
        pur = fold.purification
        y, observed = _half(bench, audit, h)
        x, _, s = working_responses(y, observed)
        loading, theta = spectral_loadings(x, np.flatnonzero(pur.selected), pur.k, seed=pur.seed)
        np.testing.assert_allclose(theta.T @ theta, np.eye(theta.shape[1]), atol=1e-10)
        offsets = loading @ theta.T / s[:, None]
        # the final spectral fit of the purification is reproduced
        np.testing.assert_allclose(np.clip(offsets, -MAX_OFFSET, MAX_OFFSET).std(axis=1), pur.offsets_sd, rtol=1e-10)
        e = capability_profiles(y, observed, pur.selected, pur.k, seed=pur.seed)
        i, j = np.triu_indices(40, 1)
        rms = np.sqrt(np.mean((offsets[i] - offsets[j]) ** 2, axis=1))
        np.testing.assert_allclose(np.linalg.norm(e[i] - e[j], axis=1), rms, rtol=1e-10)
        b = pur.final_fit.easiness
        for s_ in range(len(SCENARIOS)):
            partner = profiles["partner"].values[s_, h]
            low = np.flatnonzero(partner >= 0)
            np.testing.assert_allclose(profiles["profile_distance"].values[s_, h, low],
                                       np.sqrt(np.mean((offsets[low] - offsets[partner[low]]) ** 2, axis=1)), rtol=1e-9)
            np.testing.assert_allclose(profiles["easiness_gap"].values[s_, h, low], np.abs(b[low] - b[partner[low]]))
            assert np.isnan(profiles["profile_distance"].values[s_, h, partner < 0]).all()


def _brute(cost, allowed):
    """Best (admissible pairs, cost) over every injective map of the smaller side."""
    k, m = cost.shape
    best = None
    maps = ([(r, c) for r, c in zip(range(k), p)] for p in itertools.permutations(range(m), k)) if k <= m else (
        [(r, c) for r, c in zip(p, range(m))] for p in itertools.permutations(range(k), m))
    for pairs in maps:
        kept = [(r, c) for r, c in pairs if allowed[r, c]]
        value = (-len(kept), sum(cost[r, c] for r, c in kept))
        best = value if best is None or value < best else best
    return -best[0], best[1]


def _instance(rng, k, m):
    cell = np.zeros(k + m, np.int64)
    selected = np.r_[np.ones(k, bool), np.zeros(m, bool)]
    return cell, selected, rng.normal(scale=0.6, size=(k + m, 3)), rng.normal(scale=0.4, size=k + m)


@pytest.mark.parametrize("caliper", [None, 0.5, 0.8])
@pytest.mark.parametrize("shape", [(3, 4), (4, 2), (5, 5)])
def test_matching_is_optimal_by_brute_force(shape, caliper):
    rng = np.random.default_rng(sum(shape))
    for _ in range(5):
        cell, selected, e, b = _instance(rng, *shape)
        low, other = np.flatnonzero(selected), np.flatnonzero(~selected)
        d = np.linalg.norm(e[low, None] - e[None, other], axis=2)
        gap = np.abs(b[low, None] - b[None, other])
        cost = d**2 + gap**2
        allowed = np.ones(cost.shape, bool) if caliper is None else (d <= caliper) & (gap <= caliper)
        partner = profile_pairs(cell, selected, e, b, caliper=caliper)
        matched = np.flatnonzero(partner >= 0)
        assert np.all(~selected[partner[matched]]) and np.unique(partner[matched]).size == matched.size
        cols = np.searchsorted(other, partner[matched])
        assert allowed[matched, cols].all()
        count, total = _brute(cost, allowed)
        assert matched.size == count
        assert cost[matched, cols].sum() == pytest.approx(total, abs=1e-12)


def test_caliper_prefers_more_pairs_to_less_cost():
    # items: low-DIF 0, 1; nonselected 2, 3; one cell. 1-D profiles.
    cell, selected = np.zeros(4, np.int64), np.array([True, True, False, False])
    e, b = np.array([[0.0], [0.5], [0.0], [0.5]]), np.array([0.0, 0.25, 0.0, -0.3])
    # (0, 2) costs 0 and (1, 3) 0.3025 but |delta b| = 0.55: total 0.3025, one admissible pair;
    # (0, 3) costs 0.34 and (1, 2) 0.3125, both admissible
    np.testing.assert_array_equal(profile_pairs(cell, selected, e, b), [2, 3, -1, -1])
    np.testing.assert_array_equal(profile_pairs(cell, selected, e, b, caliper=0.5), [3, 2, -1, -1])
    np.testing.assert_array_equal(profile_pairs(cell, selected, e, b, caliper=0.1), [2, -1, -1, -1])


def test_pairs_stay_in_cells(audit, profiles):
    for h, fold in enumerate(audit.folds):
        pur = fold.purification
        for s_, scenario in enumerate(SCENARIOS):
            partner = profiles["partner"].values[s_, h]
            low = np.flatnonzero(partner >= 0)
            assert pur.selected[low].all() and not pur.selected[partner[low]].any()
            np.testing.assert_array_equal(pur.cell[low], pur.cell[partner[low]])
            assert np.unique(partner[low]).size == low.size
            if scenario in ("unconstrained", "random"):  # 10-item cells, 5 anchors: every anchor matched
                assert low.size == pur.selected.sum()
            tau = float(profiles["caliper"].values[s_])
            if not np.isnan(tau):
                assert profiles["distance_max"].values[s_, h] <= tau and profiles["gap_max"].values[s_, h] <= tau
    np.testing.assert_array_equal(random_pairs(audit.folds[0].purification.cell, audit.folds[0].purification.selected,
                                               spawn_seeds(SEED, 4)[2]), profiles["partner"].values[-1, 0])


def test_controls_keep_cells_and_complement(audit, profiles):
    pur = audit.folds[1].purification
    n, k = np.bincount(pur.cell), np.bincount(pur.cell, weights=pur.selected)
    partner = profiles["partner"].sel(scenario="caliper 0.5").values[1]
    matched = partner >= 0
    mixture, complement = paired_mixture_weights(pur.weights, partner, 200, 3)
    swap_all = _swap_all(pur.weights, partner)
    for w in (*mixture, *complement, swap_all):
        np.testing.assert_array_equal(np.bincount(pur.cell, weights=w > 0, minlength=n.size), k)
        np.testing.assert_allclose(np.bincount(pur.cell, weights=w, minlength=n.size), n)
        np.testing.assert_allclose(w[w > 0], (n / k)[pur.cell][w > 0])  # one item, one weight: no duplicates
    # each matched pair: one endpoint in the control, the other in its complement
    low, other = np.flatnonzero(matched), partner[matched]
    np.testing.assert_array_equal(mixture[:, low] > 0, complement[:, other] > 0)
    np.testing.assert_array_equal(mixture[:, low] > 0, ~(complement[:, low] > 0))
    unmatched = pur.selected & ~matched
    assert (mixture[:, unmatched] > 0).all() and (complement[:, unmatched] > 0).all()
    assert 0.4 < (mixture[:, low] > 0).mean() < 0.6
    # the all-swapped subtest is the complement of the low-DIF configuration (no swap)
    np.testing.assert_array_equal(swap_all > 0, (pur.weights > 0) & ~matched | np.isin(np.arange(n.sum()), other))


def test_counts_match_hand_scoring(bench, audit, profiles):
    seeds = spawn_seeds(SEED, 2)
    for s_, scenario in enumerate(SCENARIOS):
        for h, fold in enumerate(audit.folds):
            y, observed = _half(bench, audit, h, target=True)
            full, partner = fold.target["full"].to_numpy(), profiles["partner"].values[s_, h]
            mixture, complement = paired_mixture_weights(fold.purification.weights, partner, 8, seeds[h], start=20)
            for name, w in (("", mixture), ("complement_", complement)):
                eligible, reversed_ = reversal_counts(full, weighted_scores(y, w, observed), fold.pairs)
                sel = {"scenario": s_, "fold": h, "replicate": slice(20, 28)}
                np.testing.assert_array_equal(profiles[f"{name}eligible"].isel(sel).values, eligible)
                np.testing.assert_array_equal(profiles[f"{name}reversed"].isel(sel).values, reversed_)
            swap = reversal_counts(full, weighted_scores(y, _swap_all(fold.purification.weights, partner), observed),
                                   fold.pairs)
            assert (int(profiles["swap_eligible"].values[s_, h]), int(profiles["swap_reversed"].values[s_, h])) == swap
        ds = profiles.sel(scenario=scenario)
        rate = pooled_rate(ds["reversed"].values, ds["eligible"].values)
        np.testing.assert_array_equal(ds["rate"].values, rate)
        summary = randomization_summary(float(ds["observed_rate"]), rate)
        assert float(ds["p_value"]) == summary["p_value"] and float(ds["excess_pp"]) == summary["excess_pp"]
        delta = rate - pooled_rate(ds["complement_reversed"].values, ds["complement_eligible"].values)
        swap_rate = pooled_rate(ds["swap_reversed"].values, ds["swap_eligible"].values)
        observed_delta = float(ds["observed_rate"]) - swap_rate
        assert float(ds["delta_swap_pp"]) == pytest.approx(100 * observed_delta)
        assert float(ds["p_swap"]) == (1 + np.sum(np.abs(delta) >= abs(observed_delta))) / (REPLICATES + 1)
    assert float(profiles["observed_rate"]) == audit.summary["low_dif_reversal_rate"]


def test_dataset_layout_and_coverage(audit, profiles):
    assert list(profiles["scenario"].values) == SCENARIOS
    assert dict(profiles.sizes) == {"scenario": 5, "fold": 2, "replicate": REPLICATES, "item": 160}
    assert profiles.attrs["reference"] == "NT App. G"
    np.testing.assert_allclose(profiles["caliper"].values, [np.nan, 0.25, 0.5, 1.0, np.nan])
    np.testing.assert_array_equal(profiles["selected"].values, 80)
    np.testing.assert_allclose(profiles["count_coverage"], profiles["matched"] / 80)
    np.testing.assert_allclose(profiles["coverage"], profiles["count_coverage"])  # equal cells: weight = count
    matched = profiles["matched"].values
    assert (matched[0] == 80).all() and (matched[1] <= matched[2]).all() and (matched[2] <= matched[3]).all()


def test_seeded_reproducibility(bench, audit, profiles):
    again = profile_matching(audit, bench, replicates=30, seed=SEED)
    per_replicate = [name for name, v in profiles.data_vars.items() if "replicate" in v.dims]
    for name in per_replicate:
        np.testing.assert_array_equal(again[name].values, profiles[name].isel(replicate=slice(0, 30)).values)
    for name in ("partner", "swap_eligible", "swap_reversed", "distance_max", "coverage"):
        np.testing.assert_array_equal(again[name].values, profiles[name].values)
    other = profile_matching(audit, bench, calipers=(None,), replicates=30, seed=SEED + 1)
    assert list(other["scenario"].values) == ["unconstrained", "random"]
    np.testing.assert_array_equal(other["partner"].values[0], profiles["partner"].values[0])
    assert not np.array_equal(other["rate"].values[0], again["rate"].values[0])
    assert not np.array_equal(other["partner"].values[1], profiles["partner"].values[-1])


def test_section(profiles):
    text = "\n".join(profiles_section(profiles))
    assert "| scenario | pairs | coverage (%) | Low (%) | Mix (%) |" in text
    assert all(f"| {s} |" in text for s in SCENARIOS)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"calipers": (None, -0.5)}, ConfigError, r"The 'caliper' parameter of profile_pairs \(each of the calipers of profile_matching\) must be a positive number \(logits\) or None \(unconstrained\); got -0.5."),
    ({"calipers": "0.5"}, ConfigError, "The 'calipers' parameter of profile_matching must be a non-empty list"),
    ({"calipers": ()}, ConfigError, "The 'calipers' parameter of profile_matching must be a non-empty list"),
    ({"calipers": (0.5, 0.50)}, ConfigError, "profile_matching: calipers repeat a scenario"),
    ({"replicates": 0}, BayesIRTError, "'replicates' parameter of profile_matching must be a positive integer"),
    ({"seed": -1}, BayesIRTError, "'seed' parameter of profile_matching must be a non-negative integer"),
])
def test_bad_options(bench, audit, kwargs, error, match):
    with pytest.raises(error, match=match):
        profile_matching(audit, bench, **kwargs)


def test_bad_inputs(bench, audit):
    with pytest.raises(BayesIRTError, match="must be the AuditResult of run_audit; got 'dict'"):
        profile_matching({}, bench)
    not_estimable = dataclasses.replace(audit, summary={**audit.summary, "status": "not estimable"})
    with pytest.raises(DataError, match="no eligible near-tie pair"):
        profile_matching(not_estimable, bench)
    with pytest.raises(DataError, match="pass the Dataset run_audit was given"):
        profile_matching(audit, bench.isel(item=slice(0, 100)))
    with pytest.raises(DataError, match="pass the Dataset run_audit was given"):
        profile_matching(audit, bench.isel(model=slice(0, 200)))
    cell, selected = np.zeros(4, np.int64), np.array([True, True, False, False])
    with pytest.raises(DataError, match="profiles must be finite"):
        profile_pairs(cell, selected, np.zeros((3, 2)), np.zeros(4))
    with pytest.raises(DataError, match="cell and selected must be 1-D arrays"):
        random_pairs(cell, selected.astype(int), 0)
    with pytest.raises(DataError, match="partner must give each matched low-DIF item"):
        paired_mixture_weights(np.array([2.0, 2.0, 0, 0]), np.array([2, 2, -1, -1]), 5, 0)
    with pytest.raises(DataError, match="partner must give each matched low-DIF item"):
        paired_mixture_weights(np.array([2.0, 2.0, 0, 0]), np.array([1, -1, -1, -1]), 5, 0)
    assert PROFILE_CALIPERS == (None, 0.25, 0.5, 1.0)
