"""The family-DIF near-tie audit of the NT paper. Building blocks: spectral MIRT and K selection
(:mod:`.spectral`), Newton residual DIF (:mod:`.dif`), anchor purification (:mod:`.anchors`),
near-tie ranking statistics (:mod:`.ranking`), matched-random controls (:mod:`.resampling`) and
bootstraps (:mod:`.bootstrap`). The primary pipeline (:mod:`.primary`, settings and results in
:mod:`.result`), its diagnostics, the direct penalized joint MIRT of NT B.1 (:mod:`.joint_mirt`), its
Bayesian layer (:mod:`.bayes`), the paired accuracy comparison of its near-tie leaderboard
(:mod:`.paired`) and its labelled outputs (:mod:`.output`). Files and reports are written by
:mod:`bayesirt.report` and :mod:`bayesirt.jobs.audit`."""

from typing import TYPE_CHECKING

from bayesirt.utils.lazy import attach

if TYPE_CHECKING:
    from bayesirt.audit.result import AuditConfig, AuditResult, FoldResult, check_audit
    from bayesirt.audit.primary import run_audit
    from bayesirt.audit.output import audit_summary, audit_tree
    from bayesirt.audit.joint_mirt import JointMIRT, direct_offsets, fit_coordinates, fit_item_parameters, fit_joint_mirt, select_dimension_direct
    from bayesirt.audit.robustness import add_diagnostics
    from bayesirt.audit.spectral import select_dimension
    from bayesirt.audit.dif import fit_family_dif
    from bayesirt.audit.anchors import blueprint_cells, purify
    from bayesirt.audit.ranking import kendall_tau_b, near_tie_pairs, reversal_counts
    from bayesirt.audit.resampling import matched_random_controls
    from bayesirt.audit.bootstrap import composition_bootstrap, owner_bootstrap
    from bayesirt.audit.bayes import fit_family_dif_posterior, propagate_posterior
    from bayesirt.audit.paired import discordant_counts, mcnemar_p, paired_accuracy

__getattr__, __dir__, __all__ = attach(__name__, __file__)
