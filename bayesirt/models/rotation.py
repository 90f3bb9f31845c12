"""Factor rotation and loading alignment (SAFE "Latent Ability Inference" and App. D).

Varimax and oblimin rotation by gradient projection (GPArotation's algorithm, one matrix or a stack
of posterior draws), Tucker congruence, and the alignment of loadings and factor correlations to a
target by permutation and reflection. Used by the factor analysis of abilities
(:mod:`bayesirt.structure.factor`) and by the MIRT models on posterior draws of the loadings.

Conventions follow R's GPArotation and psych: Kaiser normalisation for varimax only; a solution's
factors are reflected so that each loading column sums to a positive number and ordered by their
sums of squared loadings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize

from bayesirt.errors import DataError
from bayesirt.models.settings import ROTATIONS
from bayesirt.utils.parallel import blas_threads
from bayesirt.utils.validation import check_choice

__all__ = ["ROTATIONS", "Rotation", "rotate", "tucker_congruence", "align_loadings", "align_phi",
           "reflect", "rotate_one"]

_GPA_STALL = 1e-6  # gradient norm accepted when rounding stops the line search (GPArotation: 1e-5)


def reflect(loadings: np.ndarray) -> np.ndarray:
    """Signs (+1/-1) that make each column sum to a non-negative number (psych's convention)."""
    signs = np.sign(loadings.sum(axis=0))
    return np.where(signs == 0, 1.0, signs)


def _oblimin(loadings: np.ndarray, gamma: float) -> tuple[float, np.ndarray]:
    """Oblimin criterion ``sum(L^2 * X) / 4`` and its gradient ``L * X`` with ``X = (I - gamma/p J) L^2 N``."""
    sq = loadings ** 2
    other = sq.sum(axis=1, keepdims=True) - sq  # N = 11' - I: squares of the other columns
    if gamma:
        other = other - gamma * other.mean(axis=0)
    return float(np.sum(sq * other)) / 4.0, loadings * other


def _varimax(loadings: np.ndarray, gamma: float) -> tuple[float, np.ndarray]:
    """Varimax criterion ``-||L^2 - colmeans(L^2)||^2 / 4`` and its gradient (``gamma`` unused)."""
    centred = loadings ** 2 - np.mean(loadings ** 2, axis=0)
    return -float(np.sum(centred ** 2)) / 4.0, -loadings * centred


def _gpa(a: np.ndarray, criterion, gamma: float, oblique: bool, tol: float, max_iter: int):
    """Gradient projection (Jennrich 2002; Bernaards & Jennrich 2005) from the identity.

    Returns ``(rotation_matrix, converged)`` with rotated loadings ``a @ rotation_matrix``."""
    k = a.shape[1]
    t = np.eye(k)

    def evaluate(t):
        if oblique:
            t_inv = np.linalg.inv(t)
            f, g_l = criterion(a @ t_inv.T, gamma)
            return f, -(t_inv @ a.T @ g_l @ t_inv).T  # dF/dT of F(A T'^-1)
        f, g_l = criterion(a @ t, gamma)
        return f, a.T @ g_l

    f, grad = evaluate(t)
    step, converged = 1.0, False
    for _ in range(max_iter):
        if oblique:
            projected = grad - t * np.sum(t * grad, axis=0)
        else:
            m = t.T @ grad
            projected = grad - t @ ((m + m.T) / 2)
        size = float(np.sqrt(np.sum(projected ** 2)))
        if size < tol:
            converged = True
            break
        step *= 2.0
        for _ in range(11):  # halve the step until it decreases the criterion enough (Armijo)
            x = t - step * projected
            if oblique:
                candidate = x / np.sqrt(np.sum(x ** 2, axis=0))
            else:
                u, _, vt = np.linalg.svd(x)
                candidate = u @ vt
            f_new, grad_new = evaluate(candidate)
            if f - f_new > 0.5 * size ** 2 * step:
                break
            step /= 2.0
        else:  # no step decreases the criterion: the gradient is at the floor that rounding allows
            converged = size < max(tol, _GPA_STALL)
            break
        t, f, grad = candidate, f_new, grad_new
    return (np.linalg.inv(t).T if oblique else t), converged


def rotate_one(a, method, gamma, normalize, tol, max_iter):
    k = a.shape[1]
    if method == "none" or k == 1:
        matrix, converged = np.eye(k), True
    else:
        weights = np.sqrt(np.sum(a ** 2, axis=1, keepdims=True)) if normalize else np.ones((a.shape[0], 1))
        weights[weights == 0] = 1.0
        criterion = _oblimin if method == "oblimin" else _varimax
        matrix, converged = _gpa(a / weights, criterion, gamma, method == "oblimin", tol, max_iter)
    loadings = a @ matrix
    signs = reflect(loadings)
    order = np.argsort(-np.sum(loadings ** 2, axis=0), kind="stable")
    matrix = (matrix * signs)[:, order]
    inverse = np.linalg.inv(matrix)
    return (a @ matrix, inverse @ inverse.T, matrix, converged)


@dataclass(frozen=True)
class Rotation:
    """Rotated loadings (pattern matrix), factor correlations and the rotation matrix.

    ``loadings = unrotated @ rotation_matrix`` and ``phi = inv(rotation_matrix) @ inv(rotation_matrix).T``
    (the identity for varimax), so ``loadings @ phi @ loadings.T == unrotated @ unrotated.T``.
    Arrays carry the leading (stacked) dimensions of the input; ``converged`` holds one flag per
    matrix (a 0-d array for a single matrix)."""

    loadings: np.ndarray
    phi: np.ndarray
    rotation_matrix: np.ndarray
    converged: np.ndarray


def rotate(loadings, method: str = "oblimin", *, gamma: float = 0.0, normalize: bool | None = None,
           tol: float = 1e-8, max_iter: int = 10_000) -> Rotation:
    """Rotate loadings by gradient projection (GPArotation's algorithm), one matrix or a stack.

    Parameters
    ----------
    loadings : array-like, shape (..., n_items, n_factors)
        Unrotated loadings; leading dimensions (e.g. posterior draws) are rotated one by one.
    method : {"oblimin", "varimax", "none"}, default "oblimin"
        Oblimin is oblique (``gamma = 0`` is quartimin, GPArotation's default); varimax orthogonal.
    gamma : float, default 0.0
        Oblimin's obliqueness parameter (0 quartimin, 0.5 biquartimin, 1 covarimin).
    normalize : bool, optional
        Kaiser row normalisation before rotating. Default: True for varimax (R's ``stats::varimax``
        and psych), False for oblimin (``GPArotation::oblimin`` and psych).
    tol : float, default 1e-8
        Stop when the Frobenius norm of the projected gradient is below this (GPArotation: 1e-5,
        too loose to reproduce loadings to 1e-6), or when rounding stops the line search first; then
        the result counts as converged if the norm is below 1e-6.
    max_iter : int, default 10000

    Returns
    -------
    Rotation
        Factors reflected to positive column sums and ordered by decreasing sum of squared loadings
        (psych's convention); starts from the identity, so a local optimum is possible.
    """
    check_choice(method, ROTATIONS, name="method", caller="rotate")
    a = np.asarray(loadings, dtype=float)
    if a.ndim < 2 or a.shape[-1] < 1 or a.shape[-2] < 2 or not np.isfinite(a).all():
        raise DataError(f"loadings must be a finite array of shape (..., n_items >= 2, n_factors >= 1); got shape {a.shape}")
    normalize = (method == "varimax") if normalize is None else bool(normalize)
    with blas_threads(1):
        parts = [rotate_one(m, method, float(gamma), normalize, tol, max_iter) for m in a.reshape(-1, *a.shape[-2:])]
    lead, k = a.shape[:-2], a.shape[-1]
    return Rotation(*(np.stack([p[i] for p in parts]).reshape(lead + shape)
                      for i, shape in enumerate([a.shape[-2:], (k, k), (k, k), ()])))


def tucker_congruence(a, b) -> np.ndarray:
    """Tucker's congruence ``sum(a b) / sqrt(sum(a^2) sum(b^2))`` of matching columns.

    Parameters
    ----------
    a, b : array-like, shape (..., n_items, n_factors) or (n_items,)
        Broadcast against each other; sums run over the item axis.

    Returns
    -------
    numpy.ndarray
        Shape (..., n_factors); 0-d for two vectors. NaN for an all-zero column.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    axis = -1 if a.ndim == 1 and b.ndim == 1 else -2
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sum(a * b, axis=axis) / np.sqrt(np.sum(a ** 2, axis=axis) * np.sum(b ** 2, axis=axis))


def align_loadings(loadings, target) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Permute and reflect factors to match a target, maximising total absolute congruence.

    Parameters
    ----------
    loadings : array-like, shape (..., n_items, n_factors)
        One matrix or a stack (e.g. posterior draws), each aligned separately.
    target : array-like, shape (n_items, n_factors)

    Returns
    -------
    aligned : numpy.ndarray, shape like ``loadings``
        ``aligned[..., :, j] = signs[..., j] * loadings[..., :, permutation[..., j]]``.
    permutation : numpy.ndarray of int, shape (..., n_factors)
    signs : numpy.ndarray, shape (..., n_factors)
        +1 or -1.
    congruence : numpy.ndarray, shape (..., n_factors)
        Tucker congruence of each aligned factor with its target column (non-negative).
    """
    a, t = np.asarray(loadings, dtype=float), np.asarray(target, dtype=float)
    if t.ndim != 2 or a.ndim < 2 or a.shape[-2:] != t.shape:
        raise DataError(f"loadings of shape {a.shape} cannot be aligned to a target of shape {t.shape}; "
                        "pass (..., n_items, n_factors) and (n_items, n_factors) with the same items and factors")
    k = t.shape[1]
    flat = a.reshape(-1, *t.shape)
    with np.errstate(invalid="ignore", divide="ignore"):  # (draw, loading factor, target factor)
        cong = (np.einsum("dpi,pj->dij", flat, t) / np.sqrt(np.sum(flat ** 2, axis=1))[:, :, None]
                / np.sqrt(np.sum(t ** 2, axis=0)))
    perms = np.stack([optimize.linear_sum_assignment(-np.nan_to_num(np.abs(c.T)))[1] for c in cong])
    matched = cong[np.arange(len(cong))[:, None], perms, np.arange(k)]
    signs = np.where(matched < 0, -1.0, 1.0)
    aligned = np.take_along_axis(flat, perms[:, None, :], axis=2) * signs[:, None, :]
    lead = a.shape[:-2]
    return (aligned.reshape(a.shape), perms.reshape(*lead, k), signs.reshape(*lead, k),
            np.abs(matched).reshape(*lead, k))


def align_phi(phi, permutation, signs) -> np.ndarray:
    """Apply an alignment of :func:`align_loadings` to factor correlations: ``s_i s_j phi[p_i, p_j]``."""
    phi, perm, signs = np.asarray(phi, dtype=float), np.asarray(permutation), np.asarray(signs, dtype=float)
    rows = np.take_along_axis(phi, perm[..., :, None], axis=-2)
    return np.take_along_axis(rows, perm[..., None, :], axis=-1) * signs[..., :, None] * signs[..., None, :]
