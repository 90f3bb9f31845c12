"""The frequentist reference: marginal maximum likelihood (Bock-Aitkin EM) for 1PL-4PL
(:mod:`.mml`, with its likelihood, standard errors and abilities in their own modules), the PL
ladder of SAFE App. E, the Bayes-versus-MML agreement report, the split-half regularization
check and the item-level MIRT by MML of SAFE App. C (:mod:`.mml_mirt`, D chosen by held-out
likelihood in :mod:`.mml_mirt_select`). The direct penalized joint MIRT of NT B.1 is the audit's
(:mod:`bayesirt.audit.adjustment.joint_mirt`); the jobs that write these are in :mod:`bayesirt.jobs.frequentist`.

>>> from bayesirt.data import load_dataset
>>> from bayesirt.frequentist import fit_mml
>>> fit = fit_mml(load_dataset("lsat6"), "2pl", se=False)
>>> round(fit.loglik, 1)
-2466.7"""

from typing import TYPE_CHECKING

from bayesirt.utils.lazy import attach

if TYPE_CHECKING:
    from bayesirt.frequentist.agreement import DEFAULT_THRESHOLD_SD, Agreement, compare_estimates
    from bayesirt.frequentist.ladder import information_criteria, pl_ladder
    from bayesirt.frequentist.mml import MMLResult, fit_mml, quadrature_grid
    from bayesirt.frequentist.mml_mirt import MIRTFit, fit_mml_mirt, mirt_grid, mirt_model_loglik
    from bayesirt.frequentist.mml_mirt_select import heldout_mirt, loadings_by_benchmark, rotated_loadings
    from bayesirt.frequentist.splithalf import split_half_retention

__getattr__, __dir__, __all__ = attach(__name__, __file__)
