"""The names of the unidimensional logistic IRT models, shared by the simulator and the spec files.

A model is named by what it has: ``1pl`` (one common slope) or ``2pl`` (a slope per item), ``3pl`` with a
lower asymptote (guessing), ``3plu`` with an upper asymptote only (slip; the "3PLu" of the 4PL literature),
``4pl`` with both. (No imports: the command line reads it without loading NumPy.)
"""

__all__ = ["KINDS", "WITH_GUESSING", "WITH_SLIP"]

KINDS = ("1pl", "2pl", "3pl", "3plu", "4pl")
WITH_GUESSING = ("3pl", "4pl")
WITH_SLIP = ("3plu", "4pl")
