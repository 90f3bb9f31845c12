"""The M-step of the unidimensional MML engine (:mod:`.mml`): batched Fisher scoring on each item's
expected complete-data log-likelihood plus active log priors, with stacked 1x1..4x4 solves and
per-item step halving; a common slope (1PL) is updated jointly with the item parameters through a
Schur complement. The variables are ``a`` (``log a`` when a prior on ``a`` is active), ``d``,
``logit c`` and ``logit s``. It stops once a Fisher step moves less than a tenth of the first (a
partial M-step: generalized EM, the same fixed point)."""

from __future__ import annotations

import numpy as np
from scipy.special import expit, logit

from bayesirt.frequentist.mml_model import (ItemParameters, ParameterLayout, log_priors, log_probabilities,
                                            probability_gradient)

__all__ = ["m_step"]


def _jac(lay: ParameterLayout, par: ItemParameters) -> np.ndarray:
    """d(natural)/d(optimization variable) per slot, shape (n, 4)."""
    return np.stack([par.a if lay.loga else np.ones_like(par.a), np.ones_like(par.d),
                     par.c * (1 - par.c), par.s * (1 - par.s)], axis=1)


def _qvalue(lay, par, r, n0, nodes):
    """Per-item expected complete-data log-likelihood + item priors, and the shared prior."""
    lp, lq = log_probabilities(par, nodes)
    pv, *_, shared = log_priors(lay, par)
    with np.errstate(invalid="ignore"):
        v = (r * lp).sum(1) + (n0 * lq).sum(1) + pv
    ok = (par.c + par.s < 1) & np.isfinite(v)
    return np.where(ok, v, -np.inf), shared[0]


def _apply(lay: ParameterLayout, par: ItemParameters, step: np.ndarray, step_a: float, t) -> ItemParameters:
    """Move along ``t * step`` in optimization variables."""
    ua = t * (step[:, 0] if lay.structure == "item" else step_a)
    a = par.a * np.exp(ua) if lay.loga else par.a + ua
    c = expit(logit(par.c) + t * step[:, 2]) if lay.guessing else par.c
    s = expit(logit(par.s) + t * step[:, 3]) if lay.slip else par.s
    return ItemParameters(np.broadcast_to(a, par.d.shape).copy(), par.d + t * step[:, 1], c, s)


def _score(e: np.ndarray, dp: np.ndarray) -> np.ndarray:
    """sum_k e_ik dP_ikp as a batched product, shape (items, 4)."""
    return (e[:, None, :] @ dp)[:, 0, :]


def m_step(lay: ParameterLayout, par: ItemParameters, r, n0, nodes, max_newton: int = 10) -> ItemParameters:
    """Increase the expected complete-data log posterior (expected counts ``r``, ``n0`` of shape (items,
    nodes) at ``nodes``) by batched Fisher scoring from ``par``."""
    idx, common = lay.slots, lay.structure == "common"
    val, sval = _qvalue(lay, par, r, n0, nodes)
    first = None
    for _ in range(max_newton):
        p, q, dp = probability_gradient(par, nodes)
        _, pg, pc, shared = log_priors(lay, par)
        jac = _jac(lay, par)
        g = (_score(r / p - n0 / q, dp) + pg) * jac
        f = np.swapaxes(dp * ((r + n0) / (p * q))[:, :, None], 1, 2) @ dp * jac[:, :, None] * jac[:, None, :] + pc
        fb = f[:, idx][:, :, idx] + 1e-10 * np.eye(len(idx))
        solve = lambda rhs: np.linalg.solve(fb, rhs[..., None])[..., 0]  # noqa: E731
        step, step_a = np.zeros_like(g), 0.0
        if common:
            ja = jac[0, 0]
            bc, bg = solve(f[:, idx, 0]), solve(g[:, idx])
            schur = f[:, 0, 0].sum() + shared[2] - np.einsum("ip,ip->", f[:, idx, 0], bc)
            step_a = (g[:, 0].sum() + shared[1] * ja - np.einsum("ip,ip->", f[:, idx, 0], bg)) / max(schur, 1e-12)
            step[:, idx] = bg - bc * step_a
        else:
            step[:, idx] = solve(g[:, idx])
        big = np.maximum(np.abs(step).max(1), abs(step_a)) / 5.0  # cap moves at 5 units per step
        big = np.full_like(big, big.max()) if common else big
        step, step_a = step / np.maximum(big, 1)[:, None], step_a / max(big.max(), 1)
        t = np.ones(par.d.size)
        for _ in range(30):
            new = _apply(lay, par, step, step_a, t if not common else t[0])
            nval, nsval = _qvalue(lay, new, r, n0, nodes)
            slack = 1e-13 * (1 + np.abs(val))
            bad = ~(nval >= val - slack) if not common else \
                np.full(t.size, not nval.sum() + nsval >= val.sum() + sval - slack.sum())
            if not bad.any():
                break
            t = np.where(bad, t / 2, t)
        else:
            t = np.where(bad, 0.0, t)
            new = _apply(lay, par, step, step_a, t if not common else t[0])
            nval, nsval = _qvalue(lay, new, r, n0, nodes)
        moved = max(np.abs(t[:, None] * step).max(), abs(t[0] * step_a))
        first = moved if first is None else first
        par, val, sval = new, nval, nsval
        if moved < max(1e-9, 0.1 * first):  # a partial M-step (generalized EM): same fixed point, 2x faster
            break
    return par
