"""Exploratory factor analysis of abilities (bayesirt.structure.factor): minres, fit indices, parallel analysis,
composites, and the data fixtures shared with test_rotation and test_ability_structure.
Oracle: factor_analyzer 0.5.1."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import optimize

from bayesirt.structure.ability_structure import composite_alignment
from bayesirt.errors import BayesIRTError
from bayesirt.structure.factor import (
    correlation_matrix, factor_analysis, fit_indices, parallel_analysis,
)

TRUE_PHI = np.array([[1.0, 0.4], [0.4, 1.0]])
TRUE_LOADINGS = np.array([[.8, 0], [.7, 0], [.6, .1], [.5, 0], [0, .8], [0, .7], [.1, .6], [0, .5]])


def _simulate(loadings: np.ndarray, phi: np.ndarray, n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    scores = rng.multivariate_normal(np.zeros(len(phi)), phi, size=n)
    unique = np.sqrt(1 - np.sum((loadings @ phi) * loadings, axis=1))
    data = scores @ loadings.T + rng.standard_normal((n, len(loadings))) * unique
    return pd.DataFrame(data, columns=[f"b{j}" for j in range(len(loadings))])


@pytest.fixture(scope="module")
def two_factor() -> pd.DataFrame:
    """300 x 8, two correlated factors (phi = 0.4), four indicators each."""
    return _simulate(TRUE_LOADINGS, TRUE_PHI, 300, seed=1)


@pytest.fixture(scope="module")
def three_factor() -> pd.DataFrame:
    """300 x 9, three correlated factors, three indicators each."""
    loadings = np.kron(np.eye(3), np.array([[.8], [.7], [.6]]))
    phi = np.array([[1, .3, .2], [.3, 1, .4], [.2, .4, 1]])
    return _simulate(loadings, phi, 300, seed=2)


@pytest.fixture(scope="module")
def oracle():
    """factor_analyzer with two repairs. (1) It calls sklearn's ``check_array(force_all_finite=...)``,
    renamed ``ensure_all_finite`` in scikit-learn 1.8: the keyword is renamed. (2) Its minres stops at
    L-BFGS-B's default tolerances, about 2e-6 from the optimum in the loadings on these data: the
    wrapper only tightens ``ftol``/``gtol``; its objective and numerical gradient are unchanged."""
    fa = pytest.importorskip("factor_analyzer")
    import sklearn.utils

    def check_array(*args, force_all_finite=None, **kwargs):
        return sklearn.utils.check_array(*args, **kwargs, ensure_all_finite=force_all_finite)

    def tight_minimize(fun, x0, **kwargs):
        kwargs["options"] = {**kwargs.get("options", {}), "ftol": 1e-15, "gtol": 1e-10}
        return optimize.minimize(fun, x0, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        for module in (fa.factor_analyzer, fa.confirmatory_factor_analyzer):
            mp.setattr(module, "check_array", check_array)
        mp.setattr(fa.factor_analyzer, "minimize", tight_minimize)
        yield fa


@pytest.mark.parametrize(("data", "k"), [("two_factor", 1), ("two_factor", 2), ("three_factor", 3)])
def test_minres_matches_factor_analyzer(oracle, request, data, k):
    x = request.getfixturevalue(data)
    ref = oracle.FactorAnalyzer(n_factors=k, rotation=None, method="minres").fit(x.to_numpy())
    ours = factor_analysis(x, k, rotation="none")
    expected = ref.loadings_ * np.sign(ref.loadings_.sum(axis=0))  # it reflects columns only when k > 1
    np.testing.assert_allclose(ours.loadings, expected, atol=1e-6)
    np.testing.assert_allclose(ours.uniquenesses, ref.get_uniquenesses(), atol=1e-6)
    np.testing.assert_allclose(ours.communalities, ref.get_communalities(), atol=1e-6)
    assert ours.converged and not ours.heywood


def test_factor_analysis_oblimin_end_to_end_matches_factor_analyzer(oracle, two_factor):
    ref = oracle.FactorAnalyzer(n_factors=2, rotation="oblimin", method="minres",
                                rotation_kwargs={"tol": 1e-8, "max_iter": 100_000}).fit(two_factor.to_numpy())
    ours = factor_analysis(two_factor, 2)
    np.testing.assert_allclose(ref.loadings_, ours.loadings, atol=1e-6)  # same order and signs (psych's rules)
    assert ours.phi[0, 1] == pytest.approx(0.411, abs=0.01)


def test_fit_indices_match_hand_computation():
    r = np.array([[1.0, .5, .4, .3], [.5, 1.0, .35, .25], [.4, .35, 1.0, .2], [.3, .25, .2, 1.0]])
    lam = np.array([[.75], [.65], [.5], [.4]])
    n, p, k = 120, 4, 1
    model = lam @ lam.T
    np.fill_diagonal(model, 1.0)
    prod = np.linalg.inv(model) @ r
    f = np.trace(prod) - np.log(np.linalg.det(prod)) - p
    dof = ((p - k) ** 2 - (p + k)) / 2
    m = n - 1 - (2 * p + 5) / 6 - 2 * k / 3
    f0 = -np.log(np.linalg.det(r))
    chi2, null_chi2, null_dof = m * f, (n - 1 - (2 * p + 5) / 6) * f0, p * (p - 1) / 2
    got = fit_indices(r, lam, n_obs=n)
    assert (got.dof, got.null_dof) == (dof, null_dof)
    assert got.objective == pytest.approx(f, rel=1e-12)
    assert got.chi2 == pytest.approx(chi2, rel=1e-12)
    assert got.null_chi2 == pytest.approx(null_chi2, rel=1e-12)
    assert got.rmsea == pytest.approx(np.sqrt(max(f / dof - 1 / (n - 1), 0)), rel=1e-12)
    assert got.tli == pytest.approx((f0 / null_dof - f / dof) / (f0 / null_dof - 1 / m), rel=1e-12)
    assert got.cfi == pytest.approx(1 - max(chi2 - dof, 0) / max(null_chi2 - null_dof, chi2 - dof), rel=1e-12)
    assert got.p_value == pytest.approx(float(np.exp(-chi2 / 2)), rel=1e-9)  # chi-square(2) tail


def test_fit_indices_separate_correct_and_misspecified(two_factor):
    one, two = factor_analysis(two_factor, 1), factor_analysis(two_factor, 2)
    assert two.fit.rmsea < 0.03 and two.fit.cfi > 0.99 and two.fit.p_value > 0.05
    assert one.fit.rmsea > 0.1 and one.fit.cfi < 0.85 and one.fit.p_value < 1e-10
    assert two.variance_explained > one.variance_explained
    # the fit depends on L Phi L' only: the unrotated loadings give the same indices
    assert fit_indices(correlation_matrix(two_factor)[0], two.unrotated, n_obs=300) == two.fit
    r = correlation_matrix(two_factor)[0]
    assert factor_analysis(r, 2, correlation=True, n_obs=300).fit == two.fit
    # three factors of two-factor data: a Heywood case (a uniqueness at its bound) is flagged
    assert factor_analysis(two_factor, 3).heywood


def test_parallel_analysis(two_factor):
    pa = parallel_analysis(two_factor, n_iter=200, seed=3)
    assert (pa.n_factors, pa.n_components) == (2, 2)
    assert pa.observed_fa[1] > pa.reference_fa[1] and pa.observed_fa[2] <= pa.reference_fa[2]
    assert parallel_analysis(two_factor, n_iter=30, communalities="minres", seed=3).n_factors == 2
    noise = pd.DataFrame(np.random.default_rng(9).standard_normal((300, 8)))
    assert parallel_analysis(noise, n_iter=200, seed=3).n_factors <= 1
    state = np.random.get_state()[1].copy()
    again = parallel_analysis(two_factor, n_iter=200, seed=3)
    np.testing.assert_array_equal(again.reference_fa, pa.reference_fa)
    np.testing.assert_array_equal(again.reference_pc, pa.reference_pc)
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # the global RNG is untouched
    assert not np.array_equal(parallel_analysis(two_factor, n_iter=200, seed=4).reference_fa, pa.reference_fa)


def test_composite_alignment_reproduces_safe_refusal_composite():
    """SAFE App. D: HarmBench, SORRY-Bench (rho .89) vs OR-Bench-Hard (-.77, -.67): -0.18 raw, 0.78 flipped."""
    names = ["HarmBench", "SORRY", "ORB"]
    r = pd.DataFrame([[1, .89, -.77], [.89, 1, -.67], [-.77, -.67, 1]], index=names, columns=names)
    raw = composite_alignment(r, names)
    assert raw.mean_correlation == pytest.approx((.89 - .77 - .67) / 3) and raw.flip_effects.empty
    assert raw.member_agreement["ORB"] == pytest.approx(-.72)  # the member pointing the other way
    flipped = composite_alignment(r, names, flips=["ORB"])
    assert flipped.mean_correlation == pytest.approx((.89 + .77 + .67) / 3)
    assert flipped.unflipped_mean_correlation == pytest.approx(raw.mean_correlation)
    row = flipped.flip_effects.set_index("member").loc["ORB"]
    assert row["gain"] == pytest.approx(2 * (.77 + .67) / 3)
    assert (flipped.member_agreement > 0).all()


def test_pairwise_missing_uses_pairwise_complete_correlations(two_factor):
    x = two_factor.copy()
    x.iloc[:20, 0] = np.nan
    x.iloc[10:40, 3] = np.nan
    corr, n_obs = correlation_matrix(x)
    assert n_obs == 300 - 40  # columns 0 and 3 share rows 40..299
    mask = x["b0"].notna() & x["b3"].notna()
    assert corr.loc["b0", "b3"] == pytest.approx(np.corrcoef(x.loc[mask, "b0"], x.loc[mask, "b3"])[0, 1])
    assert factor_analysis(x, 2).fit.n_obs == 260


def _err(match):
    return pytest.raises(BayesIRTError, match=match)


def test_error_messages(two_factor):
    x = two_factor
    with _err("at least 3 benchmark columns"):
        correlation_matrix(x.iloc[:, :2])
    with _err(r"only 6 models observed \(pairwise\) for 8 benchmarks.*at least 9"):
        correlation_matrix(x.iloc[:6])
    with _err(r"column\(s\) \['b2'\] are constant"):
        correlation_matrix(x.assign(b2=1.0))
    with _err("not positive definite.*collinear"):
        correlation_matrix(x.assign(b7=x["b0"] + x["b1"]))
    y = x.iloc[:, :3].copy()
    y.iloc[:100, 0], y.iloc[100:, 1] = np.nan, np.nan  # b0 and b1 share no rows
    with _err(r"only 0 models observed"):
        correlation_matrix(y)
    z = x.iloc[:, :3].copy()
    z.iloc[:50, 0] = np.nan
    z.iloc[50:, 1] = 1.0  # b1 varies only where b0 is missing
    with _err(r"correlation of 'b0' and 'b1' is undefined"):
        correlation_matrix(z)
    with _err("non-numeric cells"):
        correlation_matrix(x.astype(object).assign(b0="a"))
    with _err(r"The 'n_factors' parameter of factor_analysis must be at most 1 for 4 benchmarks \(3 factors leave -3 degrees of freedom; or add benchmarks\); got 3."):
        factor_analysis(x.iloc[:, :4], 3)
    with _err("The 'n_factors' parameter of factor_analysis must be a positive integer"):
        factor_analysis(x, 0)
    with _err("'rotation' parameter of factor_analysis must be one of"):
        factor_analysis(x, 2, rotation="promax")
    r = correlation_matrix(x)[0]
    with _err("needs n_obs"):
        factor_analysis(r, 2, correlation=True)
    with _err("The 'n_obs' parameter of fit_indices must be an integer >= 9"):
        fit_indices(r, np.ones((8, 1)) * 0.5, n_obs=5)
    with _err(r"loadings have shape \(7, 1\).*8 variables"):
        fit_indices(r, np.ones((7, 1)), n_obs=300)
    with _err("unit diagonal"):
        factor_analysis(r * 2, 1, correlation=True, n_obs=300)
    with _err("'communalities' parameter of parallel_analysis"):
        parallel_analysis(x, communalities="pca")
    with _err("The 'n_iter' parameter of parallel_analysis must be a positive integer"):
        parallel_analysis(x, n_iter=0)
    with _err(r"unknown: \['X'\]"):
        composite_alignment(r, ["b0", "X"])
    with _err(r"The 'flips' parameter of composite_alignment must be composite members.*not members: \['b2'\]"):
        composite_alignment(r, ["b0", "b1"], flips=["b2"])
