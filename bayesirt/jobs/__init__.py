"""Jobs: each command's work from inputs to an output folder, wiring an analysis (:mod:`bayesirt.audit`,
:mod:`bayesirt.safety`, ...) to its report (:mod:`bayesirt.report`) and the staged output folder
(:mod:`bayesirt.utils.outputs`). One module per subsystem, every job named ``run_<command>_job``; the
declared analyses (``analyses/*.toml``) are run by :mod:`.analysis`. Each job's keyword options are
declared once, in its signature (:mod:`bayesirt.utils.options`), and the command line and the
analysis files are generated from that declaration."""

from typing import TYPE_CHECKING

from bayesirt.utils.lazy import attach

if TYPE_CHECKING:
    from bayesirt.jobs.analysis import ANALYSIS_KINDS, load_analysis, run_analysis
    from bayesirt.jobs.bank import run_score_job, run_select_job
    from bayesirt.jobs.audit import run_audit_job, run_common_models_job, run_content_audit_job
    from bayesirt.jobs.comparison import run_compare_job
    from bayesirt.jobs.fit import run_fit_job
    from bayesirt.jobs.frequentist import (
        run_check_job,
        run_ladder_job,
        run_mirt_mml_job,
        run_mml_job,
        run_splithalf_job,
    )
    from bayesirt.jobs.safety import (
        run_cat_job,
        run_fingerprint_job,
        run_information_job,
        run_personfit_job,
        run_sandbag_job,
    )
    from bayesirt.jobs.structure import run_factors_job
    from bayesirt.jobs.suite import run_safety_suite
    from bayesirt.jobs.workflow import run_ppc_job, run_prior_check_job, run_sbc_job

__getattr__, __dir__, __all__ = attach(__name__, __file__)
