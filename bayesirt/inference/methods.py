"""The inference methods and NUTS samplers that :func:`bayesirt.inference.fit` offers (kept apart
from the fitting code so the command-line tool can list them without importing PyMC)."""

__all__ = ["METHODS", "SAMPLERS"]

METHODS = ("nuts", "advi", "fullrank_advi", "map")
SAMPLERS = ("nutpie", "pymc", "numpyro", "blackjax")
