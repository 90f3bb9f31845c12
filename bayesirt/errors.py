"""Named exceptions, and the recording of warnings for reports. Every user-facing problem raises
one of these with a one-line message that names the problem and the fix; the command-line tool
prints the message instead of a traceback."""

import difflib
import os
import warnings

__all__ = ["BayesIRTError", "ConfigError", "DataError", "SpecError", "OutputError", "recorded_warnings", "did_you_mean", "warn"]


class BayesIRTError(ValueError):
    """Base class of every error bayesirt raises about its input."""


class ConfigError(BayesIRTError):
    """A setting cannot be used as given: a function argument, a command-line flag, an option of an
    analysis file or a model spec (the usage and configuration errors; messages from
    :mod:`bayesirt.utils.validation`)."""


class DataError(BayesIRTError):
    """The response data (or its metadata) cannot be used as given."""


SpecError = ConfigError
"""The name of :class:`ConfigError` where a model or analysis spec file is malformed (one class)."""


class OutputError(BayesIRTError):
    """An output location cannot be written as asked (e.g. it exists and --force was not given)."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """Issue a warning attributed to the first caller outside bayesirt (the user's line, however deep
    in the package it arose), so Python's filters and the printed location point at the user's code."""
    warnings.warn(message, category, skip_file_prefixes=(_PACKAGE,))


def recorded_warnings(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` and the messages of the warnings it raised, re-emitted so they reach
    the terminal as well as the report that lists them."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = fn(*args, **kwargs)
    messages = [str(w.message) for w in seen if issubclass(w.category, (RuntimeWarning, UserWarning))]
    for m in messages:
        warn(m, RuntimeWarning)
    return result, messages


def did_you_mean(name: str, allowed) -> str:
    """`` (did you mean 'x'?)`` naming the allowed value closest to a mistyped ``name`` (a close
    spelling, or one that ``name`` starts with, as ``fpr_typo`` for ``fpr``), or ``""``."""
    allowed = [str(a) for a in allowed]
    match = difflib.get_close_matches(name, allowed, n=1, cutoff=0.5)
    if not match:
        match = sorted((a for a in allowed if name.startswith(a) or a.startswith(name)), key=len, reverse=True)[:1]
    return f" (did you mean {match[0]!r}?)" if match else ""
