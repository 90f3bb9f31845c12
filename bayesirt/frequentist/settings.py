"""The choices and defaults of the options of the frequentist fits
(:mod:`bayesirt.frequentist.mml_mirt`, :mod:`bayesirt.frequentist.agreement`), which the jobs'
declarations name: kept apart from the computations (NumPy, SciPy) so that building the command-line
parser does not import them."""

__all__ = ["PRUNE", "SAFE_LOADING_PRIOR", "DEFAULT_THRESHOLD_SD"]

PRUNE = 1e-6
"""Default pruning constant of :func:`~bayesirt.frequentist.mml_mirt.fit_mml_mirt`'s quadrature: keep a
node when its weight >= PRUNE x the largest weight."""

#: SD of SAFE App. C's N(0, 1.5^2) prior on every loading: the default of ``bayesirt mirt-mml``.
SAFE_LOADING_PRIOR = 1.5

#: Default ``threshold_sd`` of :func:`~bayesirt.frequentist.agreement.compare_estimates`: a difference is
#: flagged beyond this many posterior SDs.
DEFAULT_THRESHOLD_SD = 1.0
