"""Fitting a spec to responses: NUTS (nutpie, PyMC, numpyro, blackjax), ADVI and MAP, all returning
an ArviZ DataTree (:mod:`.fitting`); convergence diagnostics in plain language (:mod:`.diagnostics`);
item and model tables of a posterior (:mod:`.summaries`)."""

from typing import TYPE_CHECKING

from bayesirt.utils.lazy import attach

if TYPE_CHECKING:
    from bayesirt.inference.methods import METHODS, SAMPLERS
    from bayesirt.inference.fitting import fit, sample_model
    from bayesirt.inference.diagnostics import convergence_table, diagnose, element_diagnostics
    from bayesirt.inference.summaries import DEFAULT_CI, ahead_matrix, item_table, model_table, posterior_ranks

__getattr__, __dir__, __all__ = attach(__name__, __file__)
