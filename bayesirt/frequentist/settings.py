"""The choices and defaults of the options of the frequentist fits
(:mod:`bayesirt.frequentist.mml`, :mod:`bayesirt.frequentist.mml_mirt`, :mod:`bayesirt.frequentist.agreement`),
which the jobs' declarations name: kept apart from the computations (SciPy, xarray) so that building the
command-line parser does not import them."""

from bayesirt.utils.options import none_or_int, option

__all__ = ["PRUNE", "SAFE_LOADING_PRIOR", "DEFAULT_THRESHOLD_SD", "THETA_METHODS", "QUADRATURE", "MAX_ITER", "THREADS",
           "ACCELERATE"]

PRUNE = 1e-6
"""Default pruning constant of :func:`~bayesirt.frequentist.mml_mirt.fit_mml_mirt`'s quadrature: keep a
node when its weight >= PRUNE x the largest weight."""

#: SD of SAFE App. C's N(0, 1.5^2) prior on every loading: the default of ``bayesirt mirt-mml``.
SAFE_LOADING_PRIOR = 1.5

#: Default ``threshold_sd`` of :func:`~bayesirt.frequentist.agreement.compare_estimates`: a difference is
#: flagged beyond this many posterior SDs.
DEFAULT_THRESHOLD_SD = 1.0

#: Ability estimates of :func:`~bayesirt.frequentist.mml.fit_mml` (both are computed; this one fills ``theta``).
THETA_METHODS = ("eap", "map")

#: Options of the EM fits (:func:`~bayesirt.frequentist.mml.fit_mml`,
#: :func:`~bayesirt.frequentist.mml_mirt.fit_mml_mirt`), declared once for both.
QUADRATURE = option(61, "Gauss-Hermite nodes of the starting ability grid (refined where the posteriors are "
                               "narrower than its spacing)", low=5, high=201)
MAX_ITER = option(500, "EM iteration cap (every EM step counts, SQUAREM's too); hitting it warns", low=1)
THREADS = option(1, "BLAS threads during the fit (none: the library's default)", type=int, low=1, parse=none_or_int)
ACCELERATE = option(True, "SQUAREM extrapolation of the EM steps (Varadhan & Roland 2008); the objective still "
                          "never decreases; False runs plain EM")
