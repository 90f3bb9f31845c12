"""benchmarks/nuts_numpyro.py's pieces that need no sampler and no NumPyro venv: the run schedule of
--data-seeds, pooling per dataset and the targets' status, the agreement of posterior means, and the
families' mapping of NumPyro draws to bayesirt's reported variables (same values in both of a family's
parameterizations, MIRT loadings on bayesirt's echelon pattern and sign)."""

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import _nuts_families as fams  # noqa: E402
import nuts_numpyro as bench  # noqa: E402


def _args(**kw):
    return SimpleNamespace(**({"seed": 1, "seeds": 3, "data_seeds": 0, "data_seed": None} | kw))


def test_schedule_pairs_seeds_by_default_and_crosses_datasets_with_sampler_seeds():
    assert bench.run_schedule(_args(seeds=2)) == [("1", 1, 1), ("2", 2, 2)]
    runs = bench.run_schedule(_args(seeds=2, data_seeds=3, data_seed=100))
    assert runs == [(f"{d}/{s}", d, s) for d in (100, 101, 102) for s in (1, 2)]


def _row(ess, wall, corr=0.99):
    return {"status": "ok", "min_bulk_ess": ess, "wall_s": wall, "ess_per_wall_s": ess / wall, "cpu_s": wall,
            "min_bulk_ess_by_var": {"theta": ess}, "compile_s": 1.0, "sample_s": wall - 1, "max_rhat": 1.0,
            "divergences": 0, "agreement": {"min_corr": corr}}


def _result(peer_wall_by_dataset, *, datasets=5, seeds=3, corr=0.99):
    """300 x 1,000 complete 2PL runs: bayesirt 100 ESS in 10 s every run, NumPyro 100 ESS in the dataset's
    wall seconds (so its ratio is peer wall / 10)."""
    schedule = bench.run_schedule(_args(seeds=seeds, data_seeds=datasets, data_seed=10))
    runs = {label: {"bayesirt_cold": _row(100, 10.0), "numpyro_reparam": _row(100, peer_wall_by_dataset[d - 10], corr)}
            for label, d, _ in schedule}
    result = {"config": {"models": 300, "items": 1000, "quick": False, "spec": "2pl", "missing": 0.0, "paired": False,
                         "data_seeds": sorted({d for _, d, _ in schedule}), "sampler_seeds": list(range(1, seeds + 1)),
                         "run_seeds": [list(x) for x in schedule]},
              "runs_by_seed": runs}
    result["runs"] = bench.pool(runs)
    result["runs_by_dataset"] = bench.by_dataset(result)
    return result


def test_per_dataset_target_fails_on_one_slow_dataset_while_the_pooled_one_holds():
    result = _result([30.0, 30.0, 30.0, 30.0, 12.0])  # ratios 3, 3, 3, 3, 1.2; pooled 132 / 50 = 2.64
    assert result["runs"]["numpyro_reparam"]["ess_per_wall_s"] == pytest.approx(1500 / (3 * 132))
    assert bench._ratio(result["runs"]["bayesirt_cold"], result["runs"]["numpyro_reparam"]) == pytest.approx(2.64)
    text = "\n".join(bench.target_status(result))
    assert "target >= 2x: **met**" in text
    assert "per dataset >= 1.5x: **NOT met** (smallest 1.20x" in text
    assert "check the peer model" not in text


def test_targets_are_not_judged_below_three_seeds_or_five_datasets_and_bad_agreement_is_flagged():
    text = "\n".join(bench.target_status(_result([30.0] * 4, datasets=4, seeds=2, corr=0.5)))
    assert "per dataset >= 1.5x: not judged (4 datasets x 2 sampler seeds" in text
    assert "**met**" in text  # 8 runs pooled
    assert "runs 0.500, largest difference — posterior sds **r below 0.95: check the peer model**" in text
    assert "not judged (1 runs" in "\n".join(bench.target_status(_result([30.0], datasets=1, seeds=1)))


def test_targets_are_not_judged_where_a_sampler_has_not_converged():
    result = _result([30.0] * 5)
    result["runs"]["bayesirt_cold"]["max_rhat"] = 1.4
    text = "\n".join(bench.target_status(result))
    assert "target >= 2x not judged (max R-hat above 1.1: bayesirt 1.400)" in text and "**met**" not in text
    config = result["config"] | {"chains": 2, "tune": 500, "draws": 500}
    rows = bench.make_rows(result | {"config": config, "command": "c", "date": "d", "machine": "m"})
    assert rows[0]["target_met"] is None and "not judged: max R-hat above 1.1: bayesirt 1.400" in rows[0]["target"]
    result["runs"]["bayesirt_cold"]["max_rhat"] = 1.05
    result["runs"]["numpyro_reparam"]["max_rhat"] = 1.2
    assert "not judged (max R-hat above 1.1: NumPyro 1.200)" in "\n".join(bench.target_status(result))


def test_agreement_skips_constant_elements_sees_a_sign_flip_and_a_shifted_scalar():
    rng = np.random.default_rng(2)
    draws = {"theta": rng.normal([0.1, -1.0, 2.0, 0.5], 0.1, size=(2, 50, 4)),
             "loading": np.stack([rng.normal(1.0, 0.1, (2, 50)), np.zeros((2, 50))], axis=-1),
             "sigma": rng.normal(1.0, 0.1, (2, 50))}
    post = {k: SimpleNamespace(values=v) for k, v in draws.items()}
    summary = fams.posterior_means(post, ("theta", "loading", "sigma"))
    assert np.isnan(summary["loading"]["mean"][1]) and np.isnan(summary["loading"]["sd"][1])  # the zero pattern
    same = fams.agreement(summary, summary)
    assert same["min_corr"] == pytest.approx(1.0) and same["max_z"] == 0.0
    assert same["by_var"]["sigma"] is None and same["by_var"]["loading"] is None  # too few elements for r
    flipped = fams.agreement(summary, summary | {"theta": {"mean": [-x for x in summary["theta"]["mean"]],
                                                           "sd": summary["theta"]["sd"]}})
    assert flipped["by_var"]["theta"] == pytest.approx(-1.0) and flipped["min_corr"] == pytest.approx(-1.0)
    shifted = fams.agreement(summary, summary | {"sigma": {"mean": summary["sigma"]["mean"] + 0.5, "sd": 0.1}})
    assert shifted["max_z_by_var"]["sigma"] == pytest.approx(0.5 / summary["sigma"]["sd"])
    assert shifted["max_z"] > 3


def test_pl_and_hierarchical_parameterizations_map_to_the_same_reported_values():
    rng = np.random.default_rng(0)
    c, d, items, models = 2, 3, 4, 5
    theta, a, b = rng.normal(size=(c, d, models)), np.exp(rng.normal(size=(c, d, items))), rng.normal(size=(c, d, items))
    mean = theta.mean(-1)
    naive = fams._pl_posterior({"theta": theta, "a": a, "d": -a * b}, "naive", None, None)
    reparam = fams._pl_posterior({"theta_mean": mean, "theta_deviation": theta - mean[..., None], "a": a,
                                  "d_centered": -a * b + a * mean[..., None]}, "reparam", None, None)
    hyper = {k: rng.normal(size=(c, d)) for k in fams.HIERARCHY}
    h_naive = fams._hierarchical_posterior({"theta": theta, "a": a, "b": b, **hyper}, "naive", None, None)
    g = np.exp(hyper["discrimination_mu"])[..., None]  # the scale-free coordinates' unit
    h_reparam = fams._hierarchical_posterior(
        {"theta_mean_scaled": g[..., 0] * mean, "theta_deviation_scaled": g * (theta - mean[..., None]),
         "discrimination_relative": a / g, "b_centered_scaled": g * (b - mean[..., None]),
         **{f"{k}_scaled": g[..., 0] * hyper[k] for k in ("difficulty_mu", "difficulty_sigma")},
         **{k: hyper[k] for k in ("discrimination_mu", "discrimination_sigma")}}, "reparam", None, None)
    for one, other in ((naive, reparam), (naive, h_naive), (h_naive, h_reparam)):
        for name in fams._PL_VARIABLES:
            np.testing.assert_allclose(one[name][1], other[name][1], atol=1e-12)
    for name in fams.HIERARCHY:
        np.testing.assert_allclose(h_reparam[name][1], hyper[name], atol=1e-12)


def test_mirt_draws_follow_bayesirts_anchors_and_signs():
    from bayesirt.models.mirt import anchor_items

    responses, extra = fams.FAMILIES["mirt"].simulate(40, 12, 3, 0.2)
    inputs, _ = fams._mirt_inputs(responses, extra)
    np.testing.assert_array_equal(inputs["anchors"], anchor_items(responses, fams.MIRT_DIMS))
    rng = np.random.default_rng(1)
    shape = (2, 3)
    theta = rng.normal(size=(*shape, 40, 2))
    draws = {"loading_free": rng.normal(size=(*shape, inputs["free_rows"].size)),
             "loading_diagonal": rng.normal(size=(*shape, 2)), "theta": theta, "d": rng.normal(size=(*shape, 12))}
    post = fams._mirt_posterior(draws, "naive", responses, extra)
    loading, aligned_theta = post["loading"][1], post["theta"][1]
    anchors = inputs["anchors"]
    assert loading[..., anchors[0], 1].max() == 0.0  # the first anchor loads on dimension 1 only
    assert (loading[..., anchors, [0, 1]] >= 0).all()  # signs aligned as fit aligns them
    eta = lambda lam, th: np.einsum("cdik,cdmk->cdim", lam, th)  # noqa: E731
    raw = np.zeros_like(loading)
    raw[..., inputs["free_rows"], inputs["free_cols"]] = draws["loading_free"]
    raw[..., anchors, [0, 1]] = draws["loading_diagonal"]
    np.testing.assert_allclose(eta(loading, aligned_theta), eta(raw, theta))  # the likelihood is unchanged


def test_every_family_has_peer_code_and_reported_variables():
    for name, fam in fams.FAMILIES.items():
        compile(fam.numpyro_code, name, "exec")
        assert "def naive(" in fam.numpyro_code and "def reparam(" in fam.numpyro_code, name
        assert fam.variables, name
