"""The guard of numba's on-disk cache for functions that compile in code from other files
(:mod:`bayesirt.utils.numba_cache`)."""

from __future__ import annotations

import numba
import numpy as np
from numba.core.caching import FunctionCache

from bayesirt.models import information
from bayesirt.utils.numba_cache import drop_stale, sources_digest

_DIGEST = 7


@numba.njit(cache=True)
def _compiled_digest():
    return _DIGEST


@numba.njit(cache=True)
def _guarded(x):
    return x + 1.0


def _is_cached(function) -> bool:
    return bool(FunctionCache(function.py_func)._cache_file._load_index())


def test_digest_follows_every_file(tmp_path):
    """The digest changes with any one file's bytes, fits in an int64, and does not depend on the path."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x = 1\n")
    b.write_text("y = 2\n")
    before = sources_digest(a, b)
    assert 0 <= before < 2 ** 56
    b.write_text("y = 3\n")
    assert sources_digest(a, b) != before
    (tmp_path / "c.py").write_text("y = 2\n")
    b.write_text("y = 2\n")
    assert sources_digest(a, tmp_path / "c.py") == before


def test_stale_builds_are_dropped_and_the_new_digest_cached(monkeypatch):
    """While the cached digest is today's nothing is dropped; when it differs (as after an edit to a file the
    functions compile in) their cached builds are dropped and the digest function is rebuilt with today's
    value, so the next check passes again."""
    _compiled_digest.recompile()  # caches _DIGEST's build, whatever an earlier run left
    _guarded(1.0)
    assert _is_cached(_guarded)
    assert not drop_stale(_compiled_digest, _DIGEST, _guarded)
    assert _is_cached(_guarded)
    today = _DIGEST + 1
    monkeypatch.setitem(_compiled_digest.py_func.__globals__, "_DIGEST", today)  # as if a file had changed
    assert drop_stale(_compiled_digest, today, _guarded)
    assert not _is_cached(_guarded)
    assert _compiled_digest() == today
    assert not drop_stale(_compiled_digest, today, _guarded)


def test_information_sums_are_dropped_when_the_kernel_file_changes(monkeypatch):
    """The information sums inline the kernel's exp, from another file: their cached build stays while the
    digest of both files matches the cached one, and is dropped when it does not (as after an edit to
    kernels.py alone); the check runs once a process. The real digest is cached again at the end."""
    information.mean_item_information(np.zeros((2, 3)), np.ones((2, 4)), np.zeros((2, 4)))
    assert _is_cached(information._information_sums)
    information._fresh_information_sums.cache_clear()
    assert information._fresh_information_sums() is information._information_sums
    assert _is_cached(information._information_sums)
    information._fresh_information_sums.cache_clear()
    monkeypatch.setattr(information, "_SOURCES", information._SOURCES + 1)  # as if kernels.py had changed
    information._fresh_information_sums()
    assert not _is_cached(information._information_sums)
    monkeypatch.undo()
    information._fresh_information_sums()  # checked once a process: the patched digest is not seen again
    assert information._compiled_sources() == information._SOURCES + 1
    information._fresh_information_sums.cache_clear()
    information._fresh_information_sums()
    assert information._compiled_sources() == information._SOURCES
