"""bayesirt: Bayesian item response theory for auditing AI benchmarks.

>>> import bayesirt as bi
>>> responses = bi.load("lsat6")                          # a path, or an embedded dataset
>>> tree = bi.fit(responses, "2pl", method="nuts")        # an ArviZ DataTree
>>> mml = bi.fit_mml(responses, "2pl")                    # the frequentist reference
>>> audit = bi.run_audit(bi.load("responses.npz"), bi.AuditConfig())   # the NT near-tie audit

Every name here is imported from its subpackage on first use, so ``import bayesirt`` is fast."""

__version__ = "0.1.0"

from typing import TYPE_CHECKING

from bayesirt.utils.lazy import attach

if TYPE_CHECKING:
    from bayesirt.data import load, make_responses, save_responses, simulate_pl, simulate_dif_benchmark, list_datasets
    from bayesirt.models import load_spec
    from bayesirt.inference import fit, sample_model, diagnose, item_table, model_table
    from bayesirt.workflow import posterior_predictive_check, prior_predictive_check, simulation_based_calibration
    from bayesirt.comparison import compare, loo_models, loo_cells, kfold_models
    from bayesirt.frequentist import fit_mml, pl_ladder, compare_estimates, split_half_retention
    from bayesirt.audit import AuditConfig, AuditResult, run_audit
    from bayesirt.report.audit_files import write_audit
    from bayesirt.safety import information_curves, static_test, run_cat, person_fit, sandbagging_experiment, identify
    from bayesirt.jobs import run_safety_suite, run_analysis
    from bayesirt.safety.cat_study import cat_study
    from bayesirt.structure import factor_analysis, parallel_analysis, ability_matrix, disattenuated_correlation
    from bayesirt.errors import BayesIRTError, ConfigError, DataError, SpecError, OutputError

__getattr__, __dir__, __all__ = attach(__name__, __file__)
