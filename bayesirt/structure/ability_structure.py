"""Factor structure of fitted abilities: SAFE's two-stage design ("Latent Ability Inference", App. D).

A 2PL is fitted to each benchmark separately; the posterior abilities are joined on model id into a
(models x benchmarks) matrix, whose factor structure is analysed (:func:`bayesirt.structure.factor.factor_analysis`)
for the posterior means and, as a Bayesian counterpart, repeated on posterior draws and aligned to
the posterior-mean solution. :func:`run_factors_job` is the ``bayesirt factors`` job.
:func:`composite_alignment` checks that a composite's member abilities point the same way (App. D).
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

from bayesirt.errors import BayesIRTError, DataError
from bayesirt.structure.factor import (
    FactorSolution, check_n_factors, check_positive_definite, factor_solution, correlation_matrix, factor_analysis,
    parallel_analysis,
)
from bayesirt.utils.parallel import blas_threads, spawn_seeds
from bayesirt.utils.progress import progress_bar
from bayesirt.structure.rotation import ROTATIONS, align_loadings, align_phi

__all__ = ["read_abilities", "ability_matrix", "posterior_factor_analysis", "run_factors_job", "CompositeAlignment",
           "composite_alignment"]


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


def ability_matrix(datasets: Mapping[str, xr.Dataset], *, method: str = "advi", draws: int = 1000, tune: int = 1000,
                   chains: int = 4, advi_iterations: int = 50_000, posterior_draws: int = 200, seed: int = 0,
                   progress: bool = True) -> xr.Dataset:
    """Fit a 2PL to each benchmark and join the abilities on model id (SAFE's two-stage design).

    Parameters
    ----------
    datasets : mapping of str to xarray.Dataset
        Response Datasets (:func:`bayesirt.data.io.load`) keyed by benchmark name; at least 3.
    method, draws, tune, chains, advi_iterations : as in :func:`bayesirt.inference.fitting.fit`
        Default ADVI (fast); ``"nuts"`` for the reference posterior.
    posterior_draws : int, default 200
        Draws kept per benchmark for the per-draw analysis (fewer if a posterior has fewer).
    seed : int, default 0
        Seeds the fits (one child seed per benchmark) and the draw subsampling.
    progress : bool, default True

    Returns
    -------
    xarray.Dataset
        ``ability`` and ``ability_sd`` (model, benchmark): posterior mean and sd of theta;
        ``ability_draws`` (sample, model, benchmark); attribute ``fits``: ADVI convergence per
        benchmark (JSON). The benchmarks are fitted separately, so
        sample ``s`` pairs independent random draws of each benchmark's posterior: a draw from the
        product of the per-benchmark posteriors. Models missing from a benchmark are NaN.
    """
    if len(datasets) < 3:
        _fail(f"factor analysis needs at least 3 benchmarks; got {len(datasets)}; pass more response datasets")
    if isinstance(posterior_draws, bool) or not isinstance(posterior_draws, (int, np.integer)) or posterior_draws < 1:
        _fail(f"posterior_draws must be a positive integer; got {posterior_draws!r}")
    from bayesirt.inference.fitting import fit  # PyMC is imported only when abilities are fitted

    seeds = spawn_seeds(seed, len(datasets) + 1)
    thetas, fits = {}, {}
    for (name, responses), child in zip(datasets.items(), seeds):
        tree = fit(responses, "2pl", method=method, draws=draws, tune=tune, chains=chains,
                   advi_iterations=advi_iterations, seed=child, progress=progress)
        thetas[str(name)] = tree["posterior"]["theta"].stack(sample=("chain", "draw")).transpose("sample", "model")
        fits[str(name)] = {k: int(v) for k, v in tree.attrs.items() if k in ("advi_converged", "advi_iterations_run")}
    keep = min(posterior_draws, *(t.sizes["sample"] for t in thetas.values()))
    rng = np.random.default_rng(seeds[-1])
    models = pd.Index(pd.unique(np.concatenate([t["model"].values.astype(str) for t in thetas.values()])))
    mean, sd = np.full((2, len(models), len(thetas)), np.nan)
    sampled = np.full((keep, len(models), len(thetas)), np.nan)
    for j, t in enumerate(thetas.values()):
        rows, values = models.get_indexer(t["model"].values.astype(str)), t.values
        mean[rows, j], sd[rows, j] = values.mean(axis=0), values.std(axis=0, ddof=1) if len(values) > 1 else np.nan
        sampled[:, rows, j] = values[rng.choice(len(values), keep, replace=False)]
    dims = ("model", "benchmark")
    data = {"ability": (dims, mean), "ability_sd": (dims, sd), "ability_draws": (("sample", *dims), sampled)}
    return xr.Dataset(data,
                      coords={"model": models.to_numpy(), "benchmark": list(thetas), "sample": np.arange(keep)},
                      attrs={"method": method, "irt_spec": "2pl", "seed": seed, "fits": json.dumps(fits),
                             "pairing": "sample s pairs independent draws of the separately fitted benchmarks"})


def posterior_factor_analysis(ability_draws: xr.DataArray, target: FactorSolution, *, ci: float = 0.95,
                              progress: bool = True) -> xr.Dataset:
    """Repeat a factor analysis on each posterior draw of the ability matrix, aligned to ``target``.

    Each draw is analysed like ``target`` (minres, same rotation and number of factors, fit indices
    with the target's ``n_obs``); its factors are then permuted and reflected to match the target's
    loadings (:func:`bayesirt.structure.rotation.align_loadings`), and its factor correlations follow
    (:func:`bayesirt.structure.rotation.align_phi`).

    Parameters
    ----------
    ability_draws : xarray.DataArray
        Dims ``sample``, ``model``, ``benchmark`` (from :func:`ability_matrix`); benchmarks as in
        ``target.variables``.
    target : FactorSolution
        Usually the solution for the posterior-mean abilities.
    ci : float, default 0.95
        Central interval reported as ``*_lower`` / ``*_upper`` (quantiles over draws).
    progress : bool, default True

    Returns
    -------
    xarray.Dataset
        Per draw (``sample``): ``loadings``, ``phi``, ``congruence`` (with the target), ``communality``,
        ``rmsea``, ``cfi``, ``tli``; and ``*_mean``, ``*_lower``, ``*_upper`` of loadings, phi and
        communality. Draws whose correlation matrix is unusable are NaN (attribute ``failed_draws``).
        Per-draw abilities carry posterior noise, which attenuates their correlations: loadings from
        draws tend to be smaller than those from posterior means.
    """
    if set(ability_draws.dims) != {"sample", "model", "benchmark"} or not 0 < ci < 1:
        _fail(f"ability draws need dims ('sample', 'model', 'benchmark') and ci a fraction in (0, 1); got dims "
              f"{ability_draws.dims} and ci={ci!r}; pass ability_matrix(...)['ability_draws']")
    da = ability_draws.transpose("sample", "model", "benchmark")
    if [str(b) for b in da["benchmark"].values] != list(target.variables):
        _fail(f"ability draws have benchmarks {list(map(str, da['benchmark'].values))} but the target solution has "
              f"{list(target.variables)}; pass the draws the target was computed from")
    s, p, k = da.sizes["sample"], len(target.variables), target.n_factors
    loadings, phi = np.full((s, p, k), np.nan), np.full((s, k, k), np.nan)
    congruence, communality, indices = np.full((s, k), np.nan), np.full((s, p), np.nan), np.full((s, 3), np.nan)
    with blas_threads(1), progress_bar(s, f"{k}-factor analysis per posterior draw", enabled=progress) as advance:
        for i, x in enumerate(da.values):
            try:
                r = np.corrcoef(x, rowvar=False) if np.isfinite(x).all() else correlation_matrix(x)[0].to_numpy()
                check_positive_definite(r)
            except BayesIRTError:
                advance()
                continue
            sol = factor_solution(r, k, target.rotation, target.gamma, target.fit.n_obs, target.variables)
            loadings[i], perm, signs, congruence[i] = align_loadings(sol.loadings, target.loadings)
            phi[i], communality[i] = align_phi(sol.phi, perm, signs), sol.communalities
            indices[i] = sol.fit.rmsea, sol.fit.cfi, sol.fit.tli
            advance()
    factors = [f"F{j + 1}" for j in range(k)]
    data = {"loadings": (("sample", "benchmark", "factor"), loadings),
            "phi": (("sample", "factor", "other_factor"), phi), "congruence": (("sample", "factor"), congruence),
            "communality": (("sample", "benchmark"), communality),
            **{name: ("sample", indices[:, j]) for j, name in enumerate(("rmsea", "cfi", "tli"))}}
    out = xr.Dataset(data, coords={"sample": da["sample"].values, "benchmark": list(target.variables),
                                   "factor": factors, "other_factor": factors})
    failed = int(np.isnan(indices[:, 1]).sum())
    quantiles = [(1 - ci) / 2, (1 + ci) / 2]
    for name in ("loadings", "phi", "communality"):
        valid = out[name].dropna("sample", how="all")
        out[f"{name}_mean"] = valid.mean("sample")
        out[f"{name}_lower"], out[f"{name}_upper"] = (valid.quantile(q, "sample").drop_vars("quantile")
                                                      for q in quantiles)
    out.attrs = {"n_factors": k, "rotation": target.rotation, "gamma": target.gamma, "ci": ci, "failed_draws": failed,
                 "aligned_to": "the target (posterior-mean) solution: factors permuted and reflected by congruence"}
    return out


def _check_factor_counts(n_factors, p: int) -> list[int]:
    counts = [n_factors] if isinstance(n_factors, (int, np.integer)) else list(n_factors)
    if not counts or len(set(counts)) != len(counts):
        _fail(f"n_factors must be distinct positive integers, e.g. (1, 2, 3); got {n_factors!r}")
    return sorted(check_n_factors(p, k) for k in counts)


def run_factors_job(inputs: Sequence[str | os.PathLike], out: str | os.PathLike, *, n_factors=(1, 2, 3, 4),
                    rotation: str = "oblimin", gamma: float = 0.0, method: str = "advi", draws: int = 1000,
                    tune: int = 1000, chains: int = 4, advi_iterations: int = 50_000, posterior_draws: int = 200,
                    parallel_iter: int = 1000, seed: int = 0, force: bool = False, progress: bool = True) -> Path:
    """The ``bayesirt factors`` job: factor structure of abilities, written to a folder.

    Parameters
    ----------
    inputs : sequence of path
        One CSV of abilities (:func:`read_abilities`), or at least 3 response data files (one per
        benchmark, named by file stem, read by :func:`bayesirt.data.io.load`), fitted by
        :func:`ability_matrix` and then analysed also per posterior draw.
    out : path
        Output folder, written atomically (:func:`bayesirt.utils.outputs.staged_output`).
    n_factors : int or sequence of int, default (1, 2, 3, 4)
        Solutions to compute; each must leave >= 0 degrees of freedom.
    rotation, gamma : as in :func:`bayesirt.structure.factor.factor_analysis`
    method, draws, tune, chains, advi_iterations, posterior_draws : as in :func:`ability_matrix`
        Used only with response files.
    parallel_iter : int, default 1000
        Random data sets of the parallel analysis (SAFE: 1,000).
    seed : int, default 0
        Seeds the fits, the draw subsampling and the parallel analysis.
    force : bool, default False
        Replace an existing ``out``.
    progress : bool, default True

    Returns
    -------
    pathlib.Path
        ``out``, holding ``factors.nc``, ``fit_indices.csv``, ``loadings_<k>.csv``, ``phi_<k>.csv``
        (oblique, k >= 2), ``parallel.csv``, ``report.md`` and ``factor_selection.png``.
    """
    from bayesirt.data.io import load
    from bayesirt.utils.outputs import check_output
    from bayesirt.report.factors import write_factors

    check_output(out, force=force)
    paths = [Path(p) for p in inputs]
    if rotation not in ROTATIONS:
        _fail(f"The 'rotation' parameter of run_factors_job must be one of {set(ROTATIONS)}. Got {rotation!r} instead.")
    fit_seed, parallel_seed = spawn_seeds(seed, 2)
    if len(paths) == 1:
        frame = read_abilities(paths[0])
        abilities = xr.Dataset({"ability": (("model", "benchmark"), frame.to_numpy())},
                               coords={"model": frame.index.to_numpy(), "benchmark": frame.columns.to_numpy()})
    else:
        names = [p.stem for p in paths]
        if len(set(names)) != len(names) or len(paths) < 3:
            _fail(f"response files must be at least 3, one per benchmark, with distinct file names; got {names}")
        _check_factor_counts(n_factors, len(paths))  # before the fits
        abilities = ability_matrix({n: load(p) for n, p in zip(names, paths)}, method=method, draws=draws, tune=tune,
                                   chains=chains, advi_iterations=advi_iterations, posterior_draws=posterior_draws,
                                   seed=fit_seed, progress=progress)
        frame = abilities["ability"].to_pandas()
    counts = _check_factor_counts(n_factors, frame.shape[1])
    solutions = [factor_analysis(frame, k, rotation=rotation, gamma=gamma) for k in counts]
    parallel = parallel_analysis(frame, n_iter=parallel_iter, seed=parallel_seed)
    posterior = ([posterior_factor_analysis(abilities["ability_draws"], s, progress=progress) for s in solutions]
                 if "ability_draws" in abilities else [])
    settings = {"inputs": [str(p) for p in paths], "n_factors": counts, "rotation": rotation, "gamma": gamma,
                "seed": seed, "parallel_iter": parallel_iter}
    if posterior:
        settings |= {"method": method, "draws": draws, "tune": tune, "chains": chains,
                     "advi_iterations": advi_iterations, "posterior_draws": posterior_draws}
    return write_factors(out, abilities=abilities, correlation=correlation_matrix(frame)[0], solutions=solutions,
                         parallel=parallel, posterior=posterior, settings=settings, force=force)


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
