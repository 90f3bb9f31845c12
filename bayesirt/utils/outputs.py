"""Output folders that are never overwritten silently and never left half-written.

A run writes into a hidden staging folder beside the target; only when everything is written is
the staging folder renamed to the target. An interrupted or failed run leaves any earlier result
untouched. Replacing an existing folder needs ``force=True`` (the CLI's ``--force``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bayesirt.errors import OutputError

__all__ = ["staged_output", "check_output"]


def check_output(target: str | os.PathLike, *, force: bool) -> Path:
    """Fail early, before any expensive work, when ``target`` exists and ``force`` is False."""
    target = Path(target)
    if target.exists() and not force:
        raise OutputError(f"output folder {target} already exists; pass --force to replace it or choose another --out")
    if target.exists() and not target.is_dir():
        raise OutputError(f"output path {target} exists and is not a folder; choose another --out")
    return target


@contextmanager
def staged_output(target: str | os.PathLike, *, force: bool) -> Iterator[Path]:
    """Yield a staging folder; on success it replaces ``target`` atomically (same file system)."""
    target = check_output(target, force=force)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    except OSError as err:
        raise OutputError(f"cannot write under {target.parent} ({err.strerror}); choose another --out") from None
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if target.exists():
        retired = target.with_name(f".{target.name}.replaced-{os.getpid()}")
        target.rename(retired)
        staging.rename(target)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        staging.rename(target)
