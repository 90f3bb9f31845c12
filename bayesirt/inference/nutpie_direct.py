"""The 1PL-4PL posterior as a nutpie model without PyTensor: log density and gradient written in numba.

``nutpie.compile_pymc_model`` compiles PyTensor's graph of the model of
:func:`bayesirt.models.logistic.build_logistic` into two numba functions, about 180 numba
compilations that take 11.5 s at 300 models x 1,000 items with empty caches and 4.2 s with warm ones
(sampling then takes 12-30 s). :func:`direct_model` hands nutpie the same posterior, the log density
and its gradient in the same unconstrained coordinates, as a C callback (a numba ``cfunc``) made of
``direct_posterior.parameters``, a likelihood kernel and ``direct_posterior.log_posterior``, wrapped for nutpie
by :mod:`bayesirt.inference.nutpie_callback`; nutpie stores the unconstrained points, expanded after sampling
into the reported variables by ``direct_posterior.expand`` (NumPy, all draws at once). nutpie's chains, threads
of this process, call the callback without Python or its GIL: at 300 x 1,000 with 2 chains, 4,023 gradient
evaluations a second against 3,713 through nutpie's Python-callback route
(``nutpie.compiled_pyfunc.from_pyfunc``) with the same kernel (``benchmarks/nuts_numpyro.py``, runs at
bb9b694 and afeeb2d). ``tests/test_nutpie_direct.py`` samples through it.

The likelihood kernel is a dense one of :mod:`bayesirt.models.kernels` (missing cells masked; the 2PL's,
or the 3PL/4PL's with asymptotes) on a matrix at least :data:`CELLS_BELOW` observed, otherwise (and for a
spec with a slip but no guessing asymptote) the kernel over the observed cells of
:mod:`bayesirt.models.cell_kernel`, whose cost scales with them. The callback is compiled once per machine, layout
and prior structure (numba's on-disk cache), and only while the files it compiles in are as they were when it was
cached (numba's cache checks a function's own file only: see :func:`_callbacks`). Every normalizing constant is PyMC's, so the value
equals ``pm.Model.compile_logp(jacobian=True)`` of ``build_logistic``'s model at the same point
(``tests/test_nutpie_direct.py`` checks value and gradient against it). The draws are expanded to the
variables a fit reports, with the shapes, dims and dtypes of the PyMC path.
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np
import xarray as xr

from bayesirt.data.responses import MISSING
from bayesirt.inference import direct_posterior, nutpie_callback
from bayesirt.inference.direct_posterior import (
    A_MU_PRIOR, A_SIGMA_PRIOR, C_PRIOR, COLS, HEADER, HYPER, L_MU_PRIOR, L_SIGMA_PRIOR, N_CELLS, N_DIM, OFF_A_MU,
    OFF_C, OFF_DEV, OFF_L_MU, OFF_LOC, OFF_MEAN, OFF_S, OFF_SLOPES, ROWS, S_PRIOR, SCALE_FREE, SCALED, expand,
    log_posterior, parameters,
)
from bayesirt.inference.nutpie_callback import (
    DirectModel, byte_offset, callback_code, callback_model, compile_callbacks, copy_point, finish_logp,
)
from bayesirt.models import cell_kernel, kernels
from bayesirt.models.cell_kernel import cell_loglik_and_gradient, cells_by_item
from bayesirt.models.kernels import BY_MODEL_BELOW, asymptote_loglik_and_gradient, loglik_and_gradient
from bayesirt.models.specs import IRTSpec, Prior
from bayesirt.utils.numba_cache import sources_digest

__all__ = ["direct_eligible", "direct_model", "CELLS_BELOW"]

#: The likelihood runs over the observed cells (:mod:`bayesirt.models.cell_kernel`) below this observed
#: share of the matrix, over the dense matrix (missing cells masked) from it on. Measured at 200 models x
#: 500 items, CPU ms of one logp + gradient: the dense 2PL kernel costs 0.17 at every share, the cells'
#: 2.43 complete, 0.19 at 10% observed and 0.11 at 5%; the 3PL's dense kernel 0.25 (0.36 complete), the
#: cells' 0.20 at 10% and 0.43 at 20% (``benchmarks/nuts_numpyro.py --layouts``, results/direct_layouts.md, a loaded
#: machine): they cross near 9% (2PL) and 13% (3PL) observed.
CELLS_BELOW = 0.1


def direct_eligible(responses: xr.Dataset, spec) -> bool:
    """Whether :func:`direct_model` can express the posterior of ``spec`` on ``responses``: a 1PL-4PL
    logistic spec with a normal ability prior of plain numbers, a lognormal or fixed slope, and any
    location, guessing and slip priors the spec format allows (hierarchical ones too), on a matrix with an
    observed cell."""
    if not isinstance(spec, IRTSpec) or spec.priors["theta"].hierarchical:
        return False
    if spec.discrimination_structure != "fixed" and spec.priors["discrimination"].distribution != "lognormal":
        return False
    y = responses["responses"].values
    return bool(y.size > 0 and (y != MISSING).any())


#: The likelihood's layouts of the responses after the header (a constant of each compiled callback):
#: the dense int8 matrix by item rows or by model rows (:func:`bayesirt.models.kernels.loglik_and_gradient`,
#: no asymptotes), the observed cells by item (:func:`bayesirt.models.cell_kernel.cell_loglik_and_gradient`:
#: int64 offsets, int32 model indices, int8 responses), or the dense matrix by item rows of a spec with a
#: guessing asymptote (:func:`bayesirt.models.kernels.asymptote_loglik_and_gradient`).
BY_ITEM, BY_MODEL, CELLS, ASYMPTOTES = 0, 1, 2, 3


@callback_code
def _cells_loglik(x, data, head):
    """(parameters at ``x``, log-likelihood and its gradients) over the observed cells after the header."""
    a, deviation, intercept, c, s = parameters(x, head)
    rows, n_cells = np.int64(head[ROWS]), np.int64(head[N_CELLS])
    start = numba.carray(byte_offset(data, 8 * HEADER), (rows + 1,), np.int64)
    model = numba.carray(byte_offset(data, 8 * (HEADER + rows + 1)), (n_cells,), np.int32)
    y = numba.carray(byte_offset(data, 8 * (HEADER + rows + 1) + 4 * n_cells), (n_cells,), np.int8)
    total, ga, gt, gd, gc, gs = cell_loglik_and_gradient(a, deviation, intercept, c, s, start, model, y,
                                                         head[OFF_C] >= 0, head[OFF_S] >= 0)
    return a, deviation, c, s, total, ga, gt, gd, gc, gs


def _logp_callback_for(layout: int, hyperpriors: bool, bounds: bool):
    """nutpie's logp callback for the responses in ``layout``, a constant of the compiled callback, so numba
    compiles one likelihood kernel into it, not every layout's (a fit's compile from empty caches at
    300 x 1,000 went from 4.0 to 2.5 s with one of two dense kernels: ``benchmarks/nuts_numpyro.py`` at
    018b298 and at beed78e); likewise the prior's hyperpriors and asymptotes only when the spec has them
    (``direct_posterior.log_posterior``'s ``learned`` and ``bounded``)."""
    cells, by_model, asymptotes = layout == CELLS, layout == BY_MODEL, layout == ASYMPTOTES

    def logp_callback(n_dim, x_pointer, gradient_pointer, logp_pointer, data):
        """The log posterior density and its gradient at the unconstrained point ``x``; nutpie's codes
        (:mod:`bayesirt.inference.nutpie_callback`)."""
        head = numba.carray(data, (HEADER,), np.float64)
        if n_dim != np.int64(head[N_DIM]):
            return -1
        x = numba.carray(x_pointer, (n_dim,))
        if cells:
            a, deviation, c, s, total, ga, gt, gd, gc, gs = _cells_loglik(x, data, head)
        elif asymptotes:
            a, deviation, intercept, c, s = parameters(x, head)
            y = numba.carray(byte_offset(data, 8 * HEADER), (np.int64(head[ROWS]), np.int64(head[COLS])), np.int8)
            total, ga, gt, gd, gc, gs = asymptote_loglik_and_gradient(a, deviation, intercept, c, s, y)
        else:  # the dense matrix (no asymptotes: c = s = 0); by_model, a constant, selects one loop to compile
            a, deviation, intercept, c, s = parameters(x, head)
            y = numba.carray(byte_offset(data, 8 * HEADER), (np.int64(head[ROWS]), np.int64(head[COLS])), np.int8)
            total, ga, gt, gd = loglik_and_gradient(a, deviation, intercept, y, by_model)
            gc, gs = c, s
        learned = True if hyperpriors else None  # constants of the callback: None prunes that part of the prior
        bounded = True if bounds else None
        logp, gradient = log_posterior(x, head, a, deviation, total, ga, gt, gd, c, s, gc, gs, learned, bounded)
        return finish_logp(gradient, logp, n_dim, gradient_pointer, logp_pointer)

    return logp_callback


#: The digest of this module's source and of the files it compiles in, frozen into the cached
#: :func:`_compiled_sources`.
_SOURCES = sources_digest(__file__, kernels.__file__, cell_kernel.__file__, direct_posterior.__file__,
                          nutpie_callback.__file__)


@numba.njit(cache=True)
def _compiled_sources():
    """:data:`_SOURCES` as it was when numba compiled this file's cached functions."""
    return _SOURCES


@functools.cache
def _callbacks(layout: int, hyperpriors: bool, bounds: bool):
    """The two C callbacks for responses in ``layout`` of a spec with or without ``hyperpriors`` and
    asymptotes (``bounds``), compiled on first use in this process or loaded from numba's cache.

    numba checks a cached function against its own file only, so the callbacks, which compile in the
    code of other files, are taken from the cache only while :func:`_compiled_sources` (cached with them)
    gives today's digest of every file. Otherwise, as after an edit to the kernel alone, they are dropped
    from the cache (every layout's: one cache index) and compiled afresh (and cached again):
    :func:`bayesirt.utils.numba_cache.drop_stale`."""
    return compile_callbacks(_logp_callback_for(layout, hyperpriors, bounds), copy_point, _compiled_sources,
                             _SOURCES)


def _layout(y: np.ndarray, spec: IRTSpec) -> int:
    """The likelihood kernel for ``y``: the observed cells below :data:`CELLS_BELOW` observed or for a spec
    with a slip but no guessing asymptote, else the dense matrix (by model rows when models are few and
    the spec has no asymptote)."""
    if float((y != MISSING).mean()) < CELLS_BELOW or (spec.has_slip and not spec.has_guessing):
        return CELLS
    if spec.has_guessing:
        return ASYMPTOTES
    return BY_MODEL if y.shape[1] < BY_MODEL_BELOW else BY_ITEM


def _free_variables(spec: IRTSpec, n_models: int, n_items: int) -> tuple[dict, list]:
    """(offset of each block of the point, the learned hyperparameters' names in order), the blocks in
    ``build_logistic``'s order of its free variables (module docstring of ``direct_posterior``): theta_mean,
    the deviation, the slope's hyperparameters, the slopes; a common slope before the (scaled) deviation; in
    the scale-free coordinates the slope's hyperparameters first. Then the location's hyperparameters, the
    locations, guessing and slip."""
    offsets, names, k = {}, [], 0

    def block(name, size):
        nonlocal k
        offsets[name] = k
        k += size

    def hyperparameters(name):
        for key, value in spec.priors[name].params.items() if name in spec.priors else ():
            if isinstance(value, Prior):
                block((name, key), 1)
                names.append(f"{name}_{key}")

    structure, free = spec.discrimination_structure, spec.learned_slope_scale
    if free:
        hyperparameters("discrimination")
    block("mean", 1)
    if structure == "common":  # the slope, then the scaled deviation (build_logistic)
        block("slopes", 1)
    block("deviation", n_models - 1)
    if structure != "common":
        if not free:
            hyperparameters("discrimination")
        block("slopes", {"item": n_items, "fixed": 0}[structure])
    hyperparameters(spec.location)
    block("loc", n_items)
    for name in ("guessing", "slip"):
        offsets[name] = k if name in spec.priors else -1
        k += n_items if name in spec.priors else 0
    offsets["n_dim"] = k
    return offsets, names


def _header(spec: IRTSpec, n_models: int, n_items: int, layout: int, rows: int, cols: int, n_cells: int):
    """The float64 header of the model's buffer (``direct_posterior``'s slots) and the hyperparameters'
    names."""
    offsets, hyper_names = _free_variables(spec, n_models, n_items)
    structure, priors = spec.discrimination_structure, spec.priors
    head = np.full(HEADER, -1.0)
    n_slopes = {"item": n_items, "common": 1, "fixed": 0}[structure]
    slope = float(spec.discrimination_value) if structure == "fixed" else 1.0
    head[:8] = (n_models, n_items, n_slopes, slope, spec.location == "difficulty", rows, cols,
                n_items if structure == "item" else 1)
    theta, location = priors["theta"].params, priors[spec.location].params
    disc = priors["discrimination"].params if structure != "fixed" else {"mu": 0.0, "sigma": 1.0}
    number = lambda v: 0.0 if isinstance(v, Prior) else float(v)  # noqa: E731 (a learned one is read from x)
    # sigma of theta_mean computed as build_logistic does
    head[HYPER] = (theta["mu"], float(theta["sigma"] / np.sqrt(n_models)), theta["sigma"], number(disc["mu"]),
                   number(disc["sigma"]), number(location["mu"]), number(location["sigma"]))
    head[N_CELLS] = n_cells
    head[OFF_DEV], head[SCALED] = offsets["deviation"], structure == "common"
    head[OFF_MEAN], head[SCALE_FREE] = offsets["mean"], spec.learned_slope_scale
    for (name, slot, prior_slot, sigma_slot) in (("discrimination", OFF_A_MU, A_MU_PRIOR, A_SIGMA_PRIOR),
                                                 (spec.location, OFF_L_MU, L_MU_PRIOR, L_SIGMA_PRIOR)):
        params = priors[name].params if name in priors else {}
        if isinstance(params.get("mu"), Prior):
            head[slot] = offsets[(name, "mu")]
            head[prior_slot] = (params["mu"].params["mu"], params["mu"].params["sigma"])
        if isinstance(params.get("sigma"), Prior):
            head[slot + 1] = offsets[(name, "sigma")]
            head[sigma_slot] = params["sigma"].params["sigma"]
    head[OFF_SLOPES], head[OFF_LOC], head[N_DIM] = offsets["slopes"], offsets["loc"], offsets["n_dim"]
    for name, slot, prior_slot in (("guessing", OFF_C, C_PRIOR), ("slip", OFF_S, S_PRIOR)):
        head[slot] = offsets[name]
        if name in priors:
            alpha, beta = priors[name].params["alpha"], priors[name].params["beta"]
            head[prior_slot] = (alpha, beta, math.lgamma(alpha) + math.lgamma(beta) - math.lgamma(alpha + beta))
    return head, offsets, hyper_names


def _responses_buffer(y_item_model: np.ndarray, layout: int) -> tuple[np.ndarray, int, int, int]:
    """(the responses as the bytes after the header, rows, cols, observed cells) in ``layout``."""
    if layout == CELLS:
        start, model, response = cells_by_item(y_item_model)
        data = np.concatenate([start.view(np.uint8), model.view(np.uint8), response.view(np.uint8)])
        return data, y_item_model.shape[0], y_item_model.shape[1], response.size
    y = np.ascontiguousarray(y_item_model.T if layout == BY_MODEL else y_item_model, dtype=np.int8)
    return y.reshape(-1).view(np.uint8), *y.shape, int((y != MISSING).sum())


def direct_model(responses: xr.Dataset, spec: IRTSpec) -> DirectModel:
    """The nutpie model of ``spec``'s posterior on ``responses`` (check :func:`direct_eligible` first);
    its callbacks are compiled on first use in this process."""
    y_item_model = responses["responses"].values
    n_items, n_models = y_item_model.shape
    layout = _layout(y_item_model, spec)
    data, rows, cols, n_cells = _responses_buffer(y_item_model, layout)
    head, offsets, hyper_names = _header(spec, n_models, n_items, layout, rows, cols, n_cells)
    buffer = np.concatenate([head.view(np.uint8), data])
    names = ["theta", "discrimination", "intercept"] + ["difficulty"] * (spec.location == "difficulty") \
        + ["guessing"] * spec.has_guessing + ["slip"] * spec.has_slip + hyper_names
    item_slope = spec.discrimination_structure == "item"
    variables = {n: ((n_items,), ("item",)) for n in names} | {"theta": ((n_models,), ("model",))}
    variables |= {"discrimination": ((n_items,), ("item",)) if item_slope else ((), ())}
    variables |= {n: ((), ()) for n in hyper_names}
    callbacks = _callbacks(layout, spec.hierarchical, spec.has_guessing or spec.has_slip)
    return callback_model(*callbacks, buffer, offsets["n_dim"], {n: variables[n] for n in names},
                          {"item": responses["item"].values, "model": responses["model"].values},
                          functools.partial(start_point, spec, offsets, n_models, n_items),
                          expand=functools.partial(expand, head=head))


def start_point(spec: IRTSpec, offsets: dict, n_models: int, n_items: int, seed) -> np.ndarray:
    """PyMC's default start as nutpie uses it: the support point of every free variable in the unconstrained
    space (a child's evaluated at the jittered start of its parents), plus U(-1, 1) jitter, drawn block by
    block in the point's order."""
    rng = np.random.default_rng(seed)
    x = np.empty(offsets["n_dim"])
    priors, structure, free = spec.priors, spec.discrimination_structure, spec.learned_slope_scale
    jitter = lambda size=None: rng.uniform(-1.0, 1.0, size)  # noqa: E731

    def learned(name, scale=1.0):
        """The prior's parameters at the start: a learned one's value, jittered, written into x (in units of
        ``scale``: its hyperprior's parameters times it)."""
        params = dict(priors[name].params)
        for key, value in params.items():
            if isinstance(value, Prior):
                o = offsets[(name, key)]
                support = scale * value.params["mu"] if key == "mu" else math.log(scale * value.params["sigma"])
                x[o] = support + jitter()
                params[key] = x[o] if key == "mu" else math.exp(x[o])
            elif scale != 1.0:
                params[key] = scale * value
        return params

    disc = learned("discrimination") if free else None
    g = math.exp(disc["mu"]) if free else 1.0
    theta = priors["theta"].params
    mean, dev, slopes = offsets["mean"], offsets["deviation"], offsets["slopes"]
    x[mean] = g * theta["mu"] + jitter()
    common = structure == "common"
    if not common:  # a common slope comes before the (scaled) deviation
        x[dev:dev + n_models - 1] = jitter(n_models - 1)
    if structure == "fixed":
        a = np.full(n_items, float(spec.discrimination_value))
    else:
        disc = disc or learned("discrimination")
        n_slopes = 1 if common else n_items
        # a LogNormal's support point is its mean; r = a / g ~ LogNormal(0, sigma) in the scale-free coordinates
        x[slopes:slopes + n_slopes] = (0.0 if free else disc["mu"]) + 0.5 * disc["sigma"] ** 2 + jitter(n_slopes)
        a = np.exp(x[slopes:slopes + n_slopes])
        if common:
            x[dev:dev + n_models - 1] = jitter(n_models - 1)
    difficulty = spec.location == "difficulty"
    location = learned(spec.location, g if difficulty else 1.0)
    support = location["mu"] - x[mean] if difficulty else location["mu"] + a * x[mean]
    x[offsets["loc"]:offsets["loc"] + n_items] = support + jitter(n_items)
    for name in ("guessing", "slip"):
        if offsets[name] >= 0:
            alpha, beta = priors[name].params["alpha"], priors[name].params["beta"]
            x[offsets[name]:offsets[name] + n_items] = math.log(alpha / beta) + jitter(n_items)
    return x
