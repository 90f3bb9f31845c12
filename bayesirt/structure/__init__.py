"""Factor structure of abilities across benchmarks (SAFE "Latent Ability Inference", App. D):
minimum-residual factor analysis, fit indices and parallel analysis (:mod:`.factor`), rotations
(:mod:`bayesirt.models.rotation`, shared with the item-level MIRT), the two-stage design over
benchmark files (:mod:`.ability_structure`) and the correction for measurement error with bootstrap
intervals (:mod:`.reliability`). The ``bayesirt factors`` job is :mod:`bayesirt.jobs.structure`."""

from typing import TYPE_CHECKING

from bayesirt.utils.lazy import attach

if TYPE_CHECKING:
    from bayesirt.structure.factor import factor_analysis, fit_indices, parallel_analysis
    from bayesirt.models.rotation import rotate, tucker_congruence
    from bayesirt.structure.loadings import loading_table, rotate_posterior
    from bayesirt.structure.ability_structure import ability_matrix, composite_alignment
    from bayesirt.structure.reliability import bootstrap_factor_analysis, disattenuated_correlation
    from bayesirt.structure.polarity import alignment_table, polarity_table
    from bayesirt.structure.pairs import ability_matched_pairs, pair_distinguishability

__getattr__, __dir__, __all__ = attach(__name__, __file__)
