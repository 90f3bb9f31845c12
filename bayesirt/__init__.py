"""bayesirt: Bayesian item response theory for auditing AI benchmarks."""

__version__ = "0.1.0"
