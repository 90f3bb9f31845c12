"""Find evaluation-harness output in a file or folder tree, damaged output included.

Each harness is one module of this package, declared by a module of the same name in
:mod:`bayesirt.data.formats.harnesses` that defines ``HARNESS``, a :class:`~bayesirt.data.registry.Harness`:
the ``find`` it names says, from a folder's file names (and cheap checks of the files), which output of its
harness the folder holds (:class:`Found`, with the damage when the cheap checks already show it).
:func:`discover` walks a tree (hidden folders and ``__pycache__`` excepted) and asks every harness about every
folder; a folder that a harness claims whole (``Found.leaf``, e.g. a HELM run folder) is not entered and
nothing else in it is read. A folder holding ``responses.npy`` or ``models.csv`` at its top is an ordinary
response folder, never harness output.

To add a harness: a module ``bayesirt/data/harness/<name>.py`` with its ``find`` and its reader (which builds
:class:`~bayesirt.data.harness.records.Record` rows and ends in ``build_dataset``), its declaration
``bayesirt/data/formats/harnesses/<name>.py`` defining ``HARNESS = Harness(...)``, and its tests.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

from bayesirt.data.registry import harness_formats
from bayesirt.errors import DataError

__all__ = ["Found", "discover", "harnesses", "SAMPLES", "RESULTS", "DATE_ID"]

DATE_ID = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?"
SAMPLES = re.compile(rf"^samples_(?P<task>.+)_(?P<date>{DATE_ID})\.jsonl$")
RESULTS = re.compile(rf"^(?P<stem>.+)_(?P<date>{DATE_ID})\.json$")
_PLAIN_FOLDER = ("responses.npy", "models.csv")


class Found(NamedTuple):
    """One piece of harness output: an lm-eval model folder, an Inspect log file or a HELM run folder."""

    harness: str
    path: Path
    damage: str | None  # why it cannot be read, when cheap checks already show it
    leaf: bool = False  # the folder is this output and nothing else: it is not entered


def _folder(path: Path, files: list[str]) -> list[Found]:
    """Harness output directly in one folder (its files only)."""
    out = [f for h in harness_formats() for f in h.found(path, files)]
    leaves = [f for f in out if f.leaf]
    return leaves or out


def discover(path: str | os.PathLike[str]) -> list[Found]:
    """Every piece of harness output in a file or folder tree, in path order (damaged ones included)."""
    root = Path(path)
    if root.is_file():  # a harness output that is one file (an Inspect log)
        return [f for f in _folder(root.parent, [root.name]) if f.path == root]
    if not root.is_dir() or any((root / f).exists() for f in _PLAIN_FOLDER):
        return []
    out: list[Found] = []
    for folder, dirs, files in os.walk(root, onerror=None):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        here = _folder(Path(folder), sorted(files))
        if any(f.leaf for f in here):
            dirs[:] = []  # e.g. a HELM run folder holds nothing else to read
        out += here
    return out


def harnesses(found: list[Found], where: str | os.PathLike[str]) -> str | None:
    """The one harness of ``found`` (None if empty); several are refused, naming an example of each."""
    kinds: dict[str, Path] = {}
    for f in found:
        kinds.setdefault(f.harness, f.path)
    if len(kinds) > 1:
        shown = "; ".join(f"{k} (e.g. {p})" for k, p in kinds.items())
        raise DataError(f"{where} holds output of several harnesses: {shown}; pass one folder per harness")
    return next(iter(kinds), None)
