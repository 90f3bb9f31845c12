"""The safety-IRT toolkit of the SAFE paper: information curves (item information itself lives in
:mod:`bayesirt.models.information`), static and adaptive tests (:mod:`.adaptive`), the held-out distillation study (:mod:`.cat_study`), person fit
(:mod:`.personfit`), sandbagging (:mod:`.sandbagging`), response fingerprints (:mod:`.fingerprint`)
and the item banks of several benchmarks (:mod:`.scopes`). Their jobs, and the suite over several
benchmark files, are in :mod:`bayesirt.jobs`."""

from typing import TYPE_CHECKING

from bayesirt.utils.lazy import attach

if TYPE_CHECKING:
    from bayesirt.models.information import information_curves, posterior_information
    from bayesirt.safety.adaptive import run_cat, score_test, static_test
    from bayesirt.safety.cat_study import combine_benchmarks
    from bayesirt.safety.personfit import calibrate_cutoff, lz_statistics, person_fit, posterior_predictive_person_fit
    from bayesirt.safety.sandbagging import sandbag, sandbagging_experiment
    from bayesirt.safety.fingerprint import identify, self_disagreement_null

__getattr__, __dir__, __all__ = attach(__name__, __file__)
