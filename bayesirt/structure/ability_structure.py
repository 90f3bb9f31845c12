"""Factor structure of fitted abilities: SAFE's two-stage design ("Latent Ability Inference", App. D).

A 2PL is fitted to each benchmark separately (by regularized marginal ML, MAP-EM under the 2PL
spec's priors, with EAP abilities, as SAFE's regularized MML; or ADVI/NUTS posterior means); the abilities are joined on model id into a (models x benchmarks) matrix, whose
factor structure is analysed (:func:`bayesirt.structure.factor.factor_analysis`) on the correlations
corrected for each benchmark's measurement error, with intervals from a bootstrap over models
(:mod:`bayesirt.structure.reliability`). Benchmarks of opposite polarity (a refusal benchmark whose
high score means less of the ability) are detected from the signs of their general-factor loadings or
declared, and composites are sign-aligned. :func:`run_factors_job` is the ``bayesirt factors`` job.
:func:`composite_alignment` checks that a composite's member abilities point the same way (App. D).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.data.responses import informative_items
from bayesirt.errors import BayesIRTError, DataError
from bayesirt.frequentist.mml import fit_mml
from bayesirt.structure.factor import check_n_factors
from bayesirt.utils.parallel import spawn_seeds

__all__ = ["check_factor_counts", "read_abilities", "ability_matrix", "polarity_table", "composite_scores", "pair_distinguishability",
           "CompositeAlignment", "composite_alignment", "ABILITY_METHODS", "COHORTS"]

#: How each benchmark's abilities are estimated: MAP-EM with EAP abilities (SAFE), or a posterior mean.
ABILITY_METHODS = ("map", "advi", "fullrank_advi", "nuts")
#: Models analysed: every model on the pairs of benchmarks it has, or only models with every benchmark.
COHORTS = ("pairwise", "complete")


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


def ability_matrix(datasets: Mapping[str, xr.Dataset], *, method: str = "map", draws: int = 1000, tune: int = 1000,
                   chains: int = 4, advi_iterations: int = 50_000, seed: int = 0, progress: bool = True) -> xr.Dataset:
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
        EAP abilities and their posterior sds; otherwise the posterior mean and sd of theta
        from :func:`bayesirt.inference.fitting.fit` (``draws``, ``tune``, ``chains``,
        ``advi_iterations`` as there).
    seed : int, default 0
        Seeds the fits (one child seed per benchmark).
    progress : bool, default True

    Returns
    -------
    xarray.Dataset
        ``ability`` and ``ability_sd`` (model, benchmark): EAP or posterior mean, and posterior sd;
        attributes ``fits`` (convergence per benchmark, JSON) and ``dropped_items`` (JSON). Models
        missing from a benchmark are NaN.
    """
    if len(datasets) < 3:
        _fail(f"factor analysis needs at least 3 benchmarks; got {len(datasets)}; pass more response datasets")
    if method not in ABILITY_METHODS:
        _fail(f"The 'method' parameter of ability_matrix must be one of {set(ABILITY_METHODS)}. Got {method!r} instead.")
    seeds = spawn_seeds(seed, len(datasets))
    columns, fits, dropped = {}, {}, {}
    for (name, responses), child in zip(datasets.items(), seeds):
        name = str(name)
        responses, dropped[name] = informative_items(responses)
        if method == "map":
            result = fit_mml(responses, "2pl", priors=True, se=False)
            mean, sd = result.abilities["eap"], result.abilities["eap_sd"]
            fits[name] = {"converged": int(result.converged), "iterations": int(result.iterations)}
        else:
            from bayesirt.inference.fitting import fit  # PyMC is imported only for posterior abilities

            tree = fit(responses, "2pl", method=method, draws=draws, tune=tune, chains=chains,
                       advi_iterations=advi_iterations, seed=child, progress=progress)
            theta = tree["posterior"]["theta"]
            mean, sd = theta.mean(("chain", "draw")), theta.std(("chain", "draw"), ddof=1)
            fits[name] = {k: int(v) for k, v in tree.attrs.items() if k in ("advi_converged", "advi_iterations_run")}
        columns[name] = (pd.Series(mean.values, index=mean["model"].values.astype(str)),
                         pd.Series(sd.values, index=sd["model"].values.astype(str)))
    models = pd.Index(pd.unique(np.concatenate([m.index.to_numpy() for m, _ in columns.values()])))
    mean = pd.DataFrame({n: m.reindex(models) for n, (m, _) in columns.items()})
    sd = pd.DataFrame({n: v.reindex(models) for n, (_, v) in columns.items()})
    dims = ("model", "benchmark")
    return xr.Dataset({"ability": (dims, mean.to_numpy()), "ability_sd": (dims, sd.to_numpy())},
                      coords={"model": models.to_numpy(), "benchmark": list(columns)},
                      attrs={"method": method, "irt_spec": "2pl", "seed": seed, "fits": json.dumps(fits),
                             "dropped_items": json.dumps(dropped)})


def polarity_table(solution, declared: Mapping[str, int] | None = None) -> pd.DataFrame:
    """Each benchmark's polarity: ``detected`` from the sign of its loading on the general factor
    (``solution``: a one-factor solution, reflected so that most benchmarks load positively),
    ``declared`` (+1/-1 given, or 0), and ``polarity`` (the declared one when given, else the
    detected one) with ``agree`` (False when a declaration contradicts the data)."""
    declared = {str(k): v for k, v in (declared or {}).items()}
    names = list(solution.variables)
    unknown = sorted(set(declared) - set(names))
    if unknown or any(v not in (1, -1) for v in declared.values()):
        _fail(f"polarity must map benchmarks of {names} to 1 or -1; got {declared} (unknown: {unknown})")
    loading = solution.loadings[:, 0] * (1.0 if np.sum(solution.loadings[:, 0] > 0) * 2 >= len(names) else -1.0)
    detected = np.where(loading < 0, -1, 1)
    table = pd.DataFrame({"general_loading": loading, "detected": detected,
                          "declared": [declared.get(n, 0) for n in names]}, index=pd.Index(names, name="benchmark"))
    table["polarity"] = np.where(table["declared"] != 0, table["declared"], table["detected"])
    table["agree"] = (table["declared"] == 0) | (table["declared"] == table["detected"])
    return table


#: Factor counts fitted by default (SAFE: 1-4), as far as the number of benchmarks identifies them.
MAX_FACTORS = 4


def check_factor_counts(n_factors, p: int) -> list[int]:
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


def composite_scores(abilities: pd.DataFrame, polarity: pd.Series) -> pd.Series:
    """Sign-aligned composite of every model: the mean over the benchmarks it has of
    ``polarity x`` its standardized ability (z-score over the models observed on the benchmark)."""
    z = (abilities - abilities.mean()) / abilities.std(ddof=1)
    return (z * polarity.reindex(abilities.columns).to_numpy()).mean(axis=1, skipna=True).rename("composite")


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
