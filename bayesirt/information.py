"""Fisher information of 1PL-4PL items.

For P = c + (u - c) * sigmoid(a * theta + d) with upper asymptote u = 1 - s, the item information
at ability theta is (Lord 1980; Barton & Lord 1981 for the 4PL)

    I(theta) = a^2 * (P - c)^2 * (u - P)^2 / ((u - c)^2 * P * (1 - P)),

which reduces to a^2 * P * (1 - P) for the 2PL (c = 0, u = 1). Test information is the sum over items.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

__all__ = ["item_information"]


def item_information(theta, discrimination, intercept, guessing=0.0, slip=0.0) -> np.ndarray:
    """Fisher information of each item at each ability.

    Parameters
    ----------
    theta : array_like, shape (..., n_models)
    discrimination, intercept, guessing, slip : array_like, shape (..., n_items) or scalar
        Leading axes (e.g. posterior draws) broadcast against those of ``theta``.

    Returns
    -------
    ndarray, shape (..., n_items, n_models)
        Never negative.
    """
    a = np.asarray(discrimination, dtype=float)[..., None]
    d = np.asarray(intercept, dtype=float)[..., None]
    c = np.asarray(guessing, dtype=float)[..., None]
    u = 1.0 - np.asarray(slip, dtype=float)[..., None]
    eta = a * np.asarray(theta, dtype=float)[..., None, :] + d
    sig, sig_minus = expit(eta), expit(-eta)
    p = c + (u - c) * sig  # P
    q = (1.0 - u) + (u - c) * sig_minus  # 1 - P, without cancellation
    # (P - c)(u - P) / (u - c)^2 = sig * (1 - sig); far in the tails both sides underflow to 0.
    num = a**2 * (u - c) ** 2 * (sig * sig_minus) ** 2
    return np.divide(num, p * q, out=np.zeros(np.broadcast_shapes(num.shape, p.shape)), where=num > 0)
