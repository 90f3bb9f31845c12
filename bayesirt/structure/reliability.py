"""Factor structure of abilities measured with error: disattenuated correlations and intervals by a
bootstrap over models (issue 20).

Each benchmark's ability estimate theta_hat (a posterior mean: EAP, or an ADVI/NUTS mean) is the
true ability shrunk by the benchmark's reliability and blurred by its own posterior error. With
posterior variance v_m, the law of total variance gives Var(theta) = Var(theta_hat) + E[v], so the
benchmark's marginal reliability is

    rho_j = Var(theta_hat_j) / (Var(theta_hat_j) + mean_m v_mj),

and, the benchmarks being fitted separately (independent errors), corr(theta_j, theta_k) =
corr(theta_hat_j, theta_hat_k) / sqrt(rho_j rho_k): Spearman's correction for attenuation. The
factor analysis of the disattenuated matrix describes the latent abilities, not the noisy
estimates. (Factor-analysing per-draw abilities instead attenuates twice: a draw's correlation is
about rho_j rho_k times the true one, so its intervals sit below the loading they are meant to
cover.)

A disattenuated matrix can leave the positive-definite cone when reliabilities are low or samples
small; it is then moved to the nearest correlation matrix with eigenvalues >= :data:`MIN_EIGENVALUE`
(clip and rescale to unit diagonal), and the solution says so.

Intervals come from the nonparametric bootstrap over models: each replicate resamples the models
with replacement, recomputes the reliabilities, the disattenuated matrix and the factor solution,
and aligns its factors to the full-sample solution (permutation and reflection by congruence);
percentile intervals of loadings and factor correlations follow. The models are the sampling units
of the correlations, so this is the interval a reader expects: it covers the population loadings
at about its nominal rate on simulated data with known loadings (``tests/test_reliability.py``,
``benchmarks/factor_coverage.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.errors import BayesIRTError, DataError
from bayesirt.structure.factor import FactorSolution, check_n_factors, correlation_matrix, factor_solution
from bayesirt.models.rotation import align_loadings, align_phi
from bayesirt.utils.parallel import blas_threads
from bayesirt.utils.validation import check_int, check_probability
from bayesirt.utils.progress import progress_bar

__all__ = ["MIN_EIGENVALUE", "Disattenuated", "marginal_reliability", "disattenuated_correlation",
           "bootstrap_factor_analysis"]

#: Smallest eigenvalue kept when a disattenuated matrix is moved back to the correlation matrices.
MIN_EIGENVALUE = 1e-3


def marginal_reliability(ability, ability_sd) -> pd.Series:
    """rho_j = Var(theta_hat_j) / (Var(theta_hat_j) + mean posterior variance), per column, over
    the models observed on it (module notes)."""
    est, sd = pd.DataFrame(ability), pd.DataFrame(ability_sd)
    if est.shape != sd.shape:
        raise DataError(f"abilities {est.shape} and their posterior sds {sd.shape} must have the same shape")
    sd.columns, sd.index = est.columns, est.index
    var_hat = est.var(ddof=1)
    error = (sd ** 2).where(est.notna()).mean()
    return (var_hat / (var_hat + error)).rename("reliability")


def _nearest_correlation(r: np.ndarray) -> tuple[np.ndarray, bool]:
    values, vectors = np.linalg.eigh(r)
    if values[0] >= MIN_EIGENVALUE:
        return r, False
    fixed = (vectors * np.maximum(values, MIN_EIGENVALUE)) @ vectors.T
    scale = np.sqrt(np.diag(fixed))
    fixed = fixed / np.outer(scale, scale)
    return (fixed + fixed.T) / 2, True


@dataclass(frozen=True)
class Disattenuated:
    """Result of :func:`disattenuated_correlation`: the ``observed`` (pairwise-complete) and
    ``corrected`` correlation matrices (labelled DataFrames), the ``reliability`` per benchmark,
    ``n_obs`` (the smallest pairwise-complete count) and whether the corrected matrix had to be
    ``smoothed`` back to positive definiteness."""

    observed: pd.DataFrame
    corrected: pd.DataFrame
    reliability: pd.Series
    n_obs: int
    smoothed: bool


def disattenuated_correlation(ability, ability_sd) -> Disattenuated:
    """Correlations of the latent abilities from estimates and their posterior sds (module notes).

    Parameters
    ----------
    ability, ability_sd : pandas.DataFrame (models x benchmarks)
        Posterior means and sds (e.g. ``ability`` and ``ability_sd`` of
        :func:`bayesirt.structure.ability_structure.ability_matrix`); NaN where a model lacks a
        benchmark (pairwise-complete correlations).
    """
    observed, n_obs = correlation_matrix(ability)
    rho = marginal_reliability(ability, ability_sd)
    if not np.all((rho > 0) & (rho <= 1)):
        raise DataError(f"reliabilities {rho.round(3).to_dict()} are not in (0, 1]; check the posterior sds")
    root = np.sqrt(rho.to_numpy())
    corrected = observed.to_numpy() / np.outer(root, root)
    np.fill_diagonal(corrected, 1.0)
    corrected, smoothed = _nearest_correlation(corrected)
    labels = observed.columns
    return Disattenuated(observed, pd.DataFrame(corrected, index=labels, columns=labels), rho, n_obs, smoothed)


def bootstrap_factor_analysis(ability, ability_sd, target: FactorSolution, *, replicates: int = 500,
                              ci: float = 0.95, seed: int = 0, correct: bool = True,
                              progress: bool = True) -> xr.Dataset:
    """Bootstrap over models of the factor solution, aligned to ``target``.

    Parameters
    ----------
    ability, ability_sd : pandas.DataFrame (models x benchmarks)
        ``ability_sd`` is used only with ``correct`` (may be None without).
    target : FactorSolution
        The solution of the full sample's matrix (same benchmarks, factors, rotation): disattenuated
        with ``correct``, else the raw (pairwise-complete) ability correlations.
    correct : bool, default True
        Recompute the disattenuated matrix in each replicate; False: the raw correlation matrix of
        the resampled abilities (SAFE's analysis, App. D).
    replicates : int, default 500
    ci : float, default 0.95
        Central percentile interval reported as ``*_lower`` / ``*_upper``.
    seed : int, default 0
    progress : bool, default True

    Returns
    -------
    xarray.Dataset
        Per replicate: ``loadings`` (replicate, benchmark, factor), ``phi``, ``reliability``,
        ``congruence``; ``loadings_lower``/``_upper``, ``phi_lower``/``_upper``,
        ``reliability_lower``/``_upper`` and ``*_se`` (bootstrap sd). Replicates whose matrix is
        unusable are NaN (attribute ``failed_replicates``).
    """
    check_int(replicates, name="replicates", caller="bootstrap_factor_analysis", low=2)
    check_probability(ci, name="ci", caller="bootstrap_factor_analysis")
    est = pd.DataFrame(ability)
    sd = pd.DataFrame(ability_sd) if correct else est * np.nan
    if [str(c) for c in est.columns] != list(target.variables):
        raise DataError(f"abilities have benchmarks {list(map(str, est.columns))} but the target solution has "
                        f"{list(target.variables)}; pass the abilities the target was computed from")
    p, k = len(target.variables), check_n_factors(len(target.variables), target.n_factors)
    loadings, phi = np.full((replicates, p, k), np.nan), np.full((replicates, k, k), np.nan)
    rho, congruence = np.full((replicates, p), np.nan), np.full((replicates, k), np.nan)
    rng = np.random.default_rng(seed)
    n = len(est)
    with blas_threads(1), progress_bar(replicates, f"{k}-factor bootstrap over models", enabled=progress) as advance:
        for b in range(replicates):
            rows = rng.integers(0, n, n)
            try:
                if correct:
                    d = disattenuated_correlation(est.iloc[rows].reset_index(drop=True),
                                                  sd.iloc[rows].reset_index(drop=True))
                    r, n_obs, reliability = d.corrected.to_numpy(), d.n_obs, d.reliability.to_numpy()
                else:
                    raw, n_obs = correlation_matrix(est.iloc[rows].reset_index(drop=True))
                    r, reliability = raw.to_numpy(), np.full(p, np.nan)
            except BayesIRTError:
                advance()
                continue
            sol = factor_solution(r, k, target.rotation, target.gamma, n_obs, target.variables)
            loadings[b], perm, signs, congruence[b] = align_loadings(sol.loadings, target.loadings)
            phi[b], rho[b] = align_phi(sol.phi, perm, signs), reliability
            advance()
    factors = [f"F{j + 1}" for j in range(k)]
    out = xr.Dataset({"loadings": (("replicate", "benchmark", "factor"), loadings),
                      "phi": (("replicate", "factor", "other_factor"), phi),
                      "reliability": (("replicate", "benchmark"), rho),
                      "congruence": (("replicate", "factor"), congruence)},
                     coords={"replicate": np.arange(replicates), "benchmark": list(target.variables),
                             "factor": factors, "other_factor": factors})
    tail = (1 - ci) / 2
    for name in ("loadings", "phi", "reliability"):
        valid = out[name].dropna("replicate", how="all")
        if valid.sizes["replicate"] == 0:  # reliabilities of the raw bootstrap: not computed
            blank = out[name].isel(replicate=0, drop=True)
            out[f"{name}_lower"], out[f"{name}_upper"], out[f"{name}_se"] = blank, blank, blank
            continue
        out[f"{name}_lower"], out[f"{name}_upper"] = (valid.quantile(q, "replicate").drop_vars("quantile")
                                                      for q in (tail, 1 - tail))
        out[f"{name}_se"] = valid.std("replicate", ddof=1)
    out.attrs = {"n_factors": k, "rotation": target.rotation, "gamma": target.gamma, "ci": ci, "seed": seed,
                 "failed_replicates": int(np.isnan(congruence[:, 0]).sum()),
                 "method": "nonparametric bootstrap over models of the "
                           + ("disattenuated correlation matrix" if correct else "raw ability correlation matrix"),
                 "corrected": int(correct),
                 "aligned_to": "the full-sample solution: factors permuted and reflected by congruence"}
    return out
