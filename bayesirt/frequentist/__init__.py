"""Frequentist reference fits: marginal maximum likelihood (Bock-Aitkin EM) for 1PL-4PL
logistic IRT, and the nested PL model ladder of SAFE Appendix E.

>>> from bayesirt.data import load_dataset
>>> from bayesirt.frequentist import fit_mml
>>> fit = fit_mml(load_dataset("lsat6"), "2pl", se=False)
>>> round(fit.loglik, 1)
-2466.7
"""

from bayesirt.frequentist.ladder import pl_ladder
from bayesirt.frequentist.mml import MMLResult, fit_mml, quadrature_grid

__all__ = ["MMLResult", "fit_mml", "pl_ladder", "quadrature_grid"]
