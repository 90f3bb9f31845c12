"""numba's on-disk cache for functions that compile in code from other files.

numba keys a cached function by its own source file only (its path, modification time and size). A
cached function that inlines or calls a numba function of another file keeps the old build of that
code after an edit to that file alone, or after an upgrade that changed only that file, with no
warning. A module with such functions guards them with a digest of every file they compile in::

    _SOURCES = sources_digest(__file__, kernels.__file__)

    @numba.njit(cache=True)
    def _compiled_sources():
        return _SOURCES  # numba compiles a global as a constant: the digest of the cached build

and calls ``drop_stale(_compiled_sources, _SOURCES, f, g)`` once before first calling ``f`` or ``g``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["drop_stale", "sources_digest"]


def sources_digest(*paths) -> int:
    """A 56-bit digest of the bytes of the files at ``paths`` (small enough for numba to hold as an int64)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(Path(path).read_bytes())
    return int.from_bytes(digest.digest()[:7], "little")


def drop_stale(compiled_sources, digest: int, *functions) -> bool:
    """Drop the cached builds of ``functions`` (numba dispatchers, or the Python functions of ``cfunc``s)
    when ``compiled_sources()``, a cached numba function that returns the digest frozen into its build,
    differs from ``digest``, today's; then recompile ``compiled_sources``, so the cache holds today's digest
    with the builds that follow. Returns whether the builds were dropped. Call it before the functions'
    first use in the process: a build already loaded stays loaded."""
    from numba.core.caching import FunctionCache

    if compiled_sources() == digest:
        return False
    for function in functions:
        FunctionCache(getattr(function, "py_func", function)).flush()
    compiled_sources.recompile()
    return True
