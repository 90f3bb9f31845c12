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
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.data.responses import informative_items
from bayesirt.errors import ConfigError, DataError
from bayesirt.frequentist.mml import fit_mml
from bayesirt.safety.adaptive import score_test, static_test
from bayesirt.safety.settings import STATIC_DESIGN
from bayesirt.structure.factor import check_n_factors, factor_analysis, parallel_analysis
from bayesirt.structure.pairs import DISTINGUISH_Z, ability_matched_pairs, pair_distinguishability  # noqa: F401
from bayesirt.structure.polarity import (  # noqa: F401 (re-exported: the polarity API lived here)
    AUTO_POLARITY_THRESHOLD,
    CompositeAlignment,
    alignment_table,
    composite_alignment,
    composite_scores,
    flagged_polarity,
    loading_clusters,
    parse_polarity,
    polarity_table,
)
from bayesirt.structure.reliability import bootstrap_factor_analysis, disattenuated_correlation
from bayesirt.structure.settings import ABILITY_ESTIMATES, ABILITY_METHODS, COHORTS
from bayesirt.utils.parallel import spawn_seeds
from bayesirt.utils.validation import check_choice, parameter_error

__all__ = ["read_abilities", "ability_matrix", "polarity_table", "composite_scores", "pair_distinguishability",
           "check_factor_counts", "general_interval", "structure_analysis", "retained_clusters", "CompositeAlignment", "alignment_table", "parse_polarity", "ability_matched_pairs",
           "composite_alignment", "ABILITY_METHODS", "ABILITY_ESTIMATES", "COHORTS", "AUTO_POLARITY_THRESHOLD"]


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
                   test_length: int | None = None, static_design: str = STATIC_DESIGN,
                   progress: bool = True) -> xr.Dataset:
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
        ``test_length``-item static test of each benchmark (design ``static_design``, default
        :data:`~bayesirt.safety.settings.STATIC_DESIGN`;
        :func:`bayesirt.safety.adaptive.static_test`) (all its items when
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
        raise ConfigError(f"factor analysis needs at least 3 benchmarks; got {len(datasets)}; pass more response "
                          "datasets")
    check_choice(method, ABILITY_METHODS, name="method", caller="ability_matrix")
    check_choice(estimate, ABILITY_ESTIMATES, name="estimate", caller="ability_matrix")
    seeds = spawn_seeds(seed, len(datasets))
    columns, fits, dropped, tests = {}, {}, {}, {}
    for (name, responses), child in zip(datasets.items(), seeds):
        name = str(name)
        responses, dropped[name] = informative_items(responses)
        if method == "map":
            result = fit_mml(responses, "2pl", priors=True, se=False)
            eap, eap_sd = result.abilities["eap"], result.abilities["eap_sd"]
            mean, sd = (result.abilities["map"], result.abilities["map_se"]) if estimate == "mode" else (eap, eap_sd)
            if test_length:
                a, d = result.items["discrimination"].values, result.items["intercept"].values
                chosen = static_test(a, d, result.abilities["map"].values, min(int(test_length), a.size),
                                     design=static_design)
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
                             "test_length": int(test_length) if tests else 0, "static_design": static_design,
                             "irt_spec": "2pl", "seed": seed, "fits": json.dumps(fits),
                             "dropped_items": json.dumps(dropped)})


#: Factor counts fitted by default (SAFE: 1-4), as far as the number of benchmarks identifies them.
MAX_FACTORS = 4


def check_factor_counts(n_factors, p: int) -> list[int]:
    if n_factors is None:
        return [k for k in range(1, MAX_FACTORS + 1) if (p - k) ** 2 >= p + k]  # dof >= 0
    counts = [n_factors] if isinstance(n_factors, (int, np.integer)) else list(n_factors)
    if not counts or len(set(counts)) != len(counts):
        raise parameter_error("n_factors", "run_factors_job", "distinct positive integers, e.g. (1, 2, 3)", n_factors)
    return sorted(check_n_factors(p, k) for k in counts)


def general_interval(solutions, intervals, frame, sd, *, correct, replicates, seed, progress):
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


def structure_analysis(frame, sd, counts, *, correct, rotation, gamma, parallel_iter, parallel_communalities, parallel_seed,
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
    analysis retains (as :func:`bayesirt.jobs.suite.read_structure` reads them from a folder)."""
    proper = [s for s in solutions if not s.heywood and s.n_factors <= parallel.n_factors]
    if not proper or max(s.n_factors for s in proper) < 2:
        return {}
    best = max(proper, key=lambda s: s.n_factors)
    return loading_clusters(pd.DataFrame(best.loadings, index=list(best.variables)))
