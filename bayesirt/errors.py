"""Named exceptions. Every user-facing problem raises one of these with a one-line message that
names the problem and the fix; the command-line tool prints the message instead of a traceback."""

__all__ = ["BayesIRTError", "DataError", "SpecError", "OutputError"]


class BayesIRTError(ValueError):
    """Base class of every error bayesirt raises about its input."""


class DataError(BayesIRTError):
    """The response data (or its metadata) cannot be used as given."""


class SpecError(BayesIRTError):
    """A model or analysis spec file is malformed."""


class OutputError(BayesIRTError):
    """An output location cannot be written as asked (e.g. it exists and --force was not given)."""
