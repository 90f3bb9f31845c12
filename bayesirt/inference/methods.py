"""The inference methods and NUTS samplers that :func:`bayesirt.inference.fit` offers (kept apart
from the fitting code so the command-line tool can list them without importing PyMC)."""

__all__ = ["METHODS", "MODEL_METHODS", "SAMPLERS"]

METHODS = ("nuts", "advi", "fullrank_advi")
"""Methods of :func:`~bayesirt.inference.fitting.fit`. Joint MAP over abilities and items is not one:
it diverges on short tests (the marginal MAP of the items is ``bayesirt.fit_mml(..., priors=True)``,
the command-line ``fit --method map``)."""
MODEL_METHODS = (*METHODS, "map")
"""Methods of :func:`~bayesirt.inference.fitting.sample_model`: also the posterior mode, for models
without abilities (the audit's family-DIF model)."""
SAMPLERS = ("nutpie", "pymc", "numpyro", "blackjax")
