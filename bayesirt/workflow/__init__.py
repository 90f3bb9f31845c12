"""Bayesian workflow checks: prior and posterior predictive checks (:mod:`.predictive`),
simulation-based calibration (:mod:`.sbc`) and the jobs that write them (:mod:`.jobs`)."""

from typing import TYPE_CHECKING

from bayesirt.utils.lazy import attach

if TYPE_CHECKING:
    from bayesirt.workflow.predictive import PPCResult, posterior_predictive_check, prior_predictive_check
    from bayesirt.workflow.sbc import SBCResult, simulation_based_calibration, uniformity_test
    from bayesirt.workflow.jobs import parse_design, run_ppc_job, run_prior_check_job, run_sbc_job

__getattr__, __dir__, __all__ = attach(__name__, __file__)
