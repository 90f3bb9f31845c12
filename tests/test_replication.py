"""Owner-disjoint signature replication and item-group attribution (NT 4.4, 5.3, D.3 eq. 62-72):
planted DIF replicates, an independent signature does not, the kernels match hand counts and
SciPy, and eq. 72 is exact with and without missing cells."""

import numpy as np
import pytest
import xarray as xr
from scipy.stats import binomtest, spearmanr

from bayesirt.audit import AuditConfig, run_audit
from bayesirt.audit.diagnostics.replication import cell_permutations, group_contributions, item_group_attribution, score_contributions, signature_replication, signature_test, top_share_mask, within_cell_centre
from bayesirt.audit.engine.anchors import blueprint_cells, select_anchors
from bayesirt.audit.engine.ranking import weighted_scores
from bayesirt.data import simulate_dif_benchmark
from bayesirt.errors import ConfigError, DataError
from bayesirt.report.audit_sections import replication_section

# module fixtures fit models (seconds to minutes under load): the whole module is in the slow tier
pytestmark = pytest.mark.slow

SMALL = AuditConfig(quick=True, controls=9, composition_bootstrap=9, owner_bootstrap=9)
R = 99


@pytest.fixture(scope="module")
def bench():
    """(result, responses): 4 item groups of 80 items, so 16 common cells of 20 and 4 top items per cell."""
    ds, _ = simulate_dif_benchmark(n_owners=200, n_items=320, n_groups=4, seed=1)
    return run_audit(ds, SMALL, progress=False), ds


@pytest.fixture(scope="module")
def single():
    """(result, responses) with one item group and 10% missing cells."""
    ds, _ = simulate_dif_benchmark(n_owners=90, n_items=80, n_groups=1, missing=0.1, seed=2)
    return run_audit(ds, SMALL, progress=False), ds


@pytest.fixture(scope="module")
def sig(bench):
    return signature_replication(*bench, permutations=R)


def _halves(result):
    return [f.purification.final_fit for f in result.folds]


def test_planted_dif_replicates_across_owner_halves(sig):
    obs = sig["observed"].to_series()
    assert obs["median_rho"] > 0.4 and obs["overlap"] > 0.5 and obs["agreement"] > 0.6
    np.testing.assert_allclose(sig["p_value"], 1 / (R + 1))
    assert abs(float(sig["null_mean"].sel(statistic="median_rho"))) < 0.05
    assert sig.attrs["overlap_chance"] == pytest.approx(0.2) and sig.attrs["n_top"] == 64


def test_wrapper_uses_common_cells_and_both_half_fits(bench, sig):
    result, ds = bench
    fits = _halves(result)
    cell = blueprint_cells(ds["item_group"].values.astype(str), (fits[0].easiness + fits[1].easiness) / 2)
    np.testing.assert_array_equal(sig["cell"], cell)
    np.testing.assert_array_equal(sig["top_discovery"], top_share_mask(cell, fits[0].dif_range))
    np.testing.assert_array_equal(sig["top_validation"], top_share_mask(cell, fits[1].dif_range))
    for f, fam in enumerate(result.summary["families"]):
        rho = spearmanr(within_cell_centre(fits[0].family_effect, cell)[:, f],
                        within_cell_centre(fits[1].family_effect, cell)[:, f]).statistic
        assert float(sig["rho"].sel(family=fam)) == pytest.approx(rho, abs=1e-12)
    assert float(sig["observed"].sel(statistic="median_rho")) == pytest.approx(np.median(sig["rho"]))
    assert list(sig["item"].values[:2]) == list(ds["item_id"].values[:2])


def _reference(delta_d, delta_v, cell, share):
    """Statistics recomputed from scratch with SciPy and select_anchors."""
    cd, cv = within_cell_centre(delta_d, cell), within_cell_centre(delta_v, cell)
    rho = np.median([spearmanr(cd[:, f], cv[:, f]).statistic for f in range(cd.shape[1])])
    top_d = select_anchors(cell, -np.ptp(delta_d, axis=1), share)
    top_v = select_anchors(cell, -np.ptp(delta_v, axis=1), share)
    both = top_d & top_v
    agree = (delta_d.argmax(axis=1) == delta_v.argmax(axis=1))[both].mean() if both.any() else np.nan
    return rho, both.sum() / top_d.sum(), agree


def test_permutation_replicates_equal_the_statistics_of_permuted_signatures(bench):
    fits = _halves(bench[0])
    cell = blueprint_cells(bench[1]["item_group"].values.astype(str), fits[0].easiness)
    ds = signature_test(fits[0].family_effect, fits[1].family_effect, cell, permutations=7, seed=5)
    perms = cell_permutations(cell, 7, np.random.default_rng(5))
    np.testing.assert_allclose(ds["observed"], _reference(fits[0].family_effect, fits[1].family_effect, cell, 0.2))
    for r in range(7):
        ref = _reference(fits[0].family_effect, fits[1].family_effect[perms[r]], cell, 0.2)
        np.testing.assert_allclose(ds["null"][r], ref, atol=1e-12)


def test_independent_validation_signature_is_null(bench):
    fits = _halves(bench[0])
    cell = blueprint_cells(bench[1]["item_group"].values.astype(str), fits[0].easiness)
    rng = np.random.default_rng(11)
    p, overlap = [], []
    for _ in range(30):
        fake = rng.normal(size=fits[0].family_effect.shape)
        ds = signature_test(fits[0].family_effect, fake - fake.mean(axis=1, keepdims=True), cell, permutations=R,
                            seed=int(rng.integers(2**31)))
        p.append(ds["p_value"].values)
        overlap.append(float(ds["observed"].sel(statistic="overlap")))
    p = np.array(p)
    assert np.all((p.mean(axis=0) > 0.3) & (p.mean(axis=0) < 0.7))
    assert (p <= 0.05).mean() < 0.15
    assert np.mean(overlap) == pytest.approx(0.2, abs=0.03)


def test_null_mean_overlap_is_the_exact_chance_level():
    cell = np.repeat([0, 1, 2], [5, 7, 3])  # k_c = 1, 1, 1 at 20%
    rng = np.random.default_rng(0)
    ds = signature_test(rng.normal(size=(15, 3)), rng.normal(size=(15, 3)), cell, permutations=4000, seed=1)
    chance = (1 / 5 + 1 / 7 + 1 / 3) / 3
    assert ds.attrs["overlap_chance"] == pytest.approx(chance)
    assert float(ds["null_mean"].sel(statistic="overlap")) == pytest.approx(chance, abs=0.01)


def test_cell_permutations_stay_in_cells_and_are_uniform():
    cell = np.array([1, 0, 1, 0, 0, 2])
    perm = cell_permutations(cell, 6000, np.random.default_rng(0))
    assert np.all(np.sort(perm, axis=1) == np.arange(6)) and np.all(cell[perm] == cell)
    _, counts = np.unique(perm[:, [1, 3, 4]], axis=0, return_counts=True)
    assert counts.size == 6 and np.all(np.abs(counts - 1000) < 150)
    np.testing.assert_array_equal(perm, cell_permutations(cell, 6000, np.random.default_rng(0)))


def test_within_cell_centring_by_hand():
    cell = np.array([0, 0, 1, 1, 1])
    values = np.array([[1.0, 0.0], [3.0, 2.0], [2.0, 1.0], [4.0, 1.0], [6.0, 4.0]])
    np.testing.assert_allclose(within_cell_centre(values, cell),
                               [[-1, -1], [1, 1], [-2, -1], [0, -1], [2, 2]])


def test_top_share_selection_rounds_like_select_anchors_and_breaks_ties_by_index():
    cell = np.repeat([0, 1, 2], [5, 10, 2])
    magnitude = np.r_[[1, 3, 3, 2, 0], [5] * 10, [1, 1]].astype(float)
    # k_c = max(1, round(0.2 n_c)) = 1, 2, 1: the tie 3/3 goes to item 1, the all-5 cell to its first two
    np.testing.assert_array_equal(np.flatnonzero(top_share_mask(cell, magnitude)), [1, 5, 6, 15])
    np.testing.assert_array_equal(top_share_mask(cell, magnitude, 0.5).sum(), 2 + 5 + 1)  # round(2.5) = 2
    rng = np.random.default_rng(3)
    cell = rng.integers(0, 6, 200)
    rows = rng.integers(0, 4, (20, 200)).astype(float)  # many ties
    for share in (0.1, 0.2, 0.5):
        expected = np.array([select_anchors(cell, -row, share) for row in rows])
        np.testing.assert_array_equal(top_share_mask(cell, rows, share), expected)


def test_overlap_and_advantaged_family_agreement_on_six_items():
    delta_d = np.array([[2, 0, -2], [3, -1, -2], [0, 3, -3], [0.5, 0, -0.5], [0.1, 0, -0.1], [0, 0, 0]])
    delta_v = np.array([[0.2, 0, -0.2], [1, 0, -1], [-1, -1, 2], [0, 4, -4], [0.1, 0, 0], [0, 0, 0]])
    ds = signature_test(delta_d, delta_v, np.zeros(6, int), permutations=1, top_share=0.5)
    # top 3 by range: D {0, 1, 2}, V {1, 2, 3}; overlap {1, 2}: argmax 0 = 0 agrees, 1 != 2 does not
    np.testing.assert_array_equal(np.flatnonzero(ds["top_discovery"]), [0, 1, 2])
    np.testing.assert_array_equal(np.flatnonzero(ds["top_validation"]), [1, 2, 3])
    assert float(ds["observed"].sel(statistic="overlap")) == pytest.approx(2 / 3)
    assert float(ds["observed"].sel(statistic="agreement")) == pytest.approx(0.5)
    assert ds.attrs["n_overlap"] == 2


def test_seeded_reproducibility(bench):
    a = signature_replication(*bench, permutations=19, seed=4)
    xr.testing.assert_identical(a, signature_replication(*bench, permutations=19, seed=4))
    assert not np.array_equal(a["null"], signature_replication(*bench, permutations=19, seed=5)["null"])


def test_item_group_attribution_selects_extremes_and_tests_signs(bench):
    result, ds = bench
    g = item_group_attribution(result, ds)
    assert g.attrs["status"] == "estimated" and g.sizes["check"] == 4 and g.attrs["checks"] == 12
    sizes = g["group_items"].values
    np.testing.assert_allclose((g["gamma"] * sizes[:, None, None]).sum("group"), 0, atol=1e-10)  # eq. 69 centring
    for fam in g["family"].values:
        disc = g["gamma"].sel(family=fam, half="discovery").to_series().sort_values()
        sel = g["selected_group"].sel(family=fam).values
        assert list(sel) == list(disc.index[::-1][:2]) + list(disc.index[:2])
        val = g["gamma"].sel(family=fam, half="validation").to_series()[sel].values
        np.testing.assert_array_equal(g["replicated"].sel(family=fam), np.sign(val) == np.sign(disc[sel].values))
        k = int(g["replicated_count"].sel(family=fam))
        assert float(g["p_value"].sel(family=fam)) == binomtest(k, 4, 0.5, alternative="greater").pvalue
    assert g.attrs["share"] == g.attrs["replicated"] / 12 == int(g["replicated"].sum()) / 12
    assert g.attrs["p_value"] == binomtest(g.attrs["replicated"], 12, 0.5, alternative="greater").pvalue
    assert binomtest(12, 12, 0.5, alternative="greater").pvalue == pytest.approx(0.5**12)


def test_not_applicable_without_two_eligible_groups(bench, single):
    g = item_group_attribution(*single)
    assert g.attrs["status"] == "not applicable: 1 of 1 item group(s) have at least 20 items; attribution needs 2"
    g = item_group_attribution(*bench, min_group_items=81)
    assert g.attrs["status"].startswith("not applicable: 0 of 4") and list(g["group_items"].values) == [80] * 4
    c = group_contributions(*single)
    assert c.attrs["status"].startswith("not applicable") and "check" not in c.dims


def test_contributions_sum_to_the_family_shift_eq72(bench, single):
    for result, ds in (bench, single):
        c = group_contributions(result, ds)
        np.testing.assert_allclose(c["contribution"].sum("group"), c["shift_pp"], rtol=0, atol=1e-10)
        for d, fold in enumerate(result.folds):
            means = fold.target.groupby("family")[["anchor", "full"]].mean()
            np.testing.assert_allclose(c["shift_pp"].isel(direction=d), 100 * (means["anchor"] - means["full"]),
                                       atol=1e-10)
    c = group_contributions(*bench)
    assert c.attrs["checks"] == 12
    np.testing.assert_array_equal(c["replicated"], np.sign(c["forward_value"]) == np.sign(c["swapped_value"]))


def test_score_contributions_are_eq71_on_complete_data_and_exact_with_missing():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, (12, 7))
    w = rng.uniform(0, 2, 12)
    w *= 12 / w.sum()
    group = np.repeat([0, 1, 2], 4)
    onehot = np.eye(3)[group]
    complete = score_contributions(y, np.ones(y.shape, bool), w, group, 3)
    np.testing.assert_allclose(complete, 100 / 12 * onehot.T @ ((w - 1)[:, None] * y), atol=1e-12)
    observed = rng.random(y.shape) > 0.3
    missing = score_contributions(y, observed, w, group, 3)
    total = 100 * (weighted_scores(y, w, observed) - weighted_scores(y, np.ones(12), observed))
    np.testing.assert_allclose(missing.sum(axis=0), total, atol=1e-12)


def test_replication_section_lines(sig, bench, single):
    lines = replication_section(sig, item_group_attribution(*bench), group_contributions(*single))
    text = "\n".join(lines)
    assert "| median family-wise Spearman rho |" in text and "| top-20% overlap precision |" in text
    assert "of 12 discovery-selected extreme group effects" in text
    assert "Item-group contributions to family shifts: not applicable" in text


def test_bad_input_messages(bench, single):
    result, ds = bench
    with pytest.raises(ConfigError, match="'permutations' parameter of signature_test must be a positive integer"):
        signature_replication(result, ds, permutations=0)
    with pytest.raises(ConfigError, match=r"'top_share' parameter of signature_test must be a number in \(0, 1\]"):
        signature_replication(result, ds, top_share=1.5)
    with pytest.raises(ConfigError, match="'min_group_items' parameter of item_group_attribution"):
        item_group_attribution(result, ds, min_group_items=0)
    with pytest.raises(ConfigError, match="'result' parameter of group_contributions must be the AuditResult of "
                                        "run_audit; got 'FoldResult'"):
        group_contributions(result.folds[0], ds)
    with pytest.raises(DataError, match="not the Dataset this audit ran on"):
        signature_replication(result, single[1])
    with pytest.raises(DataError, match="must be .item, family. arrays of one shape"):
        signature_test(np.zeros((5, 3)), np.zeros((4, 3)), np.zeros(5, int))
    with pytest.raises(DataError, match="cell must hold one nonnegative integer per item"):
        signature_test(np.zeros((5, 3)), np.zeros((5, 3)), np.zeros(4, int))
