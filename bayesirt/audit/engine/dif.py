"""Residual family DIF by the clipped Newton scheme of NT App. C.4.

With capability offsets o (item, model) fixed, the item easiness b_i and family effects
delta_{i,f} minimize the penalized Bernoulli deviance of

    xi_im = b_i + o_im + delta_{i, f(m)},   penalty (lambda / 2) sum_{i,f} delta_{if}^2,  lambda = 1

with delta centred within item (eq. 3-4). The schedule is NT's: start from
b_i = logit(clip(mean_m Y_im, 1e-4, 1 - 1e-4)) - mean_m o_im and delta = 0; then up to
``cycles`` alternations of (a) Newton on b with delta fixed, steps g / (H + 1e-9) clipped to
+/-2, and (b) Newton on delta with b fixed, penalized score and information, steps clipped to
+/-2; each Newton subproblem runs at most ``newton_iterations`` times and stops when the largest
absolute step is below ``tolerance``; after every delta sweep, delta is centred within item and
its mean moved into b (the linear predictors are unchanged). The alternation stops early when
the largest change of delta over a cycle is below ``tolerance``.

Every item is updated at once (the subproblems of different items, and of different families of
one item, are independent given the other block), so "the largest absolute step" is over all items.
Missing cells contribute nothing. D_i = max_f delta_if - min_f delta_if (eq. 5).

Optional model ``weights`` w_m >= 0 are frequency weights: every model's deviance is multiplied
by w_m (integer weights give the fit of the data with model m repeated w_m times). The Bayesian
bootstrap of the audit half (:mod:`bayesirt.audit.bayes.bootstrap`) uses them.

NT's five cycles need not reach the penalized optimum; ``cycles`` and ``tolerance`` can be raised
to run the same scheme to convergence (the Bayesian layer's check uses that).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logit

from bayesirt.audit.engine.dif_kernel import NO_WEIGHTS, family_moments, negative_exp

__all__ = ["DIF_PENALTY", "DIF_CYCLES", "NEWTON_ITERATIONS", "NEWTON_TOLERANCE", "MAX_STEP", "DIFFit",
           "fit_family_dif"]

DIF_PENALTY = 1.0
DIF_CYCLES = 5
NEWTON_ITERATIONS = 30
NEWTON_TOLERANCE = 1e-8
MAX_STEP = 2.0


@dataclass(frozen=True)
class DIFFit:
    """Residual family DIF of every item.

    Attributes
    ----------
    easiness : ndarray (item,)
        b_i.
    family_effect : ndarray (item, family)
        delta_{i,f}, centred within item.
    dif_range : ndarray (item,)
        D_i = max_f delta_if - min_f delta_if.
    cycles : int
        Alternations run.
    last_change : float
        Largest change of delta over the last cycle.
    newton_capped : int
        Inner Newton solves (one on b and one on delta per cycle) that stopped at
        ``newton_iterations`` steps with the largest step still above ``tolerance``.
    """

    easiness: np.ndarray
    family_effect: np.ndarray
    dif_range: np.ndarray
    cycles: int
    last_change: float
    newton_capped: int = 0


def _newton(step_fn, value: np.ndarray, iterations: int, tolerance: float) -> tuple[np.ndarray, bool]:
    """Clipped Newton steps until the largest is below ``tolerance``; also whether the solve stopped
    at ``iterations`` without getting there (its step cap)."""
    for _ in range(iterations):
        step = np.clip(step_fn(value), -MAX_STEP, MAX_STEP)
        value = value + step
        if np.abs(step).max() < tolerance:
            return value, False
    return value, True


def fit_family_dif(y: np.ndarray, observed: np.ndarray, offsets: np.ndarray, family: np.ndarray, n_families: int,
                   *, penalty: float = DIF_PENALTY, cycles: int = DIF_CYCLES, newton_iterations: int = NEWTON_ITERATIONS,
                   tolerance: float = NEWTON_TOLERANCE, weights: np.ndarray | None = None) -> DIFFit:
    """Fit b and delta by NT's clipped alternating Newton scheme (module docstring).

    Parameters
    ----------
    y, observed : ndarray (item, model)
        Responses (1 correct) and the observed mask.
    offsets : ndarray (item, model)
        Fixed capability offsets o_im.
    family : ndarray of int (model,)
        Family index 0..n_families-1 of each model.
    n_families : int
    penalty, cycles, newton_iterations, tolerance
        lambda and the schedule (defaults: NT's 1, 5, 30, 1e-8).
    weights : ndarray (model,), optional
        Frequency weight of every model (module docstring); None weighs every model 1.

    Returns
    -------
    DIFFit
    """
    complete = weights is None and bool(observed.all())
    w = None if complete else observed.astype(np.float64)  # complete data: no mask in the sums
    if weights is not None:
        w *= np.asarray(weights, dtype=np.float64)[None, :]
    y_obs = np.where(observed, y, 0).astype(np.float64)
    if weights is not None:
        y_obs *= w
    onehot = np.zeros((family.size, n_families))
    onehot[np.arange(family.size), family] = 1.0
    n_obs = observed.sum(axis=1) if weights is None else w.sum(axis=1)
    y_item = y_obs.sum(axis=1)  # the data enter the scores only through these sums
    y_family = y_obs @ onehot
    p0 = np.clip(y_item / n_obs, 1e-4, 1 - 1e-4)
    b = logit(p0) - (offsets.sum(axis=1) if complete else (offsets * w).sum(axis=1)) / n_obs
    delta = np.zeros((y.shape[0], n_families))
    # Within one Newton solve the linear predictor is base + v (v: the parameter being solved),
    # so sigmoid(base + v) = 1 / (1 + exp(-base) exp(-v)): exp(-base) is computed once per solve
    # (negative_exp, base clipped to +-700 so that it stays finite) and a step costs a product and
    # a reciprocal per cell, summed by family in one compiled pass (bayesirt.audit.engine.dif_kernel).
    offsets = np.ascontiguousarray(offsets, dtype=np.float64)
    weight = NO_WEIGHTS if complete else np.ascontiguousarray(w)
    family = np.ascontiguousarray(family, dtype=np.intp)
    one_family = np.zeros(family.size, dtype=np.intp)
    e_base = np.empty(offsets.shape)

    def b_step(value):
        mass, curvature = family_moments(e_base, np.exp(-value)[:, None], one_family, weight)
        mass, curvature = mass[:, 0], curvature[:, 0]
        return (y_item - mass) / (mass - curvature + 1e-9)

    def delta_step(value):
        mass, curvature = family_moments(e_base, np.exp(-value), family, weight)
        return (y_family - mass - penalty * value) / (mass - curvature + penalty)

    change, cycle, capped = np.inf, 0, 0
    for cycle in range(1, cycles + 1):
        negative_exp(offsets, delta, family, e_base)
        b, b_capped = _newton(b_step, b, newton_iterations, tolerance)
        before = delta
        negative_exp(offsets, b[:, None], one_family, e_base)
        delta, delta_capped = _newton(delta_step, delta, newton_iterations, tolerance)
        capped += int(b_capped) + int(delta_capped)
        mean = delta.mean(axis=1)
        delta, b = delta - mean[:, None], b + mean
        change = float(np.abs(delta - before).max())
        if change < tolerance:
            break
    return DIFFit(easiness=b, family_effect=delta, dif_range=delta.max(axis=1) - delta.min(axis=1), cycles=cycle,
                  last_change=change, newton_capped=capped)
