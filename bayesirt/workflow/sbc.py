"""Simulation-based calibration (SBC; Talts, Betancourt, Simpson, Vehtari and Gelman 2018) of a
1PL-4PL spec together with an inference method.

For each replicate r: draw the parameters from the spec's priors (PyMC's
``sample_prior_predictive`` on :func:`~bayesirt.models.logistic.build_logistic`, as the prior
predictive check does), simulate a response matrix from them (:func:`simulate_pl` with the drawn
values as overrides), fit it, keep ``L`` roughly independent posterior draws (every ``thin``-th
draw of each chain) and record for every element of every parameter family the rank of the true
value among them, ``rank = #{l : draw_l < truth}`` in ``0..L`` (ties, of probability zero for a
continuous posterior, count as not less, as in ``simuk``). If the spec and the inference are
right, every rank is uniform on ``0..L``.

Uniformity test per family (theta, discrimination, difficulty, intercept, guessing, slip).
Ranks are binned into ``bins`` bins, rank value ``k`` going to bin ``floor(k * bins / (L + 1))``;
the expected share of bin b is the number of rank values it holds divided by ``L + 1`` (exactly
equal shares when ``bins`` divides ``L + 1``). The elements of one replicate share one data set
and one fit, so their ranks are not independent (for theta, a common shift of all abilities is
pinned only by the prior): a plain Pearson chi-square over all pooled ranks would reject a
calibrated sampler. The test is therefore the Pearson X2 of the pooled histogram with the
second-order Rao-Scott correction (Rao and Scott 1981, 1984): the generalized design effects
delta_1..delta_{bins-1} (eigenvalues of the covariance of the pooled bin shares, estimated from the
spread of the replicates' own shares, replicates being independent, against the multinomial
covariance of as many independent ranks) give X2 / (mean(delta) (1 + a^2)) referred to
chi2((bins - 1) / (1 + a^2)), a the coefficient of variation of the deltas. With independent
ranks all deltas are about 1 and this is the ordinary Pearson test. In simulations with
equicorrelated uniform ranks (rho 0 to 0.5, 20 to 200 replicates) it rejected 3-7% at the 5%
level; the first-order correction (mean delta only) rejected up to 12% and the naive test most.
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bayesirt.errors import ConfigError, DataError
from bayesirt.models.specs import IRTSpec, load_spec
from bayesirt.utils.options import declare, option
from bayesirt.utils.parallel import WORKERS, parallel_map, spawn_seeds
from bayesirt.utils.validation import parameter_error

if TYPE_CHECKING:  # annotations only
    import pandas as pd
    import xarray as xr

__all__ = ["simulation_based_calibration", "rank_statistics", "uniformity_test", "SBCResult",
           "SBC_METHODS", "DEFAULT_BINS", "FAMILIES"]

SBC_METHODS = ("nuts", "advi", "fullrank_advi")
#: Default number of histogram bins (Talts et al. suggest about replicates / 10 or fewer).
DEFAULT_BINS = 20
#: Parameter families in display order (``theta`` is the ability).
FAMILIES = ("theta", "discrimination", "difficulty", "intercept", "guessing", "slip")
_RHAT_VARIABLES = ("theta", "discrimination", "intercept", "difficulty", "guessing", "slip")


def rank_statistics(truth, draws) -> np.ndarray:
    """Rank of each true value among posterior draws: ``#{l : draws[l] < truth}``.

    Parameters
    ----------
    truth : array-like, shape (...)
    draws : array-like, shape (L, ...)
        ``L`` posterior draws of the same shape as ``truth``.

    Returns
    -------
    numpy.ndarray of int, shape (...), values in ``0..L``.
    """
    truth, draws = np.asarray(truth), np.asarray(draws)
    if draws.shape[1:] != truth.shape:
        raise DataError(f"draws have element shape {draws.shape[1:]} but truth has shape {truth.shape}; "
                        "pass draws with the draw axis first")
    return (draws < truth[None, ...]).sum(axis=0).astype(np.int64)


def uniformity_test(ranks, n_draws: int, bins: int = DEFAULT_BINS) -> dict:
    """Chi-square test that ranks are uniform on ``0..n_draws``, robust to dependence within a
    replicate (module docstring: binning and the Rao-Scott design effect).

    Parameters
    ----------
    ranks : array-like of int, shape (replicate,) or (replicate, element)
    n_draws : int
        ``L``, the number of posterior draws each rank was computed among.
    bins : int
        At most ``n_draws + 1``.

    Returns
    -------
    dict
        ``replicates``, ``elements`` (per replicate), ``bins``, ``pearson_x2`` (naive, pooled),
        ``design_effect`` (mean generalized design effect), ``deff_cv2`` (squared coefficient of
        variation of the design effects), ``x2`` (corrected), ``df`` (corrected), ``p_value``, ``rank_mean`` and ``rank_sd``
        of the normalized ranks ``(rank + 0.5) / (L + 1)`` (uniform: 0.5 and 0.289; a larger sd
        means the posterior is too narrow, a smaller one too wide; a mean below 0.5 means the
        truth tends to lie below the posterior) and ``coverage_90``, the share of truths inside
        the central 90% posterior interval.
    """
    r = np.asarray(ranks)
    r = r.reshape(r.shape[0], -1) if r.ndim else r.reshape(1, 1)
    if r.ndim == 1:
        r = r[:, None]
    if bins < 2 or bins > n_draws + 1:
        raise parameter_error("bins", "uniformity_test", f"an integer in [2, {n_draws + 1}] (L + 1: keep more draws "
                              "for more bins)", bins)
    if r.size and (r.min() < 0 or r.max() > n_draws):
        raise DataError(f"ranks must lie in 0..{n_draws}; got {r.min()}..{r.max()}")
    n_rep, m = r.shape
    values_bin = np.arange(n_draws + 1) * bins // (n_draws + 1)
    p0 = np.bincount(values_bin, minlength=bins) / (n_draws + 1)
    which = r * bins // (n_draws + 1)
    share = np.stack([(which == b).mean(axis=1) for b in range(bins)], axis=1)  # (replicate, bin)
    n_total = n_rep * m
    observed = share.sum(axis=0) * m
    expected = n_total * p0
    pearson = float(((observed - expected) ** 2 / expected).sum())
    k = bins - 1
    if n_rep > 1:
        # generalized design effects: eigenvalues of V0^-1 V on the first bins - 1 shares, with V the
        # covariance of the pooled shares estimated from the independent replicates and V0 the
        # multinomial covariance of as many independent ranks
        v = np.atleast_2d(np.cov(share.T, ddof=1))[:k, :k] / n_rep
        v0 = (np.diag(p0) - np.outer(p0, p0))[:k, :k] / n_total
        eig = np.linalg.eigvals(np.linalg.solve(v0, v)).real
        deff = max(float(eig.mean()), 1e-12)
        cv2 = float(((eig - deff) ** 2).sum() / (k * deff**2))
    else:
        deff, cv2 = 1.0, 0.0
    df = k / (1 + cv2)
    x2 = pearson / (deff * (1 + cv2))
    u = (r + 0.5) / (n_draws + 1)
    # import time: this module declares simulation_based_calibration's options, which the command line reads
    from scipy import stats

    return {
        "replicates": n_rep, "elements": m, "bins": bins, "draws_L": n_draws, "pearson_x2": pearson,
        "design_effect": deff, "deff_cv2": cv2, "x2": x2, "df": df, "p_value": float(stats.chi2.sf(x2, df)),
        "rank_mean": float(u.mean()), "rank_sd": float(u.std()),
        "coverage_90": float(((u > 0.05) & (u < 0.95)).mean()),
    }


class SBCResult:
    """Result of :func:`simulation_based_calibration`.

    Attributes
    ----------
    ranks : xarray.Dataset
        One variable per parameter family (dims ``replicate`` and ``model`` or ``item``), int
        ranks in ``0..L``; per replicate the diagnostics ``max_rhat``, ``min_ess_bulk``,
        ``divergences``, ``advi_converged`` (NaN where not applicable) and ``fit_seconds``.
        Attributes: settings (JSON), ``draws_L``, ``bins``.
    tests : pandas.DataFrame
        One row per family: :func:`uniformity_test` results.
    """

    def __init__(self, ranks: xr.Dataset, tests: pd.DataFrame):
        self.ranks, self.tests = ranks, tests

    @property
    def families(self) -> list[str]:
        return [f for f in FAMILIES if f in self.ranks]

    @property
    def diagnostics(self) -> pd.DataFrame:
        """The per-replicate diagnostics as a table."""
        names = ["max_rhat", "min_ess_bulk", "divergences", "advi_converged", "fit_seconds", "seed"]
        return self.ranks[names].to_dataframe().reset_index()


@dataclass(frozen=True)
class _Replicate:
    index: int
    seed: int
    truth: dict
    spec: IRTSpec
    design: tuple[int, int]
    fit_options: dict
    thin: int
    families: tuple[str, ...]
    fit_function: Callable | None


@contextmanager
def _quiet():
    """Silence PyMC/PyTensor logging and warnings during a replicate, restoring them afterwards."""
    loggers = [logging.getLogger(n) for n in ("pymc", "pytensor", "nutpie")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _run_replicate(task: _Replicate) -> dict:
    """Simulate, fit and rank one replicate (runs in a worker; module level so it pickles)."""
    import arviz as az

    # imported in the worker process, where the replicate is simulated and fitted (not with the CLI's parser)
    from bayesirt.data.datasets.simulate import simulate_pl
    from bayesirt.inference.fitting import fit  # as above
    from bayesirt.models.logistic import with_difficulty  # as above

    data_seed, fit_seed = spawn_seeds(task.seed, 2)
    n_models, n_items = task.design
    t = task.truth
    overrides = {k: t[k] for k in ("theta", "discrimination", "intercept", "guessing", "slip") if k in t}
    with _quiet():
        responses, _ = simulate_pl(task.spec.kind, n_items=n_items, n_models=n_models, seed=data_seed, **overrides)
        t0 = time.perf_counter()
        tree = (task.fit_function or fit)(responses, task.spec, seed=fit_seed, progress=False, **task.fit_options)
        seconds = time.perf_counter() - t0
        post = with_difficulty(tree["posterior"].to_dataset())
        kept = post.isel(draw=slice(task.thin - 1, None, task.thin))
        out = {"index": task.index, "fit_seconds": seconds, "ranks": {}}
        for name in task.families:
            draws = kept[name].stack(sample=("chain", "draw")).transpose("sample", ...).values
            out["ranks"][name] = rank_statistics(np.asarray(t[name]), draws)
        out["draws_L"] = int(kept.sizes["chain"] * kept.sizes["draw"])
        out["max_rhat"] = out["min_ess_bulk"] = out["divergences"] = out["advi_converged"] = np.nan
        if task.fit_options.get("method", "nuts") == "nuts":
            names = [n for n in _RHAT_VARIABLES if n in post and post[n].std() > 0]
            sub = post[names]
            rhat, ess = az.rhat(sub), az.ess(sub, method="bulk")
            out["max_rhat"] = float(max(np.nanmax(rhat[n].values) for n in names))
            out["min_ess_bulk"] = float(min(np.nanmin(ess[n].values) for n in names))
            if "sample_stats" in tree.children and "diverging" in tree["sample_stats"]:
                out["divergences"] = float(tree["sample_stats"]["diverging"].sum())
        else:
            out["advi_converged"] = float(tree.attrs.get("advi_converged", np.nan))
    return out


def _thin(method: str, thin: int | None) -> int:
    """The thinning used: ``thin``, or 10 for NUTS and 1 for ADVI."""
    return (10 if method == "nuts" else 1) if thin is None else thin


def _enough_ranks(v: dict) -> str | None:
    """Enough posterior draws after thinning for the rank histogram's bins."""
    n_draws = (v["chains"] if v["method"] == "nuts" else 1) * (v["draws"] // _thin(v["method"], v["thin"]))
    if n_draws + 1 < v["bins"]:
        return (f"{n_draws} posterior draws after thinning give {n_draws + 1} possible ranks, fewer than "
                f"bins={v['bins']}; raise draws, lower thin or lower bins")
    return None


def _prior_draws(spec: IRTSpec, design: tuple[int, int], replicates: int, seed: int) -> dict[str, np.ndarray]:
    """``replicates`` draws of every parameter from the spec's priors, via PyMC."""
    import pymc as pm


    n_models, n_items = design
    # import time: this module declares simulation_based_calibration's options, which the command line reads
    from bayesirt.data import make_responses
    from bayesirt.models.logistic import build_logistic  # import time, as above

    frame = make_responses(np.zeros((n_items, n_models), dtype="int8"),
                           item_id=[f"i{k:04d}" for k in range(n_items)], model_id=[f"m{k:03d}" for k in range(n_models)])
    names = ["theta", "discrimination", "intercept", "difficulty"] + ["guessing"] * spec.has_guessing \
        + ["slip"] * spec.has_slip
    with build_logistic(frame, spec), warnings.catch_warnings():
        # the likelihood Potential plays no part in prior draws, which is what is wanted here
        warnings.filterwarnings("ignore", message="The effect of Potentials", category=UserWarning)
        prior = pm.sample_prior_predictive(draws=replicates, random_seed=seed, var_names=names).prior
    return {k: prior[k].values[0] for k in names}


@declare(check=_enough_ranks)
def simulation_based_calibration(
    spec: IRTSpec | str | Path = "2pl",
    design: tuple[int, int] = (100, 40),
    *,
    replicates: int = option(200, "simulated data sets, each fitted once", low=2),
    method: str = option("nuts", "inference method", choices=SBC_METHODS),
    draws: int = option(500, "draws per chain (ADVI: from the approximation)", low=1),
    tune: int = option(500, "tuning steps per chain", low=1),
    chains: int = option(2, "chains", low=1),
    thin: int | None = option(None, "keep every THIN-th draw per chain [10 for nuts, 1 for advi]", type=int, low=1),
    bins: int = option(DEFAULT_BINS, "rank histogram bins of the uniformity tests", low=2),
    seed: int = option(0, "random seed; same seed, same ranks whatever the workers", low=0),
    workers: int | None = WORKERS,
    scheduler: str | None = option(None, "address of an existing Dask scheduler (instead of local workers)", type=str,
                                   toml="a running scheduler's address belongs to one session, not to a file"),
    advi_iterations: int = option(50_000, "ADVI iteration cap", low=1),
    fit_function: Callable | None = option(None, "a replacement of bayesirt.fit (tests)", type=object,
                                           cli="a Python callable", toml="a Python callable"),
    progress: bool = True,
) -> SBCResult:
    """Simulation-based calibration of ``spec`` fitted by ``method`` on a ``design``.

    Parameters
    ----------
    spec : IRTSpec, str or path, default "2pl"
    design : (n_models, n_items), default (100, 40)
    replicates : int, default 200
        Simulated data sets, each fitted once.
    method : {"nuts", "advi", "fullrank_advi"}, default "nuts"
        MAP is excluded: one point is not a posterior.
    draws, tune, chains : int, defaults 500, 500, 2
        Passed to :func:`bayesirt.inference.fitting.fit` (ADVI: ``draws`` from the approximation; it
        reports one chain and ignores ``tune`` and ``chains``).
    thin : int, optional
        Keep every ``thin``-th draw of each chain, so ``L = chains * (draws // thin)`` draws
        rank the truth. Default 10 for NUTS (removes most autocorrelation: ranks among
        autocorrelated draws are not uniform even for an exact sampler) and 1 for ADVI, whose
        draws are independent.
    bins : int, default 20
        Bins of the uniformity tests and histograms (module docstring).
    seed : int, default 0
        The prior draws use ``SeedSequence(seed)``'s first child, replicate r the (r+1)-th (its
        data and its fit each get a child of that); results do not depend on ``workers``.
    workers, scheduler
        Where replicates run: :func:`bayesirt.utils.parallel.parallel_map` (``workers=1``: in this
        process; default: one process per core).
    advi_iterations : int, default 50000
    fit_function : callable, optional
        Used in place of :func:`bayesirt.inference.fitting.fit`, with the same call signature (for
        testing the check itself, or custom inference). Must be importable by the workers.
    progress : bool, default True
        A progress bar over replicates.

    Returns
    -------
    SBCResult
    """
    if not (isinstance(design, (tuple, list)) and len(design) == 2 and all(isinstance(v, (int, np.integer)) for v in design)
            and min(design) >= 2):
        raise ConfigError(f"design must be (n_models, n_items), each an integer of at least 2; got {design!r}")
    design = (int(design[0]), int(design[1]))
    thin = _thin(method, thin)
    n_chains = chains if method == "nuts" else 1
    n_draws = n_chains * (draws // thin)
    if not isinstance(spec, IRTSpec):
        spec = load_spec(spec)
    families = ("theta",) + ("discrimination",) * (spec.discrimination_structure != "fixed") \
        + ("difficulty", "intercept") + ("guessing",) * spec.has_guessing + ("slip",) * spec.has_slip
    fit_options = {"method": method, "draws": draws}
    if method == "nuts":
        fit_options |= {"tune": tune, "chains": chains}
        if workers != 1 or scheduler is not None:
            fit_options["cores"] = 1  # each worker owns one core: its chains take turns on it
    else:
        fit_options |= {"advi_iterations": advi_iterations}

    t0 = time.perf_counter()
    seeds = spawn_seeds(seed, replicates + 1)
    prior = _prior_draws(spec, design, replicates, seeds[0])
    tasks = [
        _Replicate(r, seeds[r + 1], {k: v[r] for k, v in prior.items()}, spec, design, fit_options, thin, families,
                   fit_function)
        for r in range(replicates)
    ]
    results = parallel_map(_run_replicate, tasks, workers=workers, scheduler=scheduler, progress=progress,
                           description="SBC replicates")
    wall = time.perf_counter() - t0
    if any(res["draws_L"] != n_draws for res in results):
        raise ConfigError("simulation_based_calibration: a fit returned a different number of draws than asked; "
                          "check fit_function")

    n_models, n_items = design
    element_dim = {"theta": "model"}
    data = {}
    for name in families:
        arr = np.stack([res["ranks"][name] for res in results])
        dims = ("replicate",) + ((element_dim.get(name, "item"),) if arr.ndim > 1 else ())
        data[name] = (dims, arr)
    for key in ("max_rhat", "min_ess_bulk", "divergences", "advi_converged", "fit_seconds"):
        data[key] = ("replicate", np.array([res[key] for res in results], dtype=float))
    data["seed"] = ("replicate", np.array(seeds[1:], dtype=np.int64))
    settings = {"spec": spec.name, "design": list(design), "replicates": replicates, "method": method, "draws": draws,
                "tune": tune, "chains": chains, "thin": thin, "bins": bins, "seed": seed, "workers": workers,
                "advi_iterations": advi_iterations, "wall_seconds": round(wall, 1)}
    # import time: this module declares simulation_based_calibration's options, which the command line reads
    import pandas as pd
    import xarray as xr

    ranks = xr.Dataset(
        data,
        coords={"replicate": np.arange(replicates), "model": [f"m{k:03d}" for k in range(n_models)],
                "item": [f"i{k:04d}" for k in range(n_items)]},
        attrs={"draws_L": n_draws, "bins": bins, "bayesirt_settings": json.dumps(settings),
               "bayesirt_spec_text": spec.text,
               "rank_definition": "rank = number of kept posterior draws below the true value, in 0..draws_L"},
    )
    tests = pd.DataFrame([{"family": name, **uniformity_test(ranks[name].values, n_draws, bins)} for name in families])
    return SBCResult(ranks, tests)
