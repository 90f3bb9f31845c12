"""Response fingerprints: does an endpoint still answer item by item like the model it claims to
be? (SAFE "Response fingerprint" and App. B "Fingerprint Null Calibration and Drift").

- :func:`disagreement`: the share of shared, observed items on which two collections give
  different responses, for every query endpoint and reference collection (items matched by id).
- :func:`self_disagreement_null`: how much a model disagrees with *itself*. By default
  (``null="repeats"``, SAFE App. B) the null is every within-identity pair of repeated collections
  (two or more reference collections with the same identity); without repeats it is refused with
  a message saying what to collect, since no honest null exists. ``null="resampling"`` (on
  request only) is a parametric null: each reference collection is compared with ``resamples``
  re-collections drawn from the calibrated 2PL at its MAP ability. That null treats all of the IRT
  model's residual variation as response noise: on ChemBench its median self-disagreement is 34%
  (95th percentile 40%; 22 models, 50 resamples, seed 0) where SAFE's repeated collections give
  2.0-2.8%, so SAFE's 33.6% drift case would pass.
- :func:`fingerprint_items`: the audit's item set. SAFE matches endpoints "on 500 pre-selected
  items" and says no more of how they were selected; the rule here is stated: the ``n`` items on
  which two reference models picked at random most often disagree (``2 p (1 - p) * m / (m - 1)``
  over the ``m`` models that answered it, ``p`` their proportion correct; items every model answers
  alike never separate two models), with proportional per-``item_group`` quotas when the data carry
  item groups (:func:`bayesirt.safety.adaptive.quota_counts`), ties to the lowest item index.
- :func:`identify`: the nearest reference identity of each query, and a verdict against the
  threshold ``tau`` = the ``1 - alpha`` quantile of the null. Self-disagreement differs between
  endpoints (routing, sampling, the judge), so each identity with enough null values of its own
  (at least ``1 / alpha``: many repeats, or the resampling null) gets its own ``tau``, the others
  the pooled one (SAFE's alias pair agree with each other more closely than each agrees with
  itself, 8-9% against 10%). With a claimed identity,
  ``"changed"`` when the claim disagrees by more than ``tau``, ``"ambiguous"`` when another
  identity is also within ``tau`` (SAFE's alias pair: entries closer to each other than to
  themselves), else ``"consistent"``; without a claim, ``"identified"`` (one identity within
  ``tau``), ``"ambiguous"`` (several) or ``"unmatched"`` (none).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr
from scipy.optimize import minimize
from scipy.special import log_ndtr, ndtri

from bayesirt.data.responses import MISSING
from bayesirt.errors import DataError
from bayesirt.frequentist.mml import fit_mml
from bayesirt.models.response import response_probability
from bayesirt.safety.adaptive import quota_counts, score_test
from bayesirt.safety.personfit import check_responses, item_parameters
from bayesirt.safety.settings import NULLS
from bayesirt.utils.validation import check_choice, check_int, check_probability

__all__ = ["MIN_SHARED_ITEMS", "VERDICTS", "NULLS", "fingerprint_items", "disagreement", "self_disagreement_null", "identify", "resolvable_gap",
           "gap_at", "identity_labels"]

#: Fewest shared items a fingerprint comparison accepts.
MIN_SHARED_ITEMS = 10
#: Identities listed in the ``within`` column of :func:`identify` (nearest first).
MAX_LISTED = 10
#: Verdicts of :func:`identify`.
VERDICTS = ("consistent", "changed", "ambiguous", "identified", "unmatched")


def identity_labels(da: xr.DataArray, identity, what: str) -> np.ndarray:
    ids = np.asarray(da["model"].values).astype(str)
    if identity is None:
        return ids
    if isinstance(identity, dict):
        return np.array([str(identity.get(m, m)) for m in ids])
    labels = np.asarray(identity).astype(str)
    if labels.shape != ids.shape:
        raise DataError(f"{what} identity needs one label per model ({ids.size}); got shape {labels.shape}")
    return labels


def fingerprint_items(reference: xr.Dataset, n: int = 500) -> np.ndarray:
    """Ids of the ``n`` pre-selected fingerprint items of ``reference`` (module docstring: the items
    on which two reference models most often disagree, with per-``item_group`` quotas), in the
    order of the data; all items when there are no more than ``n``."""
    da = check_responses(reference)
    ids = np.asarray(da["item"].values)
    check_int(n, name="n", caller="fingerprint_items", low=1)  # the number of fingerprint items
    if n >= ids.size:
        return ids
    right, wrong = _indicators(da)
    m = right.sum(axis=1) + wrong.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = right.sum(axis=1) / m
        score = np.where(m >= 2, 2 * p * (1 - p) * m / np.maximum(m - 1, 1), 0.0)
    order = np.lexsort((np.arange(ids.size), -score))  # most disagreement first, ties to the lowest index
    if "item_group" not in da.coords or np.unique(da["item_group"].values.astype(str)).size < 2:
        return ids[np.sort(order[:n])]
    groups = np.asarray(da["item_group"].values).astype(str)
    take = np.zeros(ids.size, dtype=bool)
    for g, count in quota_counts(groups, int(n)).items():
        take[order[groups[order] == g][:count]] = True
    return ids[take]


def _indicators(da: xr.DataArray) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(da.values)
    return (y == 1).astype(float), (y == 0).astype(float)


def disagreement(reference: xr.Dataset, query: xr.Dataset) -> xr.Dataset:
    """Disagreement of every query endpoint with every reference collection.

    Parameters
    ----------
    reference, query : xarray.Dataset
        Response Datasets; items are matched by id and only items both answered count.

    Returns
    -------
    xarray.Dataset
        Dims (``query``, ``reference``): ``disagreement`` (share of shared observed items with
        different responses; NaN when none is shared) and ``shared`` (that number of items).
        Attr ``items``: the number of item ids the two Datasets have in common.
    """
    ref, qry = check_responses(reference), check_responses(query)
    common = np.intersect1d(ref["item"].values.astype(str), qry["item"].values.astype(str))
    if common.size < MIN_SHARED_ITEMS:
        raise DataError(f"reference and query share {common.size} item ids; a fingerprint needs at least "
                        f"{MIN_SHARED_ITEMS} (collect the query on the reference's items)")
    r1, r0 = _indicators(ref.sel(item=common))
    q1, q0 = _indicators(qry.sel(item=common))
    shared = (q1 + q0).T @ (r1 + r0)
    differ = q1.T @ r0 + q0.T @ r1
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(shared > 0, differ / shared, np.nan)
    dims = ("query", "reference")
    return xr.Dataset({"disagreement": (dims, rate), "shared": (dims, shared.astype(int))},
                      coords={"query": qry["model"].values, "reference": ref["model"].values},
                      attrs={"items": int(common.size)})


def self_disagreement_null(reference: xr.Dataset, *, identity=None, items: xr.Dataset | None = None,
                           null: str = "repeats", resamples: int = 50, seed: int = 0) -> xr.Dataset:
    """Null distribution of a model's disagreement with itself (module docstring).

    Parameters
    ----------
    reference : xarray.Dataset
        Reference collections (models); repeated collections share an identity.
    identity : sequence or dict, optional
        Identity of each reference model (a dict maps model id -> identity; unlisted models are
        their own identity). Default: every model is its own identity (no repeats).
    items : xarray.Dataset, optional
        Item parameters of the resampling null; default the regularized 2PL fitted by MAP-EM to
        ``reference``. Unused with repeats.
    null : {"repeats", "resampling"}, default "repeats"
        ``"repeats"``: the within-identity pairs of repeated collections; refused (DataError)
        when no identity has two collections. ``"resampling"``: the parametric null (module
        docstring), used only when asked for.
    resamples : int, default 50
        Re-collections per reference model for the resampling null.
    seed : int, default 0

    Returns
    -------
    xarray.Dataset
        Dim ``pair``: ``value`` (a self-disagreement), ``identity``, ``first``, ``second``
        (collections compared; ``second`` is ``"resample k"`` for the resampling null); attr
        ``source`` (``"repeats"`` or ``"resampling"``).
    """
    check_choice(null, NULLS, name="null", caller="self_disagreement_null")
    da = check_responses(reference)
    ident = identity_labels(da, identity, "reference")
    labels, counts = np.unique(ident, return_counts=True)
    if null == "repeats" and not (counts >= 2).any():
        raise DataError(
            "the fingerprint null needs repeated collections: no identity has two or more reference collections. "
            "Collect the same audit items from some endpoints twice or more with the same scoring pipeline and map "
            "the collections to one identity (identities CSV: model_id,identity), as SAFE App. B does; "
            "null='resampling' (--null resampling) gives a parametric null instead, which treats all IRT residual "
            "variation as noise and is far wider than real repeats (median 34% on ChemBench against SAFE's 2-3%)")
    if null == "repeats":
        rep = np.flatnonzero(np.isin(ident, labels[counts >= 2]))  # only collections with repeats
        sub = reference.isel(model=rep)
        table = disagreement(sub, sub)["disagreement"].values
        models, ident = np.asarray(sub["model"].values).astype(str), ident[rep]
        rows = [(table[i, j], ident[i], models[i], models[j]) for i in range(rep.size)
                for j in range(i + 1, rep.size) if ident[i] == ident[j]]
        value, who, first, second = (np.array(c) for c in zip(*rows))
        source = "repeats"
    else:
        check_int(resamples, name="resamples", caller="self_disagreement_null", low=1)
        if items is None:
            items = fit_mml(reference, "2pl", priors=True, se=False).items
        bank = item_parameters(items, da["item"].values)
        y = np.asarray(da.values)
        theta = score_test(y, bank.discrimination, bank.intercept, guessing=bank.guessing, slip=bank.slip,
                           method="map").theta
        p = response_probability(theta, *bank)
        obs = y != MISSING
        rng = np.random.default_rng(seed)
        values = np.stack([(((rng.random(p.shape) < p) != (y == 1)) & obs).sum(0) / obs.sum(0)
                           for _ in range(int(resamples))], axis=1)  # (models, resamples)
        models = np.asarray(da["model"].values).astype(str)
        value, who, first = values.ravel(), np.repeat(ident, resamples), np.repeat(models, resamples)
        second = np.tile([f"resample {k + 1}" for k in range(int(resamples))], models.size)
        source = "resampling"
    return xr.Dataset({"value": ("pair", value.astype(float)), "identity": ("pair", who.astype(str)),
                       "first": ("pair", first.astype(str)), "second": ("pair", second.astype(str))},
                      attrs={"source": source})


def identify(reference: xr.Dataset, query: xr.Dataset, null: xr.Dataset, *, reference_identity=None,
             claim=None, alpha: float = 0.05, per_identity: bool = True) -> pd.DataFrame:
    """Nearest reference identity and verdict for every query endpoint (module docstring).

    Parameters
    ----------
    reference, query : xarray.Dataset
    null : xarray.Dataset
        :func:`self_disagreement_null` of the reference.
    reference_identity : sequence or dict, optional
        As ``identity`` of :func:`self_disagreement_null`. An identity with several collections
        is compared by its mean disagreement over them.
    claim : sequence or dict, optional
        Claimed identity of each query (dict: query id -> identity). Default: the query's model
        id when it is a reference identity, else no claim.
    alpha : float, default 0.05
        Threshold ``tau`` = the ``1 - alpha`` quantile of the null.
    per_identity : bool, default True
        Each identity with at least ``1 / alpha`` null values of its own is judged against its own
        ``tau`` and p-value; the others, and all with False, against the pooled null.

    Returns
    -------
    pandas.DataFrame
        One row per query: ``query``, ``claim``, ``nearest`` (ties go to the claim),
        ``nearest_disagreement``, ``runner_up``, ``runner_up_disagreement``,
        ``claim_disagreement``, ``claim_p`` (share of the claim's null at least as large, with
        the +1 correction), ``threshold`` (the claim's ``tau``, else the nearest identity's),
        ``threshold_source`` (``"identity"`` or ``"pooled"``), ``n_within`` (identities within
        their ``tau``), ``within`` (the nearest ``MAX_LISTED`` of them, ``;``-joined),
        ``verdict``, ``shared_items``.
    """
    check_probability(alpha, name="alpha", caller="identify")
    if not isinstance(null, xr.Dataset) or "value" not in null or null.sizes.get("pair", 0) == 0:
        raise DataError("null must be a non-empty self_disagreement_null(...) Dataset; compute it from the "
                        "reference first")
    table = disagreement(reference, query)
    ref_ident = identity_labels(check_responses(reference), reference_identity, "reference")
    names = np.unique(ref_ident)
    onehot = (ref_ident[:, None] == names[None, :]).astype(float)
    d = table["disagreement"].values
    by_identity = np.nan_to_num(d) @ onehot / (np.isfinite(d) @ onehot)
    qids = np.asarray(table["query"].values).astype(str)
    claims = identity_labels(check_responses(query), claim, "query")
    finite = np.isfinite(null["value"].values)
    pooled = np.sort(null["value"].values[finite])
    nulls = {name: pooled for name in names}
    if per_identity:
        own = null["identity"].values.astype(str)[finite]
        values = null["value"].values[finite]
        nulls |= {name: np.sort(values[own == name]) for name in names
                  if (own == name).sum() >= int(np.ceil(1 / alpha))}
    taus = np.array([float(np.quantile(nulls[name], 1 - alpha, method="higher")) for name in names])
    rows = []
    for k, q in enumerate(qids):
        dist = by_identity[k]
        has_claim = claims[k] in set(names.tolist())
        first = names == claims[k]  # among equal disagreements the claim comes first, then by name
        order = np.lexsort((~first, np.where(np.isfinite(dist), dist, np.inf)))
        within = [names[i] for i in order if dist[i] <= taus[i]]
        judge = names.tolist().index(claims[k]) if has_claim else order[0]
        dc = float(dist[judge]) if has_claim else np.nan
        if has_claim:
            verdict = "changed" if not dc <= taus[judge] else "ambiguous" if len(within) > 1 else "consistent"
        else:
            verdict = "unmatched" if not within else "identified" if len(within) == 1 else "ambiguous"
        second = order[1] if names.size > 1 else None
        own_null = nulls[names[judge]]
        rows.append({"query": q, "claim": claims[k] if has_claim else "", "nearest": names[order[0]],
                     "nearest_disagreement": float(dist[order[0]]),
                     "runner_up": names[second] if second is not None else "",
                     "runner_up_disagreement": float(dist[second]) if second is not None else np.nan,
                     "claim_disagreement": dc,
                     "claim_p": (1 + np.sum(own_null >= dc)) / (1 + own_null.size) if has_claim else np.nan,
                     "threshold": taus[judge], "threshold_source": "pooled" if own_null is pooled else "identity",
                     "n_within": len(within),
                     "within": ";".join(within[:MAX_LISTED]) + (";..." if len(within) > MAX_LISTED else ""),
                     "verdict": verdict,
                     "shared_items": int(table["shared"].values[k].max())})
    return pd.DataFrame(rows)


def resolvable_gap(theta_full, theta_test, se_test, *, level: float = 0.95, bins: int = 8,
                   max_models: int = 1000, seed: int = 0) -> xr.Dataset:
    """The smallest ability gap a short test resolves, by ability, from pairwise confusability.

    A pair of cohort models is *distinguished* by the short test when its two short-test
    abilities differ by more than ``z * sqrt(se_i^2 + se_j^2)`` with ``z = Phi^-1((1 + level) /
    2)`` (non-overlapping ``level`` intervals), else *confusable*. Within ``bins`` equal-count
    bins of the pair's mean full-data ability, the share distinguished is modelled as
    ``Phi((g - gap) / spread)`` of the pair's full-data gap ``g`` (a probit fitted by maximum
    likelihood); ``gap``, the gap distinguished half of the time, is the resolvable gap there.
    It is about ``z * sqrt(2)`` short-test SEs, so a genuine model rarely moves by more. Pairs
    come from at most ``max_models`` models (a seeded subset; 1,000 give ~500,000 pairs).

    Parameters
    ----------
    theta_full, theta_test, se_test : array_like, shape (n_models,)
        Full-data abilities, short-test abilities and their standard errors (posterior SDs).

    Returns
    -------
    xarray.Dataset
        Dim ``bin``: ``center`` (median pair mean ability), ``lower``, ``upper``, ``gap``,
        ``spread``, ``pairs``, ``distinguished`` (share); attrs ``level``, ``models`` and
        ``resolved_pairs`` (share of all pairs the short test distinguishes).
    """
    check_probability(level, name="level", caller="resolvable_gap")
    full, test, se = (np.asarray(v, dtype=float) for v in (theta_full, theta_test, se_test))
    keep = np.isfinite(full) & np.isfinite(test) & np.isfinite(se) if full.shape == test.shape == se.shape else None
    if keep is None or keep.sum() < 3:
        raise DataError(f"resolvable_gap needs three equal-length arrays with at least 3 finite models; got "
                        f"shapes {full.shape}, {test.shape}, {se.shape}")
    check_int(bins, name="bins", caller="resolvable_gap", low=1)
    check_int(max_models, name="max_models", caller="resolvable_gap", low=3)
    full, test, se = full[keep], test[keep], se[keep]
    if full.size > max_models:
        pick = np.sort(np.random.default_rng(seed).choice(full.size, max_models, replace=False))
        full, test, se = full[pick], test[pick], se[pick]
    i, j = np.triu_indices(full.size, k=1)
    gap = np.abs(full[i] - full[j])
    hit = (np.abs(test[i] - test[j]) > ndtri((1 + level) / 2) * np.hypot(se[i], se[j])).astype(float)
    middle = (full[i] + full[j]) / 2
    edges = np.unique(np.quantile(middle, np.linspace(0, 1, bins + 1)))
    which = np.clip(np.searchsorted(edges, middle, side="right") - 1, 0, max(edges.size - 2, 0))
    rows = []
    for b in range(max(edges.size - 1, 1)):
        g, m = gap[which == b], hit[which == b]
        if not g.size:
            continue

        def nll(v, g=g, m=m):
            z = (g - v[0]) / np.exp(v[1])
            return -(m * log_ndtr(z) + (1 - m) * log_ndtr(-z)).sum()

        fit = minimize(nll, [np.median(g), np.log(g.std() + 1e-3)], method="L-BFGS-B",
                       bounds=[(0.0, g.max() + 1e-9), (np.log(1e-3), np.log(10.0))])
        rows.append((np.median(middle[which == b]), edges[b], edges[min(b + 1, edges.size - 1)], fit.x[0],
                     np.exp(fit.x[1]), g.size, m.mean()))
    c, lo, hi, g0, spread, n, rate = map(np.array, zip(*rows))
    table = xr.Dataset({"center": ("bin", c), "lower": ("bin", lo), "upper": ("bin", hi), "gap": ("bin", g0),
                        "spread": ("bin", spread), "pairs": ("bin", n), "distinguished": ("bin", rate)},
                       coords={"bin": np.arange(c.size)})
    table.attrs = {"level": level, "models": int(full.size), "resolved_pairs": float(hit.mean()),
                   "model": "Pr(short test distinguishes a pair | full-data gap g) = Phi((g - gap) / spread), "
                            "per bin of the pair's mean ability"}
    return table


def gap_at(table: xr.Dataset, theta) -> np.ndarray:
    """The resolvable gap of :func:`resolvable_gap` at abilities ``theta`` (linear between bin
    centres, constant beyond the outer ones)."""
    return np.interp(np.asarray(theta, dtype=float), table["center"].values, table["gap"].values)
