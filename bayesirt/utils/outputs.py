"""Output folders that are never overwritten silently and never left half-written, and the one
NetCDF writer and the one JSON writer every output goes through.

A run writes into a hidden staging folder beside the target; only when everything is written is
the staging folder renamed to the target. An interrupted or failed run leaves any earlier result
untouched. Replacing an existing folder needs ``force=True`` (the CLI's ``--force``).
"""

from __future__ import annotations

import glob
import json
import pickle
import math
import os
import platform
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bayesirt.errors import OutputError, warn
from bayesirt.utils.interrupts import Interrupted, check_interrupt, interrupt_received

if TYPE_CHECKING:  # annotations only: xarray loads when something is written, not with the jobs' declarations
    import xarray as xr

__all__ = ["package_versions", "staged_output", "KeptUnits", "check_output", "remove_stale_staging", "retire", "write_netcdf", "write_text_atomic",
           "write_json", "to_json", "COMPRESSION"]

#: Encoding of every numeric variable of every NetCDF file bayesirt writes: zlib after the HDF5
#: byte shuffle (which groups the exponent bytes of floats together, where zlib finds repeats).
#: Level 4: on posterior draws level 9 saved 1% more and took 3x as long to write.
COMPRESSION = {"zlib": True, "shuffle": True, "complevel": 4}


def check_output(target: str | os.PathLike, *, force: bool) -> Path:
    """Fail early, before any expensive work, when ``target`` exists and ``force`` is False."""
    target = Path(target)
    if target.exists() and not force:
        raise OutputError(f"output folder {target} already exists; pass --force to replace it or choose another --out")
    if target.exists() and not target.is_dir():
        raise OutputError(f"output path {target} exists and is not a folder; choose another --out")
    return target


def _host() -> str:
    return socket.gethostname().replace(".", "-") or "localhost"


def _staging_prefix(target: Path) -> str:
    """Name prefix of the staging folders of ``target``: the host and process that own them."""
    return f".{target.name}.{_host()}.{os.getpid()}."


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, owned by another user
        return False
    return False


def remove_stale_staging(target: str | os.PathLike) -> list[Path]:
    """Remove the staging folders that runs on ``target`` killed before they finished left behind.

    A staging folder is named ``.NAME.HOST.PID.*.partial`` (or ``.NAME.HOST.PID.replaced``, an
    earlier result being swapped out); it is removed only when it was made on this host by a
    process that no longer exists, so a run in progress, or one on another machine sharing the
    folder, keeps its own. A warning names what was removed. Returns the removed paths.
    """
    target = Path(target)
    host = _host()
    removed = []
    if not target.parent.is_dir():
        return removed
    for path in target.parent.glob(f".{glob.escape(target.name)}.*"):
        rest = path.name[len(target.name) + 2:].split(".")
        if len(rest) < 3 or rest[0] != host or not rest[1].isdigit() or rest[-1] not in ("partial", "replaced"):
            continue
        if _process_gone(int(rest[1])) and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    if removed:
        warn(f"removed {len(removed)} staging folder(s) left by an interrupted run on {target} "
             f"(their process is gone): {', '.join(p.name for p in removed)}", UserWarning)
    return removed


def retire(target: str | os.PathLike) -> Path:
    """Move an earlier result out of the way of its replacement, under a name that
    :func:`remove_stale_staging` removes should the replacing process die; returns the new path
    (the caller removes it when the replacement is in place)."""
    target = Path(target)
    retired = target.with_name(f"{_staging_prefix(target)}replaced")
    target.rename(retired)
    return retired


def _cannot_write(path: Path, err: OSError) -> OutputError:
    reason = err.strerror or str(err)
    return OutputError(f"cannot write {path} ({reason}); free space or choose another --out "
                       "(any earlier result there is untouched)")


@contextmanager
def staged_output(target: str | os.PathLike, *, force: bool) -> Iterator[Path]:
    """Yield a staging folder; on success it replaces ``target`` atomically (same file system).

    Staging folders that killed runs left beside ``target`` are removed first
    (:func:`remove_stale_staging`). A write that fails inside the block (disk full, read-only
    folder) raises :class:`OutputError` with one line; the staging folder is removed and any
    earlier ``target`` is untouched. After SIGINT or SIGTERM, even one a library swallowed
    (:func:`~bayesirt.utils.interrupts.check_interrupt`), nothing is staged or, if the signal
    came while writing, nothing appears: results of a run stopped early are never written.
    """
    check_interrupt()
    target = check_output(target, force=force)
    remove_stale_staging(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=_staging_prefix(target), suffix=".partial", dir=target.parent))
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes it private; results follow the user's umask
    except OSError as err:
        raise OutputError(f"cannot write under {target.parent} ({err.strerror}); choose another --out") from None
    try:
        yield staging
    except OSError as err:
        shutil.rmtree(staging, ignore_errors=True)
        raise _cannot_write(target, err) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    try:
        check_interrupt()
        if target.exists():
            retired = retire(target)
            staging.rename(target)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            staging.rename(target)
    except OSError as err:
        shutil.rmtree(staging, ignore_errors=True)
        raise _cannot_write(target, err) from None
    except KeyboardInterrupt:
        shutil.rmtree(staging, ignore_errors=True)
        raise


class KeptUnits:
    """The finished units of a long run on ``target`` (``compare``'s scored specs), kept beside it in
    ``.NAME.kept/`` so that a rerun after an interrupt continues from them.

    Each unit is one pickle, written atomically as it finishes, with the run's ``fingerprint`` (a
    digest of its inputs and settings); :meth:`load` returns only the units of the same fingerprint
    and removes the others (a rerun with other data or settings starts over). A finished run
    discards them (:meth:`discard`). The folder is the user's own, beside their output; nothing else reads it.
    """

    def __init__(self, target: str | os.PathLike, fingerprint: str, noun: str = "specs"):
        target = Path(target)
        self.folder = target.parent / f".{target.name}.kept"
        self.fingerprint, self.noun = fingerprint, noun
        self.labels: list[str] = []

    def load(self) -> dict:
        """``{label: value}`` of the units an earlier run with this fingerprint kept, in order."""
        found = {}
        for path in sorted(self.folder.glob("unit_*.pkl")):
            with open(path, "rb") as handle:
                record = pickle.load(handle)
            if record["fingerprint"] != self.fingerprint:
                shutil.rmtree(self.folder, ignore_errors=True)
                warn(f"removed the results kept in {self.folder} by an interrupted run with other data or "
                     "settings; starting over", UserWarning)
                return {}
            found[record["label"]] = record["value"]
        self.labels = list(found)
        return found

    def keep(self, label: str, value) -> None:
        """Keep one finished unit (atomically: a unit is there whole or not at all)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"unit_{len(self.labels):04d}.pkl"
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as handle:
                pickle.dump({"fingerprint": self.fingerprint, "label": label, "value": value}, handle)
            tmp.replace(path)
        except OSError as err:
            tmp.unlink(missing_ok=True)
            raise _cannot_write(path, err) from None
        self.labels.append(label)

    @contextmanager
    def on_interrupt(self, total: int, then: str | None = None) -> Iterator[None]:
        """An interrupt inside the block (or an error after a signal, see :mod:`.interrupts`) leaves as
        :class:`~bayesirt.utils.interrupts.Interrupted` saying what is kept (of ``total`` units) and how
        a rerun continues (``then``: with what); as a plain interrupt when nothing is kept."""
        try:
            yield
        except (KeyboardInterrupt, Exception) as err:
            if not (isinstance(err, KeyboardInterrupt) or interrupt_received()):
                raise
            if not self.labels:
                raise KeyboardInterrupt() from None
            how = f"continue with {then}" if then else "continue from them"
            raise Interrupted(f"kept the finished {self.noun} {', '.join(self.labels)} ({len(self.labels)} of "
                              f"{total}) in {self.folder}; rerun the same command (same data, settings and --out) "
                              f"to {how}") from None

    def discard(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _encoding(ds: xr.Dataset, float32: bool) -> dict[str, dict]:
    """Per-variable encoding: compression for every numeric array (HDF5 cannot filter scalars or
    strings), and single precision for float64 draws when ``float32``."""
    out = {}
    for name, var in ds.variables.items():
        if var.ndim == 0 or var.dtype.kind not in "biuf":
            continue
        enc = dict(COMPRESSION)
        if float32 and var.dtype == "float64" and "draw" in var.dims:
            enc["dtype"] = "float32"
        out[name] = enc
    return out


def write_netcdf(obj: xr.Dataset | xr.DataTree, path: str | os.PathLike, *, float32: bool = False) -> Path:
    """Write a Dataset or DataTree to ``path`` (h5netcdf), compressed.

    Every numeric variable of every group is stored with :data:`COMPRESSION`; with ``float32``,
    float64 variables that have a ``draw`` dimension (posterior, predictive and log-likelihood
    draws) are stored in single precision (7 significant digits, half the size), everything else
    as it is. A full disk or a read-only folder raises :class:`~bayesirt.errors.OutputError`.
    """
    import xarray as xr  # import time: the command line's parser imports this module through the jobs

    path = Path(path)
    try:
        if isinstance(obj, xr.DataTree):
            encoding = {node.path: _encoding(node.to_dataset(inherit=False), float32) for node in obj.subtree}
            obj.to_netcdf(path, engine="h5netcdf", encoding=encoding)
        else:
            obj.to_netcdf(path, engine="h5netcdf", encoding=_encoding(obj, float32))
    except OSError as err:
        raise _cannot_write(path, err) from None
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file and a rename, so a reader never sees
    half a file and a failed write leaves the earlier one; a failure raises :class:`OutputError`."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{_host()}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise _cannot_write(path, err) from None
    return path


def _plain(value):
    """``value`` with NumPy scalars and arrays as Python values and every non-finite float as None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)) and not isinstance(value, str):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, (np.bool_, np.integer)):
        return value.item()
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, Path):
        return str(value)
    return value


def to_json(payload, *, indent: int | None = 2) -> str:
    """``payload`` as JSON text: NumPy values converted, NaN and infinities written as ``null`` (JSON
    has no NaN); anything else that JSON cannot hold is a TypeError naming its type."""
    try:
        return json.dumps(_plain(payload), indent=indent, allow_nan=False)
    except TypeError as err:
        raise TypeError(f"cannot write to JSON: {err}") from None


def write_json(path: str | os.PathLike, payload) -> Path:
    """Write ``payload`` to ``path`` as indented JSON (:func:`to_json`), atomically."""
    return write_text_atomic(path, to_json(payload) + "\n")


def package_versions(packages) -> dict[str, str]:
    """``{"python": ..., package: version}`` for a fit's provenance (``bayesirt_versions``); a package
    that is not installed is recorded as such."""
    out = {"python": platform.python_version()}
    for pkg in packages:
        try:
            out[pkg] = version(pkg)
        except Exception:  # noqa: BLE001 (a missing optional package is recorded, not fatal)
            out[pkg] = "not installed"
    return out
