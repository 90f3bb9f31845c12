"""Designs of a short static test for the cohort it serves (:data:`~bayesirt.safety.settings.STATIC_DESIGNS`).

A static test is one item set given to every model, so its items should measure well *where the
cohort is*, across the whole ability range. Four designs, each deterministic (ties to the lowest
item index) and each choosing within per-group quotas when given:

- ``"representative"`` (the default, :data:`~bayesirt.safety.settings.STATIC_DESIGN`): the short
  test that best predicts the *full* score, as the CAT study and the score calibration use it.
  The items are sorted by their expected proportion correct over the cohort and cut into ``k``
  strata of (nearly) equal size; the test takes one item per stratum, so its difficulties span
  the whole test's as a stratified sample of the items would. Which item, and in which order, is
  greedy: the item (of an unused stratum) that most reduces the cohort-averaged expected squared
  error of the predicted full-test number correct,
  ``E(theta) = sum_{j not chosen} P_j Q_j + (sum_{j not chosen} P_j'(theta))^2 / (1 / prior_var + I_S(theta))``
  (the chosen items' responses are observed; the rest are predicted from the ability estimate, so
  their own Bernoulli variance stays and the ability's posterior variance reaches them through the
  slope of their summed response curves). The test also takes from the items below the bank's median
  discrimination the bank's share of them (``k`` times that share, rounded half up; per group with
  groups), the greedy choosing within that quota while a free stratum holds an item of a half with room
  (else the quota yields): the criterion trusts the fitted 2PL, and where the most discriminating items
  say less about the rest than the model claims, a test of only those misses part of the full score
  (OLL GSM8K at 50 of 249 items: such a test's realized held-out error was well above the criterion's
  expected error, and above random items', whose realized and expected errors agree). Measured, with
  the criterion's expected error beside the realized one, against random items on the five OLL files
  and a curated bank (``benchmarks/results/static_design.md``).
- ``"stratified"``: the cohort's
  ability distribution is cut into ``k`` strata of equal size; item ``j`` is the not-yet-chosen
  item with the most Fisher information at the median of stratum ``j`` (the ``(j - 1/2) / k``
  quantile of the calibration abilities), strata taken from the lowest. The items' difficulties
  follow the cohort's ability quantiles, so every part of the cohort gets items near its level.
- ``"population"``: information integrated over the cohort's ability distribution with
  diminishing returns: greedy maximization of the mean over the cohort of
  ``log(1 / prior_var + I_test(theta))`` (the expected log posterior precision, a Bayesian
  D-optimal design averaged over the population; van der Linden 2005, ch. 4). An ability
  already measured well gains little from one more item there, so items spread where the
  cohort is dense *and* not yet measured.
- ``"max_information"``: SAFE's static test, the ``k`` items with the most Fisher information
  summed over the calibration abilities. On LLM cohorts with a cluster of weak models and very
  discriminating items it concentrates the test where that cluster sits (issue 44: OLL ARC, test
  information peaking at theta -1.55), and loses to random items; kept as an option.

Quantiles are taken on at most :data:`NODES` points (the cohort's abilities when fewer), so the
cost does not grow with the cohort.
"""

from __future__ import annotations

import numpy as np

from bayesirt.models.information import ItemBank
from bayesirt.models.response import curves, derivative
from bayesirt.safety.settings import STATIC_DESIGNS

__all__ = ["design_order", "above_cohort", "STATIC_DESIGNS", "NODES"]

#: Ability quantiles on which the ``"population"`` criterion is averaged.
NODES = 256


def _quantiles(theta: np.ndarray, n: int) -> np.ndarray:
    """The ``(j - 1/2) / n`` quantiles of ``theta``, ``j = 1..n``."""
    return np.quantile(theta, (np.arange(n) + 0.5) / n)


def _max_information(bank: ItemBank, theta: np.ndarray, path: list, groups: np.ndarray | None,
                     chunk: int) -> np.ndarray:
    score = sum(bank.information(part).sum(axis=1) for part in np.array_split(theta, -(-theta.size // chunk)))
    order = np.lexsort((np.arange(bank.n_items), -score))  # decreasing information, ties to lowest index
    if groups is None:
        return order[:len(path)]
    ranked, take = groups[order], np.zeros(bank.n_items, dtype=bool)
    for g in dict.fromkeys(path):
        take[np.flatnonzero(ranked == g)[:path.count(g)]] = True  # the group's n best, in overall order
    return order[take]


def _stratified(bank: ItemBank, theta: np.ndarray, path: list, groups: np.ndarray | None) -> np.ndarray:
    chosen = np.zeros(bank.n_items, dtype=bool)
    order = []
    for g in dict.fromkeys(path):
        member = np.ones(bank.n_items, dtype=bool) if groups is None else groups == g
        info = bank.information(_quantiles(theta, path.count(g)))  # (items, strata)
        for j in range(info.shape[1]):
            i = int(np.argmax(np.where(member & ~chosen, info[:, j], -np.inf)))
            chosen[i] = True
            order.append(i)
    return np.asarray(order)


def _population(bank: ItemBank, theta: np.ndarray, path: list, groups: np.ndarray | None,
                prior_sd: float) -> np.ndarray:
    nodes = _quantiles(theta, min(NODES, theta.size))
    info = bank.information(nodes)  # (items, nodes)
    precision = np.full(nodes.size, 1.0 / prior_sd**2)
    chosen = np.zeros(bank.n_items, dtype=bool)
    order = []
    for g in path:
        allowed = ~chosen if groups is None else ~chosen & (groups == g)
        gain = np.log(precision[None, :] + info).mean(axis=1)
        i = int(np.argmax(np.where(allowed, gain, -np.inf)))
        chosen[i] = True
        precision += info[i]
        order.append(i)
    return np.asarray(order)


def _representative(bank: ItemBank, theta: np.ndarray, path: list, groups: np.ndarray | None,
                    prior_sd: float) -> np.ndarray:
    nodes = _quantiles(theta, min(NODES, theta.size))
    c = curves(bank.discrimination[:, None] * nodes[None, :] + bank.intercept[:, None],
               bank.guessing[:, None], bank.slip[:, None])
    var = c.p * c.q  # (items, nodes): the unpredictable part of each response given the ability
    slope = derivative(c.sg, c.sm, bank.discrimination[:, None], bank.guessing[:, None], bank.slip[:, None])
    info = bank.information(nodes)
    precision = np.full(nodes.size, 1.0 / prior_sd**2)
    rest_var, rest_slope = var.sum(axis=0), slope.sum(axis=0)  # of the items not yet chosen
    chosen = np.zeros(bank.n_items, dtype=bool)
    stratum = np.zeros(bank.n_items, dtype=np.int64)
    low = np.zeros(bank.n_items, dtype=bool)  # below its group's median discrimination
    room = {}  # per group: items still to take from the lower and from the upper discrimination half
    easiness = c.p.mean(axis=1)  # expected proportion correct over the cohort
    for g in dict.fromkeys(path):
        member = np.arange(bank.n_items) if groups is None else np.flatnonzero(groups == g)
        ranked = member[np.lexsort((member, easiness[member]))]
        for j, part in enumerate(np.array_split(ranked, path.count(g))):
            stratum[part] = j
        slopes = bank.discrimination[member]
        low[member] = slopes < np.median(slopes)
        n_low = int(np.floor(path.count(g) * low[member].sum() / member.size + 0.5))
        room[g] = {True: n_low, False: path.count(g) - n_low}
    used = {}
    order = []
    for g in path:
        allowed = ~chosen if groups is None else ~chosen & (groups == g)
        allowed &= ~np.isin(stratum, used.get(g, []))
        in_tier = allowed & np.where(low, room[g][True] > 0, room[g][False] > 0)
        allowed = in_tier if in_tier.any() else allowed  # no free stratum holds an item of a half with room
        error = (rest_var[None, :] - var + (rest_slope[None, :] - slope) ** 2 / (precision[None, :] + info)).mean(axis=1)
        i = int(np.argmin(np.where(allowed, error, np.inf)))
        chosen[i] = True
        used.setdefault(g, []).append(stratum[i])
        room[g][bool(low[i])] -= 1
        precision += info[i]
        rest_var -= var[i]
        rest_slope -= slope[i]
        order.append(i)
    return np.asarray(order)


def design_order(bank: ItemBank, theta: np.ndarray, path: list, design: str, *, groups=None,
                 prior_sd: float = 1.0, chunk: int = 4096) -> np.ndarray:
    """Item indices of the static test of ``design`` (module docstring), ``len(path)`` items.

    ``path`` is the group of each item (all ``None`` without groups; with groups, any order of the
    quota counts); ``theta`` the calibration abilities (finite, non-empty, flat).
    """
    labels = None if groups is None else np.asarray(groups)
    if design == "max_information":
        out = _max_information(bank, theta, path, labels, chunk)
    elif design == "stratified":
        out = _stratified(bank, theta, path, labels)
    elif design == "representative":
        out = _representative(bank, theta, path, labels, prior_sd)
    else:
        out = _population(bank, theta, path, labels, prior_sd)
    return np.asarray(out, dtype=np.int64)


def above_cohort(bank: ItemBank, theta: np.ndarray, k: int, *, exclude=(), start: float = 0.95,
                 spread: float = 4.0) -> np.ndarray:
    """``k`` item indices informative above the cohort: item ``j`` is the not-yet-chosen item (outside
    ``exclude``) with the most Fisher information at the ``j``-th of ``k`` targets evenly spaced from the
    ``start`` quantile of the cohort's abilities ``theta`` to that quantile plus ``spread`` times their sd
    (ties to the lowest index). A model stronger than every calibration model answers a cohort-centred
    test without error (OLL ARC: 80% of the strongest fifth at 25 of 25, issue 46); these items still
    separate such models."""
    theta = np.asarray(theta, float)
    low = float(np.quantile(theta, start))
    targets = np.linspace(low, low + spread * max(float(theta.std()), 1e-6), int(k)) if k else np.empty(0)
    info = bank.information(targets) if k else np.empty((bank.n_items, 0))
    taken = np.zeros(bank.n_items, dtype=bool)
    taken[np.asarray(list(exclude), dtype=np.int64)] = True
    order = []
    for j in range(int(k)):
        i = int(np.argmax(np.where(taken, -np.inf, info[:, j])))
        taken[i] = True
        order.append(i)
    return np.asarray(order, dtype=np.int64)
