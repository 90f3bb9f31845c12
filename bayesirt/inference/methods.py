"""The inference methods and NUTS samplers that :func:`bayesirt.inference.fit` offers, and the
default interval of the posterior tables (kept apart from the fitting code so the command-line tool
can list them without importing PyMC)."""

from bayesirt.utils.options import option

__all__ = ["METHODS", "MODEL_METHODS", "SAMPLERS", "DEFAULT_CI", "SAMPLER", "DRAWS", "TUNE", "CHAINS", "CORES", "SEED",
           "ADVI_ITERATIONS", "ADVI_TOLERANCE", "ADVI_LEARNING_RATE"]

METHODS = ("nuts", "advi", "fullrank_advi", "laplace")
"""Methods of :func:`~bayesirt.inference.fitting.fit`; "laplace" is a Gaussian approximation of the
2PL posterior with fixed priors (:mod:`~bayesirt.inference.laplace`), centred at the items' mode with
each ability integrated out by its own Laplace step, not at the joint mode (which shrinks the
abilities' scale), with exact joint draws from the inverse observed Hessian. The joint MAP itself is
not one: as a point estimate it diverges on short tests (the marginal MAP of the items is
``bayesirt.fit_mml(..., priors=True)``, the command-line ``fit --method map``)."""
MODEL_METHODS = ("nuts", "advi", "fullrank_advi", "joint_map")
"""Methods of :func:`~bayesirt.inference.fitting.sample_model` (of a built PyMC model, so not
"laplace"): also the posterior mode, for models without abilities (the audit's family-DIF model)."""
SAMPLERS = ("nutpie", "pymc", "numpyro", "blackjax")

#: Default credible-interval probability of the tables (equal-tailed;
#: :func:`~bayesirt.inference.summaries.item_table`).
DEFAULT_CI = 0.90

#: Options of :func:`~bayesirt.inference.fitting.fit`, :func:`~bayesirt.inference.fitting.sample_model` and the
#: jobs that fit, declared once for all.
SAMPLER = option("nutpie", "NUTS implementation; numpyro and blackjax need bayesirt[jax]", choices=SAMPLERS)
DRAWS = option(1000, "draws per chain (ADVI: from the approximation)", low=1)
TUNE = option(1000, "tuning steps per chain", low=1)
CHAINS = option(4, "chains", low=1)
CORES = option(None, "NUTS chains run at once [min(chains, CPU count)]", type=int, low=1)
SEED = option(0, "random seed; same seed, same arrays", low=0)
ADVI_ITERATIONS = option(50_000, "ADVI iteration cap", low=1)
ADVI_TOLERANCE = option(1e-4, "ADVI: a rate (the last: the fit) ends when the windowed mean loss changes by less "
                                "than this (relative) or, annealed or minibatch, by less than twice its Monte Carlo "
                                "noise, whichever is larger", low=0, open=True)
ADVI_LEARNING_RATE = option(None, "ADVI: constant Adam step size [annealed 0.1 to 0.0008]", type=float, low=0,
                            open=True)
