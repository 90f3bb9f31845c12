"""A response Dataset saved by :func:`bayesirt.data.save_responses` (:mod:`bayesirt.data.netcdf`)."""

from bayesirt.data.registry import Reader, has_suffix

__all__ = ["READERS"]

READERS = (Reader("saved .nc response file", ".nc", "bayesirt.data.netcdf", "read_saved", has_suffix(".nc"),
                  order=40),)
