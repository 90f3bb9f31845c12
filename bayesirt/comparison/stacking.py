"""Weights of predictive distributions (Yao, Vehtari, Simpson & Gelman 2018), computed on the log scale:
stacking and pseudo-BMA+ (Bayesian-bootstrap pseudo-BMA).

The weights maximize the leave-one-out log score of the mixture,
``sum_i log sum_k w_k exp(elpd_ik)``, over the simplex. ArviZ's ``compare`` evaluates
``exp(elpd_ik)`` directly; when a unit is a whole response pattern (leave-one-model-out elpd of
hundreds of log units per model) every term underflows to 0, the objective is ``log 0`` and its
optimizer stops at the equal weights it started from. Here the mixture density is a log-sum-exp,
the weights are the softmax of free parameters ``z``, and the gradient has the closed form
``d/dz_j = -sum_i (r_ij - w_j)`` with ``r_ik`` the posterior share of spec ``k`` in unit ``i``'s
mixture. The objective is concave in ``w``, so the optimum is unique where the specs' elpd vectors
are not collinear; on elpd that does not underflow it equals ArviZ's (``tests/test_stacking.py``).

The two weights answer different questions. Stacking weights are the mixture of the specs that
predicts held-out units best; two near-nested specs (a 2PL and a 3PL) can share the weight even when
one leads by several dse, since each predicts some units better and the mixture beats either alone.
Pseudo-BMA+ weights are ``exp(elpd_k)`` normalized, averaged over Bayesian-bootstrap replicates of
the units (Dirichlet(1, ..., 1) weights ``beta``: ``elpd_k = n sum_i beta_i elpd_ik``), so they are
close to the share of replicates in which each spec has the highest elpd: a spec that leads by several
dse takes almost all of it. ArviZ's ``compare(method="BB-pseudo-BMA")`` computes the same with
1,000 replicates.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.special import log_softmax, logsumexp, softmax

__all__ = ["stacking_weights", "pseudo_bma_plus_weights", "BOOTSTRAP_REPLICATES"]

#: Bayesian-bootstrap replicates of pseudo-BMA+ (ArviZ's number).
BOOTSTRAP_REPLICATES = 1000


def stacking_weights(elpd_i: np.ndarray) -> np.ndarray:
    """Stacking weights of ``K`` specs from their pointwise elpd, a ``(units, K)`` array.

    Returns ``K`` non-negative weights summing to one. Adding a constant to a unit's row (any
    scale of the pointwise elpd) leaves them unchanged.
    """
    shifted = _shifted(elpd_i, "stacking")
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


def pseudo_bma_plus_weights(elpd_i: np.ndarray, *, replicates: int = BOOTSTRAP_REPLICATES, seed: int = 0) -> np.ndarray:
    """Pseudo-BMA+ weights of ``K`` specs from their pointwise elpd, a ``(units, K)`` array (Yao et al.
    2018, sec. 3.3): the softmax of ``n sum_i beta_i elpd_ik`` averaged over ``replicates`` Bayesian-bootstrap
    draws ``beta ~ Dirichlet(1, ..., 1)`` (drawn with ``seed``). Like the stacking weights, unchanged by a
    constant added to a unit's row."""
    shifted = _shifted(elpd_i, "pseudo-BMA+")
    n_units = shifted.shape[0]
    beta = np.random.default_rng(seed).dirichlet(np.ones(n_units), size=replicates)  # (replicates, units)
    return softmax(n_units * (beta @ shifted), axis=1).mean(axis=0)


def _shifted(elpd_i: np.ndarray, what: str) -> np.ndarray:
    """The (units, specs) pointwise elpd with each unit's best spec at 0 (nothing underflows to -inf)."""
    elpd_i = np.asarray(elpd_i, dtype=float)
    if elpd_i.ndim != 2 or elpd_i.shape[1] < 1 or not np.isfinite(elpd_i).all():
        raise ValueError(f"{what} needs a finite (units, specs) array of pointwise elpd; got shape {elpd_i.shape}")
    return elpd_i - elpd_i.max(axis=1, keepdims=True)
