"""Pareto-smoothed importance sampling (PSIS) and PSIS-LOO, vectorized over observations.

ArviZ (``arviz_stats``) smooths one observation at a time in a Python loop, and ``az.loo`` does it
twice (about 4 ms wall per observation at 1,000 draws on the loaded 2-core project machine), which
takes hours for millions of response cells; ``psis_loo`` is 8-11x faster there. It runs the same
algorithm (Vehtari et al. 2024) on a whole (draws x observations) block at once: tail length M
from the sample size and ``r_eff``; Zhang & Stephens (2009) empirical-Bayes generalized Pareto
fit of the M largest ratios above the cutoff, with ArviZ's weakly informative prior pulling k
towards 0.5; the tail replaced by the fitted quantiles at (i - 1/2)/M, truncated at the largest
raw ratio; normalization. Observations are processed in chunks so memory stays bounded.
``arviz_stats`` is the test oracle (``tests/test_psis.py``).

One deliberate difference: where ArviZ raises because all M tail ratios are identical (e.g. a
constant log-likelihood column), this module reports k = NaN and keeps the raw weights, which is
what ArviZ's own fit returns for a tail whose first quartile equals its minimum.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from bayesirt.errors import DataError
from bayesirt.utils.validation import check_number

__all__ = ["PsisLoo", "psis_log_weights", "psis_loo"]

_CHUNK_ELEMENTS = 2**22  # draws x observations per chunk: 32 MB per float64 working array
_PRIOR_B_SCALE = 3  # Zhang-Stephens grid spread, in units of the tail's first quartile
_PRIOR_K_WEIGHT, _PRIOR_K_MEAN = 10, 0.5  # ArviZ's prior on k: 10 pseudo-draws at 0.5


@dataclass(frozen=True)
class PsisLoo:
    """Pointwise PSIS-LOO results.

    Attributes
    ----------
    elpd_i : numpy.ndarray
        (n_obs,) leave-one-out expected log predictive density of each observation.
    p_loo_i : numpy.ndarray
        (n_obs,) ``lpd_i - elpd_i`` with ``lpd_i`` the log of the mean likelihood over draws.
    pareto_k : numpy.ndarray
        (n_obs,) Pareto shape estimate; NaN when the tail cannot be fitted (e.g. constant ratios),
        inf when the fit breaks down numerically.
    good_k : float
        ArviZ's sample-size-dependent threshold ``min(1 - 1/log10(S), 0.7)``.
    """

    elpd_i: np.ndarray
    p_loo_i: np.ndarray
    pareto_k: np.ndarray
    good_k: float


def _tail_length(n_samples: int, r_eff: float) -> int:
    """ArviZ's tail length: 3 sqrt(S / r_eff) when S r_eff > 225, else S / 5 (floored)."""
    if n_samples * r_eff > 225:
        return int(np.floor(3 * (n_samples / r_eff) ** 0.5))
    return n_samples // 5


def _validated(ary: np.ndarray, name: str, r_eff: float, caller: str) -> tuple[np.ndarray, int]:
    """The array (not copied) and its tail length, or a :class:`DataError` (a ConfigError for ``r_eff``)."""
    ary = np.asarray(ary)
    if ary.ndim != 2:
        raise DataError(f"{name} must be 2-D (sample, observation); got {ary.ndim} dimension(s).")
    check_number(r_eff, name="r_eff", caller=caller, low=0, low_open=True)
    tail = _tail_length(ary.shape[0], r_eff)
    if tail < 5:
        raise DataError(f"PSIS needs at least 5 tail draws, but {ary.shape[0]} samples with "
                        f"r_eff={r_eff} give {tail}; use at least 25 samples.")
    return ary, tail


def _blocks(ary: np.ndarray, name: str) -> Iterator[tuple[slice, np.ndarray]]:
    """Column slices of ``ary`` with a C-contiguous float64 (n_chunk, n_samples) copy of each."""
    n_samples, n_obs = ary.shape
    step = max(1, _CHUNK_ELEMENTS // n_samples)
    for start in range(0, n_obs, step):
        cols = slice(start, start + step)
        block = np.ascontiguousarray(ary[:, cols].T, dtype=np.float64)
        if not np.isfinite(block).all():
            bad = start + int(np.flatnonzero(~np.isfinite(block).all(axis=1))[0])
            raise DataError(f"{name} has non-finite values (first in observation {bad}).")
        yield cols, block


def _logsumexp(a: np.ndarray) -> np.ndarray:
    """Row-wise log-sum-exp of a 2-D array (half of SciPy's time at these sizes)."""
    top = a.max(axis=1, keepdims=True)
    return np.log(np.exp(a - top).sum(axis=1)) + top[:, 0]


def _gpd_fit(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zhang-Stephens generalized Pareto fit of each row of ``x`` (sorted ascending, >= 0).

    Returns (k, sigma), each (n_rows,), with the prior on k applied. Rows whose first quartile
    does not exceed their minimum get NaN (ArviZ's "far from a generalized Pareto"); rows whose
    estimate comes out NaN get k = inf.
    """
    n = x.shape[1]
    n_grid = 30 + int(n**0.5)
    xstar = x[:, int(n / 4 + 0.5) - 1]
    grid = 1 - np.sqrt(n_grid / (np.arange(1, n_grid + 1) - 0.5))
    b = grid / (_PRIOR_B_SCALE * xstar[:, None]) + 1 / x[:, -1:]
    k_grid = np.empty_like(b)
    work = np.empty_like(x)
    for j in range(n_grid):
        np.multiply(-b[:, j, None], x, out=work)
        k_grid[:, j] = np.log1p(work, out=work).mean(axis=1)
    profile = n * (np.log(-b / k_grid) - k_grid - 1)
    w = np.exp(profile - _logsumexp(profile)[:, None])
    w = np.where(w >= 10 * np.finfo(float).eps, w, 0.0)
    w /= w.sum(axis=1, keepdims=True)
    b_post = (b * w).sum(axis=1)
    k_raw = np.log1p(-b_post[:, None] * x).mean(axis=1)
    sigma = -k_raw / b_post
    k = (n * k_raw + _PRIOR_K_WEIGHT * _PRIOR_K_MEAN) / (n + _PRIOR_K_WEIGHT)
    k[np.isnan(k)] = np.inf
    degenerate = xstar <= x[:, 0]
    k[degenerate], sigma[degenerate] = np.nan, np.nan
    return k, sigma


def _smooth(x: np.ndarray, tail: int) -> np.ndarray:
    """Replace each row of log ratios ``x`` (n_rows, S) in place by normalized PSIS log weights.

    Returns the Pareto k of each row.
    """
    n_samples = x.shape[1]
    x -= x.max(axis=1, keepdims=True)
    top = np.argpartition(x, n_samples - tail - 1, axis=1)[:, n_samples - tail - 1:]
    vals = np.take_along_axis(x, top, axis=1)
    order = np.argsort(vals, axis=1)
    top, vals = np.take_along_axis(top, order, axis=1), np.take_along_axis(vals, order, axis=1)
    cutoff, tail_idx, log_tail = np.exp(vals[:, :1]), top[:, 1:], vals[:, 1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        k, sigma = _gpd_fit(np.exp(log_tail) - cutoff)
        rows = np.flatnonzero(np.isfinite(k))  # a NaN or infinite k leaves the tail raw
        log1m_p = np.log1p(-(np.arange(tail) + 0.5) / tail)
        kr, sr = k[rows, None], sigma[rows, None]
        growth = np.where(kr == 0, -sr * log1m_p, sr * np.expm1(-kr * log1m_p) / kr)
        smoothed = np.minimum(np.log(cutoff[rows] + growth), log_tail[rows, -1:])
        x[rows[:, None], tail_idx[rows]] = smoothed
    x -= _logsumexp(x)[:, None]
    return k


def psis_log_weights(log_ratios: np.ndarray, *, r_eff: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Pareto-smoothed, normalized importance log weights of each column.

    Parameters
    ----------
    log_ratios : numpy.ndarray
        (n_samples, n_obs) log importance ratios, e.g. ``-log_lik`` for leave-one-out. Finite;
        at least 25 samples.
    r_eff : float, default 1.0
        Relative efficiency of the draws (ESS / S); sets the tail length as in ArviZ.

    Returns
    -------
    log_weights : numpy.ndarray
        (n_samples, n_obs) float64; ``exp`` of each column sums to 1.
    pareto_k : numpy.ndarray
        (n_obs,) Pareto shape estimates (NaN for an unfittable tail, e.g. constant ratios).

    Raises
    ------
    DataError
        On a non-2-D or non-finite input or too few samples.
    ConfigError
        A non-positive ``r_eff``.
    """
    ratios, tail = _validated(log_ratios, "log_ratios", r_eff, "psis_log_weights")
    log_weights = np.empty(ratios.shape)
    pareto_k = np.empty(ratios.shape[1])
    for cols, block in _blocks(ratios, "log_ratios"):
        pareto_k[cols] = _smooth(block, tail)
        log_weights[:, cols] = block.T
    return log_weights, pareto_k


def psis_loo(log_lik: np.ndarray, *, r_eff: float = 1.0) -> PsisLoo:
    """Pointwise PSIS-LOO of each column of a pointwise log-likelihood matrix.

    Same numbers as ``arviz.loo(..., pointwise=True, reff=r_eff)``, without building a DataTree
    and without holding more than one chunk of weights in memory.

    Parameters
    ----------
    log_lik : numpy.ndarray
        (n_samples, n_obs) log p(y_i | draw s), chains and draws flattened into samples. Finite;
        at least 25 samples.
    r_eff : float, default 1.0
        Relative efficiency of the draws (ESS / S), as ArviZ's ``reff``.

    Returns
    -------
    PsisLoo
        ``elpd_i``, ``p_loo_i``, ``pareto_k`` (each (n_obs,)) and ``good_k``.

    Raises
    ------
    DataError
        On a non-2-D or non-finite input or too few samples.
    ConfigError
        A non-positive ``r_eff``.
    """
    log_lik, tail = _validated(log_lik, "log_lik", r_eff, "psis_loo")
    n_samples, n_obs = log_lik.shape
    elpd, lpd, pareto_k = np.empty(n_obs), np.empty(n_obs), np.empty(n_obs)
    for cols, ll in _blocks(log_lik, "log_lik"):
        log_weights = -ll
        pareto_k[cols] = _smooth(log_weights, tail)
        elpd[cols] = _logsumexp(log_weights + ll)
        lpd[cols] = _logsumexp(ll) - np.log(n_samples)
    good_k = min(1 - 1 / np.log10(n_samples), 0.7)
    return PsisLoo(elpd_i=elpd, p_loo_i=lpd - elpd, pareto_k=pareto_k, good_k=float(good_k))
