"""The registry of data formats: how :func:`bayesirt.data.load` recognises an input, reads it, and which
reading options it takes.

A format is declared in a module of :mod:`bayesirt.data.formats` by ``READERS``, a tuple of :class:`Reader`
(one per format): what it is called and looks like on disk, the
:class:`~bayesirt.utils.options.Option` declarations of the reading options it takes, and the module that
reads it with the names of its ``detect`` (does this path look like my format, given the options?) and
``read`` (path and options -> a response Dataset; every reader takes ``drop_empty``) functions. The
declarations import no reader: building the command line (whose "reading DATA" flags, and the ``[read]``
table of analysis files, are the union of the declared options, :data:`bayesirt.data.settings.READ_OPTIONS`)
loads neither pandas nor xarray; a reader's module is imported when ``load`` first asks it. :func:`readers`
finds the declarations (no list to edit), ``load`` asks them in ``order`` and reads with the first that
recognises the input. Evaluation-harness output is one such format whose harnesses are declared the same way,
one :class:`Harness` per module of :mod:`bayesirt.data.formats.harnesses`.

To add a format: its reader, a module ``bayesirt/data/<name>.py``; its declaration, a module
``bayesirt/data/formats/<name>.py`` defining ``READERS = (Reader(...),)``; and its tests.
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

__all__ = ["Reader", "Harness", "has_suffix", "reading_option", "readers", "reader_for", "harness_formats",
           "union_of_options", "modules_defining", "DROP_EMPTY", "BINARIZE", "KEY", "ORIENTATIONS", "ORIENTATION"]


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

KEY = reading_option(
    "key", None, "answer key, a CSV with columns item_id,key: the cells are multiple-choice answers (0-4 or A-E), "
    "scored 1 where equal to the item's key, 0 otherwise, missing stays missing [none: cells are 0/1]", type=str,
    metavar="KEY.csv")
"""The answer key (:mod:`bayesirt.data.answer_key`) every file reader but the saved ``.nc`` file takes."""

ORIENTATIONS = ("auto", "models-rows", "items-rows")
"""``auto``: detect (and warn when it is a guess); ``models-rows``: one row per model (respondent), one
column per item; ``items-rows``: one row per item, one column per model."""

ORIENTATION = reading_option(
    "orientation", "auto", "layout of a matrix file (wide CSV, NPY, NPZ, NT folder): one row per model (models-rows) or "
    "per item (items-rows); auto detects it from headers and ids and warns when it has to guess", choices=ORIENTATIONS)
"""The reading option every matrix reader takes (:mod:`bayesirt.data.layout`)."""


def has_suffix(*suffixes: str) -> Callable[[Path, Mapping[str, Any]], bool]:
    """A ``detect`` for a file format known by its suffix (any case)."""

    def detect(path: Path, options: Mapping[str, Any]) -> bool:
        return path.is_file() and path.suffix.lower() in suffixes

    return detect


def _function(module: str, name: str) -> Callable[..., Any]:
    """The function ``name`` of ``module``, importing the module (a reader, with pandas or xarray) when first asked."""
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Reader:
    """One data format that :func:`bayesirt.data.load` reads.

    ``kind`` names the input in messages ("a wide table"); ``looks_like`` says what it looks like on disk
    (the list of supported inputs); ``module`` is the module that reads it, ``read`` the name of its reading
    function (``read(path, drop_empty=..., **options)``) and ``detect`` the name of its function ``detect(path,
    options)``, True when ``path`` is this format (it may raise :class:`~bayesirt.errors.DataError` for an input
    that is this format but damaged), or such a function itself when it needs no reader (:func:`has_suffix`);
    ``options`` are the declared reading options it takes (command line, analysis files and Python);
    ``keywords`` are Python-only keywords (e.g. column names); ``family`` groups formats in messages ("matrix
    files"); ``order`` is the detection order (lower first)."""

    kind: str
    looks_like: str
    module: str
    read: str
    detect: str | Callable[[Path, Mapping[str, Any]], bool]
    options: tuple[Option, ...] = ()
    keywords: tuple[str, ...] = ()
    family: str = ""
    order: int = 50
    takes: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "takes", tuple(o.name for o in self.options) + self.keywords)

    def recognises(self, path: Path, options: Mapping[str, Any]) -> bool:
        """Whether ``path`` is this format (its ``detect``)."""
        detect = self.detect if callable(self.detect) else _function(self.module, self.detect)
        return bool(detect(path, options))

    def load(self, path: Path, **options: Any) -> Any:
        """``path`` read by this format's ``read``."""
        return _function(self.module, self.read)(path, **options)


@dataclass(frozen=True)
class Harness:
    """One evaluation harness that :func:`~bayesirt.data.harness.read_harness` reads.

    ``name`` (e.g. ``"lm-eval"``); ``looks_like``: its output on disk (the message for an unrecognised
    input); ``title``: its output in a sentence ("Inspect logs"); ``module``: the module that reads it, with
    the names of its functions ``find(folder, names)`` (the output of this harness among the files ``names``
    of ``folder``: the folder itself, or files in it) and ``read(paths, aggregate=, binarize=, drop_empty=,
    on_damaged=, **options)``; ``options``: the declared reading options only this harness takes (the shared
    ones are :data:`bayesirt.data.formats.harnesses.SHARED_OPTIONS`)."""

    name: str
    looks_like: str
    title: str
    module: str
    find: str
    read: str
    options: tuple[Option, ...] = ()

    def found(self, folder: Path, names: list[str]) -> list[Any]:
        """The output of this harness among the files ``names`` of ``folder`` (its ``find``)."""
        return _function(self.module, self.find)(folder, names)

    def load(self, paths: Any, **options: Any) -> Any:
        """``paths`` read by this harness's ``read``."""
        return _function(self.module, self.read)(paths, **options)


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
    """Every registered format (the ``READERS`` of each module of :mod:`bayesirt.data.formats`), in detection
    order."""
    found = [r for module_readers in modules_defining("bayesirt.data.formats", "READERS") for r in module_readers]
    return tuple(sorted(found, key=lambda r: (r.order, r.kind)))


@cache
def harness_formats() -> tuple[Harness, ...]:
    """Every harness (the ``HARNESS`` of each module of :mod:`bayesirt.data.formats.harnesses`), by module name."""
    return tuple(modules_defining("bayesirt.data.formats.harnesses", "HARNESS"))


def reader_for(path: Path, options: Mapping[str, Any]) -> Reader | None:
    """The first format (in detection order) that recognises ``path``, or None."""
    return next((r for r in readers() if r.recognises(path, options)), None)
