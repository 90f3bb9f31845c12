"""The residual-DIF posterior by a per-item Laplace approximation (``bayes_method="laplace"``).

Given the capability offsets, the family-DIF model of :mod:`bayesirt.models.family_dif`

    logit P(Y_im = 1) = b_i + o_im + delta_{i, f(m)},  delta_i. ~ ZeroSumNormal(sd),  b_i flat (or N(0, s_b^2)),

has a posterior that factorizes over items: item i's parameters (b_i, delta_i.) meet no other
item's. So the posterior is F-dimensional per item (b and F - 1 zero-sum coordinates), and a
Gaussian at each item's mode with the inverse Hessian as covariance is both cheap and full-rank:
it keeps the b-delta correlation that unequal family sizes create, which mean-field ADVI drops.
With hundreds of models per family the item posteriors are close to Gaussian.

- Coordinates: delta = Q z with Q (F x F-1) an orthonormal basis of the zero-sum subspace; the
  prior is then z ~ N(0, sd^2 I) (ZeroSumNormal's density on the subspace).
- Mode: joint Newton steps on (b, z) for all items at once (batched F x F solves), started from
  NT's five-cycle estimate (:func:`bayesirt.audit.engine.dif.fit_family_dif`), until the largest step is
  below :data:`NEWTON_TOLERANCE`. It is the ridge optimum that NT's schedule approaches
  (``tests/test_bayes_laplace.py`` checks it against the converged alternating scheme).
- Hessian: with s_if = sum_{m in f} w_im p_im (1 - p_im), H_bb = sum_f s_if, H_b,delta_f = s_if,
  H_delta_f,delta_f = s_if; in (b, z) coordinates H = J' H J + diag(1/s_b^2, I/sd^2), J = diag(1, Q).
- Draws: (b, z) = mode + L^-T eps with L L' = H, eps ~ N(0, I), from ``numpy.random.default_rng(seed)``.

Cost: a few passes over the item x model cells (one per Newton step), against thousands of
gradient steps over them for ADVI.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import null_space

from bayesirt.audit.engine.dif import fit_family_dif
from bayesirt.errors import DataError
from bayesirt.utils.validation import check_int

__all__ = ["laplace_draws", "NEWTON_TOLERANCE", "MAX_NEWTON"]

NEWTON_TOLERANCE = 1e-10
MAX_NEWTON = 50


def _curvature(y_family, w, onehot, family, offsets, b, delta, precision):
    """Gradient (item, F+1) of the negative log posterior and Hessian (item, F+1, F+1) of the negative
    log-likelihood (the prior's is added in (b, z) coordinates by the caller), in the full (b, delta)
    coordinates, without the zero-sum restriction."""
    eta = b[:, None] + offsets + delta[:, family]
    p = 1.0 / (1.0 + np.exp(-np.clip(eta, -700, 700)))
    mass = (p * w) @ onehot  # expected correct per family
    info = (p * (1.0 - p) * w) @ onehot  # s_if
    grad = np.concatenate([(mass - y_family).sum(axis=1, keepdims=True), mass - y_family], axis=1)
    grad[:, 0] += precision[0] * b
    grad[:, 1:] += precision[1] * delta
    n_items, n_families = info.shape
    hess = np.zeros((n_items, n_families + 1, n_families + 1))
    hess[:, 0, 0] = info.sum(axis=1)
    hess[:, 0, 1:] = hess[:, 1:, 0] = info
    hess[:, np.arange(1, n_families + 1), np.arange(1, n_families + 1)] = info
    return grad, hess


def laplace_draws(y, observed, offsets, family, n_families: int, *, draws: int = 400, seed: int = 0,
                  delta_sd: float = 1.0, easiness_sd: float | None = None) -> tuple[np.ndarray, np.ndarray, dict]:
    """Draws of the per-item Laplace approximation of the residual-DIF posterior (module notes).

    Parameters
    ----------
    y, observed : ndarray (item, model)
    offsets : ndarray (item, model)
        Fixed capability offsets.
    family : ndarray of int (model,)
    n_families : int
    draws : int, default 400
    seed : int, default 0
    delta_sd : float, default 1.0
        Scale of the zero-sum normal prior (1: NT's lambda = 1 ridge).
    easiness_sd : float, optional
        Scale of a normal prior on b; None is flat (every item must then have both outcomes).

    Returns
    -------
    (family_effect, easiness, info) : ndarray (draw, item, family), ndarray (draw, item), dict
        ``info``: ``newton_steps``, ``last_step``, the posterior ``mode_dif_range`` (item,) and
        ``newton_capped`` (the mode search stopped at :data:`MAX_NEWTON` steps with the last step
        still above :data:`NEWTON_TOLERANCE`: the draws are centred off the mode).
    """
    check_int(draws, name="draws", caller="laplace_draws", low=1)
    observed = np.asarray(observed, dtype=bool)
    y_obs = np.where(observed, y, 0).astype(np.float64)
    correct, count = y_obs.sum(axis=1), observed.sum(axis=1)
    if easiness_sd is None and np.any((correct == 0) | (correct == count)):
        raise DataError("an item is all correct or all wrong in this half, so a flat easiness prior has no mode; "
                        "pass easiness_sd (e.g. 2.0)")
    family = np.asarray(family)
    onehot = np.zeros((family.size, n_families))
    onehot[np.arange(family.size), family] = 1.0
    w = observed.astype(np.float64)
    y_family = y_obs @ onehot
    precision = (0.0 if easiness_sd is None else 1.0 / easiness_sd ** 2, 1.0 / delta_sd ** 2)
    q = null_space(np.ones((1, n_families)))  # (F, F-1) orthonormal zero-sum basis
    jac = np.zeros((n_families + 1, n_families))
    jac[0, 0], jac[1:, 1:] = 1.0, q
    start = fit_family_dif(y, observed, offsets, family, n_families, penalty=precision[1])
    theta = np.concatenate([start.easiness[:, None], start.family_effect @ q], axis=1)  # (item, F): b, z
    prior = np.diag([precision[0], *[precision[1]] * (n_families - 1)])  # in (b, z) coordinates

    def posterior(theta):
        b, delta = theta[:, 0], theta[:, 1:] @ q.T
        grad, hess = _curvature(y_family, w, onehot, family, offsets, b, delta, precision)
        return grad @ jac, jac.T @ hess @ jac + prior

    step_size, steps = np.inf, 0
    for steps in range(1, MAX_NEWTON + 1):
        g, h = posterior(theta)
        step = -np.linalg.solve(h, g[..., None])[..., 0]
        theta = theta + np.clip(step, -2.0, 2.0)
        step_size = float(np.abs(step).max())
        if step_size < NEWTON_TOLERANCE:
            break
    _, h = posterior(theta)
    delta = theta[:, 1:] @ q.T
    chol = np.linalg.cholesky(h)  # H = L L'; a draw is mode + L^-T eps
    eps = np.random.default_rng(seed).standard_normal((draws, *theta.shape))
    dev = np.linalg.solve(np.swapaxes(chol, 1, 2)[None], eps[..., None])[..., 0]
    sample = theta[None] + dev
    info = {"newton_steps": steps, "last_step": step_size, "mode_dif_range": np.ptp(delta, axis=1),
            "newton_capped": bool(step_size >= NEWTON_TOLERANCE)}
    return sample[..., 1:] @ q.T, sample[..., 0], info
