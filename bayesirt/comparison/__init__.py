"""Model comparison by cross-validated elpd: leave-one-model-out PSIS-LOO with abilities integrated
out (:mod:`.loo`, :mod:`.marginal`, :mod:`.grid`), PSIS-LOO over responses (:mod:`.psis`), exact K-fold by
model and comparison tables. The ``bayesirt compare`` job is :mod:`bayesirt.jobs.comparison`."""

from typing import TYPE_CHECKING

from bayesirt.utils.lazy import attach

if TYPE_CHECKING:
    from bayesirt.comparison.loo import (compare, compare_table, elpd_dataset, kfold_models, kfold_specs, loo_cells,
                                         loo_models, marginal_log_likelihood)
    from bayesirt.comparison.psis import psis_loo

__getattr__, __dir__, __all__ = attach(__name__, __file__)
