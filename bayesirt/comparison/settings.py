"""The choices and defaults of the options of the model comparison (:mod:`bayesirt.comparison.loo`),
which the jobs' declarations name: kept apart from the computations (NumPy, ArviZ, PyMC) so that
building the command-line parser does not import them."""

__all__ = ["UNITS", "KFOLD_MODES", "NUTS_MAX_CELLS", "WEIGHTS"]

#: What a LOO point is: a model (all its responses) or a cell (one response).
UNITS = ("model", "cell")

#: When exact K-fold by model replaces PSIS-LOO: when Pareto k flags enough models, always, or never.
KFOLD_MODES = ("auto", "always", "never")

#: Observed responses (models x items) up to which ``compare`` without a method fits by NUTS: 3 specs
#: at 40,000 cells sample in minutes; ADVI (or Laplace) takes over above.
NUTS_MAX_CELLS = 40_000

#: The model weights of ``compare``'s ``weight`` column (both are always reported): stacking (the
#: predictive mixture, ArviZ's and loo's default) or pseudo-BMA+ (Bayesian-bootstrap pseudo-BMA).
WEIGHTS = ("stacking", "pseudo-bma+")

#: ``compare`` answers "which spec?", so ``weight`` defaults to pseudo-BMA+ (about the chance that a spec has the
#: highest elpd: a spec that leads by several dse takes nearly all of it). Stacking answers "which mixture predicts
#: best?" and can split between near-nested specs when one leads by 4+ dse (a simulated 755 x 1,351 3PL: 3pl ahead
#: of 2pl by 4.3 dse, stacking .69, pseudo-BMA+ 1.00; benchmarks/results/compare_weights.md); it stays a column.
DEFAULT_WEIGHTS = "pseudo-bma+"
