"""Factor structure of abilities across benchmarks."""
