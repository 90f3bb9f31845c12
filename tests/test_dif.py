"""Spectral working model, K selection and residual family DIF (NT C.2-C.4): hand-checkable
identities, the converged Newton scheme against a SciPy optimizer of the same objective, and the
NT schedule's own limits."""

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit

from bayesirt.audit.adjustment.spectral import select_dimension, spectral_offsets, working_responses
from bayesirt.audit.engine.dif import fit_family_dif
from bayesirt.errors import DataError


def _data(n_items=12, n_models=90, n_families=3, seed=0, missing=0.0):
    rng = np.random.default_rng(seed)
    family = np.arange(n_models) % n_families
    theta = rng.normal(size=n_models)
    delta = rng.normal(0, 0.7, size=(n_items, n_families))
    delta -= delta.mean(axis=1, keepdims=True)
    offsets = np.clip(np.outer(rng.uniform(0.5, 1.5, n_items), theta), -6, 6)
    y = (rng.random((n_items, n_models)) < expit(rng.normal(size=(n_items, 1)) + offsets + delta[:, family]))
    observed = rng.random(y.shape) >= missing
    return y.astype(np.int8), observed, offsets, family


def _penalized_optimum(y, observed, offsets, family, n_families, penalty=1.0):
    """SciPy L-BFGS on the unconstrained penalized deviance of NT eq. 3 (the oracle)."""
    n_items = y.shape[0]
    w = observed.astype(float)

    def objective(par):
        b, delta = par[:n_items], par[n_items:].reshape(n_items, n_families)
        xi = b[:, None] + offsets + delta[:, family]
        p = expit(xi)
        value = (w * (np.logaddexp(0, xi) - y * xi)).sum() + penalty / 2 * (delta**2).sum()
        r = w * (p - y)
        g_delta = np.stack([r[:, family == f].sum(axis=1) for f in range(n_families)], axis=1) + penalty * delta
        return value, np.r_[r.sum(axis=1), g_delta.ravel()]

    res = minimize(objective, np.zeros(n_items * (1 + n_families)), jac=True, method="L-BFGS-B",
                   options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 10_000})
    return res.x[:n_items], res.x[n_items:].reshape(n_items, n_families)


@pytest.mark.parametrize("missing", [0.0, 0.2])
def test_newton_run_to_convergence_reaches_the_penalized_optimum(missing):
    y, observed, offsets, family = _data(missing=missing)
    fit = fit_family_dif(y, observed, offsets, family, 3, cycles=500, tolerance=1e-12)
    b, delta = _penalized_optimum(y, observed, offsets, family, 3)
    assert fit.last_change < 1e-10
    np.testing.assert_allclose(fit.family_effect, delta, atol=1e-6)
    np.testing.assert_allclose(fit.easiness, b, atol=1e-6)
    # the ridge optimum is centred by itself, so the constraint costs nothing there
    np.testing.assert_allclose(delta.sum(axis=1), 0, atol=1e-6)


def _schedule_by_item(y, observed, offsets, family, n_families, cycles=5, iterations=30, tol=1e-8):
    """NT C.4 written literally, one item and one family at a time (the oracle of the vectorized fit)."""
    n_items = y.shape[0]
    b, delta = np.zeros(n_items), np.zeros((n_items, n_families))
    for i in range(n_items):
        obs = observed[i]
        yi, oi, fi = y[i, obs].astype(float), offsets[i, obs], family[obs]
        b[i] = np.log(np.clip(yi.mean(), 1e-4, 1 - 1e-4) / (1 - np.clip(yi.mean(), 1e-4, 1 - 1e-4))) - oi.mean()
        for _ in range(cycles):
            for _ in range(iterations):  # eq. 28-30
                p = expit(b[i] + oi + delta[i, fi])
                step = np.clip((yi - p).sum() / ((p * (1 - p)).sum() + 1e-9), -2, 2)
                b[i] += step
                if abs(step) < tol:
                    break
            before = delta[i].copy()
            for f in range(n_families):  # eq. 31-33
                member = fi == f
                for _ in range(iterations):
                    p = expit(b[i] + oi[member] + delta[i, f])
                    g = (yi[member] - p).sum() - delta[i, f]
                    step = np.clip(g / ((p * (1 - p)).sum() + 1.0), -2, 2)
                    delta[i, f] += step
                    if abs(step) < tol:
                        break
            mean = delta[i].mean()  # eq. 34
            delta[i] -= mean
            b[i] += mean
            if np.abs(delta[i] - before).max() < tol:
                break
    return b, delta


@pytest.mark.parametrize("missing", [0.0, 0.25])
def test_vectorized_schedule_matches_the_literal_per_item_schedule(missing):
    y, observed, offsets, family = _data(n_items=15, seed=6, missing=missing)
    fit = fit_family_dif(y, observed, offsets, family, 3)
    b, delta = _schedule_by_item(y, observed, offsets, family, 3)
    np.testing.assert_allclose(fit.family_effect, delta, atol=1e-6)
    np.testing.assert_allclose(fit.easiness, b, atol=1e-6)


def test_saturated_offsets_stay_finite():
    """Offsets far beyond the sigmoid's range (+-1,000: exp overflows) act as +-50 does: the cell
    is certain either way (the fit forms exp(-offset) once per Newton solve, clipped)."""
    y, observed, offsets, family = _data(n_items=10, seed=3)
    far, near = offsets.copy(), offsets.copy()
    far[0, :5], near[0, :5] = 1000.0, 50.0
    far[1, :5], near[1, :5] = -1000.0, -50.0
    y[0, :5], y[1, :5] = 1, 0
    a, b = fit_family_dif(y, observed, far, family, 3), fit_family_dif(y, observed, near, family, 3)
    assert np.isfinite(a.easiness).all() and np.isfinite(a.family_effect).all()
    np.testing.assert_allclose(a.easiness, b.easiness, atol=1e-10)
    np.testing.assert_allclose(a.family_effect, b.family_effect, atol=1e-10)


def test_nt_schedule_stops_after_five_cycles_centred_and_reports_its_distance():
    y, observed, offsets, family = _data(seed=2)
    fit = fit_family_dif(y, observed, offsets, family, 3)
    assert fit.cycles <= 5
    np.testing.assert_allclose(fit.family_effect.sum(axis=1), 0, atol=1e-12)
    np.testing.assert_allclose(fit.dif_range, fit.family_effect.max(axis=1) - fit.family_effect.min(axis=1))
    converged = fit_family_dif(y, observed, offsets, family, 3, cycles=500, tolerance=1e-12)
    assert np.abs(fit.family_effect - converged.family_effect).max() < 0.05  # close, not identical


def test_missing_cells_are_ignored_not_imputed():
    y, observed, offsets, family = _data(seed=3, missing=0.3)
    flipped = np.where(observed, y, 1 - y)  # changing unobserved values changes nothing
    a = fit_family_dif(y, observed, offsets, family, 3)
    b = fit_family_dif(flipped, observed, offsets, family, 3)
    np.testing.assert_array_equal(a.family_effect, b.family_effect)


def test_working_responses_follow_eq_13_14_by_hand():
    y = np.array([[1, 1, 0, 0], [1, 0, 0, 0]])
    observed = np.array([[True, True, True, True], [True, True, True, False]])
    x, p, s = working_responses(y, observed)
    assert p[0] == pytest.approx(2.5 / 5) and p[1] == pytest.approx(1.5 / 4)
    assert s[1] == pytest.approx(np.sqrt(1.5 / 4 * 2.5 / 4))
    assert x[0, 0] == pytest.approx(0.5 / 0.5) and x[1, 3] == 0.0


def test_offsets_reproduce_an_exactly_low_rank_working_matrix():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 2)) @ rng.normal(size=(2, 50)) * 0.3
    s = rng.uniform(0.3, 0.5, size=30)
    offsets, rank = spectral_offsets(x, s, np.arange(30), 2, seed=0)
    assert rank == 2
    np.testing.assert_allclose(offsets * s[:, None], x, atol=1e-10)
    # fitted on half the rows, the other rows are recovered by projection
    offsets_half, _ = spectral_offsets(x, s, np.arange(0, 30, 2), 2, seed=0)
    np.testing.assert_allclose(offsets_half * s[:, None], x, atol=1e-10)
    _, capped = spectral_offsets(x, s, np.arange(3), 8, seed=0)
    assert capped == 3  # K above the fitting rows is lowered to what they carry


def _one_dimensional(n_items=60, n_models=240, seed=0):
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    y = rng.random((n_items, n_models)) < expit(rng.normal(size=(n_items, 1)) + 1.5 * theta)
    owner = np.array([f"o{m // 3}" for m in range(n_models)])
    return y.astype(np.int8), np.ones(y.shape, bool), owner, np.array([f"g{i % 3}" for i in range(n_items)])


def test_one_se_rule_picks_a_small_k_on_unidimensional_data_and_holds_owners_out_whole():
    y, observed, owner, group = _one_dimensional()
    sel = select_dimension(y, observed, owner, group, seed=1)
    assert sel.k <= 2 and sel.k <= sel.k_best
    table = sel.table
    assert list(table["k"]) == [1, 2, 4, 8, 16, 32]  # feasible: K <= min(60 items, 180 training models)
    best = table["mean_loss"].idxmin()
    chosen = table.index[table["selected"]][0]
    assert table.at[chosen, "mean_loss"] <= table.at[best, "mean_loss"] + table.at[best, "se"]
    assert (table.loc[: chosen - 1, "mean_loss"] > table.at[best, "mean_loss"] + table.at[best, "se"]).all()
    assert len(sel.validation_owners) == round(0.25 * 80)
    assert select_dimension(y, observed, owner, group, seed=1).table.equals(table)  # seeded


def test_dimension_selection_errors_name_the_fix():
    y, observed, owner, group = _one_dimensional(n_models=30)
    with pytest.raises(DataError, match="at least 2"):
        select_dimension(y, observed, np.full(30, "solo"), group, seed=0)
    with pytest.raises(DataError, match="single item"):
        select_dimension(y, observed, owner, np.array([f"g{i}" for i in range(60)]), seed=0)


@pytest.mark.parametrize("weighted", [False, True])
def test_compiled_kernels_match_their_numpy_expressions(weighted):
    """dif_kernel's two passes against the NumPy they replaced: E = exp(-clip(o + shift[:, family]))
    and the per-family sums of w q and w q^2, q = 1 / (E u + 1) (missing cells and model weights in w)."""
    import numba

    from bayesirt.audit.engine.dif_kernel import NO_WEIGHTS, family_moments, negative_exp

    rng = np.random.default_rng(11)
    n_items, n_models, n_families = 37, 53, 4
    offsets = rng.normal(0, 3, (n_items, n_models))
    offsets[0, :3] = [800.0, -800.0, 0.0]  # past the clipping at +-700
    family = rng.integers(0, n_families, n_models)
    shift = rng.normal(0, 1, (n_items, n_families))
    e_base = np.empty(offsets.shape)
    negative_exp(offsets, shift, family, e_base)
    np.testing.assert_allclose(e_base, np.exp(np.clip(-(offsets + shift[:, family]), -700, 700)), rtol=1e-15)
    factor = np.exp(-rng.normal(0, 1, (n_items, n_families)))
    weight = (rng.random(offsets.shape) > 0.3) * rng.gamma(1.0, 1.0, n_models) if weighted else NO_WEIGHTS
    q = 1.0 / (e_base * factor[:, family] + 1.0)
    p = q * weight if weighted else q
    onehot = np.eye(n_families)[family]
    mass, curvature = family_moments(e_base, factor, family, weight)
    np.testing.assert_allclose(mass, p @ onehot, rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(curvature, (p * q) @ onehot, rtol=1e-13, atol=1e-300)
    # one item's sums run in one thread in model order: the same bits whatever the thread count
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        single = family_moments(e_base, factor, family, weight)
    finally:
        numba.set_num_threads(before)
    assert all(np.array_equal(a, b) for a, b in zip(single, (mass, curvature)))
