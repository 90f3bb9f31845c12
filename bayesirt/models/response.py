"""The 1PL-4PL item response function, written once: the probability of a correct response, its
derivatives in ability, the item's Fisher information and the Bernoulli log-likelihood.

Parameterization. Every engine of the package computes in slope-intercept form,

    P(theta) = c + (1 - c - s) * sigmoid(eta),   eta = a * theta + d,

with discrimination ``a``, intercept ``d``, guessing (lower asymptote) ``c`` and slip ``s`` (upper
asymptote ``u = 1 - s``): the 1PL has one ``a`` for all items, the 2PL ``c = s = 0``, the 3PL
``s = 0``. The slope-difficulty form ``eta = a * (theta - b)`` is the same curve with ``d = -a * b``;
the specs that put their prior on the difficulty (``location = "difficulty"``), the simulator and the
reports use ``b``, and convert before they get here. A compensatory MIRT item is the 2PL at
``eta = a . theta + d``.

The functions take ``eta``, not ``theta``, because callers lay out their (item, node), (draw, item,
node) or (model, node, item) arrays differently; ``c`` and ``s`` broadcast against ``eta``. Where
a derivative in ability needs the slope, it is passed as ``a`` (broadcast like ``eta``).

NumPy forms broadcast. The numba form of the information is :func:`information_of_sigmoids` itself:
it is written with arithmetic and ``np.maximum`` only, so numba compiles the same source for one
cell (:mod:`bayesirt.models.information` compiles it into its summing loop, with its own sigmoids).

Numerical stability at large ``|eta|``: 1 - P is formed as ``(1 - c) sigmoid(-eta) + s sigmoid(eta)``,
never as ``1 - P``; :func:`curves` floors P and 1 - P at :data:`TINY` so that ratios and logs stay
finite; :func:`log_probabilities` stays accurate in the tails (``log_expit`` for the 2PL, a
``logaddexp`` form for the cells whose P or 1 - P underflows otherwise).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import expit, log_expit

__all__ = ["TINY", "Curves", "probability", "curves", "derivative", "second_derivative", "information",
           "information_of_sigmoids", "log_probabilities", "log_likelihood", "response_probability"]

#: Floor of P and 1 - P in :func:`curves` (and the cells :func:`log_probabilities` recomputes exactly).
TINY = 1e-300


class Curves(NamedTuple):
    """P, 1 - P (without cancellation; both floored at :data:`TINY`), sigmoid(eta) and sigmoid(-eta)."""

    p: np.ndarray
    q: np.ndarray
    sg: np.ndarray
    sm: np.ndarray


def probability(eta, c=0.0, s=0.0):
    """P(correct) = c + (1 - c - s) * sigmoid(eta), unfloored."""
    return c + (1 - c - s) * expit(eta)


def curves(eta, c=0.0, s=0.0) -> Curves:
    """:class:`Curves` at ``eta``: what the derivatives, scores and information are built from."""
    sg, sm = expit(eta), expit(-eta)
    p = np.maximum(c + (1 - c - s) * sg, TINY)
    q = np.maximum((1 - c) * sm + s * sg, TINY)
    return Curves(p, q, sg, sm)


def derivative(sg, sm, a=1.0, c=0.0, s=0.0):
    """dP/dtheta = (1 - c - s) * a * sigmoid(eta) * sigmoid(-eta) for ``eta = a theta + d``; with
    ``a = 1`` (the default), dP/deta."""
    return (1 - c - s) * a * sg * sm


def second_derivative(dp, sg, sm, a=1.0):
    """d2P/dtheta2 from the first derivative ``dp`` of :func:`derivative` (same ``a``): dp * a * (sigmoid(-eta)
    - sigmoid(eta)); with ``a = 1``, d2P/deta2."""
    return dp * a * (sm - sg)


def information_of_sigmoids(sg, sm, a, c, s):
    """Fisher information (dP/dtheta)^2 / (P (1 - P)) from sigmoid(eta) and sigmoid(-eta), which is

        a^2 (1 - c - s)^2 (sigmoid(eta) sigmoid(-eta))^2 / (P (1 - P))    (Lord 1980; Barton & Lord 1981)

    and a^2 P (1 - P) for the 2PL; 0 where the numerator underflows (far in the tails). Arithmetic and
    ``np.maximum`` only: NumPy arrays broadcast, and numba compiles it for scalars."""
    k = 1.0 - c - s
    p = c + k * sg
    q = (1.0 - c) * sm + s * sg
    return a**2 * k**2 * (sg * sm) ** 2 / np.maximum(p * q, TINY)


def information(eta, a, c=0.0, s=0.0):
    """Fisher information of the item in ability at ``eta = a theta + d`` (never negative)."""
    return information_of_sigmoids(expit(eta), expit(-eta), a, c, s)


def log_probabilities(eta, c=0.0, s=0.0) -> tuple[np.ndarray, np.ndarray]:
    """log P and log(1 - P), finite at every ``eta`` while ``c + s < 1``.

    Without asymptotes (every ``c`` and ``s`` zero) ``log_expit(eta)`` and ``log_expit(eta) - eta``. With
    them the direct logs of :func:`curves`; the cells where P or 1 - P fell below :data:`TINY` (an
    item without guessing far below its difficulty, or without slip far above) are recomputed as
    ``logaddexp(log c, log(1 - c - s) + log_expit(eta))`` and its mirror."""
    if np.all(np.asarray(c) == 0) and np.all(np.asarray(s) == 0):
        log_p = log_expit(eta)
        return log_p, log_p - eta  # log sigmoid(-eta) = log sigmoid(eta) - eta: one log_expit, not two
    p, q, _, _ = curves(eta, c, s)
    log_p, log_q = np.log(p), np.log(q)
    tail = (p <= TINY) | (q <= TINY)
    if np.any(tail):  # rare, so the exact forms (a logaddexp per cell) are formed only then, and kept in the tail
        log_k = np.log(1 - c - s)
        with np.errstate(divide="ignore"):  # log 0 = -inf is logaddexp's neutral element
            log_p = np.where(tail, np.logaddexp(np.log(c), log_k + log_expit(eta)), log_p)
            log_q = np.where(tail, np.logaddexp(np.log(s), log_k + log_expit(-eta)), log_q)
    # P can round to one ulp above 1 (c = 0.2, s = 0, sigmoid(eta) = 1): its log stays <= 0
    return np.minimum(log_p, 0.0), np.minimum(log_q, 0.0)


def log_likelihood(correct, eta, c=0.0, s=0.0):
    """Bernoulli log-likelihood of each response: log P where ``correct`` is true, log(1 - P) elsewhere."""
    log_p, log_q = log_probabilities(eta, c, s)
    return np.where(correct, log_p, log_q)


def response_probability(theta, discrimination, intercept, guessing=0.0, slip=0.0):
    """P(correct) for every (item, model) pair, NumPy broadcasting over leading sample dims.

    Parameters are arrays whose last axis is ``item`` (or ``model`` for theta); a scalar
    discrimination is a common slope. Returns an array with trailing axes (item, model).
    """
    a = np.asarray(discrimination)[..., None] if np.ndim(discrimination) else discrimination
    eta = a * np.asarray(theta)[..., None, :] + np.asarray(intercept)[..., None]
    c = np.asarray(guessing)[..., None] if np.ndim(guessing) else guessing
    s = np.asarray(slip)[..., None] if np.ndim(slip) else slip
    return probability(eta, c, s)
