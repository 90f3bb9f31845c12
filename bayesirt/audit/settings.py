"""The choices and defaults that :class:`~bayesirt.audit.result.AuditConfig` declares, kept apart from
the audit's engine (NumPy, SciPy, numba, PyMC) so that building the command-line parser does not
import it."""

__all__ = ["ADJUSTMENTS", "ANCHOR_FRACTION"]

ADJUSTMENTS = ("spectral", "direct-mirt", "bayes-mirt")
"""Ability adjustments: NT's spectral working model (C.2), direct penalized joint MIRT (B.1), or the
PyMC MIRT posterior (:mod:`bayesirt.audit.bayes_mirt`)."""
#: Anchor fraction kept in each blueprint cell (NT: half of the items of each cell are anchors).
ANCHOR_FRACTION = 0.5
