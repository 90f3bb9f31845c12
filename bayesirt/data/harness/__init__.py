"""Readers of evaluation-harness output (lm-evaluation-harness, Inspect AI, HELM) into a response Dataset.

Logs become long score records, combined by one explicit rule set (repeats, partial credit) in ``records``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import xarray as xr

from bayesirt.data.harness.helm import is_helm_dir, read_helm
from bayesirt.data.harness.inspect_logs import is_inspect_dir, is_inspect_log, read_inspect
from bayesirt.data.harness.lm_eval import is_lm_eval_dir, read_lm_eval
from bayesirt.data.harness.records import AGGREGATES, Record, as_paths, build_dataset
from bayesirt.errors import DataError

__all__ = [
    "FORMATS",
    "AGGREGATES",
    "Record",
    "build_dataset",
    "detect_format",
    "is_harness",
    "read_harness",
    "read_lm_eval",
    "read_inspect",
    "read_helm",
]

FORMATS = {
    "lm-eval": "an lm-eval --output_path folder (OUT/<model>/samples_<task>_<timestamp>.jsonl) or one model folder",
    "inspect": "an Inspect AI log (.eval or .json) or a folder of them",
    "helm": "a HELM run folder (run_spec.json + per_instance_stats.json) or a folder of runs",
}
"""Formats :func:`read_harness` detects, with what each looks like on disk."""

_PLAIN_FOLDER = ("responses.npy", "models.csv")


def _formats(path: Path) -> list[str]:
    """Every harness format ``path`` looks like (cheap: at most one level of folder listing)."""
    if path.is_file():
        return ["inspect"] if is_inspect_log(path) else []
    if not path.is_dir() or any((path / f).exists() for f in _PLAIN_FOLDER):
        return []  # an ordinary NT folder (responses.npy + models.csv) is never harness output
    checks = (("helm", is_helm_dir), ("lm-eval", is_lm_eval_dir), ("inspect", is_inspect_dir))
    return [fmt for fmt, check in checks if check(path)]


def detect_format(path: str | os.PathLike[str]) -> str | None:
    """The harness format of a file or folder (a key of :data:`FORMATS`), or None.

    Raises
    ------
    DataError
        The folder holds output of more than one harness.
    """
    found = _formats(Path(path))
    if len(found) > 1:
        raise DataError(f"{path} holds output of several harnesses ({', '.join(found)}); pass one subfolder per format")
    return found[0] if found else None


def is_harness(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` looks like evaluation-harness output that :func:`read_harness` reads.

    Cheap and conservative, for :func:`bayesirt.data.load`'s dispatch: an lm-eval output or model
    folder, an Inspect ``.eval``/``.json`` log or a folder of logs, a HELM run folder or a folder of
    runs. A folder with ``responses.npy`` or ``models.csv`` is never harness output. Never raises.
    """
    try:
        return bool(_formats(Path(path)))
    except OSError:
        return False


def read_harness(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    metric: str | None = None,
    stat: str | None = None,
    aggregate: str | None = None,
    binarize: float | None = None,
    filter: str | None = None,  # noqa: A002 - lm-eval's name
    drop_empty: bool = False,
) -> xr.Dataset:
    """Detect the harness format of ``path`` and read it into a response Dataset.

    Parameters
    ----------
    path : path-like or sequence of path-like
        One file or folder, or several of the same format (e.g. one per model).
    metric : str, optional
        lm-eval metric field or Inspect scorer name (default: the first one listed).
    stat : str, optional
        HELM per-instance stat (default ``"exact_match"``).
    aggregate : {"mean", "majority", "first"}, optional
        Rule for repeated (model, item) records; without one, repeats are refused.
    binarize : float, optional
        Threshold T for partial credit (score >= T -> 1); without one, partial credit is refused.
    filter : str, optional
        lm-eval filter to read for tasks logged under several filters.
    drop_empty : bool
        Drop items and models without observed responses instead of raising.

    Returns
    -------
    xarray.Dataset
        See :func:`~bayesirt.data.harness.records.build_dataset`; ``attrs["harness"]`` names the format.

    Raises
    ------
    DataError
        Unrecognised or mixed formats, an option that does not apply to the format, or a
        malformed file (the message names the file, and the line for JSONL).
    """
    paths = as_paths(path)
    found = {p: detect_format(p) for p in paths}
    unknown = [p for p, fmt in found.items() if fmt is None]
    if unknown:
        raise DataError(f"{unknown[0]} is not evaluation-harness output; expected {'; or '.join(FORMATS.values())}")
    kinds = sorted(set(found.values()))
    if len(kinds) > 1:
        raise DataError(f"the paths mix harness formats ({', '.join(kinds)}); read one format at a time")
    fmt, target = kinds[0], paths[0] if len(paths) == 1 else paths
    given = {"metric": metric, "stat": stat, "filter": filter}
    allowed = {"lm-eval": ("metric", "filter"), "inspect": ("metric",), "helm": ("stat",)}[fmt]
    for option, value in given.items():
        if value is not None and option not in allowed:
            hint = "stat=" if fmt == "helm" else "metric="
            raise DataError(f"{option}= does not apply to {fmt} output ({paths[0]}); use {hint} to choose the score")
    common = {"aggregate": aggregate, "binarize": binarize, "drop_empty": drop_empty}
    if fmt == "lm-eval":
        return read_lm_eval(target, metric=metric, filter=filter, **common)
    if fmt == "inspect":
        return read_inspect(target, metric=metric, **common)
    return read_helm(target, stat=stat, **common)
