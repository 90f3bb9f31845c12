"""The ability grid of the MML engine, refined to the test length.

The Gauss-Hermite grid of ``fit_mml(quadrature=61)`` has its nodes about 0.4 population sds apart
near the centre (wider outside). A model's ability posterior on a long test is narrower than that
(about 0.07 sd on 1,000 items), so its likelihood sits on one or two nodes and the grid, not the data,
sets the scale: on 755 models x 1,000 items drawn from the 2PL spec's priors the 61-node grid made the
abilities' E[theta^2] 1.31 instead of 1 and the slopes 0.80 of the truth. An equally spaced grid
integrates a smooth peak of sd ``s`` with spacing ``h`` to a relative error of about
``2 exp(-2 pi^2 s^2 / h^2)`` (3e-9 at ``h = s``), so where the posteriors are narrower than the
grid's spacing the EM continues on an equally spaced grid over mu +/- 6 sd with spacing at most the
posterior sd of the sharpest 5% of models (:func:`refined_grid`).
"""

from __future__ import annotations

import numpy as np

from bayesirt.frequentist.mml_model import ItemParameters, ResponsePatterns
from bayesirt.models.response import information

__all__ = ["COARSE", "MAX_NODES", "posterior_sds", "grid_coarseness", "uniform_grid", "refined_grid"]

#: A grid is too coarse where its local spacing exceeds this many posterior sds for more than 5% of models.
COARSE = 1.0
#: Most nodes of a refined grid (spacing 0.01 sd: posterior sds of tests of ~15,000 items).
MAX_NODES = 1201
_HALF_WIDTH = 6.0
_BLOCK_CELLS = 4_000_000


def posterior_sds(data: ResponsePatterns, par: ItemParameters, post: np.ndarray, sd: float) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean on the grid and the Laplace posterior sd ``1 / sqrt(I(theta) + 1 / sd^2)`` of
    every pattern, the test information ``I`` taken at that mean (observed items only)."""
    pi = post / post.sum(axis=1, keepdims=True)
    mean = pi @ data.nodes
    info = np.empty(mean.size)
    block = max(1, _BLOCK_CELLS // max(1, par.d.size))
    for lo in range(0, mean.size, block):
        sl = slice(lo, lo + block)
        eta = par.a[:, None] * mean[None, sl] + par.d[:, None]
        item_info = information(eta, par.a[:, None], par.c[:, None], par.s[:, None])
        info[sl] = ((data.y1[:, sl] + data.y0[:, sl]) * item_info).sum(0)
    return mean, 1 / np.sqrt(info + sd**-2.0)


def grid_coarseness(nodes: np.ndarray, mean: np.ndarray, sds: np.ndarray, count: np.ndarray) -> float:
    """95th percentile over models of (local node spacing at the model's posterior mean) / (posterior sd)."""
    mid, gap = (nodes[1:] + nodes[:-1]) / 2, np.diff(nodes)
    ratio = np.interp(mean, mid, gap) / sds
    order = np.argsort(ratio)
    cum = np.cumsum(count[order]) / count.sum()
    return float(ratio[order][np.searchsorted(cum, 0.95)])


def uniform_grid(spacing: float, mu: float, sd: float) -> tuple[np.ndarray, np.ndarray]:
    """Equally spaced nodes over ``mu +/- 6 sd`` at most ``spacing`` apart (at most :data:`MAX_NODES`),
    with normal weights summing to 1 (the trapezoid rule)."""
    n = min(MAX_NODES, int(np.ceil(2 * _HALF_WIDTH * sd / spacing)) + 1)
    n += 1 - n % 2  # odd: a node at mu
    t = np.linspace(-_HALF_WIDTH, _HALF_WIDTH, n)
    w = np.exp(-0.5 * t**2)
    return mu + sd * t, w / w.sum()


def refined_grid(data: ResponsePatterns, par: ItemParameters, post: np.ndarray, mu: float, sd: float):
    """``(nodes, weights, coarseness)`` of the grid the EM should continue on, or None when the current
    grid's coarseness (:func:`grid_coarseness`) is at most :data:`COARSE`."""
    mean, sds = posterior_sds(data, par, post, sd)
    coarse = grid_coarseness(data.nodes, mean, sds, data.count)
    if coarse <= COARSE:
        return None
    order = np.argsort(sds)
    sharp = sds[order][np.searchsorted(np.cumsum(data.count[order]) / data.count.sum(), 0.05)]
    return (*uniform_grid(min(float(sharp), 0.2 * sd), mu, sd), coarse)
