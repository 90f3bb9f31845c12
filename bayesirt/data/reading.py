"""How the data of a run was read, for summary.json and report.md: one record, one report section.

Every command that writes summary.json / report.md can call :func:`reading_record` and
:func:`reading_lines` on its response Dataset: for evaluation-harness output they give the provenance
record of the read (harness and version, files read, skipped and superseded, metric / filter / stat per
task, threshold, aggregation, errored samples, dropped ids); for any input they name the models and items
that were dropped because they had no observed response, so a dropped row is never only an attribute.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import xarray as xr

from bayesirt.data.files import printable

__all__ = ["reading_record", "reading_lines", "warn_dropped", "DroppedWarning"]


class DroppedWarning(RuntimeWarning):
    """Models or items without any observed response were dropped; the message names them."""


def _ids(ds: xr.Dataset, key: str) -> list[str]:
    text = ds.attrs.get(key)
    try:
        return list(json.loads(text)) if isinstance(text, str) else []
    except ValueError:
        return []


def _shown(ids: list[str], n: int = 10, width: int = 80) -> str:
    """At most ``n`` ids, each printable and at most ``width`` characters."""
    short = [(t if len(t) <= width else t[: width - 3] + "...") for t in map(printable, ids[:n])]
    return ", ".join(short) + (f", ... ({len(ids)} in all)" if len(ids) > n else "")


def warn_dropped(ds: xr.Dataset) -> None:
    """One warning naming the models and items dropped for having no observed response (if any)."""
    parts = [f"{len(ids)} {what} without any observed response ({_shown(ids)})"
             for what, ids in (("model(s)", _ids(ds, "dropped_models")), ("item(s)", _ids(ds, "dropped_items")))
             if ids]
    if parts:
        where = ds.attrs.get("source", ds.attrs.get("name", "the data"))
        warnings.warn(f"{where}: dropped " + " and ".join(parts), DroppedWarning, stacklevel=3)


def reading_record(ds: xr.Dataset) -> dict[str, Any]:
    """The reading record of a response Dataset (JSON-serialisable), for summary.json."""
    text = ds.attrs.get("provenance")
    record: dict[str, Any] = json.loads(text) if isinstance(text, str) else {}
    record.setdefault("source", ds.attrs.get("source", "in-memory data"))
    if "binarize" in ds.attrs and "threshold" not in record:
        record["threshold"] = ds.attrs["binarize"]
    record["dropped_models"] = _ids(ds, "dropped_models")
    record["dropped_items"] = _ids(ds, "dropped_items")
    return record


def reading_lines(ds: xr.Dataset) -> list[str]:
    """A "## Reading the data" report section (markdown lines); empty when there is nothing to say
    (plain 0/1 data with nothing dropped)."""
    rec = reading_record(ds)
    lines: list[str] = []
    if rec.get("harness"):
        lines += [f"{rec['summary']}.", ""]
        tasks = rec.get("tasks") or {}
        if tasks:
            lines += ["| task | " + " | ".join(sorted({k for v in tasks.values() for k in v})) + " |"]
            keys = sorted({k for v in tasks.values() for k in v})
            lines += ["|" + "---|" * (len(keys) + 1)]
            lines += [f"| {t} | " + " | ".join(str(v.get(k, "")) for k in keys) + " |" for t, v in tasks.items()]
            lines += [""]
        threshold = rec.get("threshold")
        credit = "refused (0/1 scores only)" if threshold in (None, "none") else f"score >= {threshold} is correct"
        lines += [f"Repeated records within a run: aggregate `{rec.get('aggregate', 'none')}`; partial credit: "
                  f"{credit}; damaged output: `{rec.get('on_damaged')}`; reruns: the latest run wins.", ""]
        for item in rec.get("files_skipped") or []:
            lines.append(f"- skipped `{item['path']}`: {item['reason']}")
        for item in rec.get("superseded") or []:
            lines.append(f"- superseded by a later run: `{item['path']}` (by `{item['by']}`)")
        for item in rec.get("unfinished_read") or []:
            lines.append(f"- read {item['scored_samples']} scored samples of the unfinished log `{item['path']}` "
                         f"(status {item['status']})")
        for model, items in (rec.get("errored_samples") or {}).items():
            lines.append(f"- {len(items)} errored or unscored sample(s) of `{model}` left missing: {_shown(items)}")
    elif rec.get("threshold") not in (None, "none"):
        lines += [f"Scores >= {rec['threshold']} counted as correct (binarize).", ""]
    for what, key in (("model(s)", "dropped_models"), ("item(s)", "dropped_items")):
        if rec[key]:
            lines.append(f"- dropped {len(rec[key])} {what} without any observed response: {_shown(rec[key])}")
    if not lines:
        return []
    return ["## Reading the data", "", *lines, ""]
