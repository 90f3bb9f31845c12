"""Model comparison: PSIS-LOO over responses, leave-one-model-out, exact K-fold by model, tables.

Two units of prediction are offered:

- ``cell``: one response. PSIS-LOO (ArviZ) over the pointwise log-likelihood, computed in chunks
  of cells so a 5,000 x 14,000 matrix never holds every draw x cell at once.
- ``model``: one LLM's whole response pattern, the unit an evaluator predicts when a new LLM
  arrives. Its ability is integrated out, not plugged in: for every posterior draw of the item
  parameters, log p(y_m | phi_s) is computed (one ability dimension: on grids shared by all models,
  :mod:`bayesirt.comparison.grid`; more: adaptive quadrature per model,
  :mod:`bayesirt.comparison.marginal`), and PSIS is applied over draws
  (integrated importance sampling). Because abilities are conditionally independent given the
  item parameters and the population, these are exactly the importance ratios of the marginal
  posterior of phi. Summing a model's pointwise log-likelihoods with its own ability draws
  instead gives useless Pareto k (the ability posterior moves with the left-out data).

Exact K-fold cross-validation by model (calibrate on the training folds, score held-out models by
the same marginal likelihood averaged over the training posterior) replaces PSIS when too many
models have Pareto k above ArviZ's sample-size-dependent threshold, or on request. Folds (of
every spec at once, :func:`kfold_specs`) are fitted in parallel through
:func:`bayesirt.utils.parallel.parallel_map`.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import arviz as az
import numba
import numpy as np
import pandas as pd
import xarray as xr
from arviz_stats.utils import ELPDData, ELPDDataLOO, ELPDDataLOOKFold
from scipy.special import logsumexp

from bayesirt.comparison.settings import DEFAULT_WEIGHTS, KFOLD_MODES, UNITS, WEIGHTS
from bayesirt.data.responses import MISSING, from_observed_data
from bayesirt.errors import ConfigError, DataError
from bayesirt.comparison.grid import Patterns, grid_log_marginal
from bayesirt.comparison.marginal import GH_NODES, ItemDraws, pattern_log_marginal, quadrature_rule
from bayesirt.models.logistic import pointwise_log_likelihood
from bayesirt.utils.parallel import blas_threads, parallel_map
from bayesirt.utils.progress import format_duration, progress_bar, stage
from bayesirt.utils.validation import check_choice, check_int
from bayesirt.comparison.psis import psis_loo
from bayesirt.comparison.stacking import pseudo_bma_plus_weights, stacking_weights
from bayesirt.models.specs import parse_spec

__all__ = ["compare", "marginal_log_likelihood", "loo_models", "loo_cells", "kfold_models", "kfold_specs", "compare_table",
           "elpd_dataset",
           "UNITS", "KFOLD_MODES", "WEIGHTS"]

_ITEM_VARIABLES = ("discrimination", "loading", "intercept", "guessing", "slip", "factor_correlation")


def _samples(posterior: xr.Dataset, name: str) -> np.ndarray:
    """(sample, ...) array of one variable, chains and draws stacked."""
    v = posterior[name]
    return v.values.reshape(v.sizes["chain"] * v.sizes["draw"], *v.shape[2:])


def _item_draws(tree: xr.DataTree) -> list[ItemDraws]:
    """One :class:`ItemDraws` per posterior sample, with the spec's ability population."""
    post = tree["posterior"].to_dataset()
    n_items = post.sizes["item"]
    if "loading" in post:
        loading = _samples(post, "loading")
        n_dims = loading.shape[-1]
        mean, cov = np.zeros(n_dims), np.eye(n_dims)
        covs = _samples(post, "factor_correlation") if "factor_correlation" in post else None
    else:
        theta_prior = parse_spec(tree.attrs["bayesirt_spec_text"]).priors["theta"].params
        a = _samples(post, "discrimination") if "discrimination" in post else np.ones(1)
        loading = np.broadcast_to(a.reshape(a.shape[0], -1, 1), (a.shape[0], n_items, 1))
        mean, cov, covs = np.array([theta_prior["mu"]]), np.array([[theta_prior["sigma"] ** 2]]), None
    d = _samples(post, "intercept")
    c = _samples(post, "guessing") if "guessing" in post else np.zeros(len(d))
    s = _samples(post, "slip") if "slip" in post else np.zeros(len(d))
    return [ItemDraws(loading[k], d[k], c[k], s[k], mean, cov if covs is None else covs[k]) for k in range(len(d))]


def marginal_log_likelihood(tree: xr.DataTree, responses: xr.Dataset | None = None, *, nodes: int | None = None,
                            samples: int | None = None, seed: int = 0, progress: bool = True,
                            threads: int | None = None) -> xr.DataArray:
    """log p(y_m | phi_s) for every posterior draw s and model m, abilities integrated out.

    Parameters
    ----------
    tree : xarray.DataTree
        A fit from :func:`bayesirt.inference.fitting.fit` (1PL-4PL or MIRT).
    responses : xarray.Dataset, optional
        Whose patterns to score. Default: the fit's own ``observed_data`` (for PSIS-LOO); K-fold
        passes the held-out models (same items).
    nodes, samples, seed
        One ability dimension, neither given (the default): a uniform grid shared by all models
        (:func:`bayesirt.comparison.grid.grid_log_marginal`), with adaptive Gauss-Hermite (21 nodes)
        for any model the grid does not resolve. Otherwise adaptive Gauss-Hermite nodes per
        dimension (default 21/11/7 for D = 1/2/3), or importance samples (default 2,000 for
        D >= 4) drawn with ``seed``. See :func:`bayesirt.comparison.marginal.quadrature_rule`.
    threads : int, optional
        Draws computed at once, in threads of this process; the result does not depend on it. Default: numba's
        thread count (``NUMBA_NUM_THREADS``, one per core unless set: the grid is a numba kernel).

    Returns
    -------
    xarray.DataArray
        Dims (chain, draw, model), named ``model_marginal``; attrs ``integration`` (the method)
        and ``adaptive_fallback_evaluations`` (model x draw pairs the grid left to Gauss-Hermite).
    """
    post = tree["posterior"]
    if responses is None:
        responses = from_observed_data(tree)
    y = responses["responses"].values.T  # (model, item)
    if y.shape[1] != post.sizes["item"]:
        raise DataError(f"the responses have {y.shape[1]} items but the fit has {post.sizes['item']}; "
                        "score models on the items the fit was calibrated on")
    observed = y != MISSING
    draws = _item_draws(tree)
    dims = draws[0].loading.shape[1]
    rule = quadrature_rule(dims, nodes=nodes, samples=samples, seed=seed)
    on_grid = dims == 1 and nodes is None and samples is None
    patterns = Patterns.of((y == 1).astype(float), observed) if on_grid else None
    yf = (y == 1).astype(float)

    def draw_marginal(k: int) -> tuple[np.ndarray, int]:
        """(log p(y_m | phi_k) of every model, the models left to adaptive Gauss-Hermite)."""
        if not on_grid:
            return pattern_log_marginal(yf, observed, draws[k], rule), 0
        row, unresolved = grid_log_marginal(patterns, draws[k])
        if unresolved.any():
            row[unresolved] = pattern_log_marginal(yf[unresolved], observed[unresolved], draws[k], rule)
        return row, int(unresolved.sum())

    out = np.empty((len(draws), y.shape[0]))
    fallback = 0
    # draws in threads (the grid kernel and NumPy's products release the GIL; each draw's row is computed alone,
    # so the result is the same at any thread count), each product on one BLAS thread: the products are small, and
    # extra BLAS threads only spin (CPU per draw at 755 x 1,351, 3PL: 27 ms with one thread, 80 ms with two)
    pool = ThreadPoolExecutor(threads or numba.config.NUMBA_NUM_THREADS)
    try:
        with progress_bar(len(draws), "marginal likelihood", enabled=progress) as advance, blas_threads(1):
            for k, (row, unresolved) in enumerate(pool.map(draw_marginal, range(len(draws)))):
                out[k] = row
                fallback += unresolved
                advance(1)
    finally:  # an interrupt or error: the draws not started are dropped, not waited for
        pool.shutdown(cancel_futures=True)
    sampled = samples is not None or (nodes is None and dims not in GH_NODES)
    method = "shared grid" if on_grid else ("importance sampling" if sampled else "adaptive Gauss-Hermite")
    return xr.DataArray(out.reshape(post.sizes["chain"], post.sizes["draw"], -1), dims=("chain", "draw", "model"),
                        coords={"chain": post["chain"].values, "draw": post["draw"].values,
                                "model": responses["model"].values}, name="model_marginal",
                        attrs={"integration": method, "adaptive_fallback_evaluations": fallback})


def _relative_efficiency(tree: xr.DataTree) -> float:
    """ArviZ's r_eff (mean ESS / samples) over the item parameters: the draws PSIS reweights."""
    post = tree["posterior"].to_dataset()
    if post.sizes["chain"] == 1:
        return 1.0
    names = [n for n in _ITEM_VARIABLES if n in post]
    ess = az.ess(post[names], method="mean")
    return float(np.mean(np.concatenate([ess[n].values.ravel() for n in names]))) / (post.sizes["chain"] * post.sizes["draw"])


def _psis(log_lik: xr.DataArray, reff: float) -> ELPDDataLOO:
    """ArviZ PSIS-LOO of a (chain, draw, unit) log-likelihood; the posterior group is a placeholder
    (``az.loo`` requires one, and r_eff, the only thing it would be read for, is given)."""
    dt = xr.DataTree.from_dict({"posterior": xr.Dataset({"dummy": log_lik.isel({log_lik.dims[-1]: 0}, drop=True)}),
                                "log_likelihood": log_lik.to_dataset(name="y")})
    return az.loo(dt, pointwise=True, var_name="y", reff=reff)


def loo_models(tree: xr.DataTree, *, nodes: int | None = None, samples: int | None = None, seed: int = 0,
               progress: bool = True) -> ELPDDataLOO:
    """Leave-one-model-out PSIS-LOO with each held-out model's ability integrated out.

    Returns ArviZ's ``ELPDDataLOO`` with ``elpd_i`` and ``pareto_k`` over ``model``.
    """
    ll = marginal_log_likelihood(tree, nodes=nodes, samples=samples, seed=seed, progress=progress)
    return _psis(ll, _relative_efficiency(tree))


def loo_cells(tree: xr.DataTree, *, chunk_cells: int = 200_000, progress: bool = True) -> ELPDDataLOO:
    """PSIS-LOO over single responses, computed chunk by chunk (bounded memory).

    The pointwise log-likelihood of about ``chunk_cells`` responses at a time is built, smoothed
    by the vectorized :func:`bayesirt.comparison.psis.psis_loo` (ArviZ's algorithm; ArviZ's ``az.loo``, its
    test oracle, smooths one cell at a time and is 8-11x slower) and discarded. Returns ArviZ's
    ``ELPDDataLOO`` with ``elpd_i`` and ``pareto_k`` over ``cell`` (with ``item`` and ``model``
    coordinates) and ArviZ's totals: elpd = sum, se = sqrt(n var(elpd_i)) with ddof 1, p = sum.
    """
    post = tree["posterior"].to_dataset()
    responses = from_observed_data(tree)
    reff = _relative_efficiency(tree)
    n_items = responses.sizes["item"]
    per_chunk = max(1, chunk_cells // max(1, responses.sizes["model"]))
    parts = []
    with progress_bar(n_items, "PSIS-LOO over responses", enabled=progress) as advance:
        for start in range(0, n_items, per_chunk):
            block = slice(start, start + per_chunk)
            ll = pointwise_log_likelihood(post.isel(item=block), responses.isel(item=block))
            res = psis_loo(ll.values.reshape(-1, ll.sizes["cell"]), r_eff=reff)
            coords = {"item": ll["item"], "model": ll["model"]}
            parts.append(xr.Dataset({"elpd_i": ("cell", res.elpd_i), "p_loo_i": ("cell", res.p_loo_i),
                                     "pareto_k": ("cell", res.pareto_k)}, coords=coords))
            advance(min(per_chunk, n_items - start))
    cells = xr.concat(parts, dim="cell")
    n = cells.sizes["cell"]
    n_samples = post.sizes["chain"] * post.sizes["draw"]
    return ELPDDataLOO(elpd=float(cells["elpd_i"].sum()), se=float(np.sqrt(n * cells["elpd_i"].var(ddof=1))),
                       p=float(cells["p_loo_i"].sum()), n_samples=n_samples, n_data_points=n, scale="log",
                       warning=bool((cells["pareto_k"] > res.good_k).any()), good_k=res.good_k,
                       elpd_i=cells["elpd_i"], pareto_k=cells["pareto_k"])


def _kfold_task(task: dict) -> tuple[np.ndarray, int, float]:
    """Held-out models' log predictive densities of one fold, the posterior sample count and the
    seconds the refit and its scoring took."""
    from bayesirt.inference.fitting import fit  # imported in the worker

    start = time.perf_counter()
    train, test = task["train"], task["test"]
    tree = fit(train, task["spec"], seed=task["seed"], progress=False, cores=1, **task["fit_options"])
    ll = marginal_log_likelihood(tree, test, progress=False, threads=1)  # a worker process: one core
    n = ll.sizes["chain"] * ll.sizes["draw"]
    return logsumexp(ll.values.reshape(n, -1), axis=0) - np.log(n), n, time.perf_counter() - start


class _RefitLines:
    """One line per finished K-fold refit: which, how long it took, and the time left at the pace
    so far (wall time per finished refit, whatever the number of workers, times the refits left)."""

    def __init__(self, names: list[str], enabled: bool):
        self.names, self.enabled = names, enabled
        self.start, self.done = time.perf_counter(), 0

    def __call__(self, index: int, result: tuple) -> None:
        self.done += 1
        left = len(self.names) - self.done
        elapsed = time.perf_counter() - self.start
        eta = (f"about {format_duration(elapsed / self.done * left)} left" if left else "all done")
        stage(f"refit {self.done} of {len(self.names)} done ({self.names[index]}, {format_duration(result[2])}); "
              f"{format_duration(elapsed)} elapsed, {eta}", enabled=self.enabled)


def kfold_models(responses: xr.Dataset, spec, *, folds: int = 5, seed: int = 0, full_fit: xr.DataTree | None = None,
                 full_lpd: float | None = None, workers: int | None = None, scheduler: str | None = None,
                 progress: bool = True, **fit_options) -> ELPDDataLOOKFold:
    """Exact K-fold cross-validation by model (SAFE App. C).

    Models are split into ``folds`` groups by a permutation drawn from ``seed``. For each fold the
    spec is fitted to the other models (same ``fit_options`` as the full fit, e.g. method,
    draws) and every held-out model is scored by log mean_s p(y_m | phi_s), its ability
    integrated out. ``p`` is lpd(full fit) - elpd when ``full_lpd`` (sum over models of log mean_s
    p(y_m | phi_s) under the full fit; a PSIS-LOO result's ``elpd + p``) or ``full_fit`` (to compute
    it) is given, else NaN.
    """
    if full_lpd is None and full_fit is not None:
        ll = marginal_log_likelihood(full_fit, progress=False)
        n = ll.sizes["chain"] * ll.sizes["draw"]
        full_lpd = float((logsumexp(ll.values.reshape(n, -1), axis=0) - np.log(n)).sum())
    return kfold_specs(responses, {"spec": spec}, folds=folds, seed=seed, full_lpd={"spec": full_lpd},
                       workers=workers, scheduler=scheduler, progress=progress, **fit_options)["spec"]


def kfold_specs(responses: xr.Dataset, specs: dict, *, folds: int = 5, seed: int = 0,
                full_lpd: dict[str, float | None] | None = None, workers: int | None = None,
                scheduler: str | None = None, progress: bool = True, **fit_options) -> dict[str, ELPDDataLOOKFold]:
    """:func:`kfold_models` for several specs on the same folds, every (spec, fold) refit in one
    pool of workers (no idle worker between specs, one cluster start). Specs are refitted in the
    order given: put the slowest first."""
    n_models = responses.sizes["model"]
    check_int(folds, name="folds", caller="kfold_specs", low=2, high=n_models)  # at most one model per fold
    order = np.random.default_rng(seed).permutation(n_models)
    assignment = np.empty(n_models, dtype=int)
    assignment[order] = np.arange(n_models) % folds
    splits = [(responses.isel(model=np.flatnonzero(assignment != k)), responses.isel(model=np.flatnonzero(assignment == k)))
              for k in range(folds)]
    tasks = [{"train": train, "test": test, "spec": spec, "seed": seed + k, "fit_options": fit_options}
             for spec in specs.values() for k, (train, test) in enumerate(splits)]
    names = [f"{label}, fold {k + 1} of {folds}" for label in specs for k in range(folds)]
    lines = _RefitLines(names, progress)
    results = parallel_map(_kfold_task, tasks, workers=workers, scheduler=scheduler, progress=False,
                           description=f"{folds}-fold refits", on_result=lines)
    out = {}
    for j, label in enumerate(specs):
        elpd = np.empty(n_models)
        for k, (values, _, _) in enumerate(results[j * folds:(j + 1) * folds]):
            elpd[assignment == k] = values
        lpd = (full_lpd or {}).get(label)
        out[label] = ELPDDataLOOKFold(
            elpd=float(elpd.sum()), se=float(np.sqrt(n_models * elpd.var(ddof=1))),
            p=np.nan if lpd is None else float(lpd - elpd.sum()), n_samples=results[j * folds][1],
            n_data_points=n_models, scale="log", warning=False, good_k=None,
            elpd_i=xr.DataArray(elpd, dims="model", coords={"model": responses["model"].values}, name="elpd_i"),
            n_folds=folds)
    return out


def compare(fits: dict[str, xr.DataTree], *, unit: str = "model", weights: str = DEFAULT_WEIGHTS,
            progress: bool = True) -> pd.DataFrame:
    """Compare fitted specs of the same responses by cross-validated elpd (:func:`compare_table`).

    Parameters
    ----------
    fits : dict of str to DataTree
        Fits from :func:`bayesirt.inference.fit` of the same responses, keyed by label.
    unit : {"model", "cell"}
        ``"model"``: leave-one-model-out PSIS-LOO with each model's ability integrated out
        (:func:`loo_models`); ``"cell"``: PSIS-LOO over single responses (:func:`loo_cells`).
    weights : {"stacking", "pseudo-bma+"}
        Which model weights the ``weight`` column holds (both are columns of their own).
    """
    check_choice(unit, UNITS, name="unit", caller="compare")
    score = loo_models if unit == "model" else loo_cells
    return compare_table({label: score(tree, progress=progress) for label, tree in fits.items()}, weights=weights)


def compare_table(results: dict[str, ELPDData], *, weights: str = DEFAULT_WEIGHTS) -> pd.DataFrame:
    """One row per spec: elpd, SE, difference from the best and its SE, p, model weights, bad-k count.

    All results must score the same units (the same models, or the same cells). Ranks,
    differences, ``dse`` and ``p_worse`` (probability the spec predicts worse than the best) are
    ArviZ's (``az.compare``, unrounded). Both model weights are computed on the log scale
    (:mod:`bayesirt.comparison.stacking`; ArviZ's stacking underflows to equal weights when a unit
    is a model's whole response pattern): ``stacking_weight`` (the best predictive mixture) and
    ``pseudo_bma_plus_weight`` (Bayesian-bootstrap pseudo-BMA, about the chance of having the highest
    elpd); ``weight`` repeats the one named by ``weights`` ("stacking" or "pseudo-bma+").
    ``method`` says how each elpd was estimated and ``bad_k`` counts units with Pareto k above
    ArviZ's threshold.
    """
    check_choice(weights, WEIGHTS, name="weights", caller="compare_table")
    if len(results) < 2:
        raise ConfigError("compare_table: a comparison needs at least two fits; give two or more specs or dimensions")
    sizes = {name: r.n_data_points for name, r in results.items()}
    if len(set(sizes.values())) > 1:
        raise DataError(f"the fits score different numbers of units {sizes}; compare fits of the same data")
    with np.errstate(divide="ignore", invalid="ignore"):  # ArviZ's own stacking underflows; its weights are replaced
        table = az.compare(results, round_to="none")
    out = table[["rank", "elpd", "se", "elpd_diff", "dse", "p_worse", "p", "weight"]].copy()
    pointwise = np.column_stack([results[n].elpd_i.values.ravel() for n in out.index])
    out["stacking_weight"] = stacking_weights(pointwise)
    out["pseudo_bma_plus_weight"] = pseudo_bma_plus_weights(pointwise)
    out["weight"] = out["stacking_weight" if weights == "stacking" else "pseudo_bma_plus_weight"]
    out["method"] = [results[n].kind for n in out.index]
    out["bad_k"] = [int((results[n].pareto_k > results[n].good_k).sum()) if results[n].pareto_k is not None else 0
                    for n in out.index]
    out["n_units"] = [results[n].n_data_points for n in out.index]
    out.index.name = "spec"
    return out


def elpd_dataset(results: dict[str, ELPDData]) -> xr.Dataset:
    """Pointwise elpd and Pareto k of every spec, stacked along ``spec`` (for the saved output)."""
    elpd = xr.concat([r.elpd_i.rename(None) for r in results.values()], dim=pd.Index(list(results), name="spec"))
    data = {"elpd_i": elpd}
    ks = [r.pareto_k if r.pareto_k is not None else xr.full_like(r.elpd_i, np.nan) for r in results.values()]
    data["pareto_k"] = xr.concat([k.rename(None) for k in ks], dim=pd.Index(list(results), name="spec"))
    ds = xr.Dataset(data)
    ds.attrs["methods"] = json.dumps({n: r.kind for n, r in results.items()})
    return ds
