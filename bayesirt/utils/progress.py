"""Progress of bayesirt's own long loops (samplers draw their own) and the stage lines of long jobs.

On a terminal a loop draws a bar (rich) that disappears when done. When stderr is not a terminal
(a batch job, CI, ``nohup``, a redirected log), bars would print nothing, so a loop writes plain
lines instead: one when it starts, one at every tenth of the work (at most one per ``MIN_GAP``
seconds), one whenever its phase (``detail``) changes, a heartbeat when nothing was written for
``HEARTBEAT`` seconds (elapsed time and an estimate of the time left, assuming the remaining
steps take as long as the finished ones on average), and one when it ends. A loop that stops on
a criterion (``until``: ADVI's loss plateau, a search's step size) has no known length: its lines
count the steps and bound the time left by its cap ("up to"), without a share or an estimate.
:func:`stage` writes one line naming the stage a job enters, on terminals and off.

Every update and stage line is also a place where an interrupt that a library swallowed is
raised again (:func:`bayesirt.utils.interrupts.check_interrupt`).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from bayesirt.utils.interrupts import check_interrupt

__all__ = ["progress_bar", "show_progress", "stage", "heartbeat", "format_duration", "HEARTBEAT", "MIN_GAP"]

#: Seconds without a line after which a non-terminal progress report writes a heartbeat.
HEARTBEAT = 30.0
#: Fewest seconds between two lines at tenths of a loop (a quick loop writes only its first and last line).
MIN_GAP = 5.0

_SHOWN = {"bars": True}
_ACTIVE = {"reports": 0}  # plain-line loop reports running: a heartbeat around them stays quiet


def show_progress(enabled: bool) -> None:
    """Turn every progress report of this process on or off (the command line's ``--no-progress``)."""
    _SHOWN["bars"] = bool(enabled)


def format_duration(seconds: float) -> str:
    """``'45 s'``, ``'3 min 05 s'``, ``'2 h 07 min'``."""
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _steps(n: int) -> str:
    return f"{n:,} step" + ("" if n == 1 else "s")


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def stage(message: str, *, enabled: bool = True, stream: TextIO | None = None) -> None:
    """Write ``bayesirt: MESSAGE`` as one line on stderr (unless progress is off)."""
    check_interrupt()
    if enabled and _SHOWN["bars"]:
        out = stream if stream is not None else sys.stderr
        print(f"bayesirt: {message}", file=out, flush=True)


class _LineReport:
    """Plain-line progress of one loop for a stream that is not a terminal."""

    def __init__(self, total: int | None, description: str, stream: TextIO, heartbeat: float, min_gap: float,
                 until: str | None = None, detail: Callable[[], str] | None = None):
        self.total = None if total is None else max(int(total), 0)
        self.description, self.stream, self.heartbeat = description, stream, heartbeat
        self.min_gap, self.until, self.detail = min_gap, until, detail
        self.done, self.start = 0, time.monotonic()
        self.last_line, self.last_tenth = self.start, 0
        self.lock, self.stopped = threading.Lock(), threading.Event()
        self.phase = detail() if detail else ""
        if until is None:
            self.write(f"{description}: started, {self.total:,} steps" + (f" ({self.phase})" if self.phase else ""))
        else:
            cap = f", at most {self.total:,} steps" if self.total else ""
            self.write(f"{description}: started, runs until {until}{cap}" + (f" ({self.phase})" if self.phase else ""))
        _ACTIVE["reports"] += 1
        self.thread = threading.Thread(target=self._beat, daemon=True)
        self.thread.start()

    def write(self, text: str) -> None:
        print(f"bayesirt: {text}", file=self.stream, flush=True)
        self.last_line = time.monotonic()

    def status(self) -> str:
        elapsed = time.monotonic() - self.start
        phase = f" ({self.phase})" if self.phase else ""
        if self.until is not None:  # no known length: steps so far, and the time left bounded by the cap
            text = f"{self.description}: {_steps(self.done)} after {format_duration(elapsed)}{phase}"
            if self.done and self.total and self.done < self.total:
                text += (f"; runs until {self.until}, up to {format_duration(elapsed / self.done * (self.total - self.done))}"
                         f" more (cap {self.total:,} steps)")
            return text
        share = self.done / self.total if self.total else 1.0
        text = f"{self.description}: {self.done:,}/{self.total:,} ({share:.0%}) after {format_duration(elapsed)}{phase}"
        if 0 < self.done < self.total:
            text += f", about {format_duration(elapsed / self.done * (self.total - self.done))} left"
        elif self.done == 0:
            text += ", no step finished yet (no estimate)"
        return text

    def advance(self, n: int = 1) -> None:
        check_interrupt()
        with self.lock:
            self.done += n
            if self.until is not None or not self.total:
                return  # no tenths of an unknown length: heartbeats and phase changes only
            tenth = 10 * self.done // self.total
            if tenth > self.last_tenth and self.done < self.total and \
                    time.monotonic() - self.last_line >= self.min_gap:
                self.last_tenth = tenth
                self.write(self.status())

    def _beat(self) -> None:
        while not self.stopped.wait(min(self.heartbeat, 1.0)):
            with self.lock:
                phase = self.detail() if self.detail else ""
                if phase != self.phase:  # a new phase (NUTS: sampling after warm-up; ADVI: the next rate)
                    self.phase = phase
                    self.write(self.status())
                elif time.monotonic() - self.last_line >= self.heartbeat:
                    self.write(self.status())

    def close(self, ok: bool) -> None:
        self.stopped.set()
        self.thread.join()
        _ACTIVE["reports"] -= 1
        with self.lock:
            elapsed = format_duration(time.monotonic() - self.start)
            if self.until is not None or not self.total:  # no known length: the steps it took
                self.write(f"{self.description}: {'done' if ok else 'stopped'} after {_steps(self.done)} in {elapsed}")
                return
            steps = f"{self.done:,}" + (f" of {self.total:,}" if self.done != self.total else "")
            self.write(f"{self.description}: done, {steps} steps in {elapsed}" if ok else
                       f"{self.description}: stopped at {self.done:,}/{self.total:,} after {elapsed}")


@contextmanager
def progress_bar(total: int | None, description: str, *, enabled: bool = True, stream: TextIO | None = None,
                 heartbeat: float = HEARTBEAT, min_gap: float = MIN_GAP, until: str | None = None,
                 detail: Callable[[], str] | None = None) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)``. Draws a bar when ``stream`` (default: stderr) is a terminal, writes
    plain progress lines when it is not (see the module), does nothing when disabled (but still
    raises a swallowed interrupt).

    ``until``: the loop stops on a criterion so named (e.g. "the loss settles"), ``total`` being
    only its cap (None: no cap); the lines then say "up to" instead of estimating. ``detail``: a
    function naming the loop's current phase, shown in its lines (a change writes a line)."""
    if not (enabled and _SHOWN["bars"]):
        def advance_quietly(n: int = 1) -> None:
            check_interrupt()

        yield advance_quietly
        return
    out = stream if stream is not None else sys.stderr
    if not _is_terminal(out):
        report = _LineReport(total, description, out, heartbeat, min_gap, until, detail)
        ok = False
        try:
            yield report.advance
            ok = True
        finally:
            report.close(ok)
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn())
    with Progress(*columns, transient=True, console=Console(file=out)) as bar:
        task = bar.add_task(description, total=None if until is not None else total)

        def advance(n: int = 1) -> None:
            check_interrupt()
            bar.advance(task, n)

        yield advance


@contextmanager
def heartbeat(description: str, *, enabled: bool = True, stream: TextIO | None = None,
              every: float = HEARTBEAT) -> Iterator[None]:
    """For a long step that reports no progress of its own off a terminal (a sampler's bar): when
    stderr is not a terminal, a line every ``every`` seconds saying it is still running and for how
    long (no estimate: the step's length is unknown), except while a loop inside it writes its own
    lines (:func:`progress_bar`, which estimate). On a terminal or when disabled: nothing."""
    out = stream if stream is not None else sys.stderr
    if not (enabled and _SHOWN["bars"]) or _is_terminal(out):
        yield
        return
    start, stopped = time.monotonic(), threading.Event()

    def beat() -> None:
        while not stopped.wait(every):
            if _ACTIVE["reports"]:
                continue
            print(f"bayesirt: {description}: still running after {format_duration(time.monotonic() - start)}",
                  file=out, flush=True)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stopped.set()
        thread.join()
