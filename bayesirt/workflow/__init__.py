"""Bayesian workflow checks: prior and posterior predictive checks, simulation-based calibration."""
