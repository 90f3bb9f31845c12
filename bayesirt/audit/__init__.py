"""The family-DIF near-tie audit of the NT paper, in four layers (each imports only the ones before it):

- :mod:`.adjustment`: the ability adjustments that give the capability offsets: the spectral MIRT
  working model and its K selection (:mod:`.adjustment.spectral`), the direct penalized joint MIRT of
  NT B.1 (:mod:`.adjustment.joint_mirt`) and the PyMC MIRT (:mod:`.adjustment.bayes_mirt`).
- :mod:`.engine`: the deterministic near-tie engine: Newton residual DIF (:mod:`.engine.dif`), anchor
  purification (:mod:`.engine.anchors`), near-tie ranking statistics (:mod:`.engine.ranking`),
  matched-random controls (:mod:`.engine.resampling`), bootstraps (:mod:`.engine.bootstrap`), and the
  settings and results (:mod:`.engine.result`).
- :mod:`.diagnostics`: the diagnostics of NT 4 and App. B (matched controls, specificity, sensitivity,
  replication, capability profiles, common models, the content audit).
- :mod:`.bayes`: the Bayesian layer: the residual-DIF posterior carried through anchors and
  reversals (:mod:`.bayes.posterior`), the posterior diagnostics, and the near-tie leaderboard with
  uncertainty (:mod:`.bayes.near_ties`, paired accuracy in :mod:`.bayes.paired`).

On top, the pipelines that use all four: the primary audit (:mod:`.primary`), the diagnostics run on
a finished audit (:mod:`.robustness`, with the population perturbations of :mod:`.perturbations`) and
the labelled outputs (:mod:`.output`, :mod:`.intervals`). Files and reports are written by
:mod:`bayesirt.report` and :mod:`bayesirt.jobs.audit`."""

from typing import TYPE_CHECKING

from bayesirt.utils.lazy import attach

if TYPE_CHECKING:
    from bayesirt.audit.engine.result import AuditConfig, AuditResult, FoldResult, check_audit
    from bayesirt.audit.primary import run_audit
    from bayesirt.audit.output import audit_summary, audit_tree
    from bayesirt.audit.adjustment.joint_mirt import JointMIRT, direct_offsets, fit_coordinates, fit_item_parameters, fit_joint_mirt, select_dimension_direct
    from bayesirt.audit.robustness import add_diagnostics
    from bayesirt.audit.adjustment.spectral import select_dimension
    from bayesirt.audit.engine.dif import fit_family_dif
    from bayesirt.audit.engine.anchors import blueprint_cells, purify
    from bayesirt.audit.engine.ranking import kendall_tau_b, near_tie_pairs, reversal_counts
    from bayesirt.audit.engine.resampling import matched_random_controls
    from bayesirt.audit.engine.bootstrap import composition_bootstrap, owner_bootstrap
    from bayesirt.audit.bayes.posterior import fit_family_dif_posterior, propagate_posterior
    from bayesirt.audit.bayes.paired import discordant_counts, mcnemar_p, paired_accuracy

__getattr__, __dir__, __all__ = attach(__name__, __file__)
