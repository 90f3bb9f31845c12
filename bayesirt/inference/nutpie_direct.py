"""The 1PL/2PL posterior as a nutpie model without PyTensor: log density and gradient written in numba.

``nutpie.compile_pymc_model`` compiles PyTensor's graph of the model of
:func:`bayesirt.models.logistic.build_logistic` into two numba functions, about 180 numba
compilations that take 11.5 s at 300 models x 1,000 items with empty caches and 4.2 s with warm ones
(sampling then takes 12-30 s). :func:`direct_model` hands nutpie the same posterior through its
public ``nutpie.compiled_pyfunc.from_pyfunc``: the log density and its gradient in the same
unconstrained coordinates, as two small ``@numba.njit(cache=True, nogil=True)`` functions around the
likelihood kernel :func:`bayesirt.models.kernels.loglik_and_gradient`. They are compiled once per
machine (numba's on-disk cache) and release the GIL, so nutpie's chains, which are threads of this
process, evaluate them in parallel.

The unconstrained point is, in order (PyMC's order of the free variables and its transforms):

* ``theta_mean`` ~ N(mu, sigma / sqrt(n_models));
* ``theta_deviation`` ~ ZeroSumNormal(sigma), as its n_models - 1 coordinates under PyMC's
  ``ZeroSumTransform`` (an isometry onto the zero-sum vectors; log-Jacobian 0);
* the log of ``discrimination`` ~ LogNormal (one per item, one common value, or none for a fixed
  slope); LogNormal's ``-log a`` and the log transform's Jacobian ``log a`` cancel, so its density
  in these coordinates is the normal one (PyMC adds ``-log(exp(u)) + u``, zero to rounding);
* ``intercept_centered`` ~ N(mu + a * theta_mean, sigma) (slope-intercept), or
  ``difficulty_centered`` ~ N(mu - theta_mean, sigma) with the likelihood's intercept -a * b_c.

Every normalizing constant is PyMC's, so the value equals ``pm.Model.compile_logp(jacobian=True)`` of
``build_logistic``'s model at the same point (``tests/test_nutpie_direct.py`` checks value and
gradient against it). The draws are expanded to the variables a fit reports (``theta``,
``discrimination``, ``intercept``, and ``difficulty`` when the spec puts its prior there), with the
shapes, dims and dtypes of the PyMC path.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.data.responses import MISSING
from bayesirt.models.kernels import BY_MODEL_BELOW, loglik_and_gradient
from bayesirt.models.logistic import DENSE_FROM
from bayesirt.models.specs import IRTSpec

__all__ = ["DirectModel", "direct_eligible", "direct_model"]

_LOG_SQRT_2PI = math.log(math.sqrt(2.0 * math.pi))  # as PyMC writes the normal constant: log(sqrt(2 pi))


def direct_eligible(responses: xr.Dataset, spec) -> bool:
    """Whether :func:`direct_model` can express the posterior of ``spec`` on ``responses``: a 1PL/2PL
    logistic spec (no asymptotes) whose priors have plain-number parameters (no hyperpriors), a normal
    ability and location prior, a lognormal or fixed slope, and a matrix dense enough for the dense
    likelihood (observed share >= :data:`~bayesirt.models.logistic.DENSE_FROM`, as ``build_logistic``)."""
    if not isinstance(spec, IRTSpec) or spec.has_guessing or spec.has_slip or spec.hierarchical:
        return False
    priors = spec.priors
    if priors["theta"].distribution != "normal" or priors[spec.location].distribution != "normal":
        return False
    if spec.discrimination_structure != "fixed" and priors["discrimination"].distribution != "lognormal":
        return False
    y = responses["responses"].values
    return y.size > 0 and float((y != MISSING).mean()) >= DENSE_FROM


@dataclass(frozen=True)
class DirectModel:
    """A nutpie model of a 1PL/2PL posterior (``compiled``, for ``nutpie.sample``), the variables its
    draws are expanded to (``reported_variables``, as ``build_logistic``'s model lists them), and the
    functions nutpie calls: ``logp(x)`` -> (log density, gradient) at an unconstrained point, and
    ``initial_point(seed)``."""

    compiled: object
    reported_variables: list[str]
    logp: Callable[[np.ndarray], tuple[float, np.ndarray]]
    initial_point: Callable[[int], np.ndarray]


@numba.njit(cache=True, nogil=True)
def _parameters(x, n_models, n_items, n_slopes, slope, difficulty):
    """(a per item, ability deviation per model, the likelihood's intercept per item) at the
    unconstrained point ``x``; the deviation is PyMC's ``ZeroSumTransform.extend_axis``, written as it
    is there. (Scalar loops: numba compiles them in a fraction of the time of array expressions.)"""
    n = np.float64(n_models)
    total = 0.0
    for m in range(1, n_models):
        total += x[m]
    norm = total / (np.sqrt(n) + n)
    deviation = np.empty(n_models)
    for m in range(n_models - 1):
        deviation[m] = x[1 + m] - norm
    deviation[n_models - 1] = (norm - total / np.sqrt(n)) - norm
    start = n_models + n_slopes
    a = np.empty(n_items)
    intercept = np.empty(n_items)
    for i in range(n_items):
        if n_slopes == n_items:
            a[i] = np.exp(x[n_models + i])
        elif n_slopes == 1:
            a[i] = np.exp(x[n_models])
        else:
            a[i] = slope
        intercept[i] = -a[i] * x[start + i] if difficulty else x[start + i]
    return a, deviation, intercept


@numba.njit(cache=True, nogil=True)
def _log_posterior(x, a, deviation, loglik, grad_a, grad_t, grad_d, n_models, n_items, n_slopes, difficulty, hyper):
    """(log posterior density, its gradient) at ``x`` from the likelihood and its gradient with respect to
    (a, deviation, intercept) at :func:`_parameters`' values; ``hyper`` holds the prior parameters (theta
    mu, sigma of theta_mean, theta sigma, discrimination mu and sigma, location mu and sigma)."""
    mu_t, sigma_mean, sigma_t, mu_a, sigma_a, mu_l, sigma_l = hyper
    grad = np.empty(x.size)
    theta_mean = x[0]
    # theta_mean ~ N(mu_t, sigma_mean)
    r = (theta_mean - mu_t) / sigma_mean
    logp = loglik - 0.5 * r * r - np.log(sigma_mean) - _LOG_SQRT_2PI
    grad_mean = -r / sigma_mean
    # theta_deviation ~ ZeroSumNormal(sigma_t): n - 1 degrees of freedom; gradient through the transform
    g = np.empty(n_models)
    square = 0.0
    for m in range(n_models):
        v = deviation[m] / sigma_t
        square += v * v
        g[m] = grad_t[m] - v / sigma_t
    logp += -0.5 * square - (n_models - 1) * (_LOG_SQRT_2PI + np.log(sigma_t))
    n = np.float64(n_models)
    shared = 0.0
    for m in range(n_models - 1):
        shared += g[m]
    shared = shared / (np.sqrt(n) + n) + g[n_models - 1] / np.sqrt(n)
    for m in range(n_models - 1):
        grad[1 + m] = g[m] - shared
    # the centred location and its prior; grad_slope collects d logp / d a_i
    start = n_models + n_slopes
    grad_slope = np.empty(n_items)
    for i in range(n_items):
        value = x[start + i]
        if difficulty:  # b_c ~ N(mu_l - theta_mean, sigma_l), likelihood intercept -a * b_c
            r = (value - (mu_l - theta_mean)) / sigma_l
            grad_mean -= r / sigma_l
            grad[start + i] = -a[i] * grad_d[i] - r / sigma_l
            grad_slope[i] = grad_a[i] - value * grad_d[i]
        else:  # d_c ~ N(mu_l + a * theta_mean, sigma_l), likelihood intercept d_c
            r = (value - (mu_l + a[i] * theta_mean)) / sigma_l
            grad_mean += r / sigma_l * a[i]
            grad[start + i] = grad_d[i] - r / sigma_l
            grad_slope[i] = grad_a[i] + r / sigma_l * theta_mean
        logp += -0.5 * r * r - np.log(sigma_l) - _LOG_SQRT_2PI
    grad[0] = grad_mean
    # log a ~ N(mu_a, sigma_a): LogNormal's -log(a) cancels the log transform's Jacobian
    for k in range(n_slopes):
        u = x[n_models + k]
        r = (u - mu_a) / sigma_a
        logp += -0.5 * r * r - np.log(sigma_a) - _LOG_SQRT_2PI
        if n_slopes == n_items:
            chain = grad_slope[k] * a[k]
        else:  # a common slope: every item's
            chain = 0.0
            for i in range(n_items):
                chain += grad_slope[i] * a[i]
        grad[n_models + k] = chain - r / sigma_a
    return logp, grad


def direct_model(responses: xr.Dataset, spec: IRTSpec) -> DirectModel:
    """The nutpie model of ``spec``'s posterior on ``responses`` (check :func:`direct_eligible` first),
    its numba functions compiled or loaded from the cache by one evaluation at the initial point."""
    import nutpie.compiled_pyfunc  # here, not at the top: importing nutpie is slow and only NUTS needs it

    y_item_model = responses["responses"].values
    n_items, n_models = y_item_model.shape
    by_model = n_models < BY_MODEL_BELOW
    y = np.ascontiguousarray(y_item_model.T if by_model else y_item_model, dtype=np.int8)
    structure, difficulty = spec.discrimination_structure, spec.location == "difficulty"
    n_slopes = {"item": n_items, "common": 1, "fixed": 0}[structure]
    slope = float(spec.discrimination_value) if structure == "fixed" else 1.0
    theta, location = spec.priors["theta"].params, spec.priors[spec.location].params
    disc = spec.priors["discrimination"].params if structure != "fixed" else {"mu": 0.0, "sigma": 1.0}
    # sigma of theta_mean computed as build_logistic does
    hyper = np.array([theta["mu"], float(theta["sigma"] / np.sqrt(n_models)), theta["sigma"], disc["mu"],
                      disc["sigma"], location["mu"], location["sigma"]], dtype=np.float64)
    n_dim = n_models + n_slopes + n_items

    def logp(x, **_):
        a, deviation, intercept = _parameters(x, n_models, n_items, n_slopes, slope, difficulty)
        total, grad_a, grad_t, grad_d = loglik_and_gradient(a, deviation, intercept, y, by_model)
        return _log_posterior(x, a, deviation, total, grad_a, grad_t, grad_d, n_models, n_items, n_slopes,
                              difficulty, hyper)

    def expand(x, **_):
        a, deviation, _ = _parameters(x, n_models, n_items, n_slopes, slope, difficulty)
        theta_mean, centred = x[0], x[n_models + n_slopes:]
        out = {"theta": theta_mean + deviation, "discrimination": a if structure == "item" else np.asarray(a[0])}
        if difficulty:
            b = centred + theta_mean
            out |= {"intercept": -a * b, "difficulty": b}
        else:
            out["intercept"] = centred - a * theta_mean
        return out

    def initial_point(seed):
        """PyMC's default start as nutpie uses it: the support point of every variable in the unconstrained
        space (a location prior's evaluated at the jittered start of its parents), plus U(-1, 1) jitter."""
        rng = np.random.default_rng(seed)
        x = np.empty(n_dim)
        x[0] = theta["mu"] + rng.uniform(-1.0, 1.0)
        x[1:n_models] = rng.uniform(-1.0, 1.0, n_models - 1)
        x[n_models:n_models + n_slopes] = disc["mu"] + 0.5 * disc["sigma"] ** 2 + rng.uniform(-1.0, 1.0, n_slopes)
        a, _, _ = _parameters(x, n_models, n_items, n_slopes, slope, False)
        support = location["mu"] - x[0] if difficulty else location["mu"] + a * x[0]
        x[n_models + n_slopes:] = support + rng.uniform(-1.0, 1.0, n_items)
        return x

    names = ["theta", "discrimination", "intercept"] + ["difficulty"] * difficulty
    shapes = {"theta": (n_models,), "discrimination": (n_items,) if structure == "item" else (),
              "intercept": (n_items,), "difficulty": (n_items,)}
    dims = {"theta": ("model",), "discrimination": ("item",) if structure == "item" else (),
            "intercept": ("item",), "difficulty": ("item",)}
    logp(initial_point(0))  # compiles the numba functions, or loads them from the cache
    compiled = nutpie.compiled_pyfunc.from_pyfunc(
        n_dim, lambda: logp, lambda seed1, seed2, chain: expand, [np.dtype("float64")] * len(names),
        [shapes[n] for n in names], names,
        coords={"item": pd.Index(responses["item"].values), "model": pd.Index(responses["model"].values)},
        dims={n: dims[n] for n in names}, make_initial_point_fn=initial_point,
    )
    return DirectModel(compiled, names, logp, initial_point)
