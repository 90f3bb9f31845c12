"""Improper factor solutions and unreadable fit indices are flagged in the table, the figure and the report."""

from types import SimpleNamespace

import numpy as np
import pandas as pd

from bayesirt.report.factors import _fit_frame, _flag_lines, solution_flags
from bayesirt.structure.factor import PSI_BOUNDS, factor_solution, improper_variables


def _solution(k, loadings, uniquenesses, rmsea, heywood=False):
    fit = SimpleNamespace(chi2=1.0, dof=1, rmsea=rmsea, cfi=0.9, tli=0.9, n_obs=40)
    return SimpleNamespace(n_factors=k, variables=("arc", "gsm8k", "mmlu"), loadings=np.asarray(loadings),
                           uniquenesses=np.asarray(uniquenesses), fit=fit, variance_explained=0.5, heywood=heywood)


def test_flags_name_the_benchmark_and_the_reason():
    proper = _solution(1, [[0.7], [0.6], [0.5]], [0.51, 0.64, 0.75], 0.05)
    bound = _solution(2, [[0.99, 0.1], [0.6, 0.2], [0.5, 1.02]], [PSI_BOUNDS[0], 0.6, 0.2], 1.7, heywood=True)
    assert solution_flags(proper) == []
    assert solution_flags(bound) == ["Heywood: uniqueness at its bound for arc",
                                     "Heywood: a loading of 1 or more for mmlu", "RMSEA 1.70 > 1"]
    table = _fit_frame([proper, bound])
    assert list(table["flags"]) == ["-", "; ".join(solution_flags(bound))] and list(table["Heywood"]) == [False, True]
    text = "\n".join(_flag_lines([proper, bound]))
    assert "Improper solution (Heywood case) at 2 factor(s)" in text and "Do not interpret these loadings" in text
    assert "RMSEA above 1 at 2 factor(s)" in text and "n = 40" in text
    assert _flag_lines([proper]) == []


def test_real_solutions_flagged():
    """Minres on small correlation matrices (as psych): two benchmarks correlated .98 and a third weakly give
    a one-factor Heywood case; two clusters of two forced onto one factor give an RMSEA above 1."""
    r = np.array([[1.0, 0.98, 0.3], [0.98, 1.0, 0.32], [0.3, 0.32, 1.0]])
    s = factor_solution(r, 1, "oblimin", 0.0, 200, ("a", "b", "c"))
    assert s.heywood and solution_flags(s) == ["Heywood: uniqueness at its bound for b"]
    r = np.array([[1, .9, .2, .1], [.9, 1, .3, .2], [.2, .3, 1, .95], [.1, .2, .95, 1.0]])
    one, two = (factor_solution(r, k, "oblimin", 0.0, 200, ("a", "b", "c", "d")) for k in (1, 2))
    assert [f.split(" ")[0] for f in solution_flags(one)] == ["RMSEA"] and one.fit.rmsea > 1
    assert solution_flags(two) == []


def _suite_clusters(tmp_path, r, names):
    """The factors folder's fit table as the report writes it, read back as the SAFE suite reads it."""
    from bayesirt.jobs.suite import read_structure
    from bayesirt.report.factors import _write_solutions

    tmp_path.mkdir()
    solutions = [factor_solution(r, k, "oblimin", 0.0, 170, names) for k in (1, 2)]
    eig = np.linspace(3.0, 0.1, len(names))  # parallel analysis retains two factors
    parallel = SimpleNamespace(observed_fa=eig, reference_fa=np.where(np.arange(len(names)) < 2, eig - 0.1, eig + 0.1),
                               observed_pc=eig, reference_pc=eig)
    _write_solutions(tmp_path, solutions, [], parallel, "")
    pd.DataFrame({"benchmark": names, "polarity": 1}).to_csv(tmp_path / "polarity.csv", index=False)
    return solutions[1], read_structure(tmp_path, list(names))[1]


def test_one_improper_rule_and_the_suite_builds_no_bank_from_it(tmp_path):
    """A cohort whose 2-factor oblimin solution has a loading of 1.016 with every uniqueness above its bound
    (the case the suite used to build a bank from): improper by the one rule, in the report, in
    ``fit_indices.csv`` and for the suite, which builds no latent-ability bank; a proper cohort gets its banks."""
    r = np.array([[1.0, 0.608, 0.432, 0.588, 0.572], [0.608, 1.0, 0.455, 0.886, 0.342],
                  [0.432, 0.455, 1.0, 0.473, 0.283], [0.588, 0.886, 0.473, 1.0, 0.3],
                  [0.572, 0.342, 0.283, 0.3, 1.0]])
    names = ("arc", "gsm8k", "mmlu", "truthfulqa", "winogrande")
    two, clusters = _suite_clusters(tmp_path / "improper", r, names)
    at_bound, over_one = improper_variables(two.loadings, two.uniquenesses)
    assert not at_bound.any() and over_one.tolist() == [False, False, False, True, False]
    assert two.heywood and solution_flags(two) == ["Heywood: a loading of 1 or more for truthfulqa"]
    assert pd.read_csv(tmp_path / "improper" / "fit_indices.csv")["heywood"].tolist() == [False, True]
    assert clusters == {}
    r = np.array([[1, .7, .2, .1], [.7, 1, .3, .2], [.2, .3, 1, .75], [.1, .2, .75, 1.0]])
    two, clusters = _suite_clusters(tmp_path / "proper", r, ("a", "b", "c", "d"))
    assert not two.heywood and len(clusters) == 2
