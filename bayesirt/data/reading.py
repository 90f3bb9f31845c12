"""How the data of a run was read, for summary.json and report.md: one record, one report section.

Every command that writes summary.json / report.md can call :func:`reading_record` (and
:func:`bayesirt.report.markdown.reading_lines`) on its response Dataset: for evaluation-harness output they give the provenance
record of the read (harness and version, files read, skipped and superseded, metric / filter / stat per
task, threshold, aggregation, errored samples, dropped ids); for a matrix file the layout it was read with
and what decided it, and the answer key that scored it; for any input they name the models and items
that were dropped because they had no observed response, so a dropped row is never only an attribute.
"""

from __future__ import annotations

import json
from typing import Any

import xarray as xr

from bayesirt.data.files import printable
from bayesirt.errors import warn

__all__ = ["reading_record", "shown_ids", "warn_dropped", "DroppedWarning"]


class DroppedWarning(RuntimeWarning):
    """Models or items without any observed response were dropped; the message names them."""


def _ids(ds: xr.Dataset, key: str) -> list[str]:
    text = ds.attrs.get(key)
    try:
        return list(json.loads(text)) if isinstance(text, str) else []
    except ValueError:
        return []


def shown_ids(ids: list[str], n: int = 10, width: int = 80) -> str:
    """At most ``n`` ids, each printable and at most ``width`` characters."""
    short = [(t if len(t) <= width else t[: width - 3] + "...") for t in map(printable, ids[:n])]
    return ", ".join(short) + (f", ... ({len(ids)} in all)" if len(ids) > n else "")


def warn_dropped(ds: xr.Dataset) -> None:
    """One warning naming the models and items dropped for having no observed response (if any)."""
    parts = [f"{len(ids)} {what} without any observed response ({shown_ids(ids)})"
             for what, ids in (("model(s)", _ids(ds, "dropped_models")), ("item(s)", _ids(ds, "dropped_items")))
             if ids]
    if parts:
        where = ds.attrs.get("source", ds.attrs.get("name", "the data"))
        warn(f"{where}: dropped " + " and ".join(parts), DroppedWarning)


def reading_record(ds: xr.Dataset) -> dict[str, Any]:
    """The reading record of a response Dataset (JSON-serialisable), for summary.json."""
    text = ds.attrs.get("provenance")
    record: dict[str, Any] = json.loads(text) if isinstance(text, str) else {}
    record.setdefault("source", ds.attrs.get("source", "in-memory data"))
    if "binarize" in ds.attrs and "threshold" not in record:
        record["threshold"] = ds.attrs["binarize"]
    if "orientation" in ds.attrs:  # a matrix file: rows = models or rows = items, and what said so
        record["orientation"] = {"layout": ds.attrs["orientation"], "basis": ds.attrs.get("orientation_basis", "")}
    if "answer_key" in ds.attrs:  # multiple-choice answers scored 1 where equal to the key
        record["answer_key"] = ds.attrs["answer_key"]
    record["dropped_models"] = _ids(ds, "dropped_models")
    record["dropped_items"] = _ids(ds, "dropped_items")
    return record
