"""Shared utilities that import nothing else of bayesirt: output folders that are staged and never
overwritten silently (:mod:`.outputs`), parallel execution (:mod:`.parallel`), progress bars
(:mod:`.progress`) and the lazy public names of the packages (:mod:`.lazy`)."""
