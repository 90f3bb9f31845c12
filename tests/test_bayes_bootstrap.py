"""The Bayesian bootstrap of an audit half (``bayes_method="bootstrap"``, issue 19 item 2): model
weights are frequency weights in the spectral offsets and the DIF fit (integer weights reproduce
the fit on duplicated models), the owner-clustered Dirichlet weights, and the audit end to end."""

import json

import numpy as np
import pytest

from bayesirt.audit import AuditConfig, run_audit
from bayesirt.audit.adjustment.spectral import spectral_offsets, working_responses
from bayesirt.audit.bayes.bootstrap import bootstrap_draws, owner_dirichlet_weights
from bayesirt.audit.engine.anchors import purification_rounds, purify
from bayesirt.audit.engine.dif import fit_family_dif
from bayesirt.cli.main import main
from bayesirt.data import simulate_dif_benchmark
from bayesirt.errors import ConfigError, DataError


@pytest.fixture(scope="module")
def half():
    """A small audit half with missing cells: responses, mask, families, item groups, owners."""
    ds, _ = simulate_dif_benchmark(n_owners=20, n_items=60, missing=0.1, seed=5)
    y = ds["responses"].values
    observed = y >= 0
    family = np.unique(ds["family"].values, return_inverse=True)[1]
    return (np.where(observed, y, 0).astype(np.int8), observed, family, ds["item_group"].values.astype(str),
            ds["owner"].values.astype(str))


def _duplicated(counts, *arrays):
    """Every model m repeated counts[m] times (columns of 2-D arrays, entries of 1-D ones)."""
    index = np.repeat(np.arange(counts.size), counts)
    return [a[:, index] if a.ndim == 2 else a[index] for a in arrays], index


def test_integer_weights_give_the_dif_fit_of_duplicated_models(half):
    y, observed, family, _, _ = half
    rng = np.random.default_rng(0)
    counts = rng.integers(1, 4, size=y.shape[1])
    offsets = rng.normal(0, 0.5, size=y.shape)
    weighted = fit_family_dif(y, observed, offsets, family, 3, weights=counts.astype(float))
    (y2, obs2, off2, fam2), _ = _duplicated(counts, y, observed, offsets, family)
    repeated = fit_family_dif(y2, obs2, off2, fam2, 3)
    np.testing.assert_allclose(weighted.family_effect, repeated.family_effect, atol=1e-10)
    np.testing.assert_allclose(weighted.easiness, repeated.easiness, atol=1e-10)
    unit = fit_family_dif(y, observed, offsets, family, 3, weights=np.ones(y.shape[1]))
    plain = fit_family_dif(y, observed, offsets, family, 3)
    np.testing.assert_allclose(unit.family_effect, plain.family_effect, atol=1e-12)
    # and the weights matter: a different weighting moves the estimate
    assert np.abs(weighted.family_effect - plain.family_effect).max() > 1e-3


def test_integer_weights_give_the_spectral_offsets_of_duplicated_models(half):
    y, observed, _, _, _ = half
    counts = np.random.default_rng(1).integers(1, 4, size=y.shape[1])
    x, _, s = working_responses(y, observed, counts.astype(float))
    rows = np.arange(40)
    weighted, rank = spectral_offsets(x, s, rows, 3, seed=0, weights=counts.astype(float))
    (y2, obs2), index = _duplicated(counts, y, observed)
    x2, _, s2 = working_responses(y2, obs2)
    np.testing.assert_allclose(s, s2, atol=1e-12)
    np.testing.assert_allclose(x[:, index], x2, atol=1e-12)
    repeated, rank2 = spectral_offsets(x2, s2, rows, 3, seed=0)
    first = np.unique(index, return_index=True)[1]  # the first copy of every model
    assert rank == rank2 == 3
    np.testing.assert_allclose(weighted, repeated[:, first], atol=1e-6)


def test_owner_dirichlet_weights():
    owner = np.array(["a", "a", "b", "c", "c", "c"])
    w = owner_dirichlet_weights(owner, 500, seed=3)
    assert w.shape == (500, 6) and np.all(w > 0)
    np.testing.assert_allclose(w.mean(axis=1), 1.0)
    assert np.all(w[:, 0] == w[:, 1]) and np.all(w[:, 3] == w[:, 5])  # one weight per owner
    np.testing.assert_array_equal(owner_dirichlet_weights(owner, 10, seed=3), w[:10])  # prefix-stable
    # one model's weight per owner, normalized, is Dirichlet(1, 1, 1): mean 1/3, variance 1/18 each
    omega = w[:, [0, 2, 3]] / w[:, [0, 2, 3]].sum(axis=1, keepdims=True)
    np.testing.assert_allclose(omega.mean(axis=0), 1 / 3, atol=0.04)
    np.testing.assert_allclose(omega.var(axis=0), 1 / 18, atol=0.015)
    with pytest.raises(DataError, match="owner"):
        owner_dirichlet_weights(np.array([]), 5, seed=0)


@pytest.mark.slow
def test_bootstrap_draws_refit_the_purification(half):
    y, observed, family, item_group, owner = half
    delta, b = bootstrap_draws(y, observed, family, 3, item_group, 2, owner, draws=6, seed=4, svd_seed=9)
    assert delta.shape == (6, y.shape[0], 3) and b.shape == (6, y.shape[0])
    np.testing.assert_allclose(delta.sum(axis=2), 0, atol=1e-10)  # centred within item, as the DIF fit is
    assert np.ptp(delta, axis=0).max() > 0.01  # the draws differ
    again = bootstrap_draws(y, observed, family, 3, item_group, 2, owner, draws=6, seed=4, svd_seed=9)
    np.testing.assert_array_equal(again[0], delta)
    # draw 0 is the purification of the half under draw 0's weights
    weights = owner_dirichlet_weights(owner, 1, seed=4)[0]
    *_, fit, _ = purification_rounds(y, observed, family, 3, item_group, 2, seed=9, weights=weights)
    np.testing.assert_allclose(fit.family_effect, delta[0], atol=1e-12)
    # unit weights reproduce the deterministic purification's selection fit
    *_, unit, _ = purification_rounds(y, observed, family, 3, item_group, 2, seed=9, weights=np.ones(y.shape[1]))
    np.testing.assert_allclose(unit.family_effect, purify(y, observed, family, 3, item_group, 2, seed=9)
                               .selection_fit.family_effect, atol=1e-8)
    with pytest.raises(ConfigError, match="draws"):
        bootstrap_draws(y, observed, family, 3, item_group, 2, owner, draws=0)
    with pytest.raises(DataError, match="spectral adjustment"):
        purification_rounds(y, observed, family, 3, item_group, 2, adjustment="direct-mirt", weights=weights)


@pytest.mark.slow
def test_audit_with_the_bootstrap_layer(tmp_path):
    ds, _ = simulate_dif_benchmark(n_owners=40, n_items=120, seed=2)
    path = tmp_path / "bench.nc"
    ds.to_netcdf(path)
    out = tmp_path / "audit"
    code = main(["audit", str(path), "--out", str(out), "--quick", "--controls", "19", "--composition-bootstrap", "0",
                 "--bayes", "--bayes-method", "bootstrap", "--bayes-draws", "12", "--bayes-controls", "5",
                 "--bayes-ability-spec", "none", "--workers", "1", "--no-progress"])
    assert code == 0
    bayes = json.loads((out / "summary.json").read_text())["bayes"]
    assert bayes["method"] == "bootstrap" and "bootstrap" in bayes["offsets"] and bayes["draws"] == 12
    lo, mid, hi = bayes["draw_p_value_q05_q50_q95"]
    assert 0 < lo <= mid <= hi <= 1 and 0 <= bayes["share_draws_p_le_05"] <= 1 and "prob_exceeds_random" not in bayes
    assert bayes["newton_capped_draws"] == [0, 0]
    report = (out / "report.md").read_text()
    assert "Owner-clustered Bayesian bootstrap" in report and "Newton cycles" not in report
    result = run_audit(ds, AuditConfig(quick=True, controls=19, composition_bootstrap=0, owner_bootstrap=0, bayes=True,
                                       bayes_method="bootstrap", bayes_draws=12, bayes_controls=5,
                                       bayes_ability_spec=None), progress=False)
    assert result.summary["bayes"]["draw_p_value_q05_q50_q95"] == bayes["draw_p_value_q05_q50_q95"]  # reproducible
