"""Which way round a matrix file is laid out: rows are models or rows are items.

The choices (:data:`ORIENTATIONS`), the warning given when the layout had to be guessed or contradicts
the evidence of the file (:class:`OrientationWarning`), and the record of the layout used, kept in the
Dataset's attributes ``orientation`` and ``orientation_basis`` for the reading record.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import xarray as xr

from bayesirt.data.registry import ORIENTATIONS
from bayesirt.errors import DataError, warn

__all__ = ["ORIENTATIONS", "Layout", "OrientationWarning", "check_orientation", "warn_layout", "record_layout"]

# the spelling of the Python API before the --orientation flag (kept for scripts and the dataset registry)
_EARLIER = {"models_by_items": "models-rows", "items_by_models": "items-rows"}


class Layout(NamedTuple):
    """The layout a matrix was read with and what decided it (for the reading record)."""

    orientation: str
    basis: str


class OrientationWarning(UserWarning):
    """A matrix's layout was guessed, or the orientation given contradicts the file; the message names
    the file, the layout used, the reason and the flag that sets it."""


def check_orientation(value: Any) -> str:
    """``value`` as one of :data:`ORIENTATIONS` (the earlier ``items_by_models`` / ``models_by_items``
    are accepted); a DataError otherwise."""
    value = _EARLIER.get(value, value) if isinstance(value, str) else value
    if value not in ORIENTATIONS:
        raise DataError(f"orientation {value!r} is not one of {', '.join(ORIENTATIONS)}; pick one of those "
                        "(--orientation on the command line)")
    return value


def _sides(orientation: str) -> tuple[str, str]:
    return ("models", "items") if orientation == "models-rows" else ("items", "models")


def warn_layout(where: Any, orientation: str, shape: tuple[int, int], reason: str, *, given: bool) -> None:
    """One :class:`OrientationWarning`: ``where`` was read with ``orientation`` (a guess of ``auto``,
    or a layout ``given`` against the evidence), why, and the flag that sets the other layout."""
    rows, cols = _sides(orientation)
    other = "items-rows" if orientation == "models-rows" else "models-rows"
    read = f"read as rows = {rows} ({shape[0]} {rows} x {shape[1]} {cols})"
    if given:
        text = f"{where}: {read} as --orientation {orientation} says, although {reason}; check the flag"
    else:
        text = (f"{where}: {read}, a guess: {reason}; pass --orientation {other} (orientation='{other}') if rows "
                f"are {cols}, or --orientation {orientation} to confirm")
    warn(text, OrientationWarning)


def record_layout(ds: xr.Dataset, layout: Layout) -> xr.Dataset:
    """``ds`` with the layout it was read with in its attributes (read by the reading record)."""
    ds.attrs.update(orientation=layout.orientation, orientation_basis=layout.basis)
    return ds
