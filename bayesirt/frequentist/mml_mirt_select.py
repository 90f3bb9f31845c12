"""Choosing D for the item-level MIRT of SAFE App. C, and reading its loadings by benchmark.

- :func:`heldout_mirt`: K-fold cross-validation over models (persons). For each fold the item
  parameters are calibrated by :func:`~bayesirt.frequentist.mml_mirt.fit_mml_mirt` on the
  other models, and each held-out model is scored by the marginal likelihood of its whole
  response pattern (its ability integrated out on the same grid; nothing is refitted per model).
  The folds are those of :func:`bayesirt.comparison.loo.kfold_models` for the same seed (a
  permutation of the models from ``seed``, model ``order[j]`` in fold ``j % folds``). The table
  also carries the full-data log-likelihood, AIC and BIC (n = number of models).
- :func:`rotated_loadings`: slopes converted to standardized factor loadings
  ``lambda = (a / 1.702) / sqrt(1 + |a / 1.702|^2)`` (the normal-ogive metric in which factor
  loadings lie in [-1, 1]; R mirt's ``summary`` does the same) and rotated (oblimin by default,
  :func:`bayesirt.models.rotation.rotate`; for D = 1 only reflected to a positive sum).
- :func:`loadings_by_benchmark`: per item group (benchmark) and factor, the mean rotated
  loading of its items: App. C's "item loadings aggregated by benchmark" (e.g. at D = 1,
  HarmBench +0.92, SORRY-Bench +0.90 versus OR-Bench-Hard -0.64).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.errors import ConfigError, DataError
from bayesirt.utils.validation import check_choice
from bayesirt.frequentist.mml_mirt import MAX_DIMS, PRUNE, MIRTFit, fit_mml_mirt, mirt_model_loglik
from bayesirt.frequentist.mml_mirt_start import LOGISTIC_SCALE
from bayesirt.models.rotation import ROTATIONS, rotate
from bayesirt.utils.progress import progress_bar

__all__ = ["fit_dimensions", "dimensions_tree", "heldout_mirt", "rotated_loadings", "loadings_by_benchmark", "fold_assignment", "check_dim_list"]


def fold_assignment(n_models: int, folds: int, seed: int) -> np.ndarray:
    """Fold of each model: model ``order[j]`` goes to fold ``j % folds``, ``order`` a permutation from ``seed``."""
    if isinstance(folds, bool) or not isinstance(folds, (int, np.integer)) or not 2 <= folds <= n_models:
        raise ConfigError(f"folds must be an integer between 2 and the number of models ({n_models}); got {folds!r}")
    order = np.random.default_rng(seed).permutation(n_models)
    assignment = np.empty(n_models, dtype=int)
    assignment[order] = np.arange(n_models) % folds
    return assignment


def check_dim_list(dims, n_items: int) -> list[int]:
    """``dims`` as a sorted list of distinct integers in 1..4, each below ``n_items``; else ConfigError."""
    try:
        values = [int(d) for d in dims]
    except (TypeError, ValueError):
        raise ConfigError(f"dims must be a sequence of integers from 1 to {MAX_DIMS}, e.g. (1, 2, 3, 4); "
                          f"got {dims!r}") from None
    bad = [d for d in values if not 1 <= d <= MAX_DIMS or d >= n_items]
    if not values or bad or len(set(values)) != len(values):
        raise ConfigError(f"dims must be distinct integers from 1 to {MAX_DIMS}, each smaller than the number of "
                          f"items ({n_items}); got {list(dims)!r}")
    return sorted(values)


def heldout_mirt(responses: xr.Dataset, dims: Sequence[int] = (1, 2, 3, 4), folds: int = 5, *, seed: int = 0,
                 full_fits: Mapping[int, MIRTFit] | None = None, progress: bool = False,
                 **fit_options) -> xr.Dataset:
    """Cross-validated held-out marginal log-likelihood of the D-dimensional 2PL for each D.

    Parameters
    ----------
    responses : xarray.Dataset
        Response Dataset.
    dims : sequence of int
        Dimensionalities compared (default 1, 2, 3, 4).
    folds : int
        Folds over models (default 5): each fold's models are held out once.
    seed : int
        Seed of the fold assignment (:func:`fold_assignment`) and of the fits' start jitter.
    full_fits : mapping of int to MIRTFit, optional
        Full-data fits already made (e.g. by the job), reused for the in-sample columns; the
        missing ones are fitted here.
    progress : bool
        Show a progress bar over the fits.
    **fit_options
        Passed to :func:`~bayesirt.frequentist.mml_mirt.fit_mml_mirt` (``quadrature``,
        ``prune``, ``max_iter``, ``tol``, ``loading_prior``, ``threads``, ...).

    Returns
    -------
    xarray.Dataset
        One row per D on dim ``n_dims``: ``heldout_loglik`` (sum over all models, each scored
        by the fold that held it out), ``heldout_per_model`` (its mean per model),
        ``heldout_gain`` and ``heldout_gain_se`` (change from the previous D in the list and
        the standard error of that paired sum, ``sqrt(M) sd(per-model differences)``),
        ``loglik``, ``n_parameters``, ``aic``, ``bic``, ``iterations``, ``converged`` (full
        data), ``folds_converged``; and ``model_heldout_loglik`` (n_dims, model) and ``fold``
        (model). ``ds.drop_dims("model").to_dataframe()`` is the table.

    Raises
    ------
    ConfigError, DataError
        Bad ``dims`` or ``folds`` (ConfigError), or anything :func:`fit_mml_mirt` refuses (e.g. an
        item with no observed response among a fold's training models: DataError).
    """
    if not isinstance(responses, xr.Dataset) or "responses" not in responses:
        raise DataError("responses must be a response Dataset; build one with bayesirt.data.make_responses")
    n_items, n_models = responses.sizes["item"], responses.sizes["model"]
    dims = check_dim_list(dims, n_items)
    assignment = fold_assignment(n_models, folds, seed)
    full = dict(full_fits or {})
    scores = np.empty((len(dims), n_models))
    folds_converged = np.zeros(len(dims), dtype=int)
    todo = len(dims) * folds + sum(d not in full for d in dims)
    with progress_bar(todo, "MIRT held-out fits", enabled=progress) as advance:
        for row, d in enumerate(dims):
            if d not in full:
                full[d] = fit_mml_mirt(responses, d, seed=seed, **fit_options)
                advance(1)
            for k in range(folds):
                test = np.flatnonzero(assignment == k)
                train = responses.isel(model=np.flatnonzero(assignment != k))
                fold_fit = fit_mml_mirt(train, d, seed=seed + k, **fit_options)
                folds_converged[row] += fold_fit.converged
                scores[row, test] = mirt_model_loglik(fold_fit, responses.isel(model=test)).values
                advance(1)
    gain = np.full(len(dims), np.nan)
    gain_se = np.full(len(dims), np.nan)
    diff = np.diff(scores, axis=0)
    gain[1:] = diff.sum(1)
    gain_se[1:] = np.sqrt(n_models) * diff.std(1, ddof=1)
    fits = [full[d] for d in dims]
    mcoords = {k: v for k, v in responses.coords.items() if responses[k].dims == ("model",)}
    variables = {
        "heldout_loglik": ("n_dims", scores.sum(1)), "heldout_per_model": ("n_dims", scores.mean(1)),
        "heldout_gain": ("n_dims", gain), "heldout_gain_se": ("n_dims", gain_se),
        "loglik": ("n_dims", [f.loglik for f in fits]), "n_parameters": ("n_dims", [f.n_parameters for f in fits]),
        "aic": ("n_dims", [f.aic for f in fits]), "bic": ("n_dims", [f.bic for f in fits]),
        "iterations": ("n_dims", [f.iterations for f in fits]), "converged": ("n_dims", [f.converged for f in fits]),
        "folds_converged": ("n_dims", folds_converged),
        "model_heldout_loglik": (("n_dims", "model"), scores), "fold": ("model", assignment),
    }
    attrs = {"folds": int(folds), "seed": int(seed), "n_models": int(n_models), "n_items": int(n_items),
             "bic_n": "number of models (respondents)",
             "heldout": "marginal log-likelihood of each held-out model's responses, item parameters calibrated on "
                        "the other folds, ability integrated out",
             "quadrature": ", ".join(f"D={f.n_dims}: {f.attrs['quadrature']}/dim, {f.attrs['n_nodes']} nodes"
                                     for f in fits),
             "prune": float(fit_options.get("prune", PRUNE)),
             "loading_prior_sd": str(fits[0].attrs["loading_prior_sd"])}
    return xr.Dataset(variables, coords={"n_dims": dims, **mcoords}, attrs=attrs)


def rotated_loadings(fit: MIRTFit, rotation: str = "oblimin") -> xr.Dataset:
    """Standardized, rotated loadings of a fit.

    Parameters
    ----------
    fit : MIRTFit
    rotation : {"oblimin", "varimax", "none"}
        Applied to the standardized loadings (default oblimin, quartimin as in GPArotation).

    Returns
    -------
    xarray.Dataset
        ``loading`` (item, factor) with the item coordinates of the fit, and ``phi`` (``factor``,
        ``factor_``) the factor correlations (the identity for varimax or D = 1). Factors are
        reflected to positive loading sums and ordered by their sums of squares.
    """
    check_choice(rotation, ROTATIONS, name="rotation", caller="rotated_loadings")
    a = fit.loadings.values / LOGISTIC_SCALE
    std = a / np.sqrt(1.0 + (a**2).sum(1, keepdims=True))
    rot = rotate(std, rotation)
    factor = np.arange(1, fit.n_dims + 1)
    icoords = {k: v for k, v in fit.loadings.coords.items() if fit.loadings[k].dims == ("item",)}
    return xr.Dataset({"loading": (("item", "factor"), rot.loadings), "phi": (("factor", "factor_"), rot.phi)},
                      coords={**icoords, "factor": factor, "factor_": factor},
                      attrs={"rotation": rotation, "rotation_converged": int(np.all(rot.converged)),
                             "metric": "standardized: (a / 1.702) / sqrt(1 + |a / 1.702|^2)"})


def loadings_by_benchmark(fit: MIRTFit, item_group: Sequence[str] | None = None, *,
                          rotation: str = "oblimin") -> pd.DataFrame:
    """Rotated standardized loadings aggregated by benchmark (item group), as in SAFE App. C.

    Parameters
    ----------
    fit : MIRTFit
    item_group : sequence of str, optional
        One label per item; default the fit's ``item_group`` coordinate (the benchmark name of
        each item when the data were pooled from several files).
    rotation : {"oblimin", "varimax", "none"}
        See :func:`rotated_loadings`.

    Returns
    -------
    pandas.DataFrame
        One row per (``item_group``, ``factor``): ``n_items``, ``mean_loading``, ``sd_loading``,
        ``mean_abs_loading``. ``attrs`` hold the rotation and the factor correlations ``phi``.
    """
    rotated = rotated_loadings(fit, rotation)
    if item_group is None:
        if "item_group" not in fit.loadings.coords:
            raise DataError("the fit has no item_group coordinate; pass item_group with one label per item")
        groups = np.asarray(fit.loadings["item_group"].values).astype(str)
    else:
        groups = np.asarray(item_group).astype(str)
        if groups.shape != (fit.loadings.sizes["item"],):
            raise DataError(f"item_group must give one label per item ({fit.loadings.sizes['item']}); "
                            f"got {groups.size}")
    frame = pd.DataFrame(rotated["loading"].values, columns=rotated["factor"].values)
    frame["item_group"] = groups
    long = frame.melt(id_vars="item_group", var_name="factor", value_name="loading")
    table = (long.groupby(["item_group", "factor"], sort=True)["loading"]
             .agg(n_items="size", mean_loading="mean", sd_loading="std",
                  mean_abs_loading=lambda x: float(np.abs(x).mean()))
             .reset_index())
    table.attrs.update(rotation=rotation, n_dims=fit.n_dims, phi=rotated["phi"].values.tolist(),
                       metric=rotated.attrs["metric"])
    return table


def fit_dimensions(responses, dims, folds, seed, rotation, progress, fit_options):
    """Full-data fits, the held-out table and the loadings by benchmark (one call, so that
    :func:`~bayesirt.errors.recorded_warnings` collects the warnings of all of them)."""
    fits = {d: fit_mml_mirt(responses, d, seed=seed, **fit_options) for d in dims}
    table = heldout_mirt(responses, dims, folds, seed=seed, full_fits=fits, progress=progress, **fit_options)
    loadings = pd.concat([loadings_by_benchmark(fits[d], rotation=rotation).assign(n_dims=d) for d in dims],
                         ignore_index=True)
    return fits, table, loadings[["n_dims", "item_group", "factor", "n_items", "mean_loading", "sd_loading",
                                  "mean_abs_loading"]]


def dimensions_tree(fits: dict, table: xr.Dataset, rotation: str) -> xr.DataTree:
    """``/``: the D table with per-model held-out scores; ``/D<d>``: each full fit with its rotated loadings."""
    nodes = {"/": table}
    for d, fit in fits.items():
        rotated = rotated_loadings(fit, rotation)
        ds = fit.to_dataset().drop_vars([c for c in ("family", "owner", "model_id") if c in fit.abilities.coords])
        ds["rotated_loading"] = rotated["loading"]
        ds["phi"] = rotated["phi"]
        ds.attrs["rotation"] = rotation
        nodes[f"D{d}"] = ds
    return xr.DataTree.from_dict(nodes)
