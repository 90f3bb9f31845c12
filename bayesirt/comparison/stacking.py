"""Stacking weights of predictive distributions (Yao, Vehtari, Simpson & Gelman 2018), computed on the log scale.

The weights maximize the leave-one-out log score of the mixture,
``sum_i log sum_k w_k exp(elpd_ik)``, over the simplex. ArviZ's ``compare`` evaluates
``exp(elpd_ik)`` directly; when a unit is a whole response pattern (leave-one-model-out elpd of
hundreds of log units per model) every term underflows to 0, the objective is ``log 0`` and its
optimizer stops at the equal weights it started from. Here the mixture density is a log-sum-exp,
the weights are the softmax of free parameters ``z``, and the gradient has the closed form
``d/dz_j = -sum_i (r_ij - w_j)`` with ``r_ik`` the posterior share of spec ``k`` in unit ``i``'s
mixture. The objective is concave in ``w``, so the optimum is unique where the specs' elpd vectors
are not collinear; on elpd that does not underflow it equals ArviZ's (``tests/test_stacking.py``).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.special import log_softmax, logsumexp, softmax

__all__ = ["stacking_weights"]


def stacking_weights(elpd_i: np.ndarray) -> np.ndarray:
    """Stacking weights of ``K`` specs from their pointwise elpd, a ``(units, K)`` array.

    Returns ``K`` non-negative weights summing to one. Adding a constant to a unit's row (any
    scale of the pointwise elpd) leaves them unchanged.
    """
    elpd_i = np.asarray(elpd_i, dtype=float)
    if elpd_i.ndim != 2 or elpd_i.shape[1] < 1 or not np.isfinite(elpd_i).all():
        raise ValueError(f"stacking needs a finite (units, specs) array of pointwise elpd; got shape {elpd_i.shape}")
    shifted = elpd_i - elpd_i.max(axis=1, keepdims=True)  # each unit's best spec at 0: nothing underflows to -inf
    n_units = shifted.shape[0]

    def negative_score(z):
        log_w = log_softmax(z)
        joint = shifted + log_w
        log_mix = logsumexp(joint, axis=1, keepdims=True)
        share = np.exp(joint - log_mix)  # r_ik: spec k's share of unit i's mixture density
        return -float(log_mix.sum()) / n_units, -(share.sum(axis=0) - n_units * np.exp(log_w)) / n_units

    result = minimize(negative_score, np.zeros(shifted.shape[1]), jac=True, method="L-BFGS-B",
                      options={"gtol": 1e-10, "ftol": 1e-15, "maxiter": 10_000})
    return softmax(result.x)
