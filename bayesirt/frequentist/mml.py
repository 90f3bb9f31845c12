"""Marginal maximum likelihood for unidimensional 1PL-4PL logistic IRT (Bock-Aitkin EM).

Model: ``P(y_im = 1) = c_i + (1 - c_i - s_i) * sigmoid(a_i * theta_m + d_i)``, difficulty
``b_i = -d_i / a_i``, abilities ``theta ~ Normal(mu, sigma)`` from the spec's theta prior
(``N(0, 1)`` in every built-in spec), integrated out on a Gauss-Hermite grid, replaced by a finer equally
spaced one after a few EM iterations where the models' posteriors are narrower than its spacing (long
tests: :mod:`bayesirt.frequentist.mml_grid`; ``attrs["grid"]`` says which ran).

- E-step: the log-likelihood of each model at each node is ``(models x items) @ (items x
  nodes)`` matrix products; missing cells contribute nothing, to it or to the expected counts.
- M-step: Fisher scoring on each item's expected complete-data log-likelihood (plus active log
  priors), batched over items (:mod:`.mml_mstep`).
- Variables: ``a`` (``log a`` when a prior on ``a`` is active), ``d``, ``logit c``, ``logit s``.
- Acceleration: SQUAREM cycles after the first EM steps (:mod:`.squarem`), extrapolating in the
  M-step's unconstrained variables, never across a change of grid.
- ``priors=False`` is ML except that 3PL/4PL asymptotes always carry the spec's Beta priors
  (as in SAFE App. E), making those fits MAP; ``priors=True`` adds every item prior (MAP-EM), the
  discrimination prior as the density of log a (``mml_model.LOG_SLOPE``).
- Standard errors: the inverse of the exact observed information of the marginal log-likelihood
  (log posterior when priors are active), in closed form by Louis' identity; ``se(b)`` by the
  delta method.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import expit, logit

from bayesirt.data.responses import MISSING
from bayesirt.errors import ConfigError, DataError, warn
from bayesirt.utils.options import declare, option
from bayesirt.utils.validation import parameter_error
from bayesirt.utils.parallel import blas_threads
from bayesirt.models.specs import LOGISTIC_KINDS, IRTSpec, load_spec
from bayesirt.frequentist.abilities import EAP_POINTS, eap_abilities, map_abilities
from bayesirt.frequentist.settings import ACCELERATE, MAX_ITER, QUADRATURE, THETA_METHODS, THREADS
from bayesirt.frequentist.mml_mstep import m_step
from bayesirt.frequentist.mml_grid import COARSE, grid_coarseness, posterior_sds, refined_grid
from bayesirt.frequentist.mml_model import (ItemParameters, ParameterLayout, ResponsePatterns, e_step,
                                            expected_counts, log_priors)
from bayesirt.frequentist.squarem import EMPoint, em_updates
from bayesirt.frequentist.standard_errors import observed_covariance

__all__ = ["MMLResult", "fit_mml", "quadrature_grid"]

_BOUND_A, _BOUND_D, _BOUND_ASYM = 20.0, 30.0, 0.5


@dataclass
class MMLResult:
    """Result of :func:`fit_mml`.

    Attributes
    ----------
    items : xarray.Dataset
        Dim ``item`` (coords of the response Dataset): ``discrimination``, ``intercept``,
        ``difficulty``, ``guessing``, ``slip`` and their ``*_se`` (NaN when not estimated).
    abilities : xarray.Dataset
        Dim ``model``: ``eap``, ``eap_sd``, ``map``, ``map_se`` and ``theta``/``theta_se``
        (the ``theta_method`` choice).
    loglik : float
        Observed-data (marginal) log-likelihood at the estimates, without priors.
    log_prior, objective : float
        Active log prior and ``loglik + log_prior`` (what EM maximizes; equal to ``loglik`` for ML).
    n_parameters, iterations : int
    converged : bool
    loglik_trace, objective_trace : numpy.ndarray
        The initial values, then after every EM step those of the iterate (a refused SQUAREM
        extrapolation leaves it where it was).
    covariance : xarray.DataArray or None
        Inverse observed information of the free parameters (dims ``parameter``, ``parameter_``).
    spec : IRTSpec
    attrs : dict
    """

    items: xr.Dataset
    abilities: xr.Dataset
    loglik: float
    log_prior: float
    objective: float
    n_parameters: int
    iterations: int
    converged: bool
    loglik_trace: np.ndarray
    objective_trace: np.ndarray
    covariance: xr.DataArray | None
    spec: IRTSpec = field(repr=False)
    attrs: dict = field(default_factory=dict)

    def to_datatree(self) -> xr.DataTree:
        """The result as an ``xarray.DataTree`` (nodes ``items``, ``abilities``, ``trace``)."""
        scal = {k: (int(v) if isinstance(v, bool) else v) for k, v in self.attrs.items()}
        scal.update(loglik=self.loglik, log_prior=self.log_prior, objective=self.objective,
                    n_parameters=self.n_parameters, iterations=self.iterations, converged=int(self.converged))
        trace = xr.Dataset({"loglik": ("iteration", self.loglik_trace), "objective": ("iteration", self.objective_trace)})
        nodes = {"/": xr.Dataset(attrs=scal), "items": self.items, "abilities": self.abilities, "trace": trace}
        if self.covariance is not None:
            nodes["covariance"] = self.covariance.to_dataset(name="covariance")
        return xr.DataTree.from_dict(nodes)


def quadrature_grid(n: int, mu: float = 0.0, sigma: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Hermite (probabilists') nodes for ``Normal(mu, sigma)`` and weights summing to 1."""
    x, w = hermegauss(n)
    return mu + sigma * x, w / w.sum()


def _log_prior(lay: ParameterLayout, par: ItemParameters) -> float:
    pv, *_, shared = log_priors(lay, par)
    return float(pv.sum() + shared[0])


def _layout(spec: IRTSpec, priors: bool) -> ParameterLayout:
    active = {k: v for k, v in spec.priors.items() if k != "theta" and (priors or k in ("guessing", "slip"))}
    learned = [k for k, v in active.items() if v.hierarchical]
    if learned:
        raise ConfigError(f"fit_mml: spec {spec.name!r}: MAP-EM (priors=True) needs fixed item priors, and the "
                            f"{' and '.join(learned)} prior learns its location or scale (a hierarchical prior); "
                            "use priors=False (ML), a spec with fixed priors such as '2pl', or fit(...) for the "
                            "full posterior")
    return ParameterLayout(spec.discrimination_structure, spec.has_guessing, spec.has_slip,
                   "discrimination" in active, active)


def _start(lay: ParameterLayout, spec: IRTSpec, data: ResponsePatterns, mu: float, sd: float) -> ItemParameters:
    """Starting values: a = 1 (or the fixed value), d from p-values, asymptotes at their prior
    means but at most half the way from the p-value to the bound (an item answered at about the
    guessing rate starts as a flat curve, not as a step that only the best models climb: from
    there EM runs slopes and intercepts to their bounds and stops at a poor local optimum; seen
    on BBH, 10,000 log-likelihood units below the 2PL)."""
    n = data.y1.shape[0]
    mean = lambda k: (lambda p: p["alpha"] / (p["alpha"] + p["beta"]))(spec.priors[k].params)  # noqa: E731
    right, wrong = data.y1 @ data.count, data.y0 @ data.count
    pv = (right + 0.5) / (right + wrong + 1.0)
    c = np.minimum(mean("guessing"), pv / 2) if lay.guessing else np.zeros(n)
    s = np.minimum(mean("slip"), (1 - pv) / 2) if lay.slip else np.zeros(n)
    a = np.full(n, spec.discrimination_value if lay.structure == "fixed" else 1.0)
    pv = np.clip((pv - c) / (1 - c - s), 0.02, 0.98)
    d = logit(pv) * np.sqrt(1 + (a * sd) ** 2 / 2.9) - a * mu
    return ItemParameters(a, d, c, s)


def _warm_start(lay: ParameterLayout, spec: IRTSpec, start: MMLResult, da: xr.DataArray) -> ItemParameters:
    """Starting values from another fit of the same items (see ``fit_mml(start=...)``)."""
    if not isinstance(start, MMLResult) or not np.array_equal(start.items["item"].values, da["item"].values):
        raise ConfigError("fit_mml: start must be an MMLResult fitted to the same items, in the same order")
    values = {k: start.items[k].values for k in ("discrimination", "intercept", "guessing", "slip")}
    n = values["intercept"].size
    a = np.full(n, spec.discrimination_value) if lay.structure == "fixed" else values["discrimination"]
    if lay.structure == "common":
        a = np.full(n, np.exp(np.mean(np.log(a))))
    asym = [np.where(np.isfinite(v) & (v > 0), v, 0.01) if on else np.zeros(n)
            for v, on in ((values["guessing"], lay.guessing), (values["slip"], lay.slip))]
    return ItemParameters(np.asarray(a, dtype=float).copy(), values["intercept"].copy(), *asym)


def _resolve_spec(spec: Any) -> IRTSpec:
    if isinstance(spec, (str, Path)):
        spec = load_spec(spec)
    if not isinstance(spec, IRTSpec):
        raise parameter_error("spec", "fit_mml", "a spec name, a .toml path or an IRTSpec", spec)
    if spec.kind not in LOGISTIC_KINDS:
        raise ConfigError(f"fit_mml: spec {spec.name!r} is {spec.kind!r}; fit_mml fits unidimensional logistic "
                          "1PL-4PL specs (fit_mml_mirt: the multidimensional 2PL)")
    theta = spec.priors.get("theta")
    if theta is None or theta.distribution != "normal":
        raise ConfigError(f"fit_mml: spec {spec.name!r}: MML needs a normal theta (population) distribution; "
                          "give the spec a normal theta prior")
    return spec


def _occupied(data: ResponsePatterns, post: np.ndarray):
    """Expected counts and nodes of the M-step, on the nodes holding any posterior mass (> 1e-14 of the
    total: on a refined grid most nodes lie beyond every model's posterior and change nothing)."""
    mass = post.sum(0)
    on = np.flatnonzero(mass > 1e-14 * mass.sum())
    cols = slice(on[0], on[-1] + 1)
    r, n0 = expected_counts(data, post[:, cols])
    return r, n0, data.nodes[cols]


#: EM iterations on the starting grid before it is checked against the models' posterior sds.
_PILOT = 5


def _coordinates(lay: ParameterLayout, par: ItemParameters) -> np.ndarray:
    """The M-step's variables (a, or log a under a slope prior; d; logit c; logit s), shape (4, items):
    unconstrained, so SQUAREM extrapolates in them."""
    return np.stack([np.log(par.a) if lay.loga else par.a, par.d, logit(par.c) if lay.guessing else par.c,
                     logit(par.s) if lay.slip else par.s])


def _parameters(lay: ParameterLayout, x: np.ndarray) -> ItemParameters:
    """Inverse of :func:`_coordinates`."""
    a, d, c, s = x
    return ItemParameters(np.exp(a) if lay.loga else a.copy(), d.copy(), expit(c) if lay.guessing else c.copy(),
                          expit(s) if lay.slip else s.copy())


def _em(lay: ParameterLayout, data: ResponsePatterns, par: ItemParameters, max_iter: int, tol: float, ll_tol: float,
        mu: float, sd: float, accelerate: bool):
    """EM iterations from ``par``; traces start with the initial values and hold the objective of the
    iterate after every EM step. The first :data:`_PILOT` iterations are plain EM steps; then (or at
    convergence, if sooner) the grid is checked once and, where the posteriors are narrower than its
    spacing, replaced by a finer one (:func:`~bayesirt.frequentist.mml_grid.refined_grid`; the traces
    then hold the objective on both grids). From there, with ``accelerate``, SQUAREM cycles
    (:mod:`~bayesirt.frequentist.squarem`) on the final grid: no extrapolation crosses the grid change.
    Convergence is tested after every update (an EM step or a SQUAREM cycle). Returns the final
    ``data`` too, and the iteration at which the grid changed (0: never)."""

    def at_par(p: ItemParameters) -> EMPoint:
        ll, post = e_step(data, p)
        objective = ll + _log_prior(lay, p) if (p.c + p.s < 1).all() else -np.inf
        return EMPoint(_coordinates(lay, p), objective, (p, ll, post))

    def em_step(point: EMPoint) -> EMPoint:
        p, _, post = point.state
        return at_par(m_step(lay, p, *_occupied(data, post)))

    point = at_par(par)
    lls, objs, switched, it, done = [point.state[1]], [point.objective], 0, 0, False
    pilot = min(_PILOT, max_iter)
    for phase, (budget, squarem) in enumerate(((pilot, False), (max_iter - pilot, accelerate))):
        for new, trail in em_updates(point, em_step, lambda x: at_par(_parameters(lay, x)), budget,
                                     accelerate=squarem):
            it += len(trail)
            lls += [p.state[1] for p in trail]
            objs += [p.objective for p in trail]
            change = float(np.abs(np.stack(new.state[0]) - np.stack(point.state[0])).max())
            done = change < tol or abs(new.objective - point.objective) < ll_tol * abs(new.objective)
            point = new
            if done:
                break
        if phase == 0 and (done or it >= _PILOT):
            par, _, post = point.state
            finer = refined_grid(data, par, post, mu, sd)
            if finer is not None:
                data, switched, done = data._replace(nodes=finer[0], logw=np.log(finer[1])), it, False
                point = at_par(par)
                lls[-1], objs[-1] = point.state[1], point.objective
        if done:
            break
    par, _, post = point.state
    return data, par, post, lls, objs, it, done, switched


@declare()
def fit_mml(responses: xr.Dataset, spec: str | Path | IRTSpec = "2pl", *,
            quadrature: int = QUADRATURE,
            priors: bool = option(False, "add the spec's item priors (MAP-EM)"), max_iter: int = MAX_ITER,
            tol: float = option(1e-6, "stop when no item parameter moves more in an update", low=0, open=True),
            ll_tol: float = option(1e-10, "or when the objective changes less, relative", low=0),
            theta_method: str = option("eap", "the ability estimate in theta", choices=THETA_METHODS),
            se: bool = option(True, "observed-information standard errors"), threads: int | None = THREADS,
            start: MMLResult | None = option(None, "warm start from a fit of the same items", type=object),
            accelerate: bool = ACCELERATE) -> MMLResult:
    """Fit a 1PL-4PL logistic IRT model by marginal maximum likelihood (Bock-Aitkin EM).

    Parameters
    ----------
    responses : xarray.Dataset
        Response Dataset (``responses`` (item, model) int8, -1 missing).
    spec : str, Path or IRTSpec
        ``"rasch"``/``"1pl"`` (common slope; ``structure = "fixed"`` fixes it), ``"2pl"``,
        ``"3pl"``, ``"4pl"`` or a spec file. Its theta prior is the population distribution.
    quadrature : int
        Number of Gauss-Hermite nodes (5-201) of the starting grid. Default 61. On long tests the EM
        continues on an equally spaced grid as fine as the models' posterior sds (up to 1,201 nodes).
    priors : bool
        False (default): ML, except that 3PL/4PL asymptotes always carry the spec's Beta priors
        (MAP, flagged in ``attrs["map_asymptotes"]``). True: all item priors (MAP-EM).
    max_iter : int
        EM iteration cap (every EM step counts, those of a SQUAREM cycle too); hitting it warns.
    tol, ll_tol : float
        Stop when the largest change of any natural parameter (a, d, c, s) in an update (an EM
        step, or a SQUAREM cycle) is below ``tol`` or the relative change of the EM objective is
        below ``ll_tol``.
    theta_method : {"eap", "map"}
        Which ability estimate fills ``abilities["theta"]``; both are always computed.
    se : bool
        Compute the observed-information covariance, exactly (Louis' identity): about 1.7 s of
        a 4.4 s 3PL fit on 5,000 models x 80 items (``benchmarks/mml_mirt.py``), about 11 s for
        ChemBench's 5,708 parameters, where inverting the information dominates (cubic in the
        parameters); pass False for large item banks.
    threads : int or None
        BLAS threads during the fit (default 1: the products have only ``quadrature`` columns,
        so extra threads gain little and an oversubscribed machine loses up to 100x). None
        leaves the BLAS default.
    start : MMLResult, optional
        Warm start from another fit of the same items (e.g. the 2PL when fitting a 3PL): its
        slopes, intercepts and any asymptotes this spec shares; asymptotes it lacks start at
        0.01, so the starting curves are the other fit's to within 1%.
    accelerate : bool
        SQUAREM (:mod:`~bayesirt.frequentist.squarem`) after the first 5 EM steps (default True):
        the same fixed point in fewer EM steps (``benchmarks/results/map_em_recovery.md``); the
        objective still never decreases. False runs plain EM.

    Returns
    -------
    MMLResult

    Raises
    ------
    ConfigError
        Unknown or unsupported spec (not a unidimensional logistic 1PL-4PL with a normal theta),
        an option outside its declared range or choices (``quadrature`` outside [5, 201], a bad
        ``theta_method``, ...); ``DataError`` for responses that are not a response Dataset.

    Warns
    -----
    RuntimeWarning
        The iteration cap was hit; a parameter ran to a bound (|a| > 20, |d| > 30, c or s > 0.5);
        the observed information is not positive definite (standard errors NaN).

    Notes
    -----
    ``ll_tol`` is separate from ``tol`` on purpose: EM converges linearly, so a log-likelihood
    change of ``1e-6 * |LL|`` (0.0025 on LSAT6) stops some 40 iterations early, with difficulties
    still 0.05 off the optimum. Identical response patterns are pooled before the E-step.

    Examples
    --------
    >>> from bayesirt.data import load_dataset
    >>> fit = fit_mml(load_dataset("lsat6"), "2pl")
    >>> round(fit.loglik, 2), fit.items["discrimination"].sel(item="Q1").round(2).item()
    (-2466.65, 0.83)
    """
    spec = _resolve_spec(spec)
    if not isinstance(responses, xr.Dataset) or "responses" not in responses:
        raise DataError("responses must be a response Dataset; build one with bayesirt.data.make_responses")
    da = responses["responses"].transpose("item", "model")
    y = np.asarray(da.values)
    if not np.isin(y, (MISSING, 0, 1)).all():
        raise DataError("responses must be 0, 1 or -1 (missing); rebuild the Dataset with bayesirt.data.make_responses")
    lay = _layout(spec, priors)
    mu, sd = spec.priors["theta"].params["mu"], spec.priors["theta"].params["sigma"]
    nodes, w = quadrature_grid(int(quadrature), mu, sd)
    pat, inv, count = np.unique(y, axis=1, return_inverse=True, return_counts=True)  # distinct patterns
    inv = inv.reshape(-1)
    data = ResponsePatterns((pat == 1).astype(float), (pat == 0).astype(float), count.astype(float), nodes, np.log(w),
                 bool((y != MISSING).all()))
    with blas_threads(threads):
        first = _start(lay, spec, data, mu, sd) if start is None else _warm_start(lay, spec, start, da)
        data, par, post, lls, objs, it, converged, switched = _em(lay, data, first, max_iter, tol, ll_tol, mu, sd,
                                                                  accelerate)
        cov = observed_covariance(lay, data, par, post) if se else None
        coarse = grid_coarseness(data.nodes, *posterior_sds(data, par, post, sd), data.count)
        eap, eap_sd = eap_abilities(data, par, mu, sd, points=max(EAP_POINTS, 2 * data.nodes.size - 1))
        th_map, th_se = map_abilities(data, par, mu, sd, eap)
    ll = lls[-1]
    if not converged:
        warn(f"MML EM for spec {spec.name!r} hit the iteration cap max_iter={max_iter} without converging "
             f"(last objective change {objs[-1] - objs[-2]:.3g}); raise max_iter or check the data",
             RuntimeWarning)
    if coarse > 1.5 * COARSE:
        warn(f"MML ({spec.name}): the ability grid ({data.nodes.size} nodes) is {coarse:.1f} times wider than "
             "the posterior sd of 5% of the models, so the scale of the estimates is set partly by the grid; "
             "the test is too long for the grid: raise quadrature (--quadrature, up to 201) or, for a 2PL with "
             "fixed priors, fit by Laplace, which uses no grid (bayesirt fit --method laplace; fit(..., "
             "method='laplace'))", RuntimeWarning)
    item_ids = da["item"].values
    for name, bad in (("|discrimination| > 20", np.abs(par.a) > _BOUND_A), ("|intercept| > 30", np.abs(par.d) > _BOUND_D),
                      ("guessing > 0.5", par.c > _BOUND_ASYM), ("slip > 0.5", par.s > _BOUND_ASYM)):
        if bad.any():
            warn(f"MML ({spec.name}): {int(bad.sum())} item(s) ran to a bound, {name} (e.g. item "
                 f"{str(item_ids[bad][0])!r}); their estimates are unreliable (perfect separation or "
                 "all-correct/all-wrong items); consider priors=True", RuntimeWarning)
    eap, eap_sd, th_map, th_se = (v[inv] for v in (eap, eap_sd, th_map, th_se))
    names, items = _item_table(lay, par, cov, da)
    icoords = {k: v for k, v in da.coords.items() if da[k].dims == ("item",)}
    mcoords = {k: v for k, v in da.coords.items() if da[k].dims == ("model",)}
    chosen = (eap, eap_sd) if theta_method == "eap" else (th_map, th_se)
    abil = xr.Dataset({"eap": ("model", eap), "eap_sd": ("model", eap_sd), "map": ("model", th_map),
                       "map_se": ("model", th_se), "theta": ("model", chosen[0]),
                       "theta_se": ("model", chosen[1])}, coords=mcoords)
    map_asym = lay.guessing or lay.slip
    attrs = {"method": "MML (Bock-Aitkin EM)" + (", MAP" if priors or map_asym else ""), "spec": spec.name,
             "kind": spec.kind, "quadrature": int(quadrature), "priors": bool(priors),
             "grid": (f"equally spaced, {data.nodes.size} nodes {data.nodes[1] - data.nodes[0]:.3g} apart over "
                      f"{mu:g} +/- 6 x {sd:g} (refined after EM iteration {switched}: the Gauss-Hermite grid of "
                      f"{quadrature} nodes was wider than the models' posterior sds)") if switched else
                     f"Gauss-Hermite, {quadrature} nodes", "grid_coarseness": coarse,
             "map_asymptotes": bool(map_asym), "active_priors": ", ".join(f"{k} ~ {v.describe()}" for k, v in
                                                                          lay.priors.items()) or "none",
             "se_method": "inverse observed information (exact, Louis' identity); difficulty by the "
                          "delta method" if se else "not computed",
             "accelerate": "SQUAREM" if accelerate else "none",
             "theta_method": theta_method, "population": f"Normal({mu:g}, {sd:g})",
             "dataset": str(responses.attrs.get("name", ""))}
    covda = None if cov is None else xr.DataArray(cov, dims=("parameter", "parameter_"),
                                                   coords={"parameter": names, "parameter_": names})
    return MMLResult(xr.Dataset(items, coords=icoords, attrs={"formula": "P = c + (1 - c - s) * sigmoid(a*theta + d)"}),
                     abil, ll, objs[-1] - ll, objs[-1], len(names), it, converged, np.array(lls), np.array(objs),
                     covda, spec, attrs)


def _item_table(lay: ParameterLayout, par: ItemParameters, cov, da: xr.DataArray):
    """Parameter names and the item variables with standard errors."""
    n, ids = par.d.size, [str(i) for i in da["item"].values]
    slot_names = ("discrimination", "intercept", "guessing", "slip")
    names = (["discrimination"] if lay.structure == "common" else []) + \
        [f"{slot_names[k]}[{i}]" for i in ids for k in lay.slots]
    se = np.full((n, 4), np.nan)
    se_b = np.full(n, np.nan)
    b = -par.d / par.a
    if cov is not None:
        off = 1 if lay.structure == "common" else 0
        pos = np.full((n, 4), -1)
        pos[:, lay.slots] = off + np.arange(n * len(lay.slots)).reshape(n, -1)
        if off:
            pos[:, 0] = 0
        diag = np.sqrt(np.diag(cov))
        se = np.where(pos >= 0, diag[np.maximum(pos, 0)], np.nan)
        ja, jd = -b / par.a, -1 / par.a  # db/da = d / a^2 = -b / a, db/dd = -1 / a
        ia, idd = pos[:, 0], pos[:, 1]
        var = jd**2 * cov[idd, idd]
        if (ia >= 0).all():
            var = var + ja**2 * cov[ia, ia] + 2 * ja * jd * cov[ia, idd]
        se_b = np.sqrt(var)
    out = {}
    for k, (name, val) in enumerate(zip(slot_names, (par.a, par.d, par.c, par.s), strict=True)):
        out[name], out[f"{name}_se"] = ("item", val), ("item", se[:, k])
    out["difficulty"], out["difficulty_se"] = ("item", b), ("item", se_b)
    order = ["discrimination", "intercept", "difficulty", "guessing", "slip"]
    return names, {k: out[k] for v in order for k in (v, f"{v}_se")}
