"""Response Datasets saved by :func:`bayesirt.data.save_responses` (NetCDF via h5netcdf), read back and
re-validated."""

from __future__ import annotations

import os
from typing import Any

import xarray as xr

from bayesirt.data.files import existing, parsing, reading
from bayesirt.data.responses import validate_responses

__all__ = ["read_saved"]


def read_saved(path: str | os.PathLike[str], *, drop_empty: Any = True) -> xr.Dataset:
    """Read a response Dataset saved by :func:`~bayesirt.data.save_responses` and validate it again.

    ``drop_empty`` is taken as every reader takes it and changes nothing: a saved Dataset was validated
    when it was saved, so it has no model or item without a response."""
    p = existing(path)
    with reading(p):
        with parsing(p), xr.open_dataset(p, engine="h5netcdf") as saved:  # h5py raises many types
            ds = saved.load()
        ds.attrs["source"] = str(p)
        return validate_responses(ds)
