"""The choices and defaults of the options of the model comparison (:mod:`bayesirt.comparison.loo`),
which the jobs' declarations name: kept apart from the computations (NumPy, ArviZ, PyMC) so that
building the command-line parser does not import them."""

__all__ = ["UNITS", "KFOLD_MODES"]

#: What a LOO point is: a model (all its responses) or a cell (one response).
UNITS = ("model", "cell")

#: When exact K-fold by model replaces PSIS-LOO: when Pareto k flags enough models, always, or never.
KFOLD_MODES = ("auto", "always", "never")
