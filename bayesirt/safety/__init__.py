"""The safety-IRT toolkit of the SAFE paper: information curves (item information itself lives in
:mod:`bayesirt.models.information`), static and adaptive tests (:mod:`.adaptive`), the held-out distillation study (:mod:`.cat_study`), person fit
(:mod:`.personfit`), sandbagging (:mod:`.sandbagging`), response fingerprints (:mod:`.fingerprint`),
the item banks of several benchmarks (:mod:`.scopes`), and evaluating a new model on a few items of a
calibrated bank (:mod:`.bank`, :mod:`.short_test`, :mod:`.scoring`, :mod:`.scores`). Their jobs, and
the suite over several benchmark files, are in :mod:`bayesirt.jobs`."""

from typing import TYPE_CHECKING

from bayesirt.utils.lazy import attach

if TYPE_CHECKING:
    from bayesirt.models.information import information_curves, posterior_information
    from bayesirt.safety.adaptive import run_cat, score_test, static_test
    from bayesirt.safety.cat_study import combine_benchmarks
    from bayesirt.safety.personfit import calibrate_cutoff, lz_statistics, person_fit, posterior_predictive_person_fit
    from bayesirt.safety.sandbagging import sandbag, sandbagging_experiment
    from bayesirt.safety.fingerprint import identify, self_disagreement_null
    from bayesirt.safety.bank import Bank, read_bank
    from bayesirt.safety.short_test import AdaptiveTest, harness_ids, score_recovery_test, select_items
    from bayesirt.safety.scoring import (align_responses, at_ceiling, interval_scale, outside_calibration,
                                         person_fit_flags, predict_accuracy)
    from bayesirt.safety.scores import score_models

__getattr__, __dir__, __all__ = attach(__name__, __file__)
