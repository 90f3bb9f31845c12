"""The Laplace approximation of the 2PL posterior, on the response matrix (the engine of
:mod:`bayesirt.inference.laplace`).

Parameters: abilities ``theta`` (M models), and per item ``alpha = log a`` and the intercept ``d``
(N items), with independent normal priors on theta, alpha and d (the log-normal discrimination
prior is a normal one on alpha, Jacobian included). ``f`` is the negative log posterior

    f = -sum_obs [y * eta - softplus(eta)] + prior terms,   eta_im = exp(alpha_i) * theta_m + d_i.

Its Hessian ``H`` has a diagonal ability block ``A`` (one value per model), 2 x 2 item blocks
``C_i`` and a dense cross block ``B`` (M x 2N). With ``C_i = L_i L_i'`` (Cholesky) and
``Z_i = L_i^-1 B_i'`` (2 x M), the Schur complement

    S = A - sum_i B_i C_i^-1 B_i' = A - Z'Z                     (M x M, one symmetric rank-2N update)

is the precision of the abilities' marginal Gaussian. One *pass* (:func:`curvature`) goes over the
matrix an item chunk at a time: a parallel numba kernel gives per cell w = p(1 - p) and the residual
r = y - p and per item the gradient, ``C_i`` and ``Z_i``; BLAS ``syrk`` adds ``-Z_c'Z_c`` of the chunk
to ``S``. Cost: M^2 x 2N multiply-adds (7e11 at 5,000 x 14,042); memory: ``S`` plus ``Z`` stored in
float32 (2N x M) for the draws.

- Centre: not the joint mode of f, which shrinks the abilities' scale (:mod:`bayesirt.inference.laplace`), but the
  mode of the items' Laplace-marginal posterior, the minimum over the items phi of
  ``G(phi) = f(theta_hat(phi), phi) + 1/2 sum_m log h_m`` (each ability integrated out by a
  Laplace approximation given the items: theta_hat its conditional mode, ``h_m = sum_i w_im a_i^2
  + 1 / sigma_theta^2`` its curvature), with the abilities at theta_hat. The system solved is
  ``df/dtheta = 0`` and ``dG/dphi = 0``; the volume term's gradient, by implicit differentiation
  through theta_hat, is ``1/2 sum_m (dh_m/dphi_i - (k_m / h_m) B_im) / h_m`` with ``k_m =
  dh_m/dtheta_m``. Found by block coordinate sweeps on f (cheap passes), then Newton steps
  through the Schur complement of f's Hessian (``S x = -g_theta + Z'q``, ``q_i = L_i^-1 g_i``; item
  steps ``L_i^-T(-q_i - Z_i x)``), with a halving line search on ``F = f + 1/2 sum_m log h_m``
  while steps are large; small steps are followed by chord steps that reuse the factorization
  (their rate is the share of the system's Jacobian that f's Hessian leaves out). Far from the
  centre (largest step above :data:`FISHER_ABOVE`) the expected information is used, positive
  definite everywhere; near it the observed Hessian, which is the covariance: that of the last
  pass, whose step was below :data:`STEP_TOLERANCE`.
- Draws (exact from the joint Gaussian): theta = mode + R^-1 eps with ``S = R'R``, then each item
  from its conditional given theta, ``phi_i = mode_i + L_i^-T(-Z_i (theta - mode) + eps_i)``.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from scipy.linalg import blas, lapack, solve_triangular

from bayesirt.errors import BayesIRTError, ConfigError, DataError

__all__ = ["curvature", "find_mode", "joint_draws", "start_point", "CHORD_BELOW", "MAX_CHORDS", "FISHER_ABOVE",
           "MAX_HALVINGS", "STEP_TOLERANCE",
           "MAX_STEPS", "MAX_SWEEPS", "SWEEP_UNTIL", "CHUNK_CELLS"]

#: Largest Newton step (in theta, log a or d) above which the next step uses the expected information.
FISHER_ABOVE = 1.0
#: The mode is reached when the largest Newton step is below this: the step is taken and the
#: covariance is the curvature one step before it (its error is of the order of the step).
STEP_TOLERANCE = 1e-4
#: Schur passes (Newton steps) at most, and chord steps per pass.
MAX_STEPS, MAX_CHORDS = 40, 30
#: A Newton step below this is followed by chord steps with the same factorization.
CHORD_BELOW = 0.05
#: A line search on F that halves a step more often than this has found no descent of F along it
#: (G's Newton direction near an extreme item): the search continues with damped steps, as near the centre.
MAX_HALVINGS = 6
#: Block coordinate sweeps before the Newton steps: at most MAX_SWEEPS, until the largest change is below SWEEP_UNTIL.
MAX_SWEEPS, SWEEP_UNTIL = 30, 0.05
#: Cells per item chunk of a pass (bounds the chunk's float64 work arrays to about 160 MB).
CHUNK_CELLS = 5_000_000


@numba.njit(parallel=True, fastmath=True, cache=True)
def _chunk_kernel(y, theta, alpha, d, prior, volume, fisher, want_z, w_out, r_out, k_out, z_out, item_out):
    """Per cell w, r and w (1 - 2p) (0 where missing) into ``w_out``/``r_out``/``k_out``; per item of
    the chunk, into ``item_out`` (k, 6): gradient of G in alpha and d (the ability-volume term with
    ``volume`` = (1 / h_m, k_m / h_m^2) per model), Cholesky factor (l11, l21, l22) of the 2 x 2 block of f, and the
    item's log-likelihood; with ``want_z``, the rows ``Z_i`` into ``z_out`` (2k, M). A block that is
    not positive definite gets l11 = NaN."""
    k, n_models = y.shape
    ia, ma, id_, md = 1.0 / prior[2] ** 2, prior[3], 1.0 / prior[4] ** 2, prior[5]
    for i in numba.prange(k):
        a = math.exp(alpha[i])
        s_w = s_wt = s_wt2 = s_rt = s_r = ll = c_a = c_d = b_a = b_d = 0.0
        for m in range(n_models):
            yy = y[i, m]
            if yy < 0:
                w_out[i, m] = 0.0
                r_out[i, m] = 0.0
                k_out[i, m] = 0.0
                continue
            t = theta[m]
            eta = a * t + d[i]
            if eta > 0:
                e = math.exp(-eta)
                p = 1.0 / (1.0 + e)
                ll += yy * eta - eta - math.log1p(e)
            else:
                e = math.exp(eta)
                p = e / (1.0 + e)
                ll += yy * eta - math.log1p(e)
            w = p * (1.0 - p)
            r = yy - p
            w_out[i, m] = w
            r_out[i, m] = r
            k_out[i, m] = w * (1.0 - 2.0 * p)
            c_a += volume[0, m] * (k_out[i, m] * a * t + 2.0 * w)
            c_d += volume[0, m] * k_out[i, m]
            b_a += volume[1, m] * (w * a * t - r)
            b_d += volume[1, m] * w
            s_w += w
            s_wt += w * t
            s_wt2 += w * t * t
            s_rt += r * t
            s_r += r
        h_aa = a * a * s_wt2 + ia - (0.0 if fisher else a * s_rt)
        h_ad = a * s_wt
        h_dd = s_w + id_
        item_out[i, 0] = -a * s_rt + (alpha[i] - ma) * ia + 0.5 * a * (a * c_a - b_a)
        item_out[i, 1] = -s_r + (d[i] - md) * id_ + 0.5 * a * (a * c_d - b_d)
        item_out[i, 5] = ll
        if h_aa <= 0.0:
            item_out[i, 2] = np.nan
            continue
        l11 = math.sqrt(h_aa)
        l21 = h_ad / l11
        rest = h_dd - l21 * l21
        if rest <= 0.0:
            item_out[i, 2] = np.nan
            continue
        l22 = math.sqrt(rest)
        item_out[i, 2], item_out[i, 3], item_out[i, 4] = l11, l21, l22
        if want_z:
            for m in range(n_models):
                w = w_out[i, m]
                u = a * (w * a * theta[m] - (0.0 if fisher else r_out[i, m]))
                z1 = u / l11
                z_out[2 * i, m] = z1
                z_out[2 * i + 1, m] = (w * a - l21 * z1) / l22


def _chunks(n_items: int, n_models: int):
    step = max(1, CHUNK_CELLS // max(1, n_models))
    return [slice(s, min(s + step, n_items)) for s in range(0, n_items, step)]


def _prior_penalty(theta, alpha, d, prior) -> float:
    return float(sum((((x - prior[2 * j + 1]) / prior[2 * j]) ** 2).sum() / 2
                     for j, x in enumerate((theta, alpha, d))))


def curvature(y, theta, alpha, d, prior, volume, *, fisher: bool = True, z_store=None) -> dict:
    """One pass at a point: ``F`` (``objective``), the gradient of f in theta (``grad_theta``) and of G
    in the items (``grad_items``; its volume term uses ``volume`` (2, M), (1 / h_m, k_m / h_m^2) at
    this point from an earlier pass, or zeros to leave it out), the ability curvatures ``h_theta``
    and their derivatives ``k_theta`` of this pass, and the items' Cholesky factors of f. With ``z_store`` (2N x M float32) also ``Z`` into it and the Schur
    complement ``S`` (float64, upper triangle, Fortran order): each chunk's ``Z_c'Z_c`` is a float32
    ``syrk`` (twice as fast as float64; its rounding grows with the chunk's 2k terms only), summed
    in float64. Raises when an item block is not positive definite."""
    n_items, n_models = y.shape
    schur = None if z_store is None else np.zeros((n_models, n_models), order="F")
    part = None if z_store is None else np.zeros((n_models, n_models), dtype=np.float32, order="F")
    grad_theta = (theta - prior[1]) / prior[0] ** 2
    h_theta = np.full(n_models, 1.0 / prior[0] ** 2)
    k_theta = np.zeros(n_models)
    items = np.empty((n_items, 6))
    for sl in _chunks(n_items, n_models):
        k = sl.stop - sl.start
        w, r, kw = np.empty((k, n_models)), np.empty((k, n_models)), np.empty((k, n_models))
        z = np.empty((2 * k, n_models)) if z_store is not None else np.empty((0, 0))
        a = np.exp(alpha[sl])
        _chunk_kernel(y[sl], theta, alpha[sl], d[sl], prior, volume, fisher, z_store is not None, w, r, kw, z,
                      items[sl])
        h_theta += (a * a) @ w
        grad_theta -= a @ r
        k_theta += (a * a * a) @ kw
        del w, r, kw
        if z_store is not None:
            if np.isnan(items[sl, 2]).any():
                raise DataError("an item's posterior curvature is not positive definite at the current point")
            z_store[2 * sl.start:2 * sl.stop] = z
            part = blas.ssyrk(1.0, z_store[2 * sl.start:2 * sl.stop].T, beta=0.0, c=part, trans=0, lower=0,
                              overwrite_c=1)
            schur -= part
    if schur is not None:
        schur[np.diag_indices(n_models)] += h_theta
    objective = -float(items[:, 5].sum()) + _prior_penalty(theta, alpha, d, prior) \
        + (0.5 * float(np.log(h_theta).sum()) if volume.any() else 0.0)
    return {"grad_theta": grad_theta, "h_theta": h_theta, "k_theta": k_theta, "grad_items": items[:, :2].copy(),
            "chol_items": items[:, 2:5].copy(), "schur": schur, "objective": objective}


def _cholesky_upper(schur):
    factor, info = lapack.dpotrf(schur, lower=0, overwrite_a=1, clean=1)
    if info != 0:
        raise DataError("the abilities' posterior precision is not positive definite at the current point")
    return factor


def _lower_solve(chol, v):
    """L_i^-1 v_i for 2-vectors (..., N, 2) and factors (N, 3) = (l11, l21, l22)."""
    first = v[..., 0] / chol[:, 0]
    return np.stack([first, (v[..., 1] - chol[:, 1] * first) / chol[:, 2]], axis=-1)


def _upper_solve(chol, v):
    """L_i^-T v_i."""
    second = v[..., 1] / chol[:, 2]
    return np.stack([(v[..., 0] - chol[:, 1] * second) / chol[:, 0], second], axis=-1)


def _z_times(z_store, x):
    """Z_i x for every item: (N, 2) from the stored (2N, M) Z and an (M,) or (M, D) x -> (N, 2[, D])."""
    out = z_store @ x.astype(z_store.dtype)
    return out.reshape(-1, 2, *x.shape[1:]).astype(np.float64)


def _solve(grad_theta, grad_items, factor, chol, z_store):
    """The step -H^-1 g through the Schur complement (module notes), H from a stored pass."""
    q = _lower_solve(chol, grad_items)
    rhs = -grad_theta + (z_store.T @ q.reshape(-1).astype(z_store.dtype)).astype(np.float64)
    step_theta = solve_triangular(factor, solve_triangular(factor, rhs, trans="T"))
    step_items = _upper_solve(chol, -q - _z_times(z_store, step_theta))
    return step_theta, step_items


def start_point(y, prior):
    """A start: abilities from the standardized logit of each model's share correct, a = 1,
    intercepts from each item's share correct (both shrunk half a response towards 1/2)."""
    observed = y >= 0
    correct = np.where(observed, y, 0)
    model_share = (correct.sum(axis=0) + 0.5) / (observed.sum(axis=0) + 1.0)
    item_share = (correct.sum(axis=1) + 0.5) / (observed.sum(axis=1) + 1.0)
    theta = np.log(model_share / (1 - model_share))
    theta = prior[1] + prior[0] * (theta - theta.mean()) / max(theta.std(), 1e-6)
    alpha = np.full(y.shape[0], prior[3])
    d = np.log(item_share / (1 - item_share)) - np.exp(alpha) * theta.mean()
    return theta, alpha, d


def _sweeps(y, prior, theta, alpha, d, record):
    """Block coordinate scoring on f: items given abilities, then abilities given items (expected
    information, steps clipped at 1), until the largest step is below :data:`SWEEP_UNTIL` or after
    :data:`MAX_SWEEPS`. Cheap passes (no ``Z``) that settle what each item or model alone decides
    (items answered nearly all right or wrong move far from the start), before the Newton steps
    take the directions shared by all (the shift and scale of the abilities)."""
    off = np.zeros((2, y.shape[1]))
    for _ in range(MAX_SWEEPS):
        cur = curvature(y, theta, alpha, d, prior, off)
        step = np.clip(_upper_solve(cur["chol_items"], -_lower_solve(cur["chol_items"], cur["grad_items"])), -1, 1)
        alpha, d = alpha + step[:, 0], d + step[:, 1]
        cur = curvature(y, theta, alpha, d, prior, off)
        step_theta = np.clip(-cur["grad_theta"] / cur["h_theta"], -1, 1)
        theta = theta + step_theta
        record["sweeps"].append(float(max(np.abs(step).max(), np.abs(step_theta).max())))
        if record["sweeps"][-1] < SWEEP_UNTIL:
            break
    return theta, alpha, d


def _line_search(y, prior, point, step_theta, step_items, current, weights):
    """The point after the step, halved until F does not increase; (point, its pass, halvings)."""
    scale, halvings = 1.0, 0
    while True:
        cand = (point[0] + scale * step_theta, point[1] + scale * step_items[:, 0], point[2] + scale * step_items[:, 1])
        probe = curvature(y, *cand, prior, weights(current))  # F is exact; the items' gradient is not
        if probe["objective"] <= current["objective"] + 1e-9 * abs(current["objective"]) or halvings >= 30:
            return cand, curvature(y, *cand, prior, weights(probe)), halvings
        scale, halvings = scale / 2, halvings + 1


def _damping(damping: float, largest: float, previous: float) -> float:
    """The share of a near-centre step to take: halved whenever the step grew since the last one.

    Near the centre the steps solve f's Hessian for G's gradient, a fixed-point iteration whose
    rate is the share of G's Jacobian that f's Hessian leaves out (the ability-volume term). When
    few items measure each model that share exceeds one (755 models x 100 items: each step 1.4
    times the last, oscillating about the centre) and full steps diverge; a step of ``t`` times the
    solve has rate ``|1 - t mu|``, below one for a small enough ``t`` when the Jacobian's
    eigenvalues ``mu`` relative to f's Hessian are positive. Once halved the share stays (it is
    the iteration's, not the point's)."""
    return damping / 2 if largest > previous and damping > 1 / 64 else damping


def find_mode(y, prior, *, volume: bool = True, progress=None) -> dict:
    """The centre and curvature of the approximation (module notes): block coordinate sweeps on f,
    then Newton steps through the Schur complement of f's Hessian (a halving line search on F while
    a step exceeds :data:`CHORD_BELOW`, until a search halves more than :data:`MAX_HALVINGS` times:
    damped steps from then on, as near the centre), each small one followed by chord steps that reuse its
    factorization (the volume weights of a chord pass lag one step; the Schur pass that ends the
    search has them exact).

    Returns the centre (theta, alpha, d) and, from the last Schur pass (whose step was below
    :data:`STEP_TOLERANCE`), ``z`` (2N x M float32), ``factor`` (upper Cholesky factor of ``S``) and
    ``chol_items``; and a record: sweeps, Schur passes, steps (the largest change of each), which
    used the expected information, F after each. ``volume=False``: the joint mode of f instead
    (biased, see the module notes; for comparisons).
    """
    def weights(cur):
        if not volume:
            return np.zeros((2, n_models))
        return np.stack([1.0 / cur["h_theta"], cur["k_theta"] / cur["h_theta"] ** 2])

    n_items, n_models = y.shape
    record = {"sweeps": [], "passes": 0, "steps": [], "fisher": [], "objective": [], "halvings": [], "damping": []}
    point = _sweeps(y, prior, *start_point(y, prior), record)
    z_store = np.empty((2 * n_items, n_models), dtype=np.float32)
    current = curvature(y, *point, prior, np.zeros((2, n_models)))
    fisher, damping, previous = False, 1.0, np.inf
    damped = False  # once F stops being a merit function of the steps, every later step is damped
    while record["passes"] < MAX_STEPS:
        record["passes"] += 1
        try:
            current = curvature(y, *point, prior, weights(current), fisher=fisher, z_store=z_store)
            factor = _cholesky_upper(current["schur"])
        except BayesIRTError:
            if fisher:  # the expected information is positive definite: a non-finite point
                raise
            fisher = True  # the observed curvature is not positive here: a scoring step
            continue
        chol = current["chol_items"]
        for chord in range(MAX_CHORDS):
            step_theta, step_items = _solve(current["grad_theta"], current["grad_items"], factor, chol, z_store)
            largest = float(max(np.abs(step_theta).max(), np.abs(step_items).max()))
            if chord == 0 and largest < STEP_TOLERANCE and not fisher:
                point = (point[0] + step_theta, point[1] + step_items[:, 0], point[2] + step_items[:, 1])
                record["final_step"] = largest
                return {"theta": point[0], "alpha": point[1], "d": point[2], "z": z_store, "factor": factor,
                        "chol_items": chol, "record": record}
            halvings = 0
            if largest > CHORD_BELOW and not damped:
                point, current, halvings = _line_search(y, prior, point, step_theta, step_items, current, weights)
                damped = halvings > MAX_HALVINGS
            else:  # near the centre F is no merit function of G's stationary point: damped steps
                damping = _damping(damping, largest, previous)
                point = (point[0] + damping * step_theta, point[1] + damping * step_items[:, 0],
                         point[2] + damping * step_items[:, 1])
                current = curvature(y, *point, prior, weights(current))
            previous = largest
            record["damping"].append(damping if largest <= CHORD_BELOW or damped else 1.0)
            record["steps"].append(largest / 2 ** halvings)
            record["fisher"].append(fisher)
            record["objective"].append(current["objective"])
            record["halvings"].append(halvings)
            if progress is not None:
                progress(len(record["steps"]), record["steps"][-1], current["objective"])
            if largest > CHORD_BELOW or largest < STEP_TOLERANCE / 10:
                break
        fisher = record["steps"][-1] > FISHER_ABOVE
    raise ConfigError(f"method 'laplace': the centre search did not converge in {MAX_STEPS} Newton steps (largest "
                      f"last step {record['steps'][-1]:.2g}), so the posterior may be far from Gaussian; fit these "
                      "data with --method advi (minutes) or --method nuts (exact, slower) instead")


def joint_draws(mode: dict, draws: int, seed: int, batch: int = 250):
    """``draws`` joint draws (theta (D, M), alpha (D, N), d (D, N)) from the Gaussian at the mode."""
    rng = np.random.default_rng(seed)
    factor, chol, z_store = mode["factor"].astype(np.float64), mode["chol_items"], mode["z"]
    n_items, n_models = chol.shape[0], factor.shape[0]
    theta = np.empty((draws, n_models))
    alpha, d = np.empty((draws, n_items)), np.empty((draws, n_items))
    for start in range(0, draws, batch):
        sl = slice(start, min(start + batch, draws))
        k = sl.stop - sl.start
        dev = solve_triangular(factor, rng.standard_normal((n_models, k)))  # (M, k): R^-1 eps
        theta[sl] = (mode["theta"][:, None] + dev).T
        shift = np.moveaxis(_z_times(z_store, dev), -1, 0)  # (k, N, 2)
        phi = _upper_solve(chol, -shift + rng.standard_normal((k, n_items, 2)))
        alpha[sl] = mode["alpha"] + phi[..., 0]
        d[sl] = mode["d"] + phi[..., 1]
    return theta, alpha, d
