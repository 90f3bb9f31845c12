"""Fit a spec to response data by NUTS (nutpie or PyMC), ADVI (mean-field, full-rank) or MAP.

Every method returns the same type: an ``xarray.DataTree`` with the groups ``posterior``,
``sample_stats``, ``observed_data`` and ``constant_data`` (and ``log_likelihood`` on request),
labelled by ``item`` and ``model``, with the spec text, seed, settings, package versions and
timings in its attributes.
"""

from __future__ import annotations

import json
import os
import platform
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pymc as pm
import xarray as xr

from bayesirt.data.responses import validate_responses
from bayesirt.errors import BayesIRTError
from bayesirt.models.logistic import build_logistic, pointwise_log_likelihood
from bayesirt.models.mirt import align_signs, build_mirt
from bayesirt.specs import IRTSpec, MIRTSpec, load_spec

__all__ = ["fit", "sample_model", "METHODS", "SAMPLERS"]

METHODS = ("nuts", "advi", "fullrank_advi", "map")
SAMPLERS = ("nutpie", "pymc")
_MAP_FTOL = 1e-14  # see sample_model's map_tolerance
_PACKAGES = ("bayesirt", "pymc", "pytensor", "arviz", "nutpie", "numpy", "xarray")


def _check_choice(caller: str, param: str, value, allowed) -> None:
    if value not in allowed:
        raise BayesIRTError(f"The {param!r} parameter of {caller} must be one of {set(allowed)}. "
                            f"Got {value!r} instead.")


def _check_positive(caller: str, param: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise BayesIRTError(f"The {param!r} parameter of {caller} must be a positive integer. Got {value!r} instead.")


def _check_settings(caller, method, sampler, draws, tune, chains, cores, advi_iterations) -> None:
    _check_choice(caller, "method", method, METHODS)
    _check_choice(caller, "sampler", sampler, SAMPLERS)
    for name, value in (("draws", draws), ("tune", tune), ("chains", chains), ("advi_iterations", advi_iterations),
                        ("cores", 1 if cores is None else cores)):
        _check_positive(caller, name, value)


def fit(
    responses: xr.Dataset,
    spec: IRTSpec | MIRTSpec | str | Path = "2pl",
    *,
    method: str = "nuts",
    sampler: str = "nutpie",
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    cores: int | None = None,
    seed: int = 0,
    advi_iterations: int = 50_000,
    advi_tolerance: float = 1e-4,
    advi_learning_rate: float | None = None,
    log_likelihood: bool = False,
    progress: bool = True,
) -> xr.DataTree:
    """Fit an IRT spec to a response Dataset.

    Parameters
    ----------
    responses : xarray.Dataset
        Response data from :mod:`bayesirt.data`.
    spec : IRTSpec, MIRTSpec, str or path, default "2pl"
        A loaded spec, a built-in name (``models/*.toml``) or the path of a spec file: 1PL-4PL
        (:mod:`bayesirt.models.logistic`) or MIRT (:mod:`bayesirt.models.mirt`).
    method : {"nuts", "advi", "fullrank_advi", "map"}, default "nuts"
        NUTS is the reference; ADVI is faster and under-disperses; MAP gives a point estimate
        (one draw, no uncertainty).
    sampler : {"nutpie", "pymc"}, default "nutpie"
        NUTS implementation. nutpie is the default: on the same naive model it gave 2.4x-5x the
        minimum bulk ESS per second of PyMC's sampler across runs (``benchmarks/results/``).
    draws, tune, chains : int, defaults 1000, 1000, 4
        Per chain for NUTS (PyMC's and nutpie's conventions). For ADVI, ``draws`` is the number of
        draws taken from the fitted approximation (reported as one chain).
    cores : int, optional
        NUTS chains run at once. Default: ``min(chains, CPU count)``. Use 1 inside a worker that
        owns one core (as the SBC replicates do), so parallel fits do not oversubscribe the machine.
    seed : int, default 0
        Seeds every random choice; the same seed gives the same arrays.
    advi_iterations : int, default 50000
        Iteration cap for ADVI; a warning is recorded if it is reached before convergence.
    advi_tolerance : float, default 1e-4
        ADVI stops when the mean loss of successive 500-iteration windows changes by less than
        this (relative) twice in a row.
    advi_learning_rate : float, optional
        Adam step size. Default 0.01 for mean-field ADVI (converged in about 3,000 iterations on a
        100 x 200 2PL, where PyMC's default adagrad had not after 50,000) and 0.001 for full-rank
        ADVI (at 0.01 its Cholesky factor diverged on that design; at 0.001 it converged on a
        20 x 60 2PL with posterior sds matching NUTS).
    log_likelihood : bool, default False
        Add the ``log_likelihood`` group (one value per draw and observed response; for LOO).
    progress : bool, default True
        Show progress bars.

    Returns
    -------
    xarray.DataTree
    """
    _check_settings("fit", method, sampler, draws, tune, chains, cores, advi_iterations)
    if not isinstance(spec, (IRTSpec, MIRTSpec)):
        spec = load_spec(spec)
    responses = validate_responses(responses)  # a hand-made Dataset gets the same checks as a file

    t0 = time.perf_counter()
    pm_model = (build_mirt if spec.kind == "mirt" else build_logistic)(responses, spec)
    build_s = time.perf_counter() - t0
    tree = sample_model(pm_model, method=method, sampler=sampler, draws=draws, tune=tune, chains=chains, cores=cores,
                        seed=seed, advi_iterations=advi_iterations, advi_tolerance=advi_tolerance,
                        advi_learning_rate=advi_learning_rate, progress=progress)
    timings = {"build_s": build_s} | json.loads(tree.attrs["bayesirt_timings"])
    extra_attrs = {k: v for k, v in tree.attrs.items() if k.startswith("advi_")}
    if hasattr(pm_model, "anchor_items"):
        extra_attrs["bayesirt_anchor_items"] = json.dumps([str(i) for i in pm_model.anchor_items])

    posterior = _label(tree["posterior"].to_dataset(), responses)
    if hasattr(pm_model, "anchor_items"):
        posterior = align_signs(posterior, pm_model.anchor_items)
    groups = {
        "posterior": posterior,
        "observed_data": responses[["responses"]].reset_coords(drop=True),
        "constant_data": _metadata(responses),
    }
    for extra in ("sample_stats", "variational_fit"):
        if extra in tree.children:
            groups[extra] = tree[extra].to_dataset()
    if log_likelihood:
        t0 = time.perf_counter()
        groups["log_likelihood"] = pointwise_log_likelihood(posterior, responses).to_dataset()
        timings["log_likelihood_s"] = time.perf_counter() - t0
    result = xr.DataTree.from_dict(groups)
    result.attrs = {
        "bayesirt_spec_name": spec.name,
        "bayesirt_spec_kind": spec.kind,
        "bayesirt_spec_source": spec.source,
        "bayesirt_spec_text": spec.text,
        "bayesirt_settings": tree.attrs["bayesirt_settings"],
        "bayesirt_versions": json.dumps(_versions()),
        "bayesirt_timings": json.dumps({k: round(v, 3) for k, v in timings.items()}),
        "bayesirt_data_name": str(responses.attrs.get("name", "")),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **extra_attrs,
    }
    return result


def sample_model(
    pm_model: pm.Model,
    *,
    method: str = "nuts",
    sampler: str = "nutpie",
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    cores: int | None = None,
    seed: int = 0,
    advi_iterations: int = 50_000,
    advi_tolerance: float = 1e-4,
    advi_learning_rate: float | None = None,
    map_tolerance: float | None = None,
    progress: bool = True,
) -> xr.DataTree:
    """Run NUTS, ADVI or MAP on a built ``pm.Model`` (the engine behind :func:`fit`).

    Parameters
    ----------
    pm_model : pymc.Model
        Any model, e.g. from :func:`bayesirt.models.logistic.build_logistic` or
        :func:`bayesirt.models.family_dif.build_family_dif`.
    method, sampler, draws, tune, chains, cores, seed, advi_iterations, advi_tolerance, advi_learning_rate, progress
        As in :func:`fit` (same defaults and meaning).
    map_tolerance : float, optional
        MAP only. Default: SciPy's L-BFGS-B stopping rules (what :func:`fit` uses). A number is
        L-BFGS-B's ``gtol`` (largest gradient component of the log posterior in the unconstrained
        space), with the relative-decrease test ``ftol`` tightened to 1e-14 so that the gradient
        test decides; 1e-14 is about 45 machine epsilons (at 1e-15 the line search ends abnormally
        before the gradient test is met).

    Returns
    -------
    xarray.DataTree
        ``posterior`` (the model's free variables and Deterministics, labelled by the model's
        coords; transformed values dropped), ``sample_stats`` (NUTS) or ``variational_fit``
        (ADVI: the loss history). Attributes ``bayesirt_settings`` and ``bayesirt_timings``
        (JSON) and, for ADVI, ``advi_iterations_run``, ``advi_converged``, ``advi_final_loss``.
    """
    _check_settings("sample_model", method, sampler, draws, tune, chains, cores, advi_iterations)
    if map_tolerance is not None and not (isinstance(map_tolerance, float) and 0 < map_tolerance < 1):
        raise BayesIRTError(f"The 'map_tolerance' parameter of sample_model must be a float in (0, 1). "
                            f"Got {map_tolerance!r} instead.")
    timings: dict = {}
    settings: dict = {"method": method, "seed": seed}
    attrs: dict = {}
    if method == "nuts":
        settings |= {"sampler": sampler, "draws": draws, "tune": tune, "chains": chains}
        tree = _nuts(pm_model, sampler, draws, tune, chains, cores, seed, progress, timings)
    elif method in ("advi", "fullrank_advi"):
        if advi_learning_rate is None:
            advi_learning_rate = 0.01 if method == "advi" else 0.001
        settings |= {"draws": draws, "advi_iterations": advi_iterations, "advi_tolerance": advi_tolerance,
                     "advi_learning_rate": advi_learning_rate, "optimizer": "adam"}
        tree, attrs = _advi(
            pm_model, method, advi_iterations, advi_tolerance, advi_learning_rate, draws, seed, progress, timings
        )
    else:
        if map_tolerance is not None:
            settings |= {"map_tolerance": map_tolerance}
        tree = _map(pm_model, seed, progress, timings, map_tolerance)
    posterior = tree["posterior"].to_dataset()
    keep = [v.name for v in pm_model.free_RVs + pm_model.deterministics if v.name in posterior]
    groups = {"posterior": posterior[keep]}
    for extra in ("sample_stats", "variational_fit"):
        if extra in tree.children:
            groups[extra] = tree[extra].to_dataset()
    result = xr.DataTree.from_dict(groups)
    result.attrs = {"bayesirt_settings": json.dumps(settings), "bayesirt_timings": json.dumps(timings), **attrs}
    return result


def _nuts(pm_model, sampler, draws, tune, chains, cores, seed, progress, timings) -> xr.DataTree:
    cores = min(chains, cores or os.cpu_count() or 1)
    if sampler == "nutpie":
        import nutpie

        t0 = time.perf_counter()
        compiled = nutpie.compile_pymc_model(pm_model)
        timings["compile_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        tree = nutpie.sample(
            compiled, draws=draws, tune=tune, chains=chains, cores=cores, seed=seed,
            save_warmup=False, progress_bar=progress,
        )
        timings["sample_s"] = time.perf_counter() - t0
        return tree
    t0 = time.perf_counter()
    with pm_model:
        step = pm.NUTS()  # compiles logp and gradient
    timings["compile_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    tree = pm.sample(
        draws=draws, tune=tune, chains=chains, cores=cores, random_seed=seed, step=step, model=pm_model,
        progressbar=progress, compute_convergence_checks=False,
    )
    timings["sample_s"] = time.perf_counter() - t0
    return tree


class _LossPlateau:
    """Stop ADVI when the mean loss over successive windows changes by less than ``tolerance``
    (relative) for ``patience`` windows in a row. Compares window means, not single iterations,
    because the stochastic ELBO estimate is noisy at every step."""

    def __init__(self, tolerance: float, window: int = 500, patience: int = 2):
        self.tolerance, self.window, self.patience = tolerance, window, patience
        self.calm = 0
        self.previous = None
        self.stopped_at = None

    def __call__(self, approx, loss_hist, i):
        if i == 0 or i % self.window:
            return
        current = float(np.mean(loss_hist[-self.window:]))
        if self.previous is not None:
            change = abs(current - self.previous) / max(abs(current), 1e-12)
            self.calm = self.calm + 1 if change < self.tolerance else 0
            if self.calm >= self.patience:
                self.stopped_at = i
                raise StopIteration(f"ADVI loss settled at iteration {i}")
        self.previous = current


def _advi(pm_model, method, iterations, tolerance, learning_rate, draws, seed, progress, timings):
    plateau = _LossPlateau(tolerance)
    t0 = time.perf_counter()
    approx = pm.fit(
        n=iterations, method=method, model=pm_model, random_seed=seed, progressbar=progress,
        obj_optimizer=pm.adam(learning_rate=learning_rate), callbacks=[plateau],
    )
    timings["fit_s"] = time.perf_counter() - t0
    loss = np.asarray(approx.hist)
    tree = approx.sample(draws, random_seed=seed)
    attrs = {
        # PyMC's callback counts steps from 1, and on StopIteration keeps the loss history of all
        # but the last step, so the step count is the callback's, not the history's length.
        "advi_iterations_run": int(plateau.stopped_at or loss.size),
        "advi_converged": int(plateau.stopped_at is not None),
        "advi_final_loss": float(np.mean(loss[-plateau.window:])),
    }
    stats = xr.Dataset({"advi_loss": ("iteration", loss)})
    return xr.DataTree.from_dict({"posterior": tree["posterior"].to_dataset(), "variational_fit": stats}), attrs


def _map(pm_model, seed, progress, timings, tolerance=None) -> xr.DataTree:
    options = {} if tolerance is None else {"options": {"gtol": tolerance, "ftol": _MAP_FTOL}}
    t0 = time.perf_counter()
    point = pm.find_MAP(
        model=pm_model, random_seed=seed, jitter=False, progressbar=progress, return_inferencedata=False, **options
    )
    timings["optimize_s"] = time.perf_counter() - t0
    names = [v.name for v in pm_model.free_RVs + pm_model.deterministics]
    dims = pm_model.named_vars_to_dims
    data = {
        n: (("chain", "draw", *dims.get(n, ())), np.asarray(point[n])[None, None, ...]) for n in names
    }
    coords = {d: np.asarray(pm_model.coords[d]) for n in names for d in dims.get(n, ())
              if pm_model.coords.get(d) is not None}
    return xr.DataTree.from_dict({"posterior": xr.Dataset(data, coords={"chain": [0], "draw": [0], **coords})})


def _label(posterior: xr.Dataset, responses: xr.Dataset) -> xr.Dataset:
    """Attach the metadata coordinates."""
    meta = {}
    if "item" in posterior.dims:
        meta |= {"item": responses["item"].values, "item_group": ("item", responses["item_group"].values)}
    if "model" in posterior.dims:
        meta |= {
            "model": responses["model"].values,
            "family": ("model", responses["family"].values),
            "owner": ("model", responses["owner"].values),
        }
    return posterior.assign_coords(meta)


def _metadata(responses: xr.Dataset) -> xr.Dataset:
    names = ("item_group", "family", "owner")
    return xr.Dataset({n: responses[n].reset_coords(drop=True) for n in names if n in responses.coords})


def _versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in _PACKAGES:
        try:
            out[pkg] = version(pkg)
        except Exception:  # noqa: BLE001 (a missing optional package is recorded, not fatal)
            out[pkg] = "not installed"
    return out
