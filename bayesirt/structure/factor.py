"""Exploratory factor analysis of abilities (SAFE "Latent Ability Inference" and App. D).

Minimum-residual (ULS) exploratory factor analysis of a (models x benchmarks) ability matrix, fit
indices (chi-square, RMSEA, CFI, TLI) and Horn's parallel analysis.
Rotations and loading alignment live in :mod:`bayesirt.models.rotation`; the two-stage analysis of
fitted abilities (per-benchmark 2PL, then factors, also per posterior draw) in
:mod:`bayesirt.structure.ability_structure`.

Conventions follow R's psych ``fa``/``fa.parallel`` and GPArotation, so numbers can be checked
against R: minres minimises the residual of the correlation matrix over the uniquenesses (bounded
to [0.005, 1], started at 1 - SMC; the same optimum as psych's off-diagonal criterion); Kaiser
normalisation for varimax only; a solution's factors are reflected so
that each loading column sums to a positive number and ordered by their sums of squared loadings.
Missing cells use pairwise-complete Pearson correlations (R's ``use="pairwise"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import numpy as np
import pandas as pd
from scipy import optimize, stats

from bayesirt.errors import ConfigError, DataError
from bayesirt.utils.parallel import blas_threads
from bayesirt.models.rotation import ROTATIONS, reflect, rotate_one
from bayesirt.utils.validation import check_choice, check_int, check_probability, parameter_error

__all__ = ["PSI_BOUNDS", "FitIndices", "FactorSolution", "improper_variables", "ParallelAnalysis",
           "correlation_matrix", "smc", "minres", "fit_indices", "factor_analysis", "parallel_analysis",
           "check_n_factors", "check_positive_definite", "factor_solution"]

PSI_BOUNDS = (0.005, 1.0)  # psych::fa and factor_analyzer bound the uniquenesses to this interval
_PD_TOL = 1e-10


def _fail(message: str) -> NoReturn:
    raise DataError(message)


def _as_frame(data) -> pd.DataFrame:
    frame = data.copy() if isinstance(data, pd.DataFrame) else pd.DataFrame(np.asarray(data, dtype=float))
    if frame.ndim != 2 or frame.shape[1] < 3:
        _fail(f"factor analysis needs a (models x benchmarks) matrix with at least 3 benchmark columns; got shape "
              f"{frame.shape}; add benchmarks")
    try:
        frame = frame.astype(float)
    except (TypeError, ValueError):
        _fail("the ability matrix has non-numeric cells; pass numbers (NaN for missing)")
    frame.columns = [str(c) for c in frame.columns]
    return frame


def correlation_matrix(data) -> tuple[pd.DataFrame, int]:
    """Pairwise-complete Pearson correlations of the columns, validated for factor analysis.

    Parameters
    ----------
    data : pandas.DataFrame or array-like, shape (models, benchmarks)
        NaN marks a missing cell; each pair of columns uses the rows where both are observed.

    Returns
    -------
    correlation : pandas.DataFrame
        Labelled by the column names (``"0".."p-1"`` for an array).
    n_obs : int
        The smallest number of pairwise-complete rows: the conservative sample size for the fit
        indices (the row count when nothing is missing).

    Raises
    ------
    DataError
        Fewer than 3 columns, fewer rows than columns + 1, a constant column, a pair sharing fewer
        than 3 rows, or a correlation matrix that is not positive definite.
    """
    frame = _as_frame(data)
    observed = frame.notna().to_numpy(dtype=float)
    counts = observed.T @ observed
    n_obs = int(counts.min())
    p = frame.shape[1]
    if n_obs < p + 1:
        _fail(f"only {n_obs} models observed (pairwise) for {p} benchmarks; factor analysis needs at least "
              f"{p + 1} (more models than benchmarks): add models or drop benchmarks")
    constant = [c for c in frame.columns if frame[c].nunique(dropna=True) < 2]
    if constant:
        _fail(f"benchmark column(s) {constant} are constant; drop them (a constant ability has no correlation)")
    corr = frame.corr(method="pearson", min_periods=3)
    if corr.isna().to_numpy().any():
        i, j = np.argwhere(corr.isna().to_numpy())[0]
        _fail(f"the correlation of {corr.index[i]!r} and {corr.columns[j]!r} is undefined (no variation among "
              "their shared models); drop one of them or use models observed on both")
    check_positive_definite(corr.to_numpy())
    return corr, n_obs


def check_positive_definite(corr: np.ndarray) -> None:
    smallest = float(np.linalg.eigvalsh(corr)[0])
    if smallest <= _PD_TOL:
        _fail(f"the correlation matrix is not positive definite (smallest eigenvalue {smallest:.3g}); use models "
              "observed on every benchmark or drop a redundant (collinear) benchmark")


def _as_correlation(corr) -> np.ndarray:
    r = np.array(corr, dtype=float)
    if r.ndim != 2 or r.shape[0] != r.shape[1] or r.shape[0] < 3:
        _fail(f"a correlation matrix must be square with at least 3 rows; got shape {r.shape}; pass a p x p matrix")
    if not (np.isfinite(r).all() and np.allclose(r, r.T, atol=1e-8) and np.allclose(np.diag(r), 1, atol=1e-8)):
        _fail("the correlation matrix must be finite and symmetric with unit diagonal; convert a covariance "
              "matrix with cov / outer(sd, sd)")
    check_positive_definite(r)
    return (r + r.T) / 2


def smc(corr) -> np.ndarray:
    """Squared multiple correlations ``1 - 1 / diag(R^-1)`` (the initial communalities)."""
    r = np.asarray(corr, dtype=float)
    return 1.0 - 1.0 / np.diagonal(np.linalg.inv(r), axis1=-2, axis2=-1)


def _dof(p: int, k: int) -> int:
    return ((p - k) ** 2 - (p + k)) // 2


def check_n_factors(p: int, k) -> int:
    check_int(k, name="n_factors", caller="factor_analysis", low=1)
    if _dof(p, int(k)) < 0:
        top = max((j for j in range(1, p) if _dof(p, j) >= 0), default=0)
        raise parameter_error("n_factors", "factor_analysis", f"at most {top} for {p} benchmarks ({k} factors leave "
                              f"{_dof(p, int(k))} degrees of freedom; or add benchmarks)", k)
    return int(k)


def _top_loadings(s: np.ndarray, k: int) -> np.ndarray:
    values, vectors = np.linalg.eigh(s)
    return vectors[:, ::-1][:, :k] * np.sqrt(np.maximum(values[::-1][:k], 0.0))


def _minres(r: np.ndarray, k: int) -> tuple[np.ndarray, bool]:
    def objective(psi):
        s = r - np.diag(psi)
        load = _top_loadings(s, k)
        residual = s - load @ load.T
        return 0.5 * float(np.sum(residual ** 2)), -np.diag(residual).copy()

    start = np.clip(1.0 - smc(r), *PSI_BOUNDS)
    res = optimize.minimize(objective, start, jac=True, method="L-BFGS-B", bounds=[PSI_BOUNDS] * r.shape[0],
                            options={"maxiter": 10_000, "ftol": 1e-15, "gtol": 1e-10})
    loadings = _top_loadings(r - np.diag(res.x), k)
    return loadings * reflect(loadings), bool(res.success)


def minres(corr, n_factors: int) -> tuple[np.ndarray, bool]:
    """Unrotated minimum-residual (ULS) loadings of a correlation matrix.

    Minimises ``f(psi) = ||R - diag(psi) - L L'||^2 / 2`` over the uniquenesses ``psi`` in
    :data:`PSI_BOUNDS` by L-BFGS-B with the exact gradient ``diag(L L' + diag(psi) - R)`` (psych's
    ``FAgr.minres``), where ``L`` holds the leading ``n_factors`` eigenvectors of ``R - diag(psi)``
    scaled by the root of their (non-negative) eigenvalues. At an interior optimum the diagonal
    residual is zero, so this is also psych's minres (off-diagonal) optimum. Start ``psi = 1 - SMC``;
    stops when the largest projected gradient component is below 1e-10 (``ftol`` 1e-15 so that the
    gradient test decides; factor_analyzer 0.5.1's default tolerances stop about 2e-6 short in the
    loadings).

    Parameters
    ----------
    corr : array-like, shape (p, p)
        Positive-definite correlation matrix.
    n_factors : int
        Number of factors (the degrees of freedom must stay >= 0).

    Returns
    -------
    loadings : numpy.ndarray, shape (p, n_factors)
        Columns reflected to positive sums.
    converged : bool
    """
    r = _as_correlation(corr)
    k = check_n_factors(r.shape[0], n_factors)
    with blas_threads(1):
        return _minres(r, k)


@dataclass(frozen=True)
class FitIndices:
    """Fit of a factor solution to a correlation matrix (psych ``fa.stats`` conventions).

    With ``p`` variables, ``k`` factors, ``n = n_obs`` and the model ``S = L Phi L'`` with its
    diagonal set to 1 (i.e. uniquenesses ``1 - h2``):

    - ``objective``: the ML discrepancy ``F = tr(S^-1 R) - log det(S^-1 R) - p`` at the fitted solution;
    - ``chi2 = max(0, (n - 1 - (2p + 5)/6 - 2k/3) F)`` (Bartlett-corrected) on
      ``dof = ((p - k)^2 - (p + k)) / 2``, ``p_value`` its upper tail;
    - null (independence) model: ``F0 = -log det R``, ``null_chi2 = (n - 1 - (2p + 5)/6) F0`` on
      ``null_dof = p (p - 1) / 2``;
    - ``rmsea = sqrt(max(F / dof - 1/(n - 1), 0))`` (psych's formula: uncorrected ``(n - 1) F``);
    - ``tli = (F0/null_dof - F/dof) / (F0/null_dof - 1/m)`` with ``m`` the Bartlett multiplier (psych);
    - ``cfi = 1 - max(chi2 - dof, 0) / max(null_chi2 - null_dof, chi2 - dof, 0)`` (Bentler 1990), 1
      when the denominator is 0.

    RMSEA, TLI and ``p_value`` are NaN when ``dof == 0`` (a just-identified model).
    """

    n_obs: int
    dof: int
    objective: float
    chi2: float
    p_value: float
    rmsea: float
    cfi: float
    tli: float
    null_chi2: float
    null_dof: int


def _fit(r: np.ndarray, loadings: np.ndarray, phi: np.ndarray, n: int) -> FitIndices:
    p, k = loadings.shape
    model = loadings @ phi @ loadings.T
    np.fill_diagonal(model, 1.0)
    sign, logdet_model = np.linalg.slogdet(model)
    logdet_r = np.linalg.slogdet(r)[1]
    f = float(np.trace(np.linalg.solve(model, r)) - (logdet_r - logdet_model) - p) if sign > 0 else np.nan
    dof, null_dof = _dof(p, k), p * (p - 1) // 2
    m = n - 1 - (2 * p + 5) / 6 - 2 * k / 3
    chi2 = max(m * f, 0.0)
    f0 = -logdet_r
    null_chi2 = (n - 1 - (2 * p + 5) / 6) * f0
    excess = max(chi2 - dof, 0.0)
    baseline = max(null_chi2 - null_dof, excess)
    if dof > 0:
        rmsea = float(np.sqrt(max(f / dof - 1 / (n - 1), 0.0)))
        tli = (f0 / null_dof - f / dof) / (f0 / null_dof - 1 / m)
        p_value = float(stats.chi2.sf(chi2, dof))
    else:
        rmsea = tli = p_value = np.nan
    cfi = float(1.0 - excess / baseline) if baseline > 0 else 1.0
    return FitIndices(n, dof, f, chi2, p_value, rmsea, cfi, float(tli), float(null_chi2), null_dof)


def _check_n_obs(n_obs, p: int) -> int:
    if isinstance(n_obs, bool) or not isinstance(n_obs, (int, np.integer)) or n_obs < p + 1:
        raise parameter_error("n_obs", "fit_indices", f"an integer >= {p + 1} (the number of models behind the "
                              f"correlations of the {p} variables)", n_obs)
    return int(n_obs)


def fit_indices(corr, loadings, phi=None, *, n_obs: int) -> FitIndices:
    """Chi-square, RMSEA, CFI and TLI of loadings (and factor correlations) for a correlation matrix.

    Parameters
    ----------
    corr : array-like, shape (p, p)
    loadings : array-like, shape (p, k)
        Any rotation: the fit depends only on ``L Phi L'``.
    phi : array-like, shape (k, k), optional
        Factor correlations; default the identity (orthogonal or unrotated loadings).
    n_obs : int
        Number of observations (models) behind ``corr``.

    Returns
    -------
    FitIndices
        Formulas in :class:`FitIndices`.
    """
    r = _as_correlation(corr)
    lam = np.asarray(loadings, dtype=float)
    if lam.ndim != 2 or lam.shape[0] != r.shape[0]:
        _fail(f"loadings have shape {lam.shape} but the correlation matrix has {r.shape[0]} variables; pass (p, k)")
    check_n_factors(r.shape[0], lam.shape[1])
    phi = np.eye(lam.shape[1]) if phi is None else np.asarray(phi, dtype=float)
    return _fit(r, lam, phi, _check_n_obs(n_obs, r.shape[0]))


def improper_variables(loadings, uniquenesses) -> np.ndarray:
    """The one improper-solution (Heywood) rule of the package, per variable: ``(at_bound, over_one)``,
    a uniqueness at (or below) its lower bound, and a (rotated pattern) loading of absolute value 1 or
    more; a solution with either anywhere is improper. The factors report, the ``heywood`` column of
    ``fit_indices.csv`` (which the SAFE suite reads) and the suite's choice of a latent-ability bank all
    use it, so no bank is built from a solution the report calls improper."""
    at_bound = np.asarray(uniquenesses) <= PSI_BOUNDS[0] + 1e-8
    over_one = np.abs(np.asarray(loadings)).max(axis=1) >= 1
    return np.stack([at_bound, over_one])


@dataclass(frozen=True)
class FactorSolution:
    """A rotated minres solution: ``loadings`` (p, k) pattern, ``phi`` (k, k), ``rotation_matrix``
    with ``loadings = unrotated @ rotation_matrix``, communalities ``h2 = diag(L Phi L')`` and
    uniquenesses ``1 - h2`` (psych's ``diag(r - model)``), and the fit indices."""

    variables: tuple[str, ...]
    n_factors: int
    rotation: str
    gamma: float
    loadings: np.ndarray
    phi: np.ndarray
    rotation_matrix: np.ndarray
    unrotated: np.ndarray
    communalities: np.ndarray
    uniquenesses: np.ndarray
    fit: FitIndices
    converged: bool

    @property
    def variance_explained(self) -> float:
        """Share of the total (standardised) variance the common factors reproduce: ``mean(h2)``."""
        return float(np.mean(self.communalities))

    @property
    def heywood(self) -> bool:
        """Improper by the one rule of :func:`improper_variables` (read the solution with care)."""
        return bool(np.any(improper_variables(self.loadings, self.uniquenesses)))


def factor_solution(r, k, rotation, gamma, n, variables) -> FactorSolution:
    unrotated, ok = _minres(r, k)
    rot = rotate_one(unrotated, rotation, gamma, rotation == "varimax", 1e-8, 10_000)
    h2 = np.sum(unrotated ** 2, axis=1)
    return FactorSolution(tuple(variables), k, rotation, gamma, rot[0], rot[1], rot[2], unrotated, h2, 1.0 - h2,
                          _fit(r, unrotated, np.eye(k), n), ok and bool(rot[3]))


def _prepare(x, correlation: bool, n_obs) -> tuple[np.ndarray, int, list[str]]:
    if correlation:
        r = _as_correlation(x)
        labels = [str(c) for c in x.columns] if isinstance(x, pd.DataFrame) else [str(i) for i in range(len(r))]
        if n_obs is None:
            raise ConfigError("factor_analysis: a correlation matrix needs n_obs (the number of models behind it); "
                              "pass n_obs=...")
        return r, _check_n_obs(n_obs, len(r)), labels
    corr, n = correlation_matrix(x)
    return corr.to_numpy(), n if n_obs is None else _check_n_obs(n_obs, corr.shape[0]), list(corr.columns)


def factor_analysis(x, n_factors: int, *, correlation: bool = False, n_obs: int | None = None,
                    rotation: str = "oblimin", gamma: float = 0.0) -> FactorSolution:
    """Minres exploratory factor analysis with rotation and fit indices (psych ``fa``).

    Parameters
    ----------
    x : pandas.DataFrame or array-like
        A (models x benchmarks) data matrix (NaN = missing: pairwise-complete correlations, see
        :func:`correlation_matrix`) or, with ``correlation=True``, a correlation matrix.
    n_factors : int
    correlation : bool, default False
        Whether ``x`` is a correlation matrix.
    n_obs : int, optional
        Observations behind the correlations: required with ``correlation=True``; for data the
        default is the smallest pairwise-complete count.
    rotation : {"oblimin", "varimax", "none"}, default "oblimin"
        As in :func:`bayesirt.models.rotation.rotate` (default Kaiser normalisation, tolerance 1e-8).
    gamma : float, default 0.0
        Oblimin's gamma (0 = quartimin).

    Returns
    -------
    FactorSolution
    """
    check_choice(rotation, ROTATIONS, name="rotation", caller="factor_analysis")
    r, n, labels = _prepare(x, correlation, n_obs)
    k = check_n_factors(len(r), n_factors)
    with blas_threads(1):
        return factor_solution(r, k, rotation, float(gamma), n, labels)


@dataclass(frozen=True)
class ParallelAnalysis:
    """Horn's parallel analysis: observed eigenvalues (reduced matrix ``fa``; full matrix ``pc``),
    the ``quantile`` of the eigenvalue at the same rank over ``n_iter`` random-normal data sets of
    the same size, and the number of leading observed eigenvalues above it (stopping at the first
    that is not)."""

    observed_fa: np.ndarray
    reference_fa: np.ndarray
    observed_pc: np.ndarray
    reference_pc: np.ndarray
    n_factors: int
    n_components: int
    quantile: float
    n_iter: int
    communalities: str


def _reduced_eigenvalues(r: np.ndarray, communalities: str) -> np.ndarray:
    """Descending eigenvalues of correlation matrices (stacked) with communalities on the diagonal."""
    reduced = r.copy()
    idx = np.arange(r.shape[-1])
    if communalities == "smc":
        reduced[..., idx, idx] = smc(r)
    else:
        for m in reduced.reshape(-1, *r.shape[-2:]):
            m[idx, idx] = np.sum(_minres(m.copy(), 1)[0] ** 2, axis=1)
    return np.linalg.eigvalsh(reduced)[..., ::-1]


def _retained(observed: np.ndarray, reference: np.ndarray) -> int:
    below = np.flatnonzero(observed <= reference)
    return int(below[0]) if below.size else len(observed)


def parallel_analysis(x, *, correlation: bool = False, n_obs: int | None = None, n_iter: int = 1000,
                      quantile: float = 0.95, communalities: str = "smc", seed: int = 0) -> ParallelAnalysis:
    """Horn's (1965) parallel analysis, minres (reduced matrix) and PCA variants (psych ``fa.parallel``).

    Parameters
    ----------
    x : pandas.DataFrame or array-like
        Data (models x benchmarks) or, with ``correlation=True``, a correlation matrix.
    correlation : bool, default False
    n_obs : int, optional
        Rows of each random data set: required for a correlation matrix; for data the smallest
        pairwise-complete count (the row count without missing cells).
    n_iter : int, default 1000
        Random data sets (SAFE used 1,000; psych's default is 20).
    quantile : float, default 0.95
        Reference quantile of the random eigenvalues at each rank (``numpy.quantile``, R's type 7).
    communalities : {"smc", "minres"}, default "smc"
        Diagonal of the reduced matrix: squared multiple correlations (``fa.parallel(SMC=TRUE)``) or
        the communalities of a one-factor minres fit (psych's default ``SMC=FALSE``; slower).
    seed : int, default 0
        Seeds a private ``numpy.random.Generator``; the global state is not touched.

    Returns
    -------
    ParallelAnalysis
    """
    check_choice(communalities, ("smc", "minres"), name="communalities", caller="parallel_analysis")
    check_int(n_iter, name="n_iter", caller="parallel_analysis", low=1)
    check_probability(quantile, name="quantile", caller="parallel_analysis")
    r, n, _ = _prepare(x, correlation, n_obs)
    p = len(r)
    rng = np.random.default_rng(seed)
    pc, fa = [], []
    with blas_threads(1):
        observed_fa = _reduced_eigenvalues(r, communalities)
        chunk = max(1, 2_000_000 // (n * p))  # random data sets per batch: about 16 MB of normals
        for size in np.diff(np.r_[0:n_iter:chunk, n_iter]):
            z = rng.standard_normal((size, n, p))
            z -= z.mean(axis=1, keepdims=True)
            z /= np.sqrt(np.sum(z ** 2, axis=1, keepdims=True))
            sims = np.swapaxes(z, 1, 2) @ z
            pc.append(np.linalg.eigvalsh(sims)[:, ::-1])
            fa.append(_reduced_eigenvalues(sims, communalities))
    reference_pc, reference_fa = (np.quantile(np.concatenate(v), quantile, axis=0) for v in (pc, fa))
    observed_pc = np.linalg.eigvalsh(r)[::-1]
    return ParallelAnalysis(observed_fa, reference_fa, observed_pc, reference_pc, _retained(observed_fa, reference_fa),
                            _retained(observed_pc, reference_pc), float(quantile), int(n_iter), communalities)
