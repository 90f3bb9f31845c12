"""The registry of data formats: how :func:`bayesirt.data.load` recognises an input, reads it, and which
reading options it takes.

A format is declared in a module of :mod:`bayesirt.data` by ``READERS``, a tuple of :class:`Reader` (one
per format the module reads): its ``detect``
(does this path look like my format, given the options?), its ``read`` (path and options -> a response
Dataset; every reader takes ``drop_empty``) and the :class:`~bayesirt.utils.options.Option` declarations
of the reading options it takes. :func:`readers` finds them (no list to edit), ``load`` asks them in
``order`` and reads with the first that recognises the input, and
:data:`bayesirt.data.io.READ_OPTIONS` (the command line's "reading DATA" flags and the ``[read]`` table
of analysis files) is the union of their declarations. Evaluation-harness output is one such format
whose own registry (:mod:`bayesirt.data.harness`) holds one module per harness.

To add a format: a module ``bayesirt/data/<name>.py`` defining ``READERS = (Reader(...),)``, and its tests.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from bayesirt.utils.options import Option, option_table

__all__ = ["Reader", "has_suffix", "reading_option", "readers", "reader_for", "union_of_options", "modules_defining",
           "DROP_EMPTY", "BINARIZE"]


def reading_option(name: str, default: Any, help: str, **declaration: Any) -> Option:
    """One named reading option (an :class:`~bayesirt.utils.options.Option` whose name is set)."""
    return option_table(**{name: Option(default, help, **declaration)})[name]


DROP_EMPTY = reading_option(
    "drop_empty", True,
    "refuse models or items without any observed response instead of dropping them (dropped ones are named in "
    "a warning, the report and summary.json)", flag="--refuse-empty")
"""Every reader drops models and items without an observed response and names them (``drop_empty=True``,
the one default of :func:`~bayesirt.data.load` and of every reader); ``drop_empty=False`` (``--refuse-empty``)
refuses such data instead, naming them."""

BINARIZE = reading_option(
    "binarize", None, "score >= T counts as correct (partial credit, and the mean of repeats) [refuse partial credit]",
    type=float, metavar="T")
"""The partial-credit threshold every reader but the saved ``.nc`` file takes."""


def has_suffix(*suffixes: str) -> Callable[[Path, Mapping[str, Any]], bool]:
    """A ``detect`` for a file format known by its suffix (any case)."""

    def detect(path: Path, options: Mapping[str, Any]) -> bool:
        return path.is_file() and path.suffix.lower() in suffixes

    return detect


@dataclass(frozen=True)
class Reader:
    """One data format that :func:`bayesirt.data.load` reads.

    ``kind`` names the input in messages ("a wide table"); ``looks_like`` says what it looks like on disk
    (the list of supported inputs); ``detect(path, options)`` is True when ``path`` is this format (it may
    raise :class:`~bayesirt.errors.DataError` for an input that is this format but damaged); ``read(path,
    drop_empty=..., **options)`` reads it; ``options`` are the declared reading options it takes (command
    line, analysis files and Python); ``keywords`` are Python-only keywords (e.g. column names); ``family``
    groups formats in messages ("matrix files"); ``order`` is the detection order (lower first)."""

    kind: str
    looks_like: str
    detect: Callable[[Path, Mapping[str, Any]], bool]
    read: Callable[..., Any]
    options: tuple[Option, ...] = ()
    keywords: tuple[str, ...] = ()
    family: str = ""
    order: int = 50
    takes: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "takes", tuple(o.name for o in self.options) + self.keywords)


def union_of_options(declarations: Iterable[tuple[Option, ...]], owner: str) -> dict[str, Option]:
    """The options of several readers by name; one name declared two ways is a bug of the readers."""
    out: dict[str, Option] = {}
    for options in declarations:
        for opt in options:
            if out.setdefault(opt.name, opt) != opt:
                raise TypeError(f"{owner}: the reading option {opt.name!r} is declared twice, differently")
    return out


def modules_defining(package: str, attribute: str) -> list[Any]:
    """The ``attribute`` of every module of ``package`` (a package name) that defines it, by module name."""
    root = importlib.import_module(package)
    found = []
    for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package}.{info.name}")
        if hasattr(module, attribute):
            found.append(getattr(module, attribute))
    return found


@cache
def readers() -> tuple[Reader, ...]:
    """Every registered format (the ``READERS`` of each module of :mod:`bayesirt.data`), in detection order."""
    found = [r for module_readers in modules_defining("bayesirt.data", "READERS") for r in module_readers]
    return tuple(sorted(found, key=lambda r: (r.order, r.kind)))


def reader_for(path: Path, options: Mapping[str, Any]) -> Reader | None:
    """The first format (in detection order) that recognises ``path``, or None."""
    return next((r for r in readers() if r.detect(path, options)), None)
