"""Short tests from a calibrated bank: the static K-item test, its harness subset files, and an adaptive test.

- :func:`select_items`: the static ``budget``-item test, by one of three rules (:data:`SELECTION_METHODS`):

  * ``"sample"`` (the default, :data:`~bayesirt.safety.settings.SELECTION_METHOD`): see the last item;
  * ``"score"``: greedy forward
    selection of the items that best recover the calibration models' full-benchmark accuracy
    (:func:`score_recovery_test`): at each step the item whose addition minimizes the squared
    error, over the calibration models, of the bank's prediction of full accuracy (their correct
    answers on the chosen items plus the expected number correct on the rest, under the grid
    posterior of their ability at the bank's mean item parameters);
  * ``"information"``: the SAFE static test (:func:`bayesirt.safety.adaptive.static_test`), the
    items with the most Fisher information summed over the calibration abilities (``design=
    "max_information"``; the SAFE steps' static tests use :data:`~bayesirt.safety.settings.STATIC_DESIGN`);
  * ``"extended"``: the first ``ceil(budget / 2)`` items of ``"score"`` and the rest informative above
    the calibration cohort (:func:`bayesirt.safety.static_design.above_cohort`), for scoring models
    that may be stronger than every calibration model (``benchmarks/score_shift.py``);
  * ``"sample"``: a stratified random sample, one item drawn at random (``seed``) from each of ``budget``
    strata of the items' proportion correct in the cohort (:func:`bayesirt.safety.item_sample.stratified_sample`);
    ``score`` then gives the design-based interval, which stays calibrated for models unlike the cohort.

  With ``stratify``, proportional quotas per ``item_group`` (each benchmark keeps its share).
- :func:`harness_ids`: the test as the subset lists evaluation harnesses accept. The rule that
  maps a bank item id to (task, document id), in order:

  1. ``"<task>/<doc>"`` (the ids :func:`bayesirt.data.harness.read_lm_eval` and ``read_inspect``
     give: ``f"{task}/{doc_id}"``, ``f"{task}/{sample.id}"``): task and doc as written;
  2. ``"<subject>.<doc>"`` with an integer ``doc`` (the Open LLM Leaderboard's MMLU ids,
     ``high_school_mathematics.236``): task ``f"{task}_{subject}"`` when ``task`` is given
     (``task="mmlu"`` gives lm-eval's ``mmlu_high_school_mathematics``), else ``subject``;
  3. an integer id: task = ``task`` when given, else the item's ``item_group`` unless that is the
     loader's placeholder ``"all"``;
  4. anything else is an error naming the item (pass ``task`` or rename the items).

  Document ids that are integers are written as integers (lm-eval's ``--samples`` takes doc
  indices); other ids stay strings (Inspect sample ids may be strings).
- :class:`AdaptiveTest`: the next item given the responses so far (posterior-weighted Fisher
  information at the bank's mean item parameters, grid posterior of the ability), for users who
  drive a model themselves; score the finished run with :func:`bayesirt.safety.scoring.predict_accuracy`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
from scipy.special import logsumexp

from bayesirt.errors import ConfigError, DataError
from bayesirt.safety.adaptive import ability_grid, quota_counts, static_test
from bayesirt.safety.bank import Bank
from bayesirt.safety.item_sample import stratified_sample
from bayesirt.safety.settings import ABOVE_FROM, ABOVE_SPREAD, SELECTION_METHOD, SELECTION_METHODS
from bayesirt.safety.static_design import above_cohort
from bayesirt.utils.validation import check_choice, check_int, check_number

__all__ = ["select_items", "score_recovery_test", "harness_ids", "AdaptiveTest", "SELECTION_METHODS",
           "SELECTION_METHOD"]

_PLACEHOLDER_GROUP = "all"
_INT = re.compile(r"^-?\d+$")


def select_items(bank: Bank, budget: int, *, method: str = SELECTION_METHOD, stratify: bool = False, quotas=None,
                 max_models: int = 3000, seed: int = 0) -> np.ndarray:
    """Indices of the static ``budget``-item test, in order of selection.

    Parameters
    ----------
    bank : Bank
    budget : int
    method : {"sample", "score", "information", "extended"}, default "sample"
        :data:`~bayesirt.safety.settings.SELECTION_METHOD`.
    stratify : bool, default False
        Proportional quotas per ``item_group`` (see :func:`bayesirt.safety.adaptive.quota_counts`).
    quotas : dict, optional
        Explicit ``item_group -> count`` quotas (summing to ``budget``); implies ``stratify``.
    max_models : int, default 3000
        ``"score"``: at most this many calibration models (a seeded random subset) in the criterion.
    seed : int, default 0
    """
    budget = check_int(budget, name="budget", caller="select_items", low=1, high=bank.n_items)  # at most the bank
    check_choice(method, SELECTION_METHODS, name="method", caller="select_items")
    point = bank.point()
    groups = bank.item_group if (stratify or quotas is not None) else None
    if method == "information":
        return static_test(point.discrimination, point.intercept, bank.abilities, budget, guessing=point.guessing,
                           slip=point.slip, groups=groups, quotas=quotas, design="max_information")
    if method in ("extended", "sample") and groups is not None:
        raise ConfigError(f"select_items: method={method!r} takes no item_group quotas (stratify, quotas): its "
                          + ("upper block is chosen by ability alone" if method == "extended" else
                             "strata are of item difficulty, and score recognizes the sample by them")
                          + "; use method='score' with quotas")
    if method == "sample":
        return stratified_sample(bank, budget, seed=seed)
    if bank.calibration is None:
        raise ConfigError(f"select_items: method={method!r} needs the bank's calibration responses (a posterior.nc "
                          "carries them; with an mml.nc pass calibration=the fitted data, --calibration); or use "
                          "method='information'")
    y = bank.calibration["responses"].transpose("item", "model").values.astype(np.int8)
    if y.shape[1] > max_models:
        y = y[:, np.sort(np.random.default_rng(seed).choice(y.shape[1], size=max_models, replace=False))]
    path = None
    if groups is not None:
        counts = quota_counts(groups, budget, "proportional" if quotas is None else quotas)
        path = [g for g, n in counts.items() for _ in range(n)]
    if method == "extended":
        base = score_recovery_test(point, y, budget - budget // 2, prior_mean=bank.prior_mean, prior_sd=bank.prior_sd)
        upper = above_cohort(point, bank.abilities, budget // 2, exclude=base, start=ABOVE_FROM, spread=ABOVE_SPREAD)
        return np.concatenate([base, upper])
    return score_recovery_test(point, y, budget, groups=groups, path=path, prior_mean=bank.prior_mean,
                               prior_sd=bank.prior_sd)


def score_recovery_test(point, responses, budget: int, *, groups=None, path=None, prior_mean: float = 0.0,
                        prior_sd: float = 1.0, points: int = 121) -> np.ndarray:
    """Greedy forward selection of the items that best recover full-benchmark accuracy.

    Parameters
    ----------
    point : ItemBank
        Item parameters (the bank's means), ``n_items`` long.
    responses : ndarray, shape (n_items, n_models)
        The calibration cohort's responses (1 / 0 / -1 missing).
    budget : int
    groups, path : optional
        Item groups and the group of each successive pick (quotas); default no quotas.
    prior_mean, prior_sd, points
        The ability grid of :func:`bayesirt.safety.adaptive.ability_grid`.

    Returns
    -------
    ndarray of int, shape (budget,)
        Items in order of selection. Each step adds the item minimizing
        ``sum_m (pred_m - full_m)^2`` over calibration models ``m``, with ``full_m`` the model's
        accuracy over its observed items and ``pred_m = (correct on the chosen items + E[correct on
        the rest]) / n_items`` under the grid posterior of its ability given the chosen items
        (ties to the lowest index). Missing responses count as not run.
    """
    y = np.asarray(responses)
    n_items, n_models = y.shape
    budget = check_int(budget, name="budget", caller="score_recovery_test", low=1, high=n_items)
    nodes, logw = ability_grid(points, prior_mean=prior_mean, prior_sd=prior_sd)
    lp, lq = point.log_pq(nodes)  # (items, nodes)
    p, q = np.exp(lp), np.exp(lq)
    full = (y == 1).sum(0) / np.maximum((y >= 0).sum(0), 1)
    y1, y0 = (y == 1).T, (y == 0).T  # (models, items)
    rest = p.sum(0)  # expected correct over the items not chosen, per node
    correct = np.zeros(n_models)
    log_post = np.repeat(logw[None, :], n_models, axis=0)
    chosen = np.zeros(n_items, dtype=bool)
    order = []
    for t in range(budget):
        w = np.exp(log_post - log_post.max(axis=1, keepdims=True))
        a1, a0 = w @ p.T, w @ q.T
        b1, b0 = w @ (p * (rest - p)).T, w @ (q * (rest - p)).T
        base = (w @ rest) / w.sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            pred = np.where(y1, correct[:, None] + 1 + b1 / a1,
                            np.where(y0, correct[:, None] + b0 / a0, (correct + base)[:, None])) / n_items
        err = ((pred - full[:, None]) ** 2).sum(0)
        allowed = ~chosen
        if path is not None:
            in_group = allowed & (np.asarray(groups) == path[t])
            allowed = in_group if in_group.any() else allowed
        err = np.where(allowed & np.isfinite(err), err, np.inf)
        j = int(np.argmin(err))
        order.append(j)
        chosen[j] = True
        log_post += np.where(y1[:, j, None], lp[j], np.where(y0[:, j, None], lq[j], 0.0))
        correct += y1[:, j]
        rest = rest - p[j]
    return np.asarray(order, dtype=np.int64)


def _doc(value: str):
    return int(value) if _INT.match(value) else value


def harness_ids(item_ids, item_group=None, *, task: str | None = None) -> dict:
    """``task -> [doc ids]`` of the items by the rule of the module docstring (order of ``item_ids`` kept)."""
    ids = np.asarray(item_ids).astype(str)
    groups = np.full(ids.size, _PLACEHOLDER_GROUP) if item_group is None else np.asarray(item_group).astype(str)
    out: dict = {}
    for item, group in zip(map(str, ids), map(str, groups), strict=True):
        head, sep, tail = item.rpartition("/")
        if sep and head:
            name, doc = head, tail
        elif "." in item and _INT.match(item.rpartition(".")[2]):
            subject, _, doc = item.rpartition(".")
            name = f"{task}_{subject}" if task else subject
        elif _INT.match(item) and (task or group != _PLACEHOLDER_GROUP):
            name, doc = (task or group), item
        else:
            raise DataError(f"cannot tell the harness task and document of item {item!r}: its id is not "
                            "'<task>/<doc>', '<subject>.<doc>' or an integer with a task; pass task=NAME "
                            "(--task) or give the bank lm-eval style item ids")
        out.setdefault(name, []).append(_doc(doc))
    return out


class AdaptiveTest:
    """An adaptive test driven one item at a time.

    >>> test = AdaptiveTest(bank, budget=20)          # doctest: +SKIP
    >>> item = test.next_item()                        # an item id of the bank
    >>> test.record(item, 1)                           # the model answered it correctly
    >>> test.theta, test.sd, test.done

    The next item maximizes the posterior-weighted Fisher information (van der Linden 1998) at the
    bank's mean item parameters, among items not yet given (within the proportional
    ``item_group`` quotas when ``stratify``); the ability posterior is exact on the grid of
    :func:`bayesirt.safety.adaptive.ability_grid`. ``responses`` (``item_id -> 0/1``) gives the
    items already run. ``done`` once ``budget`` items are given or the posterior SD is below
    ``min_sd``. Score the run with :func:`bayesirt.safety.scoring.predict_accuracy` (item
    uncertainty included) once it is done.
    """

    def __init__(self, bank: Bank, *, budget: int, responses: Mapping | None = None, stratify: bool = False,
                 min_sd: float | None = None, points: int = 241):
        self.bank = bank
        self.budget = check_int(budget, name="budget", caller="AdaptiveTest", low=1, high=bank.n_items)
        check_number(min_sd, name="min_sd", caller="AdaptiveTest", low=0, low_open=True, optional=True)  # a posterior SD
        self.min_sd = min_sd
        self.nodes, logw = ability_grid(points, prior_mean=bank.prior_mean, prior_sd=bank.prior_sd)
        point = bank.point()
        self._lp, self._lq = point.log_pq(self.nodes)
        self._info = point.information(self.nodes)  # (items, nodes)
        self._log_post = logw.copy()
        self._quota = None
        if stratify:
            counts = quota_counts(bank.item_group, self.budget)
            self._quota = {g: n for g, n in counts.items()}
        self.given: list[str] = []
        self.answers: list[int] = []
        for item, value in (responses or {}).items():
            self.record(item, value)

    def record(self, item_id: str, correct) -> None:
        """Add the model's response (1 correct, 0 incorrect) to ``item_id``."""
        j = int(self.bank.index([item_id])[0])
        if str(item_id) in self.given:
            raise DataError(f"item {str(item_id)!r} was already recorded; each item is given once")
        if correct not in (0, 1, True, False):
            raise DataError(f"the response to {str(item_id)!r} must be 1 (correct) or 0 (incorrect); got {correct!r}")
        self._log_post = self._log_post + (self._lp[j] if correct else self._lq[j])
        self._log_post -= logsumexp(self._log_post)
        self.given.append(str(item_id))
        self.answers.append(int(bool(correct)))

    @property
    def posterior(self) -> np.ndarray:
        return np.exp(self._log_post)

    @property
    def theta(self) -> float:
        return float(self.posterior @ self.nodes)

    @property
    def sd(self) -> float:
        return float(np.sqrt(self.posterior @ (self.nodes - self.theta) ** 2))

    @property
    def done(self) -> bool:
        return len(self.given) >= self.budget or (self.min_sd is not None and len(self.given) > 0
                                                  and self.sd < self.min_sd)

    def next_item(self) -> str | None:
        """The id of the next item to run, or None when the test is done."""
        if self.done:
            return None
        crit = self._info @ self.posterior
        used = np.isin(self.bank.item_ids, self.given)
        crit = np.where(used, -np.inf, crit)
        if self._quota is not None:
            taken = {g: int(np.sum(self.bank.item_group[used] == g)) for g in self._quota}
            t = len(self.given) + 1
            target = quota_counts(self.bank.item_group, t) if t <= self.bank.n_items else self._quota
            short = [g for g in target if taken.get(g, 0) < target[g]]
            if short:
                allowed = np.isin(self.bank.item_group, short) & ~used
                if allowed.any():
                    crit = np.where(allowed, crit, -np.inf)
        return str(self.bank.item_ids[int(np.argmax(crit))])

    def responses(self) -> np.ndarray:
        """The run as a bank-aligned vector: 1 / 0 on given items, -1 elsewhere (for ``predict_accuracy``)."""
        y = np.full(self.bank.n_items, -1, dtype=np.int8)
        if self.given:
            y[self.bank.index(self.given)] = self.answers
        return y
