"""Shared utilities that import nothing else of bayesirt: output folders that are staged and never
overwritten silently (:mod:`.outputs`), parallel execution (:mod:`.parallel`), progress bars
(:mod:`.progress`), the lazy public names of the packages (:mod:`.lazy`) and the guard of numba's
on-disk cache for functions that compile in code from other files (:mod:`.numba_cache`)."""
