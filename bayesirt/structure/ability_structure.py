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
from dataclasses import dataclass
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
#: ``polarity="auto"`` reverses a benchmark only when the whole bootstrap interval of its
#: general-factor loading lies below this value (a loading of |0.3| is the conventional smallest
#: salient loading; OR-Bench-Hard's in SAFE is about -0.64 to -0.77). Weakly negative benchmarks
#: (SAFE's TruthfulQA-like cases) are flagged but never reversed automatically.
AUTO_POLARITY_THRESHOLD = -0.3


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


def parse_polarity(polarity) -> tuple[dict[str, int], bool]:
    """``(declared, auto)`` from a job's ``polarity`` option: None, ``"auto"``, or a mapping of
    benchmark -> +1/-1 that may also hold ``"auto": true`` (declared benchmarks, the others automatic)."""
    if polarity is None:
        return {}, False
    if isinstance(polarity, str):
        if polarity != "auto":
            _fail(f"polarity must be 'auto' or a mapping of benchmark names to 1 or -1 (e.g. orbench_hard=-1); "
                  f"got {polarity!r}")
        return {}, True
    if not isinstance(polarity, Mapping):
        _fail(f"polarity must be 'auto' or a mapping of benchmark names to 1 or -1; got {polarity!r}")
    declared = {str(k): v for k, v in polarity.items() if str(k) != "auto"}
    auto = polarity.get("auto", False)
    if not isinstance(auto, bool):
        _fail(f"polarity 'auto' must be true or false; got {auto!r}")
    return declared, auto


def polarity_table(solution, declared: Mapping[str, int] | None = None, *, interval=None, auto: bool = False,
                   threshold: float = AUTO_POLARITY_THRESHOLD) -> pd.DataFrame:
    """Each benchmark's polarity and the evidence for it (module docstring).

    Parameters
    ----------
    solution : FactorSolution
        The one-factor (general) solution; reflected so that most benchmarks load positively.
    declared : mapping of str to int, optional
        Declared polarity (+1/-1) of benchmarks; the others are +1 unless ``auto``.
    interval : (lower, upper) arrays, optional
        Bootstrap interval of each general loading, in ``solution``'s orientation; without it no
        loading counts as credibly negative and ``auto`` is refused.
    auto : bool, default False
        Reverse the undeclared benchmarks whose interval lies entirely below ``threshold``.
    threshold : float, default :data:`AUTO_POLARITY_THRESHOLD`

    Returns
    -------
    pandas.DataFrame
        Indexed by benchmark: ``general_loading``, ``lower``, ``upper``, ``credibly_negative``
        (upper < 0), ``auto_reversible`` (upper < threshold), ``declared`` (+1/-1, or 0),
        ``polarity`` (declared, else -1 when auto and auto_reversible, else +1), ``source``
        (declared/auto/default) and ``agree`` (False when a declaration contradicts the data: the
        interval, or without one the point estimate, on the other side of 0).
    """
    declared = {str(k): v for k, v in (declared or {}).items()}
    names = list(solution.variables)
    unknown = sorted(set(declared) - set(names))
    if unknown or any(v not in (1, -1) for v in declared.values()):
        _fail(f"polarity must map benchmarks of {names} to 1 or -1; got {declared} (unknown: {unknown})")
    sign = 1.0 if np.sum(solution.loadings[:, 0] > 0) * 2 >= len(names) else -1.0
    loading = solution.loadings[:, 0] * sign
    if interval is None:
        if auto:
            _fail("polarity='auto' reverses only loadings whose bootstrap interval lies below "
                  f"{threshold}; it needs the bootstrap (bootstrap >= 2), or declare the polarity")
        lower = upper = np.full(len(names), np.nan)
    else:
        lower, upper = (np.asarray(b, dtype=float) * sign for b in interval)
        lower, upper = np.minimum(lower, upper), np.maximum(lower, upper)
    table = pd.DataFrame({"general_loading": loading, "lower": lower, "upper": upper,
                          "credibly_negative": upper < 0, "auto_reversible": upper < threshold,
                          "declared": [declared.get(n, 0) for n in names]}, index=pd.Index(names, name="benchmark"))
    automatic = auto & table["auto_reversible"] & (table["declared"] == 0)
    table["polarity"] = np.where(table["declared"] != 0, table["declared"], np.where(automatic, -1, 1))
    table["source"] = np.where(table["declared"] != 0, "declared", np.where(automatic, "auto", "default"))
    if interval is None:
        against = ((table["declared"] == -1) & (loading > 0)) | ((table["declared"] == 1) & (loading < 0))
    else:
        against = ((table["declared"] == -1) & (lower > 0)) | ((table["declared"] == 1) & (upper < 0))
    table["agree"] = ~against
    return table


def flagged_polarity(table: pd.DataFrame) -> list[str]:
    """Console/report lines for benchmarks with a credibly negative general loading that are not reversed."""
    lines = []
    for name, row in table.iterrows():
        if row["credibly_negative"] and row["polarity"] == 1:
            lines.append(f"{name}: general-factor loading {row['general_loading']:.2f} "
                         f"[{row['lower']:.2f}, {row['upper']:.2f}] is credibly negative; if it measures the "
                         f"ability reversed (as OR-Bench-Hard in SAFE), declare --polarity {name}=-1 to reverse"
                         + (f" (polarity auto would reverse it: the interval lies below {AUTO_POLARITY_THRESHOLD})"
                            if row["auto_reversible"] else ""))
    return lines


#: Factor counts fitted by default (SAFE: 1-4), as far as the number of benchmarks identifies them.
MAX_FACTORS = 4


def _check_factor_counts(n_factors, p: int) -> list[int]:
    if n_factors is None:
        return [k for k in range(1, MAX_FACTORS + 1) if (p - k) ** 2 >= p + k]  # dof >= 0
    counts = [n_factors] if isinstance(n_factors, (int, np.integer)) else list(n_factors)
    if not counts or len(set(counts)) != len(counts):
        _fail(f"n_factors must be distinct positive integers, e.g. (1, 2, 3); got {n_factors!r}")
    return sorted(check_n_factors(p, k) for k in counts)


#: Two-sided normal quantile at which a pair of models counts as distinguished on a benchmark.
DISTINGUISH_Z = 1.959963984540054


def pair_distinguishability(ability: pd.DataFrame, ability_sd: pd.DataFrame, *, z: float = DISTINGUISH_Z,
                            chunk: int = 500) -> pd.Series:
    """Share of model pairs each benchmark distinguishes, and the share distinguished on at least one
    (SAFE: 99.5% of pairs on at least one of eight benchmarks).

    A pair (a, b) is distinguished on benchmark j when |theta_a - theta_b| > z sqrt(sd_a^2 + sd_b^2)
    (ability estimates and posterior sds, independent posteriors); pairs are those of models
    observed on every benchmark (the complete cohort), so the shares are comparable.
    Returns a Series indexed by benchmark plus ``"any"``.
    """
    complete = ability.notna().all(axis=1) & ability_sd.notna().all(axis=1)
    est, sd = ability[complete].to_numpy(), ability_sd[complete].to_numpy()
    n = len(est)
    if n < 2:
        _fail("pair distinguishability needs two or more models observed on every benchmark")
    hits, either, pairs = np.zeros(est.shape[1]), 0, n * (n - 1) // 2
    for start in range(0, n, chunk):  # rows start..start+chunk against every later model
        rows = slice(start, min(start + chunk, n))
        gap = np.abs(est[rows, None, :] - est[None, :, :])
        sure = gap > z * np.sqrt(sd[rows, None, :] ** 2 + sd[None, :, :] ** 2)
        later = np.arange(n)[None, :] > np.arange(rows.start, rows.stop)[:, None]
        sure &= later[..., None]
        hits += sure.sum(axis=(0, 1))
        either += int(sure.any(axis=2).sum())
    return pd.Series(np.r_[hits, either] / pairs, index=[*ability.columns, "any"], name="share_distinguished")


def _distinguished_any(est: np.ndarray, sd: np.ndarray, z: float) -> np.ndarray:
    """(n, n) True where a pair differs by more than z combined sds on at least one column."""
    out = np.zeros((len(est), len(est)), dtype=bool)
    for j in range(est.shape[1]):
        out |= np.abs(est[:, None, j] - est[None, :, j]) > z * np.hypot(sd[:, None, j], sd[None, :, j])
    return out


def ability_matched_pairs(ability: pd.DataFrame, ability_sd: pd.DataFrame, datasets: Mapping[str, xr.Dataset], *,
                          z: float = DISTINGUISH_Z) -> tuple[pd.DataFrame, dict]:
    """SAFE Figure 5B: the model pairs a short ability test cannot separate on any benchmark, and how
    many individual items they still disagree on across the battery.

    ``ability``/``ability_sd``: short-test abilities and sds (models x benchmarks; the complete
    cohort is used). Disagreements count the items (of every dataset, matched by model id) both
    models answered, differently.

    Returns
    -------
    (pairs, summary)
        ``pairs``: ``model_a``, ``model_b``, ``largest_z`` (largest per-benchmark |gap| in combined
        sds), ``disagreements``, ``shared_items``; ``summary``: ``pairs`` (all), ``matched``,
        ``median_disagreements`` of the matched pairs and ``min_disagreements`` over all pairs.
    """
    complete = ability.notna().all(axis=1) & ability_sd.notna().all(axis=1)
    est, sd = ability[complete].to_numpy(), ability_sd[complete].to_numpy()
    models = ability.index[complete].astype(str)
    n = len(models)
    if n < 2:
        _fail("ability-matched pairs need two or more models observed on every benchmark")
    differ = np.zeros((n, n))
    shared = np.zeros((n, n))
    for ds in datasets.values():
        index = {str(m): k for k, m in enumerate(ds["model"].values)}
        cols = np.array([index.get(m, -1) for m in models])
        y = ds["responses"].values[:, np.maximum(cols, 0)].astype(float)
        y[:, cols < 0] = -1
        right, wrong = (y == 1).astype(float), (y == 0).astype(float)
        differ += right.T @ wrong + wrong.T @ right
        seen = right + wrong
        shared += seen.T @ seen
    gaps = np.stack([np.abs(est[:, None, j] - est[None, :, j]) / np.hypot(sd[:, None, j], sd[None, :, j])
                     for j in range(est.shape[1])]).max(axis=0)
    i, j = np.triu_indices(n, 1)
    matched = gaps[i, j] <= z
    pairs = pd.DataFrame({"model_a": models[i[matched]], "model_b": models[j[matched]],
                          "largest_z": gaps[i, j][matched], "disagreements": differ[i, j][matched].astype(int),
                          "shared_items": shared[i, j][matched].astype(int)})
    summary = {"pairs": int(i.size), "matched": int(matched.sum()),
               "distinguished_share": float(1 - matched.mean()),
               "median_disagreements": float(np.median(pairs["disagreements"])) if len(pairs) else float("nan"),
               "min_disagreements": int(differ[i, j].min())}
    return pairs.sort_values("disagreements", ignore_index=True), summary


def composite_scores(abilities: pd.DataFrame, polarity: pd.Series) -> pd.Series:
    """Sign-aligned composite of every model: the mean over the benchmarks it has of
    ``polarity x`` its standardized ability (z-score over the models observed on the benchmark)."""
    z = (abilities - abilities.mean()) / abilities.std(ddof=1)
    return (z * polarity.reindex(abilities.columns).to_numpy()).mean(axis=1, skipna=True).rename("composite")


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
    from bayesirt.safety.scopes import loading_clusters

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


def alignment_table(correlation: pd.DataFrame, polarity: pd.Series,
                    clusters: Mapping[str, Mapping[str, int]] | None = None) -> pd.DataFrame:
    """SAFE Table 5's left column for the suite's composites: the mean pairwise ability correlation
    of each composite's members as scored (``unflipped``) and after its flips (``signed``).

    Composites: every benchmark (flips: the benchmarks of polarity -1), and each latent-ability
    cluster (flips: its members of sign -1). ``against`` lists members whose mean signed
    correlation with the others stays negative (pointing the other way even after the flips)."""
    rows = []
    names = [str(c) for c in correlation.columns]
    composites = [("composite", names, [n for n in names if int(polarity.get(n, 1)) == -1])]
    composites += [(a, list(m), [n for n, s in m.items() if s == -1]) for a, m in (clusters or {}).items()
                   if len(m) >= 2]
    for name, members, flips in composites:
        result = composite_alignment(correlation, members, flips=flips)
        against = [m for m, v in result.member_agreement.items() if v < 0]
        rows.append({"composite": name, "members": " ".join(members), "flips": " ".join(flips) or "-",
                     "unflipped": result.unflipped_mean_correlation, "signed": result.mean_correlation,
                     "against": " ".join(against) or "-"})
    return pd.DataFrame(rows, columns=["composite", "members", "flips", "unflipped", "signed", "against"])


@dataclass(frozen=True)
class CompositeAlignment:
    """Sign agreement of a composite's members (SAFE App. D, Table 5).

    ``mean_correlation``: mean pairwise correlation of the members after the flips (a flipped
    member's correlations change sign); ``unflipped_mean_correlation``: the same without flips;
    ``member_agreement``: each member's mean correlation with the others after the flips (a negative
    value marks a member pointing the other way); ``flip_effects``: for each flipped member, the mean
    correlation with all flips but that one, with all flips, and the gain."""

    members: tuple[str, ...]
    flips: tuple[str, ...]
    mean_correlation: float
    unflipped_mean_correlation: float
    member_agreement: pd.Series
    flip_effects: pd.DataFrame


def _mean_signed(r: pd.DataFrame, members: list[str], flips: set[str]) -> float:
    signs = np.array([-1.0 if m in flips else 1.0 for m in members])
    signed = r.loc[members, members].to_numpy() * np.outer(signs, signs)
    return float(signed[np.triu_indices(len(members), 1)].mean())


def composite_alignment(correlation: pd.DataFrame, members: Sequence[str], *,
                        flips: Sequence[str] = ()) -> CompositeAlignment:
    """Mean signed pairwise correlation of a composite's members, and what each flip contributes.

    Parameters
    ----------
    correlation : pandas.DataFrame
        Labelled correlation matrix (e.g. from :func:`correlation_matrix`).
    members : sequence of str
        At least two distinct benchmark labels.
    flips : sequence of str, default ()
        Members whose scores are reversed before averaging (e.g. OR-Bench-Hard in SAFE).

    Returns
    -------
    CompositeAlignment
    """
    members, flips = [str(m) for m in members], [str(f) for f in flips]
    labels = [str(c) for c in correlation.columns]
    r = pd.DataFrame(np.asarray(correlation, dtype=float), index=labels, columns=labels)
    unknown = sorted(set(members) - set(labels))
    if len(set(members)) != len(members) or len(members) < 2 or unknown:
        _fail(f"composite members must be at least 2 distinct benchmarks of the correlation matrix; unknown "
              f"{unknown}, given {members}; choose from {labels}")
    if not set(flips) <= set(members):
        _fail(f"flips {sorted(set(flips) - set(members))} are not composite members; flip only members of {members}")
    signs = pd.Series([-1.0 if m in flips else 1.0 for m in members], index=members)
    signed = r.loc[members, members] * np.outer(signs, signs)
    agreement = (signed.sum(axis=1) - 1.0) / (len(members) - 1)
    full = _mean_signed(r, members, set(flips))
    effects = pd.DataFrame([{"member": f, "without_flip": _mean_signed(r, members, set(flips) - {f}),
                             "with_flip": full} for f in flips], columns=["member", "without_flip", "with_flip"])
    effects["gain"] = effects["with_flip"] - effects["without_flip"]
    return CompositeAlignment(tuple(members), tuple(flips), full, _mean_signed(r, members, set()),
                              agreement.rename("mean_signed_correlation"), effects)
