"""Model weights on the log scale: stacking equals ArviZ's where ArviZ's do not underflow and ArviZ's on
the same elpd shifted per unit where they do (leave-one-model-out elpd of a long benchmark); pseudo-BMA+
equals ArviZ's BB-pseudo-BMA; invariance to each unit's offset."""

import warnings

import arviz as az
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from arviz_stats.utils import ELPDDataLOO

from bayesirt.comparison.loo import compare_table
from bayesirt.comparison.stacking import pseudo_bma_plus_weights, stacking_weights


def _elpd(values: np.ndarray) -> ELPDDataLOO:
    n = values.size
    return ELPDDataLOO(elpd=float(values.sum()), se=float(np.sqrt(n * values.var(ddof=1))), p=1.0, n_samples=1000,
                       n_data_points=n, scale="log", warning=False, good_k=0.7,
                       elpd_i=xr.DataArray(values, dims="model", name="elpd_i"),
                       pareto_k=xr.DataArray(np.zeros(n), dims="model"))


def _three_specs(rng, n, scale, lead):
    """Pointwise elpd of three specs: a common per-unit level (scale) plus spec noise; spec 'c' leads by
    ``lead`` per unit on average, 'b' and 'a' overlap."""
    level = -scale * rng.uniform(0.5, 1.5, n)
    return {"a": level + rng.normal(0, 1.0, n), "b": level + rng.normal(0.1, 1.0, n),
            "c": level + lead + rng.normal(0, 1.0, n)}


def _nested_specs(rng, n, scale, lead):
    """Nested specs as a ladder gives them: 'b' a little better than 'a' on most units, 'c' better than 'b' on
    almost every unit by ``lead`` on average, the gain varying between units."""
    a = -scale * rng.uniform(0.5, 1.5, n)
    b = a + rng.normal(0.1, 0.5, n)
    return {"a": a, "b": b, "c": b + lead * rng.gamma(2.0, 0.5, n) - rng.exponential(0.3, n)}


def test_equals_arviz_where_arviz_does_not_underflow():
    rng = np.random.default_rng(3)
    specs = _three_specs(rng, 400, scale=1.0, lead=0.05)
    table = az.compare({k: _elpd(v) for k, v in specs.items()}, round_to="none")
    ours = stacking_weights(np.column_stack([specs[k] for k in table.index]))
    assert 0.05 < ours.max() < 0.95  # a genuine mixture, not a corner
    np.testing.assert_allclose(ours, table["weight"].values, atol=2e-3)


def test_leaderboard_scale_puts_weight_on_the_leading_spec():
    # 755 models, elpd about -700 per model (a 1,351-item pattern), 'c' ahead by about 3,300 elpd (issue 42's
    # MMLU-Pro figure): exp() underflows in ArviZ's stacking
    rng = np.random.default_rng(5)
    specs = _nested_specs(rng, 755, scale=700.0, lead=4.4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arviz_weights = az.compare({k: _elpd(v) for k, v in specs.items()}, round_to="none")["weight"]
    assert np.allclose(arviz_weights.values, 1 / 3)  # the failure this module exists for
    table = compare_table({k: _elpd(v) for k, v in specs.items()})
    assert table.index[0] == "c" and abs(table["elpd_diff"].iloc[1]) / table["dse"].iloc[1] > 4
    assert table.loc["c", "weight"] >= 0.9
    assert table["weight"].sum() == pytest.approx(1.0)


def test_unit_offsets_and_order_do_not_matter():
    rng = np.random.default_rng(11)
    elpd = np.column_stack(list(_three_specs(rng, 300, scale=1.0, lead=0.02).values()))
    w = stacking_weights(elpd)
    shifted = stacking_weights(elpd - rng.uniform(0, 2000, (300, 1)))
    np.testing.assert_allclose(shifted, w, atol=1e-6)
    np.testing.assert_allclose(stacking_weights(elpd[:, ::-1]), w[::-1], atol=1e-6)


def test_hand_computed_two_spec_case():
    # two units; spec 0 predicts unit 0 with density 1 and unit 1 with 0, spec 1 the reverse, both 0.5 elsewhere:
    # log score w -> log(w + (1-w)/2) + log(w/2 + (1-w)) is maximal at w = 1/2 by symmetry
    elpd = np.log(np.array([[1.0, 0.5], [0.5, 1.0]]))
    np.testing.assert_allclose(stacking_weights(elpd), [0.5, 0.5], atol=1e-8)
    # a spec that is better on every unit takes all the weight
    assert stacking_weights(np.array([[-1.0, -2.0], [-3.0, -5.0]]))[0] > 0.999


def test_refuses_non_finite():
    with pytest.raises(ValueError, match="finite"):
        stacking_weights(np.array([[0.0, -np.inf]]))


def _leaderboard_nested(rng, lead=0.22, n=755):
    """Leave-one-model-out elpd like a 755 x 1,351 comparison of rasch, 2pl and 3pl: about -770 per model,
    the 3pl ahead of the 2pl by ``lead`` per model on average but varying by 1.4 (0.22: about 4 dse)."""
    two = -770 + rng.normal(0, 60, n)
    return {"rasch": two - 10 + rng.normal(0, 8, n), "2pl": two, "3pl": two + lead + rng.normal(0, 1.4, n)}


def _arviz_weights(specs, method):
    """ArviZ's compare weights, on the elpd shifted so each unit's best spec is at 0 (the same weights for
    both methods, and ArviZ's exp() does not underflow), in the order of ``specs``."""
    elpd = np.column_stack(list(specs.values()))
    elpd = elpd - elpd.max(axis=1, keepdims=True)
    table = az.compare({k: _elpd(elpd[:, j]) for j, k in enumerate(specs)}, method=method, round_to="none")
    return table["weight"].loc[list(specs)].values


def test_stacking_equals_arviz_on_the_same_leaderboard_elpd_shifted_per_unit():
    specs = _leaderboard_nested(np.random.default_rng(42))
    ours = stacking_weights(np.column_stack(list(specs.values())))
    arviz = _arviz_weights(specs, "stacking")
    assert 0.2 < ours[1] < 0.8 and 0.2 < ours[2] < 0.8  # 2pl and 3pl share it: a genuine mixture
    np.testing.assert_allclose(ours, arviz, atol=2e-3)


@pytest.mark.parametrize("seed", [42, 7])
def test_pseudo_bma_plus_equals_arviz_bb_pseudo_bma(seed):
    specs = _leaderboard_nested(np.random.default_rng(seed), lead=0.06)  # about 1 dse
    ours = pseudo_bma_plus_weights(np.column_stack(list(specs.values())))
    arviz = _arviz_weights(specs, "bb-pseudo-bma")
    assert 0.02 < ours[2] < 0.98  # not a corner, so Monte Carlo error shows (1,000 replicates each: SD about .01)
    np.testing.assert_allclose(ours, arviz, atol=0.04)
    np.testing.assert_allclose(ours.sum(), 1.0)


def test_pseudo_bma_plus_concentrates_where_stacking_spreads_over_nested_specs():
    rng = np.random.default_rng(1)
    specs = _leaderboard_nested(rng, lead=0.32)  # about 6 dse
    table = compare_table({k: _elpd(v) for k, v in specs.items()})
    assert table.index[0] == "3pl" and abs(table["elpd_diff"].iloc[1]) / table["dse"].iloc[1] > 4
    assert table.loc["3pl", "pseudo_bma_plus_weight"] >= 0.99
    assert table.loc["3pl", "stacking_weight"] < 0.9  # stacking keeps the 2pl in the mixture
    assert (table["weight"] == table["pseudo_bma_plus_weight"]).all()  # the default: compare picks a spec
    chosen = compare_table({k: _elpd(v) for k, v in specs.items()}, weights="stacking")
    assert (chosen["weight"] == chosen["stacking_weight"]).all()
    with pytest.raises(Exception, match="weights"):
        compare_table({k: _elpd(v) for k, v in specs.items()}, weights="bma")


def test_pseudo_bma_plus_ignores_unit_offsets_and_is_seeded():
    rng = np.random.default_rng(11)
    elpd = np.column_stack(list(_three_specs(rng, 300, scale=1.0, lead=0.02).values()))
    w = pseudo_bma_plus_weights(elpd, seed=3)
    np.testing.assert_allclose(pseudo_bma_plus_weights(elpd - rng.uniform(0, 2000, (300, 1)), seed=3), w, atol=1e-9)
    np.testing.assert_array_equal(pseudo_bma_plus_weights(elpd, seed=3), w)
    with pytest.raises(ValueError, match="finite"):
        pseudo_bma_plus_weights(np.array([[0.0, np.nan]]))
