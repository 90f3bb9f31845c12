"""The 1PL-4PL likelihood of the MML engine on a quadrature grid: item parameters and their layout,
distinct response patterns, probabilities and their derivatives, log priors and the E-step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.special import betaln

from bayesirt.models import response

__all__ = ["ItemParameters", "ParameterLayout", "ResponsePatterns", "probabilities", "log_probabilities",
           "probability_gradient", "norm_lpdf", "LOG_SLOPE", "log_priors", "pattern_log_likelihood", "node_posterior", "e_step",
           "expected_counts"]


class ItemParameters(NamedTuple):
    a: np.ndarray
    d: np.ndarray
    c: np.ndarray
    s: np.ndarray


@dataclass(frozen=True)
class ParameterLayout:
    structure: str  # "item" | "common" | "fixed"
    guessing: bool
    slip: bool
    loga: bool  # optimize log a (a prior on a is active)
    priors: dict  # active priors by name

    @property
    def slots(self) -> list[int]:
        """Free per-item slots among 0=a, 1=d, 2=c, 3=s (a shared slope is not per item)."""
        return [k for k, on in enumerate((self.structure == "item", True, self.guessing, self.slip)) if on]


class ResponsePatterns(NamedTuple):
    y1: np.ndarray  # (items, patterns) float 0/1: distinct response patterns (columns)
    y0: np.ndarray
    count: np.ndarray  # (patterns,) models sharing each pattern
    nodes: np.ndarray
    logw: np.ndarray
    complete: bool  # no missing cells: y0 = 1 - y1 saves two matrix products


def probabilities(par: ItemParameters, nodes: np.ndarray):
    """P, 1 - P (formed without cancellation), sigmoid and 1 - sigmoid, shape (items, nodes)."""
    return response.curves(par.a[:, None] * nodes[None, :] + par.d[:, None], par.c[:, None], par.s[:, None])


def log_probabilities(par: ItemParameters, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return response.log_probabilities(par.a[:, None] * nodes[None, :] + par.d[:, None], par.c[:, None], par.s[:, None])


def probability_gradient(par: ItemParameters, nodes: np.ndarray):
    """P, 1 - P and dP/d(a, d, c, s) of shape (items, nodes, 4)."""
    p, q, sg, sm = probabilities(par, nodes)
    ds = response.derivative(sg, sm, c=par.c[:, None], s=par.s[:, None])
    return p, q, np.stack([ds * nodes, ds, sm, -sg], axis=-1)


def norm_lpdf(x, mu: float, sd: float):
    return -0.5 * ((x - mu) / sd) ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi)


#: What the discrimination prior of MAP-EM is a density of (attrs, reports).
LOG_SLOPE = ("the discrimination prior is applied as the density of log a (its density in a times a), so the "
             "mode is the one in the sampler's coordinates (log a, d), as the Laplace fit's centre; the density in a "
             "adds -log a per item, which on a long test pulls the common scale of the slopes to exp(mu - sigma^2) "
             "(0.78 for LogNormal(0, 0.5)) and inflates the abilities (1,000 items: slopes 0.79 of the truth)")


def log_priors(lay: ParameterLayout, par: ItemParameters):
    """Active log priors: per-item value (n,), natural gradient (n, 4), PSD curvature (n, 4, 4)
    in optimization variables, and (value, gradient, curvature) of a shared-slope prior.
    The discrimination prior is the density of log a (:data:`LOG_SLOPE`)."""
    n = par.d.size
    val, grad, curv = np.zeros(n), np.zeros((n, 4)), np.zeros((n, 4, 4))
    shared = [0.0, 0.0, 0.0]
    pr = lay.priors
    if "discrimination" in pr:
        p = pr["discrimination"].params
        a = par.a[:1] if lay.structure == "common" else par.a
        # The density of log a (the prior's density in a times a), as in the Laplace fit: see LOG_SLOPE.
        if pr["discrimination"].distribution == "lognormal":
            v = norm_lpdf(np.log(a), p["mu"], p["sigma"])
            g, k = -(np.log(a) - p["mu"]) / p["sigma"] ** 2 / a, np.full(a.shape, p["sigma"] ** -2.0)
        else:  # halfnormal
            v = norm_lpdf(a, 0.0, p["sigma"]) + np.log(2.0) + np.log(a)
            g, k = 1 / a - a / p["sigma"] ** 2, 2 * a**2 / p["sigma"] ** 2
        if lay.structure == "common":
            shared = [float(v[0]), float(g[0]), float(k[0])]
        else:
            val += v; grad[:, 0] += g; curv[:, 0, 0] += k  # noqa: E702
    for name, loc in (("intercept", True), ("difficulty", False)):
        if name in pr:
            mu, sd = pr[name].params["mu"], pr[name].params["sigma"]
            x = par.d if loc else -par.d / par.a
            val += norm_lpdf(x, mu, sd)
            if loc:
                grad[:, 1] -= (x - mu) / sd**2
                curv[:, 1, 1] += sd**-2.0
            else:  # b = -d / a: db/da = -b / a, db/dd = -1 / a; Gauss-Newton curvature
                jn = np.stack([-x / par.a, -1 / par.a], axis=1)
                grad[:, :2] -= ((x - mu) / sd**2)[:, None] * jn
                jo = jn * np.stack([par.a if lay.loga else np.ones(n), np.ones(n)], axis=1)
                curv[:, :2, :2] += jo[:, :, None] * jo[:, None, :] / sd**2
    for slot, name, x in ((2, "guessing", par.c), (3, "slip", par.s)):
        if name in pr:
            al, be = pr[name].params["alpha"], pr[name].params["beta"]
            with np.errstate(divide="ignore", invalid="ignore"):
                val += (al - 1) * np.log(x) + (be - 1) * np.log1p(-x) - betaln(al, be)
            grad[:, slot] += (al - 1) / x - (be - 1) / (1 - x)
            curv[:, slot, slot] += max(al + be - 2, 0.0) * x * (1 - x)
    return val, grad, curv, shared


def pattern_log_likelihood(data: ResponsePatterns, lp: np.ndarray, lq: np.ndarray) -> np.ndarray:
    """log p(pattern, node) = Y1' log P + Y0' log(1-P) + log w, shape (patterns, nodes)."""
    if data.complete:
        return data.y1.T @ (lp - lq) + (lq.sum(0) + data.logw)
    return data.y1.T @ lp + data.y0.T @ lq + data.logw


def node_posterior(data: ResponsePatterns, ll: np.ndarray):
    """Marginal log-likelihood and count-weighted posterior node weights (patterns, nodes)."""
    mx = ll.max(axis=1, keepdims=True)
    ex = np.exp(np.maximum(ll - mx, -700.0))  # no subnormal weights: they make the matrix products crawl
    tot = ex.sum(axis=1, keepdims=True)
    return float(data.count @ (np.log(tot[:, 0]) + mx[:, 0])), ex * (data.count[:, None] / tot)


def e_step(data: ResponsePatterns, par: ItemParameters):
    return node_posterior(data, pattern_log_likelihood(data, *log_probabilities(par, data.nodes)))


def expected_counts(data: ResponsePatterns, post: np.ndarray):
    """Expected numbers correct r and incorrect n0 per item and node (items, nodes)."""
    r = data.y1 @ post
    return r, (post.sum(0) - r if data.complete else data.y0 @ post)
