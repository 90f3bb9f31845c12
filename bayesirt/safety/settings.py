"""The choices and defaults of the options of the safety analyses (adaptive tests, person fit,
sandbagging, fingerprints, short tests and scores), which the jobs' declarations name: kept apart
from the computations (NumPy, SciPy, numba) so that building the command-line parser does not import
them."""

__all__ = ["SELECTION_RULES", "ESTIMATORS", "DIRECTIONS", "MODES", "DEFAULT_SHIFTS", "STATISTICS", "NULLS",
           "TARGETS", "INTERVALS", "DEFAULT_RULE", "SELECTION_METHODS", "SELECTION_METHOD", "CALIBRATION_RULES",
           "ABILITY_PRIORS", "WIDE_PRIOR_FACTOR", "ABOVE_FROM", "ABOVE_SPREAD",
           "EXTRAPOLATION", "STATIC_DESIGNS", "STATIC_DESIGN",
           "CALIBRATION_NULLS", "FLIP_RATE", "PROMPTED_NOISE"]

#: Item selection rules of :func:`~bayesirt.safety.adaptive.run_cat`.
SELECTION_RULES = ("fisher", "posterior", "kl")

#: Ability estimators of :func:`~bayesirt.safety.adaptive.score_test` and
#: :func:`~bayesirt.safety.adaptive.run_cat`.
ESTIMATORS = ("eap", "map")

#: ``"down"``: correct -> incorrect (under-performance); ``"up"``: incorrect -> correct.
DIRECTIONS = ("down", "up")

#: Simulation modes: a coherent ability shift (default), independent random errors, or the two mixed
#: ("prompted": a coherent shift plus item-level inconsistency, as SAFE's prompted models show).
MODES = ("ability_shift", "random_errors", "prompted")

#: ``mode="prompted"``: probability that an in-scope response with the source value changes on top of
#: the coherent shift, independently of the item. Calibrated at SAFE's median uniform shift (1.69 logits)
#: on HarmBench-sized simulated cohorts (196 items x 171 models): person fit then flags 18% and 29% of
#: uniform runs on two such cohorts, inside SAFE's 18-35% (plain/persona 18-20%, pooled 35%); SAFE's
#: incentive framing (70%) and its selective runs (80-100%) are not reached, nor SAFE's uniform rate on the
#: shorter, already misfitting OLL files (``benchmarks/results/sandbagging_modes.md``).
PROMPTED_NOISE = 0.2

#: Ability shifts (logits) simulated by default (SAFE's uniform runs: median +1.69, up to +3.94).
DEFAULT_SHIFTS = (0.5, 1.0, 1.5, 2.0)

#: Person-fit statistics a cut-off can be set on.
STATISTICS = ("lz", "lz_star")

#: Self-disagreement nulls: repeated collections (SAFE) or the parametric resampling null (on request).
NULLS = ("repeats", "resampling")

#: Full-score definitions: ``"auto"`` is ``"benchmark_mean"`` on a bank of pooled benchmarks, else
#: ``"proportion"`` (:mod:`bayesirt.safety.cat_study`).
TARGETS = ("auto", "proportion", "benchmark_mean")

#: Interval kinds of ``score``: the Bayesian posterior predictive interval, or the same rescaled to cover
#: ``level`` of the calibration cohort on the same items (:func:`bayesirt.safety.scoring.predict_accuracy`), or
#: the design-based interval of a stratified random item sample (:func:`bayesirt.safety.item_sample.design_estimate`).
INTERVALS = ("calibrated", "model", "design")

#: The default rule of the calibrated interval's factor (:func:`bayesirt.safety.scoring.interval_scale`).
DEFAULT_RULE = "conservative"

#: Rules of :func:`~bayesirt.safety.short_test.select_items`: ``"extended"`` is half ``"score"`` and half
#: items informative above the calibration cohort (:func:`~bayesirt.safety.static_design.above_cohort`), for
#: models that may be stronger than the cohort (issue 46); ``"sample"`` a stratified random sample of the items
#: (:func:`~bayesirt.safety.item_sample.stratified_sample`), which ``score`` recognizes and scores design-based.
SELECTION_METHODS = ("sample", "score", "information", "extended")

#: The default of :func:`~bayesirt.safety.short_test.select_items`: the test whose interval (``score``'s
#: design-based one) stays calibrated when the scored models are stronger than the bank's cohort: coverage
#: .86-.91 on three Open LLM Leaderboard files with a 3PL bank, calibrating on the weakest 80% and scoring the
#: strongest 20% at 25 items, where ``"extended"`` covers .39-.89; on a random split its intervals are 3-7 pp
#: wider than ``"extended"``'s on ARC and MMLU (``benchmarks/results/score_shift.md``).
SELECTION_METHOD = "sample"

#: Where ``"extended"`` puts its upper block: Fisher-information targets evenly spaced from the cohort's
#: ability quantile :data:`ABOVE_FROM` to that quantile plus :data:`ABOVE_SPREAD` cohort sds.
ABOVE_FROM = 0.95
ABOVE_SPREAD = 4.0

#: Rules of :func:`~bayesirt.safety.scoring.interval_scale`.
CALIBRATION_RULES = ("conservative", "nearest")

#: Ability priors of ``score`` for the models scored: the bank's calibration population, or the same
#: mean with :data:`WIDE_PRIOR_FACTOR` times its sd (new models are often stronger than the cohort).
ABILITY_PRIORS = ("bank", "wide")

#: How much wider than the bank's population sd the ``"wide"`` ability prior is.
WIDE_PRIOR_FACTOR = 3.0

#: How ``score`` treats a model outside the bank's support (:func:`bayesirt.safety.scores.envelope`):
#: ``"envelope"`` widens its interval to hold the predictive intervals under both ability priors and is never
#: narrowed by the rescaling calibrated inside the support; ``"none"`` leaves it as scored (flagged only).
EXTRAPOLATION = ("envelope", "none")

#: Designs of a short static test (:mod:`bayesirt.safety.static_design`).
STATIC_DESIGNS = ("representative", "stratified", "population", "max_information")

#: The static design of the SAFE steps (the CAT study's static test, the sandbag step's ability-shift
#: test, the factors step's pair test), chosen by a stated rule and measured on the five Open LLM
#: Leaderboard files and a curated bank (``benchmarks/results/static_design.md``): the design with the
#: smallest expected error of the predicted full score whose items still span the test's difficulty
#: (one per stratum of expected proportion correct), which in that measurement is not worse than random
#: items at 10, 25 and 50 items, in the shift detector's recall or in the pair test. SAFE's
#: maximum-information test loses to random items there; ``"stratified"`` (round 2's default) loses at
#: 50 items on ARC and TruthfulQA.
STATIC_DESIGN = "representative"

#: Nulls of the sandbagging detectors' cut-offs (:mod:`bayesirt.safety.recollection`): simulated honest
#: re-collections of the genuine cohort (default), or the cohort's own history (SAFE, in-sample).
CALIBRATION_NULLS = ("recollection", "in_sample")

#: Self-disagreement of an honest re-collection: SAFE App. B's median share of cells that differ between
#: repeated collections of the same model.
FLIP_RATE = 0.028
