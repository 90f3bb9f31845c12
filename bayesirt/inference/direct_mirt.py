"""The MIRT posterior of :func:`bayesirt.models.mirt.build_mirt` as a nutpie model without PyTensor.

As :mod:`bayesirt.inference.nutpie_direct` does for the 1PL-4PL, :func:`direct_model` hands nutpie the log
density and its gradient in PyMC's unconstrained coordinates as a numba C callback (the likelihood by
:func:`bayesirt.models.mirt_kernel.mirt_loglik_and_gradient`), and the draws' reported variables as a
second one, through :mod:`bayesirt.inference.nutpie_callback`; below :data:`CELLS_BELOW` observed the
likelihood runs over the observed cells (``mirt_cell_loglik_and_gradient``). The point is, in ``build_mirt``'s order of
its free variables:

* exploratory: ``loading_free`` ~ N(0, sigma) (row-major over the free cells of the echelon,
  :func:`~bayesirt.models.mirt.echelon_free`), then ``loading_diagonal`` ~ N(0, sigma) (one per dimension,
  the anchors' diagonal loadings); confirmatory: the log of ``slope`` ~ LogNormal(mu, sigma), one per item
  on its dimension (LogNormal's ``-log a`` cancels the log transform's Jacobian), then the
  ``factor_cholesky`` L ~ LKJCorr(eta) under PyMC's ``CholeskyCorrTransform``: the D(D - 1)/2 coordinates
  fill the strictly lower triangle of a unit-diagonal matrix in PyMC's spiral order
  (:func:`_cholesky_cells`), whose rows are normalized; with the LKJ density's exponents
  2 eta - 2 + D - j and the transform's log-Jacobian (j + 1) log L_jj (row j, one-based), the density is
  PyMC's constant - (2 eta + D - 1) sum_j log |row j before normalizing|;
* ``theta_mean`` z ~ N(0, 1 / sqrt(n_models)) per dimension;
* ``theta_deviation`` ~ ZeroSumNormal(1) over models for each dimension, (dim, n_models - 1) coordinates
  under PyMC's ``ZeroSumTransform`` (an isometry; log-Jacobian 0);
* ``intercept_centered`` ~ N(mu + (loading L z)_i, sigma) (identity L when exploratory).

The likelihood's logits are ``(loading L) deviation + intercept_centered``. Every normalizing constant is
PyMC's, so value and gradient equal ``compile_logp(jacobian=True)`` and ``compile_dlogp`` of ``build_mirt``'s
model (``tests/test_direct_mirt.py``). The draws are expanded to ``loading``, ``intercept``, ``theta`` and,
confirmatory, ``factor_correlation``, with the PyMC path's shapes, dims and dtypes.
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np
import xarray as xr

from bayesirt.data.responses import MISSING
from bayesirt.inference import nutpie_callback
from bayesirt.inference.nutpie_callback import (
    DirectModel, byte_offset, callback_code, callback_model, compile_callbacks, finish_logp,
)
from bayesirt.models import kernels, mirt_kernel
from bayesirt.models.cell_kernel import cells_by_item
from bayesirt.models.mirt import anchor_items, dimension_names, dimensions_identified, echelon_free, item_dimensions
from bayesirt.models.mirt_kernel import mirt_cell_loglik_and_gradient, mirt_loglik_and_gradient
from bayesirt.models.specs import MIRTSpec
from bayesirt.utils.numba_cache import sources_digest

__all__ = ["direct_mirt_eligible", "direct_mirt_model", "CELLS_BELOW"]

_LOG_SQRT_2PI = math.log(math.sqrt(2.0 * math.pi))  # as PyMC writes the normal constant

#: Header slots: sizes, the prior parameters, the LKJ density's constant and exponent, the offsets of the
#: blocks of the point, the observed cells. After the header: the (item, dim) map of each loading to its
#: coordinate (-1: a zero), the (row, col) of each Cholesky coordinate, then the responses: the (item, model)
#: int8 matrix, or the observed cells by item (int64 offsets, int32 model indices, int8 responses).
(N_MODELS, N_ITEMS, N_DIMS, N_CHOL, LOG_SLOPES, LOADING_MU, LOADING_SIGMA, INTERCEPT_MU, INTERCEPT_SIGMA,
 SIGMA_MEAN, LKJ_CONSTANT, LKJ_EXPONENT, OFF_CHOL, OFF_MEAN, OFF_DEV, OFF_INTERCEPT, N_DIM, N_LOADINGS,
 N_CELLS) = range(19)
HEADER = 20

#: The likelihood runs over the observed cells (:func:`~bayesirt.models.mirt_kernel.mirt_cell_loglik_and_gradient`)
#: below this observed share of the matrix, over the dense matrix with missing cells masked from it on. Measured
#: at 200 models x 500 items, D = 2, CPU ms of one logp + gradient: with the dense kernel 0.27-0.31 at every
#: share, with the cells' 2.28 complete, 0.48 at 20% observed, 0.24 at 10%, 0.13 at 5%
#: (``benchmarks/direct_mirt.py --layouts``, results/direct_mirt_layouts.md, load 10 on 2 CPUs): they cross
#: near 11%.
CELLS_BELOW = 0.1


@callback_code
def _tables(data, head):
    """(loading map, Cholesky cells, byte offset of the responses) after the header."""
    n_items, n_dims, n_chol = np.int64(head[N_ITEMS]), np.int64(head[N_DIMS]), np.int64(head[N_CHOL])
    source = numba.carray(byte_offset(data, 8 * HEADER), (n_items, n_dims), np.float64)
    cells = numba.carray(byte_offset(data, 8 * (HEADER + n_items * n_dims)), (2, n_chol), np.float64)
    return source, cells, 8 * (HEADER + n_items * n_dims + 2 * n_chol)


@callback_code
def _parameters(x, head, source, cells):
    """(loading (item, dim), unnormalized Cholesky rows, their norms, Cholesky factor, loading @ factor,
    whitened deviations (dim, model)) at ``x``; the deviations by PyMC's ``ZeroSumTransform.extend_axis``
    for each dimension, written as it is there."""
    n_models, n_items, n_dims = np.int64(head[N_MODELS]), np.int64(head[N_ITEMS]), np.int64(head[N_DIMS])
    log_slopes = head[LOG_SLOPES] != 0.0
    loading = np.zeros((n_items, n_dims))
    for i in range(n_items):
        for k in range(n_dims):
            o = np.int64(source[i, k])
            if o >= 0:
                loading[i, k] = np.exp(x[o]) if log_slopes else x[o]
    raw = np.eye(n_dims)
    off_chol = np.int64(head[OFF_CHOL])
    for j in range(np.int64(head[N_CHOL])):
        raw[np.int64(cells[0, j]), np.int64(cells[1, j])] = x[off_chol + j]
    norms = np.empty(n_dims)
    factor = np.empty((n_dims, n_dims))
    for r in range(n_dims):
        square = 0.0
        for c in range(n_dims):
            square += raw[r, c] * raw[r, c]
        norms[r] = np.sqrt(square)
        for c in range(n_dims):
            factor[r, c] = raw[r, c] / norms[r]
    effective = np.zeros((n_items, n_dims))
    for i in range(n_items):
        for j in range(n_dims):
            for c in range(n_dims):
                effective[i, c] += loading[i, j] * factor[j, c]
    n = np.float64(n_models)
    deviation = np.empty((n_dims, n_models))
    off_dev = np.int64(head[OFF_DEV])
    for k in range(n_dims):
        base = off_dev + k * (n_models - 1)
        total = 0.0
        for m in range(n_models - 1):
            total += x[base + m]
        norm = total / (np.sqrt(n) + n)
        for m in range(n_models - 1):
            deviation[k, m] = x[base + m] - norm
        deviation[k, n_models - 1] = (norm - total / np.sqrt(n)) - norm
    return loading, raw, norms, factor, effective, deviation


@callback_code
def _log_posterior(x, head, source, cells, loading, raw, norms, factor, effective, deviation, loglik, g_eff, g_dev,
                   g_int):
    """(log posterior density, gradient) at ``x`` from the likelihood and its gradient with respect to the
    effective loadings, the deviations and the centred intercepts."""
    n_models, n_items, n_dims = np.int64(head[N_MODELS]), np.int64(head[N_ITEMS]), np.int64(head[N_DIMS])
    grad = np.zeros(x.size)
    logp = loglik
    # intercept_centered ~ N(mu + effective_i . z_mean, sigma)
    off_mean, off_int = np.int64(head[OFF_MEAN]), np.int64(head[OFF_INTERCEPT])
    mu_d, sigma_d = head[INTERCEPT_MU], head[INTERCEPT_SIGMA]
    g_mean = np.zeros(n_dims)
    for i in range(n_items):
        shift = 0.0
        for k in range(n_dims):
            shift += effective[i, k] * x[off_mean + k]
        r = (x[off_int + i] - mu_d - shift) / sigma_d
        logp += -0.5 * r * r - np.log(sigma_d) - _LOG_SQRT_2PI
        grad[off_int + i] = g_int[i] - r / sigma_d
        for k in range(n_dims):
            g_eff[i, k] += r / sigma_d * x[off_mean + k]
            g_mean[k] += r / sigma_d * effective[i, k]
    # theta_mean ~ N(0, sigma_mean)
    sigma_mean = head[SIGMA_MEAN]
    for k in range(n_dims):
        r = x[off_mean + k] / sigma_mean
        logp += -0.5 * r * r - np.log(sigma_mean) - _LOG_SQRT_2PI
        grad[off_mean + k] = g_mean[k] - r / sigma_mean
    # theta_deviation ~ ZeroSumNormal(1) per dimension: n_models - 1 degrees of freedom; gradient through
    # the transform
    n = np.float64(n_models)
    off_dev = np.int64(head[OFF_DEV])
    for k in range(n_dims):
        square, shared = 0.0, 0.0
        for m in range(n_models):
            v = deviation[k, m]
            square += v * v
            g_dev[k, m] -= v
        for m in range(n_models - 1):
            shared += g_dev[k, m]
        shared = shared / (np.sqrt(n) + n) + g_dev[k, n_models - 1] / np.sqrt(n)
        for m in range(n_models - 1):
            grad[off_dev + k * (n_models - 1) + m] = g_dev[k, m] - shared
        logp += -0.5 * square - (n_models - 1) * _LOG_SQRT_2PI
    # effective = loading @ factor: back to the loadings and the factor
    g_loading, g_factor = np.zeros((n_items, n_dims)), np.zeros((n_dims, n_dims))
    for i in range(n_items):
        for j in range(n_dims):
            for c in range(n_dims):
                g_loading[i, j] += g_eff[i, c] * factor[j, c]
                g_factor[j, c] += loading[i, j] * g_eff[i, c]
    # the loadings' priors: N(0, sigma) each, or the log slopes N(mu, sigma)
    log_slopes = head[LOG_SLOPES] != 0.0
    mu_l, sigma_l = head[LOADING_MU], head[LOADING_SIGMA]
    for i in range(n_items):
        for k in range(n_dims):
            o = np.int64(source[i, k])
            if o >= 0:
                r = (x[o] - mu_l) / sigma_l
                logp += -0.5 * r * r - np.log(sigma_l) - _LOG_SQRT_2PI
                chain = g_loading[i, k] * loading[i, k] if log_slopes else g_loading[i, k]
                grad[o] = chain - r / sigma_l
    # LKJCorr with PyMC's CholeskyCorrTransform: constant - exponent * sum log |raw row|
    n_chol = np.int64(head[N_CHOL])
    if n_chol > 0:
        exponent = head[LKJ_EXPONENT]
        logp += head[LKJ_CONSTANT]
        for r in range(n_dims):
            logp -= exponent * np.log(norms[r])
        off_chol = np.int64(head[OFF_CHOL])
        for j in range(n_chol):
            r, c = np.int64(cells[0, j]), np.int64(cells[1, j])
            inner = 0.0
            for l in range(n_dims):
                inner += g_factor[r, l] * raw[r, l]
            w = raw[r, c]
            grad[off_chol + j] = (g_factor[r, c] / norms[r] - inner * w / norms[r] ** 3
                                  - exponent * w / (norms[r] * norms[r]))
    return logp, grad


def _logp_callback_for(observed_cells: bool):
    """nutpie's logp callback with the likelihood over the observed cells or over the dense matrix, a constant
    of the compiled callback (numba compiles one kernel into it)."""

    def logp_callback(n_dim, x_pointer, gradient_pointer, logp_pointer, data):
        """The log posterior density and its gradient at the unconstrained point ``x``; nutpie's codes
        (:mod:`bayesirt.inference.nutpie_callback`)."""
        head = numba.carray(data, (HEADER,), np.float64)
        if n_dim != np.int64(head[N_DIM]):
            return -1
        x = numba.carray(x_pointer, (n_dim,))
        source, cells, at = _tables(data, head)
        loading, raw, norms, factor, effective, deviation = _parameters(x, head, source, cells)
        n_items, n_models, n_cells = np.int64(head[N_ITEMS]), np.int64(head[N_MODELS]), np.int64(head[N_CELLS])
        intercept = x[np.int64(head[OFF_INTERCEPT]):np.int64(head[OFF_INTERCEPT]) + n_items]
        if observed_cells:
            start = numba.carray(byte_offset(data, at), (n_items + 1,), np.int64)
            model = numba.carray(byte_offset(data, at + 8 * (n_items + 1)), (n_cells,), np.int32)
            y = numba.carray(byte_offset(data, at + 8 * (n_items + 1) + 4 * n_cells), (n_cells,), np.int8)
            loglik, g_eff, g_dev, g_int = mirt_cell_loglik_and_gradient(effective, deviation, intercept, start,
                                                                        model, y)
        else:
            y = numba.carray(byte_offset(data, at), (n_items, n_models), np.int8)
            loglik, g_eff, g_dev, g_int = mirt_loglik_and_gradient(effective, deviation, intercept, y)
        logp, gradient = _log_posterior(x, head, source, cells, loading, raw, norms, factor, effective, deviation,
                                        loglik, g_eff, g_dev, g_int)
        return finish_logp(gradient, logp, n_dim, gradient_pointer, logp_pointer)

    return logp_callback


def _expand_callback(n_dim, n_expanded, x_pointer, out_pointer, data):
    """nutpie's expand callback: loading (item, dim), intercept, theta (model, dim) and, confirmatory,
    factor_correlation (dim, dim), flat, in that order."""
    head = numba.carray(data, (HEADER,), np.float64)
    x = numba.carray(x_pointer, (n_dim,))
    out = numba.carray(out_pointer, (n_expanded,))
    source, cells, _ = _tables(data, head)
    loading, _, _, factor, effective, deviation = _parameters(x, head, source, cells)
    n_models, n_items, n_dims = np.int64(head[N_MODELS]), np.int64(head[N_ITEMS]), np.int64(head[N_DIMS])
    off_mean, off_int = np.int64(head[OFF_MEAN]), np.int64(head[OFF_INTERCEPT])
    k = 0
    for i in range(n_items):
        for j in range(n_dims):
            out[k] = loading[i, j]
            k += 1
    for i in range(n_items):
        shift = 0.0
        for j in range(n_dims):
            shift += effective[i, j] * x[off_mean + j]
        out[k] = x[off_int + i] - shift
        k += 1
    for m in range(n_models):
        for r in range(n_dims):
            value = 0.0
            for c in range(n_dims):
                value += factor[r, c] * (x[off_mean + c] + deviation[c, m])
            out[k] = value
            k += 1
    if np.int64(head[N_CHOL]) > 0:
        for r in range(n_dims):
            for c in range(n_dims):
                value = 0.0
                for j in range(n_dims):
                    value += factor[r, j] * factor[c, j]
                out[k] = value
                k += 1
    return 0


#: The digest of this module's source and of the files it compiles in (see ``nutpie_direct._callbacks``).
_SOURCES = sources_digest(__file__, mirt_kernel.__file__, kernels.__file__, nutpie_callback.__file__)


@numba.njit(cache=True)
def _compiled_sources():
    """:data:`_SOURCES` as it was when numba compiled this file's cached functions."""
    return _SOURCES


@functools.cache
def _callbacks(observed_cells: bool):
    """The two C callbacks for the likelihood's layout, compiled on first use in this process or loaded from
    numba's cache (only while :func:`_compiled_sources` gives today's digest:
    :func:`bayesirt.utils.numba_cache.drop_stale`)."""
    return compile_callbacks(_logp_callback_for(observed_cells), _expand_callback, _compiled_sources, _SOURCES)


def _responses_bytes(y: np.ndarray) -> tuple[np.ndarray, bool, int]:
    """(the responses as the bytes after the tables, whether they are the observed cells, observed cells):
    the cells by item below :data:`CELLS_BELOW` observed, else the dense int8 matrix."""
    observed = int((y != MISSING).sum())
    if observed < CELLS_BELOW * y.size:
        start, model, response = cells_by_item(y)
        return np.concatenate([start.view(np.uint8), model.view(np.uint8), response.view(np.uint8)]), True, observed
    return y.reshape(-1).view(np.uint8), False, observed


def direct_mirt_eligible(responses: xr.Dataset, spec) -> bool:
    """Whether :func:`direct_mirt_model` can express the posterior of ``spec`` on ``responses``: a MIRT spec
    with priors of plain numbers (a confirmatory one with lognormal slopes), identified dimensions, and an
    observed cell (otherwise ``build_mirt`` builds the model, or refuses the spec with its message)."""
    if not isinstance(spec, MIRTSpec) or any(p.hierarchical for p in spec.priors.values()):
        return False
    if spec.structure == "confirmatory" and spec.priors["loading"].distribution != "lognormal":
        return False
    y = responses["responses"].values
    if not (y != MISSING).any():
        return False
    return dimensions_identified(spec, dimension_names(responses, spec).size, *y.shape)


def _cholesky_cells(n_dims: int) -> np.ndarray:
    """(2, D(D - 1)/2): the (row, col) of the factor filled by each coordinate of PyMC's
    ``CholeskyCorrTransform.backward`` (lower, unit diagonal): ``_fill_triangular_spiral`` of the
    coordinates into the (D - 1) x (D - 1) block below the first row and left of the last column."""
    n = n_dims - 1
    index = np.arange(n * (n + 1) // 2)
    spiral = np.tril(np.concatenate([index[n:], index[::-1]]).reshape(n, n) + 1) - 1  # -1 above the diagonal
    rows, cols = np.nonzero(spiral >= 0)
    order = np.argsort(spiral[rows, cols])
    return np.array([rows[order] + 1, cols[order]], dtype=float)


def _lkj_constant(eta: float, n: int) -> float:
    """PyMC's ``_lkj_normalizing_constant(eta, n)``."""
    return (n - 1) * math.lgamma(eta + 0.5 * (n - 1)) - sum(
        0.5 * k * math.log(math.pi) + math.lgamma(eta + 0.5 * (n - 1 - k)) for k in range(1, n))


def direct_mirt_model(responses: xr.Dataset, spec: MIRTSpec) -> tuple[DirectModel, np.ndarray | None]:
    """The nutpie model of ``spec``'s posterior on ``responses`` (check :func:`direct_mirt_eligible` first)
    and the exploratory echelon's anchor items (item labels; None when confirmatory)."""
    y = np.ascontiguousarray(responses["responses"].values, dtype=np.int8)
    n_items, n_models = y.shape
    dims = dimension_names(responses, spec)
    n_dims = dims.size
    confirmatory = spec.structure == "confirmatory"
    source = np.full((n_items, n_dims), -1.0)
    if confirmatory:
        source[np.arange(n_items), item_dimensions(responses, spec)] = np.arange(n_items)
        n_loadings, n_chol, anchors = n_items, n_dims * (n_dims - 1) // 2, None
    else:
        anchors = anchor_items(responses, n_dims)
        rows, cols = echelon_free(anchors, n_items, n_dims)
        source[rows, cols] = np.arange(rows.size)
        source[anchors, np.arange(n_dims)] = rows.size + np.arange(n_dims)
        n_loadings, n_chol = rows.size + n_dims, 0
    loading, intercept = spec.priors["loading"].params, spec.priors["intercept"].params
    head = np.zeros(HEADER)
    off_mean = n_loadings + n_chol
    off_int = off_mean + n_dims + n_dims * (n_models - 1)
    eta = float(spec.priors["factor_correlation"].params["eta"]) if confirmatory else 1.0
    head[:N_CELLS] = (n_models, n_items, n_dims, n_chol, confirmatory,
                      loading.get("mu", 0.0) if confirmatory else 0.0, loading["sigma"], intercept["mu"],
                      intercept["sigma"], 1.0 / np.sqrt(n_models), _lkj_constant(eta, n_dims) if confirmatory else 0.0,
                      2 * eta + n_dims - 1, n_loadings, off_mean, off_mean + n_dims, off_int, off_int + n_items,
                      n_loadings)
    cells = _cholesky_cells(n_dims) if confirmatory else np.zeros((2, 0))
    responses_bytes, observed_cells, head[N_CELLS] = _responses_bytes(y)
    buffer = np.concatenate([head.view(np.uint8), source.reshape(-1).view(np.uint8),
                             np.ascontiguousarray(cells).reshape(-1).view(np.uint8), responses_bytes])
    variables = {"loading": ((n_items, n_dims), ("item", "dim")), "intercept": ((n_items,), ("item",)),
                 "theta": ((n_models, n_dims), ("model", "dim"))}
    if confirmatory:
        variables["factor_correlation"] = ((n_dims, n_dims), ("dim", "dim_bis"))
    coords = {"item": responses["item"].values, "model": responses["model"].values, "dim": dims, "dim_bis": dims}
    model = callback_model(*_callbacks(observed_cells), buffer, int(head[N_DIM]), variables, coords,
                           functools.partial(_start_point, head, source))
    return model, None if anchors is None else responses["item"].values[anchors]


def _start_point(head: np.ndarray, source: np.ndarray, seed) -> np.ndarray:
    """A start like PyMC's default as nutpie uses it: every free variable's support point in the unconstrained
    space plus U(-1, 1) jitter, the centred intercepts' taken at the jittered loadings and means (with the
    identity for the factor; chains need not start where the PyMC path's do)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, int(head[N_DIM]))
    n_loadings, off_mean, off_int = int(head[N_LOADINGS]), int(head[OFF_MEAN]), int(head[OFF_INTERCEPT])
    confirmatory = head[LOG_SLOPES] != 0.0
    if confirmatory:  # LogNormal's support point exp(mu + sigma^2 / 2); the identity factor's is 0
        x[:n_loadings] += head[LOADING_MU] + 0.5 * head[LOADING_SIGMA] ** 2
    n_dims = source.shape[1]
    present = source >= 0
    values = np.where(present, x[np.where(present, source, 0).astype(int)], 0.0)
    loading = np.exp(values) * present if confirmatory else values
    x[off_int:] += head[INTERCEPT_MU] + loading @ x[off_mean:off_mean + n_dims]
    return x
