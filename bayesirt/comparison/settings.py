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
