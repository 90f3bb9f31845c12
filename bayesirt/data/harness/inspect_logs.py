"""Reader of Inspect AI eval logs (``.eval`` zip logs and ``.json`` logs), without inspect_ai.

The two documented log formats are read directly (``inspect_ai/log/_recorders/eval.py``, ``json.py``):

- ``.eval``: a zip holding ``header.json`` (the EvalLog without samples: ``version``, ``status``,
  ``eval``, ``results``, ``error``...) and one ``samples/<id>_epoch_<n>.json`` per sample; a run that was
  killed has no ``header.json`` yet, only ``_journal/start.json`` (``version``, ``eval``, ``plan``) and the
  samples flushed so far: its status is ``started``. Members are stored, deflated or (Inspect >= 0.3.1xx)
  Zstandard-compressed; Zstandard is decoded with Python's ``compression.zstd`` (3.14), the ``zstandard``
  package, or ``numcodecs`` (installed with bayesirt through nutpie and zarr), whichever is present.
- ``.json``: the whole EvalLog as one JSON object (``samples`` inline).

Model = ``eval.model``, item group = ``eval.task``, item = ``f"{task}/{sample id}"`` (sample ids restart in
every task). Each sample of each epoch is one record, so ``epochs > 1`` give repeated (model, item)
records that need an ``aggregate`` rule (read in epoch order: ``"first"`` is epoch 1); Inspect's own epoch
reductions are not used. Of several logs of
one (model, task) the latest (``eval.created``) readable one wins; the others are named as superseded.

The score is that of the scorer named by ``metric=`` (globally, or per task ``"TASK=SCORER"``; default:
the first scorer in the sample's ``scores``), mapped as Inspect's ``value_to_float`` does
(``inspect_ai/scorer/_metric.py``): ``"C"`` -> 1, ``"P"`` -> 0.5, ``"I"`` and ``"N"`` (no answer) -> 0,
booleans and numbers as floats, ``"yes"``/``"true"`` -> 1, ``"no"``/``"false"`` -> 0, numeric strings as
numbers. Partial credit (``"P"``, fractions) then needs ``binarize``.

Never silent: a log whose status is not ``success`` (``started``: killed; ``error``; ``cancelled``) is
refused by default, naming it; ``read_unfinished=True`` reads its scored samples (with a warning),
``on_damaged="skip"`` leaves it out (with a warning). A sample with an ``error`` (or without scores) is a
missing cell, counted and named per model and item in a warning and the provenance record; a model or
item left without any response is dropped and listed in ``dropped_models`` / ``dropped_items``.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import xarray as xr

from bayesirt.data.files import one_line, printable
from bayesirt.data.harness.layout import RESULTS, Found, discover
from bayesirt.data.harness.records import (
    Reading,
    Record,
    as_paths,
    build_dataset,
    check_options,
    check_task_names,
    json_problem,
    per_task,
)
from bayesirt.errors import DataError

__all__ = ["find", "read_inspect", "is_inspect_log", "is_inspect_dir", "log_files", "score_value", "read_log"]

_CORRECT, _INCORRECT, _PARTIAL, _NOANSWER = "C", "I", "P", "N"
_ZSTD = 93
_UNFINISHED_HINT = ("pass --read-unfinished (read_unfinished=True) to use its scored samples, or --on-damaged skip "
                    "(on_damaged='skip') to leave it out")



# a JSON log is a serialized EvalLog: its first fields are "version" then "status"
_JSON_HEAD = re.compile(rb'^\s*\{\s*"version"\s*:\s*\d+\s*,\s*"status"\s*:\s*"')
# Inspect's log file names: <ISO time with - for :>_<task>_<22-char id>.json
_INSPECT_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}[^_]*_.+_[A-Za-z0-9]{10,}\.json$")


def _log_file(path: Path) -> Found | None:
    """An Inspect log (or a damaged one) at ``path``, else None: a ``.eval`` zip holding ``header.json`` or
    ``_journal/start.json`` (anything else with that suffix, e.g. 0 bytes or cut short, is damaged), or a
    ``.json`` log (starts with ``{"version": N, "status": "``, or is named like an Inspect log and then
    damaged if it does not)."""
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


def find(folder: Path, files: list[str]) -> list[Found]:
    """The Inspect logs among ``files`` (not lm-eval's ``<stem>_<date_id>.json`` results files)."""
    logs = (_log_file(folder / f) for f in files if f.lower().endswith((".eval", ".json")) and not RESULTS.match(f))
    return [f for f in logs if f is not None]


def is_inspect_log(path: str | os.PathLike[str]) -> bool:
    """True for a readable-looking Inspect ``.eval`` log (zip with ``header.json`` or ``_journal/start.json``)
    or ``.json`` log."""
    found = discover(path) if Path(path).is_file() else []
    return bool(found) and found[0].harness == "inspect" and found[0].damage is None


def log_files(path: str | os.PathLike[str]) -> list[Path]:
    """The Inspect logs anywhere under a folder (damaged ones included), in path order."""
    return [f.path for f in discover(path) if f.harness == "inspect"]


def is_inspect_dir(path: str | os.PathLike[str]) -> bool:
    """True if a folder holds at least one Inspect log (possibly damaged) anywhere below it."""
    return Path(path).is_dir() and any(f.harness == "inspect" for f in discover(path))


def score_value(value: Any) -> float | None:
    """An Inspect score value as a float, as ``value_to_float`` maps it; None if it has no single value."""
    if isinstance(value, str):
        if value == _CORRECT:
            return 1.0
        if value == _PARTIAL:
            return 0.5
        if value in (_INCORRECT, _NOANSWER):
            return 0.0
        low = value.strip().lower()
        if low in ("yes", "true"):
            return 1.0
        if low in ("no", "false"):
            return 0.0
        try:
            return float(low)
        except ValueError:
            return None
    if isinstance(value, (bool, int, float)):
        return float(value)
    return None


class _Damaged(Exception):
    """The log cannot be read completely."""


class _NoDecoder(Exception):
    """No Zstandard decoder is installed."""


def _zstd_decompress(data: bytes) -> bytes:
    try:
        from compression import zstd  # type: ignore[import-not-found]  # Python >= 3.14

        return zstd.decompress(data)
    except ImportError:
        pass
    try:
        import zstandard  # type: ignore[import-not-found]

        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    except ImportError:
        pass
    try:
        from numcodecs import Zstd  # type: ignore[import-not-found]
    except ImportError:
        raise _NoDecoder from None
    return bytes(Zstd().decode(data))


def _member(zf: zipfile.ZipFile, fh: Any, info: zipfile.ZipInfo) -> bytes:
    """The bytes of one zip member, Zstandard included; CRC-checked."""
    if info.compress_type != _ZSTD:
        return zf.read(info)
    fh.seek(info.header_offset)
    head = fh.read(30)
    if len(head) < 30 or head[:4] != b"PK\x03\x04":
        raise _Damaged(f"zip member {info.filename} has no local header")
    n, m = struct.unpack("<HH", head[26:30])
    fh.seek(info.header_offset + 30 + n + m)
    raw = fh.read(info.compress_size)
    try:
        data = _zstd_decompress(raw)
    except _NoDecoder:
        raise
    except Exception as exc:  # noqa: BLE001 - any decoder failure is a damaged member
        raise _Damaged(f"zip member {info.filename} does not decompress ({one_line(exc)})") from None
    if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
        raise _Damaged(f"zip member {info.filename} fails its CRC check")
    return data


def _json(data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise _Damaged(f"{what} is not valid JSON ({json_problem(exc)})") from None


def _sample_order(name: str) -> tuple:
    stem = name.rsplit("/", 1)[-1].removesuffix(".json")
    sid, _, epoch = stem.rpartition("_epoch_")
    key = int(sid) if sid.isdigit() else sid
    return (int(epoch) if epoch.isdigit() else 0, isinstance(key, str), key)


def read_log(path: str | os.PathLike[str]) -> dict[str, Any]:
    """One Inspect log as ``{"status", "eval", "samples", "error"}`` (plain JSON values).

    Raises
    ------
    DataError
        The log cannot be read completely (the message says why).
    """
    p = Path(path)
    try:
        return _read_log(p)
    except _Damaged as exc:
        raise DataError(f"{p}: {exc}") from None


def _read_log(p: Path) -> dict[str, Any]:
    try:
        if p.stat().st_size == 0:
            raise _Damaged("the Inspect log is empty (0 bytes)")
        if p.suffix.lower() == ".json":
            with open(p, "rb") as fh:
                log = _json(fh.read(), "the JSON log")
            if not isinstance(log, dict) or not isinstance(log.get("eval"), dict):
                raise _Damaged("the JSON log has no 'eval' object; it is not an Inspect log")
            samples = log.get("samples") or []
            if not isinstance(samples, list) or not all(isinstance(s, dict) for s in samples):
                raise _Damaged("'samples' is not a list of objects")
            samples = sorted(samples, key=lambda smp: smp.get("epoch") if isinstance(smp.get("epoch"), int) else 0)
            return {"status": log.get("status"), "eval": log["eval"], "samples": samples, "error": log.get("error")}
        with open(p, "rb") as fh, zipfile.ZipFile(fh) as zf:
            infos = {i.filename: i for i in zf.infolist()}
            if "header.json" in infos:
                header = _json(_member(zf, fh, infos["header.json"]), "header.json")
            elif "_journal/start.json" in infos:
                header = _json(_member(zf, fh, infos["_journal/start.json"]), "_journal/start.json")
                header = {**header, "status": "started"}  # killed before the header was written
            else:
                raise _Damaged("the .eval zip has neither header.json nor _journal/start.json")
            if not isinstance(header, dict) or not isinstance(header.get("eval"), dict):
                raise _Damaged("the log header has no 'eval' object; it is not an Inspect log")
            names = sorted((n for n in infos if n.startswith("samples/") and n.endswith(".json")), key=_sample_order)
            samples = []
            for name in names:
                sample = _json(_member(zf, fh, infos[name]), name)
                if not isinstance(sample, dict):
                    raise _Damaged(f"{name} is not a JSON object")
                samples.append(sample)
            return {"status": header.get("status"), "eval": header["eval"], "samples": samples,
                    "error": header.get("error")}
    except (zipfile.BadZipFile, EOFError, zlib.error) as exc:
        raise _Damaged(f"the .eval zip cannot be read completely ({one_line(exc)}; cut short?)") from None
    except _NoDecoder:
        raise DataError(f"{p}: this Inspect log is Zstandard-compressed and no Zstandard decoder is installed; "
                        'pip install "bayesirt[inspect]" (or zstandard)') from None
    except OSError as exc:
        raise DataError(f"cannot read {p} ({one_line(exc)}); check the file") from None


def _records(log: dict[str, Any], file: Path, scorer: str | None) -> tuple[list[Record], list[tuple], str | None]:
    """(records, unscored cells (model, item, task), scorer used) of one log."""
    model, task = str(log["eval"].get("model")), str(log["eval"].get("task"))
    out, holes = [], []
    for sample in log["samples"]:
        sid, epoch = sample.get("id"), sample.get("epoch", 1)
        item = f"{task}/{sid}"
        scores = sample.get("scores") or {}
        if sample.get("error") or not scores:
            holes.append((model, item, task))
            continue
        if not isinstance(scores, dict):
            raise DataError(f"{file}: sample {sid!r} (epoch {epoch}) has scores that are not an object")
        if scorer is None:
            scorer = next(iter(scores))
        where = f"{file}: sample {sid!r} (epoch {epoch})"
        if scorer not in scores:
            raise DataError(
                f"{where} has no score from scorer {scorer!r} (scorers: {', '.join(map(printable, scores))}); "
                f"pass metric= one of them (per task: --metric {task}=SCORER)"
            )
        entry = scores[scorer]
        value = entry.get("value") if isinstance(entry, dict) else None
        score = score_value(value)
        if score is None:
            raise DataError(
                f"{where}: scorer {scorer!r} gave {str(value)[:60]!r}, not one correct/incorrect value; "
                "pass metric= a scorer with C/I/P/N, boolean or numeric values"
            )
        out.append(Record(model, item, task, score))
    return out, holes, scorer


def read_inspect(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    metric: str | Sequence[str] | dict[str, str] | None = None,
    aggregate: str | None = None,
    binarize: float | None = None,
    drop_empty: bool = True,
    on_damaged: str = "error",
    read_unfinished: bool = False,
) -> xr.Dataset:
    """Read Inspect AI eval logs of several models into one response Dataset.

    Parameters
    ----------
    path : path-like or sequence of path-like
        ``.eval`` / ``.json`` log files, or folders holding them (searched recursively).
    metric : str, "TASK=SCORER" strings or {task: scorer}, optional
        Name of the scorer whose score is used, for every task and/or per task. Default: each log's
        first scorer.
    aggregate, binarize, drop_empty
        See :func:`~bayesirt.data.harness.records.build_dataset`; epochs are repeats.
    on_damaged : {"error", "skip"}
        A log that cannot be read completely (0 bytes, cut short) or did not finish is refused, or
        skipped with a warning.
    read_unfinished : bool
        Read the scored samples of logs whose status is not ``success`` (killed, error, cancelled),
        with a warning naming each, instead of treating them as damaged.

    Returns
    -------
    xarray.Dataset
        With attrs ``metric`` (scorers used), ``inspect_logs``, ``inspect_unscored_samples``
        (errored or unscored samples, left missing), ``inspect_empty_logs`` and ``provenance``.
    """
    threshold = check_options(aggregate, binarize)
    if not isinstance(read_unfinished, bool):
        raise DataError(f"read_unfinished must be True or False, got {read_unfinished!r}")
    paths = as_paths(path)
    reading = Reading("inspect", on_damaged, paths)
    metric_all, metric_per = per_task(metric, "metric", "task")
    source = ", ".join(map(str, paths))
    logs: list[tuple[str, Path, dict[str, Any]]] = []
    for p in paths:
        found = [f for f in discover(p) if f.harness == "inspect"]
        if not found:
            raise DataError(f"no Inspect logs (.eval or .json) in {p}; pass a log file or the --log-dir folder")
        for f in found:
            if f.damage:
                reading.damaged(f.path, f.damage)
                continue
            try:
                log = _read_log(f.path)
            except _Damaged as exc:
                reading.damaged(f.path, str(exc))
                continue
            status = log["status"]
            if status != "success":
                n = sum(1 for s in log["samples"] if s.get("scores") and not s.get("error"))
                why = f"status {status!r}, not 'success' (the eval did not finish; {n} scored sample(s) logged)"
                if not read_unfinished:
                    if reading.on_damaged == "error":
                        raise DataError(f"{f.path}: {why}; {_UNFINISHED_HINT}")
                    reading.damaged(f.path, why)
                    continue
                reading.unfinished.append({"path": str(f.path), "status": status, "scored_samples": n})
                reading.warn(f"read {n} scored sample(s) of the unfinished log {f.path} (status {status!r})")
            created = str(log["eval"].get("created") or "")
            logs.append((created, f.path, log))
    # reruns: the latest log of each (model, task) wins
    latest: dict[tuple[str, str], tuple[str, Path, dict[str, Any]]] = {}
    for entry in sorted(logs, key=lambda e: (e[0], str(e[1]))):
        key = (str(entry[2]["eval"].get("model")), str(entry[2]["eval"].get("task")))
        if key in latest:
            reading.supersede(latest[key][1], entry[1])
        latest[key] = entry
    chosen = [e for e in logs if latest[(str(e[2]["eval"].get("model")), str(e[2]["eval"].get("task")))] is e]
    tasks_seen = list(dict.fromkeys(str(e[2]["eval"].get("task")) for e in chosen))
    check_task_names(metric_per, tasks_seen, "metric", source)
    records, holes, scorers, empty, versions = [], [], {}, 0, set()
    for _, file, log in chosen:
        reading.read.append(str(file))
        packages = log["eval"].get("packages")
        if isinstance(packages, dict) and isinstance(packages.get("inspect_ai"), str):
            versions.add(packages["inspect_ai"])
        task = str(log["eval"].get("task"))
        if not log["samples"]:
            empty += 1
            reading.warn(f"the Inspect log {file} holds no samples")
            continue
        recs, unscored, scorer = _records(log, file, metric_per.get(task, metric_all))
        records += recs
        holes += unscored
        if scorer is not None:
            scorers.setdefault(task, scorer)
    reading.runs = len(logs)
    if holes:
        for model, item, _ in holes:
            errs = reading.errored.setdefault(model, [])
            if item not in errs:
                errs.append(item)
        shown = "; ".join(f"{m}: {len(v)} ({', '.join(v[:4])}{', ...' if len(v) > 4 else ''})"
                          for m, v in reading.errored.items())
        reading.warn(f"inspect: {len(holes)} errored or unscored sample(s) left missing: {shown}")
    if not records:
        raise DataError(f"{source}: the Inspect logs read ({len(chosen)}) hold no scored samples; pass logs of "
                        "finished evals")
    for task in tasks_seen:
        reading.tasks[task] = {"metric": scorers.get(task)}
    if versions:
        reading.version = ",".join(sorted(versions))
    ds = build_dataset(
        records,
        harness="inspect",
        aggregate=aggregate,
        binarize=binarize,
        name=paths[0].stem if len(paths) == 1 else "inspect",
        source=source,
        drop_empty=drop_empty,
        attrs={
            "metric": ",".join(dict.fromkeys(scorers.values())),
            "inspect_logs": len(chosen),
            "inspect_unscored_samples": len(holes),
            "inspect_empty_logs": empty,
        },
        repeat_hint=" (epochs > 1)",
        missing=holes,
    )
    return reading.finish(ds, aggregate=aggregate, threshold=threshold)
