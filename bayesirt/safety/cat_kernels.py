"""Compiled loops of :mod:`bayesirt.safety.adaptive`: grid-posterior (EAP) scores of fixed tests and
maximum-Fisher-information adaptive tests, one respondent at a time.

The NumPy forms they replace hold a ``(models, nodes)`` posterior and a ``(models, items)`` criterion
per step; at leaderboard size (2,461 models, 693 items, 241 nodes, 200 items per test) each step
allocates and sweeps them several times, and the CAT study scores several hundred fixed tests per
split. Here a respondent's posterior is one row of ``nodes`` floats that stays in cache: a fixed
test adds the administered items' log-likelihood rows to the log prior, an adaptive test adds one
row per step and picks the next item by a pass over the bank. The arithmetic is the NumPy forms'
(``log P``/``log(1 - P)`` rows of :meth:`~bayesirt.models.information.ItemBank.log_pq`, the
information formula of :mod:`bayesirt.models.response`), summed in another order, so estimates
agree with them to rounding (``tests/test_cat_kernels.py`` compares both with a per-respondent
reference loop).
"""

from __future__ import annotations

import functools

import numba
import numpy as np

from bayesirt.models import kernels, response
from bayesirt.models.kernels import exp_clipped
from bayesirt.utils.numba_cache import drop_stale, sources_digest

__all__ = ["fixed_test_eap", "fisher_cat"]

#: fast-math flags without "nnan"/"ninf" (as :mod:`bayesirt.models.information`), so a non-finite value stays visible.
_FASTMATH = {"arcp", "contract", "afn", "reassoc", "nsz"}
_SOURCES = sources_digest(__file__, kernels.__file__, response.__file__)
_cell_information = numba.njit(inline="always")(response.information_of_sigmoids)


@numba.njit(cache=True)
def _compiled_sources():
    """:data:`_SOURCES` as it was when numba compiled this file's cached functions."""
    return _SOURCES


@numba.njit(fastmath=_FASTMATH, cache=True)
def _posterior_moments(log_post, nodes, weights):
    """Mean and SD of the grid posterior ``exp(log_post)`` (unnormalized); ``weights`` is scratch space.
    Returns the log normalizing constant too."""
    top = log_post.max()
    total = 0.0
    for q in range(nodes.size):
        weights[q] = exp_clipped(log_post[q] - top)
        total += weights[q]
    mean = 0.0
    for q in range(nodes.size):
        mean += weights[q] * nodes[q]
    mean /= total
    var = 0.0
    for q in range(nodes.size):
        var += weights[q] * (nodes[q] - mean) ** 2  # centred: no cancellation
    return mean, np.sqrt(var / total), top + np.log(total)


@numba.njit(fastmath=_FASTMATH, cache=True)
def _fixed_test_eap(y_t, tests, lp, lq, nodes, log_w, a, d, linear):
    """EAP and posterior SD of every respondent (rows of ``y_t``, (models, items) int8) on every test
    (rows of ``tests``, item indices padded with -1), shape (tests, models) each.

    The log posterior at node q is ``log_w + sum_obs lq[j] + sum_correct (lp[j] - lq[j])``. The first
    two terms are the same for every respondent who answered every item of the test (formed once per
    test); with ``linear`` (a 2PL: ``lp - lq`` is the logit ``a_j theta + d_j``) the last is
    ``theta_q * sum a_j + sum d_j`` over the correct items, so such a respondent costs one pass over
    its items and one over the nodes, not their product. Others add their rows one by one."""
    n_tests, n_models = tests.shape[0], y_t.shape[0]
    theta, sd = np.empty((n_tests, n_models)), np.empty((n_tests, n_models))
    acc, base, weights = np.empty(nodes.size), np.empty(nodes.size), np.empty(nodes.size)
    for r in range(n_tests):
        base[:] = log_w
        length = 0
        while length < tests.shape[1] and tests[r, length] >= 0:
            base += lq[tests[r, length]]
            length += 1
        for m in range(n_models):
            complete, slope, shift = True, 0.0, 0.0
            for i in range(length):
                v = y_t[m, tests[r, i]]
                if v < 0:
                    complete = False
                elif v == 1:
                    slope += a[tests[r, i]]
                    shift += d[tests[r, i]]
            if complete and linear:
                for q in range(nodes.size):
                    acc[q] = base[q] + nodes[q] * slope + shift
            else:
                acc[:] = log_w
                for i in range(length):
                    j = tests[r, i]
                    v = y_t[m, j]
                    if v == 1:
                        acc += lp[j]
                    elif v == 0:
                        acc += lq[j]
            theta[r, m], sd[r, m], _ = _posterior_moments(acc, nodes, weights)
    return theta, sd


@numba.njit(fastmath=_FASTMATH, cache=True)
def _fisher_cat(y_t, a, d, c, s, lp, lq, nodes, log_w, budget, path, min_sd):
    """Adaptive tests by maximum Fisher information at the EAP (see :func:`fisher_cat`)."""
    n_models, n_items = y_t.shape
    items = np.full((n_models, budget), -1, dtype=np.int64)
    theta, sd = np.empty((n_models, budget + 1)), np.empty((n_models, budget + 1))
    log_post, weights = np.empty(nodes.size), np.empty(nodes.size)
    open_ = np.empty(n_items, dtype=np.bool_)
    quotas = path.shape[0] > 0
    for m in range(n_models):
        log_post[:] = log_w
        theta[m, 0], sd[m, 0], _ = _posterior_moments(log_post, nodes, weights)
        for j in range(n_items):
            open_[j] = y_t[m, j] >= 0
        stop = budget
        for t in range(budget):
            if t > 0 and sd[m, t] < min_sd:  # min_sd is -1 when not given
                stop = t
                break
            in_group = False
            if quotas:
                for j in range(n_items):
                    if open_[j] and path[t, j]:
                        in_group = True
                        break
            th, best, best_value = theta[m, t], -1, -1.0
            for j in range(n_items):
                if not open_[j] or (in_group and not path[t, j]):
                    continue
                eta = a[j] * th + d[j]
                e = exp_clipped(-abs(eta))
                big = 1.0 / (1.0 + e)
                sig, sig_minus = (big, e * big) if eta >= 0 else (e * big, big)
                value = _cell_information(sig, sig_minus, a[j], c[j], s[j])
                if value > best_value:  # the first maximum: ties to the lowest index
                    best, best_value = j, value
            if best < 0:  # nothing left to administer
                stop = t
                break
            items[m, t] = best
            open_[best] = False
            log_post += lp[best] if y_t[m, best] == 1 else lq[best]
            theta[m, t + 1], sd[m, t + 1], norm = _posterior_moments(log_post, nodes, weights)
            log_post -= norm  # stays a normalized log density: no drift over hundreds of items
        for t in range(stop, budget):
            theta[m, t + 1], sd[m, t + 1] = theta[m, stop], sd[m, stop]
    return items, theta, sd


@functools.cache
def _fresh():
    """The kernels, their cached builds dropped first if a file they compile in changed since."""
    drop_stale(_compiled_sources, _SOURCES, _fixed_test_eap, _fisher_cat, _posterior_moments)
    return _fixed_test_eap, _fisher_cat


def fixed_test_eap(y, tests, bank, nodes, log_w, lp=None, lq=None) -> tuple[np.ndarray, np.ndarray]:
    """EAP and posterior SD of every respondent on every fixed test.

    Parameters
    ----------
    y : ndarray, shape (n_items, n_models)
        ``1``/``0``/``-1`` (missing: contributes nothing).
    tests : ndarray of int, shape (n_tests, length)
        Item indices of each test; ``-1`` pads shorter tests.
    bank : ItemBank
        The items (:class:`~bayesirt.models.information.ItemBank`).
    nodes, log_w : ndarray, shape (n_nodes,)
        The ability grid and the log prior weights.
    lp, lq : ndarray, shape (n_items, n_nodes), optional
        ``bank.log_pq(nodes)``, when the caller has it.

    Returns
    -------
    theta, sd : ndarray, shape (n_tests, n_models)
    """
    kernel = _fresh()[0]
    if lp is None or lq is None:
        lp, lq = bank.log_pq(nodes)
    linear = not (np.any(bank.guessing) or np.any(bank.slip))
    return kernel(np.ascontiguousarray(np.asarray(y, dtype=np.int8).T), np.ascontiguousarray(tests, dtype=np.int64),
                  *(np.ascontiguousarray(x, dtype=float) for x in (lp, lq, nodes, log_w, bank.discrimination,
                                                                   bank.intercept)), linear)


def fisher_cat(y, bank, lp, lq, nodes, log_w, budget: int, path=None, min_sd=None):
    """Adaptive tests of every respondent: at each step the open item (answered, not yet given, in
    the step's group of ``path`` when it has one open) of largest Fisher information at the EAP.

    ``bank`` is an :class:`~bayesirt.models.information.ItemBank`; ``path`` a (budget, n_items) bool
    array (the group of each step) or None; ``min_sd`` stops a respondent whose posterior SD fell
    below it. Returns ``items`` (models, budget; -1 after a stop), ``theta`` and ``sd`` (models,
    budget + 1; carried forward after a stop), as :class:`~bayesirt.safety.adaptive.CATResult`.
    """
    kernel = _fresh()[1]
    n_items = bank.n_items
    path = np.zeros((0, n_items), dtype=np.bool_) if path is None else np.ascontiguousarray(path, dtype=np.bool_)
    return kernel(np.ascontiguousarray(np.asarray(y, dtype=np.int8).T),
                  *(np.ascontiguousarray(x, dtype=float) for x in (*bank, lp, lq, nodes, log_w)), int(budget), path,
                  -1.0 if min_sd is None else float(min_sd))
