"""Readers of evaluation-harness output (lm-evaluation-harness, Inspect AI, HELM) into a response Dataset.

Logs become long score records, combined by one explicit rule set (repeats, partial credit) in ``records``."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import xarray as xr

from bayesirt.data.harness.layout import discover, harnesses
from bayesirt.data.harness.helm import read_helm
from bayesirt.data.harness.inspect_logs import read_inspect
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
from bayesirt.data.settings import READING_OPTIONS
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
]

FORMATS = {
    "lm-eval": "an lm-eval --output_path folder (OUT/<model>/samples_<task>_<timestamp>.jsonl) or one model folder",
    "inspect": "an Inspect AI log (.eval or .json) or a folder of them",
    "helm": "a HELM run folder (run_spec.json + per_instance_stats.json) or a folder of runs",
}
"""Formats :func:`read_harness` detects, with what each looks like on disk (folders are searched recursively)."""

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
    metric: str | Sequence[str] | dict[str, str] | None = None,
    stat: str | Sequence[str] | dict[str, str] | None = None,
    aggregate: str | None = None,
    binarize: float | None = None,
    filter: str | Sequence[str] | dict[str, str] | None = None,  # noqa: A002 - lm-eval's name
    drop_empty: bool = False,
    on_damaged: str = "error",
    read_unfinished: bool = False,
) -> xr.Dataset:
    """Detect the harness format of ``path`` and read it into a response Dataset.

    Parameters
    ----------
    path : path-like or sequence of path-like
        One file or folder (searched recursively), or several of the same format (e.g. one per model).
    metric : str, "TASK=NAME" strings or {task: name}, optional
        lm-eval metric field or Inspect scorer name (default: the first one listed), for every task
        and/or per task.
    stat : str, "GROUP=STAT" strings or {group: stat}, optional
        HELM per-instance stat (default ``"exact_match"``).
    aggregate : {"mean", "majority", "first", "last"}, optional
        Rule for repeated (model, item) records within one run; without one, repeats are refused.
        Reruns are not repeats: the latest run wins and the others are named as superseded.
    binarize : float, optional
        Threshold T for partial credit (score >= T -> 1); without one, partial credit is refused.
    filter : str, "TASK=FILTER" strings or {task: filter}, optional
        lm-eval filter to read for tasks logged under several filters.
    drop_empty : bool
        Drop items and models without observed responses (listing them) instead of raising.
    on_damaged : {"error", "skip"}
        Output that looks like harness output but cannot be read completely (0-byte or cut files,
        a HELM run without per_instance_stats.json, an lm-eval folder without samples, an unfinished
        Inspect log): refuse it naming it (default), or skip it with a warning naming it.
    read_unfinished : bool
        Inspect only: read the scored samples of logs whose status is not ``success``.

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
    given = {"metric": metric, "stat": stat, "filter": filter, "read_unfinished": read_unfinished or None}
    allowed = {"lm-eval": ("metric", "filter"), "inspect": ("metric", "read_unfinished"), "helm": ("stat",)}[fmt]
    for option, value in given.items():
        if value is not None and option not in allowed:
            hint = {"read_unfinished": "it is for Inspect logs", "filter": "it is for lm-eval output"}.get(
                option, f"use {'stat=' if fmt == 'helm' else 'metric='} to choose the score")
            raise DataError(f"{option}= does not apply to {fmt} output ({paths[0]}); {hint}")
    common = {"aggregate": aggregate, "binarize": binarize, "drop_empty": drop_empty, "on_damaged": on_damaged}
    if fmt == "lm-eval":
        return read_lm_eval(target, metric=metric, filter=filter, **common)
    if fmt == "inspect":
        return read_inspect(target, metric=metric, read_unfinished=read_unfinished, **common)
    return read_helm(target, stat=stat, **common)
