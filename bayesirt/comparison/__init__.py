"""Model comparison: PSIS-LOO, marginal likelihood over abilities, K-fold."""
