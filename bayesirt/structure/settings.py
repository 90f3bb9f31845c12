"""The choices and defaults of the options of the ability-structure analysis
(:mod:`bayesirt.structure.ability_structure`, :mod:`bayesirt.structure.polarity`), which the jobs'
declarations name: kept apart from the computations (NumPy, pandas, SciPy) so that building the
command-line parser does not import them."""

__all__ = ["ABILITY_METHODS", "COHORTS", "ABILITY_ESTIMATES", "AUTO_POLARITY_THRESHOLD"]

#: How each benchmark's abilities are estimated: MAP-EM with EAP abilities (SAFE), or a posterior mean.
ABILITY_METHODS = ("map", "advi", "fullrank_advi", "nuts")

#: Models analysed: every model on the pairs of benchmarks it has, or only models with every benchmark.
COHORTS = ("pairwise", "complete")

#: Ability estimate of the MAP-EM fits: posterior mode (SAFE) or posterior mean (EAP).
ABILITY_ESTIMATES = ("mode", "eap")

#: ``polarity="auto"`` reverses a benchmark only when the whole bootstrap interval of its
#: general-factor loading lies below this value (a loading of |0.3| is the conventional smallest
#: salient loading; OR-Bench-Hard loads -0.64 in SAFE's one-dimensional MIRT and correlates -0.67 to
#: -0.77 with HarmBench and SORRY-Bench). Weakly negative benchmarks
#: (SAFE's TruthfulQA-like cases) are flagged but never reversed automatically.
AUTO_POLARITY_THRESHOLD = -0.3
