"""Fit a spec to response data by NUTS (nutpie, PyMC, numpyro or blackjax), ADVI (mean-field, full-rank) or MAP.

Every method returns the same type: an ``xarray.DataTree`` laid out as ArviZ expects, so plain
ArviZ (``az.summary``, ``az.loo``, ``az.plot_forest``, ...) works on it with no bayesirt import:
``posterior`` holds the spec's parameters only (not the sampler's own coordinates), labelled by
``item`` and ``model``; ``observed_data["responses"]`` (item, model) with NaN where missing;
``constant_data`` the metadata ``item_group``, ``family`` and ``owner`` (kept out of the other
groups, so every group's coordinates agree); ``sample_stats`` (NUTS) or ``variational_fit``
(ADVI); and ``log_likelihood["responses"]`` on request. The spec text, seed, settings, package
versions and timings are in its attributes.

ADVI's driver (loss-plateau stop, learning-rate annealing) is :mod:`.advi`.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bayesirt.errors import ConfigError
from bayesirt.inference.methods import (ADVI_ITERATIONS, ADVI_LEARNING_RATE, ADVI_TOLERANCE, CHAINS, CORES, DRAWS,
                                       METHODS, MODEL_METHODS, SAMPLER, SEED, TUNE)
from bayesirt.inference.nutpie_settings import (NUTPIE_SETTINGS, responses_per_item,  # noqa: F401 (re-exported)
                                                 spec_nutpie_settings)
from bayesirt.models.specs import IRTSpec, MIRTSpec, load_spec
from bayesirt.utils.interrupts import check_interrupt
from bayesirt.utils.options import declare, option
from bayesirt.utils.outputs import package_versions
from bayesirt.utils.progress import progress_bar

if TYPE_CHECKING:  # annotations only: PyMC, PyTensor and xarray load when a model is fitted, not with --help
    import pymc as pm
    import xarray as xr

    from bayesirt.inference.nutpie_callback import DirectModel

__all__ = ["fit", "sample_model"]

_JAX_SAMPLERS = ("numpyro", "blackjax")  # PyMC's JAX NUTS (pymc.sampling.jax): the optional extra bayesirt[jax]
_XLA_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"  # what jax.monitoring reports per compilation
_MAP_FTOL = 1e-14  # see sample_model's map_tolerance
_JOINT_MAP = ("a joint MAP over abilities and items diverges on short tests; for the marginal MAP of the items "
              "(MAP-EM) with standard errors use bayesirt.fit_mml(responses, spec, priors=True), or the command line "
              "`bayesirt fit DATA --method map`")
_PACKAGES = ("bayesirt", "pymc", "pytensor", "arviz", "nutpie", "numpy", "xarray")



def _fit_rules(v: dict) -> str | None:
    """The rules across :func:`fit`'s options."""
    if v["thin"] > 1 and v["method"] != "nuts":
        return (f"thin applies to method='nuts' (it keeps every thin-th draw of each chain); got method={v['method']!r}. "
                "Leave thin at 1, or ask ADVI for fewer draws.")
    if v["advi_batch_size"] is not None and v["method"] not in ("advi", "fullrank_advi"):
        return (f"advi_batch_size applies to method='advi' or 'fullrank_advi'; got method={v['method']!r}. Leave it "
                "unset for this fit.")
    return None


def _check_jax(caller: str, sampler: str) -> None:
    # pymc.sampling.jax first: on import it gives JAX one CPU device per chain (XLA_FLAGS), before JAX starts.
    try:
        for module in ("pymc.sampling.jax", sampler):
            import_module(module)
    except ImportError as err:
        raise ConfigError(f"The 'sampler' parameter of {caller} is {sampler!r}, which needs the optional JAX "
                            f"packages ({err.name or sampler} is not installed): install with "
                            f"`pip install \"bayesirt[jax]\"`.") from err


def _check_sampler(caller: str, method: str, sampler: str) -> None:
    if method == "nuts" and sampler in _JAX_SAMPLERS:
        _check_jax(caller, sampler)


@declare(check=_fit_rules)
def fit(
    responses: xr.Dataset,
    spec: IRTSpec | MIRTSpec | str | Path = "2pl",
    *,
    method: str = option("nuts", "inference method", choices=METHODS, hints={"map": _JOINT_MAP}),
    sampler: str = SAMPLER,
    draws: int = DRAWS,
    tune: int = TUNE,
    chains: int = CHAINS,
    cores: int | None = CORES,
    seed: int = SEED,
    thin: int = option(1, "NUTS: keep every THIN-th draw of each chain", low=1),
    advi_iterations: int = ADVI_ITERATIONS,
    advi_tolerance: float = ADVI_TOLERANCE,
    advi_learning_rate: float | None = ADVI_LEARNING_RATE,
    advi_batch_size: int | None = option(None, "minibatch ADVI: observed cells per step (for matrices of millions "
                                               "of responses) [all]", type=int, low=1),
    log_likelihood: bool = option(False, "store the pointwise log-likelihood (for LOO)"),
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
    method : {"nuts", "advi", "fullrank_advi", "laplace"}, default "nuts"
        NUTS is the reference; ADVI is faster and under-disperses. "laplace" (2PL with fixed
        priors): one joint Gaussian (a Laplace approximation), for leaderboards too large for the
        others (:mod:`~bayesirt.inference.laplace`; ``tune``, ``chains``, ``sampler`` do not apply).
        ``"map"`` raises
        :class:`~bayesirt.errors.BayesIRTError`: a joint MAP over abilities and items diverges on
        short tests; the marginal MAP of the items (MAP-EM, with standard errors) is
        ``bayesirt.fit_mml(responses, spec, priors=True)`` (``bayesirt fit DATA --method map``).
    sampler : {"nutpie", "pymc", "numpyro", "blackjax"}, default "nutpie"
        NUTS implementation. nutpie is the default: on the same naive model it gave 2.4x-5x the
        minimum bulk ESS per second of PyMC's sampler across runs (``benchmarks/results/``). For a
        1PL-4PL spec with a lognormal or fixed slope (hierarchical item priors too), at any observed share,
        nutpie samples the same posterior written directly in numba
        (:mod:`~bayesirt.inference.nutpie_direct`: no PyTensor compilation; one build per machine and
        likelihood layout, 20-25 s from empty caches on a loaded machine, under 1 s warm), and for a MIRT spec
        (exploratory, or confirmatory with lognormal slopes; :mod:`~bayesirt.inference.direct_mirt`);
        ``bayesirt_settings`` records ``nutpie_model`` "direct" or "pymc".
        "numpyro" and "blackjax" are PyMC's JAX samplers (``pip install "bayesirt[jax]"``), for a
        machine with an accelerator; they run all chains at once (``cores`` does not apply) and
        JAX compiles the model on every fit (``compile_s`` in the timings: XLA compile time).
    draws, tune, chains : int, defaults 1000, 1000, 4
        Per chain for NUTS (PyMC's and nutpie's conventions). For ADVI, ``draws`` is the number of
        draws taken from the fitted approximation (reported as one chain).
    cores : int, optional
        NUTS chains run at once. Default: ``min(chains, CPU count)``. Use 1 inside a worker that
        owns one core (as the SBC replicates do), so parallel fits do not oversubscribe the machine.
    seed : int, default 0
        Seeds every random choice; the same seed gives the same arrays.
    thin : int, default 1
        NUTS only: keep every ``thin``-th of the ``draws`` of each chain in the posterior (``draws //
        thin`` per chain, labelled by their iteration); ``sample_stats`` keeps every iteration, so
        divergences and tree depths are counted over all of them. Thinned draws are closer to
        independent, so a posterior of a given size (and file) carries more effective draws: on the
        embedded ChemBench (2,854 items), 2 x 2,000 draws thinned by 2 gave a worst R-hat of 1.009 over
        its 8,584 parameters and 2 x 1,000 unthinned draws (the same file size) 1.014
        (``analyses/demo.toml``).
    advi_iterations : int, default 50000
        Iteration cap for ADVI; a warning is recorded if it is reached before convergence.
    advi_tolerance : float, default 1e-4
        With a constant learning rate, ADVI stops when the mean loss of successive 500-iteration
        windows changes by less than this (relative) twice in a row; with ``advi_batch_size``, also
        when it changes by less than two standard errors of that change (the minibatch noise).
        With the annealed default, the windows are 200 iterations, the loss has settled when one
        window's mean differs from the previous one by less than this (relative) or than two
        standard errors of the difference (the Monte Carlo noise of the loss), and then the rate
        drops to the next one, or the fit stops at the last.
    advi_learning_rate : float, optional
        Adam step size, constant through the fit. Default for mean-field ADVI: annealed, 0.1 then
        0.02, 0.004 and 0.0008 (:data:`ANNEAL_RATES`), each rate kept until the loss settles and the
        fit stopping when it settles at the last (see ``advi_tolerance``); on a 300 x 1,000 2PL this
        reaches a lower loss in 1,400 steps than a constant 0.01 did in 4,000, with the same
        correlations with the truth (``benchmarks/results/advi_pyirt.md``). For full-rank ADVI 0.001 (at 0.01 its Cholesky
        factor diverged on a 20 x 60 2PL; at 0.001 it converged with posterior sds matching NUTS).
    advi_batch_size : int, optional
        Minibatch ADVI (1PL-4PL specs): each step uses the likelihood of about this many observed
        cells drawn at random (in blocks of 4,096), scaled to the whole matrix (see
        :func:`~bayesirt.models.logistic.build_logistic`). Default: every cell at every step.
        On large matrices a step then costs the batch, not the matrix; the stochastic gradient
        needs more steps, which the loss-plateau rule counts.
    log_likelihood : bool, default False
        Add the ``log_likelihood`` group: ``responses`` (chain, draw, item, model), NaN where
        missing, for ``az.loo`` and ``az.loo_pit``; in long format (chain, draw, cell) when the
        matrix is mostly missing and large (see
        :func:`~bayesirt.models.logistic.log_likelihood_group`).
    progress : bool, default True
        Show progress bars.

    Returns
    -------
    xarray.DataTree
    """
    _check_sampler("fit", method, sampler)
    if not isinstance(spec, (IRTSpec, MIRTSpec)):
        spec = load_spec(spec)
    # import time: xarray, PyMC and the kernels load when a model is fitted, not when the CLI lists fit's options
    import xarray as xr
    from bayesirt.data.responses import to_observed_data, validate_responses  # import time, as above
    from bayesirt.inference.laplace import laplace_fit  # import time, as above
    from bayesirt.inference.direct_mirt import direct_mirt_eligible  # import time, as above
    from bayesirt.inference.nutpie_direct import direct_eligible  # import time, as above
    from bayesirt.models.logistic import build_logistic, log_likelihood_group  # import time, as above
    from bayesirt.models.mirt import align_signs, build_mirt  # import time, as above

    responses = validate_responses(responses)  # a hand-made Dataset gets the same checks as a file

    if advi_batch_size is not None and spec.kind == "mirt":
        raise ConfigError("advi_batch_size applies to method='advi' or 'fullrank_advi' with a 1PL-4PL spec; "
                          f"got a {spec.kind} spec. Leave it unset for this fit.")
    if method == "laplace":  # no PyMC model: the approximation works on the response matrix (inference.laplace)
        return laplace_fit(responses, spec, draws=draws, seed=seed, log_likelihood=log_likelihood, progress=progress)

    t0 = time.perf_counter()
    nutpie_nuts = method == "nuts" and sampler == "nutpie"
    # NUTS with nutpie on a 1PL-4PL: the posterior's log density and gradient written in numba
    # (inference.nutpie_direct), compiled once per machine and called by nutpie as a C callback, instead of
    # PyTensor's graph compiled by nutpie (2.5 s against 11.5 s from empty caches, 0.1 s against 4.2 s warm at
    # 300 x 1,000; benchmarks/nuts_numpyro.py); the same density (tests/test_nutpie_direct.py)
    # A MIRT spec likewise on inference.direct_mirt's numba density (tests/test_direct_mirt.py)
    direct = nutpie_nuts and (direct_mirt_eligible(responses, spec) if spec.kind == "mirt"
                              else direct_eligible(responses, spec))
    anchors = None
    if direct:
        build_s = time.perf_counter() - t0
        tree, pm_model, anchors = _sample_direct(responses, spec, draws, tune, chains, cores, seed, progress)
    else:
        if spec.kind == "mirt":
            pm_model = build_mirt(responses, spec)
        else:
            # NUTS with nutpie on a dense 1PL/2PL the direct model does not cover (a half-normal slope) evaluates
            # the likelihood and its gradient with the fused kernel (bayesirt.models.kernels): one evaluation at
            # 1,000 x 300 costs about a twelfth of the graph's
            pm_model = build_logistic(responses, spec, batch_size=advi_batch_size, fused_kernel=nutpie_nuts)
        anchors = getattr(pm_model, "anchor_items", None)
        build_s = time.perf_counter() - t0
        tree = sample_model(pm_model, method=method, sampler=sampler, draws=draws, tune=tune, chains=chains,
                            cores=cores, seed=seed, advi_iterations=advi_iterations, advi_tolerance=advi_tolerance,
                            advi_learning_rate=advi_learning_rate, progress=progress,
                            nutpie_settings=spec_nutpie_settings(spec, responses_per_item(responses)))
    timings = {"build_s": build_s} | json.loads(tree.attrs["bayesirt_timings"])
    extra_attrs = {k: v for k, v in tree.attrs.items() if k.startswith("advi_")}
    if anchors is not None:
        extra_attrs["bayesirt_anchor_items"] = json.dumps([str(i) for i in anchors])

    posterior = tree["posterior"].to_dataset()
    posterior = posterior[[v for v in pm_model.reported_variables if v in posterior]].reset_coords(drop=True)
    if anchors is not None:
        posterior = align_signs(posterior, anchors)
    if thin > 1:
        posterior = posterior.isel(draw=slice(None, None, thin))
    observed, constant = to_observed_data(responses)
    groups = {"posterior": posterior, "observed_data": observed, "constant_data": constant}
    for extra in ("sample_stats", "variational_fit"):
        if extra in tree.children:
            groups[extra] = tree[extra].to_dataset()
    if log_likelihood:
        t0 = time.perf_counter()
        groups["log_likelihood"] = log_likelihood_group(posterior, responses)
        timings["log_likelihood_s"] = time.perf_counter() - t0
    result = xr.DataTree.from_dict(groups)
    result.attrs = {
        "bayesirt_spec_name": spec.name,
        "bayesirt_spec_kind": spec.kind,
        "bayesirt_spec_source": spec.source,
        "bayesirt_spec_text": spec.text,
        "bayesirt_settings": json.dumps(json.loads(tree.attrs["bayesirt_settings"])
                                        | ({"nutpie_model": "direct" if direct else "pymc"} if nutpie_nuts else {})
                                        | ({"thin": thin} if thin > 1 else {})
                                        | ({"advi_batch_size": advi_batch_size} if advi_batch_size else {})),
        "bayesirt_versions": json.dumps(package_versions(_PACKAGES)),
        "bayesirt_timings": json.dumps({k: round(v, 3) for k, v in timings.items()}),
        "bayesirt_data_name": str(responses.attrs.get("name", "")),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **extra_attrs,
    }
    return result


@declare()
def sample_model(
    pm_model: pm.Model,
    *,
    method: str = option("nuts", "inference method", choices=MODEL_METHODS, renamed={"map": "joint_map"}),
    sampler: str = SAMPLER,
    draws: int = DRAWS,
    tune: int = TUNE,
    chains: int = CHAINS,
    cores: int | None = CORES,
    seed: int = SEED,
    advi_iterations: int = ADVI_ITERATIONS,
    advi_tolerance: float = ADVI_TOLERANCE,
    advi_learning_rate: float | None = ADVI_LEARNING_RATE,
    map_tolerance: float | None = option(None, "joint MAP: L-BFGS-B's gtol [SciPy's rules]", type=float, low=0,
                                         high=1, open=True),
    progress: bool = True,
    nutpie_settings: dict | None = option(None, "NUTS with nutpie: keyword arguments of nutpie.sample", type=dict),
) -> xr.DataTree:
    """Run NUTS, ADVI or MAP on a built ``pm.Model`` (the engine behind :func:`fit`).

    Parameters
    ----------
    pm_model : pymc.Model
        Any model, e.g. from :func:`bayesirt.models.logistic.build_logistic` or
        :func:`bayesirt.models.family_dif.build_family_dif`.
    method, sampler, draws, tune, chains, cores, seed, advi_iterations, advi_tolerance, advi_learning_rate, progress
        As in :func:`fit` (same defaults and meaning); ``method`` may also be ``"joint_map"``, the joint
        posterior mode (one draw), meant for models without abilities such as the audit's
        family-DIF model (with abilities on short tests it diverges, which is why :func:`fit`
        does not offer it).
    map_tolerance : float, optional
        MAP only. Default: SciPy's L-BFGS-B stopping rules. A number is
        L-BFGS-B's ``gtol`` (largest gradient component of the log posterior in the unconstrained
        space), with the relative-decrease test ``ftol`` tightened to 1e-14 so that the gradient
        test decides; 1e-14 is about 45 machine epsilons (at 1e-15 the line search ends abnormally
        before the gradient test is met).
    nutpie_settings : dict, optional
        NUTS with nutpie only: keyword arguments of ``nutpie.sample`` (its adaptation), recorded in
        the settings. Default: nutpie's defaults. :func:`fit` passes :func:`spec_nutpie_settings` for
        1PL-4PL specs.

    Returns
    -------
    xarray.DataTree
        ``posterior`` (the model's free variables and Deterministics, labelled by the model's
        coords; transformed values dropped), ``sample_stats`` (NUTS) or ``variational_fit``
        (ADVI: the loss history). Attributes ``bayesirt_settings`` and ``bayesirt_timings``
        (JSON) and, for ADVI, ``advi_iterations_run``, ``advi_converged``, ``advi_final_loss``.
    """
    _check_sampler("sample_model", method, sampler)
    import xarray as xr  # import time, as in fit

    from bayesirt.inference.advi import ANNEAL_RATES, run_advi  # import time: ADVI loads PyMC

    timings: dict = {}
    settings: dict = {"method": method, "seed": seed}
    attrs: dict = {}
    if method == "nuts":
        settings |= nuts_settings(sampler, draws, tune, chains, nutpie_settings)
        tree = _nuts(pm_model, sampler, draws, tune, chains, cores, seed, progress, timings, nutpie_settings or {})
    elif method in ("advi", "fullrank_advi"):
        if advi_learning_rate is None:
            rates = ANNEAL_RATES if method == "advi" else (0.001,)
        else:
            rates = (advi_learning_rate,)
        settings |= {"draws": draws, "advi_iterations": advi_iterations, "advi_tolerance": advi_tolerance,
                     "advi_learning_rate": rates[0] if len(rates) == 1 else list(rates), "optimizer": "adam"}
        tree, attrs = run_advi(pm_model, method, advi_iterations, advi_tolerance, rates, draws, seed, progress, timings)
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


def nuts_settings(sampler, draws, tune, chains, nutpie_settings) -> dict:
    """The settings a NUTS run records: sampler, draws, tune, chains and nutpie's adaptation keywords."""
    settings = {"sampler": sampler, "draws": draws, "tune": tune, "chains": chains}
    if sampler == "nutpie" and nutpie_settings:
        settings["nutpie"] = dict(nutpie_settings)
    return settings


def _sample_direct(responses, spec, draws, tune, chains, cores, seed,
                   progress) -> tuple[xr.DataTree, DirectModel, np.ndarray | None]:
    """NUTS by nutpie on :func:`~bayesirt.inference.nutpie_direct.direct_model` (a MIRT spec:
    :func:`~bayesirt.inference.direct_mirt.direct_mirt_model`): the tree :func:`sample_model` would return,
    the model (its ``reported_variables``) and an exploratory MIRT's anchor items (else None)."""
    import nutpie  # noqa: F401  (imported before the timer, as in _nuts; here, not at the top: the import is slow)
    import xarray as xr  # import time, as in fit

    from bayesirt.inference.direct_mirt import direct_mirt_model  # import time, as below
    from bayesirt.inference.nutpie_direct import direct_model  # import time: the numba kernel compiles on import

    timings: dict = {}
    t0 = time.perf_counter()
    model, anchors = direct_mirt_model(responses, spec) if spec.kind == "mirt" else (direct_model(responses, spec),
                                                                                      None)
    timings["compile_s"] = time.perf_counter() - t0
    nutpie_settings = spec_nutpie_settings(spec, responses_per_item(responses))
    tree = run_nutpie(model.compiled, draws, tune, chains, min(chains, cores or os.cpu_count() or 1), seed, progress,
                      timings, nutpie_settings or {})
    posterior = tree["posterior"].to_dataset()
    result = xr.DataTree.from_dict({"posterior": model.reported(posterior) if model.reported else posterior,
                                    "sample_stats": tree["sample_stats"].to_dataset()})
    settings = {"method": "nuts", "seed": seed} | nuts_settings("nutpie", draws, tune, chains, nutpie_settings)
    result.attrs = {"bayesirt_settings": json.dumps(settings), "bayesirt_timings": json.dumps(timings)}
    return result, model, anchors


def run_nutpie(compiled, draws, tune, chains, cores, seed, progress, timings, nutpie_settings) -> xr.DataTree:
    """nutpie's NUTS, its progress in bayesirt's bar or lines (draws done of all chains, the time left
    estimated from their rate, the phase). Not ``nutpie.sample``'s blocking call: that one catches
    an interrupt and returns the draws so far, NaN for the rest, as if finished; here an interrupt
    (or any error) cancels the chains and is raised."""
    import nutpie  # here, not at the top: importing nutpie is slow and only NUTS needs it

    t0 = time.perf_counter()
    state = {"done": 0, "phase": "warm-up"}
    with progress_bar(chains * (tune + draws), f"NUTS ({chains} chains x {tune:,} warm-up + {draws:,} draws)",
                      enabled=progress, detail=lambda: state["phase"]) as advance:

        def report(chain_progress) -> None:  # on nutpie's thread, every progress_rate ms
            done = sum(c.finished_draws for c in chain_progress)
            state["phase"] = "warm-up" if any(c.started and c.tuning for c in chain_progress) else "sampling"
            advance(done - state["done"])
            state["done"] = done

        sampler = nutpie.sample(
            compiled, draws=draws, tune=tune, chains=chains, cores=cores, seed=seed, save_warmup=False,
            progress_bar=False, progress_callback=report, progress_rate=500, blocking=False, **nutpie_settings,
        )
        try:
            tree = sampler.wait()
        except BaseException:
            sampler.cancel()
            raise
    timings["sample_s"] = time.perf_counter() - t0
    return tree


def _nuts(pm_model, sampler, draws, tune, chains, cores, seed, progress, timings, nutpie_settings) -> xr.DataTree:
    import pymc as pm  # import time: PyMC loads when a model is sampled, not with the CLI's --help
    import pytensor

    cores = min(chains, cores or os.cpu_count() or 1)
    if sampler == "nutpie":
        import nutpie

        t0 = time.perf_counter()
        # IEEE arithmetic in the logp graph: with fast-math, LLVM rounds differently where nutpie inlines a freshly
        # compiled graph than where it links one loaded from the cache, so a fit's first run on a machine gave other
        # draws than later runs (tests/test_reproducibility.py). The likelihood kernel uses none either.
        with pytensor.config.change_flags(numba__fastmath=False):
            compiled = nutpie.compile_pymc_model(pm_model)
        timings["compile_s"] = time.perf_counter() - t0
        return run_nutpie(compiled, draws, tune, chains, cores, seed, progress, timings, nutpie_settings)
    if sampler in _JAX_SAMPLERS:
        t0 = time.perf_counter()
        with _xla_compile_seconds() as compile_times:
            tree = pm.sample(
                draws=draws, tune=tune, chains=chains, random_seed=seed, model=pm_model, nuts_sampler=sampler,
                progressbar=progress, compute_convergence_checks=False,
            )
        check_interrupt()  # as below: a trace cut short by an interrupt is not a result
        # JAX compiles inside pm.sample, on first use: compile_s is the XLA compile time JAX reports there.
        timings["compile_s"] = sum(compile_times)
        timings["sample_s"] = time.perf_counter() - t0 - timings["compile_s"]
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
    check_interrupt()  # PyMC stops at an interrupt and returns the shorter trace
    timings["sample_s"] = time.perf_counter() - t0
    return tree


@contextmanager
def _xla_compile_seconds():
    """Collect the durations of the XLA compilations that JAX reports (jax.monitoring) while the block runs."""
    import jax.monitoring

    seconds: list[float] = []

    def listen(event, duration_secs, **_):
        if event == _XLA_COMPILE_EVENT:
            seconds.append(duration_secs)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        yield seconds
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)


def _map(pm_model, seed, progress, timings, tolerance=None) -> xr.DataTree:
    import pymc as pm  # import time, as in _nuts
    import xarray as xr

    options = {} if tolerance is None else {"options": {"gtol": tolerance, "ftol": _MAP_FTOL}}
    t0 = time.perf_counter()
    point = pm.find_MAP(
        model=pm_model, random_seed=seed, jitter=False, progressbar=progress, return_inferencedata=False, **options
    )
    check_interrupt()  # find_MAP returns the point it has at an interrupt
    timings["optimize_s"] = time.perf_counter() - t0
    names = [v.name for v in pm_model.free_RVs + pm_model.deterministics]
    dims = pm_model.named_vars_to_dims
    data = {
        n: (("chain", "draw", *dims.get(n, ())), np.asarray(point[n])[None, None, ...]) for n in names
    }
    coords = {d: np.asarray(pm_model.coords[d]) for n in names for d in dims.get(n, ())
              if pm_model.coords.get(d) is not None}
    return xr.DataTree.from_dict({"posterior": xr.Dataset(data, coords={"chain": [0], "draw": [0], **coords})})
