"""Readers of evaluation-harness output (lm-evaluation-harness, Inspect AI, HELM) into a response Dataset.

Logs become long score records, combined by one explicit rule set (repeats, partial credit) in ``records``.
Each harness is one module of this package, declared by a module of the same name in
:mod:`bayesirt.data.formats.harnesses` that defines ``HARNESS`` (:class:`~bayesirt.data.registry.Harness`: how its
output is found, read, and the reading options only it takes); :func:`read_harness` and the format of
:func:`bayesirt.data.load` ("evaluation-harness output", :mod:`bayesirt.data.formats.harness`) dispatch through
them."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import xarray as xr

from bayesirt.data.harness.helm import read_helm
from bayesirt.data.harness.inspect_logs import read_inspect
from bayesirt.data.harness.layout import discover, harnesses
from bayesirt.data.harness.lm_eval import read_lm_eval
from bayesirt.data.harness.records import (
    AGGREGATES,
    ON_DAMAGED,
    HarnessWarning,
    Record,
    as_paths,
    build_dataset,
    check_on_damaged,
)
from bayesirt.data.formats.harness import HARNESS_OPTIONS, OWN_OPTIONS
from bayesirt.data.registry import harness_formats
from bayesirt.errors import DataError

__all__ = [
    "FORMATS",
    "AGGREGATES",
    "ON_DAMAGED",
    "HarnessWarning",
    "Record",
    "build_dataset",
    "detect_format",
    "discover",
    "is_harness",
    "provenance",
    "read_harness",
    "read_lm_eval",
    "read_inspect",
    "read_helm",
    "READING_OPTIONS",
    "is_harness_input",
]

FORMATS = {h.name: h.looks_like for h in harness_formats()}
"""Formats :func:`read_harness` detects, with what each looks like on disk (folders are searched recursively)."""

READING_OPTIONS = tuple(HARNESS_OPTIONS)
"""Keyword options of :func:`read_harness` (beside ``drop_empty``)."""


def detect_format(path: str | os.PathLike[str]) -> str | None:
    """The harness format of a file or folder tree (a key of :data:`FORMATS`), or None.

    Raises
    ------
    DataError
        The tree holds output of more than one harness (an example of each is named).
    """
    return harnesses(discover(path), path)


def is_harness(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is, or holds anywhere below, evaluation-harness output (damaged output included).

    For :func:`bayesirt.data.load`'s dispatch: an lm-eval output or model folder, an Inspect
    ``.eval``/``.json`` log or a folder of logs, a HELM run folder or a folder of runs. A folder with
    ``responses.npy`` or ``models.csv`` is never harness output. Never raises.
    """
    try:
        return bool(discover(path))
    except OSError:
        return False


def provenance(ds: xr.Dataset) -> dict[str, Any] | None:
    """The provenance record of a Dataset read from harness output (``attrs["provenance"]``), or None."""
    text = ds.attrs.get("provenance")
    return json.loads(text) if isinstance(text, str) else None


def read_harness(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    aggregate: str | None = None,
    binarize: float | None = None,
    drop_empty: bool = True,
    on_damaged: str = "error",
    **options: Any,
) -> xr.Dataset:
    """Detect the harness format of ``path`` and read it into a response Dataset.

    Parameters
    ----------
    path : path-like or sequence of path-like
        One file or folder (searched recursively), or several of the same format (e.g. one per model).
    aggregate : {"mean", "majority", "first", "last"}, optional
        Rule for repeated (model, item) records within one run; without one, repeats are refused.
        Reruns are not repeats: the latest run wins and the others are named as superseded.
    binarize : float, optional
        Threshold T for partial credit (score >= T -> 1); without one, partial credit is refused.
    drop_empty : bool
        Drop items and models without observed responses, naming them (default), or refuse them.
    on_damaged : {"error", "skip"}
        Output that looks like harness output but cannot be read completely (0-byte or cut files,
        a HELM run without per_instance_stats.json, an lm-eval folder without samples or results, an
        unfinished Inspect log): refuse it naming it (default), or skip it with a warning naming it.
    **options
        The options of one harness (refused for the others, naming the harness they are for):
        ``metric=`` (lm-eval metric field or Inspect scorer: a name, ``"TASK=NAME"`` strings or
        ``{task: name}``; default the first one listed), ``filter=`` (lm-eval filter, for tasks logged
        under several), ``stat=`` (HELM per-instance stat, default ``"exact_match"``, also per group),
        ``read_unfinished=`` (Inspect: read the scored samples of logs whose status is not ``success``).

    Returns
    -------
    xarray.Dataset
        See :func:`~bayesirt.data.harness.records.build_dataset`; ``attrs["harness"]`` names the format,
        ``attrs["provenance"]`` holds the provenance record (JSON; :func:`provenance`) and
        ``attrs["harness_summary"]`` the one-line summary of what was found.

    Raises
    ------
    DataError
        Unrecognised or mixed formats, an option that does not apply to the format, or a
        malformed file (the message names the file, and the line for JSONL).
    """
    paths = as_paths(path)
    check_on_damaged(on_damaged)
    found = {p: harnesses(discover(p), p) for p in paths}
    unknown = [p for p, fmt in found.items() if fmt is None]
    if unknown:
        raise DataError(f"{unknown[0]} is not evaluation-harness output; expected {'; or '.join(FORMATS.values())}")
    kinds = sorted(set(found.values()))
    if len(kinds) > 1:
        raise DataError(f"the paths mix harness formats ({', '.join(kinds)}); read one format at a time")
    fmt, target = kinds[0], paths[0] if len(paths) == 1 else paths
    unknown_options = sorted(set(options) - set(OWN_OPTIONS))
    if unknown_options:
        raise TypeError(f"read_harness() got unexpected keyword argument(s) {unknown_options}")
    harness = next(h for h in harness_formats() if h.name == fmt)
    own = {o.name for o in harness.options}
    for option, value in options.items():
        if option not in own and value != OWN_OPTIONS[option].default:
            meant = ", ".join(h.title for h in harness_formats() if option in {o.name for o in h.options})
            raise DataError(f"{option}= does not apply to {fmt} output ({paths[0]}); it is for {meant}")
    return harness.load(target, aggregate=aggregate, binarize=binarize, drop_empty=drop_empty,
                        on_damaged=on_damaged, **{k: v for k, v in options.items() if k in own})


def is_harness_input(path: Path, options: Any) -> bool:
    """:func:`is_harness` for the format registry (the options do not change the answer)."""
    return is_harness(path)

