"""Named exceptions, and the recording of warnings for reports. Every user-facing problem raises
one of these with a one-line message that names the problem and the fix; the command-line tool
prints the message instead of a traceback."""

import warnings

__all__ = ["BayesIRTError", "DataError", "SpecError", "OutputError", "recorded_warnings"]


class BayesIRTError(ValueError):
    """Base class of every error bayesirt raises about its input."""


class DataError(BayesIRTError):
    """The response data (or its metadata) cannot be used as given."""


class SpecError(BayesIRTError):
    """A model or analysis spec file is malformed."""


class OutputError(BayesIRTError):
    """An output location cannot be written as asked (e.g. it exists and --force was not given)."""


def recorded_warnings(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` and the messages of the warnings it raised, re-emitted so they reach
    the terminal as well as the report that lists them."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = fn(*args, **kwargs)
    messages = [str(w.message) for w in seen if issubclass(w.category, (RuntimeWarning, UserWarning))]
    for m in messages:
        warnings.warn(m, RuntimeWarning, stacklevel=3)
    return result, messages
