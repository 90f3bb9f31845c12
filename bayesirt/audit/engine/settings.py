"""The choices and defaults that :class:`~bayesirt.audit.engine.result.AuditConfig` and the audit's
functions declare, kept apart from the audit's engine (NumPy, SciPy, numba, PyMC) so that building the
command-line parser does not import it."""

from bayesirt.utils.options import option

__all__ = ["ADJUSTMENTS", "ANCHOR_FRACTION", "EPSILON", "SMALL_SAMPLE_PAIRS"]

#: Fewest eligible near-tie pairs for which the reversal rate and its excess are reported without a
#: small-sample note (below it one reversal moves the rate by more than 3 pp).
SMALL_SAMPLE_PAIRS = 30

ADJUSTMENTS = ("spectral", "direct-mirt", "bayes-mirt")
"""Ability adjustments: NT's spectral working model (C.2), direct penalized joint MIRT (B.1), or the
PyMC MIRT posterior (:mod:`bayesirt.audit.adjustment.bayes_mirt`)."""
#: Anchor fraction kept in each blueprint cell (NT: half of the items of each cell are anchors).
ANCHOR_FRACTION = 0.5
#: The near-tie band of every audit function, declared once.
EPSILON = option(0.01, "near-tie band on the full score (0.01 = 1 pp)", low=0, high=1, open="low")
