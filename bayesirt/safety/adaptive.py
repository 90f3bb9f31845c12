"""Static and computerized adaptive tests (CAT) for unidimensional 1PL-4PL item banks.

- :func:`static_test` picks ``k`` items once for a cohort of calibration abilities, by one of the
  designs of :mod:`bayesirt.safety.static_design` (default :data:`STATIC_DESIGN`; SAFE's
  maximum summed information is ``design="max_information"``), optionally with per-benchmark
  (``item_group``) quotas.
- :func:`score_test` scores respondents on any subset of items: EAP (and posterior SD) on an
  equally spaced grid under a ``Normal(prior_mean, prior_sd)`` ability prior, or MAP by Newton.
- :func:`run_cat` administers an adaptive test to every respondent at once, using their real
  (or simulated) responses: after each item the grid posterior is updated, the next item
  maximizes the selection rule at the current state, and each respondent stops at the item
  budget or once its posterior SD is below ``min_sd``. Items a respondent did not answer
  (``-1``) are never offered to it.

Responses are ``(item, model)`` arrays: ``1`` correct, ``0`` incorrect, ``-1`` missing, as in the
response Dataset. Ties between items always go to the lowest item index, so every selection is
deterministic.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import logsumexp

from bayesirt.errors import ConfigError, DataError
from bayesirt.models.information import ItemBank, item_bank, item_information
from bayesirt.models.response import curves, derivative, second_derivative
from bayesirt.safety.cat_kernels import fisher_cat, fixed_test_eap
from bayesirt.safety.settings import ESTIMATORS, SELECTION_RULES, STATIC_DESIGN, STATIC_DESIGNS
from bayesirt.safety.static_design import design_order
from bayesirt.utils.validation import check_choice, check_int, check_number, parameter_error

__all__ = ["ability_grid", "Abilities", "quota_counts", "static_test", "grid_log_posterior", "score_test",
           "CATResult", "run_cat", "SELECTION_RULES", "ESTIMATORS"]


_TINY = 1e-300
_GRID_HALF_WIDTH = 6.0  # prior SDs; the prior mass beyond is 2e-9
_CHUNK = 4096  # abilities per block in static_test (bounds memory to n_items * _CHUNK floats)


class Abilities(NamedTuple):
    """Ability estimates per respondent: ``theta`` and its posterior SD (EAP) or standard error (MAP)."""

    theta: np.ndarray
    sd: np.ndarray


def ability_grid(points: int = 241, *, prior_mean: float = 0.0, prior_sd: float = 1.0):
    """Equally spaced nodes over ``prior_mean +- 6 prior_sd`` and log weights of the Normal prior.

    The rectangle rule on an equally spaced grid integrates smooth, decaying posteriors with an
    error of order ``exp(-2 pi^2 (sd / h)^2)`` for posterior SD ``sd`` and spacing ``h``
    (0.05 prior SDs by default), so it stays accurate for posteriors after hundreds of items,
    where a Gauss-Hermite rule of the same size (nodes ~0.3 apart near 0) no longer is.

    Returns
    -------
    nodes, log_weights : ndarray, shape (points,)
        ``exp(log_weights)`` sums to 1; integrals against the prior are weighted sums over nodes.
    """
    check_int(points, name="points", caller="ability_grid", low=21, high=4001)
    check_number(prior_mean, name="prior_mean", caller="ability_grid")
    check_number(prior_sd, name="prior_sd", caller="ability_grid", low=0, low_open=True)
    z = np.linspace(-_GRID_HALF_WIDTH, _GRID_HALF_WIDTH, int(points))
    log_w = -0.5 * z**2
    return float(prior_mean) + float(prior_sd) * z, log_w - logsumexp(log_w)


def _as_responses(responses, n_items: int, rows=None) -> np.ndarray:
    """Checked int8 (item, model) responses; only ``rows`` (when given) are kept and value-checked."""
    arr = np.asarray(getattr(responses, "values", responses))
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise DataError(f"responses must be an (item, model) matrix, got shape {arr.shape}; "
                        "pass items as rows and respondents as columns")
    if arr.shape[0] != n_items:
        raise DataError(f"responses have {arr.shape[0]} items (rows) but the item bank has {n_items}; "
                        "pass an (item, model) matrix with one row per item parameter")
    if rows is not None:
        arr = arr[rows]
    if not np.isin(arr, (-1, 0, 1)).all():
        raise DataError("responses must contain only 1 (correct), 0 (incorrect) and -1 (missing); "
                        "recode other values first")
    return arr.astype(np.int8)


def _group_order(groups: np.ndarray) -> tuple[list, dict]:
    order = list(dict.fromkeys(groups.tolist()))
    sizes = {g: int(np.sum(groups == g)) for g in order}
    return order, sizes


def _quota_path(groups: np.ndarray, k: int) -> list:
    """The group of each of ``k`` successive items under proportional quotas (largest deficit)."""
    order, sizes = _group_order(groups)
    share = np.array([sizes[g] for g in order], dtype=float) / groups.size
    counts = np.zeros(len(order))
    path = []
    for t in range(1, k + 1):
        g = int(np.argmax(t * share - counts))  # ties to the group met first; a full group never wins
        counts[g] += 1
        path.append(order[g])
    return path


def quota_counts(groups, k: int, quotas="proportional") -> dict:
    """Items per group for a ``k``-item test.

    Parameters
    ----------
    groups : array_like, shape (n_items,)
        Group label of each item.
    k : int
    quotas : dict or "proportional"
        A dict ``label -> count`` (checked: known labels, counts within group sizes, summing to
        ``k``) or ``"proportional"``: items are allotted one at a time to the group furthest
        below its share of the bank (ties to the group met first). The allotment is within one
        item of the exact share and house-monotone: the quotas of ``k + 1`` items extend those
        of ``k``, so an adaptive test meets them at every length.

    Returns
    -------
    dict
        ``label -> count`` in order of first appearance (groups with count 0 included).
    """
    labels = np.asarray(groups)
    order, sizes = _group_order(labels)
    if isinstance(quotas, str):
        check_choice(quotas, ("proportional",), name="quotas", caller="static_test")
        path = _quota_path(labels, k)
        return {g: path.count(g) for g in order}
    if not isinstance(quotas, dict):
        raise parameter_error("quotas", "static_test", "a dict of group -> count or 'proportional'", quotas)
    unknown = sorted(map(str, set(quotas) - set(sizes)))
    if unknown:
        raise parameter_error("quotas", "static_test", f"a dict over the groups {sorted(map(str, sizes))}",
                              quotas, hint=f" (unknown groups: {unknown})")
    for g, n in quotas.items():
        check_int(n, name=f"quotas[{g!r}]", caller="static_test", low=0, high=sizes[g])  # at most the group's items
    if sum(quotas.values()) != k:
        raise ConfigError(f"static_test: quotas sum to {sum(quotas.values())} but k={k}; make the per-group counts "
                          "add up to k")
    return {g: int(quotas.get(g, 0)) for g in order}


def static_test(discrimination, intercept, abilities, k, *, guessing=0.0, slip=0.0, groups=None,
                quotas=None, design: str = STATIC_DESIGN, prior_sd: float = 1.0) -> np.ndarray:
    """A ``k``-item static test for the cohort of calibration ``abilities``.

    Parameters
    ----------
    discrimination, intercept : array_like, shape (n_items,)
    abilities : array_like
        Calibration abilities (any shape: point estimates of the calibration models, or their
        posterior draws); all values weigh equally.
    k : int
        Test length, ``1 <= k <= n_items``.
    guessing, slip : float or array_like, shape (n_items,), default 0
    groups : array_like, shape (n_items,), optional
        Group (benchmark) label of each item, e.g. the ``item_group`` coordinate.
    quotas : dict or "proportional", optional
        Items per group (see :func:`quota_counts`). Default ``"proportional"`` when ``groups``
        is given.
    design : {"representative", "stratified", "population", "max_information"}, default :data:`STATIC_DESIGN`
        How the items are chosen (:mod:`bayesirt.safety.static_design`): one item per stratum of
        expected proportion correct with the bank's mix of discriminations, greedy on the expected
        full-score error; information at the cohort's ability quantiles; information integrated
        over the cohort with diminishing returns; or SAFE's maximum summed information (ties to the
        lowest index).
    prior_sd : float, default 1
        ``"representative"`` and ``"population"``: the ability prior's SD (its precision is the
        information before any item).

    Returns
    -------
    ndarray of int, shape (k,)
        Item indices in selection order.
    """
    check_choice(design, STATIC_DESIGNS, name="design", caller="static_test")
    bank = item_bank(discrimination, intercept, guessing, slip)
    theta = np.asarray(abilities, dtype=float).ravel()
    if theta.size == 0 or not np.all(np.isfinite(theta)):
        raise DataError("abilities must be a non-empty array of finite values; pass calibration ability estimates")
    k = check_int(k, name="k", caller="static_test", low=1, high=bank.n_items)  # the test length, at most the bank
    if groups is None:
        if quotas is not None:
            raise ConfigError("static_test: quotas were given without groups; pass groups (one label per item) as well")
        return design_order(bank, theta, [None] * k, design, prior_sd=prior_sd, chunk=_CHUNK)
    labels = np.asarray(groups)
    if labels.shape != (bank.n_items,):
        raise DataError(f"groups must have one label per item ({bank.n_items}), got shape {labels.shape}")
    counts = quota_counts(labels, k, "proportional" if quotas is None else quotas)
    path = [g for g, n in counts.items() for _ in range(n)] if quotas is not None else _quota_path(labels, k)
    return design_order(bank, theta, path, design, groups=labels, prior_sd=prior_sd, chunk=_CHUNK)


def grid_log_posterior(responses, bank: ItemBank, nodes: np.ndarray, log_weights: np.ndarray) -> np.ndarray:
    """Normalized log posterior of each respondent's ability on the grid, shape ``(n_models, n_nodes)``.

    Missing responses (``-1``) contribute nothing.
    """
    return _log_posterior(_as_responses(responses, bank.n_items), bank, nodes, log_weights)


def _log_posterior(y: np.ndarray, bank: ItemBank, nodes: np.ndarray, log_weights: np.ndarray) -> np.ndarray:
    lp, lq = bank.log_pq(nodes)
    lj = (y == 1).T.astype(float) @ lp + (y == 0).T.astype(float) @ lq + log_weights[None, :]
    return lj - logsumexp(lj, axis=1, keepdims=True)


def _eap(log_post: np.ndarray, nodes: np.ndarray) -> Abilities:
    w = np.exp(log_post)
    mean = w @ nodes
    var = np.einsum("mq,mq->m", w, (nodes[None, :] - mean[:, None]) ** 2)  # centred: no cancellation
    return Abilities(mean, np.sqrt(var))


def _map(y, par, start: np.ndarray, prior_mean: float, prior_sd: float, max_iter: int = 100) -> Abilities:
    """Newton-Raphson with step halving on each column's log posterior (vectorized over columns).

    ``y`` has shape (n, m); each of ``par`` (a, d, c, s) broadcasts to it.
    """
    y1, y0 = (y == 1).astype(float), (y == 0).astype(float)
    a, d, c, s = par

    def terms(th):
        p, q, sg, sm = curves(a * th[None, :] + d, c, s)
        dp = derivative(sg, sm, a, c, s)
        d2p = second_derivative(dp, sg, sm, a)
        lp = (y1 * np.log(p) + y0 * np.log(q)).sum(0) - 0.5 * ((th - prior_mean) / prior_sd) ** 2
        g = (y1 * dp / p - y0 * dp / q).sum(0) - (th - prior_mean) / prior_sd**2
        h = (y1 * (d2p / p - (dp / p) ** 2) - y0 * (d2p / q + (dp / q) ** 2)).sum(0) - 1 / prior_sd**2
        return lp, g, h

    th = np.asarray(start, dtype=float).copy()
    lp, g, h = terms(th)
    for _ in range(max_iter):
        step = g / np.where(h < 0, -h, 1.0 / prior_sd**2)  # Newton where concave, else a prior-scaled ascent
        t = np.ones_like(th)
        for _ in range(40):  # halve each column's step until its log posterior does not fall
            worse = terms(th + t * step)[0] < lp - 1e-12
            if not worse.any():
                break
            t = np.where(worse, t / 2, t)
        th = th + t * step
        lp, g, h = terms(th)
        if np.max(np.abs(t * step)) < 1e-10:
            break
    return Abilities(th, 1.0 / np.sqrt(np.maximum(-h, _TINY)))


def score_test(responses, discrimination, intercept, items=None, *, guessing=0.0, slip=0.0, method="eap",
               points=241, prior_mean=0.0, prior_sd=1.0) -> Abilities:
    """Ability of each respondent from its responses to ``items``.

    Parameters
    ----------
    responses : array_like, shape (n_items, n_models)
        ``1``/``0``/``-1`` (missing) over the whole bank; only the rows ``items`` are used.
    discrimination, intercept, guessing, slip : array_like, shape (n_items,)
    items : array_like of int, optional
        The test (e.g. from :func:`static_test`); default every item.
    method : {"eap", "map"}, default "eap"
        EAP and posterior SD on the ``points``-node grid of :func:`ability_grid`, or MAP and its
        standard error ``1 / sqrt(-d2 log posterior)`` by Newton's method from the EAP.
    points : int, default 241
    prior_mean, prior_sd : float, default 0, 1
        The Normal ability prior (the calibration scale: ``N(0, 1)`` in every built-in spec).

    Returns
    -------
    Abilities
        ``theta`` and ``sd``, each of shape ``(n_models,)``. A respondent with no observed
        response among ``items`` gets the prior mean and SD.
    """
    check_choice(method, ESTIMATORS, name="method", caller="score_test")
    bank = item_bank(discrimination, intercept, guessing, slip)
    if items is not None:
        items = np.asarray(items)
        if items.ndim != 1 or not np.issubdtype(items.dtype, np.integer) or np.any(items < 0) \
                or np.any(items >= bank.n_items):
            raise parameter_error("items", "score_test", f"1-D integer indices in [0, {bank.n_items})", items)
    y = _as_responses(responses, bank.n_items, items)
    if items is not None:
        bank = bank.subset(items)
    nodes, logw = ability_grid(points, prior_mean=prior_mean, prior_sd=prior_sd)
    eap = Abilities(*(x[0] for x in fixed_test_eap(y, np.arange(bank.n_items)[None, :], bank, nodes, logw)))
    if method == "eap":
        return eap
    return _map(y, [x[:, None] for x in bank], eap.theta, float(prior_mean), float(prior_sd))


class CATResult(NamedTuple):
    """Adaptive tests of ``n_models`` respondents with at most ``budget`` items each.

    Attributes
    ----------
    items : ndarray of int, shape (n_models, budget)
        Administered item indices in order; ``-1`` after a respondent stopped.
    theta, sd : ndarray, shape (n_models, budget + 1)
        Estimate and posterior SD (EAP) or standard error (MAP) after 0, 1, ..., ``budget``
        items; after a respondent stops, its final values are carried forward.
    n_items : ndarray of int, shape (n_models,)
        Items administered to each respondent.
    """

    items: np.ndarray
    theta: np.ndarray
    sd: np.ndarray
    n_items: np.ndarray


def _criterion(rule: str, bank: ItemBank, theta: np.ndarray, log_post: np.ndarray, grid_info: np.ndarray | None,
               lp: np.ndarray, lq: np.ndarray) -> np.ndarray:
    """Selection criterion of every item for every respondent, shape (n_models, n_items)."""
    if rule == "fisher":
        return item_information(theta, *bank).T
    post = np.exp(log_post)
    if rule == "posterior":  # posterior-weighted information, E_post[I_j(theta)]
        return post @ grid_info.T
    # "kl": posterior-weighted Kullback-Leibler information, E_post[KL(f_j(. | theta_hat) || f_j(. | theta))]
    lp0, lq0 = bank.log_pq(theta)  # (n_items, n_models)
    p0, q0 = np.exp(lp0), np.exp(lq0)
    return (p0 * lp0 + q0 * lq0).T - p0.T * (post @ lp.T) - q0.T * (post @ lq.T)


def run_cat(responses, discrimination, intercept, *, budget, guessing=0.0, slip=0.0, rule="fisher",
            estimator="eap", min_sd=None, groups=None, points=241, prior_mean=0.0, prior_sd=1.0) -> CATResult:
    """Simulate computerized adaptive tests from known (real or simulated) responses.

    Each respondent starts at the prior; at each step it gets the not-yet-administered item it
    answered that maximizes ``rule`` at its current state, and its posterior on the grid of
    :func:`ability_grid` is multiplied by that item's likelihood (so the EAP after ``t`` items
    equals the EAP of a fixed test of those ``t`` items).

    Parameters
    ----------
    responses : array_like, shape (n_items, n_models)
        ``1``/``0``/``-1``; an item a respondent did not answer is never selected for it.
    discrimination, intercept, guessing, slip : array_like, shape (n_items,)
    budget : int
        Maximum number of items per respondent.
    rule : {"fisher", "posterior", "kl"}, default "fisher"
        Maximum Fisher information at the current estimate; posterior-weighted Fisher
        information (van der Linden 1998); or posterior-weighted Kullback-Leibler information
        between the response distributions at the estimate and across the posterior (Chang &
        Ying 1996).
    estimator : {"eap", "map"}, default "eap"
        The ability update after each item: the grid posterior mean, or its mode by Newton's
        method (from the EAP) on the administered items.
    min_sd : float, optional
        Also stop a respondent once its posterior SD (standard error for MAP) is below this.
    groups : array_like, shape (n_items,), optional
        Benchmark label per item for content balancing: item ``t`` comes from the group that
        the proportional quotas of :func:`quota_counts` add at length ``t`` (the same quotas as
        a static test of that length); when a respondent has no unused answered item left in
        that group, any group is allowed.
    points, prior_mean, prior_sd
        The ability grid and Normal prior (:func:`ability_grid`).

    Returns
    -------
    CATResult
    """
    check_choice(rule, SELECTION_RULES, name="rule", caller="run_cat")
    check_choice(estimator, ESTIMATORS, name="estimator", caller="run_cat")
    bank = item_bank(discrimination, intercept, guessing, slip)
    y = _as_responses(responses, bank.n_items)
    budget = check_int(budget, name="budget", caller="run_cat", low=1, high=bank.n_items)  # items per respondent
    check_number(min_sd, name="min_sd", caller="run_cat", low=0, low_open=True, optional=True)  # a posterior SD
    path = None
    if groups is not None:
        labels = np.asarray(groups)
        if labels.shape != (bank.n_items,):
            raise DataError(f"groups must have one label per item ({bank.n_items}), got shape {labels.shape}")
        path = [labels == g for g in _quota_path(labels, budget)]
    nodes, logw = ability_grid(points, prior_mean=prior_mean, prior_sd=prior_sd)
    lp, lq = bank.log_pq(nodes)
    if rule == "fisher" and estimator == "eap":  # the compiled loop (cat_kernels); the same steps as below
        items, theta, sd = fisher_cat(y, bank, lp, lq, nodes, logw, budget, None if path is None else np.array(path),
                                      min_sd)
        return CATResult(items, theta, sd, (items >= 0).sum(axis=1))
    grid_info = bank.information(nodes) if rule == "posterior" else None
    n_models = y.shape[1]
    cols = np.arange(n_models)
    open_ = (y >= 0).T.copy()  # (models, items): answered and not yet administered
    log_post = np.repeat(logw[None, :], n_models, axis=0)
    items = np.full((n_models, budget), -1, dtype=np.int64)
    theta = np.empty((n_models, budget + 1))
    sd = np.empty((n_models, budget + 1))
    theta[:, 0], sd[:, 0] = _eap(log_post, nodes)
    active = np.ones(n_models, dtype=bool)
    for t in range(budget):
        crit = _criterion(rule, bank, theta[:, t], log_post, grid_info, lp, lq)
        allowed = open_
        if path is not None:
            in_group = open_ & path[t][None, :]
            allowed = np.where(in_group.any(axis=1, keepdims=True), in_group, open_)
        crit = np.where(allowed, crit, -np.inf)
        active &= allowed.any(axis=1)
        if min_sd is not None and t > 0:
            active &= sd[:, t] >= min_sd
        j = np.argmax(crit, axis=1)  # first maximum: ties to the lowest index
        act = cols[active]
        items[act, t] = j[act]
        open_[act, j[act]] = False
        ya = y[j[act], act]
        log_post[act] += np.where(ya[:, None] == 1, lp[j[act]], lq[j[act]])
        log_post[act] -= logsumexp(log_post[act], axis=1, keepdims=True)
        theta[:, t + 1], sd[:, t + 1] = theta[:, t], sd[:, t]
        if act.size:
            est = _eap(log_post[act], nodes)
            if estimator == "map":
                given = items[act, : t + 1].T  # (t + 1, n_active)
                est = _map(y[given, act[None, :]], [x[given] for x in bank], est.theta, float(prior_mean),
                           float(prior_sd))
            theta[act, t + 1], sd[act, t + 1] = est
        if not active.any():
            theta[:, t + 2:], sd[:, t + 2:] = theta[:, t + 1, None], sd[:, t + 1, None]
            break
    return CATResult(items, theta, sd, (items >= 0).sum(axis=1))
