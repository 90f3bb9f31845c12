"""The 1PL-4PL posterior of ``build_logistic``'s model in its unconstrained coordinates, in numba: the
parameters at a point, the log prior density with its Jacobians, the gradient through the transforms
(:mod:`bayesirt.inference.nutpie_direct` wraps them, with a likelihood kernel, into the C callback nutpie
calls), and in NumPy the draws' reported variables.

The model's numbers are a float64 header (the slots below) in front of its data in one buffer. The
unconstrained point is, in PyMC's order of the free variables and its transforms:

* ``theta_mean`` ~ N(mu, sigma / sqrt(n_models));
* ``theta_deviation`` ~ ZeroSumNormal(sigma), as its n_models - 1 coordinates under PyMC's
  ``ZeroSumTransform`` (an isometry onto the zero-sum vectors; log-Jacobian 0); with a common slope a, the
  log slope first and then ``theta_deviation_scaled`` u = a * theta_deviation ~ ZeroSumNormal(a * sigma),
  the likelihood's deviation at slope 1 (``build_logistic`` says why);
* the learned ``discrimination_mu`` ~ N and the log of ``discrimination_sigma`` ~ HalfNormal of a
  hierarchical slope prior, in the spec's order (the log transform's Jacobian ``u`` added);
* the log of ``discrimination`` ~ LogNormal (one per item, one common value, or none for a fixed
  slope); LogNormal's ``-log a`` and the log transform's Jacobian ``log a`` cancel, so its density
  in these coordinates is the normal one;
* the learned hyperparameters of the location prior, as those of the slope;
* ``intercept_centered`` ~ N(mu + a * theta_mean, sigma) (slope-intercept), or
  ``difficulty_centered`` ~ N(mu - theta_mean, sigma) with the likelihood's intercept -a * b_c;
* the log-odds of ``guessing`` c ~ Beta and of ``slip`` s ~ Beta (PyMC's ``LogOddsTransform``, Jacobian
  log c + log(1 - c)).

Item slopes with a learned ``discrimination_mu`` are sampled in units of g = exp(discrimination_mu)
(``build_logistic``'s scale-free coordinates, ``IRTSpec.learned_slope_scale``): the slope's
hyperparameters come first, then m = g theta_mean ~ N(g mu, g sigma / sqrt(n_models)), u = g theta_deviation
~ ZeroSumNormal(g sigma), log r = log(a / g) ~ N(0, discrimination_sigma), the location's hyperparameters
and the location: ``intercept_centered`` ~ N(mu + r m, sigma) unscaled, or beta = g b_centered ~ N(g mu - m,
g sigma) with a learned mu and sigma sampled as g mu ~ N(g mu', g sigma') and g sigma ~ HalfNormal(g sigma').
The likelihood's slope is r and its deviation u; the derivative with respect to discrimination_mu
collects every density's part in log g.

Every normalizing constant is PyMC's, so the value equals ``pm.Model.compile_logp(jacobian=True)``
(``tests/test_nutpie_direct.py``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit

from bayesirt.inference.nutpie_callback import callback_code

__all__ = ["log_posterior", "parameters", "slopes_at", "expand", "HEADER"]

_LOG_SQRT_2PI = math.log(math.sqrt(2.0 * math.pi))  # as PyMC writes the normal constant: log(sqrt(2 pi))
_LOG_SQRT_2_OVER_PI = math.log(math.sqrt(2.0 / math.pi))  # HalfNormal's constant, as PyMC writes it

#: Header slots: sizes; the fixed prior parameters (theta mu, sigma of theta_mean, theta sigma,
#: discrimination mu and sigma, location mu and sigma: used where not learned); the offsets in the
#: point of each block (-1: absent); the hyperpriors' parameters; the Beta priors' (alpha, beta, log B); the
#: offset of the deviation's coordinates and whether they are the scaled deviation of a common slope; the offset of
#: theta_mean's coordinate and whether the point is in units of a learned slope scale (the module text).
(N_MODELS, N_ITEMS, N_SLOPES, SLOPE, DIFFICULTY, ROWS, COLS, REPORT_SLOPE) = range(8)
HYPER = slice(8, 15)
N_CELLS = 15
OFF_A_MU, OFF_A_SIGMA, OFF_SLOPES, OFF_L_MU, OFF_L_SIGMA, OFF_LOC, OFF_C, OFF_S, N_DIM = range(16, 25)
A_MU_PRIOR, A_SIGMA_PRIOR, L_MU_PRIOR, L_SIGMA_PRIOR = slice(25, 27), 27, slice(28, 30), 30
C_PRIOR, S_PRIOR = slice(31, 34), slice(34, 37)
OFF_DEV, SCALED, OFF_MEAN, SCALE_FREE = 37, 38, 39, 40
HEADER = 41


@callback_code
def _learned(x, offsets, mu, sigma):
    """A prior's (mu, sigma): x at ``offsets`` (the header's two slots of its offsets in x; exp of x for
    sigma), or the fixed ``mu``, ``sigma`` where an offset is -1."""
    o_mu, o_sigma = np.int64(offsets[0]), np.int64(offsets[1])
    return x[o_mu] if o_mu >= 0 else mu, np.exp(x[o_sigma]) if o_sigma >= 0 else sigma


@callback_code
def _sigmoid(u):
    e = np.exp(-abs(u))
    return 1.0 / (1.0 + e) if u >= 0.0 else e / (1.0 + e)


@callback_code
def parameters(x, head):
    """(a, deviation, intercept, c, s) per item / model as the likelihood takes them at the unconstrained point
    ``x``; the deviation is PyMC's ``ZeroSumTransform.extend_axis``, written as it is there; c and s are zeros
    where absent. With a common slope the deviation is the scaled one and the likelihood's slope is 1."""
    n_models, n_items = np.int64(head[N_MODELS]), np.int64(head[N_ITEMS])
    difficulty, scaled = head[DIFFICULTY] != 0.0, head[SCALED] != 0.0
    dev0 = np.int64(head[OFF_DEV])
    n = np.float64(n_models)
    total = 0.0
    for m in range(n_models - 1):
        total += x[dev0 + m]
    norm = total / (np.sqrt(n) + n)
    deviation = np.empty(n_models)
    for m in range(n_models - 1):
        deviation[m] = x[dev0 + m] - norm
    deviation[n_models - 1] = (norm - total / np.sqrt(n)) - norm
    slope = slopes_at(x, head)
    start = np.int64(head[OFF_LOC])
    off_c, off_s = np.int64(head[OFF_C]), np.int64(head[OFF_S])
    a, intercept = np.empty(n_items), np.empty(n_items)
    c, s = np.zeros(n_items), np.zeros(n_items)
    for i in range(n_items):
        a[i] = 1.0 if scaled else slope[i]
        intercept[i] = -slope[i] * x[start + i] if difficulty else x[start + i]
        if off_c >= 0:
            c[i] = _sigmoid(x[off_c + i])
        if off_s >= 0:
            s[i] = _sigmoid(x[off_s + i])
    return a, deviation, intercept, c, s


@callback_code
def slopes_at(x, head):
    """Every item's slope at ``x``: its own, the common one, or the fixed value."""
    n_items, n_slopes, slopes = np.int64(head[N_ITEMS]), np.int64(head[N_SLOPES]), np.int64(head[OFF_SLOPES])
    slope = np.empty(n_items)
    for i in range(n_items):
        if n_slopes == 0:
            slope[i] = head[SLOPE]
        else:
            slope[i] = np.exp(x[slopes + (i if n_slopes > 1 else 0)])
    return slope


@callback_code
def _hyperpriors(x, grad, offsets, mu_prior, sigma_prior, g_mu, g_sigma, scale):
    """(log density, its derivative in log ``scale``) of a learned mu ~ N(scale mu', scale sigma') and
    log sigma, sigma ~ HalfNormal(scale sigma') (with the log transform's Jacobian), at ``offsets`` in x (the
    header's two slots; -1: not learned), ``mu_prior`` (mu', sigma') and ``sigma_prior`` sigma' the header's;
    their gradients are set in ``grad`` with the likelihood-and-prior parts ``g_mu`` and ``g_sigma`` (with
    respect to mu and to log sigma). ``scale`` is 1 but for the difficulty's hyperparameters in the scale-free
    coordinates."""
    logp = d_log_scale = 0.0
    o = np.int64(offsets[0])
    if o >= 0:
        m, sd = scale * mu_prior[0], scale * mu_prior[1]
        r = (x[o] - m) / sd
        logp += -0.5 * r * r - np.log(sd) - _LOG_SQRT_2PI
        grad[o] = g_mu - r / sd
        d_log_scale += r * x[o] / sd - 1.0
    o = np.int64(offsets[1])
    if o >= 0:
        sd = scale * sigma_prior
        v = np.exp(x[o])
        r = v / sd
        logp += -0.5 * r * r + _LOG_SQRT_2_OVER_PI - np.log(sd) + x[o]
        grad[o] = g_sigma - r * r + 1.0
        d_log_scale += r * r - 1.0
    return logp, d_log_scale


@callback_code
def _beta_logits(x, grad, offset, prior, p, g_p):
    """The log density of Beta(alpha, beta) probabilities ``p`` in their log-odds coordinates (with the
    Jacobian) at ``offset`` in x (-1: absent), ``prior`` the header's (alpha, beta, log B(alpha, beta)), and its
    gradient with the likelihood's ``g_p`` (with respect to p) set in ``grad``."""
    o = np.int64(offset)
    if o < 0:
        return 0.0
    alpha, beta, log_b = prior[0], prior[1], prior[2]
    logp = 0.0
    for i in range(p.size):
        u = x[o + i]
        log_p = -(max(-u, 0.0) + np.log1p(np.exp(-abs(u))))  # log sigmoid(u)
        log_q = -(max(u, 0.0) + np.log1p(np.exp(-abs(u))))  # log sigmoid(-u)
        logp += alpha * log_p + beta * log_q - log_b
        grad[o + i] = (g_p[i] * p[i] + alpha) * (1.0 - p[i]) - beta * p[i]
    return logp


@callback_code
def log_posterior(x, head, a, deviation, loglik, grad_a, grad_t, grad_d, c, s, grad_c, grad_s, learned, bounded):
    """(log posterior density, its gradient) at ``x`` from the likelihood and its gradient with respect to
    (a, deviation, intercept, c, s) at :func:`parameters`' values.

    ``learned`` (the spec has a hyperprior) and ``bounded`` (a guessing or slip asymptote) are True or None:
    None prunes that code when numba compiles the call, so a plain 2PL's callback compiles neither
    :func:`_hyperpriors` nor :func:`_beta_logits` (nor did its expand callback, before :func:`expand` moved to
    NumPy, the asymptote or hyperparameter output): its ``direct_model`` compiled from an empty cache in about 30%
    less time (5.3-5.8 s against 7.7-8.7 s, interleaved runs of ``benchmarks/direct_compile_profile.py``; of that,
    0.4 s from the expand callback)."""
    n_models, n_items, n_slopes = np.int64(head[N_MODELS]), np.int64(head[N_ITEMS]), np.int64(head[N_SLOPES])
    difficulty, free = head[DIFFICULTY] != 0.0, head[SCALE_FREE] != 0.0
    hyper = head[HYPER]
    mu_t, sigma_mean, sigma_t = hyper[0], hyper[1], hyper[2]
    mu_a, sigma_a = hyper[3], hyper[4]
    if learned is not None:
        mu_a, sigma_a = _learned(x, head[OFF_A_MU:OFF_A_SIGMA + 1], hyper[3], hyper[4])
    # the scale-free coordinates' unit g (1 otherwise), and the location prior's (g in the difficulty form)
    g = np.exp(mu_a) if free else 1.0
    g_loc = g if difficulty else 1.0
    mu_l, sigma_l = g_loc * hyper[5], g_loc * hyper[6]
    if learned is not None:
        mu_l, sigma_l = _learned(x, head[OFF_L_MU:OFF_L_SIGMA + 1], g_loc * hyper[5], g_loc * hyper[6])
    grad = np.empty(x.size)
    mean0 = np.int64(head[OFF_MEAN])
    theta_mean = x[mean0]  # m = g theta_mean in the scale-free coordinates
    scaled, dev0 = head[SCALED] != 0.0, np.int64(head[OFF_DEV])
    slope = slopes_at(x, head)  # r = a / g in the scale-free coordinates
    # theta_mean ~ N(g mu_t, g sigma_mean); d_log_g collects d logp / d log g
    r = (theta_mean - g * mu_t) / (g * sigma_mean)
    logp = loglik - 0.5 * r * r - np.log(g * sigma_mean) - _LOG_SQRT_2PI
    grad_mean = -r / (g * sigma_mean)
    d_log_g = r * theta_mean / (g * sigma_mean) - 1.0
    # theta_deviation ~ ZeroSumNormal(sigma_t), or a scaled one ~ ZeroSumNormal(a * sigma_t) (common slope) or
    # ZeroSumNormal(g * sigma_t): n - 1 degrees of freedom; gradient through the transform
    sigma_dev = sigma_t * slope[0] if scaled else sigma_t * g
    g_dev = np.empty(n_models)
    square = 0.0
    for m in range(n_models):
        v = deviation[m] / sigma_dev
        square += v * v
        g_dev[m] = grad_t[m] - v / sigma_dev
    logp += -0.5 * square - (n_models - 1) * (_LOG_SQRT_2PI + np.log(sigma_dev))
    d_log_g += square - (n_models - 1.0)
    n = np.float64(n_models)
    shared = 0.0
    for m in range(n_models - 1):
        shared += g_dev[m]
    shared = shared / (np.sqrt(n) + n) + g_dev[n_models - 1] / np.sqrt(n)
    for m in range(n_models - 1):
        grad[dev0 + m] = g_dev[m] - shared
    # the centred location and its prior; grad_slope collects d logp / d a_i (the likelihood's own slope
    # is 1 for a scaled deviation: its gradient there is no parameter's)
    start, slopes = np.int64(head[OFF_LOC]), np.int64(head[OFF_SLOPES])
    grad_slope = np.empty(n_items)
    g_mu_l = g_sigma_l = 0.0
    for i in range(n_items):
        value = x[start + i]
        from_likelihood = 0.0 if scaled else grad_a[i]
        if difficulty:  # b_c ~ N(mu_l - theta_mean, sigma_l), likelihood intercept -a * b_c
            r = (value - (mu_l - theta_mean)) / sigma_l
            grad_mean -= r / sigma_l
            grad[start + i] = -slope[i] * grad_d[i] - r / sigma_l
            grad_slope[i] = from_likelihood - value * grad_d[i]
        else:  # d_c ~ N(mu_l + a * theta_mean, sigma_l), likelihood intercept d_c
            r = (value - (mu_l + slope[i] * theta_mean)) / sigma_l
            grad_mean += r / sigma_l * slope[i]
            grad[start + i] = grad_d[i] - r / sigma_l
            grad_slope[i] = from_likelihood + r / sigma_l * theta_mean
        logp += -0.5 * r * r - np.log(sigma_l) - _LOG_SQRT_2PI
        g_mu_l += r / sigma_l
        g_sigma_l += r * r - 1.0
    grad[mean0] = grad_mean
    # a location prior's fixed mu and sigma are g times the spec's numbers in the difficulty form
    if free and difficulty:
        d_log_g += (g_mu_l * mu_l if head[OFF_L_MU] < 0 else 0.0) + (g_sigma_l if head[OFF_L_SIGMA] < 0 else 0.0)
    # log a ~ N(mu_a, sigma_a), or log r ~ N(0, sigma_a): LogNormal's -log(a) cancels the log transform's Jacobian
    g_mu_a = g_sigma_a = 0.0
    slope_mu = 0.0 if free else mu_a
    for k in range(n_slopes):
        u = x[slopes + k]
        r = (u - slope_mu) / sigma_a
        logp += -0.5 * r * r - np.log(sigma_a) - _LOG_SQRT_2PI
        if n_slopes == n_items and not scaled:
            chain = grad_slope[k] * slope[k]
        else:  # a common slope: every item's, and the scaled deviation's prior
            chain = square - (n_models - 1.0) if scaled else 0.0
            for i in range(n_items):
                chain += grad_slope[i] * slope[i]
        grad[slopes + k] = chain - r / sigma_a
        g_mu_a += r / sigma_a
        g_sigma_a += r * r - 1.0
    if learned is not None:
        part, d_log_loc = _hyperpriors(x, grad, head[OFF_L_MU:OFF_L_SIGMA + 1], head[L_MU_PRIOR], head[L_SIGMA_PRIOR],
                                       g_mu_l, g_sigma_l, g_loc)
        logp += part
        # discrimination_mu: the slopes' location, or in the scale-free coordinates log g
        g_mu_a = d_log_g + (d_log_loc if difficulty else 0.0) if free else g_mu_a
        logp += _hyperpriors(x, grad, head[OFF_A_MU:OFF_A_SIGMA + 1], head[A_MU_PRIOR], head[A_SIGMA_PRIOR], g_mu_a,
                             g_sigma_a, 1.0)[0]
    if bounded is not None:
        logp += _beta_logits(x, grad, head[OFF_C], head[C_PRIOR], c, grad_c)
        logp += _beta_logits(x, grad, head[OFF_S], head[S_PRIOR], s, grad_s)
    return logp, grad


def expand(points, head) -> list[np.ndarray]:
    """The reported variables of the draws ``points`` (..., n_dim: unconstrained points, any leading axes), in
    ``build_logistic``'s order: theta (..., model), discrimination (per item, or one value for a common or fixed
    slope), intercept, difficulty when the location prior is on it, guessing, slip (where the spec has them), and
    the learned hyperparameters in the point's order (scalars per draw).

    NumPy over every draw at once after sampling, not a numba callback nutpie calls per draw: the callback
    cost about 0.5 s of a direct model's compile from an empty cache (``direct_model``, 3 interleaved runs
    against 7dfb09b, a ``/tmp`` script not kept: 2pl-hierarchical at 200 x 500 4.5-5.0 s against 5.4 s, 2PL
    at 300 x 1,000 4.2-4.7 s against 5.0-5.4 s). The deviation is :func:`parameters`' (PyMC's ``ZeroSumTransform.extend_axis``), summed in NumPy's
    order: the values equal the callback's to rounding (``tests/test_nutpie_direct.py`` checks them against
    PyMC's deterministics)."""
    x = np.asarray(points, dtype=np.float64)
    n_models, n_items = int(head[N_MODELS]), int(head[N_ITEMS])
    difficulty, free, scaled = head[DIFFICULTY] != 0.0, head[SCALE_FREE] != 0.0, head[SCALED] != 0.0
    dev0, n = int(head[OFF_DEV]), float(n_models)
    raw = x[..., dev0:dev0 + n_models - 1]
    total = raw.sum(axis=-1, keepdims=True)
    norm = total / (np.sqrt(n) + n)
    deviation = np.concatenate([raw - norm, (norm - total / np.sqrt(n)) - norm], axis=-1)
    n_slopes, slopes = int(head[N_SLOPES]), int(head[OFF_SLOPES])
    if n_slopes == 0:
        slope = np.full(x.shape[:-1] + (n_items,), head[SLOPE])
    else:  # r = a / g in the scale-free coordinates
        slope = np.broadcast_to(np.exp(x[..., slopes:slopes + n_slopes]), x.shape[:-1] + (n_items,))
    theta_mean, centred = x[..., int(head[OFF_MEAN]), None], x[..., int(head[OFF_LOC]):int(head[OFF_LOC]) + n_items]
    g = np.exp(x[..., int(head[OFF_A_MU]), None]) if free else np.ones_like(theta_mean)
    scale = slope[..., :1] if scaled else 1.0  # the scaled deviation's slope
    out = [(theta_mean + deviation / scale) / g]
    discrimination = g * slope
    out.append(discrimination[..., :int(head[REPORT_SLOPE])])  # every item's, or the one common or fixed value
    if difficulty:  # b = (b_c + theta_mean) / g, intercept -a b
        out += [-slope * (centred + theta_mean), (centred + theta_mean) / g]
    else:  # d = d_c - a theta_mean = d_c - r m
        out.append(centred - slope * theta_mean)
    for slot in (OFF_C, OFF_S):
        o = int(head[slot])
        if o >= 0:
            out.append(expit(x[..., o:o + n_items]))
    learned = sorted((int(head[slot]), slot) for slot in (OFF_A_MU, OFF_A_SIGMA, OFF_L_MU, OFF_L_SIGMA)
                     if head[slot] >= 0)
    for o, slot in learned:  # the difficulty's hyperparameters in units of g
        value = np.exp(x[..., o]) if slot in (OFF_A_SIGMA, OFF_L_SIGMA) else x[..., o]
        out.append(value / g[..., 0] if slot in (OFF_L_MU, OFF_L_SIGMA) and difficulty else value)
    return out
