"""The ``bayesirt factors`` job: abilities per benchmark file (or an ability CSV), their factor structure
(:mod:`bayesirt.structure`) and the output folder (:mod:`bayesirt.report.factors`)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import xarray as xr

from bayesirt.data.io import load
from bayesirt.errors import ConfigError
from bayesirt.models.rotation import ROTATIONS
from bayesirt.report.factors import write_factors
from bayesirt.structure.ability_structure import (
    ABILITY_METHODS,
    COHORTS,
    ability_matrix,
    check_factor_counts,
    composite_scores,
    pair_distinguishability,
    polarity_table,
    read_abilities,
)
from bayesirt.structure.factor import correlation_matrix, factor_analysis, parallel_analysis
from bayesirt.structure.reliability import bootstrap_factor_analysis, disattenuated_correlation
from bayesirt.utils.options import assignments, comma_ints, declare, option
from bayesirt.utils.outputs import check_output
from bayesirt.utils.parallel import spawn_seeds
from bayesirt.utils.validation import check_choice, check_int, parameter_error

__all__ = ["run_factors_job"]


@declare(positional={"inputs": "one CSV of abilities (models x benchmarks), or three or more response data files"})
def run_factors_job(inputs: Sequence[str | os.PathLike], out: str | os.PathLike, *,
                    n_factors=option(None, "factor counts to fit [1-4, as far as the number of benchmarks identifies "
                                           "them]", type=tuple, parse=comma_ints, low=1),
                    rotation: str = option("oblimin", "rotation", choices=ROTATIONS),
                    gamma: float = option(0.0, "oblimin gamma (0: quartimin)"),
                    method: str = option("map", "ability estimates per benchmark: MAP-EM items and EAP abilities "
                                                "(SAFE's regularized MML), or a 2PL posterior", choices=ABILITY_METHODS),
                    draws: int = option(1000, "draws per chain of the posterior methods", low=1),
                    tune: int = option(1000, "tuning steps per chain (nuts)", low=1),
                    chains: int = option(4, "chains (nuts)", low=1),
                    advi_iterations: int = option(50_000, "ADVI iteration cap", low=1),
                    bootstrap: int = option(500, "bootstrap resamples of the models for the loading intervals "
                                                 "(response files; 0: none)", low=0),
                    cohort: str = option("pairwise", "every model on the benchmark pairs it has, or only models with "
                                                     "every benchmark", choices=COHORTS),
                    polarity: Mapping[str, int] | None = option(None, "declare a benchmark's polarity (+1 or -1; "
                                                                      "repeatable); others are detected", type=dict,
                                                                parse=assignments, repeat=True,
                                                                metavar="BENCHMARK=-1"),
                    parallel_iter: int = option(1000, "random data sets of the parallel analysis", low=1),
                    parallel_communalities: str = option("minres", "reduced-matrix diagonal of the parallel analysis "
                                                                   "(SAFE: minres)", choices=("minres", "smc")),
                    seed: int = option(0, "random seed", low=0),
                    force: bool = False, progress: bool = True) -> Path:
    """The ``bayesirt factors`` job: factor structure of abilities, written to a folder.

    Parameters
    ----------
    inputs : sequence of path
        One CSV of abilities (:func:`read_abilities`; analysed as given, without error correction),
        or at least 3 response data files (one per benchmark, named by file stem, read by
        :func:`bayesirt.data.io.load`), fitted by :func:`ability_matrix`: then the correlations
        are corrected for each benchmark's measurement error and the solutions get bootstrap
        intervals (:mod:`bayesirt.structure.reliability`).
    out : path
        Output folder, written atomically (:func:`bayesirt.utils.outputs.staged_output`).
    n_factors : int or sequence of int, optional
        Solutions to compute; each must leave >= 0 degrees of freedom. Default: 1 to
        :data:`MAX_FACTORS` (SAFE), those the number of benchmarks identifies (1-2 of 5 benchmarks).
    rotation, gamma : as in :func:`bayesirt.structure.factor.factor_analysis`
    method, draws, tune, chains, advi_iterations : as in :func:`ability_matrix` (default MAP-EM)
        Used only with response files.
    bootstrap : int, default 500
        Replicates of the bootstrap over models (response files only); 0 skips the intervals.
    cohort : {"pairwise", "complete"}, default "pairwise"
        Every model on the benchmark pairs it has (pairwise-complete correlations), or only the
        models observed on every benchmark (SAFE's complete-case cohort).
    polarity : mapping of str to int, optional
        Declared polarity (+1 or -1) of benchmarks whose high score means less of the ability
        (e.g. ``{"orbench_hard": -1}``); the others' polarity is detected from the general factor.
    parallel_iter : int, default 1000
        Random data sets of the parallel analysis (SAFE: 1,000).
    parallel_communalities : {"minres", "smc"}, default "minres"
        Reduced-matrix diagonal of the parallel analysis (SAFE: minres-matched); the PCA variant is
        always reported beside it.
    seed : int, default 0
        Seeds the fits, the bootstrap and the parallel analysis.
    force : bool, default False
        Replace an existing ``out``.
    progress : bool, default True

    Returns
    -------
    pathlib.Path
        ``out``, holding ``factors.nc``, ``fit_indices.csv``, ``loadings_<k>.csv``, ``phi_<k>.csv``
        (oblique, k >= 2), ``parallel.csv``, ``polarity.csv``, ``composite.csv``,
        ``distinguishability.csv`` (response files: :func:`pair_distinguishability`), ``report.md``
        and ``factor_selection.png``.
    """

    check_output(out, force=force)
    paths = [Path(p) for p in inputs]
    check_choice(rotation, ROTATIONS, name="rotation", caller="run_factors_job")
    check_choice(cohort, COHORTS, name="cohort", caller="run_factors_job")
    if check_int(bootstrap, name="bootstrap", caller="run_factors_job", low=0) == 1:
        raise parameter_error("bootstrap", "run_factors_job", "0 (no intervals) or an integer >= 2", bootstrap)
    fit_seed, parallel_seed, boot_seed = spawn_seeds(seed, 3)
    if len(paths) == 1:
        frame = read_abilities(paths[0])
        abilities = xr.Dataset({"ability": (("model", "benchmark"), frame.to_numpy())},
                               coords={"model": frame.index.to_numpy(), "benchmark": frame.columns.to_numpy()})
    else:
        names = [p.stem for p in paths]
        if len(set(names)) != len(names) or len(paths) < 3:
            raise ConfigError(f"response files must be at least 3, one per benchmark, with distinct file names; got "
                              f"{names}")
        check_factor_counts(n_factors, len(paths))  # before the fits
        abilities = ability_matrix({n: load(p) for n, p in zip(names, paths)}, method=method, draws=draws, tune=tune,
                                   chains=chains, advi_iterations=advi_iterations, seed=fit_seed, progress=progress)
    if cohort == "complete":
        complete = abilities["ability"].notnull().all("benchmark")
        abilities = abilities.isel(model=np.flatnonzero(complete.values))
    frame = abilities["ability"].to_pandas()
    counts = check_factor_counts(n_factors, frame.shape[1])
    corrected = None
    if "ability_sd" in abilities:
        corrected = disattenuated_correlation(frame, abilities["ability_sd"].to_pandas())
        solutions = [factor_analysis(corrected.corrected, k, correlation=True, n_obs=corrected.n_obs,
                                     rotation=rotation, gamma=gamma) for k in counts]
    else:
        solutions = [factor_analysis(frame, k, rotation=rotation, gamma=gamma) for k in counts]
    parallel = parallel_analysis(frame, n_iter=parallel_iter, seed=parallel_seed,
                                 communalities=parallel_communalities)
    general = next((s for s in solutions if s.n_factors == 1), None) or factor_analysis(
        corrected.corrected if corrected else frame, 1, correlation=corrected is not None,
        n_obs=corrected.n_obs if corrected else None)
    polarities = polarity_table(general, polarity)
    composite = composite_scores(frame, polarities["polarity"])
    distinguished = (pair_distinguishability(frame, abilities["ability_sd"].to_pandas())
                     if "ability_sd" in abilities else None)
    intervals = ([bootstrap_factor_analysis(frame, abilities["ability_sd"].to_pandas(), s, replicates=bootstrap,
                                            seed=boot_seed, progress=progress) for s in solutions]
                 if corrected is not None and bootstrap else [])
    settings = {"inputs": [str(p) for p in paths], "n_factors": counts, "rotation": rotation, "gamma": gamma,
                "seed": seed, "parallel_iter": parallel_iter, "parallel_communalities": parallel_communalities,
                "cohort": cohort, "bootstrap": bootstrap if corrected is not None else 0,
                "declared_polarity": dict(polarity or {})}
    if corrected is not None:
        settings |= {"method": method, "draws": draws, "tune": tune, "chains": chains,
                     "advi_iterations": advi_iterations}
    return write_factors(out, abilities=abilities, correlation=correlation_matrix(frame)[0], corrected=corrected,
                         solutions=solutions, parallel=parallel, intervals=intervals, polarity=polarities,
                         composite=composite, distinguished=distinguished, settings=settings, force=force)
