"""Bayesian workflow checks: prior and posterior predictive checks (:mod:`.predictive`),
simulation-based calibration (:mod:`.sbc`); their jobs are in :mod:`bayesirt.jobs.workflow`."""

from typing import TYPE_CHECKING

from bayesirt.utils.lazy import attach

if TYPE_CHECKING:
    from bayesirt.workflow.predictive import PPCResult, posterior_predictive_check, prior_predictive_check
    from bayesirt.workflow.sbc import SBCResult, simulation_based_calibration, uniformity_test

__getattr__, __dir__, __all__ = attach(__name__, __file__)
