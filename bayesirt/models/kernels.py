"""A fused, compiled log-likelihood + gradient for the dense 1PL/2PL (no asymptotes), as a PyTensor Op.

``logistic_loglik(a, t, d, y)`` is the sum over observed cells of the Bernoulli log-likelihood

    y_im * eta_im - softplus(eta_im),   eta_im = a_i * t_m + d_i,

for an (item, model) int8 response matrix ``y`` (1 correct, 0 wrong, anything negative missing).
One pass over the matrix computes the value and its gradient with respect to ``a``, ``t`` and
``d`` (the residual ``y - sigmoid(eta)`` summed along rows and columns), in a numba kernel that
every PyTensor backend calls: nutpie's numba backend inlines it (``numba_funcify``), PyMC's C
backend calls it from ``perform``. The graph it replaces (``fused_loglik`` in
:mod:`bayesirt.models.logistic`, an elementwise softplus and its gradient over the dense matrix)
makes several passes over the matrix and calls libm's scalar exp/log1p several times per cell;
this kernel makes one vectorized pass, evaluates exp with a polynomial and one log per column in
all (see :func:`_row_kernel`), in 512-bit vectors where the CPU has them. The kernel alone at 1,000 items
x 300 models: 0.335-0.370 ms of CPU, median of 200 calls (``benchmarks/likelihood_kernel.py``; 0.39-0.42 ms
in 256-bit vectors, 0.53-0.56 ms with exp by a degree-13 polynomial and no table). Its previous
one-log-per-16-cells form, whose
division and sums did not vectorize, took 1.01 ms per logp + gradient (``benchmarks/results/
nuts_numpyro.json`` at 64d7b67), the graph about 7 ms (``benchmarks/nuts_stan.py --grad-only``). The
PyTensor graph stays the oracle: ``tests/test_kernels.py`` compares value and gradient with it.

Only first derivatives are defined (NUTS, ADVI and MAP need no more); asking for a second
derivative raises.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from numba import literal_unroll, types
from numba.extending import intrinsic

__all__ = ["LogisticLoglik", "logistic_loglik", "loglik_and_gradient", "asymptote_loglik_and_gradient", "renormalize",
           "exp_clipped"]

# No fast-math flags: with them (PyTensor's set, "contract" and "reassoc" among them) LLVM may round
# differently depending on where the kernel is inlined, and a fit compiled from scratch (its IR inlined
# into nutpie's logp function) gave other draws than the same fit loaded from the caches (object code).
# Without them every compilation must round as written; the multiply-adds are explicit fused ones
# (_fma), and the sums that must vectorize are written with eight independent accumulators, whose
# order is fixed (what "reassoc" bought, now in a fixed place). error_model="numpy": numba's default
# checks every division for a zero divisor, a branch that kept the cell loop from vectorizing.
#: exp(eta) is evaluated at eta clipped to [_LOW, _HIGH]. Above _HIGH, softplus(eta) = log(1 + exp(_HIGH))
#: + (eta - _HIGH) and sigmoid(eta) = 1 to double precision (exp(-36) = 2.3e-16); below _LOW both are
#: below 1e-304. So an exploding trajectory cannot overflow, and 2^k below stays a normal number.
_LOW, _HIGH = -700.0, 36.0
#: Rows between renormalizations of the per-column products of the factors 1 + exp(eta) (each at most
#: 1 + exp(36) = 4.3e15, so 16 of them times a mantissa below 2 stay below 1e251).
_RENORM_ROWS = 16
_LOG2E = 1.4426950408889634
_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10  # fdlibm's split of log(2)
_LN2 = 0.6931471805599453
#: exp(x) = 2^(k / 32) * exp(f), k = round(32 x log2(e)), |f| <= log(2) / 64: 2^(j / 32) for j = k mod 32 from
#: this table, 2^floor(k / 32) from bits, exp(f) by a degree-5 polynomial. The table cut the kernel's time
#: by about a fifth against a degree-13 polynomial on |f| <= log(2) / 2 (benchmarks/likelihood_kernel.py).
_TABLE_BITS = 5
_TABLE_SIZE = 1 << _TABLE_BITS
_EXP2_TABLE = np.array([2.0 ** (j / _TABLE_SIZE) for j in range(_TABLE_SIZE)])
#: Round-to-integer shifter: fma(x, 32 log2(e), _SHIFT) puts round(32 x log2(e)) + 32 * 1023 in the low
#: bits of the mantissa (1.5 * 2^52 plus the exponent bias, scaled by the table size), so the table index
#: is those bits' lowest five and 2^floor(k / 32) the rest shifted into the exponent field: no
#: float-to-integer conversion, which AVX2 lacks for 64-bit integers.
_SHIFT = 6755399441055744.0 + 1023.0 * _TABLE_SIZE
_MANTISSA = (1 << 52) - 1
_EXPONENT_ONE = 1023 << 52


@intrinsic
def _fma(typingctx, x, y, z):
    """x * y + z rounded once (LLVM's fma: one instruction on x86-64 with FMA, vectorizable)."""
    if not all(v == types.float64 for v in (x, y, z)):
        return None

    def codegen(context, builder, signature, args):
        return builder.fma(*args)

    return types.float64(types.float64, types.float64, types.float64), codegen


#: The integer type with a float type's bits, and back (for :func:`_reinterpret`).
_SAME_BITS = {types.float64: types.int64, types.int64: types.float64}


@intrinsic
def _reinterpret(typingctx, x):
    """The bits of a float64 as an int64, or of an int64 as a float64 (a register move, not a conversion)."""
    target = _SAME_BITS.get(x)
    if target is None:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(target))

    return target(x), codegen


@intrinsic
def _prefer_512_bit_vectors(typingctx):
    """Let LLVM vectorize the calling function with 512-bit registers where the CPU has them (the function
    attribute ``"prefer-vector-width"="512"``). LLVM's tuning for Intel CPUs with AVX-512 prefers 256 bits,
    to keep the clock up in code that mixes vector and scalar work; a kernel that spends its time in one
    vectorized loop gains. No effect on CPUs with 256-bit vectors or none, and none on results: the loop's
    sums are per column or written out with eight accumulators, in the same order at any width."""

    def codegen(context, builder, signature, args):
        # llvmlite's attribute set names only the keyword attributes; a string attribute goes in as written
        set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        return context.get_dummy_value()

    return types.none(), codegen


#: 1 / j! for j = 5, 4, ..., 0: the Taylor coefficients of exp, highest first (Horner's order); on
#: |f| <= log(2) / 64 the truncation error is below f^6 / 6! = 2.2e-15 relative.
_EXP_COEFFICIENTS = tuple(1.0 / math.factorial(j) for j in range(5, -1, -1))


#: The kernels' scalar helpers below are numba functions of their own, not inlined by numba (``inline="always"``):
#: LLVM inlines them into the kernels' loops before vectorizing, with the same results and speed
#: (``loglik_and_gradient`` at 1,000 x 300, 0.30 ms against 0.31-0.32 ms; the 3PL/4PL kernel at 500 x 200, 50%
#: missing, 0.20-0.21 ms either way; the same values to the bit), while numba's inlining of them at its IR level
#: cost 0.65 s of the 2PL kernel's 2.7 s compile from an empty cache, and 0.3-0.9 s of a direct model's
#: (200 x 500, 3 interleaved runs each against 3567277: 6.1-6.6 s against 6.9-7.0 s for the 3PL at 50% missing,
#: 5.8-6.3 against 6.7-9.0 for the 4PL, 4.9-6.5 against 5.4-6.3 for the 2PL at 300 x 1,000). Those runs used a
#: script that was not kept; ``benchmarks/direct_compile_profile.py --spec S`` with ``PYTHONPATH`` at each
#: checkout measures the same ``direct_model`` call (at 200 x 500).
@numba.njit
def exp_clipped(x):
    """exp(min(max(x, _LOW), _HIGH)) as 2^(k / 32) * exp(f): k = round(32 x log2(e)), f = x - k log(2) / 32
    by Cody-Waite reduction, 2^(k mod 32 / 32) from a table, 2^floor(k / 32) built from bits, exp(f) by a
    degree-5 polynomial (Horner's rule). Relative error below 3e-15; every step vectorizes (the table
    read as a gather), where libm's scalar exp would not."""
    clipped = min(max(x, _LOW), _HIGH)
    shifted = _fma(clipped, _LOG2E * _TABLE_SIZE, _SHIFT)
    k = shifted - _SHIFT
    f = _fma(-k, _LN2_LO / _TABLE_SIZE, _fma(-k, _LN2_HI / _TABLE_SIZE, clipped))
    p = _EXP_COEFFICIENTS[0]
    for coefficient in literal_unroll(_EXP_COEFFICIENTS[1:]):
        p = _fma(p, f, coefficient)
    bits = _reinterpret(shifted)
    return p * _EXP2_TABLE[bits & (_TABLE_SIZE - 1)] * _reinterpret((bits >> _TABLE_BITS) << 52)


@numba.njit
def _dot_and_sum(res, v):
    """(sum res * v, sum res) over float64 vectors, with eight accumulators in a fixed order."""
    n = res.size
    n8 = n - n % 8
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    t0 = t1 = t2 = t3 = t4 = t5 = t6 = t7 = 0.0
    for c in range(0, n8, 8):
        s0 = _fma(res[c], v[c], s0)
        s1 = _fma(res[c + 1], v[c + 1], s1)
        s2 = _fma(res[c + 2], v[c + 2], s2)
        s3 = _fma(res[c + 3], v[c + 3], s3)
        s4 = _fma(res[c + 4], v[c + 4], s4)
        s5 = _fma(res[c + 5], v[c + 5], s5)
        s6 = _fma(res[c + 6], v[c + 6], s6)
        s7 = _fma(res[c + 7], v[c + 7], s7)
        t0 += res[c]
        t1 += res[c + 1]
        t2 += res[c + 2]
        t3 += res[c + 3]
        t4 += res[c + 4]
        t5 += res[c + 5]
        t6 += res[c + 6]
        t7 += res[c + 7]
    dot = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    total = ((t0 + t1) + (t2 + t3)) + ((t4 + t5) + (t6 + t7))
    for c in range(n8, n):
        dot = _fma(res[c], v[c], dot)
        total += res[c]
    return dot, total


@numba.njit
def _dot_and_three_sums(res, r_c, r_s, v):
    """(sum res * v, sum res, sum r_c, sum r_s) over float64 vectors in one pass, each with eight accumulators
    in a fixed order (as :func:`_dot_and_sum`, whose three calls this replaced in
    :func:`asymptote_loglik_and_gradient`)."""
    n = res.size
    n8 = n - n % 8
    d0 = d1 = d2 = d3 = d4 = d5 = d6 = d7 = 0.0
    t0 = t1 = t2 = t3 = t4 = t5 = t6 = t7 = 0.0
    c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = 0.0
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    for c in range(0, n8, 8):
        d0 = _fma(res[c + 0], v[c + 0], d0)
        d1 = _fma(res[c + 1], v[c + 1], d1)
        d2 = _fma(res[c + 2], v[c + 2], d2)
        d3 = _fma(res[c + 3], v[c + 3], d3)
        d4 = _fma(res[c + 4], v[c + 4], d4)
        d5 = _fma(res[c + 5], v[c + 5], d5)
        d6 = _fma(res[c + 6], v[c + 6], d6)
        d7 = _fma(res[c + 7], v[c + 7], d7)
        t0 += res[c + 0]
        t1 += res[c + 1]
        t2 += res[c + 2]
        t3 += res[c + 3]
        t4 += res[c + 4]
        t5 += res[c + 5]
        t6 += res[c + 6]
        t7 += res[c + 7]
        c0 += r_c[c + 0]
        c1 += r_c[c + 1]
        c2 += r_c[c + 2]
        c3 += r_c[c + 3]
        c4 += r_c[c + 4]
        c5 += r_c[c + 5]
        c6 += r_c[c + 6]
        c7 += r_c[c + 7]
        s0 += r_s[c + 0]
        s1 += r_s[c + 1]
        s2 += r_s[c + 2]
        s3 += r_s[c + 3]
        s4 += r_s[c + 4]
        s5 += r_s[c + 5]
        s6 += r_s[c + 6]
        s7 += r_s[c + 7]
    dot = ((d0 + d1) + (d2 + d3)) + ((d4 + d5) + (d6 + d7))
    total = ((t0 + t1) + (t2 + t3)) + ((t4 + t5) + (t6 + t7))
    c_sum = ((c0 + c1) + (c2 + c3)) + ((c4 + c5) + (c6 + c7))
    s_sum = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    for c in range(n8, n):
        dot = _fma(res[c], v[c], dot)
        total += res[c]
        c_sum += r_c[c]
        s_sum += r_s[c]
    return dot, total, c_sum, s_sum


@numba.njit
def renormalize(product, exponent):
    """Move each product's binary exponent into ``exponent`` (exact: a power of two), leaving a mantissa in [1, 2)."""
    for c in range(product.size):
        bits = _reinterpret(product[c])
        exponent[c] += (bits >> 52) - 1023
        product[c] = _reinterpret((bits & _MANTISSA) | _EXPONENT_ONE)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _row_kernel(u, v, offset, y, row_offset):
    """(log-likelihood, gradients with respect to u, v and offset) for logits eta_rc = u_r * v_c +
    offset_r (``row_offset``) or u_r * v_c + offset_c over the observed cells of the int8 matrix ``y``
    (rows r, columns c; negative = missing), in float64.

    One vectorized loop per row (exp(eta) by :func:`exp_clipped`, the residual y - sigmoid(eta)); the
    gradient's column sums and the log-likelihood's terms accumulate per column,
    the row sums with eight accumulators (:func:`_dot_and_sum`); the softplus terms log(1 + exp(eta))
    are summed as the logs of per-column products of the factors 1 + exp(eta), renormalized by their
    binary exponent every ``_RENORM_ROWS`` rows, so one log per column in all (a log per cell or per
    16 cells cost as much as the rest of the kernel). :func:`loglik_and_gradient` passes ``row_offset``
    as a constant, so numba compiles the kernel once per value of it (with a run-time flag the loop ran
    2-16% slower in alternating calls in one process, a comparison that was not kept), and with a row offset the loop skips the column sums of the offset's gradient.
    Against the earlier form, which added both offsets to every cell and summed both gradients, with
    bit-identical results: 0.405 against 0.444 ms at 1,000 items x 300 models by item rows, 0.39 against
    0.43 by model rows (alternating calls in one process, a comparison that was not kept). The loop runs
    in 512-bit vectors where the CPU has them (:func:`_prefer_512_bit_vectors`): 0.335-0.370 against
    0.39-0.42 ms (``benchmarks/likelihood_kernel.py``), bit-identical.
    """
    _prefer_512_bit_vectors()
    n_rows, n_cols = y.shape
    gu = np.zeros(n_rows)
    gw = np.zeros(n_rows)
    gv = np.zeros(n_cols)
    gz = np.zeros(n_cols)
    linear = np.zeros(n_cols)  # per column: sum of y * eta - (eta - min(eta, _HIGH)) over observed cells
    product = np.ones(n_cols)
    exponent = np.zeros(n_cols, dtype=np.int64)
    res = np.empty(n_cols)
    vv = v.astype(np.float64)
    shift = offset.astype(np.float64)
    for r in range(n_rows):
        ur = np.float64(u[r])
        wr = shift[r] if row_offset else 0.0
        yr = y[r]
        for c in range(n_cols):
            x = _fma(ur, vv[c], wr) if row_offset else _fma(ur, vv[c], shift[c])
            ec = exp_clipped(x)
            observed = yr[c] >= 0
            correct = 1.0 if yr[c] > 0 else 0.0
            one_e = 1.0 + ec
            # every value computed, then selected: a call (the fma) inside a conditional branch kept
            # the loop from vectorizing
            residual = correct - ec / one_e
            term = _fma(correct, x, min(x, _HIGH) - x)
            residual = residual if observed else 0.0
            res[c] = residual
            product[c] *= one_e if observed else 1.0
            linear[c] += term if observed else 0.0
            gv[c] = _fma(residual, ur, gv[c])
            if not row_offset:
                gz[c] += residual
        gu[r], gw[r] = _dot_and_sum(res, vv)
        if r % _RENORM_ROWS == _RENORM_ROWS - 1:
            renormalize(product, exponent)
    renormalize(product, exponent)
    total = 0.0
    for c in range(n_cols):
        total += linear[c] - (np.log(product[c]) + exponent[c] * _LN2)
    return total, gu, gv, gw if row_offset else gz


@numba.njit(cache=True, nogil=True, inline="always")
def loglik_and_gradient(a, t, d, y, by_model=False):
    """(log-likelihood, d/da, d/dt, d/dd) of the observed cells of ``y`` under eta = a_i * t_m + d_i,
    returned in the dtype of ``a``. ``y`` is the (item, model) int8 matrix (negative = missing), or
    with ``by_model`` its transpose, (model, item), C-contiguous: the loops then run along items,
    which vectorizes better when models are few (2,854 items x 22 models)."""
    if by_model:
        total, gt, ga, gd = _row_kernel(t, a, d, y, False)
    else:
        total, ga, gt, gd = _row_kernel(a, t, d, y, True)
    return total, ga.astype(a.dtype), gt.astype(a.dtype), gd.astype(a.dtype)


#: Rows between renormalizations of the products of :func:`asymptote_loglik_and_gradient`, whose factors
#: may be as small as the asymptotes c, 1 - c, s or 1 - s: 4 rows keep them normal numbers above 1e-76.
_ASYMPTOTE_RENORM_ROWS = 4


@numba.njit(cache=True, nogil=True, error_model="numpy")
def asymptote_loglik_and_gradient(a, t, d, c, s, y):
    """(log-likelihood, gradients with respect to a, t, d, c, s) of the 3PL/4PL over the observed cells of the
    (item, model) int8 matrix ``y`` (negative = missing), P = c + (1 - c - s) sigmoid(x), x = a_i t_m + d_i
    (``s`` zeros for a 3PL).

    With z = exp(-|x|) <= 1, P = n / (1 + z) and 1 - P = n' / (1 + z) for numerators that are sums of c,
    1 - c, s, 1 - s and z: for x <= 0, n = c + (1 - s) z and n' = 1 - c + s z; for x > 0, n = c z + 1 - s and
    n' = (1 - c) z + s, or with no slip (s = 0) n' = (1 - c) z, whose log is log(1 - c) - x, kept as that
    linear term. The logs of the numerators and of 1 + z are summed as the logs of per-model products,
    renormalized by their binary exponent every ``_ASYMPTOTE_RENORM_ROWS`` items, so the loop over a row
    vectorizes (z by :func:`exp_clipped`) with one division per cell and two logs per model in all, as the
    2PL kernel's :func:`_row_kernel`."""
    _prefer_512_bit_vectors()
    n_items, n_models = y.shape
    ga, gd, gc, gs = np.zeros(n_items), np.zeros(n_items), np.zeros(n_items), np.zeros(n_items)
    gt = np.zeros(n_models)
    numerator, denominator, linear = np.ones(n_models), np.ones(n_models), np.zeros(n_models)
    exp_num, exp_den = np.zeros(n_models, dtype=np.int64), np.zeros(n_models, dtype=np.int64)
    res, r_c, r_s = np.empty(n_models), np.empty(n_models), np.empty(n_models)
    tt = t.astype(np.float64)
    for i in range(n_items):
        ai, di, ci, si = np.float64(a[i]), np.float64(d[i]), np.float64(c[i]), np.float64(s[i])
        scale = 1.0 - ci - si
        no_slip = si == 0.0
        yi = y[i]
        for m in range(n_models):
            x = _fma(ai, tt[m], di)
            z = exp_clipped(-abs(x))
            one_z = 1.0 + z
            positive = x > 0.0
            observed = yi[m] >= 0
            correct = yi[m] > 0
            # every value computed, then selected (a branch kept the loop from vectorizing)
            n_correct = _fma(ci, z, 1.0 - si) if positive else _fma(1.0 - si, z, ci)
            linear_term = positive and no_slip and not correct
            n_wrong = (1.0 - ci) if linear_term else (_fma(1.0 - ci, z, si) if positive else _fma(si, z, 1.0 - ci))
            n = n_correct if correct else n_wrong
            # one division per cell: w = 1 / ((1 + z) n) gives 1 / (1 + z) = n w and (1 + z) / n = (1 + z)^2 w
            w = 1.0 / (one_z * n)
            inverse = n * w
            p = (1.0 if positive else z) * inverse  # sigmoid(x)
            q = (z if positive else 1.0) * inverse  # sigmoid(-x)
            ratio = one_z * one_z * w  # 1 / P or 1 / (1 - P), times z on the linear term's cells
            q_part = inverse if linear_term else q
            sign = 1.0 if correct else -1.0
            residual = sign * scale * p * q_part * ratio
            res[m] = residual if observed else 0.0
            r_c[m] = sign * q_part * ratio if observed else 0.0
            r_s[m] = -sign * p * ratio if observed else 0.0
            numerator[m] *= n if observed else 1.0
            denominator[m] *= one_z if observed else 1.0
            linear[m] -= x if (observed and linear_term) else 0.0
            gt[m] = _fma(res[m], ai, gt[m])
        ga[i], gd[i], gc[i], gs[i] = _dot_and_three_sums(res, r_c, r_s, tt)
        if i % _ASYMPTOTE_RENORM_ROWS == _ASYMPTOTE_RENORM_ROWS - 1:
            renormalize(numerator, exp_num)
            renormalize(denominator, exp_den)
    renormalize(numerator, exp_num)
    renormalize(denominator, exp_den)
    total = 0.0
    for m in range(n_models):
        total += linear[m] + (np.log(numerator[m]) - np.log(denominator[m])) + (exp_num[m] - exp_den[m]) * _LN2
    return total, ga, gt, gd, gc, gs


class LogisticLoglik(Op):
    """``(loglik, d loglik / da, d loglik / dt, d loglik / dd)`` of a dense logistic response matrix.

    Inputs ``a`` (item,), ``t`` (model,), ``d`` (item,) of one float dtype and ``y`` (item, model)
    int8 with negative entries for missing cells (with ``by_model``: its transpose, (model, item)).
    The gradient of ``loglik`` is outputs 1-3 (the same Apply node, so one evaluation serves logp
    and gradient).
    """

    __props__ = ("by_model",)

    def __init__(self, by_model: bool = False):
        self.by_model = bool(by_model)

    def make_node(self, a, t, d, y):
        a, t, d = (pt.as_tensor_variable(v) for v in (a, t, d))
        y = pt.as_tensor_variable(y)
        if not (a.ndim == t.ndim == d.ndim == 1 and y.ndim == 2):
            raise TypeError("LogisticLoglik takes vectors a, t, d and a matrix y")
        if y.dtype != "int8":
            raise TypeError(f"y must be int8 (negative = missing), got {y.dtype}")
        # the widest of the three (a float32 constant slope must not round abilities to float32)
        dtype = pytensor.scalar.upcast(a.dtype, t.dtype, d.dtype)
        a, t, d = (pt.cast(v, dtype) for v in (a, t, d))
        outputs = [pt.scalar(dtype=dtype), a.type(), t.type(), d.type()]
        return Apply(self, [a, t, d, y], outputs)

    def perform(self, node, inputs, output_storage):
        a, t, d, y = inputs
        total, ga, gt, gd = loglik_and_gradient(a, t, d, y, self.by_model)
        dtype = node.outputs[0].dtype
        output_storage[0][0] = np.asarray(total, dtype=dtype)
        output_storage[1][0], output_storage[2][0], output_storage[3][0] = ga, gt, gd

    def infer_shape(self, node, shapes):
        return [(), shapes[0], shapes[1], shapes[2]]

    def pullback(self, inputs, outputs, output_grads):
        g_total = output_grads[0]
        for k in (1, 2, 3):
            if not isinstance(output_grads[k].type, DisconnectedType):
                return [grad_not_implemented(self, j, inputs[j], "second derivatives of the fused logistic "
                                                                 "log-likelihood are not implemented")
                        for j in range(3)] + [DisconnectedType()()]
        if isinstance(g_total.type, DisconnectedType):
            return [DisconnectedType()() for _ in range(4)]
        return [g_total * outputs[1], g_total * outputs[2], g_total * outputs[3], DisconnectedType()()]

    def connection_pattern(self, node):
        return [[True, True, True, True]] * 3 + [[False, False, False, False]]


#: The kernel loops along models (rows = items) unless there are fewer models than this: then along
#: items (rows = models), whose longer rows vectorize better. The kernel alone at 2,854 items x 22
#: models: 0.094-0.096 ms by model, 0.197-0.199 ms by item; at 1,000 x 64 0.080-0.082 and 0.080-0.112 ms;
#: at 1,000 x 300 0.350-0.361 and 0.335-0.370 ms (``benchmarks/likelihood_kernel.py``, median CPU time of
#: 200 calls, two runs; about 10% run to run).
BY_MODEL_BELOW = 64


def logistic_loglik(a, t, d, y, by_model: bool | None = None):
    """The summed log-likelihood (a scalar PyTensor variable) of :class:`LogisticLoglik`. ``y`` is the
    (item, model) array with 1 correct, 0 wrong and a negative value where missing (held as a shared
    variable; transposed when the kernel runs by model). ``by_model``: loop along items, row by
    model; default when there are fewer than :data:`BY_MODEL_BELOW` models."""
    y = np.asarray(y)
    if by_model is None:
        by_model = y.shape[1] < BY_MODEL_BELOW
    # a shared variable, not a constant: numba embeds a large array constant as a dynamic global,
    # which keeps the compiled function out of PyTensor's on-disk cache
    stored = np.ascontiguousarray(y.T if by_model else y, dtype=np.int8)
    return LogisticLoglik(by_model)(a, t, d, pytensor.shared(stored, name="responses_int8"))[0]


def _register_numba() -> None:
    from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key

    @register_funcify_default_op_cache_key(LogisticLoglik)
    def _numba_logistic_loglik(op, node, **kwargs):
        kernel = loglik_and_gradient
        by_model = op.by_model

        @numba.njit(no_cpython_wrapper=True, no_cfunc_wrapper=True)
        def logistic_loglik_numba(a, t, d, y):
            total, ga, gt, gd = kernel(a, t, d, y, by_model)
            return np.asarray(total), ga, gt, gd

        # PyTensor's on-disk cache keys this function by the Op's class and props only: the salt keeps
        # a cached build of an earlier version of this file from being reused
        return logistic_loglik_numba, _source_salt()


def _source_salt() -> int:
    import hashlib

    return int(hashlib.sha256(open(__file__, "rb").read()).hexdigest()[:12], 16)


_register_numba()
