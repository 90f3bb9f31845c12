"""The fast tier's discipline: a test not marked ``slow`` may not start a sampler (nutpie, ``pm.sample``, an
ADVI fit), a subprocess, a process pool or Dask. During such a test (its fixtures' setup and teardown included)
those entry points are replaced by a stub that fails the test with the marker to add, so ``make test-fast``
(``-m "not slow"``) stays fast by construction, not by timing (tests/test_tiers.py checks the guard itself).

Compiler calls of PyTensor and numba, ``ctypes.util`` look-ups and ``platform``'s (``uname -p`` for the processor
name in a run's provenance) are not counted as subprocesses: they are how those libraries build their C code or
learn the machine, cached after the first call in a process."""

from __future__ import annotations

import concurrent.futures
import functools
import multiprocessing.pool
import multiprocessing.process
import subprocess
import sys

import pytest


@functools.cache
def _guarded() -> tuple:
    """(object, attribute, what it starts): the entry points an unmarked test may not reach (``GUARDED``)."""
    # imported on first use, not with this file: the xdist controller, which loads this conftest but runs no
    # test, would otherwise import nutpie, PyMC and distributed (about 3 CPU-s) before it starts the workers
    import distributed
    import nutpie

    import bayesirt.inference.advi
    import pymc
    import pymc.sampling.mcmc
    import pymc.variational.inference

    return (
        (nutpie, "sample", "a NUTS sampler (nutpie.sample)"),
        (pymc, "sample", "a sampler (pymc.sample)"),
        (pymc.sampling.mcmc, "sample", "a sampler (pymc.sample)"),
        (pymc.variational.inference.Inference, "fit", "an ADVI fit (pymc Inference.fit)"),
        # bayesirt's own ADVI loop steps PyMC's objective without Inference.fit
        (bayesirt.inference.advi, "run_advi", "an ADVI fit (bayesirt.inference.advi.run_advi)"),
        (subprocess.Popen, "__init__", "a subprocess (subprocess.Popen)"),
        (concurrent.futures.ProcessPoolExecutor, "__init__", "a process pool (ProcessPoolExecutor)"),
        (multiprocessing.pool.Pool, "__init__", "a process pool (multiprocessing.Pool)"),
        (multiprocessing.process.BaseProcess, "start", "a process (multiprocessing.Process.start)"),
        (distributed.LocalCluster, "__init__", "a Dask cluster (distributed.LocalCluster)"),
        (distributed.Client, "__init__", "a Dask client (distributed.Client)"),
    )


def __getattr__(name: str):
    if name == "GUARDED":
        return _guarded()
    raise AttributeError(name)

#: Modules whose subprocesses are compilers or library look-ups, not work a test starts.
COMPILERS = ("pytensor.link.c", "pytensor.compile", "numba", "ctypes.util", "llvmlite", "platform")
HINT = ("{nodeid} is not marked slow but starts {what}. Mark it `@pytest.mark.slow` (or the module: "
        "`pytestmark = pytest.mark.slow`), or avoid the {what} in the fast test.")


class TierViolation(pytest.fail.Exception):
    """An unmarked test reached a guarded entry point (a BaseException, so ``except Exception`` in the code under
    test, as in the CLI's catch-all, does not hide it)."""


def _compiling() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith(COMPILERS):
            return True
        frame = frame.f_back
    return False


def _stub(original, what: str, nodeid: str, seen: list):
    def refuse(*args, **kwargs):
        if what.startswith("a subprocess") and _compiling():
            return original(*args, **kwargs)
        seen.append(what)
        raise TierViolation(HINT.format(nodeid=nodeid, what=what), pytrace=False)

    return refuse


def is_fast(item) -> bool:
    return item.get_closest_marker("slow") is None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    if is_fast(item):
        patch = pytest.MonkeyPatch()
        item.stash[_SEEN] = seen = []
        for owner, name, what in _guarded():
            patch.setattr(owner, name, _stub(getattr(owner, name), what, item.nodeid, seen))
        item.stash[_PATCH] = patch
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        return (yield)
    finally:
        patch = item.stash.get(_PATCH, None)
        if patch is not None:
            patch.undo()
            seen = item.stash[_SEEN]
            if seen:  # the stub's exception was caught by the code under test: fail here instead
                raise TierViolation(HINT.format(nodeid=item.nodeid, what=seen[0]), pytrace=False)


_PATCH = pytest.StashKey[pytest.MonkeyPatch]()
_SEEN = pytest.StashKey[list]()
