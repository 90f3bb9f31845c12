"""The safety-IRT toolkit of the SAFE paper."""
