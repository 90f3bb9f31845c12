"""The frequentist reference: marginal maximum likelihood (Bock-Aitkin EM) for 1PL-4PL
(:mod:`.mml`, with its likelihood, standard errors and abilities in their own modules), the PL
ladder of SAFE App. E, the Bayes-versus-MML agreement report, the split-half regularization
check, the direct penalized joint MIRT of NT B.1, the item-level MIRT by MML of SAFE App. C
(:mod:`.mml_mirt`, D chosen by held-out likelihood in :mod:`.mml_mirt_select`), and the jobs that
write them (:mod:`.jobs`, :mod:`.mml_mirt_job`).

>>> from bayesirt.data import load_dataset
>>> from bayesirt.frequentist import fit_mml
>>> fit = fit_mml(load_dataset("lsat6"), "2pl", se=False)
>>> round(fit.loglik, 1)
-2466.7"""

from typing import TYPE_CHECKING

from bayesirt.utils.lazy import attach

if TYPE_CHECKING:
    from bayesirt.frequentist.agreement import DEFAULT_THRESHOLD_SD, Agreement, compare_estimates
    from bayesirt.frequentist.joint_mirt import JointMIRT, direct_offsets, fit_coordinates, fit_item_parameters, fit_joint_mirt, select_dimension_direct
    from bayesirt.frequentist.ladder import information_criteria, pl_ladder
    from bayesirt.frequentist.mml import MMLResult, fit_mml, quadrature_grid
    from bayesirt.frequentist.mml_mirt import MIRTFit, fit_mml_mirt, mirt_grid, mirt_model_loglik
    from bayesirt.frequentist.mml_mirt_select import heldout_mirt, loadings_by_benchmark, rotated_loadings
    from bayesirt.frequentist.mml_mirt_job import run_mirt_mml_job
    from bayesirt.frequentist.splithalf import split_half_retention
    from bayesirt.frequentist.jobs import run_check_job, run_ladder_job, run_mml_job, run_splithalf_job

__getattr__, __dir__, __all__ = attach(__name__, __file__)
