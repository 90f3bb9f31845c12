"""Starting values and the echelon identification of the multidimensional 2PL fitted by
:mod:`.mml_mirt` (SAFE App. C).

- Echelon (lower-triangular) identification: with ``theta ~ N(0, I_D)`` the likelihood is
  unchanged by an orthogonal rotation of the loadings; fixing to zero the loadings of anchor item
  ``j`` (j = 0..D-2) on dimensions ``j+1 .. D-1`` removes those D (D - 1) / 2 degrees of freedom.
- Start values: the D largest eigenpairs of the Pearson (phi) item correlations (missing cells
  at the item mean), communalities capped at 0.8, factor loadings converted to logistic slopes
  ``a = 1.702 lambda / sqrt(1 - h^2)``, a small seeded jitter, rotated into echelon form;
  intercepts from the smoothed p-values, ``d = logit(p) sqrt(1 + |a|^2 / 1.702^2)``.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import eigh
from scipy.special import logit

from bayesirt.data.responses import MISSING
from bayesirt.errors import ConfigError

__all__ = ["LOGISTIC_SCALE", "echelon", "free_mask", "start_values", "anchor_index"]

LOGISTIC_SCALE = 1.702
"""Logistic-to-normal-ogive scale, used for start values and standardized loadings."""


def echelon(loadings: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """Rotate loadings orthogonally so that the anchor rows are lower triangular."""
    d = loadings.shape[1]
    if d == 1:
        return loadings
    q, _ = np.linalg.qr(loadings[anchors].T, mode="complete")  # B' = Q R, so B Q = R' (lower triangular)
    return loadings @ q


def free_mask(n_items: int, n_dims: int, anchors: np.ndarray) -> np.ndarray:
    """Free parameters (items, D+1): anchor j has zero loadings on dimensions j+1..D-1."""
    free = np.ones((n_items, n_dims + 1), dtype=bool)
    for j, item in enumerate(anchors):
        free[item, j + 1:n_dims] = False
    return free


def start_values(y: np.ndarray, n_dims: int, anchors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Starting [a, d] from the eigen decomposition of the Pearson item correlations."""
    obs = y != MISSING
    right = np.where(obs, y == 1, 0).sum(1)
    pv = (right + 0.5) / (obs.sum(1) + 1.0)
    x = np.where(obs, y, 0).astype(float) + np.where(obs, 0.0, pv[:, None])  # missing cells at the item mean
    x -= x.mean(1, keepdims=True)
    sd = np.sqrt((x**2).mean(1))
    xs = x / np.where(sd > 0, sd, 1.0)[:, None]
    corr = xs @ xs.T / x.shape[1]
    n = len(corr)
    vals, vecs = eigh(corr, subset_by_index=[n - n_dims, n - 1])  # the D largest, in ascending order
    lam = vecs[:, ::-1] * np.sqrt(np.maximum(vals[::-1], 0.0))
    h2 = (lam**2).sum(1)
    lam *= np.sqrt(np.minimum(1.0, 0.8 / np.maximum(h2, 1e-12)))[:, None]  # communality at most 0.8
    a = LOGISTIC_SCALE * lam / np.sqrt(1.0 - (lam**2).sum(1))[:, None]
    a = echelon(a + rng.normal(0.0, 0.01, a.shape), anchors)
    a *= np.where(a.sum(0) < 0, -1.0, 1.0)
    a[~free_mask(len(a), n_dims, anchors)[:, :n_dims]] = 0.0
    d = logit(pv) * np.sqrt(1 + (a**2).sum(1) / LOGISTIC_SCALE**2)
    return np.column_stack([a, d])


def anchor_index(anchors, n_dims: int, item_ids: np.ndarray) -> np.ndarray:
    """Positions of the D - 1 anchor items: the first D - 1 items, or the named item ids."""
    if anchors is None:
        return np.arange(n_dims - 1)
    anchors = [str(a) for a in anchors]
    index = {str(i): k for k, i in enumerate(item_ids)}
    unknown = [a for a in anchors if a not in index]
    if len(anchors) != n_dims - 1 or len(set(anchors)) != len(anchors) or unknown:
        raise ConfigError(f"fit_mml_mirt: anchors must name {n_dims - 1} distinct item id(s) (one per dimension after "
                          f"the first) for n_dims = {n_dims}; got {anchors!r}"
                          + (f", unknown: {unknown!r}" if unknown else ""))
    return np.array([index[a] for a in anchors], dtype=int)
