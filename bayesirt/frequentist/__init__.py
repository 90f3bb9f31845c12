"""Frequentist reference fits and the checks built on them: marginal maximum likelihood
(Bock-Aitkin EM) for 1PL-4PL logistic IRT, the nested PL model ladder of SAFE Appendix E, the
Bayes-versus-MML agreement report and the split-half regularization check.

>>> from bayesirt.data import load_dataset
>>> from bayesirt.frequentist import fit_mml
>>> fit = fit_mml(load_dataset("lsat6"), "2pl", se=False)
>>> round(fit.loglik, 1)
-2466.7
"""

from bayesirt.frequentist.agreement import DEFAULT_THRESHOLD_SD, Agreement, compare_estimates
from bayesirt.frequentist.joint_mirt import (JointMIRT, direct_offsets, fit_coordinates, fit_item_parameters,
                                             fit_joint_mirt, select_dimension_direct)
from bayesirt.frequentist.ladder import information_criteria, pl_ladder
from bayesirt.frequentist.mml import MMLResult, fit_mml, quadrature_grid
from bayesirt.frequentist.splithalf import split_half_retention

__all__ = ["DEFAULT_THRESHOLD_SD", "Agreement", "MMLResult", "compare_estimates", "fit_mml", "information_criteria", "pl_ladder",
           "quadrature_grid", "split_half_retention"]
__all__ += ["JointMIRT", "direct_offsets", "fit_coordinates", "fit_item_parameters", "fit_joint_mirt",
            "select_dimension_direct"]
