"""Interrupts (Ctrl-C, SIGTERM) of a command: recorded, so that none is lost.

The command line installs :func:`catching_signals`: SIGINT and SIGTERM both raise
``KeyboardInterrupt`` in the main thread and are recorded. Libraries do not always let that
exception through: nutpie's sampler catches it and returns the draws it has (NaN for the rest),
PyMC's sampler stops early and returns a shorter trace, Python ignores it when it lands in a
finalizer (``__del__``, as during numba's compilation), and compiled code may turn it into another
error (``SystemError``). So the places a run passes often or must not pass after an interrupt
(progress updates, stage lines, the end of every sampler and optimizer, the staged output folder
before it appears) call :func:`check_interrupt`, which raises again when a signal was received;
and the command line treats any error raised after a signal as the interrupt. A sampler stopped
early thus never reaches the writers.

:class:`Interrupted` is an interrupt that kept finished work (``compare``'s finished specs): its
message says what was kept and how a rerun continues.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Interrupted", "catching_signals", "check_interrupt", "interrupt_received", "SIGNALS"]

#: The signals that end a command as an interrupt (exit status 130).
SIGNALS = (signal.SIGINT, signal.SIGTERM)

_RECEIVED: dict = {"signal": None}


class Interrupted(KeyboardInterrupt):
    """An interrupt after which some finished work was kept; ``kept`` says what and how to continue."""

    def __init__(self, kept: str):
        super().__init__(kept)
        self.kept = kept


def _record_and_raise(signum, frame) -> None:
    _RECEIVED["signal"] = signum
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextmanager
def catching_signals() -> Iterator[None]:
    """Inside the block, SIGINT and SIGTERM raise ``KeyboardInterrupt`` and are recorded
    (:func:`interrupt_received`); the earlier handlers come back on exit. Outside the main thread
    (where Python cannot set handlers) the block runs with the handlers as they are. The record
    is cleared on entry and on exit. An interrupt that lands in a finalizer, where Python can only
    print it ("Exception ignored in ..."), is not printed: it is recorded, and the next
    :func:`check_interrupt` raises it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _RECEIVED["signal"] = None
    previous = {sig: signal.signal(sig, _record_and_raise) for sig in SIGNALS}
    hook = sys.unraisablehook

    def quiet(unraisable) -> None:  # an interrupt Python could not raise (in a finalizer): recorded, not printed
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            hook(unraisable)

    sys.unraisablehook = quiet
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sys.unraisablehook = hook
        _RECEIVED["signal"] = None


def interrupt_received() -> bool:
    """Whether SIGINT or SIGTERM arrived since :func:`catching_signals` was entered."""
    return _RECEIVED["signal"] is not None


def check_interrupt() -> None:
    """Raise ``KeyboardInterrupt`` in the main thread when a signal arrived, though a library
    swallowed the first one (see the module notes); nothing in other threads or without one."""
    if _RECEIVED["signal"] is not None and threading.current_thread() is threading.main_thread():
        raise KeyboardInterrupt(signal.Signals(_RECEIVED["signal"]).name)
