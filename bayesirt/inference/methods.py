"""The inference methods and NUTS samplers that :func:`bayesirt.inference.fit` offers, and the
default interval of the posterior tables (kept apart from the fitting code so the command-line tool
can list them without importing PyMC)."""

__all__ = ["METHODS", "MODEL_METHODS", "SAMPLERS", "DEFAULT_CI"]

METHODS = ("nuts", "advi", "fullrank_advi", "laplace")
"""Methods of :func:`~bayesirt.inference.fitting.fit`; "laplace" is a Gaussian approximation of the
2PL posterior with fixed priors (:mod:`~bayesirt.inference.laplace`), centred at the items' mode with
each ability integrated out by its own Laplace step, not at the joint mode (which shrinks the
abilities' scale), with exact joint draws from the inverse observed Hessian. The joint MAP itself is
not one: as a point estimate it diverges on short tests (the marginal MAP of the items is
``bayesirt.fit_mml(..., priors=True)``, the command-line ``fit --method map``)."""
MODEL_METHODS = ("nuts", "advi", "fullrank_advi", "map")
"""Methods of :func:`~bayesirt.inference.fitting.sample_model` (of a built PyMC model, so not
"laplace"): also the posterior mode, for models without abilities (the audit's family-DIF model)."""
SAMPLERS = ("nutpie", "pymc", "numpyro", "blackjax")

#: Default credible-interval probability of the tables (equal-tailed;
#: :func:`~bayesirt.inference.summaries.item_table`).
DEFAULT_CI = 0.90
