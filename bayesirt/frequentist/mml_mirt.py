"""Marginal maximum likelihood for the exploratory multidimensional 2PL (SAFE App. C).

Model: ``P(y_im = 1) = sigmoid(a_i . theta_m + d_i)`` with ``theta_m ~ N(0, I_D)``, D = 1..4
(compensatory MIRT, slope-intercept form), fitted by Bock-Aitkin EM like the unidimensional
engine (:mod:`.mml`), whose E-step it reuses (:mod:`.mml_model`).

- Quadrature: a product grid of probabilists' Gauss-Hermite nodes, ``q`` per dimension
  (default :data:`QUADRATURE`: 61, 31, 15, 9 for D = 1..4, the per-dimension defaults of R's
  ``mirt``), pruned: a node is kept when its prior weight is at least ``prune`` times the
  largest weight (default :data:`PRUNE` = 1e-6; weight-threshold pruning as in Jackel 2005, "A
  note on multivariate Gauss-Hermite quadrature"). The kept nodes reach 4.9-5.3 prior SDs from
  the centre; their weights are renormalized to sum to 1. Nodes kept for D = 1..4: 25 of 61,
  269 of 961, 1,045 of 3,375, 2,777 of 6,561 (dropped prior mass 3e-7, 7e-7, 4e-6, 1e-5).
- Identification (echelon, lower triangular): anchor item ``j`` (j = 0..D-2) has zero loadings
  on dimensions ``j+1 .. D-1``; the anchors are the first D - 1 items unless named. This removes
  the D (D - 1) / 2 rotational degrees of freedom; the sign of each dimension is set afterwards
  so that every loading column sums to a non-negative number.
- E-step: ``(patterns x items) @ (items x nodes)`` products over the distinct response patterns;
  missing cells contribute nothing, to the likelihood or to the expected counts.
- M-step: per-item Newton steps on the expected complete-data log-likelihood (for the logistic
  model Newton and Fisher scoring coincide), batched over items with stacked (D+1)x(D+1) solves
  and per-item step halving.
- ``loading_prior``: optional ``N(0, sd^2)`` prior on every free loading (MAP-EM; SAFE App. C
  used sd = 1.5). ``loglik`` is always the marginal log-likelihood without the prior.
- Start values: the first D eigenvectors of the Pearson (phi) item correlations, converted to
  logistic slopes and rotated into echelon form (:mod:`.mml_mirt_start`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import xarray as xr
from numpy.polynomial.hermite_e import hermegauss

from bayesirt.data.responses import MISSING
from bayesirt.errors import ConfigError, DataError, warn
from bayesirt.frequentist.ladder import information_criteria
from bayesirt.frequentist.mml_model import ResponsePatterns, expected_counts, node_posterior, pattern_log_likelihood
from bayesirt.frequentist.mml_mirt_start import anchor_index, free_mask, start_values
from bayesirt.frequentist.settings import ACCELERATE, MAX_ITER, PRUNE, SAFE_LOADING_PRIOR, THREADS
from bayesirt.frequentist.squarem import EMPoint, em_updates
from bayesirt.models.response import log_probabilities, probability
from bayesirt.utils.options import declare, option
from bayesirt.utils.parallel import blas_threads
from bayesirt.utils.validation import check_int, check_number

__all__ = ["SAFE_LOADING_PRIOR", "MAX_DIMS", "QUADRATURE", "PRUNE", "MIRTFit", "mirt_grid", "fit_mml_mirt",
           "mirt_model_loglik"]

MAX_DIMS = 4
"""Largest number of dimensions fitted (the product grid grows as q^D)."""
QUADRATURE = {1: 61, 2: 31, 3: 15, 4: 9}
"""Default Gauss-Hermite nodes per dimension by D (R mirt's ``quadpts`` defaults)."""

_BOUND_A, _BOUND_D = 20.0, 30.0


@dataclass
class MIRTFit:
    """Result of :func:`fit_mml_mirt`.

    Attributes
    ----------
    loadings : xarray.DataArray
        Slopes ``a`` (item, dim) in the echelon orientation (dims ``1..D``), with the item
        coordinates of the responses (``item_group`` etc.).
    intercepts : xarray.DataArray
        ``d`` (item).
    abilities : xarray.DataArray
        EAP abilities (model, dim) on the EM grid, in the same orientation as ``loadings``.
    loglik : float
        Observed-data (marginal) log-likelihood at the estimates, on the pruned grid, without priors.
    log_prior, objective : float
        Log prior of the loadings (0 for ML) and ``loglik + log_prior`` (what EM maximizes).
    n_parameters : int
        ``items x (D + 1) - D (D - 1) / 2``.
    n_models : int
        Models (persons) fitted: the n of the BIC.
    aic, bic : float
        ``-2 LL + 2k`` and ``-2 LL + k log(n_models)``.
    iterations : int
    converged : bool
    loglik_trace : numpy.ndarray
        The EM objective (``objective``'s kernel: loglik plus the prior's quadratic term), at the
        start and after each EM step (a refused SQUAREM extrapolation leaves the iterate where it
        was); non-decreasing.
    attrs : dict
        Settings: quadrature, nodes kept, dropped prior mass, anchors, loading prior, ...
    """

    loadings: xr.DataArray
    intercepts: xr.DataArray
    abilities: xr.DataArray
    loglik: float
    log_prior: float
    objective: float
    n_parameters: int
    n_models: int
    aic: float
    bic: float
    iterations: int
    converged: bool
    loglik_trace: np.ndarray = field(repr=False)
    attrs: dict = field(default_factory=dict)

    @property
    def n_dims(self) -> int:
        return int(self.loadings.sizes["dim"])

    def to_dataset(self) -> xr.Dataset:
        """The fit as one Dataset: ``loading`` (item, dim), ``intercept`` (item), ``theta``
        (model, dim), ``objective_trace`` (iteration); scalars and settings as attrs."""
        attrs = {k: (int(v) if isinstance(v, bool) else v) for k, v in self.attrs.items()}
        attrs.update(loglik=self.loglik, log_prior=self.log_prior, objective=self.objective,
                     n_parameters=self.n_parameters, n_models=self.n_models, aic=self.aic, bic=self.bic,
                     iterations=self.iterations, converged=int(self.converged))
        return xr.Dataset({"loading": self.loadings, "intercept": self.intercepts, "theta": self.abilities,
                           "objective_trace": ("iteration", self.loglik_trace)}, attrs=attrs)


def _check_dims(n_dims, n_items: int) -> int:
    n_dims = check_int(n_dims, name="n_dims", caller="fit_mml_mirt", low=1, high=MAX_DIMS)
    if n_dims >= n_items:
        raise ConfigError(f"fit_mml_mirt: n_dims = {n_dims} needs more items than dimensions; the data have "
                          f"{n_items} item(s); fit fewer dimensions")
    return n_dims


def mirt_grid(n_dims: int, quadrature: int | None = None, prune: float = PRUNE) -> tuple[np.ndarray, np.ndarray]:
    """Pruned Gauss-Hermite product grid for ``theta ~ N(0, I_D)``.

    Parameters
    ----------
    n_dims : int
        D, 1 to :data:`MAX_DIMS`.
    quadrature : int, optional
        Nodes per dimension (3-201); default :data:`QUADRATURE` ``[n_dims]``.
    prune : float
        Keep node k when ``w_k >= prune * max(w)``; 0 keeps the full product grid. Default :data:`PRUNE`.

    Returns
    -------
    nodes : numpy.ndarray, shape (nodes, D)
    weights : numpy.ndarray, shape (nodes,)
        Renormalized to sum to 1.
    """
    n_dims = check_int(n_dims, name="n_dims", caller="mirt_grid", low=1, high=MAX_DIMS)
    q = QUADRATURE[n_dims] if quadrature is None else check_int(quadrature, name="quadrature", caller="mirt_grid",
                                                                   low=3, high=201)
    prune = check_number(prune, name="prune", caller="mirt_grid", low=0, high=1, high_open=True)
    x, w = hermegauss(int(q))
    w = w / w.sum()
    grids = np.meshgrid(*([x] * n_dims), indexing="ij")
    nodes = np.stack([g.ravel() for g in grids], axis=1)
    weights = np.ones(len(nodes))
    for g in np.meshgrid(*([w] * n_dims), indexing="ij"):
        weights *= g.ravel()
    keep = weights >= prune * weights.max()
    return nodes[keep], weights[keep] / weights[keep].sum()


def _response_matrix(responses: xr.Dataset, fitting: bool = True) -> tuple[xr.DataArray, np.ndarray]:
    """The (item, model) DataArray and its int8 values, validated; for ``fitting``, every item and
    model must have an observed response (a scored item or model may have none)."""
    if not isinstance(responses, xr.Dataset) or "responses" not in responses:
        raise DataError("responses must be a response Dataset; build one with bayesirt.data.make_responses")
    da = responses["responses"].transpose("item", "model")
    y = np.asarray(da.values)
    if not np.isin(y, (MISSING, 0, 1)).all():
        raise DataError("responses must be 0, 1 or -1 (missing); rebuild the Dataset with bayesirt.data.make_responses")
    observed = y != MISSING
    if not fitting:
        return da, y
    if not observed.any():
        raise DataError(f"every response is missing ({y.shape[0]} items x {y.shape[1]} models); nothing to fit")
    for axis, noun in ((1, "item"), (0, "model")):
        empty = ~observed.any(axis=axis)
        if empty.any():
            name = str(da[noun].values[np.flatnonzero(empty)[0]])
            raise DataError(f"{int(empty.sum())} {noun}(s) have no observed response (e.g. {noun} {name!r}); "
                            "drop them before fitting (make_responses(..., drop_empty=True))")
    return da, y


def _patterns(y: np.ndarray, nodes: np.ndarray, weights: np.ndarray) -> tuple[ResponsePatterns, np.ndarray]:
    """Distinct response patterns (columns) and the index of each model's pattern."""
    pat, inv, count = np.unique(y, axis=1, return_inverse=True, return_counts=True)
    data = ResponsePatterns((pat == 1).astype(float), (pat == 0).astype(float), count.astype(float), nodes,
                            np.log(weights), bool((y != MISSING).all()))
    return data, inv.reshape(-1)


def _design(nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Z = [nodes, 1] (nodes, D+1), products of its column pairs (upper triangle) and their indices."""
    z = np.column_stack([nodes, np.ones(len(nodes))])
    pairs = np.triu_indices(z.shape[1])
    return z, z[:, pairs[0]] * z[:, pairs[1]], pairs


def _log_probs(beta: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log P and log (1 - P), shape (items, nodes); beta = [a, d] of shape (items, D+1)."""
    return log_probabilities(beta @ z.T)


def _e_step(data: ResponsePatterns, beta: np.ndarray, z: np.ndarray):
    return node_posterior(data, pattern_log_likelihood(data, *_log_probs(beta, z)))


def _qvalue(beta, r, n0, z, precision) -> np.ndarray:
    """Per-item expected complete-data log-likelihood plus the log prior kernel of the loadings."""
    lp, lq = _log_probs(beta, z)
    return (r * lp).sum(1) + (n0 * lq).sum(1) - 0.5 * (precision * beta**2).sum(1)


def _mstep(beta, free, r, n0, design, precision, max_newton: int = 10) -> np.ndarray:
    """Maximize each item's expected complete-data log posterior by Newton steps (batched)."""
    z, zz, (pi, qi) = design
    n_items, k = beta.shape
    n = r + n0
    fm = free.astype(float)
    fixed_eye = np.eye(k)[None] * (1.0 - fm)[:, :, None]  # 1 on the diagonal of fixed parameters
    val = _qvalue(beta, r, n0, z, precision)
    for _ in range(max_newton):
        p = probability(beta @ z.T)
        g = ((r - n * p) @ z - precision * beta) * fm
        upper = (n * p * (1 - p)) @ zz  # sum_k w_ik z_kp z_kq for p <= q
        h = np.empty((n_items, k, k))
        h[:, pi, qi] = upper
        h[:, qi, pi] = upper
        h = (h + np.diag(precision + 1e-10)) * fm[:, :, None] * fm[:, None, :] + fixed_eye
        step = np.linalg.solve(h, g[..., None])[..., 0]
        step /= np.maximum(np.abs(step).max(1) / 5.0, 1.0)[:, None]  # at most 5 units per step
        t = np.ones(n_items)
        for _ in range(30):
            new = beta + t[:, None] * step
            nval = _qvalue(new, r, n0, z, precision)
            bad = ~(nval >= val - 1e-13 * (1 + np.abs(val)))
            if not bad.any():
                break
            t = np.where(bad, t / 2, t)
        else:
            t = np.where(bad, 0.0, t)
            new = beta + t[:, None] * step
            nval = _qvalue(new, r, n0, z, precision)
        moved = float(np.abs(t[:, None] * step).max())
        beta, val = new, nval
        if moved < 1e-10:
            break
    return beta


def _em(data, beta, free, design, precision, max_iter: int, tol: float, ll_tol: float, accelerate: bool):
    """EM iterations from ``beta``; the objective trace starts with the initial values and holds the
    objective of the iterate after every EM step. With ``accelerate``, each update is a SQUAREM cycle
    (:mod:`~bayesirt.frequentist.squarem`; slopes and intercepts are unconstrained, so it
    extrapolates ``beta`` itself), else one EM step; convergence is tested after every update. Fixed
    (echelon) zeros stay zero: the EM steps' differences vanish there."""
    prior = lambda b: -0.5 * float((precision * b**2).sum())  # noqa: E731 (kernel; constants added later)

    def at(b: np.ndarray) -> EMPoint:
        ll, post = _e_step(data, b, design[0])
        return EMPoint(b, ll + prior(b), (ll, post))

    def em_step(point: EMPoint) -> EMPoint:
        return at(_mstep(point.x, free, *expected_counts(data, point.state[1]), design, precision))

    point = at(beta)
    objs, it, done = [point.objective], 0, False
    for new, trail in em_updates(point, em_step, at, max_iter, accelerate=accelerate):
        it += len(trail)
        objs += [p.objective for p in trail]
        change = float(np.abs(new.x - point.x).max())
        done = change < tol or abs(new.objective - point.objective) < ll_tol * abs(new.objective)
        point = new
        if done:
            break
    return point.x, point.state[0], point.state[1], objs, it, done


@declare()
def fit_mml_mirt(responses: xr.Dataset, n_dims: int, *,
                 quadrature: int | None = option(None, "Gauss-Hermite nodes per dimension [61, 31, 15, 9 for "
                                                       "D = 1..4]", type=int, low=3, high=201),
                 prune: float = option(PRUNE, "drop grid nodes whose prior weight is below this times the largest",
                                       low=0, high=1, open="high"),
                 max_iter: int = MAX_ITER,
                 tol: float = option(1e-4, "stop when no parameter moves more in an update", low=0, open=True),
                 ll_tol: float = option(1e-9, "or when the objective changes less, relative", low=0),
                 loading_prior: float | None = option(None, "SD of a N(0, SD^2) prior on every free loading "
                                                            "(MAP-EM) [none: ML]", type=float, low=0, open=True),
                 anchors: Sequence[str] | None = option(None, "item ids of the echelon constraint", type=object),
                 accelerate: bool = ACCELERATE, seed: int = option(0, "seed of the start values' jitter", low=0),
                 threads: int | None = THREADS) -> MIRTFit:
    """Fit the exploratory D-dimensional 2PL by marginal maximum likelihood (Bock-Aitkin EM).

    Parameters
    ----------
    responses : xarray.Dataset
        Response Dataset (``responses`` (item, model) int8, -1 missing).
    n_dims : int
        D, from 1 to :data:`MAX_DIMS`, smaller than the number of items.
    quadrature : int, optional
        Gauss-Hermite nodes per dimension; default :data:`QUADRATURE` (61, 31, 15, 9 for D = 1..4).
    prune : float
        Pruning constant of :func:`mirt_grid` (default :data:`PRUNE` = 1e-6; 0 = full grid).
    max_iter : int
        EM iteration cap (default 500; every EM step counts, those of a SQUAREM cycle too); hitting it warns.
    tol, ll_tol : float
        Stop when the largest parameter change in an update (an EM step or a SQUAREM cycle) is
        below ``tol`` (default 1e-4, R mirt's ``TOL``) or the relative change of the objective
        below ``ll_tol`` (default 1e-9: 4e-4 nats on a log-likelihood of -4e5).
    loading_prior : float, optional
        SD of a ``N(0, sd^2)`` prior on every free loading (MAP-EM; SAFE App. C used 1.5).
        Default None: ML.
    anchors : sequence of str, optional
        The D - 1 item ids of the echelon constraint (anchor j loads only on dimensions
        1..j+1). Default: the first D - 1 items.
    accelerate : bool
        SQUAREM extrapolation of the EM steps (:mod:`~bayesirt.frequentist.squarem`; default True;
        the objective still never decreases). False runs plain EM.
    seed : int
        Seed of the small jitter added to the eigenvector start values (default 0).
    threads : int or None
        BLAS threads during the fit (default 1; None leaves the BLAS default).

    Returns
    -------
    MIRTFit

    Raises
    ------
    ConfigError
        ``n_dims`` not in 1..4 or not smaller than the number of items, an option outside its
        declared range (grid, tolerances, prior), bad anchors. ``DataError`` for responses that are not a response
        Dataset, all missing, or with an item or model without any observed response.

    Warns
    -----
    RuntimeWarning
        The iteration cap was hit; a parameter ran past |a| > 20 or |d| > 30 (perfect
        separation or an item without variation: consider ``loading_prior``).
    """
    da, y = _response_matrix(responses)
    n_items, n_models = y.shape
    n_dims = _check_dims(n_dims, n_items)
    item_ids = da["item"].values
    anchor_idx = anchor_index(anchors, n_dims, item_ids)
    nodes, weights = mirt_grid(n_dims, quadrature, prune)
    q = QUADRATURE[n_dims] if quadrature is None else int(quadrature)
    data, inv = _patterns(y, nodes, weights)
    design = _design(nodes)
    precision = np.zeros(n_dims + 1)
    if loading_prior is not None:
        precision[:n_dims] = loading_prior**-2.0
    free = free_mask(n_items, n_dims, anchor_idx)
    with blas_threads(threads):
        beta0 = start_values(y, n_dims, anchor_idx, np.random.default_rng(seed))
        beta, ll, post, objs, it, converged = _em(data, beta0, free, design, precision, max_iter, tol, ll_tol,
                                                  accelerate)
    signs = np.where(beta[:, :n_dims].sum(0) < 0, -1.0, 1.0)  # reflect each dimension to a positive loading sum
    a, d = beta[:, :n_dims] * signs, beta[:, n_dims]
    eap = (post / data.count[:, None]) @ nodes * signs
    n_free = int(free.sum())
    log_prior = 0.0
    if loading_prior is not None:
        free_a = a[free[:, :n_dims]]
        log_prior = float(-0.5 * (free_a**2).sum() / loading_prior**2
                          - free_a.size * (np.log(loading_prior) + 0.5 * np.log(2 * np.pi)))
    if not converged:
        warn(f"MIRT MML (D = {n_dims}) hit the iteration cap max_iter={max_iter} without converging (last "
             f"objective change {objs[-1] - objs[-2]:.3g}); raise max_iter or check the data",
             RuntimeWarning)
    for name, bad in (("|loading| > 20", np.abs(a).max(1) > _BOUND_A), ("|intercept| > 30", np.abs(d) > _BOUND_D)):
        if bad.any():
            warn(f"MIRT MML (D = {n_dims}): {int(bad.sum())} item(s) ran to a bound, {name} (e.g. item "
                 f"{str(item_ids[bad][0])!r}); their estimates are unreliable (perfect separation or an item "
                 "without variation); " + ("consider loading_prior=1.5" if loading_prior is None else
                                           "drop items without variation"), RuntimeWarning)
    icoords = {k: v for k, v in da.coords.items() if da[k].dims == ("item",)}
    mcoords = {k: v for k, v in da.coords.items() if da[k].dims == ("model",)}
    dim = np.arange(1, n_dims + 1)
    loadings = xr.DataArray(a, dims=("item", "dim"), coords={**icoords, "dim": dim}, name="loading")
    intercepts = xr.DataArray(d, dims=("item",), coords=icoords, name="intercept")
    abilities = xr.DataArray(eap[inv], dims=("model", "dim"), coords={**mcoords, "dim": dim}, name="theta")
    crit = information_criteria(ll, n_free, n_models)
    attrs = {"method": "MML (Bock-Aitkin EM)" + (", MAP loadings" if loading_prior else ""),
             "formula": "P = sigmoid(a . theta + d), theta ~ N(0, I_D)", "n_dims": n_dims,
             "quadrature": q, "prune": float(prune), "n_nodes": int(len(nodes)), "full_grid": int(q**n_dims),
             "loading_prior_sd": float(loading_prior) if loading_prior else "none",
             "anchors": ", ".join(str(item_ids[i]) for i in anchor_idx) or "none",
             "accelerate": "SQUAREM" if accelerate else "none",
             "identification": "echelon: the j-th anchor item (j = 1..D-1) loads only on dimensions 1..j; "
                               "columns reflected to positive sums",
             "seed": int(seed), "dataset": str(responses.attrs.get("name", ""))}
    return MIRTFit(loadings, intercepts, abilities, float(ll), log_prior, float(ll) + log_prior, n_free, n_models,
                   crit["aic"], crit["bic"], it, converged, np.array(objs), attrs)


def mirt_model_loglik(fit: MIRTFit, responses: xr.Dataset) -> xr.DataArray:
    """Marginal log-likelihood of each model's responses under a fit's item parameters.

    Integrated on the fit's own (pruned) grid; no per-model parameter is fitted, so this is the
    held-out score of SAFE App. C when ``responses`` holds models the fit did not see.

    Parameters
    ----------
    fit : MIRTFit
    responses : xarray.Dataset
        The fit's items, in the same order; any models. Missing cells contribute nothing.

    Returns
    -------
    xarray.DataArray
        Dim ``model``.
    """
    da, y = _response_matrix(responses, fitting=False)
    if not np.array_equal(da["item"].values, fit.loadings["item"].values):
        raise DataError("responses must hold the fitted items in the fitted order to be scored by this fit")
    nodes, weights = mirt_grid(fit.n_dims, fit.attrs["quadrature"], fit.attrs["prune"])
    data, inv = _patterns(y, nodes, weights)
    beta = np.column_stack([fit.loadings.values, fit.intercepts.values])
    ll = pattern_log_likelihood(data, *_log_probs(beta, _design(nodes)[0]))
    mx = ll.max(axis=1)
    per_pattern = mx + np.log(np.exp(ll - mx[:, None]).sum(1))
    mcoords = {k: v for k, v in da.coords.items() if da[k].dims == ("model",)}
    return xr.DataArray(per_pattern[inv], dims=("model",), coords=mcoords, name="loglik")
