"""Posterior counterparts of the audit diagnostics (bayesirt.audit.bayes.diagnostics): with every
draw at the point estimate each reduces exactly to its deterministic statistic; hand-computed
toy cases; spread from differing draws; same seed, same numbers; and the audit end to end."""

import dataclasses
import json

import numpy as np
import pytest
import xarray as xr

from bayesirt.audit import AuditConfig, run_audit
from bayesirt.audit.bayes import diagnostics as bd
from bayesirt.audit.bayes import matched as bayes_matched
from bayesirt.audit.bayes import posterior_draws as pdraws
from bayesirt.audit.bayes.posterior import pool_folds, propagate_posterior
from bayesirt.audit.diagnostics.matched import discrimination_matched_controls
from bayesirt.audit.diagnostics.replication import signature_replication, signature_test
from bayesirt.audit.diagnostics.sensitivity import fraction_purifications
from bayesirt.audit.diagnostics.specificity import within_family_specificity
from bayesirt.audit.engine.anchors import anchor_weights, blueprint_cells
from bayesirt.audit.engine.resampling import add_randomization_summaries
from bayesirt.data import simulate_dif_benchmark
from bayesirt.data.responses import MISSING
from bayesirt.errors import DataError

CONFIG = AuditConfig(quick=True, controls=29, composition_bootstrap=9, owner_bootstrap=9, sensitivity=True)
MATCHED = 30
SEED = 7


@pytest.fixture(scope="module")
def bench():
    return simulate_dif_benchmark(n_owners=90, n_items=120, missing=0.02, seed=3)[0]


@pytest.fixture(scope="module")
def audit(bench):
    return run_audit(bench, CONFIG, progress=False)


def _arrays(ds):
    values = ds["responses"].values
    observed = values != MISSING
    return np.where(observed, values, 0).astype(np.int8), observed, ds["item_group"].values.astype(str)


def _with_posterior(result, ds, n_draws=3, noise=0.0, seed=0):
    """A copy of ``result`` with a Bayesian layer whose draws are the point estimate (the last
    purification round's fit) plus N(0, noise^2) perturbations, carried through the chain."""
    y, observed, item_group = _arrays(ds)
    rng = np.random.default_rng(seed)
    folds = []
    for f in result.folds:
        fit = f.purification.selection_fit
        delta = fit.family_effect[None] + noise * rng.standard_normal((n_draws, *fit.family_effect.shape))
        b = fit.easiness[None] + noise * rng.standard_normal((n_draws, fit.easiness.size))
        delta -= delta.mean(axis=2, keepdims=True) if noise else 0.0  # family effects stay centred per item
        t = f.target_index
        chain = propagate_posterior(delta, b, item_group=item_group, anchor_fraction=result.config.anchor_fraction, y_target=y[:, t],
                                    observed_target=observed[:, t], full=f.target["full"].to_numpy(), pairs=f.pairs,
                                    model_ids=f.target["model_id"].to_numpy(), controls=5)
        draws = xr.Dataset({"family_effect": (("draw", "item", "family"), delta), "easiness": (("draw", "item"), b)},
                           coords={"draw": np.arange(n_draws), "family": result.summary["families"]})
        folds.append(dataclasses.replace(f, posterior=chain, draws=draws))
    out = dataclasses.replace(result, folds=folds, summary=dict(result.summary))
    out.bayes = pool_folds([f.posterior for f in folds])
    out.summary["bayes"] = {}
    return out


@pytest.fixture(scope="module")
def point(bench, audit):
    return _with_posterior(audit, bench)


@pytest.fixture(scope="module")
def noisy(bench, audit):
    return _with_posterior(audit, bench, n_draws=12, noise=0.6, seed=1)


def _halves(result, ds):
    """The purify keyword arguments of each audit half, as run_audit builds them."""
    y, observed, item_group = _arrays(ds)
    pop, families = result.population, result.summary["families"]
    family = np.searchsorted(families, pop["family"].to_numpy())
    out = []
    for f in result.folds:
        half = (pop["fold"] == f.audit_fold).to_numpy()
        out.append({"y": y[:, half], "observed": observed[:, half], "family": family[half],
                    "n_families": len(families), "item_group": item_group, "seed": f.purification.seed,
                    "adjustment": f.purification.adjustment})
    return out


def _same(values, expected):
    """Every draw equals the deterministic value exactly (NaN where it is NaN)."""
    values, expected = np.asarray(values, dtype=float), np.asarray(expected, dtype=float)
    np.testing.assert_array_equal(values, np.broadcast_to(expected, values.shape))


def _mean(values, expected):
    """A posterior mean of equal draws: the value up to the rounding of the sum."""
    np.testing.assert_allclose(np.asarray(values, dtype=float), expected, rtol=1e-15, atol=0)


# ------------------------------------------------------------------ point draws: exact reduction


def test_point_draws_reproduce_the_point_anchors_and_counts(audit, point):
    for f, g in zip(audit.folds, point.folds, strict=True):
        assert (g.posterior["anchor"].values == f.purification.selected).all()
        assert (g.posterior["n_reversed"].values == f.reversed).all()
        assert (g.posterior["n_eligible"].values == f.eligible).all()


def test_specificity_of_point_draws_is_the_deterministic_one(audit, point):
    ds = bd.posterior_specificity([f.posterior for f in point.folds], [f.within_pairs for f in point.folds],
                                  audit.controls)
    w = audit.summary["within_family"]
    for key in ("within_rate", "within_excess_pp", "gap_pp", "specificity_pp"):
        _same(ds[key], w[key])
        _mean(ds[f"{key}_mean"], w[key])
        _same(ds[f"{key}_quantiles"], w[key])
        assert float(ds[f"deterministic_{key}"]) == w[key]
        assert float(ds[f"prob_{key}_positive"]) == float(w[key] > 0)
    _same(ds["cross_rate"], audit.summary["low_dif_reversal_rate"])
    assert int(ds["within_eligible"].isel(draw=0).sum()) == w["within_pairs"]


@pytest.mark.slow
def test_sensitivity_of_point_draws_is_the_deterministic_curve(bench, audit, point):
    y, observed, item_group = _arrays(bench)
    purifications = fraction_purifications(audit.folds, _halves(audit, bench), anchor_fraction=0.5)
    anchors = [[int(p.selected.sum()) for p in purifications[a]] for a in audit.sensitivity["anchor_fraction"].values]
    np.testing.assert_array_equal(anchors, audit.sensitivity["anchors"])  # the curve's own rebuilt anchors
    scores = bd.fraction_scores(point.folds, purifications, y=y, observed=observed, item_group=item_group, anchor_fraction=0.5)
    assert scores[0].dims == ("anchor_fraction", "draw", "model")
    ds = bd.posterior_sensitivity(scores, [f.target for f in point.folds], sensitivity=audit.sensitivity,
                                  gaps=[f.pair_gaps for f in point.folds])  # 2% missing: pairs on the both-answered gaps
    s = audit.sensitivity
    for key in ("low_dif_rate", "excess_pp"):
        _same(ds[key].transpose("draw", "anchor_fraction", "threshold"), s[key].values)
        _mean(ds[f"{key}_mean"], s[key].values)
        _same(ds[f"{key}_quantiles"].transpose("quantile", "anchor_fraction", "threshold"), s[key].values)
    _same(ds["eligible"], s["eligible"].values)
    assert ds["low_dif_rate"].dims == ("draw", "anchor_fraction", "threshold")


def test_matched_controls_of_point_draws_are_the_deterministic_ones(bench, point):
    det = discrimination_matched_controls(point, bench, replicates=MATCHED, seed=SEED)
    ds = bayes_matched.posterior_matched_controls(dataclasses.replace(point, matched=det), bench, replicates=MATCHED, seed=SEED)
    _same(ds["excess_pp"], det["excess_pp"].values)
    _same(ds["control_median"], det["median"].values)
    _same(ds["low_dif_rate"], det["observed_rate"].values)
    _same(ds["deterministic_excess_pp"], det["excess_pp"].values)
    for key in ("g_ratio", "citc_ratio", "sem_ratio", "abs_delta_alpha"):  # float products: to rounding
        np.testing.assert_allclose(ds[key], float(det[key]), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ds["control_median_balance"].isel(draw=0), det["control_median_balance"], rtol=1e-12)


def test_fewer_controls_per_draw_are_the_first_deterministic_replicates(bench, point):
    """Common random numbers: R' < R controls of a point draw are replicates 0..R'-1 of the run of R."""
    det = discrimination_matched_controls(point, bench, replicates=MATCHED, seed=SEED)
    ds = bayes_matched.posterior_matched_controls(point, bench, replicates=10, seed=SEED)
    first = det["rate"].isel(replicate=slice(0, 10))
    expected = 100 * (det["observed_rate"] - first.median("replicate"))
    _same(ds["excess_pp"], expected.values)


def test_signatures_of_point_draws_are_the_deterministic_statistics(bench, audit, point):
    det = signature_replication(audit, bench, permutations=19, seed=1)
    ds = bd.posterior_signatures(*bd.signature_draws(point), bench["item_group"].values.astype(str),
                                 families=audit.summary["families"], deterministic=det)
    _same(ds["value"], det["observed"].values)
    _mean(ds["value_mean"], det["observed"].values)
    _same(ds["rho"], det["rho"].values)
    np.testing.assert_array_equal(ds["p_value"], det["p_value"])  # deterministic, copied
    assert list(ds["family"].values) == audit.summary["families"]


# ------------------------------------------------------------------ hand-computed toy cases


def _toy_controls(cross_rates, within_rates, observed_rates, observed_eligible):
    ds = xr.Dataset({"rate": (("pair_set", "replicate"), np.array([cross_rates, within_rates])),
                     "observed_rate": ("pair_set", np.array(observed_rates)),
                     "observed_eligible": (("pair_set", "fold"), np.array(observed_eligible))},
                    coords={"pair_set": ["primary", "within"]})
    add_randomization_summaries(ds)
    return ds


def test_specificity_on_a_toy_replicate_table_by_hand():
    full = np.array([0.50, 0.505, 0.51, 0.52])  # one fold, four target models
    within = (np.array([0, 2]), np.array([1, 3]))  # two same-family, different-owner near ties
    anchor = np.array([[0.6, 0.5, 0.4, 0.45],  # (0,1) reversed, (2,3) kept: 1/2
                       [0.4, 0.5, 0.5, 0.45],  # kept, reversed: 1/2
                       [0.4, 0.5, 0.4, 0.45],  # both kept: 0/2
                       [0.5, 0.5, 0.4, 0.45]])  # (0,1) tied under the anchors (not eligible), kept: 0/1
    chain = xr.Dataset({"anchor_score": (("draw", "model"), anchor), "full_score": ("model", full),
                        "n_eligible": ("draw", [4, 4, 4, 4]), "n_reversed": ("draw", [3, 2, 2, 1])},
                       coords={"draw": np.arange(4)})
    # replicates: cross .5 .3 .4, within .2 .4 .1 -> within median .2; paired gaps .3 -.1 .3 -> median .3
    controls = _toy_controls([0.5, 0.3, 0.4], [0.2, 0.4, 0.1], [0.5, 0.25], [[4], [4]])
    ds = bd.posterior_specificity([chain], [within], controls)
    np.testing.assert_array_equal(ds["within_eligible"].sel(fold=0), [2, 2, 2, 1])
    np.testing.assert_array_equal(ds["within_reversed"].sel(fold=0), [1, 1, 0, 0])
    np.testing.assert_allclose(ds["cross_rate"], [0.75, 0.5, 0.5, 0.25])
    np.testing.assert_allclose(ds["within_rate"], [0.5, 0.5, 0.0, 0.0])
    np.testing.assert_allclose(ds["within_excess_pp"], [30, 30, -20, -20])
    np.testing.assert_allclose(ds["gap_pp"], [25, 0, 50, 25])
    np.testing.assert_allclose(ds["specificity_pp"], [-5, -30, 20, -5])
    assert float(ds["within_median"]) == pytest.approx(0.2) and float(ds["gap_median"]) == pytest.approx(0.3)
    assert float(ds["gap_pp_mean"]) == pytest.approx(25) and float(ds["specificity_pp_mean"]) == pytest.approx(-5)
    # sorted gaps 0 25 25 50; linear interpolation at 0.15, 1.5 and 2.85 positions
    np.testing.assert_allclose(ds["gap_pp_quantiles"], [3.75, 25, 46.25])
    assert float(ds["prob_gap_pp_positive"]) == 0.75  # a gap of 0 is not positive
    assert float(ds["prob_specificity_pp_positive"]) == 0.25
    assert float(ds["prob_within_excess_pp_positive"]) == 0.5
    # the deterministic columns are the frozen table's (observed .5 / .25)
    w = within_family_specificity(controls)
    assert float(ds["deterministic_specificity_pp"]) == w["specificity_pp"] == pytest.approx(100 * (0.25 - 0.3))


def test_signatures_of_identical_and_mirrored_halves_by_hand():
    rng = np.random.default_rng(0)
    delta = rng.standard_normal((16, 3))
    delta -= delta.mean(axis=1, keepdims=True)
    b = rng.standard_normal((2, 16))
    group = np.repeat(["a"], 16)  # one group: 4 common cells of 4 items
    # draw 0: the validation half equals discovery; draw 1: it is mirrored (delta_v = -delta_d)
    ds = bd.posterior_signatures(np.stack([delta, delta]), np.stack([delta, -delta]), b, b, group, top_share=0.25)
    np.testing.assert_allclose(ds["value"].sel(statistic="median_rho"), [1, -1])
    np.testing.assert_allclose(ds["value"].sel(statistic="overlap"), [1, 1])  # same ranges, same top items
    np.testing.assert_allclose(ds["value"].sel(statistic="agreement"), [1, 0])  # argmax of -delta is the argmin
    np.testing.assert_allclose(ds["value_mean"], [0, 1, 0.5])
    np.testing.assert_allclose(ds["value_quantiles"].sel(statistic="median_rho"), [-0.9, 0, 0.9])
    np.testing.assert_allclose(ds["rho"], [[1, 1, 1], [-1, -1, -1]])


def test_each_draws_signature_is_the_deterministic_statistic_of_that_draw(noisy, bench):
    d_d, d_v, b_d, b_v = bd.signature_draws(noisy)
    group = bench["item_group"].values.astype(str)
    ds = bd.posterior_signatures(d_d, d_v, b_d, b_v, group)
    for s in (0, 5, 11):
        cell = blueprint_cells(group, (b_d[s] + b_v[s]) / 2)
        test = signature_test(d_d[s], d_v[s], cell, permutations=1)
        np.testing.assert_allclose(ds["value"].isel(draw=s), test["observed"], rtol=1e-12)
    assert float(ds["value"].sel(statistic="median_rho").std()) > 0  # differing draws spread


def test_shifted_draws_move_a_point_draw_exactly_onto_the_target(audit, point):
    f = point.folds[0]
    delta, b = pdraws.shifted_draws(f.draws, f.purification.selection_fit, f.purification.final_fit)
    np.testing.assert_array_equal(delta[1], f.purification.final_fit.family_effect)
    np.testing.assert_array_equal(b[2], f.purification.final_fit.easiness)


def test_describe_leaves_out_undefined_draws():
    ds = pdraws.describe(xr.Dataset({"x": (("draw", "k"), [[1.0, np.nan], [3.0, np.nan], [np.nan, np.nan], [-1, np.nan]])},
                                coords={"draw": np.arange(4)}), ["x"])
    np.testing.assert_allclose(ds["x_mean"], [1.0, np.nan])
    np.testing.assert_array_equal(ds["x_undefined"], [1, 4])
    np.testing.assert_allclose(ds["prob_x_positive"], [2 / 3, np.nan])
    np.testing.assert_allclose(ds["x_quantiles"].sel(k=0), np.quantile([1.0, 3.0, -1.0], pdraws.QUANTILES))
    assert ds["quantile"].values.tolist() == pdraws.QUANTILES


# ------------------------------------------------------------------ differing draws, reproducibility


def test_differing_draws_spread_around_and_pair_folds_by_index(audit, noisy):
    ds = bd.posterior_specificity([f.posterior for f in noisy.folds], [f.within_pairs for f in noisy.folds],
                                  audit.controls)
    np.testing.assert_array_equal(ds["cross_rate"], noisy.bayes["low_dif_reversal_rate"])  # pool_folds' rate
    assert float(ds["within_rate"].std()) > 0
    lo, mid, hi = ds["specificity_pp_quantiles"].values
    assert lo <= mid <= hi and lo < hi
    np.testing.assert_allclose(ds["specificity_pp"], ds["gap_pp"] - 100 * float(ds["gap_median"]))


def test_matched_controls_per_draw_are_reproducible_and_block_free(bench, noisy, monkeypatch):
    a = bayes_matched.posterior_matched_controls(noisy, bench, replicates=12, seed=SEED)
    xr.testing.assert_identical(a, bayes_matched.posterior_matched_controls(noisy, bench, replicates=12, seed=SEED))
    monkeypatch.setattr(bayes_matched, "DRAW_BLOCK", 5)
    xr.testing.assert_identical(a, bayes_matched.posterior_matched_controls(noisy, bench, replicates=12, seed=SEED))
    other = bayes_matched.posterior_matched_controls(noisy, bench, replicates=12, seed=SEED + 1)
    assert not np.array_equal(a["control_median_balance"], other["control_median_balance"])
    np.testing.assert_array_equal(a["low_dif_rate"], other["low_dif_rate"])  # the anchors' own rates
    assert float(a["excess_pp"].std()) > 0 and a["excess_pp"].dims == ("draw", "pair_set")


def test_each_draws_controls_are_the_deterministic_controls_of_its_own_anchors(bench, noisy):
    """Draw s's controls are those the deterministic B.2 control draws for anchors S^(s) in the
    draw's cells: re-drawn and matched per draw, not the point anchors' controls."""
    ds = bayes_matched.posterior_matched_controls(noisy, bench, replicates=12, seed=SEED)
    group = bench["item_group"].values.astype(str)
    for s in (0, 7):
        folds = []
        for f in noisy.folds:
            cell = blueprint_cells(group, f.draws["easiness"].values[s])
            selected = f.posterior["anchor"].values[s]
            folds.append(dataclasses.replace(f, purification=dataclasses.replace(
                f.purification, cell=cell, selected=selected, weights=anchor_weights(cell, selected))))
        det = discrimination_matched_controls(dataclasses.replace(noisy, folds=folds), bench, replicates=12, seed=SEED)
        _same(ds["excess_pp"].isel(draw=s), det["excess_pp"].values)
        np.testing.assert_allclose(ds["control_median_balance"].isel(draw=s), det["control_median_balance"],
                                   rtol=1e-12)
        np.testing.assert_allclose(ds["g_ratio"].isel(draw=s), float(det["g_ratio"]), rtol=1e-12)
    point = bayes_matched.posterior_matched_controls(_with_posterior(noisy, bench), bench, replicates=12, seed=SEED)
    assert not np.allclose(ds["control_median_balance"], point["control_median_balance"].isel(draw=0))


def test_without_the_bayesian_layer_the_posteriors_fail_clearly(bench, audit):
    with pytest.raises(DataError, match="bayes=True"):
        bayes_matched.posterior_matched_controls(audit, bench)
    with pytest.raises(DataError, match="bayes=True"):
        bd.signature_draws(audit)
    assert bd.add_posterior_diagnostics(audit, bench) is audit and audit.bayes is None


# ------------------------------------------------------------------ end to end


@pytest.mark.slow
def test_cli_audit_with_bayes_and_diagnostics_end_to_end(tmp_path):
    from bayesirt.cli.main import main

    ds, _ = simulate_dif_benchmark(n_owners=60, n_items=120, seed=2)
    path = tmp_path / "bench.nc"
    ds.to_netcdf(path)
    out = tmp_path / "a"
    assert main(["audit", str(path), "--out", str(out), "--quick", "--controls", "19", "--composition-bootstrap", "19", "--bayes",
                 "--matched", "--sensitivity", "--bayes-draws", "40", "--bayes-controls", "8", "--seed", "1",
                 "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    bayes = summary["bayes"]
    assert summary["config"]["bayes_controls"] == 8 and bayes["matched"]["replicates_per_draw"] == 8
    assert bayes["draws"] == 40
    assert {"specificity", "sensitivity", "matched", "signatures"} <= set(bayes)
    spec = bayes["specificity"]
    assert spec["gap_pp"]["deterministic"] == pytest.approx(summary["within_family"]["gap_pp"])
    for entry in (spec["gap_pp"], spec["specificity_pp"], bayes["matched"]["excess_pp_primary"]):
        lo, mid, hi = entry["q05_q50_q95"]
        assert lo <= mid <= hi and 0 <= entry["prob_positive"] <= 1
    assert bayes["signatures"]["median_rho"]["permutation_p_value"] == summary["replication"]["median_rho"]["p_value"]
    assert len(bayes["sensitivity"]) == 18
    tree = xr.open_datatree(out / "audit.nc")
    assert {"specificity", "sensitivity", "matched", "signatures", "fold_0"} <= set(tree["bayes"].children)
    spec_ds = tree["bayes/specificity"].to_dataset()
    np.testing.assert_allclose(spec_ds["cross_rate"], tree["bayes"]["low_dif_reversal_rate"])
    # per-draw values are one chain of draws in the file, ArviZ's sample dims (plain az.summary reads them)
    assert tree["bayes/sensitivity"]["low_dif_rate"].dims == ("chain", "draw", "anchor_fraction", "threshold")
    assert tree["bayes/matched"]["excess_pp"].dims == ("chain", "draw", "pair_set")
    assert tree["bayes/signatures"]["value"].dims == ("chain", "draw", "statistic")
    report = (out / "report.md").read_text()
    headings = [line for line in report.split("\n") if line.startswith("## ") or line.startswith("### Posterior")]
    for section in ("## Within-family specificity", "## Score-gap thresholds", "## Discrimination- and reliability",
                    "## Item-family signature replication"):
        k = next(i for i, h in enumerate(headings) if h.startswith(section))
        assert headings[k + 1] == "### Posterior counterpart (Bayesian layer)"  # right after its diagnostic
