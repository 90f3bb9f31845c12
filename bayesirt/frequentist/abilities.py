"""Abilities given MML item parameters: EAP (with posterior SD) on a dense grid, and MAP with its SE."""

from __future__ import annotations

import numpy as np

from bayesirt.frequentist.mml_model import (ItemParameters, ResponsePatterns, log_probabilities, pattern_log_likelihood,
                                            probability_gradient)

__all__ = ["EAP_POINTS", "MAP_BLOCK_CELLS", "eap_abilities", "map_abilities"]


#: Points of the dense grid on which EAP abilities are integrated (see eap_abilities).
EAP_POINTS = 241


def eap_abilities(data: ResponsePatterns, par: ItemParameters, mu: float, sd: float,
                  points: int = EAP_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """EAP and posterior SD of every pattern on a dense, equally spaced grid (mu +/- 6 sd, ``points``
    points: 241 unless the EM's grid was refined, then twice as dense as it).

    The EM's Gauss-Hermite nodes are spaced about 0.3 sd apart near the centre, wider than the
    ability posterior of a long test (on 400 items, a 61-node grid gave posterior SDs of 0.064
    where dense integration gives 0.125), so abilities are integrated on their own grid.
    """
    nodes = mu + sd * np.linspace(-6.0, 6.0, points)
    dense = data._replace(nodes=nodes, logw=-0.5 * ((nodes - mu) / sd) ** 2)
    ll = pattern_log_likelihood(dense, *log_probabilities(par, nodes))
    weight = np.exp(ll - ll.max(axis=1, keepdims=True))
    weight /= weight.sum(axis=1, keepdims=True)
    eap = weight @ nodes
    return eap, np.sqrt(np.maximum(weight @ nodes**2 - eap**2, 0.0))


#: Cells (items x models) of one block of :func:`map_abilities`: its Fisher scoring holds a few float64
#: arrays of a block's size (about 30 bytes a cell), so a block takes ~120 MB whatever the matrix.
MAP_BLOCK_CELLS = 4_000_000


def map_abilities(data: ResponsePatterns, par: ItemParameters, mu: float, sd: float, start: np.ndarray):
    """MAP abilities by Fisher scoring with step halving, vectorized over the models not yet
    converged; SE = 1 / sqrt(test information + 1 / sd^2). Each model's iterations depend on its
    own responses only, so blocks of models (:data:`MAP_BLOCK_CELLS`) give the numbers of one pass
    (up to rounding), in memory bounded by the block."""
    th, se = start.astype(float, copy=True), np.empty(start.size)
    block = max(1, MAP_BLOCK_CELLS // max(1, data.y1.shape[0]))
    for lo in range(0, start.size, block):
        cols = slice(lo, lo + block)
        th[cols], se[cols] = _map_block(data.y1[:, cols], data.y0[:, cols], par, mu, sd, th[cols])
    return th, se


def _map_block(y1_all, y0_all, par: ItemParameters, mu: float, sd: float, start: np.ndarray):
    """:func:`map_abilities` of the models whose response counts are the columns of ``y1_all``, ``y0_all``."""
    def terms(th, y1, y0):
        p, q, dp = probability_gradient(par, th)
        dth = dp[:, :, 1] * par.a[:, None]
        grad = ((y1 / p - y0 / q) * dth).sum(0) - (th - mu) / sd**2
        return grad, ((y1 + y0) * dth**2 / (p * q)).sum(0) + sd**-2.0

    def logpost(th, y1, y0):
        lp, lq = log_probabilities(par, th)
        return (y1 * lp + y0 * lq).sum(0) - 0.5 * ((th - mu) / sd) ** 2

    th, act = start.copy(), np.arange(start.size)
    for _ in range(100):
        y1, y0, x = y1_all[:, act], y0_all[:, act], th[act]
        cur = logpost(x, y1, y0)
        grad, info = terms(x, y1, y0)
        step, t = np.clip(grad / info, -2, 2), np.ones_like(x)
        for _ in range(30):
            bad = ~(logpost(x + t * step, y1, y0) >= cur - 1e-13 * (1 + np.abs(cur)))
            if not bad.any():
                break
            t = np.where(bad, t / 2, t)
        t = np.where(bad, 0.0, t)
        th[act] = x + t * step
        act = act[np.abs(t * step) > 1e-8]
        if act.size == 0:
            break
    return th, 1 / np.sqrt(terms(th, y1_all, y0_all)[1])
