"""Direct penalized joint logistic MIRT, the alternative ability adjustment of NT App. B.1.

For a fitting matrix of I items and M models with z_im = b_i + a_i . theta_m, the fit minimizes
(eq. 12)

    L = mean over observed cells of [log(1 + e^z) - y z]
        + lam / 2 (mean_i ||a_i||^2 + mean_m ||theta_m||^2) + eta / I sum_i b_i^2,

lam = .01, eta = 5e-5 (with every cell observed the first term is NT's 1 / (IM) sum). It is a
joint (fixed-effects) fit, not a marginal-likelihood or Bayesian MIRT, and finds a plateau, not
a proven global optimum.

- Optimizer: full-batch Adam (learning rate .03, betas .9 / .999, eps 1e-8, PyTorch's bias
  correction) with analytic float64 gradients, at most 6,000 updates. The objective is evaluated
  before the first update and every 20 updates; the fit stops after 3 consecutive absolute
  changes below 1e-6 (``converged``). Joint and coordinate-only fits scale the gradient of the
  free parameters to a global norm of at most 10; the item-only fit does not clip. NT fits in
  float32 with two threads; here float64, and one BLAS thread by default (``threads``): the
  products are thin, and on a busy machine threaded BLAS ran these fits about 10x slower.
- Joint fit: two initializations, each with a and theta drawn independently from
  N(0, (0.1 K^-1/4)^2) and b_i = logit[(sum_m y_im + .5) / (M_i + 1)] (M_i the models observing
  item i); the one with the lower final objective is kept.
- Coordinate-only fit (held-out models): item parameters fixed, theta from zero, the same
  eq. 12 objective on the given items x models, so the same per-model penalty lam / 2 ||theta_m||^2
  against each model's mean loss.
- Item-only fit: theta fixed, b and a fitted with their eq. 12 penalties from a given start.
- Dimension selection (:func:`select_dimension_direct`): the owner and item splits of
  :func:`bayesirt.audit.adjustment.spectral.select_dimension` (the same seed gives the same splits); for each K a
  joint fit on every item x the inner-training models, coordinate-only fits of the held-out
  models on the calibration items, and the held-out mean Bernoulli log loss of
  b_i + a_i . theta_m (unclipped) on the evaluation items; one-SE rule as in the spectral
  selection.
- Purification offsets (:func:`direct_offsets`): a joint fit on the rows S gives the
  coordinates; they are centred (their mean a_i . mean(theta) moved into b_i) and frozen; all
  items are refitted item-only from the warm start (rows S: their joint-fit parameters; other
  items: a = 0, b = smoothed logit); offsets are clip(a_i . theta_m, -6, 6), no intercept.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logit

from bayesirt.audit.adjustment.spectral import K_GRID, MAX_OFFSET, DimensionSelection, nested_split, working_responses
from bayesirt.errors import DataError, warn
from bayesirt.utils.parallel import blas_threads
from bayesirt.utils.validation import check_int, parameter_error

__all__ = ["FACTOR_PENALTY", "INTERCEPT_PENALTY", "JointMIRT", "fit_joint_mirt", "fit_coordinates", "fit_item_parameters",
           "select_dimension_direct", "direct_offsets"]

FACTOR_PENALTY = 0.01
"""lambda of eq. 12 (loadings and coordinates)."""
INTERCEPT_PENALTY = 5e-5
"""eta of eq. 12 (intercepts)."""
_BETA1, _BETA2, _EPS = 0.9, 0.999, 1e-8


@dataclass(frozen=True)
class JointMIRT:
    """A penalized logistic MIRT fit (eq. 12).

    Attributes
    ----------
    intercept : ndarray (item,)
        b.
    loading : ndarray (item, dim)
        a.
    theta : ndarray (model, dim)
        Model coordinates.
    objective : float
        Final penalized objective (eq. 12 on the fitting matrix).
    updates : int
        Adam updates run.
    converged : bool
        Stopped by the plateau rule rather than the update cap.
    """

    intercept: np.ndarray
    loading: np.ndarray
    theta: np.ndarray
    objective: float
    updates: int
    converged: bool


@dataclass(frozen=True)
class _Settings:
    lam: float
    eta: float
    learning_rate: float
    max_updates: int
    check_every: int
    patience: int
    tolerance: float
    clip_norm: float | None
    threads: int | None


def _settings(caller: str, lam, eta, learning_rate, max_updates, check_every, patience, tolerance,
              clip_norm, threads) -> _Settings:
    for name, value, ok, what in (
            ("lam", lam, lam >= 0, "a non-negative number"), ("eta", eta, eta >= 0, "a non-negative number"),
            ("learning_rate", learning_rate, learning_rate > 0, "a positive number"),
            ("tolerance", tolerance, tolerance >= 0, "a non-negative number"),
            ("clip_norm", clip_norm, clip_norm is None or clip_norm > 0, "a positive number or None")):
        if not ok:
            raise parameter_error(name, caller, what, value)
    for name, value in (("max_updates", max_updates), ("check_every", check_every), ("patience", patience)):
        check_int(value, name=name, caller=caller, low=1)
    check_int(threads, name="threads", caller=caller, low=1, optional=True)
    return _Settings(lam, eta, learning_rate, max_updates, check_every, patience, tolerance, clip_norm, threads)


def _data(caller: str, y, observed) -> tuple[np.ndarray, np.ndarray | float]:
    """Responses with missing cells set to 0 and the cell weights 1 / (observed cells)."""
    y, observed = np.asarray(y, dtype=np.float64), np.asarray(observed, dtype=bool)
    if y.ndim != 2 or observed.shape != y.shape:
        raise DataError(f"{caller} needs y and observed of one (item, model) shape; got {y.shape} and {observed.shape}")
    count = observed.sum()
    if count == 0:
        raise DataError(f"{caller} got no observed cell: pass the matrix's observed mask")
    y0 = np.where(observed, y, 0.0)
    if not np.isin(y0, (0.0, 1.0)).all():
        raise DataError(f"{caller} needs 0/1 responses in observed cells: recode the matrix to correct = 1")
    return y0, (1.0 / count if observed.all() else observed / count)


def _objective(z, params, y0, weight, lam, eta) -> float:
    b, a, theta = params
    nll = (weight * (np.logaddexp(0.0, z) - y0 * z)).sum()
    return float(nll + lam / 2 * ((a ** 2).sum() / a.shape[0] + (theta ** 2).sum() / theta.shape[0])
                 + eta / b.size * (b ** 2).sum())


def _gradients(z, params, y0, weight, lam, eta, free) -> list[np.ndarray | None]:
    """Gradients of eq. 12 with respect to (b, a, theta); None for a frozen block."""
    b, a, theta = params
    r = expit(z)
    r -= y0
    r *= weight
    return [r.sum(axis=1) + 2 * eta / b.size * b if free[0] else None,
            r @ theta + lam / a.shape[0] * a if free[1] else None,
            r.T @ a + lam / theta.shape[0] * theta if free[2] else None]


def _adam(params, free, y0, weight, s: _Settings) -> JointMIRT:
    """Full-batch Adam on the ``free`` blocks of (b, a, theta) with the plateau rule."""
    params = [p.astype(np.float64, copy=True) for p in params]
    moments = [(np.zeros_like(p), np.zeros_like(p)) if f else None for p, f in zip(params, free)]
    previous, small, converged, t = None, 0, False, 0
    with blas_threads(s.threads):
        while True:
            z = params[1] @ params[2].T
            z += params[0][:, None]
            if t % s.check_every == 0 or t == s.max_updates:
                objective = _objective(z, params, y0, weight, s.lam, s.eta)
                if t % s.check_every == 0:
                    small = small + 1 if previous is not None and abs(objective - previous) < s.tolerance else 0
                    previous = objective
                    converged = small >= s.patience
            if converged or t == s.max_updates:
                break
            grads = _gradients(z, params, y0, weight, s.lam, s.eta, free)
            norm = np.sqrt(sum((g ** 2).sum() for g in grads if g is not None))
            if s.clip_norm is not None and norm > s.clip_norm:
                grads = [None if g is None else g * (s.clip_norm / norm) for g in grads]
            t += 1
            for p, g, mv in zip(params, grads, moments):
                if g is not None:
                    m, v = mv
                    m *= _BETA1
                    m += (1 - _BETA1) * g
                    v *= _BETA2
                    v += (1 - _BETA2) * g * g
                    p -= s.learning_rate * (m / (1 - _BETA1 ** t)) / (np.sqrt(v / (1 - _BETA2 ** t)) + _EPS)
    return JointMIRT(intercept=params[0], loading=params[1], theta=params[2], objective=objective, updates=t,
                     converged=converged)


def fit_joint_mirt(y: np.ndarray, observed: np.ndarray, k: int, *, seed: int, init: int = 2,
                   lam: float = FACTOR_PENALTY, eta: float = INTERCEPT_PENALTY, learning_rate: float = 0.03,
                   max_updates: int = 6000, check_every: int = 20, patience: int = 3, tolerance: float = 1e-6,
                   clip_norm: float | None = 10.0, threads: int | None = 1) -> JointMIRT:
    """Joint penalized logistic MIRT of dimension ``k`` (NT eq. 12), best of ``init`` starts.

    Parameters
    ----------
    y, observed : ndarray (item, model)
        0/1 responses (a missing cell's value is ignored) and the observed mask.
    k : int
        Dimension.
    seed : int
        Seeds the random starts (drawn in turn from one generator).
    init : int
        Random starts; the lowest final objective is kept (NT: 2).
    lam, eta : float
        Penalties of eq. 12 (NT: .01 and 5e-5).
    learning_rate, max_updates : float, int
        Adam step size and update cap (NT: .03, 6,000).
    check_every, patience, tolerance : int, int, float
        Plateau rule: objective every ``check_every`` updates, stop after ``patience``
        consecutive absolute changes below ``tolerance`` (NT: 20, 3, 1e-6).
    clip_norm : float or None
        Global gradient-norm clip (NT: 10); None does not clip.
    threads : int or None
        BLAS threads during the fit (default 1: on a busy machine more threads can cost 100x on
        these thin products); None leaves the BLAS setting alone.

    Returns
    -------
    JointMIRT
    """
    s = _settings("fit_joint_mirt", lam, eta, learning_rate, max_updates, check_every, patience, tolerance, clip_norm,
                  threads)
    y0, weight = _data("fit_joint_mirt", y, observed)
    for name, value in (("k", k), ("init", init)):
        check_int(value, name=name, caller="fit_joint_mirt", low=1)
    intercept = logit(working_responses(y0, np.asarray(observed, bool))[1])
    rng = np.random.default_rng(seed)
    scale = 0.1 * k ** -0.25
    best = None
    for _ in range(init):
        loading = rng.normal(0.0, scale, (y0.shape[0], k))
        theta = rng.normal(0.0, scale, (y0.shape[1], k))
        fit = _adam([intercept, loading, theta], (True, True, True), y0, weight, s)
        if best is None or fit.objective < best.objective:
            best = fit
    return best


def fit_coordinates(y: np.ndarray, observed: np.ndarray, intercept: np.ndarray, loading: np.ndarray, *,
                    lam: float = FACTOR_PENALTY, learning_rate: float = 0.03, max_updates: int = 6000,
                    check_every: int = 20, patience: int = 3, tolerance: float = 1e-6,
                    clip_norm: float | None = 10.0, threads: int | None = 1) -> JointMIRT:
    """Coordinates of new models with item parameters fixed (NT B.1), theta started at zero.

    Parameters
    ----------
    y, observed : ndarray (item, model)
        The new models' responses to the items of ``intercept`` and ``loading``.
    intercept : ndarray (item,)
    loading : ndarray (item, dim)
    lam, learning_rate, max_updates, check_every, patience, tolerance, clip_norm, threads
        As :func:`fit_joint_mirt`; ``objective`` is eq. 12 with the fixed items' penalties as constants.

    Returns
    -------
    JointMIRT
        The given item parameters and the fitted ``theta``.
    """
    s = _settings("fit_coordinates", lam, INTERCEPT_PENALTY, learning_rate, max_updates, check_every, patience,
                  tolerance, clip_norm, threads)
    y0, weight = _data("fit_coordinates", y, observed)
    intercept, loading = _items("fit_coordinates", y0, intercept, loading)
    theta = np.zeros((y0.shape[1], loading.shape[1]))
    return _adam([intercept, loading, theta], (False, False, True), y0, weight, s)


def fit_item_parameters(y: np.ndarray, observed: np.ndarray, theta: np.ndarray, intercept: np.ndarray,
                        loading: np.ndarray, *, lam: float = FACTOR_PENALTY, eta: float = INTERCEPT_PENALTY,
                        learning_rate: float = 0.03, max_updates: int = 6000, check_every: int = 20,
                        patience: int = 3, tolerance: float = 1e-6, clip_norm: float | None = None,
                        threads: int | None = 1) -> JointMIRT:
    """Item intercepts and loadings with the coordinates ``theta`` fixed, from the start
    ``intercept``, ``loading`` (NT B.1: no gradient clipping by default).

    Parameters
    ----------
    y, observed : ndarray (item, model)
    theta : ndarray (model, dim)
        Fixed coordinates.
    intercept : ndarray (item,)
        Starting b.
    loading : ndarray (item, dim)
        Starting a.
    lam, eta, learning_rate, max_updates, check_every, patience, tolerance, clip_norm, threads
        As :func:`fit_joint_mirt`.

    Returns
    -------
    JointMIRT
    """
    s = _settings("fit_item_parameters", lam, eta, learning_rate, max_updates, check_every, patience, tolerance,
                  clip_norm, threads)
    y0, weight = _data("fit_item_parameters", y, observed)
    intercept, loading = _items("fit_item_parameters", y0, intercept, loading)
    theta = np.asarray(theta, dtype=np.float64)
    if theta.shape != (y0.shape[1], loading.shape[1]):
        raise DataError(f"fit_item_parameters needs theta of shape (model, dim) = {(y0.shape[1], loading.shape[1])}; "
                        f"got {theta.shape}")
    return _adam([intercept, loading, theta], (True, True, False), y0, weight, s)


def _items(caller: str, y0: np.ndarray, intercept, loading) -> tuple[np.ndarray, np.ndarray]:
    intercept, loading = np.asarray(intercept, dtype=np.float64), np.asarray(loading, dtype=np.float64)
    if intercept.shape != (y0.shape[0],) or loading.ndim != 2 or loading.shape[0] != y0.shape[0]:
        raise DataError(f"{caller} needs an intercept per item and loadings (item, dim) for the {y0.shape[0]} items; "
                        f"got {intercept.shape} and {loading.shape}")
    return intercept, loading


def select_dimension_direct(y: np.ndarray, observed: np.ndarray, owner: np.ndarray, item_group: np.ndarray, *,
                            seed: int, grid: tuple[int, ...] = K_GRID, max_k: int | None = None,
                            threads: int | None = 1) -> DimensionSelection:
    """Nested owner- and item-held-out selection of K for the direct MIRT (NT B.1).

    Parameters
    ----------
    y, observed : ndarray (item, model)
        The audit half's responses.
    owner : ndarray (model,)
    item_group : ndarray (item,)
    seed : int
        Seeds the owner and item splits (the same splits as
        :func:`bayesirt.audit.adjustment.spectral.select_dimension` with this seed) and the random starts.
    grid : tuple of int
        Candidate K (default NT's ``K_GRID``), limited to K <= min(items, training models).
    max_k : int, optional
        Drop candidates above this.
    threads : int or None
        BLAS threads of every fit (:func:`fit_joint_mirt`).

    Returns
    -------
    DimensionSelection
        Its ``table`` also records, per K, the joint and coordinate fits' updates and whether
        both stopped on the plateau rule (``converged``); a selected K whose fits did not warns.
    """
    y, observed = np.asarray(y), np.asarray(observed, dtype=bool)
    rng = np.random.default_rng(seed)
    split = nested_split(y, observed, owner, item_group, rng, grid=grid, max_k=max_k)
    held, calibrate = split.held, split.calibrate
    fit_seed = int(rng.integers(2**31))
    evaluate = ~calibrate
    y_c, obs_c = y[calibrate][:, held], observed[calibrate][:, held]
    if not obs_c.any():
        raise DataError("no held-out model observes a calibration item, so no coordinates can be fitted: "
                        "add models or owners to the audit half")
    rows = []
    for k in split.feasible:
        joint = fit_joint_mirt(y[:, ~held], observed[:, ~held], k, seed=fit_seed, threads=threads)
        coords = fit_coordinates(y_c, obs_c, joint.intercept[calibrate], joint.loading[calibrate], threads=threads)
        xi = joint.intercept[evaluate, None] + joint.loading[evaluate] @ coords.theta.T
        rows.append(split.loss(k, xi) | {"joint_updates": joint.updates, "coordinate_updates": coords.updates,
                                         "converged": joint.converged and coords.converged})
    selection = split.select(rows, owner)
    table = selection.table
    chosen = int(np.flatnonzero(table["selected"])[0])
    if not table.at[chosen, "converged"]:
        warn(f"direct MIRT fits at the selected K={table.at[chosen, 'k']} hit the update cap before the "
             "objective plateaued (see the table's 'converged'); treat the selection with care")
    return selection


def direct_offsets(y: np.ndarray, observed: np.ndarray, fit_items: np.ndarray, k: int, *,
                   seed: int, threads: int | None = 1) -> tuple[np.ndarray, int]:
    """Capability offsets clip(a_i . theta_m, -6, 6) (item, model) of the direct MIRT (NT B.1),
    with the rank used; the drop-in for :func:`bayesirt.audit.adjustment.spectral.spectral_offsets` in a
    purification round.

    Parameters
    ----------
    y, observed : ndarray (item, model)
        The audit half's responses.
    fit_items : ndarray
        Indices (or a boolean mask) of the rows S whose joint fit gives the coordinates.
    k : int
        Dimension; lowered to ``min(k, rows, models)`` as in the spectral offsets.
    seed : int
        Seeds the joint fit's random starts.
    threads : int or None
        BLAS threads of the fits (:func:`fit_joint_mirt`).

    Returns
    -------
    offsets : ndarray (item, model)
    rank : int
    """
    y, observed = np.asarray(y, dtype=np.float64), np.asarray(observed, dtype=bool)
    rows = np.arange(y.shape[0])[np.asarray(fit_items)]
    if rows.size == 0:
        raise DataError("direct_offsets got no fitting item: pass a non-empty fit_items")
    rank = int(min(k, rows.size, y.shape[1]))
    joint = fit_joint_mirt(y[rows], observed[rows], rank, seed=seed, threads=threads)
    centre = joint.theta.mean(axis=0)
    intercept = logit(working_responses(np.where(observed, y, 0.0), observed)[1])
    intercept[rows] = joint.intercept + joint.loading @ centre  # centring leaves the predictors unchanged
    loading = np.zeros((y.shape[0], rank))
    loading[rows] = joint.loading
    theta = joint.theta - centre
    items = fit_item_parameters(y, observed, theta, intercept, loading, threads=threads)
    if not (joint.converged and items.converged):
        warn(f"direct MIRT offsets at K={rank} hit the update cap before the objective plateaued "
             f"(joint fit {joint.updates}, item fit {items.updates} updates)")
    return np.clip(items.loading @ theta.T, -MAX_OFFSET, MAX_OFFSET), rank
