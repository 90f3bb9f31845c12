"""Output folders that are never overwritten silently and never left half-written, and the one
NetCDF writer every output goes through.

A run writes into a hidden staging folder beside the target; only when everything is written is
the staging folder renamed to the target. An interrupted or failed run leaves any earlier result
untouched. Replacing an existing folder needs ``force=True`` (the CLI's ``--force``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import xarray as xr

from bayesirt.errors import OutputError

__all__ = ["staged_output", "check_output", "write_netcdf", "COMPRESSION"]

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


@contextmanager
def staged_output(target: str | os.PathLike, *, force: bool) -> Iterator[Path]:
    """Yield a staging folder; on success it replaces ``target`` atomically (same file system)."""
    target = check_output(target, force=force)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    except OSError as err:
        raise OutputError(f"cannot write under {target.parent} ({err.strerror}); choose another --out") from None
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if target.exists():
        retired = target.with_name(f".{target.name}.replaced-{os.getpid()}")
        target.rename(retired)
        staging.rename(target)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        staging.rename(target)


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
    path = Path(path)
    try:
        if isinstance(obj, xr.DataTree):
            encoding = {node.path: _encoding(node.to_dataset(inherit=False), float32) for node in obj.subtree}
            obj.to_netcdf(path, engine="h5netcdf", encoding=encoding)
        else:
            obj.to_netcdf(path, engine="h5netcdf", encoding=_encoding(obj, float32))
    except OSError as err:
        raise OutputError(f"cannot write {path} ({err.strerror or err}); free space or choose another --out") from None
    return path
