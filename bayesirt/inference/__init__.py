"""Fitting specs to responses: NUTS, ADVI and MAP, diagnostics and summaries."""
