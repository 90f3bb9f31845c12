"""Factor structure of fitted abilities: SAFE's two-stage design ("Latent Ability Inference", App. D).

A 2PL is fitted to each benchmark separately (by regularized marginal ML, MAP-EM under the 2PL
spec's priors, with MAP abilities: SAFE's "posterior mode of theta under a standard-normal prior";
or ADVI/NUTS posterior means); the abilities are joined on model id into a (models x benchmarks)
matrix. By default, as SAFE, the factor structure (:func:`bayesirt.structure.factor.factor_analysis`),
Horn's parallel analysis and the bootstrap intervals (over models) all use the raw correlation matrix
of the abilities of the *complete cohort* (models with every benchmark). On request
(``disattenuate``) the same analysis is repeated on the correlations corrected for each benchmark's
measurement error (:mod:`bayesirt.structure.reliability`) and reported beside it.

Polarity (SAFE App. D, OR-Bench-Hard): only declared benchmarks are reversed by default. Each
benchmark's loading on the general (one-factor) solution is reported with its bootstrap interval;
a loading whose interval lies below 0 is flagged ("declare polarity NAME=-1 to reverse"), and only
``polarity="auto"`` reverses, and only benchmarks whose interval lies entirely below
:data:`AUTO_POLARITY_THRESHOLD`. Composites are sign-aligned by the resulting polarity, and
:func:`composite_alignment` checks that a composite's members point the same way (Table 5).
:func:`run_factors_job` is the ``bayesirt factors`` job.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.data.responses import informative_items
from bayesirt.errors import BayesIRTError, DataError
from bayesirt.structure.factor import check_n_factors, correlation_matrix, factor_analysis, parallel_analysis
from bayesirt.structure.pairs import DISTINGUISH_Z, ability_matched_pairs, pair_distinguishability  # noqa: F401
from bayesirt.structure.polarity import (  # noqa: F401 (re-exported: the polarity API lived here)
    AUTO_POLARITY_THRESHOLD, CompositeAlignment, alignment_table, composite_alignment, composite_scores,
    flagged_polarity, loading_clusters, parse_polarity, polarity_table,
)
from bayesirt.structure.reliability import bootstrap_factor_analysis, disattenuated_correlation
from bayesirt.utils.parallel import spawn_seeds
from bayesirt.structure.rotation import ROTATIONS

__all__ = ["read_abilities", "ability_matrix", "polarity_table", "composite_scores", "pair_distinguishability",
           "run_factors_job", "CompositeAlignment", "alignment_table", "parse_polarity", "ability_matched_pairs",
           "composite_alignment", "ABILITY_METHODS", "ABILITY_ESTIMATES", "COHORTS", "AUTO_POLARITY_THRESHOLD"]

#: How each benchmark's abilities are estimated: MAP-EM with EAP abilities (SAFE), or a posterior mean.
ABILITY_METHODS = ("map", "advi", "fullrank_advi", "nuts")
#: Models analysed: every model on the pairs of benchmarks it has, or only models with every benchmark.
COHORTS = ("pairwise", "complete")
#: Ability estimate of the MAP-EM fits: posterior mode (SAFE) or posterior mean (EAP).
ABILITY_ESTIMATES = ("mode", "eap")

def _fail(message: str) -> NoReturn:
    raise BayesIRTError(message)


def read_abilities(path) -> pd.DataFrame:
    """Read a (models x benchmarks) ability CSV: model id in the first column, one numeric column per
    benchmark (empty cells are missing). Raises :class:`~bayesirt.errors.DataError` naming the file."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"no such file: {path}; check the path")
    try:
        frame = pd.read_csv(path, index_col=0)
    except (ValueError, OSError, UnicodeError) as exc:
        raise DataError(f"cannot read {path} ({type(exc).__name__}); pass a CSV with the model id in the first "
                        "column and one ability column per benchmark") from None
    bad = [str(c) for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    if bad or frame.index.has_duplicates:
        raise DataError(f"{path}: " + (f"column(s) {bad} are not numeric; keep only ability columns after the model id"
                                      if bad else "model ids in the first column repeat; give each model one row"))
    frame.index = pd.Index(frame.index.astype(str), name="model")
    frame.columns = pd.Index([str(c) for c in frame.columns], name="benchmark")
    return frame.astype(float)


def ability_matrix(datasets: Mapping[str, xr.Dataset], *, method: str = "map", estimate: str = "mode",
                   draws: int = 1000, tune: int = 1000, chains: int = 4, advi_iterations: int = 50_000, seed: int = 0,
                   test_length: int | None = None, progress: bool = True) -> xr.Dataset:
    """Fit a 2PL to each benchmark and join the abilities on model id (SAFE's two-stage design).

    Items without variance (every observed model right, or every one wrong) are removed before the
    fit and listed in the attribute ``dropped_items``.

    Parameters
    ----------
    datasets : mapping of str to xarray.Dataset
        Response Datasets (:func:`bayesirt.data.io.load`) keyed by benchmark name; at least 3.
    method : {"map", "advi", "fullrank_advi", "nuts"}, default "map"
        ``"map"``: the items' marginal MAP under the 2PL spec's priors
        (:func:`bayesirt.frequentist.mml.fit_mml` with ``priors=True``: SAFE's regularized MML) with
        the abilities of ``estimate``; otherwise the posterior mean and sd of theta
        from :func:`bayesirt.inference.fitting.fit` (``draws``, ``tune``, ``chains``,
        ``advi_iterations`` as there).
    estimate : {"mode", "eap"}, default "mode"
        With ``method="map"``: ``ability`` is the posterior mode (MAP, SAFE) with its standard error,
        or the EAP with its posterior sd.
    test_length : int, optional
        With ``method="map"``: also each model's MAP ability and standard error from the
        ``test_length``-item maximum-information static test of each benchmark (all its items when
        it has fewer): ``test_ability``, ``test_ability_sd`` (SAFE's 40-item test).
    seed : int, default 0
        Seeds the fits (one child seed per benchmark).
    progress : bool, default True

    Returns
    -------
    xarray.Dataset
        ``ability`` and ``ability_sd`` (model, benchmark): the ``estimate`` or posterior mean, and its
        sd; ``eap`` and ``eap_sd``: posterior means and sds (what the measurement-error correction needs);
        attributes ``fits`` (convergence per benchmark, JSON) and ``dropped_items`` (JSON). Models
        missing from a benchmark are NaN.
    """
    if len(datasets) < 3:
        _fail(f"factor analysis needs at least 3 benchmarks; got {len(datasets)}; pass more response datasets")
    if method not in ABILITY_METHODS:
        _fail(f"The 'method' parameter of ability_matrix must be one of {set(ABILITY_METHODS)}. Got {method!r} instead.")
    if estimate not in ABILITY_ESTIMATES:
        _fail(f"The 'estimate' parameter of ability_matrix must be one of {set(ABILITY_ESTIMATES)}. Got {estimate!r} "
              "instead.")
    seeds = spawn_seeds(seed, len(datasets))
    columns, fits, dropped, tests = {}, {}, {}, {}
    for (name, responses), child in zip(datasets.items(), seeds):
        name = str(name)
        responses, dropped[name] = informative_items(responses)
        if method == "map":
            from bayesirt.frequentist.mml import fit_mml

            result = fit_mml(responses, "2pl", priors=True, se=False)
            eap, eap_sd = result.abilities["eap"], result.abilities["eap_sd"]
            mean, sd = (result.abilities["map"], result.abilities["map_se"]) if estimate == "mode" else (eap, eap_sd)
            if test_length:
                from bayesirt.safety.adaptive import score_test, static_test

                a, d = result.items["discrimination"].values, result.items["intercept"].values
                chosen = static_test(a, d, result.abilities["map"].values, min(int(test_length), a.size))
                short = score_test(responses["responses"].values, a, d, chosen, method="map")
                tests[name] = [pd.Series(v, index=result.abilities["model"].values.astype(str))
                               for v in (short.theta, short.sd)]
            fits[name] = {"converged": int(result.converged), "iterations": int(result.iterations)}
        else:
            from bayesirt.inference.fitting import fit  # PyMC is imported only for posterior abilities

            tree = fit(responses, "2pl", method=method, draws=draws, tune=tune, chains=chains,
                       advi_iterations=advi_iterations, seed=child, progress=progress)
            theta = tree["posterior"]["theta"]
            mean, sd = theta.mean(("chain", "draw")), theta.std(("chain", "draw"), ddof=1)
            eap, eap_sd = mean, sd
            fits[name] = {k: int(v) for k, v in tree.attrs.items() if k in ("advi_converged", "advi_iterations_run")}
        columns[name] = [pd.Series(v.values, index=v["model"].values.astype(str)) for v in (mean, sd, eap, eap_sd)]
    models = pd.Index(pd.unique(np.concatenate([c[0].index.to_numpy() for c in columns.values()])))
    dims = ("model", "benchmark")
    data = {var: (dims, pd.DataFrame({n: c[k].reindex(models) for n, c in columns.items()}).to_numpy())
            for k, var in enumerate(("ability", "ability_sd", "eap", "eap_sd"))}
    if tests and len(tests) == len(columns):
        data |= {var: (dims, pd.DataFrame({n: c[k].reindex(models) for n, c in tests.items()}).to_numpy())
                 for k, var in enumerate(("test_ability", "test_ability_sd"))}
    return xr.Dataset(data, coords={"model": models.to_numpy(), "benchmark": list(columns)},
                      attrs={"method": method, "estimate": estimate if method == "map" else "posterior mean",
                             "test_length": int(test_length) if tests else 0,
                             "irt_spec": "2pl", "seed": seed, "fits": json.dumps(fits),
                             "dropped_items": json.dumps(dropped)})


#: Factor counts fitted by default (SAFE: 1-4), as far as the number of benchmarks identifies them.
MAX_FACTORS = 4


def _check_factor_counts(n_factors, p: int) -> list[int]:
    if n_factors is None:
        return [k for k in range(1, MAX_FACTORS + 1) if (p - k) ** 2 >= p + k]  # dof >= 0
    counts = [n_factors] if isinstance(n_factors, (int, np.integer)) else list(n_factors)
    if not counts or len(set(counts)) != len(counts):
        _fail(f"n_factors must be distinct positive integers, e.g. (1, 2, 3); got {n_factors!r}")
    return sorted(check_n_factors(p, k) for k in counts)


def _general_interval(solutions, intervals, frame, sd, *, correct, replicates, seed, progress):
    """The one-factor solution and the bootstrap interval of its loadings (None without bootstrap)."""
    general = next((s for s in solutions if s.n_factors == 1), None)
    boot = next((b for b in intervals if b.attrs["n_factors"] == 1), None)
    if general is None:
        if correct:
            r = disattenuated_correlation(frame, sd)
            general = factor_analysis(r.corrected, 1, correlation=True, n_obs=r.n_obs)
        else:
            general = factor_analysis(frame, 1)
    if boot is None and replicates:
        boot = bootstrap_factor_analysis(frame, sd, general, replicates=replicates, seed=seed, correct=correct,
                                         progress=progress)
    interval = None if boot is None else (boot["loadings_lower"].sel(factor="F1").to_numpy(),
                                           boot["loadings_upper"].sel(factor="F1").to_numpy())
    return general, interval


def _analysis(frame, sd, counts, *, correct, rotation, gamma, parallel_iter, parallel_communalities, parallel_seed,
              bootstrap, boot_seed, progress):
    """Solutions, parallel analysis and bootstrap intervals on one matrix: the raw ability correlations,
    or (``correct``) the disattenuated ones. Returns (corrected or None, solutions, parallel, intervals)."""
    if correct:
        corrected = disattenuated_correlation(frame, sd)
        matrix, kw = corrected.corrected, {"correlation": True, "n_obs": corrected.n_obs}
    else:
        corrected, matrix, kw = None, frame, {}
    solutions = [factor_analysis(matrix, k, rotation=rotation, gamma=gamma, **kw) for k in counts]
    parallel = parallel_analysis(matrix, n_iter=parallel_iter, seed=parallel_seed,
                                 communalities=parallel_communalities, **kw)
    intervals = [bootstrap_factor_analysis(frame, sd, s, replicates=bootstrap, seed=boot_seed, correct=correct,
                                           progress=progress) for s in solutions] if bootstrap else []
    return corrected, solutions, parallel, intervals


def retained_clusters(solutions, parallel) -> dict[str, dict[str, int]]:
    """Latent-ability clusters of the largest proper solution with at most as many factors as parallel
    analysis retains (as :func:`bayesirt.safety.scopes.read_structure` reads them from a folder)."""
    proper = [s for s in solutions if not s.heywood and s.n_factors <= parallel.n_factors]
    if not proper or max(s.n_factors for s in proper) < 2:
        return {}
    best = max(proper, key=lambda s: s.n_factors)
    return loading_clusters(pd.DataFrame(best.loadings, index=list(best.variables)))


def run_factors_job(inputs: Sequence[str | os.PathLike], out: str | os.PathLike, *, n_factors=None,
                    rotation: str = "oblimin", gamma: float = 0.0, method: str = "map", estimate: str = "mode",
                    draws: int = 1000, tune: int = 1000, chains: int = 4, advi_iterations: int = 50_000,
                    bootstrap: int = 500, cohort: str = "complete", disattenuate: bool = False,
                    polarity: Mapping[str, int] | str | None = None, parallel_iter: int = 1000,
                    parallel_communalities: str = "minres", test_length: int = 40, seed: int = 0,
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
    bootstrap : int, default 500
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
        least one benchmark) on a ``test_length``-item maximum-information test per benchmark, and
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
    import warnings

    from bayesirt.data.io import load
    from bayesirt.utils.outputs import check_output
    from bayesirt.report.factors import write_factors

    check_output(out, force=force)
    paths = [Path(p) for p in inputs]
    if rotation not in ROTATIONS:
        _fail(f"The 'rotation' parameter of run_factors_job must be one of {set(ROTATIONS)}. Got {rotation!r} instead.")
    if cohort not in COHORTS:
        _fail(f"The 'cohort' parameter of run_factors_job must be one of {set(COHORTS)}. Got {cohort!r} instead.")
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, (int, np.integer)) or bootstrap == 1 or bootstrap < 0:
        _fail(f"bootstrap must be 0 (no intervals) or an integer >= 2; got {bootstrap!r}")
    declared, auto = parse_polarity(polarity)
    if auto and not bootstrap:
        _fail("polarity='auto' reverses only loadings whose bootstrap interval lies below "
              f"{AUTO_POLARITY_THRESHOLD}; set bootstrap >= 2 or declare the polarity")
    fit_seed, parallel_seed, boot_seed = spawn_seeds(seed, 3)
    if len(paths) == 1:
        if disattenuate:
            _fail("disattenuate needs response files (the correction uses each ability's posterior sd); an ability "
                  "CSV is analysed as given")
        frame = read_abilities(paths[0])
        abilities = xr.Dataset({"ability": (("model", "benchmark"), frame.to_numpy())},
                               coords={"model": frame.index.to_numpy(), "benchmark": frame.columns.to_numpy()})
    else:
        names = [p.stem for p in paths]
        if len(set(names)) != len(names) or len(paths) < 3:
            _fail(f"response files must be at least 3, one per benchmark, with distinct file names; got {names}")
        _check_factor_counts(n_factors, len(paths))  # before the fits
        if isinstance(test_length, bool) or not isinstance(test_length, (int, np.integer)) or test_length < 1:
            _fail(f"test_length must be a positive integer (SAFE: 40); got {test_length!r}")
        datasets = {n: load(p) for n, p in zip(names, paths)}
        abilities = ability_matrix(datasets, method=method, estimate=estimate, draws=draws, tune=tune, chains=chains,
                                   advi_iterations=advi_iterations, seed=fit_seed, test_length=test_length,
                                   progress=progress)
    if cohort == "complete":
        complete = abilities["ability"].notnull().all("benchmark")
        abilities = abilities.isel(model=np.flatnonzero(complete.values))
    frame = abilities["ability"].to_pandas()
    counts = _check_factor_counts(n_factors, frame.shape[1])
    common = dict(rotation=rotation, gamma=gamma, parallel_iter=parallel_iter,
                  parallel_communalities=parallel_communalities, parallel_seed=parallel_seed, bootstrap=bootstrap,
                  boot_seed=boot_seed, progress=progress)
    _, solutions, parallel, intervals = _analysis(frame, None, counts, correct=False, **common)
    corrected_analysis = None
    if disattenuate:
        eap = abilities["eap"].to_pandas() if "eap" in abilities else frame
        eap_sd = (abilities["eap_sd"] if "eap_sd" in abilities else abilities["ability_sd"]).to_pandas()
        corrected_analysis = _analysis(eap, eap_sd, counts, correct=True, **common)
    general, interval = _general_interval(solutions, intervals, frame, None, correct=False, replicates=bootstrap,
                                          seed=boot_seed, progress=progress)
    polarities = polarity_table(general, declared, interval=interval, auto=auto)
    for line in flagged_polarity(polarities):
        warnings.warn(line, RuntimeWarning, stacklevel=2)
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
                "cohort": cohort, "bootstrap": bootstrap, "disattenuate": disattenuate, "test_length": test_length,
                "declared_polarity": declared, "auto_polarity": auto,
                "auto_polarity_threshold": AUTO_POLARITY_THRESHOLD}
    if len(paths) > 1:
        settings |= {"method": method, "estimate": estimate, "draws": draws, "tune": tune, "chains": chains,
                     "advi_iterations": advi_iterations}
    return write_factors(out, abilities=abilities, correlation=correlation, corrected=corrected_analysis,
                         solutions=solutions, parallel=parallel, intervals=intervals, polarity=polarities,
                         composite=composite, alignment=alignment, distinguished=distinguished, matched=matched,
                         settings=settings, force=force)
