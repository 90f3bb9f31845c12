"""The 1PL/2PL posterior as a nutpie model without PyTensor: log density and gradient written in numba.

``nutpie.compile_pymc_model`` compiles PyTensor's graph of the model of
:func:`bayesirt.models.logistic.build_logistic` into two numba functions, about 180 numba
compilations that take 11.5 s at 300 models x 1,000 items with empty caches and 4.2 s with warm ones
(sampling then takes 12-30 s). :func:`direct_model` hands nutpie the same posterior, the log density
and its gradient in the same unconstrained coordinates, as a C callback (a numba ``cfunc``) made of
:func:`_parameters`, the likelihood kernel :func:`bayesirt.models.kernels.loglik_and_gradient` and
:func:`_log_posterior`, and the draws' reported variables as a second one (:func:`_expand`). nutpie's
chains, threads of this process, call the callbacks without Python or its GIL: at 300 x 1,000 with 2
chains, 4,023 gradient evaluations a second against 3,713 through nutpie's Python-callback route
(``nutpie.compiled_pyfunc.from_pyfunc``) with the same kernel (``benchmarks/nuts_numpyro.py``, runs at
bb9b694 and afeeb2d). The callbacks go through nutpie's model
class for PyMC models (``nutpie.compile_pymc.CompiledPyMCModel``, not public API: pyproject.toml
keeps nutpie below 0.17), given our callbacks and data; ``tests/test_nutpie_direct.py`` samples
through it.

Both callbacks are compiled once per machine (numba's on-disk cache; 2.5 s from empty caches at
300 x 1,000, 0.1 s from warm ones: ``benchmarks/nuts_numpyro.py`` at beed78e), the logp callback once per
matrix layout (:func:`_logp_callback_for`) and only while the kernel's file is as it was when the callback
was cached (numba's cache checks a function's own file only: see :func:`_callbacks`).

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

import ctypes
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np
import pandas as pd
import xarray as xr
from numba import types
from numba.extending import intrinsic

from bayesirt.data.responses import MISSING
from bayesirt.models import kernels
from bayesirt.models.kernels import BY_MODEL_BELOW, loglik_and_gradient
from bayesirt.models.logistic import DENSE_FROM
from bayesirt.models.specs import IRTSpec
from bayesirt.utils.numba_cache import drop_stale, sources_digest

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


@numba.njit(inline="always")
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


@numba.njit(inline="always")
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


#: The model's numbers, a float64 header in front of the response matrix in one buffer, which the C
#: callbacks receive as nutpie's user-data pointer: these header slots, then the 7 prior parameters
#: of :func:`_log_posterior` (slots 8-14), slot 15 unused (the matrix starts 128 bytes in), then the
#: int8 matrix (rows x cols: items x models, or its transpose when stored by model), C order.
_N_MODELS, _N_ITEMS, _N_SLOPES, _SLOPE, _DIFFICULTY, _ROWS, _COLS, _REPORT_SLOPE = range(8)
_HYPER = slice(8, 15)
_HEADER = 16


@numba.njit(inline="always")
def _at(x, head):
    """(n_models, n_items, n_slopes, difficulty, a, deviation, intercept): the sizes of the model in
    ``head`` and :func:`_parameters` at the unconstrained point ``x``."""
    n_models, n_items, n_slopes = np.int64(head[_N_MODELS]), np.int64(head[_N_ITEMS]), np.int64(head[_N_SLOPES])
    difficulty = head[_DIFFICULTY] != 0.0
    a, deviation, intercept = _parameters(x, n_models, n_items, n_slopes, head[_SLOPE], difficulty)
    return n_models, n_items, n_slopes, difficulty, a, deviation, intercept


@numba.njit(inline="always")
def _expand(x, head, out):
    """Write the reported variables at ``x`` into ``out``, flat, in order: theta, discrimination (per item
    or one value), intercept, and difficulty when the location prior is on it."""
    n_models, n_items, n_slopes, difficulty, a, deviation, _ = _at(x, head)
    theta_mean, start = x[0], n_models + n_slopes
    for m in range(n_models):
        out[m] = theta_mean + deviation[m]
    k = n_models
    n_reported = np.int64(head[_REPORT_SLOPE])
    for i in range(n_reported):
        out[k + i] = a[i]
    k += n_reported
    for i in range(n_items):
        centred = x[start + i]
        if difficulty:
            out[k + i] = -a[i] * (centred + theta_mean)
            out[k + n_items + i] = centred + theta_mean
        else:
            out[k + i] = centred - a[i] * theta_mean


@intrinsic
def _byte_offset(typingctx, pointer, offset):
    """``pointer`` + ``offset`` bytes (a void pointer)."""
    if pointer != types.voidptr or not isinstance(offset, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.gep(args[0], [context.cast(builder, args[1], signature.args[1], types.int64)])

    return types.voidptr(types.voidptr, offset), codegen


@numba.njit(inline="always")
def _buffer(data):
    """(header, response matrix) of the buffer at ``data``."""
    head = numba.carray(data, (_HEADER,), np.float64)
    y = numba.carray(_byte_offset(data, 8 * _HEADER), (np.int64(head[_ROWS]), np.int64(head[_COLS])), np.int8)
    return head, y


def _logp_callback_for(by_model: bool):
    """nutpie's logp callback for a response matrix stored by model rows (``by_model``) or by item rows.
    ``by_model`` is a constant of the compiled callback, so numba compiles the kernel's loop for that
    layout only: one compilation of the kernel, not two (a fit's compile from empty caches at 300 x 1,000
    went from 4.0 to 2.5 s: ``benchmarks/nuts_numpyro.py`` at 018b298 and at beed78e)."""

    def logp_callback(n_dim, x_pointer, gradient_pointer, logp_pointer, data):
        """The log posterior density and its gradient at the unconstrained point ``x``. Returns 0, or
        nutpie's own codes (those of ``nutpie.compile_pymc``'s callback): -1 wrong dimension, 3 a
        non-finite gradient, 4 a non-finite density."""
        head, y = _buffer(data)
        if n_dim != np.int64(head[_N_MODELS]) + np.int64(head[_N_SLOPES]) + np.int64(head[_N_ITEMS]):
            return -1
        x = numba.carray(x_pointer, (n_dim,))
        n_models, n_items, n_slopes, difficulty, a, deviation, intercept = _at(x, head)
        total, grad_a, grad_t, grad_d = loglik_and_gradient(a, deviation, intercept, y, by_model)
        logp, gradient = _log_posterior(x, a, deviation, total, grad_a, grad_t, grad_d, n_models, n_items,
                                        n_slopes, difficulty, head[_HYPER])
        out = numba.carray(gradient_pointer, (n_dim,))
        finite = True
        for k in range(n_dim):
            out[k] = gradient[k]
            finite &= np.isfinite(gradient[k])
        numba.carray(logp_pointer, (1,))[0] = logp
        if not finite:
            return 3
        if not np.isfinite(logp):
            return 4
        return 0

    return logp_callback


def _expand_callback(n_dim, n_expanded, x_pointer, out_pointer, data):
    """nutpie's expand callback: the reported variables of one draw."""
    head, _ = _buffer(data)
    _expand(numba.carray(x_pointer, (n_dim,)), head, numba.carray(out_pointer, (n_expanded,)))
    return 0


#: The digest of this module's source and the kernel's, frozen into the cached :func:`_compiled_sources`.
_SOURCES = sources_digest(__file__, kernels.__file__)


@numba.njit(cache=True)
def _compiled_sources():
    """:data:`_SOURCES` as it was when numba compiled this file's cached functions."""
    return _SOURCES


@functools.cache
def _callbacks(by_model: bool):
    """The two C callbacks for a matrix stored by model rows or not, compiled on first use in this process
    or loaded from numba's cache.

    numba checks a cached function against its own file only, so the logp callback, which inlines
    the kernel of ``kernels.py``, is taken from the cache only while :func:`_compiled_sources` (cached
    with it) gives today's digest of both files. Otherwise, as after an edit to the kernel alone, it is
    dropped from the cache (both layouts': one cache index) and compiled afresh (and cached again):
    :func:`bayesirt.utils.numba_cache.drop_stale`."""
    double = types.CPointer(types.float64)
    logp_callback = _logp_callback_for(by_model)
    drop_stale(_compiled_sources, _SOURCES, logp_callback)
    logp = numba.cfunc(types.int64(types.uint64, double, double, double, types.voidptr),
                       cache=True)(logp_callback)
    expand = numba.cfunc(types.int64(types.uint64, types.uint64, double, double, types.voidptr),
                         cache=True)(_expand_callback)
    return logp, expand


def direct_model(responses: xr.Dataset, spec: IRTSpec) -> DirectModel:
    """The nutpie model of ``spec``'s posterior on ``responses`` (check :func:`direct_eligible` first);
    its callbacks are compiled on first use in this process."""
    from nutpie.compile_pymc import CompiledPyMCModel  # here, not at the top: importing nutpie is slow

    y_item_model = responses["responses"].values
    n_items, n_models = y_item_model.shape
    by_model = n_models < BY_MODEL_BELOW
    y = np.ascontiguousarray(y_item_model.T if by_model else y_item_model, dtype=np.int8)
    structure, difficulty = spec.discrimination_structure, spec.location == "difficulty"
    n_slopes = {"item": n_items, "common": 1, "fixed": 0}[structure]
    slope = float(spec.discrimination_value) if structure == "fixed" else 1.0
    theta, location = spec.priors["theta"].params, spec.priors[spec.location].params
    disc = spec.priors["discrimination"].params if structure != "fixed" else {"mu": 0.0, "sigma": 1.0}
    n_dim = n_models + n_slopes + n_items

    buffer = np.zeros(8 * _HEADER + y.size, dtype=np.uint8)
    head = buffer[:8 * _HEADER].view(np.float64)
    head[:8] = (n_models, n_items, n_slopes, slope, difficulty, *y.shape, n_items if structure == "item" else 1)
    # sigma of theta_mean computed as build_logistic does
    head[_HYPER] = (theta["mu"], float(theta["sigma"] / np.sqrt(n_models)), theta["sigma"], disc["mu"],
                    disc["sigma"], location["mu"], location["sigma"])
    buffer[8 * _HEADER:] = y.reshape(-1).view(np.uint8)
    logp_callback, expand_callback = _callbacks(by_model)

    def logp(x):
        """(log density, gradient) at ``x`` from the callback nutpie calls."""
        x = np.ascontiguousarray(x, dtype=np.float64)
        value, gradient = np.empty(1), np.empty(n_dim)
        double = ctypes.POINTER(ctypes.c_double)
        code = logp_callback.ctypes(x.size, *(v.ctypes.data_as(double) for v in (x, gradient, value)),
                                    buffer.ctypes.data)
        if code < 0:
            raise ValueError(f"a point of {x.size} coordinates for a model of {n_dim}")
        return float(value[0]), gradient

    def initial_point(seed):
        """PyMC's default start as nutpie uses it: the support point of every variable in the unconstrained
        space (a location prior's evaluated at the jittered start of its parents), plus U(-1, 1) jitter."""
        rng = np.random.default_rng(seed)
        x = np.empty(n_dim)
        x[0] = theta["mu"] + rng.uniform(-1.0, 1.0)
        x[1:n_models] = rng.uniform(-1.0, 1.0, n_models - 1)
        x[n_models:n_models + n_slopes] = disc["mu"] + 0.5 * disc["sigma"] ** 2 + rng.uniform(-1.0, 1.0, n_slopes)
        a = np.exp(x[n_models:n_models + n_slopes]) if n_slopes else np.full(n_items, slope)
        support = location["mu"] - x[0] if difficulty else location["mu"] + a * x[0]
        x[n_models + n_slopes:] = support + rng.uniform(-1.0, 1.0, n_items)
        return x

    names = ["theta", "discrimination", "intercept"] + ["difficulty"] * difficulty
    shapes = {"theta": (n_models,), "discrimination": (n_items,) if structure == "item" else (),
              "intercept": (n_items,), "difficulty": (n_items,)}
    dims = {"theta": ("model",), "discrimination": ("item",) if structure == "item" else (),
            "intercept": ("item",), "difficulty": ("item",)}
    compiled = CompiledPyMCModel(
        dims={n: dims[n] for n in names},
        compiled_logp_func=logp_callback, compiled_expand_func=expand_callback, initial_point_func=initial_point,
        shared_data={}, shared_var_keys={}, user_data=buffer,
        n_expanded=sum(int(np.prod(shapes[n])) for n in names),
        shape_info=(names, [None] * len(names), [shapes[n] for n in names]), logp_func=None, expand_func=None,
        _n_dim=n_dim, _shapes={n: shapes[n] for n in names},
        _coords={"item": pd.Index(responses["item"].values), "model": pd.Index(responses["model"].values)},
    )
    return DirectModel(compiled, names, logp, initial_point)
