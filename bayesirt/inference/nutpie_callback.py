"""A posterior handed to nutpie as two numba C callbacks: the plumbing every direct model shares.

A direct model (:mod:`bayesirt.inference.nutpie_direct` for the 1PL-4PL) writes its log density and
gradient, and the expansion of a draw into the variables a fit reports, as numba functions of the
unconstrained point and of one byte buffer: a float64 header, then the data. nutpie's chains, threads of
this process, call them as C callbacks without Python or its GIL. This module holds what does not depend
on the model: the pointer arithmetic into the buffer (:func:`byte_offset`), the callbacks' C signatures
(:func:`compile_callbacks`), and the nutpie model around them (:func:`callback_model`), built through
nutpie's model class for PyMC models (``nutpie.compile_pymc.CompiledPyMCModel``, not public API:
pyproject.toml keeps nutpie below 0.17).

Each callback runs from an execution engine of its own (:func:`_isolated`), not numba's. numba compiles
every numba function a callback calls on its own first, into its one engine for the process, then links a
copy of it into the callback's code; the copies are weak symbols, so in numba's engine the callback calls
the standalone builds, which run slower: the MIRT likelihood's row loop, for one, is vectorized in the
callback's copy and scalar in its standalone build. A process that compiled a callback sampled slower
than one that loaded it from numba's cache, with the same draws: confirmatory MIRT at 200 x 500, 15.3 s
against 6.5 s; from the callback's own engine 7.4 s against 8.1 s (``benchmarks/nuts_numpyro.py``,
results/nuts_numpyro_200x500_cold_warm.md, before at d751c63 and after).

The callbacks follow nutpie's own codes (those of ``nutpie.compile_pymc``'s callback): 0 success, -1 a
point of the wrong dimension, 3 a non-finite gradient, 4 a non-finite density.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.binding as llvm
import numba
import numpy as np
import pandas as pd
import xarray as xr
from numba import types
from numba.extending import intrinsic

from bayesirt.utils.numba_cache import drop_stale

__all__ = ["Callback", "DirectModel", "POINT", "byte_offset", "callback_code", "callback_model", "compile_callbacks",
           "copy_point", "finish_logp"]

#: The decorator of a numba function that only a callback (or another such function) calls: compiled without
#: the wrapper that makes a numba function callable from Python, which numba otherwise builds, optimizes and
#: emits for every function it compiles, though a callback links in its own copy of the function's code.
#: With the 1PL-4PL prior's helpers compiled once each (they took slot constants, which numba specialized on),
#: ``direct_model`` at 200 x 500 from an empty cache, interleaved runs against 6b6142b (``/tmp`` script, not
#: kept): 2PL 5.1-5.8 s against 5.3-5.5, 3PL 6.4-6.6 against 6.7-7.7, hierarchical 2PL 5.7 against 6.3-6.8.
callback_code = numba.njit(no_cpython_wrapper=True)


#: The variable and dim of the unconstrained point, nutpie's draws of a model expanded after sampling
#: (:func:`callback_model`'s ``expand``).
POINT, POINT_DIM = "unconstrained_point", "unconstrained_coordinate"


@dataclass(frozen=True)
class DirectModel:
    """A nutpie model of a posterior (``compiled``, for ``nutpie.sample``), the variables its draws are
    expanded to (``reported_variables``), the functions nutpie calls: ``logp(x)`` -> (log density,
    gradient) at an unconstrained point, and ``initial_point(seed)``, and ``reported(posterior)``, the
    reported variables of nutpie's posterior (None: nutpie's expand callback wrote them)."""

    compiled: object
    reported_variables: list[str]
    logp: Callable[[np.ndarray], tuple[float, np.ndarray]]
    initial_point: Callable[[int], np.ndarray]
    reported: Callable[[xr.Dataset], xr.Dataset] | None = None


def copy_point(n_dim, n_expanded, x_pointer, out_pointer, data):
    """The expand callback (for :func:`compile_callbacks`) of a model whose reported variables are computed after
    sampling: the draw is its unconstrained point (``n_expanded`` = ``n_dim``)."""
    x, out = numba.carray(x_pointer, (n_dim,)), numba.carray(out_pointer, (n_expanded,))
    for k in range(min(n_dim, n_expanded)):
        out[k] = x[k]
    return 0


@intrinsic
def byte_offset(typingctx, pointer, offset):
    """``pointer`` + ``offset`` bytes (a void pointer)."""
    if pointer != types.voidptr or not isinstance(offset, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.gep(args[0], [context.cast(builder, args[1], signature.args[1], types.int64)])

    return types.voidptr(types.voidptr, offset), codegen


@callback_code
def finish_logp(gradient, logp, n_dim, gradient_pointer, logp_pointer):
    """Write ``logp`` and ``gradient`` where nutpie reads them; the callback's return code (0, 3 or 4)."""
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


def compile_callbacks(logp_callback, expand_callback, compiled_sources, digest: int):
    """The C callbacks (:class:`Callback`) of ``logp_callback(n_dim, x, gradient, logp, data)`` and
    ``expand_callback(n_dim, n_expanded, x, out, data)``, compiled on first use or loaded from numba's cache,
    and only from the cache while ``compiled_sources()`` gives ``digest`` (see
    :func:`bayesirt.utils.numba_cache.drop_stale`: numba checks a cached function against its own file only)."""
    double = types.CPointer(types.float64)
    drop_stale(compiled_sources, digest, logp_callback, expand_callback)
    defined = set(numba.core.registry.cpu_target.target_context.codegen()._engine._defined_symbols)
    logp = numba.cfunc(types.int64(types.uint64, double, double, double, types.voidptr), cache=True)(logp_callback)
    expand = numba.cfunc(types.int64(types.uint64, types.uint64, double, double, types.voidptr),
                         cache=True)(expand_callback)
    return _isolated(logp, defined), _isolated(expand, defined)


@dataclass(frozen=True)
class Callback:
    """A C callback's ``address`` and its ``ctypes`` function, whether numba loaded it ``from_cache``, and
    the execution ``engine`` that holds its machine code when it has one of its own (kept alive with it;
    None: numba's)."""

    address: int
    ctypes: Callable
    from_cache: bool
    engine: object


def _isolated(cfunc, defined: set) -> Callback:
    """``cfunc`` calling its own copies of the numba functions it calls (see the module's docstring).

    A callback compiled in this process, or loaded from numba's cache after one of the functions it calls
    was compiled here (``defined``: the symbols numba's engine held before; its runtime's, the same code
    everywhere, do not count), runs from an execution engine of its own, where those copies are the only
    definitions: from numba's object code when compiled here, else from its optimized module emitted again
    (0.2-0.6 s). A callback loaded into a process that has built none of its functions runs from numba's
    engine, which resolves its calls to its copies. numba's internals are used here (``_library``, the
    code library's target machine, object code and the engine's symbol set), as ``numba.core.caching``
    uses them; ``tests/test_nutpie_callback.py`` checks each case."""
    library = cfunc._library
    if cfunc.cache_hits:
        module = library._get_module_for_linking()
        built_here = {f.name for f in module.functions if not f.is_declaration} & defined
        if not any(name.startswith("_ZN") for name in built_here):  # not numba's runtime (NRT_incref, ...)
            return Callback(cfunc.address, cfunc.ctypes, True, None)
        code = library.codegen._tm.emit_object(module)
    else:
        code = library._get_compiled_object()
    # the engine owns (and frees) its target machine, so not numba's; it only loads finished machine code
    target_machine = llvm.Target.from_triple(library.codegen._tm.triple).create_target_machine(jit=True)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target_machine)
    engine.add_object_file(llvm.ObjectFileRef.from_data(code))
    engine.finalize_object()
    address = engine.get_function_address(cfunc.native_name)
    return Callback(address, type(cfunc.ctypes)(address), bool(cfunc.cache_hits), engine)


def callback_model(logp_callback: Callback, expand_callback: Callback, buffer: np.ndarray, n_dim: int,
                   variables: dict, coords: dict, initial_point: Callable[[int], np.ndarray],
                   expand: Callable[[np.ndarray], list] | None = None) -> DirectModel:
    """The nutpie model of compiled callbacks on ``buffer`` (the header and data they read).

    ``variables`` maps each reported variable, in the order the expand callback writes them, to its
    (shape, dims); ``coords`` labels the dims; ``initial_point(seed)`` is the start of a chain. With ``expand``
    (draws (..., n_dim) -> the ``variables`` in order, each (..., size)), ``expand_callback`` is
    :func:`copy_point`'s: nutpie stores the unconstrained point (:data:`POINT`) and the model's ``reported``
    computes the variables from all the draws at once."""
    from nutpie.compile_pymc import CompiledPyMCModel  # here, not at the top: importing nutpie is slow

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

    reported, reported_names = None, list(variables)
    if expand is not None:
        reported = functools.partial(_reported, expand, variables, coords)
        variables = {POINT: ((n_dim,), (POINT_DIM,))}
        coords = coords | {POINT_DIM: np.arange(n_dim)}
    names = list(variables)
    shapes = {n: tuple(variables[n][0]) for n in names}
    compiled = CompiledPyMCModel(
        dims={n: tuple(variables[n][1]) for n in names},
        compiled_logp_func=logp_callback, compiled_expand_func=expand_callback,
        initial_point_func=initial_point, shared_data={}, shared_var_keys={}, user_data=buffer,
        n_expanded=sum(int(np.prod(shapes[n])) for n in names),
        shape_info=(names, [None] * len(names), [shapes[n] for n in names]), logp_func=None, expand_func=None,
        _n_dim=n_dim, _shapes=shapes, _coords={k: pd.Index(v) for k, v in coords.items()},
    )
    return DirectModel(compiled, reported_names, logp, initial_point, reported)


def _reported(expand, variables: dict, coords: dict, posterior: xr.Dataset) -> xr.Dataset:
    """The ``variables`` (name -> (shape, dims)) of the draws of :data:`POINT` in nutpie's ``posterior``, by
    ``expand``; labelled by ``coords`` and the posterior's chain and draw."""
    draws = posterior[POINT]
    lead = draws.shape[:-1]
    values = expand(draws.values)
    return xr.Dataset({name: (draws.dims[:-1] + tuple(dims), value.reshape(lead + tuple(shape)))
                       for (name, (shape, dims)), value in zip(variables.items(), values, strict=True)},
                      coords={d: posterior[d].values for d in draws.dims[:-1]} | coords, attrs=posterior.attrs)
