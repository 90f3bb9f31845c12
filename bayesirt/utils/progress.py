"""Progress bars for bayesirt's own long loops (samplers draw their own)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

__all__ = ["progress_bar", "show_progress"]

_SHOWN = {"bars": True}


def show_progress(enabled: bool) -> None:
    """Turn every progress bar of this process on or off (the command line's ``--no-progress``)."""
    _SHOWN["bars"] = bool(enabled)


@contextmanager
def progress_bar(total: int, description: str, *, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)``; draws a bar on stderr when ``enabled``, else does nothing."""
    if not (enabled and _SHOWN["bars"]):
        yield lambda n=1: None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn())
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n=1: bar.advance(task, n)
