"""``fit(..., method="laplace")``: the whole posterior of a 2PL as one joint Gaussian (a Laplace
approximation) over abilities and item parameters, for leaderboards too large for NUTS or ADVI
(5,000 models x 14,042 items in about 100 s of CPU; ``benchmarks/leaderboard_posterior.py``).

What it is, stated in the fit's settings:

- the posterior of (theta, log a, d) under the spec's priors is approximated by a Gaussian whose
  covariance is the inverse observed Hessian of the log posterior: the joint covariance, not a
  mean-field one (abilities are correlated with each other through the items, and the shift and
  scale ridges of the 2PL are kept); the discrimination is log-normal in the draws;
- its centre is not the joint mode. The joint mode shrinks the abilities' scale: along the ridge
  theta -> c theta, a -> a / c the likelihood is flat, but the posterior volume of the M abilities
  grows as c^M, which the joint mode ignores; its abilities spread about M / (M + 4N) too little, a
  bias that does not shrink as the matrix grows while the posterior sds do (400 x 1,200: spread
  0.882 against the truth's 0.923, three posterior sds; ``tests/test_laplace_fit.py``). The centre
  is instead the mode of the items' Laplace-marginal posterior (each ability integrated out by a
  Laplace approximation: the objective G of :mod:`.laplace_kernel`), with the abilities at their
  modes given the items;
- the draws are exact draws of that Gaussian (:mod:`.laplace_kernel`): no sampling error beyond
  Monte Carlo, no convergence to check, and no way for the approximation to show where the true
  posterior is skewed (items answered by few models, extreme items);
- specs: the 2PL with a per-item discrimination (log-normal prior), a normal intercept prior and a
  normal ability prior, all with fixed numbers (``models/2pl.toml`` or a copy with other numbers).
  A joint mode does not exist with hierarchical (learned) prior scales (the mode sends a learned
  scale to zero), so such a spec is refused with the advice to fix its scales; the ability scale
  is fixed by the spec's theta prior, as in the sampled fits.

Identification is the spec's: the priors pin the location and scale of the abilities, so the
centre is unique and the Gaussian is proper; the common shift of abilities and intercepts, which the
sampled fits reparameterize (:mod:`bayesirt.models.logistic`), is a direction of the covariance here.

Accuracy (``benchmarks/results/leaderboard_posterior.md``, truth drawn from the priors): 90%
intervals covered 0.935 / 0.901 / 0.908 of the abilities / log discriminations / intercepts at
5,000 x 14,042 (0.904 / 0.892 / 0.898 with 70% missing) and 0.879 / 0.890 / 0.903 over six 300 x
1,000 datasets; against NUTS at 300 x 1,000 the median ratio of 90% interval widths was 0.97-1.00
and every NUTS posterior mean lay inside the Laplace 90% interval.
"""

from __future__ import annotations

import json
import time

import numpy as np
import xarray as xr

from bayesirt.data.responses import MISSING, to_observed_data
from bayesirt.errors import ConfigError, DataError
from bayesirt.inference.laplace_kernel import find_mode, joint_draws
from bayesirt.models.logistic import log_likelihood_group
from bayesirt.models.specs import IRTSpec, MIRTSpec
from bayesirt.utils.outputs import package_versions
from bayesirt.utils.progress import progress_bar

__all__ = ["laplace_fit", "laplace_prior", "MAX_MODELS"]

#: Most models: the abilities' precision is a dense models x models float64 matrix (1.8 GB here).
MAX_MODELS = 15_000
_PACKAGES = ("bayesirt", "numpy", "scipy", "numba", "xarray")


def laplace_prior(spec: IRTSpec | MIRTSpec) -> np.ndarray:
    """(sigma, mu) of the normal priors of theta, log a and d, from a spec the method supports;
    ConfigError naming what is not supported otherwise."""
    base = ("method='laplace' approximates the 2PL with a per-item discrimination and fixed normal priors on "
            "theta and the intercept and a log-normal one on the discrimination (models/2pl.toml or a copy)")
    if isinstance(spec, MIRTSpec) or spec.kind != "2pl" or spec.discrimination_structure != "item":
        raise ConfigError(f"{base}; spec {spec.name!r} is a {spec.kind} spec: use method 'nuts' or 'advi' for it.")
    if spec.location != "intercept":
        raise ConfigError(f"{base}; spec {spec.name!r} puts its prior on the difficulty: use parameterization = "
                          "\"slope-intercept\" with a normal intercept prior, or method 'nuts' or 'advi'.")
    wanted = {"theta": "normal", "discrimination": "lognormal", "intercept": "normal"}
    out = []
    for name, dist in wanted.items():
        prior = spec.priors[name]
        if prior.hierarchical:
            raise ConfigError(f"{base}; spec {spec.name!r} learns the {name} prior's hyperparameters, for which a "
                              "joint mode does not exist (a learned scale collapses to zero): fix them at numbers (e.g. "
                              "estimates from a first fit) in a copy of the spec, or use method 'nuts' or 'advi'.")
        if prior.distribution != dist:
            raise ConfigError(f"{base}; spec {spec.name!r} has a {prior.distribution} {name} prior: use a {dist} one, "
                              "or method 'nuts' or 'advi'.")
        out += [float(prior.params["sigma"]), float(prior.params["mu"])]
    return np.asarray(out)


def laplace_fit(responses: xr.Dataset, spec: IRTSpec | MIRTSpec, *, draws: int, seed: int,
                log_likelihood: bool = False, progress: bool = True) -> xr.DataTree:
    """The Laplace approximation of ``spec``'s posterior given validated ``responses``, as the
    DataTree :func:`bayesirt.inference.fit` returns (one chain of ``draws`` independent draws)."""
    prior = laplace_prior(spec)
    y = responses["responses"].values
    n_items, n_models = y.shape
    if n_models > MAX_MODELS:
        raise DataError(f"method='laplace' holds a models x models matrix; {n_models:,} models exceed its "
                        f"{MAX_MODELS:,}: fit a subset of models, or use method 'advi' with advi_batch_size.")
    timings: dict = {}
    t0 = time.perf_counter()
    last = {"step": ""}  # the largest change of the latest step, in the progress lines

    def advance_to(steps: int, largest: float, objective: float) -> None:
        last["step"] = f"last step's largest change {largest:.1e}"
        advance()

    with progress_bar(None, "Laplace centre search (Newton steps)", enabled=progress,
                      until="the largest change is below its tolerance", detail=lambda: last["step"]) as advance:
        mode = find_mode(y, prior, progress=advance_to)
    timings["mode_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    theta, alpha, d = joint_draws(mode, draws, seed)
    timings["draws_s"] = time.perf_counter() - t0
    del mode["z"]
    coords = {"chain": [0], "draw": np.arange(draws), "item": responses["item"].values,
              "model": responses["model"].values}
    posterior = xr.Dataset({"theta": (("chain", "draw", "model"), theta[None]),
                            "discrimination": (("chain", "draw", "item"), np.exp(alpha)[None]),
                            "intercept": (("chain", "draw", "item"), d[None])}, coords=coords)
    observed, constant = to_observed_data(responses)
    groups = {"posterior": posterior, "observed_data": observed, "constant_data": constant}
    if log_likelihood:
        t0 = time.perf_counter()
        groups["log_likelihood"] = log_likelihood_group(posterior, responses)
        timings["log_likelihood_s"] = time.perf_counter() - t0
    record = mode["record"]
    settings = {
        "method": "laplace", "seed": seed, "draws": draws,
        "approximation": "one joint Gaussian over (theta, log discrimination, intercept): centre the mode of the "
                         "items' Laplace-marginal posterior (abilities integrated out by Laplace) with the abilities' "
                         "conditional modes, covariance the inverse observed Hessian of the log posterior there; "
                         "draws exact from that Gaussian",
        "fixed": "every prior hyperparameter at the spec's numbers (no learned scales)",
        "centre_search": "block coordinate sweeps, then Newton and chord steps through the Schur complement of the "
                         "item blocks, halving line search",
    }
    result = xr.DataTree.from_dict(groups)
    result.attrs = {
        "bayesirt_spec_name": spec.name, "bayesirt_spec_kind": spec.kind, "bayesirt_spec_source": spec.source,
        "bayesirt_spec_text": spec.text, "bayesirt_settings": json.dumps(settings),
        "bayesirt_versions": json.dumps(package_versions(_PACKAGES)),
        "bayesirt_timings": json.dumps({k: round(v, 3) for k, v in timings.items()}),
        "bayesirt_data_name": str(responses.attrs.get("name", "")),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "laplace_sweeps": len(record["sweeps"]),
        "laplace_schur_passes": int(record["passes"]),
        "laplace_newton_steps": len(record["steps"]),
        "laplace_last_step": float(record["final_step"]),
        "laplace_observed_cells": int((y != MISSING).sum()),
    }
    return result
