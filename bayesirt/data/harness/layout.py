"""Find evaluation-harness output in a file or folder tree, damaged output included.

A folder is searched recursively (hidden folders and ``__pycache__`` excepted; a HELM run folder is
not entered). What counts as output of each harness, by name and cheap checks only:

- **lm-eval**: a folder with ``samples_<task>_<date_id>.jsonl`` or ``results_<date_id>.json`` files
  (a model folder of ``lm_eval --output_path``); one with a results file but no samples files was run
  without ``--log_samples`` and is *damaged* (it cannot give per-item responses).
- **Inspect AI**: a ``.eval`` file (a zip holding ``header.json`` or ``_journal/start.json``; anything
  else with that suffix, e.g. 0 bytes or cut short, is damaged), or a ``.json`` log (starts with
  ``{"version": N, "status": "``, or is named like an Inspect log, ``<time>_<task>_<id>.json``, and
  then damaged if it does not parse).
- **HELM**: a folder with ``run_spec.json`` or ``per_instance_stats.json``; one without
  ``per_instance_stats.json`` (HELM writes it last) is damaged.

A folder holding ``responses.npy`` or ``models.csv`` at its top is an ordinary response folder,
never harness output.
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path
from typing import NamedTuple

from bayesirt.errors import DataError

__all__ = ["Found", "discover", "harnesses", "SAMPLES", "RESULTS", "DATE_ID"]

DATE_ID = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?"
SAMPLES = re.compile(rf"^samples_(?P<task>.+)_(?P<date>{DATE_ID})\.jsonl$")
RESULTS = re.compile(rf"^(?P<stem>.+)_(?P<date>{DATE_ID})\.json$")
# a JSON log is a serialized EvalLog: its first fields are "version" then "status"
_JSON_HEAD = re.compile(rb'^\s*\{\s*"version"\s*:\s*\d+\s*,\s*"status"\s*:\s*"')
# Inspect's log file names: <ISO time with - for :>_<task>_<22-char id>.json
_INSPECT_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}[^_]*_.+_[A-Za-z0-9]{10,}\.json$")
_HELM_FILES = ("run_spec.json", "per_instance_stats.json")
_PLAIN_FOLDER = ("responses.npy", "models.csv")
_NO_SAMPLES = "an lm-eval results file but no samples_<task>_<date_id>.jsonl: lm-eval was run without --log_samples"


class Found(NamedTuple):
    """One piece of harness output: an lm-eval model folder, an Inspect log file or a HELM run folder."""

    harness: str
    path: Path
    damage: str | None  # why it cannot be read, when cheap checks already show it


def _inspect_file(path: Path) -> Found | None:
    """An Inspect log (or a damaged one) at ``path``, else None."""
    suffix = path.suffix.lower()
    try:
        size = path.stat().st_size
        if suffix == ".eval":
            if size == 0:
                return Found("inspect", path, "the Inspect log is empty (0 bytes)")
            if not zipfile.is_zipfile(path):
                return Found("inspect", path, "the Inspect log is not a complete zip file (cut short?)")
            with zipfile.ZipFile(path) as zf:
                names = set(zf.namelist())
            if "header.json" in names or "_journal/start.json" in names:
                return Found("inspect", path, None)
            return Found("inspect", path, "the .eval zip has neither header.json nor _journal/start.json")
        if suffix == ".json":
            with open(path, "rb") as fh:
                head = fh.read(256)
            if _JSON_HEAD.match(head):
                return Found("inspect", path, None)
            if _INSPECT_NAME.match(path.name):
                reason = "is empty (0 bytes)" if size == 0 else "does not start like an Inspect JSON log"
                return Found("inspect", path, f"the Inspect log {reason}")
    except (OSError, zipfile.BadZipFile, EOFError):
        return Found("inspect", path, "the Inspect log cannot be opened as a zip file") if suffix == ".eval" else None
    return None


def _folder(path: Path, files: list[str]) -> list[Found]:
    """Harness output directly in one folder (its files only)."""
    out: list[Found] = []
    names = set(files)
    if any(f in names for f in _HELM_FILES):
        missing = [f for f in _HELM_FILES if f not in names]
        damage = None
        if "per_instance_stats.json" in missing:
            damage = "HELM run folder without per_instance_stats.json (the run stopped before its last write)"
        elif missing:
            damage = "HELM run folder without run_spec.json"
        return [Found("helm", path, damage)]
    samples = [f for f in files if SAMPLES.match(f)]
    results = [f for f in files if RESULTS.match(f) and not SAMPLES.match(f) and f.startswith("results_")]
    if samples or results:
        out.append(Found("lm-eval", path, None if samples else _NO_SAMPLES))
    for f in files:
        if f.lower().endswith((".eval", ".json")) and not RESULTS.match(f):
            found = _inspect_file(path / f)
            if found is not None:
                out.append(found)
    return out


def discover(path: str | os.PathLike[str]) -> list[Found]:
    """Every piece of harness output in a file or folder tree, in path order (damaged ones included)."""
    root = Path(path)
    if root.is_file():
        found = _inspect_file(root)
        return [found] if found else []
    if not root.is_dir() or any((root / f).exists() for f in _PLAIN_FOLDER):
        return []
    out: list[Found] = []
    for folder, dirs, files in os.walk(root, onerror=None):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        here = _folder(Path(folder), sorted(files))
        if any(f.harness == "helm" for f in here):
            dirs[:] = []  # a HELM run folder holds nothing else to read
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
