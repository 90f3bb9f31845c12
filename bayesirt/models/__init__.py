"""Model specs and their PyMC builders: ``models/*.toml`` read into typed specs (:mod:`.specs`,
which knows nothing of PyMC), and the builders of 1PL-4PL (:mod:`.logistic`), compensatory MIRT
(:mod:`.mirt`) and the residual family-DIF model (:mod:`.family_dif`); the 1PL-4PL response function:
probability, derivatives, information, log-likelihood (:mod:`.response`); Fisher information of
1PL-4PL items and tests (:mod:`.information`); rotations of loading matrices (:mod:`.rotation`:
oblimin, varimax, Tucker congruence), shared by MIRT and the factor analysis of abilities."""

from typing import TYPE_CHECKING

from bayesirt.utils.lazy import attach

if TYPE_CHECKING:
    from bayesirt.models.specs import BUILTIN_DIR, IRTSpec, MIRTSpec, Prior, builtin_specs, load_spec, parse_spec
    from bayesirt.models.logistic import build_logistic, pointwise_log_likelihood
    from bayesirt.models.response import response_probability
    from bayesirt.models.mirt import align_signs, build_mirt
    from bayesirt.models.family_dif import build_family_dif
    from bayesirt.models.information import item_information, test_information
    from bayesirt.models.rotation import rotate, tucker_congruence

__getattr__, __dir__, __all__ = attach(__name__, __file__)
