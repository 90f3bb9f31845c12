"""Checks of settings (function arguments, command-line flags, analysis-file options), with one
message form, after scikit-learn's parameter validation:

    The 'method' parameter of fit must be one of {'nuts', 'advi', 'fullrank_advi'}; got 'nut' (did you mean 'nuts'?).

Each check returns the value (as a plain Python type) or raises :class:`~bayesirt.errors.ConfigError`.
Problems with the *data* (a ragged matrix, an unknown item id) are :class:`~bayesirt.errors.DataError`
and are raised where the data are read, not here."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from bayesirt.errors import ConfigError, DataError, did_you_mean

__all__ = ["parameter_error", "check_choice", "check_int", "check_number", "check_probability", "check_bool"]


def parameter_error(name: str, caller: str, expected: str, value, *, hint: str = "", where: str = "") -> ConfigError:
    """The error of every check of a setting, in the one message form: ``[where ]The 'name'
    parameter of caller must be expected; got value[ (did you mean ...?)].``"""
    return ConfigError(f"{where + ' ' if where else ''}The '{name}' parameter of {caller} must be {expected}; "
                       f"got {value!r}{hint}.")


def check_choice(value, allowed: Iterable, *, name: str, caller: str):
    """``value`` if it is one of ``allowed``."""
    allowed = tuple(allowed)
    if isinstance(value, (list, dict, set)) or value not in allowed:
        raise parameter_error(name, caller, f"one of {{{', '.join(repr(a) for a in allowed)}}}", value,
                              hint=did_you_mean(str(value), allowed))
    return value


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _span(low, high, *, low_open: bool = False, high_open: bool = False) -> str:
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {low}"
    return f"{'<' if high_open else '<='} {high}" if high is not None else ""


def check_int(value, *, name: str, caller: str, low: int | None = None, high: int | None = None,
              optional: bool = False) -> int | None:
    """``value`` as an int if it is an integer (not a bool) within ``[low, high]``; None passes when
    ``optional``."""
    if value is None and optional:
        return None
    if not _is_int(value) or (low is not None and value < low) or (high is not None and value > high):
        what = {0: "a non-negative integer", 1: "a positive integer"}.get(low) if high is None else None
        what = what or f"an integer {_span(low, high)}".rstrip()
        raise parameter_error(name, caller, what + (" or None" if optional else ""), value)
    return int(value)


def check_number(value, *, name: str, caller: str, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False, optional: bool = False) -> float | None:
    """``value`` as a float if it is a finite real number (not a bool) within the bounds."""
    if value is None and optional:
        return None
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    ok = ok and math.isfinite(value)
    if ok:
        ok = not ((low is not None and (value <= low if low_open else value < low))
                  or (high is not None and (value >= high if high_open else value > high)))
    if not ok:
        raise parameter_error(name, caller, f"a number {_span(low, high, low_open=low_open, high_open=high_open)}"
                              .rstrip() + (" or None" if optional else ""), value)
    return float(value)


def check_probability(value, *, name: str, caller: str, closed: bool = False) -> float:
    """``value`` in (0, 1), or in [0, 1] when ``closed``."""
    return check_number(value, name=name, caller=caller, low=0, high=1, low_open=not closed, high_open=not closed)


def check_bool(value, *, name: str, caller: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise parameter_error(name, caller, "True or False", value)
    return bool(value)


def testlet_labels(testlet, n_items: int) -> np.ndarray:
    """Testlet labels as strings, one per item, none missing (a stand-alone item has a label of its own), or a
    :class:`~bayesirt.errors.DataError` naming the problem."""
    labels = np.asarray(testlet, dtype=object)
    if labels.shape != (n_items,):
        raise DataError(f"testlet has {labels.size} labels for {n_items} items; pass one testlet per item")
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in labels):
        raise DataError("testlet labels must not be missing; give a stand-alone item its own label")
    return labels.astype(str)
