"""The residual family-DIF posterior as a nutpie model without PyTensor: log density and gradient in numba.

The posterior of :func:`bayesirt.models.family_dif.build_family_dif` (easiness b, flat or Normal(0, 2);
family effects delta ~ ZeroSumNormal(sd) over the families of each item, sd fixed (ridge) or
~ HalfNormal(1) (hierarchical); logit P = b_i + o_im + delta_{i, f(m)} with fixed offsets o) in exactly
PyMC's unconstrained coordinates, the point x = (b, log sd when learned, z) with z (item, family - 1) the
values of PyMC's ``ZeroSumTransform`` over the family axis:

    delta_if = z_if - s_i / (sqrt(F) + F)  (f < F - 1),   delta_i,F-1 = -s_i / sqrt(F),   s_i = sum_f z_if,

an isometry onto the zero-sum subspace (no Jacobian term). Every normalizing constant is PyMC's
(``ZeroSumNormal``'s counts F - 1 of F per item, ``HalfNormal``'s log(sqrt(2 / pi)) and the log
transform's Jacobian log sd), so the value and gradient equal ``pm.Model.compile_logp(jacobian=True)`` /
``compile_dlogp`` of ``build_family_dif``'s model (``tests/test_direct_dif.py``, to 1e-10). The
likelihood is :func:`bayesirt.models.dif_kernel.family_dif_loglik_and_gradient` over the observed cells
grouped by (item, family); the draws are expanded to easiness, family_effect_sd (hierarchical),
family_effect and the Deterministic dif_range, as the PyMC path reports them. The callbacks, and the nutpie
model around them, are :mod:`bayesirt.inference.nutpie_callback`'s; :func:`sample_family_dif` samples it
with :func:`bayesirt.inference.fitting.run_nutpie` and returns the tree of
:func:`~bayesirt.inference.fitting.sample_model`.

Cost, at 1,000 items x 600 models x 5 families, CPU ms of one log density + gradient through the callback
nutpie calls: 2.47 against 17.5 for PyMC's graph compiled by nutpie with 10% of the cells missing, 1.37
against 17.6 with 50% (``benchmarks/direct_dif.py``, results/direct_dif_full.jsonl, load 11 on 2 cores).
"""

from __future__ import annotations

import functools
import json
import math
import os
import time

import numba
import numpy as np

from bayesirt.inference import nutpie_callback
from bayesirt.inference.fitting import nuts_settings, run_nutpie, sample_model
from bayesirt.inference.nutpie_callback import (
    DirectModel, byte_offset, callback_code, callback_model, compile_callbacks, finish_logp,
)
from bayesirt.models import dif_kernel
from bayesirt.models.dif_kernel import cells_by_family, family_dif_loglik_and_gradient
from bayesirt.models.family_dif import EASINESS_SD, family_dif_inputs
from bayesirt.utils.numba_cache import sources_digest
from bayesirt.utils.options import declare

__all__ = ["family_dif_model", "sample_family_dif"]

#: Slots of the float64 header of the buffer: the point's size, the items, the families, the fixed scale of
#: the family effects (0: learned, hierarchical), the sd of the easiness prior (0: flat), the observed
#: cells. After it: n_if (item, family; float64), the groups' starts (int64) and the cells' offsets
#: (float64) of :func:`bayesirt.models.dif_kernel.cells_by_family`.
N_DIM, N_ITEMS, N_FAMILIES, SD, B_SD, N_CELLS = range(6)
HEADER = 6
_LOG_SQRT_2PI = math.log(math.sqrt(2.0 * math.pi))
_LOG_SQRT_2_OVER_PI = math.log(math.sqrt(2.0 / math.pi))


@callback_code
def _family_effects(x, head):
    """(log sd, sd, delta (item, family)) at the point ``x``: PyMC's zero-sum transform of z."""
    n_items, n_families = np.int64(head[N_ITEMS]), np.int64(head[N_FAMILIES])
    learned = head[SD] <= 0.0
    log_sd = x[n_items] if learned else 0.0
    sd = np.exp(log_sd) if learned else head[SD]
    first, free = n_items + (1 if learned else 0), n_families - 1
    root = np.sqrt(np.float64(n_families))
    delta = np.empty((n_items, n_families))
    for i in range(n_items):
        total = 0.0
        for f in range(free):
            total += x[first + i * free + f]
        norm = total / (root + n_families)
        for f in range(free):
            delta[i, f] = x[first + i * free + f] - norm
        delta[i, free] = (norm - total / root) - norm
    return log_sd, sd, delta


@callback_code
def _log_posterior(x, head, delta, log_sd, sd, total, gb, gd, gradient):
    """The log posterior density at ``x`` (likelihood ``total`` with gradients ``gb``, ``gd``), its gradient
    written into ``gradient``: the priors and the chain rule through the zero-sum transform."""
    n_items, n_families = np.int64(head[N_ITEMS]), np.int64(head[N_FAMILIES])
    learned = head[SD] <= 0.0
    logp = total
    b_sd = head[B_SD]
    for i in range(n_items):
        gradient[i] = gb[i]
        if b_sd > 0.0:  # Normal(0, b_sd); flat: nothing
            logp += -0.5 * (x[i] / b_sd) ** 2 - _LOG_SQRT_2PI - np.log(b_sd)
            gradient[i] -= x[i] / b_sd ** 2
    # ZeroSumNormal(sd): -delta^2 / (2 sd^2) per cell, the constant counted (F - 1) times per item
    squares = 0.0
    first, free = n_items + (1 if learned else 0), n_families - 1
    root = np.sqrt(np.float64(n_families))
    for i in range(n_items):
        partial = 0.0  # d/d delta summed over the free families
        for f in range(n_families):
            squares += (delta[i, f] / sd) ** 2
            gd[i, f] -= delta[i, f] / sd ** 2
        for f in range(free):
            partial += gd[i, f]
        for f in range(free):
            gradient[first + i * free + f] = gd[i, f] - partial / (root + n_families) - gd[i, free] / root
    logp += -0.5 * squares - (_LOG_SQRT_2PI + log_sd if learned else _LOG_SQRT_2PI + np.log(sd)) * (n_items * free)
    if learned:  # HalfNormal(1) of sd, and the log transform's Jacobian log sd
        logp += -0.5 * sd ** 2 + _LOG_SQRT_2_OVER_PI + log_sd
        gradient[n_items] = squares - n_items * free - sd ** 2 + 1.0
    return logp


@callback_code
def _cells(data, head):
    """(n_if, start, offset) after the header."""
    n_items, n_families = np.int64(head[N_ITEMS]), np.int64(head[N_FAMILIES])
    groups = n_items * n_families
    correct = numba.carray(byte_offset(data, 8 * HEADER), (n_items, n_families), np.float64)
    start = numba.carray(byte_offset(data, 8 * (HEADER + groups)), (groups + 1,), np.int64)
    offset = numba.carray(byte_offset(data, 8 * (HEADER + 2 * groups + 1)), (np.int64(head[N_CELLS]),), np.float64)
    return correct, start, offset


def _logp_callback(n_dim, x_pointer, gradient_pointer, logp_pointer, data):
    """The log posterior density and its gradient at the unconstrained point ``x``; nutpie's codes
    (:mod:`bayesirt.inference.nutpie_callback`)."""
    head = numba.carray(data, (HEADER,), np.float64)
    if n_dim != np.int64(head[N_DIM]):
        return -1
    x = numba.carray(x_pointer, (n_dim,))
    log_sd, sd, delta = _family_effects(x, head)
    correct, start, offset = _cells(data, head)
    total, gb, gd = family_dif_loglik_and_gradient(x[:np.int64(head[N_ITEMS])], delta, correct, start, offset)
    gradient = np.empty(n_dim)
    logp = _log_posterior(x, head, delta, log_sd, sd, total, gb, gd, gradient)
    return finish_logp(gradient, logp, n_dim, gradient_pointer, logp_pointer)


def _expand_callback(n_dim, n_expanded, x_pointer, out_pointer, data):
    """nutpie's expand callback: easiness, family_effect_sd (when learned), family_effect and dif_range."""
    head = numba.carray(data, (HEADER,), np.float64)
    x, out = numba.carray(x_pointer, (n_dim,)), numba.carray(out_pointer, (n_expanded,))
    n_items, n_families = np.int64(head[N_ITEMS]), np.int64(head[N_FAMILIES])
    log_sd, sd, delta = _family_effects(x, head)
    k = n_items
    out[:n_items] = x[:n_items]
    if head[SD] <= 0.0:
        out[k] = sd
        k += 1
    for i in range(n_items):
        low, high = delta[i, 0], delta[i, 0]
        for f in range(n_families):
            out[k + i * n_families + f] = delta[i, f]
            low, high = min(low, delta[i, f]), max(high, delta[i, f])
        out[k + n_items * n_families + i] = high - low
    return 0


#: The digest of this module's source and of the files it compiles in (see ``nutpie_direct._callbacks``).
_SOURCES = sources_digest(__file__, dif_kernel.__file__, nutpie_callback.__file__)


@numba.njit(cache=True)
def _compiled_sources():
    """:data:`_SOURCES` as it was when numba compiled this file's cached functions."""
    return _SOURCES


@functools.cache
def _callbacks():
    """The two C callbacks, compiled on first use in this process or loaded from numba's cache while the
    files they compile in are unchanged (:func:`bayesirt.utils.numba_cache.drop_stale`)."""
    return compile_callbacks(_logp_callback, _expand_callback, _compiled_sources, _SOURCES)


def family_dif_model(y, observed, offsets, family, n_families: int, *, item_ids=None, family_names=None,
                     prior: str = "ridge", delta_sd: float = 1.0, easiness_prior: str = "flat") -> DirectModel:
    """The nutpie model of the posterior of ``build_family_dif`` with the same arguments (checked as it checks
    them); its callbacks are compiled on first use in this process."""
    y_obs, weight, offsets, family, coords = family_dif_inputs(
        y, observed, offsets, family, n_families, item_ids=item_ids, family_names=family_names, prior=prior,
        delta_sd=delta_sd, easiness_prior=easiness_prior)
    n_items = y_obs.shape[0]
    learned = prior == "hierarchical"
    n_dim = n_items * n_families + int(learned)  # b, log sd, z: n_items + n_items * (F - 1)
    onehot = np.zeros((family.size, n_families))
    onehot[np.arange(family.size), family] = 1.0
    start, cell_offsets = cells_by_family(weight > 0, offsets, family, n_families)
    head = np.array([n_dim, n_items, n_families, 0.0 if learned else delta_sd,
                     EASINESS_SD if easiness_prior == "normal" else 0.0, cell_offsets.size], dtype=np.float64)
    buffer = np.concatenate([head.view(np.uint8), (y_obs @ onehot).ravel().view(np.uint8), start.view(np.uint8),
                             cell_offsets.view(np.uint8)])
    variables = {"easiness": ((n_items,), ("item",))}
    variables |= {"family_effect_sd": ((), ())} if learned else {}
    variables |= {"family_effect": ((n_items, n_families), ("item", "family")), "dif_range": ((n_items,), ("item",))}

    def initial_point(seed) -> np.ndarray:
        """PyMC's start as nutpie uses it: every free variable's support point in the unconstrained space
        (0 for b, z and log sd, HalfNormal(1)'s support point being 1) plus U(-1, 1) jitter."""
        return np.random.default_rng(seed).uniform(-1.0, 1.0, n_dim)

    return callback_model(*_callbacks(), buffer, n_dim, variables, coords, initial_point)


@declare(forward=sample_model)
def sample_family_dif(y, observed, offsets, family, n_families: int, item_ids=None, family_names=None,
                      prior: str = "ridge", delta_sd: float = 1.0, easiness_prior: str = "flat", *,
                      progress: bool = True, **options):
    """NUTS by nutpie on :func:`family_dif_model`: the tree :func:`~bayesirt.inference.fitting.sample_model`
    returns for ``build_family_dif``'s model with method "nuts" and sampler "nutpie" (the same variables,
    dims, coordinates, dtypes, ``sample_stats`` and attributes). ``options`` are ``sample_model``'s, checked
    as it checks them; those of other methods are ignored, as there."""
    import xarray as xr  # import time: xarray loads when a model is sampled

    settings = sample_model.__kwdefaults__ | options
    timings: dict = {}
    t0 = time.perf_counter()
    model = family_dif_model(y, observed, offsets, family, n_families, item_ids=item_ids, family_names=family_names,
                             prior=prior, delta_sd=delta_sd, easiness_prior=easiness_prior)
    timings["compile_s"] = time.perf_counter() - t0
    draws, tune, chains, nutpie_settings = (settings[k] for k in ("draws", "tune", "chains", "nutpie_settings"))
    cores = min(chains, settings["cores"] or os.cpu_count() or 1)
    tree = run_nutpie(model.compiled, draws, tune, chains, cores, settings["seed"], progress, timings,
                      nutpie_settings or {})
    result = xr.DataTree.from_dict({"posterior": tree["posterior"].to_dataset()[model.reported_variables],
                                    "sample_stats": tree["sample_stats"].to_dataset()})
    recorded = {"method": "nuts", "seed": settings["seed"]} | nuts_settings("nutpie", draws, tune, chains,
                                                                           nutpie_settings)
    result.attrs = {"bayesirt_settings": json.dumps(recorded), "bayesirt_timings": json.dumps(timings)}
    return result
