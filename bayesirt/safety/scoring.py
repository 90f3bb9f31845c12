"""A model's ability and its full-benchmark accuracy from a partial run, given a calibrated bank.

For a new model with responses ``y`` on some items of the bank and item-parameter draws
``beta_1..beta_S`` of the bank (posterior draws, or Laplace draws of an MML fit,
:mod:`bayesirt.safety.bank`), the joint posterior of the model's ability and the items is

    p(theta, s | y) ∝ p(y | theta, beta_s) Normal(theta; mu, sigma)        (s uniform over draws),

computed exactly on an equally spaced ability grid per draw (:func:`bayesirt.safety.adaptive.ability_grid`,
241 nodes over ``mu +- 6 sigma``) and normalized over draws and nodes together: the draws are
mixed with weights proportional to the marginal likelihood of ``y`` under each draw, so the new
model's responses update the items too (for a bank calibrated on thousands of models the weights
are close to uniform; their effective number is reported). Item uncertainty is integrated over,
not fixed at point estimates.

The full-benchmark accuracy is ``A = (correct observed + Y_rest) / n_bank`` with
``Y_rest = sum over unobserved items j of Bernoulli(P_j(theta, beta_s))``: its posterior
predictive mean is exact (``sum_{s,q} w_sq sum_j P_j``) and its interval is from ``samples``
Monte Carlo draws of ``(s, theta)`` from the joint posterior and of the unobserved responses given
them, so the interval includes the ability and item uncertainty and the binomial sampling of the
items not run. Equal-tailed quantiles of the discrete predictive distribution ("inverted CDF")
give at least the nominal coverage.

Person fit (:func:`person_fit_flags`): l_z of each model on its observed items at its MAP ability
and the bank's mean item parameters (as :func:`bayesirt.safety.personfit.person_fit`), against a
cut-off calibrated on the same items: the ``fpr`` quantile of the calibration cohort's l_z on
those items when the bank carries its calibration responses ("empirical"), else of l_z of
responses simulated from the bank at the calibration abilities ("parametric"). A flagged model's
pattern is not explained by the bank: its interval is not to be trusted.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import logsumexp

from bayesirt.errors import BayesIRTError, ConfigError, DataError
from bayesirt.models.response import log_probabilities, probability
from bayesirt.safety.adaptive import ability_grid, score_test
from bayesirt.safety.bank import Bank
from bayesirt.safety.personfit import calibrate_cutoff, check_responses, lz_statistics
from bayesirt.safety.settings import CALIBRATION_RULES
from bayesirt.safety.short_test import harness_ids
from bayesirt.utils.validation import check_choice, check_int, check_number, check_probability
from bayesirt.utils.progress import progress_bar, stage

__all__ = ["AccuracyPrediction", "joint_log_posterior", "predict_accuracy", "person_fit_flags", "PersonFit",
           "align_responses", "outside_calibration", "interval_scale", "at_ceiling"]

_CHUNK = 64  # models per block of the (draw, model, node) posterior
_TABLE_LIMIT = 25_000_000  # float32 cells of the P table of the unobserved items kept in memory (100 MB)


class AccuracyPrediction(NamedTuple):
    """Per-model results of :func:`predict_accuracy`, each of shape ``(n_models,)``."""

    n_items: np.ndarray
    n_correct: np.ndarray
    theta_mean: np.ndarray
    theta_sd: np.ndarray
    theta_lower: np.ndarray
    theta_upper: np.ndarray
    predicted_accuracy: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    draw_ess: np.ndarray
    model_lower: np.ndarray
    model_upper: np.ndarray
    scale: np.ndarray


def _as_y(responses, n_items: int) -> np.ndarray:
    y = np.asarray(getattr(responses, "values", responses))
    if y.ndim == 1:
        y = y[:, None]
    if y.ndim != 2 or y.shape[0] != n_items:
        raise DataError(f"responses must be an (item, model) matrix over the bank's {n_items} items; got shape "
                        f"{y.shape}")
    if not np.isin(y, (-1, 0, 1)).all():
        raise DataError("responses must contain only 1 (correct), 0 (incorrect) and -1 (not run)")
    return y.astype(np.int8)


def _log_pq(a, d, c, s, theta):
    """log P and log(1 - P), shape (n_draws, n_items, n_theta), for parameter draws (n_draws, n_items)."""
    return log_probabilities(a[:, :, None] * theta[None, None, :] + d[:, :, None], c[:, :, None], s[:, :, None])


def _probabilities(bank: Bank, items: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """P of ``items`` at every draw and node, float32 (n_draws, n_items, n_nodes), built in blocks of draws."""
    out = np.empty((bank.n_draws, items.size, nodes.size), dtype=np.float32)
    step = max(1, 2_000_000 // max(1, items.size * nodes.size))
    for lo in range(0, bank.n_draws, step):
        a, d, c, s = (x[lo:lo + step] for x in bank.subset_draws(items))
        out[lo:lo + step] = np.exp(_log_pq(a, d, c, s, nodes)[0])
    return out


def joint_log_posterior(responses, discrimination, intercept, guessing=None, slip=None, *, nodes, log_weights):
    """Normalized log joint posterior of (draw, ability node) for each model, shape (n_models, n_draws, n_nodes).

    Parameters
    ----------
    responses : array_like, shape (n_items, n_models)
        1 / 0 / -1 (not observed).
    discrimination, intercept, guessing, slip : array_like, shape (n_draws, n_items)
        Item-parameter draws (``guessing``/``slip`` default 0).
    nodes, log_weights : ndarray, shape (n_nodes,)
        The ability grid and the log prior weights of :func:`ability_grid`.
    """
    a = np.atleast_2d(np.asarray(discrimination, float))
    d = np.atleast_2d(np.asarray(intercept, float))
    c = np.zeros_like(d) if guessing is None else np.broadcast_to(np.asarray(guessing, float), d.shape)
    s = np.zeros_like(d) if slip is None else np.broadcast_to(np.asarray(slip, float), d.shape)
    y = _as_y(responses, d.shape[1])
    lp, lq = _log_pq(a, d, c, s, np.asarray(nodes, float))
    y1, y0 = (y == 1).T.astype(float), (y == 0).T.astype(float)  # (models, items)
    lj = (np.matmul(y1, lp) + np.matmul(y0, lq)).transpose(1, 0, 2) + np.asarray(log_weights)[None, None, :]
    return lj - logsumexp(lj, axis=(1, 2), keepdims=True)


def predict_accuracy(bank: Bank, responses, *, level: float = 0.9, samples: int = 2000, points: int = 241,
                     seed: int = 0, calibrate: bool = False, max_models: int = 2000,
                     rule: str = "conservative", prior_scale: float = 1.0,
                     progress: str | None = None) -> AccuracyPrediction:
    """Ability posterior and posterior predictive full-benchmark accuracy of every model.

    Parameters
    ----------
    bank : Bank
    responses : array_like, shape (bank.n_items, n_models)
        1 / 0 over the items run, -1 for the items not run (aligned with the bank's items).
    level : float, default 0.9
        Probability of the equal-tailed predictive interval.
    samples : int, default 2000
        Monte Carlo draws of the predictive distribution per model.
    points : int, default 241
        Ability grid nodes.
    seed : int, default 0
    calibrate : bool, default False
        Rescale each interval's two half-widths about the predicted accuracy by the factor that makes
        the interval cover the full accuracy of ``level`` of the calibration cohort answering the same
        items (split-conformal quantile with the ``(n + 1)`` correction; needs the bank's calibration
        responses; at most ``max_models`` of them, a seeded subset). The model-based interval stays in
        ``model_lower``/``model_upper`` and the factor in ``scale`` (NaN when not calibrated). The
        cohort also fitted the bank and chose a ``"score"`` test, so the factor is in-sample; with
        thousands of calibration models the optimism is small (``benchmarks/short_test.py`` measures
        held-out coverage of both intervals).
    rule : {"conservative", "nearest"}, default "conservative"
        How :func:`interval_scale` picks the factor (see there).
    prior_scale : float, default 1
        The ability prior of the scored models is ``Normal(bank.prior_mean, prior_scale * bank.prior_sd)``
        (``> 1``: a wider prior for new models that may lie beyond the calibration population; the
        calibration factor is computed under the same prior).
    progress : str, optional
        Description of a progress report over the models (none when omitted).

    Returns
    -------
    AccuracyPrediction
    """
    check_probability(level, name="level", caller="predict_accuracy")
    check_choice(rule, CALIBRATION_RULES, name="rule", caller="predict_accuracy")
    if calibrate and bank.calibration is None:
        raise ConfigError("predict_accuracy: calibrate=True needs the bank's calibration responses (a posterior.nc "
                          "carries them; with an mml.nc pass calibration=the fitted data)")
    check_int(samples, name="samples", caller="predict_accuracy", low=100)  # Monte Carlo draws per model
    y = _as_y(responses, bank.n_items)
    n_bank, n_models = y.shape
    check_number(prior_scale, name="prior_scale", caller="predict_accuracy", low=0, low_open=True)
    nodes, logw = ability_grid(points, prior_mean=bank.prior_mean, prior_sd=bank.prior_sd * prior_scale)
    rng = np.random.default_rng(seed)
    obs = y >= 0
    out = {k: np.full(n_models, np.nan) for k in AccuracyPrediction._fields}
    out["n_items"], out["n_correct"] = obs.sum(0), (y == 1).sum(0)
    tail = (1 - level) / 2
    # models that ran the same items share the table of P over their unobserved items
    masks, group = np.unique(obs.T, axis=0, return_inverse=True)
    with progress_bar(n_models, progress or "", enabled=progress is not None) as advance:
        for g, mask in enumerate(masks):
            _predict_group(bank, y, np.flatnonzero(group.reshape(-1) == g), mask, nodes, logw, out, rng,
                           samples=samples, tail=tail, advance=advance)
    out["model_lower"], out["model_upper"] = out["lower"].copy(), out["upper"].copy()
    out["scale"] = np.full(n_models, np.nan)
    if calibrate:
        ref_all = bank.calibration["responses"].transpose("item", "model").values.astype(np.int8)
        for g, mask in enumerate(masks):
            members = np.flatnonzero(group.reshape(-1) == g)
            if progress is not None:
                stage(f"{progress}: calibrating the interval on the cohort's answers to {int(mask.sum())} item(s)")
            scale = interval_scale(bank, ref_all, mask, level=level, samples=samples, points=points, seed=seed,
                                   max_models=max_models, rule=rule, prior_scale=prior_scale)
            out["scale"][members] = scale
            lo_bound = out["n_correct"][members] / n_bank
            hi_bound = (out["n_correct"][members] + (~mask).sum()) / n_bank
            pred = out["predicted_accuracy"][members]
            out["lower"][members] = np.maximum(pred - scale * (pred - out["model_lower"][members]), lo_bound)
            out["upper"][members] = np.minimum(pred + scale * (out["model_upper"][members] - pred), hi_bound)
    return AccuracyPrediction(**out)


def _predict_group(bank: Bank, y, members, mask, nodes, logw, out, rng, *, samples, tail, advance) -> None:
    """Fill ``out`` for the models ``members``, which all ran the items of ``mask``."""
    n_bank = y.shape[0]
    seen, rest = np.flatnonzero(mask), np.flatnonzero(~mask)
    if bank.n_draws * rest.size * nodes.size <= _TABLE_LIMIT:
        p_rest = _probabilities(bank, rest, nodes)  # (draws, rest, nodes), float32
        mu_rest = p_rest.sum(axis=1, dtype=float)  # (draws, nodes): expected correct among the unobserved
    else:  # a large bank: the expected count by blocks of items, P of the sampled pairs when needed
        p_rest = None
        mu_rest = sum(_probabilities(bank, part, nodes).sum(axis=1, dtype=float)
                      for part in np.array_split(rest, -(-rest.size * bank.n_draws * nodes.size // _TABLE_LIMIT)))
        rest_draws = bank.subset_draws(rest)
    for start in range(0, members.size, _CHUNK):
        block = members[start:start + _CHUNK]
        lw = joint_log_posterior(y[np.ix_(seen, block)], *bank.subset_draws(seen), nodes=nodes, log_weights=logw)
        w = np.exp(lw)  # (models, draws, nodes)
        marg = w.sum(axis=1)
        mean = marg @ nodes
        out["theta_mean"][block] = mean
        out["theta_sd"][block] = np.sqrt(np.einsum("mq,mq->m", marg, (nodes[None] - mean[:, None]) ** 2))
        cdf = np.cumsum(marg, axis=1)
        out["theta_lower"][block] = nodes[np.minimum((cdf < tail).sum(1), nodes.size - 1)]
        out["theta_upper"][block] = nodes[np.minimum((cdf < 1 - tail).sum(1), nodes.size - 1)]
        per_draw = w.sum(axis=2)
        out["draw_ess"][block] = 1.0 / (per_draw**2).sum(axis=1)
        correct = out["n_correct"][block].astype(float)
        out["predicted_accuracy"][block] = (correct + np.einsum("msq,sq->m", w, mu_rest)) / n_bank
        flat = w.reshape(block.size, -1).cumsum(axis=1)
        for k, m in enumerate(block):
            pick = np.minimum(np.searchsorted(flat[k], rng.random(samples) * flat[k, -1]), flat.shape[1] - 1)
            ds, dq = np.divmod(pick, nodes.size)
            if rest.size:
                if p_rest is not None:
                    prob = p_rest[ds, :, dq]  # (samples, rest)
                else:
                    ra, rd, rc, rs = (x[ds] for x in rest_draws)
                    prob = probability(ra * nodes[dq][:, None] + rd, rc, rs)
                count = (rng.random(prob.shape) < prob).sum(axis=1)
            else:
                count = np.zeros(samples)
            acc = (correct[k] + count) / n_bank
            out["lower"][m], out["upper"][m] = np.quantile(acc, [tail, 1 - tail], method="inverted_cdf")
        advance(block.size)


def interval_scale(bank: Bank, reference: np.ndarray, mask: np.ndarray, *, level: float = 0.9, samples: int = 2000,
                   points: int = 241, seed: int = 0, max_models: int = 2000, rule: str = "conservative",
                   prior_scale: float = 1.0) -> float:
    """The factor on the model-based interval's half-widths that covers ``level`` of the reference cohort.

    ``reference`` (bank items x models) are the calibration responses; the models that answered
    every item of ``mask`` are scored from those items alone and compared with their accuracy over
    all their observed items. For each, ``c_m`` is the factor its interval needs to reach its actual
    accuracy (0 inside the predicted point). ``rule="conservative"``: the ``ceil((n + 1) level)``-th
    smallest ``c_m`` (split conformal: at least ``level`` covered). ``rule="nearest"``: the ``c_m``
    whose cohort coverage is nearest to ``level`` (ties to the larger): accuracy moves in steps of
    ``1 / n_items``, many models sit exactly on an interval endpoint (``c_m = 1``), and the
    conservative factor then jumps past ``level`` to cover every endpoint atom (97% instead of 90%
    on arc at K = 25). Fewer than 20 usable models: 1 (the model-based interval).
    """
    check_choice(rule, CALIBRATION_RULES, name="rule", caller="interval_scale")
    mask = np.asarray(mask, bool)
    usable = (reference[mask] >= 0).all(axis=0) & ((reference >= 0).sum(0) > 0)
    ref = reference[:, usable]
    if ref.shape[1] > max_models:
        ref = ref[:, np.sort(np.random.default_rng(seed).choice(ref.shape[1], size=max_models, replace=False))]
    if ref.shape[1] < 20:
        return 1.0
    actual = (ref == 1).sum(0) / (ref >= 0).sum(0)
    part = np.where(mask[:, None], ref, -1).astype(np.int8)
    pred = predict_accuracy(bank, part, level=level, samples=samples, points=points, seed=seed, prior_scale=prior_scale)
    p = pred.predicted_accuracy
    with np.errstate(invalid="ignore", divide="ignore"):
        need = np.where(actual >= p, (actual - p) / (pred.upper - p), (p - actual) / (p - pred.lower))
    need = np.where(np.isfinite(need), need, np.where(np.isclose(actual, p), 0.0, np.inf))
    ordered = np.sort(need)
    if rule == "nearest":
        covered = np.searchsorted(ordered, ordered, side="right") / ordered.size
        gap = np.abs(covered - level)
        return float(ordered[np.flatnonzero(gap == gap.min())[-1]])
    rank = int(np.ceil((need.size + 1) * level))
    return float(ordered[min(rank, need.size) - 1])


class PersonFit(NamedTuple):
    """Per-model person fit on the observed items: MAP ability, l_z, the cut-off and the flag."""

    theta_map: np.ndarray
    lz: np.ndarray
    cutoff: np.ndarray
    flag: np.ndarray
    method: str


def _lz(y: np.ndarray, point, prior_mean: float, prior_sd: float) -> np.ndarray:
    est = score_test(y, *point[:2], guessing=point.guessing, slip=point.slip, method="map", prior_mean=prior_mean,
                     prior_sd=prior_sd)
    return est.theta, lz_statistics(y, est.theta, *point, prior_mean=prior_mean, prior_sd=prior_sd).lz


def person_fit_flags(bank: Bank, responses, *, fpr: float = 0.1, seed: int = 0) -> PersonFit:
    """l_z of each model on its observed items and a cut-off calibrated on the same items.

    The cut-off is :func:`bayesirt.safety.personfit.calibrate_cutoff` at ``fpr`` of the
    calibration cohort's l_z on the model's observed items (their own responses, ``empirical``)
    or, without calibration responses, of l_z of responses simulated at the calibration
    abilities (``parametric``). A model is flagged when ``l_z <= cutoff``. Models observing
    fewer than two items get NaN and no flag.
    """
    y = _as_y(responses, bank.n_items)
    point = bank.point()
    obs = y >= 0
    n_models = y.shape[1]
    theta, lz, cut = np.full(n_models, np.nan), np.full(n_models, np.nan), np.full(n_models, np.nan)
    method = "empirical" if bank.calibration is not None else "parametric"
    masks, group = np.unique(obs.T, axis=0, return_inverse=True)
    rng = np.random.default_rng(seed)
    for g, mask in enumerate(masks):
        members = np.flatnonzero(group.reshape(-1) == g)
        seen = np.flatnonzero(mask)
        if seen.size < 2:
            continue
        sub = point.subset(seen)
        theta[members], lz[members] = _lz(y[np.ix_(seen, members)], sub, bank.prior_mean, bank.prior_sd)
        if bank.calibration is not None:
            ref = bank.calibration["responses"].transpose("item", "model").values[seen].astype(np.int8)
            ref = ref[:, (ref >= 0).sum(0) == seen.size]  # calibration models that answered every one of these items
        else:
            p = np.exp(sub.log_pq(bank.abilities)[0])
            ref = (rng.random(p.shape) < p).astype(np.int8)
        try:
            cut[members] = calibrate_cutoff(_lz(ref, sub, bank.prior_mean, bank.prior_sd)[1], fpr=fpr)
        except BayesIRTError:
            continue  # too few reference patterns on these items: no cut-off, no flag
    flag = np.where(np.isfinite(lz) & np.isfinite(cut), lz <= cut, False)
    return PersonFit(theta, lz, cut, flag.astype(bool), method)


def outside_calibration(bank: Bank, responses, theta_mean, *, tail: float = 0.01,
                        ability_tail: float = 0.0) -> np.ndarray:
    """True for models outside the range of abilities the bank was calibrated on.

    A model is outside when its posterior mean ability lies outside the range of the calibration
    abilities, or (when the bank carries its calibration responses) when its number correct on its
    observed items is reached or passed by fewer than ``tail`` of the calibration models that
    answered the same items (or equalled or undercut by fewer than ``tail``): e.g. a model answering
    all 10 items of a test that almost no calibration model passes whole. The second rule matters
    for short tests, where the ability prior (the calibration population) holds the posterior
    mean inside the range whatever the answers.

    ``ability_tail > 0`` narrows the ability range to the cohort's ``ability_tail`` and
    ``1 - ability_tail`` quantiles: with ``tail = ability_tail = 0.05`` it marks the models at the
    edge of the support, where a factor calibrated on the whole cohort does not describe them
    (``score``'s extrapolation envelope covers both).
    """
    y = _as_y(responses, bank.n_items)
    lo, hi = (bank.ability_range() if ability_tail <= 0 else
              tuple(float(v) for v in np.quantile(bank.abilities, [ability_tail, 1 - ability_tail])))
    theta = np.asarray(theta_mean, float)
    out = (theta < lo) | (theta > hi)
    if bank.calibration is None:
        return out
    ref_all = bank.calibration["responses"].transpose("item", "model").values.astype(np.int8)
    obs = y >= 0
    masks, group = np.unique(obs.T, axis=0, return_inverse=True)
    for g, mask in enumerate(masks):
        members = np.flatnonzero(group.reshape(-1) == g)
        seen = np.flatnonzero(mask)
        if seen.size == 0:
            continue
        ref = ref_all[seen]
        ref = (ref[:, (ref >= 0).all(0)] == 1).sum(0)
        if ref.size == 0:
            continue
        score = (y[np.ix_(seen, members)] == 1).sum(0)
        above = (ref[None, :] >= score[:, None]).mean(1)
        below = (ref[None, :] <= score[:, None]).mean(1)
        out[members] |= (above < tail) | (below < tail)
    return out


def at_ceiling(responses) -> np.ndarray:
    """True for models that answered every observed item correctly, or every one wrongly (at least one).

    Such a pattern bounds the ability on one side only: the posterior's other side is the
    calibration population's, so the interval assumes the model is no stronger (weaker) than that
    population's best (worst), which a short test cannot check.
    """
    y = np.asarray(getattr(responses, "values", responses))
    y = y[:, None] if y.ndim == 1 else y
    n = (y >= 0).sum(0)
    correct = (y == 1).sum(0)
    return (n > 0) & ((correct == n) | (correct == 0))


def _harness_keys(item_ids, item_group, task):
    """(task, doc) key of each id by the rule of :func:`bayesirt.safety.short_test.harness_ids`, None if none applies."""
    keys = []
    groups = np.full(len(item_ids), "all") if item_group is None else np.asarray(item_group).astype(str)
    for item, group in zip(np.asarray(item_ids).astype(str), groups, strict=True):
        try:
            ((name, docs),) = harness_ids([item], [group], task=task).items()
            keys.append((name, str(docs[0])))
        except DataError:
            keys.append(None)
    return keys


def align_responses(bank: Bank, responses, *, task: str | None = None, models=None):
    """The bank-aligned ``(bank.n_items, n_models)`` matrix of a response Dataset (-1 where not run).

    Items are matched by id; an id the bank lacks is then matched through its harness (task, doc)
    key (:func:`bayesirt.safety.short_test.harness_ids`, with ``task`` for the bank's ids), so an
    lm-eval run of a test selected from a bank with plain integer ids is recognized. Ids matched
    neither way are a DataError naming them. ``models`` (ids) restricts the models scored; unknown
    model ids are a DataError naming them.

    Returns
    -------
    y : ndarray of int8, shape (bank.n_items, n_models)
    model_ids : ndarray of str
    """
    da = check_responses(responses)
    model_ids = da["model"].values.astype(str)
    if models is not None:
        wanted = np.asarray(models).astype(str).ravel()
        unknown = [str(m) for m in dict.fromkeys(wanted) if m not in set(model_ids)]
        if unknown:
            raise DataError(f"{len(unknown)} model id(s) are not in the responses: {', '.join(map(repr, unknown[:5]))}; "
                            f"the responses have models such as {str(model_ids[0])!r}")
        da = da.sel(model=wanted)
        model_ids = wanted
    ids = da["item"].values.astype(str)
    lookup = {v: i for i, v in enumerate(bank.item_ids)}
    index = np.array([lookup.get(v, -1) for v in ids])
    if (index < 0).any():
        bank_keys = {k: i for i, k in enumerate(_harness_keys(bank.item_ids, bank.item_group, task)) if k is not None}
        groups = da["item_group"].values if "item_group" in da.coords else None
        for pos, key in enumerate(_harness_keys(ids, groups, None)):
            if index[pos] < 0 and key is not None:
                index[pos] = bank_keys.get(key, -1)
    if (index < 0).any():
        bank.index(ids[index < 0], what="item")  # raises the DataError naming the unknown ids
    if np.unique(index).size < index.size:
        dup = ids[np.flatnonzero(np.bincount(index, minlength=bank.n_items)[index] > 1)[0]]
        raise DataError(f"two response items map to the same bank item (e.g. {dup!r}); give each bank item once")
    y = np.full((bank.n_items, model_ids.size), -1, dtype=np.int8)
    y[index] = np.asarray(da.values, dtype=np.int8)
    return y, model_ids
