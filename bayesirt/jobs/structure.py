"""The ``bayesirt factors`` job: abilities per benchmark file (or an ability CSV), their factor structure
(:mod:`bayesirt.structure`) and the output folder (:mod:`bayesirt.report.factors`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bayesirt.errors import ConfigError, warn
from bayesirt.inference.methods import ADVI_ITERATIONS, CHAINS, DRAWS, TUNE
from bayesirt.models.settings import ROTATIONS
from bayesirt.safety.settings import STATIC_DESIGN, STATIC_DESIGNS
from bayesirt.structure.settings import ABILITY_ESTIMATES, ABILITY_METHODS, AUTO_POLARITY_THRESHOLD, COHORTS
from bayesirt.utils.options import comma_ints, declare, option, polarity_flags
from bayesirt.utils.outputs import check_output
from bayesirt.utils.parallel import spawn_seeds

__all__ = ["run_factors_job"]


def _no_single_resample(v: dict) -> str | None:
    if v["loading_bootstrap"] == 1:
        return "loading_bootstrap must be 0 (no intervals) or at least 2 resamples; got 1"
    return None


@declare(positional={"inputs": "one CSV of abilities (models x benchmarks), or three or more response data files"},
         check=_no_single_resample, renamed={"bootstrap": "loading_bootstrap"})
def run_factors_job(inputs: Sequence[str | os.PathLike], out: str | os.PathLike, *,
                    n_factors=option(None, "factor counts to fit [1-4, as far as the number of benchmarks identifies "
                                           "them]", type=tuple, parse=comma_ints, low=1),
                    rotation: str = option("oblimin", "rotation", choices=ROTATIONS),
                    gamma: float = option(0.0, "oblimin gamma (0: quartimin)", low=-1, high=1),
                    method: str = option("map", "ability estimates per benchmark: MAP-EM items (SAFE's regularized "
                                                "MML), or a 2PL posterior", choices=ABILITY_METHODS),
                    estimate: str = option("mode", "ability estimate of the MAP-EM fits: posterior mode (SAFE) or EAP",
                                           choices=ABILITY_ESTIMATES),
                    draws: int = DRAWS, tune: int = TUNE, chains: int = CHAINS,
                    advi_iterations: int = ADVI_ITERATIONS,
                    loading_bootstrap: int = option(500, "bootstrap resamples of the models for the loading intervals and the "
                                                 "polarity evidence (0: none)", low=0),
                    cohort: str = option("complete", "only models with every benchmark (SAFE), or every model on the "
                                                     "benchmark pairs it has (pairwise-complete correlations)",
                                         choices=COHORTS),
                    disattenuate: bool = option(False, "also the measurement-error-corrected analysis, reported beside "
                                                       "(response files only)"),
                    polarity=option(None, "declare a benchmark's polarity (NAME=-1 or NAME=1; repeatable), or auto: "
                                          "also reverse undeclared benchmarks whose general-loading interval lies "
                                          f"below {AUTO_POLARITY_THRESHOLD} [declared only]", type=object,
                                    parse=polarity_flags, repeat=True, metavar="NAME=-1|auto"),
                    parallel_iter: int = option(1000, "random data sets of the parallel analysis", low=1),
                    parallel_communalities: str = option("minres", "reduced-matrix diagonal of the parallel analysis "
                                                                   "(SAFE: minres)", choices=("minres", "smc")),
                    test_length: int = option(40, "items of each benchmark's static test for pair distinguishability "
                                                  "and ability-matched pairs (SAFE: 40)", low=1),
                    static_design: str = option(STATIC_DESIGN, "design of that static test (max_information: SAFE's)",
                                                choices=STATIC_DESIGNS),
                    seed: int = option(0, "random seed", low=0),
                    force: bool = False, progress: bool = True) -> Path:
    """The ``bayesirt factors`` job: factor structure of abilities, written to a folder.

    Parameters
    ----------
    inputs : sequence of path
        One CSV of abilities (:func:`read_abilities`), or at least 3 response data files (one per
        benchmark, named by file stem, read by :func:`bayesirt.data.io.load`), fitted by
        :func:`ability_matrix`.
    out : path
        Output folder, written atomically (:func:`bayesirt.utils.outputs.staged_output`).
    n_factors : int or sequence of int, optional
        Solutions to compute; each must leave >= 0 degrees of freedom. Default: 1 to
        :data:`MAX_FACTORS` (SAFE), those the number of benchmarks identifies (1-2 of 5 benchmarks).
    rotation, gamma : as in :func:`bayesirt.structure.factor.factor_analysis`
    method, estimate, draws, tune, chains, advi_iterations : as in :func:`ability_matrix`
        (default MAP-EM items and MAP abilities, SAFE). Used only with response files.
    loading_bootstrap : int, default 500
        Replicates of the bootstrap over models behind the loading intervals and the polarity
        evidence; 0 skips the intervals (then nothing is flagged and ``polarity="auto"`` is refused).
    cohort : {"complete", "pairwise"}, default "complete"
        Only the models observed on every benchmark (SAFE's cohort for the latent structure), or
        every model on the benchmark pairs it has (pairwise-complete correlations).
    disattenuate : bool, default False
        Also analyse the correlations corrected for each benchmark's measurement error (response
        files only; posterior means and sds), reported beside the raw analysis with both sets of fit
        indices, its own parallel analysis and bootstrap. The raw analysis stays the primary one
        (polarity, composite, ability clusters).
    polarity : mapping of str to int, or "auto", optional
        Declared polarity (+1 or -1) of benchmarks whose high score means less of the ability
        (e.g. ``{"orbench_hard": -1}``); only these are reversed by default. ``"auto"`` (or
        ``"auto": True`` in the mapping) also reverses undeclared benchmarks whose general-factor
        loading's bootstrap interval lies entirely below :data:`AUTO_POLARITY_THRESHOLD`.
    parallel_iter : int, default 1000
        Random data sets of the parallel analysis (SAFE: 1,000).
    parallel_communalities : {"minres", "smc"}, default "minres"
        Reduced-matrix diagonal of the parallel analysis (SAFE: minres-matched); the PCA variant is
        always reported beside it.
    test_length : int, default 40
        Response files with ``method="map"``: pair distinguishability (SAFE: 99.5% of pairs on at
        least one benchmark) on a ``test_length``-item static test per benchmark (design
        ``static_design``, :func:`bayesirt.safety.adaptive.static_test`), and
        the ability-matched pairs it cannot separate with their item disagreements (Fig. 5B).
    seed : int, default 0
        Seeds the fits, the bootstrap and the parallel analysis.
    force : bool, default False
        Replace an existing ``out``.
    progress : bool, default True

    Returns
    -------
    pathlib.Path
        ``out``, holding ``factors.nc``, ``fit_indices.csv``, ``loadings_<k>.csv``, ``phi_<k>.csv``
        (oblique, k >= 2), ``parallel.csv``, ``polarity.csv``, ``composite.csv``, ``alignment.csv``
        (Table 5), ``distinguishability.csv`` (response files: :func:`pair_distinguishability` on
        the ``test_length``-item tests, and on the full benchmarks), ``matched_pairs.csv``,
        with ``disattenuate`` also ``fit_indices_corrected.csv``, ``loadings_corrected_<k>.csv`` and
        ``parallel_corrected.csv``, ``report.md`` and ``factor_selection.png``. Benchmarks with a
        credibly negative, unreversed general loading are named in report.md and in a warning.
    """
    check_output(out, force=force)
    paths = [Path(p) for p in inputs]
    # import time: loaded when the job runs, not when the command line lists its options
    import xarray as xr
    from bayesirt.data.io import load  # import time, as above
    from bayesirt.report.factors import write_factors  # import time, as above
    from bayesirt.structure.ability_structure import (  # import time, as above
        ability_matrix, check_factor_counts, general_interval, read_abilities, retained_clusters,
        structure_analysis,
    )
    from bayesirt.structure.factor import correlation_matrix  # import time, as above
    from bayesirt.structure.pairs import ability_matched_pairs, pair_distinguishability  # import time, as above
    from bayesirt.structure.polarity import (  # import time, as above
        alignment_table, composite_scores, flagged_polarity, parse_polarity, polarity_table,
    )

    declared, auto = parse_polarity(polarity)
    if auto and not loading_bootstrap:
        raise ConfigError("polarity='auto' reverses only loadings whose bootstrap interval lies below "
              f"{AUTO_POLARITY_THRESHOLD}; set loading_bootstrap >= 2 or declare the polarity")
    fit_seed, parallel_seed, boot_seed = spawn_seeds(seed, 3)
    if len(paths) == 1:
        if disattenuate:
            raise ConfigError("disattenuate needs response files (the correction uses each ability's posterior sd); an ability "
                  "CSV is analysed as given")
        frame = read_abilities(paths[0])
        abilities = xr.Dataset({"ability": (("model", "benchmark"), frame.to_numpy())},
                               coords={"model": frame.index.to_numpy(), "benchmark": frame.columns.to_numpy()})
    else:
        names = [p.stem for p in paths]
        if len(set(names)) != len(names) or len(paths) < 3:
            raise ConfigError(f"response files must be at least 3, one per benchmark, with distinct file names; got {names}")
        check_factor_counts(n_factors, len(paths))  # before the fits
        datasets = {n: load(p) for n, p in zip(names, paths)}
        abilities = ability_matrix(datasets, method=method, estimate=estimate, draws=draws, tune=tune, chains=chains,
                                   advi_iterations=advi_iterations, seed=fit_seed, test_length=test_length,
                                   static_design=static_design,
                                   progress=progress)
    if cohort == "complete":
        complete = abilities["ability"].notnull().all("benchmark")
        abilities = abilities.isel(model=np.flatnonzero(complete.values))
    frame = abilities["ability"].to_pandas()
    counts = check_factor_counts(n_factors, frame.shape[1])
    common = dict(rotation=rotation, gamma=gamma, parallel_iter=parallel_iter,
                  parallel_communalities=parallel_communalities, parallel_seed=parallel_seed, bootstrap=loading_bootstrap,
                  boot_seed=boot_seed, progress=progress)
    _, solutions, parallel, intervals = structure_analysis(frame, None, counts, correct=False, **common)
    corrected_analysis = None
    if disattenuate:
        eap = abilities["eap"].to_pandas() if "eap" in abilities else frame
        eap_sd = (abilities["eap_sd"] if "eap_sd" in abilities else abilities["ability_sd"]).to_pandas()
        corrected_analysis = structure_analysis(eap, eap_sd, counts, correct=True, **common)
    general, interval = general_interval(solutions, intervals, frame, None, correct=False, replicates=loading_bootstrap,
                                          seed=boot_seed, progress=progress)
    polarities = polarity_table(general, declared, interval=interval, auto=auto)
    for line in flagged_polarity(polarities):
        warn(line, RuntimeWarning)
    composite = composite_scores(frame, polarities["polarity"])
    correlation = correlation_matrix(frame)[0]
    alignment = alignment_table(correlation, polarities["polarity"], retained_clusters(solutions, parallel))
    distinguished = matched = None
    if "ability_sd" in abilities:
        full = pair_distinguishability(frame, abilities["ability_sd"].to_pandas()).rename("full_benchmark")
        distinguished = full.to_frame()
        if "test_ability" in abilities:
            short, short_sd = abilities["test_ability"].to_pandas(), abilities["test_ability_sd"].to_pandas()
            distinguished.insert(0, f"test_{int(abilities.attrs['test_length'])}_items",
                                 pair_distinguishability(short, short_sd))
            matched = ability_matched_pairs(short, short_sd, datasets)
    settings = {"inputs": [str(p) for p in paths], "n_factors": counts, "rotation": rotation, "gamma": gamma,
                "seed": seed, "parallel_iter": parallel_iter, "parallel_communalities": parallel_communalities,
                "cohort": cohort, "bootstrap": loading_bootstrap, "disattenuate": disattenuate, "test_length": test_length,
                "static_design": static_design,
                "declared_polarity": declared, "auto_polarity": auto,
                "auto_polarity_threshold": AUTO_POLARITY_THRESHOLD}
    if len(paths) > 1:
        settings |= {"method": method, "estimate": estimate, "draws": draws, "tune": tune, "chains": chains,
                     "advi_iterations": advi_iterations}
    return write_factors(out, abilities=abilities, correlation=correlation, corrected=corrected_analysis,
                         solutions=solutions, parallel=parallel, intervals=intervals, polarity=polarities,
                         composite=composite, alignment=alignment, distinguished=distinguished, matched=matched,
                         settings=settings, force=force)
