"""Marginal likelihood of a model's whole response pattern, with its ability integrated out.

For item parameters phi (one posterior draw) and the population distribution of abilities
``theta ~ N(mu, Sigma)``,

    p(y_m | phi) = integral  prod_i p(y_im | theta, phi)  N(theta; mu, Sigma)  d theta,

the quantity that leave-one-model-out cross-validation needs: a new LLM arrives with an unknown
ability, so its ability is integrated, not plugged in. The integral is computed per model and draw
by *adaptive* quadrature (Liu & Pierce 1994): the grid is centred at the mode of the integrand
(Fisher scoring) and scaled by the Cholesky factor of its inverse curvature, so a handful of
nodes per dimension suffice even for long response patterns, whose ability posterior is far
narrower than any fixed grid spacing. Gauss-Hermite product nodes are used for D <= 3 and
importance sampling from a multivariate Student-t (5 degrees of freedom) around the same mode
beyond, where a product grid grows too fast. Both are one formula,

    log p(y_m | phi) ~= logsumexp_k [ log w_k + log f(mode + C z_k) + log|C| - log g(z_k) ],

with f the integrand and g the density the nodes z_k are for (standard normal for Gauss-Hermite,
the Student-t proposal for importance sampling). ``tests/test_marginal.py`` checks it against
brute-force grid integration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy import stats
from scipy.special import logsumexp

from bayesirt.errors import DataError
from bayesirt.models.response import curves, derivative, log_probabilities

__all__ = ["ItemDraws", "pattern_log_marginal", "quadrature_rule", "GH_NODES", "IMPORTANCE_SAMPLES"]

#: Adaptive Gauss-Hermite nodes per dimension, by number of dimensions.
GH_NODES = {1: 21, 2: 11, 3: 7}
#: Importance samples for D >= 4.
IMPORTANCE_SAMPLES = 2000
_T_DF = 5
_SCORING_STEPS = 30
_MAX_STEP = 1.0  # largest Fisher-scoring step (in ability units), for the flat tails of 3PL/4PL


@dataclass(frozen=True)
class ItemDraws:
    """Item parameters of one posterior draw and the ability population.

    loading : (n_items, D); intercept : (n_items,); guessing, slip : (n_items,) or scalar;
    mean : (D,); covariance : (D, D).
    """

    loading: np.ndarray
    intercept: np.ndarray
    guessing: np.ndarray | float
    slip: np.ndarray | float
    mean: np.ndarray
    covariance: np.ndarray


def quadrature_rule(dimensions: int, *, nodes: int | None = None, samples: int | None = None,
                    seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Standardized nodes ``z`` (Q, D), log weights (Q,) and the log density the nodes are for (Q,).

    Gauss-Hermite product rule (probabilists' weights, summing to one) for D <= 3 or when
    ``nodes`` is given; otherwise ``samples`` draws from a multivariate Student-t with 5 degrees
    of freedom (seeded), each with weight 1 / samples.
    """
    if nodes is None and samples is None and dimensions in GH_NODES:
        nodes = GH_NODES[dimensions]
    if nodes is not None:
        x, w = hermegauss(nodes)
        grids = np.meshgrid(*([x] * dimensions), indexing="ij")
        z = np.stack([g.ravel() for g in grids], axis=1)
        log_w = sum(np.log(wg.ravel()) for wg in np.meshgrid(*([w / np.sqrt(2 * np.pi)] * dimensions), indexing="ij"))
        log_g = stats.norm.logpdf(z).sum(axis=1)
        return z, log_w, log_g
    samples = samples or IMPORTANCE_SAMPLES
    t = stats.multivariate_t(loc=np.zeros(dimensions), shape=np.eye(dimensions), df=_T_DF)
    z = t.rvs(size=samples, random_state=np.random.default_rng(seed)).reshape(samples, dimensions)
    return z, np.full(samples, -np.log(samples)), t.logpdf(z).reshape(samples)


def _mode(y: np.ndarray, observed: np.ndarray, draw: ItemDraws, precision: np.ndarray):
    """Mode of log f per model by Fisher scoring, and the curvature there (M, D, D)."""
    a, d, c, s = draw.loading, draw.intercept, draw.guessing, draw.slip
    n_models = y.shape[0]
    theta = np.tile(draw.mean, (n_models, 1))
    moving = np.ones(n_models, dtype=bool)
    for _ in range(_SCORING_STEPS):
        p, q, sg, sm = curves(theta @ a.T + d, c, s)
        dp = derivative(sg, sm, c=c, s=s)
        pq = np.maximum(p * q, 1e-300)
        score = np.where(observed, (y - p) * dp / pq, 0.0)
        weight = np.where(observed, dp * dp / pq, 0.0)
        grad = score @ a - (theta - draw.mean) @ precision
        hess = np.einsum("mi,id,ie->mde", weight, a, a) + precision
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        norm = np.linalg.norm(step, axis=1, keepdims=True)
        moving &= norm[:, 0] >= 1e-10  # a model stops on its own criterion: blocks do not matter
        if not moving.any():
            break
        theta = theta + np.where(moving[:, None], step * np.minimum(1.0, _MAX_STEP / np.maximum(norm, 1e-300)), 0.0)
    return theta, hess


def pattern_log_marginal(y: np.ndarray, observed: np.ndarray, draw: ItemDraws,
                         rule: tuple[np.ndarray, np.ndarray, np.ndarray], *, chunk_elements: int = 4_000_000) -> np.ndarray:
    """log p(y_m | phi) for every model m (rows of ``y``), one draw of item parameters.

    Parameters
    ----------
    y, observed : (n_models, n_items) arrays
        Responses as 0/1 (any value where unobserved) and the observed mask.
    draw : ItemDraws
    rule : from :func:`quadrature_rule`
    chunk_elements : int
        Models are processed in blocks so that the (models x nodes x items) array stays below
        this many elements.
    """
    if not np.all(np.isfinite(draw.covariance)) or np.linalg.eigvalsh(draw.covariance).min() <= 0:
        raise DataError("the ability covariance of a draw is not positive definite; check the posterior")
    z, log_w, log_g = rule
    precision = np.linalg.inv(draw.covariance)
    pop = stats.multivariate_normal(mean=draw.mean, cov=draw.covariance)
    a, d = draw.loading, draw.intercept
    c = np.asarray(draw.guessing, dtype=float)
    s = np.asarray(draw.slip, dtype=float)
    n_models, n_items = y.shape
    n_nodes, n_dims = z.shape
    out = np.empty(n_models)
    block = max(1, chunk_elements // max(1, n_nodes * n_items))
    for start in range(0, n_models, block):
        sl = slice(start, start + block)
        yb, ob = y[sl], observed[sl]
        mode, hess = _mode(yb, ob, draw, precision)
        chol = np.linalg.cholesky(np.linalg.inv(hess))  # (m, D, D)
        theta = mode[:, None, :] + np.einsum("mde,qe->mqd", chol, z)  # (m, Q, D)
        log_p, log_q = log_probabilities(theta @ a.T + d, c, s)  # (m, Q, I)
        loglik = (log_p @ np.where(ob, yb, 0.0)[:, :, None] + log_q @ np.where(ob, 1.0 - yb, 0.0)[:, :, None])[..., 0]
        log_prior = pop.logpdf(theta.reshape(-1, n_dims)).reshape(theta.shape[:2])
        log_det = np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
        out[sl] = logsumexp(loglik + log_prior + (log_w - log_g)[None, :], axis=1) + log_det
    return out

