"""Model populations: caps, owner-disjoint folds and representatives (NT App. C.1).

Families and owners come with the data or from the model ids (:mod:`bayesirt.data.families`).
:func:`audit_population` turns a labelled response Dataset into the audit population: the
exclusions, the owner x family cap, the owner-disjoint two-fold split and one ranking
representative per owner x family. Family labels are used as given (any strings, case kept);
by default every label present except ``OTHER`` and ``AMBIGUOUS`` is audited.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.data.families import AMBIGUOUS, FAMILIES, OTHER
from bayesirt.data.responses import MISSING
from bayesirt.data.settings import POPULATION_SEED, REPRESENTATIVE_RULES
from bayesirt.errors import DataError
from bayesirt.utils.validation import check_choice, check_int, parameter_error

__all__ = ["POPULATION_SEED", "LINEAGE_TERMS", "REPRESENTATIVE_RULES", "audit_population"]

LINEAGE_TERMS: tuple[str, ...] = (
    "merge", "slerp", "franken", "lora", "qlora", "adapter", "distill", "hybrid",
    "fusion", "dpo", "ppo", "orpo", "kto", "abliterat", "uncensor",
)  # fmt: skip
"""Substrings (case-insensitive) of the conservative lineage filter (NT App. D.2, item 4)."""


_UNAUDITED = (OTHER, AMBIGUOUS)  # labels of the NT C.1 derivation that are never a family by default
_LISTED_LABELS = 20  # labels shown in a message; the rest are counted
_LINEAGE_PATTERN = "|".join(LINEAGE_TERMS)
_TIE_TOL = 1e-12  # exact-tie tolerance for split costs and median distances


def _population_table(responses: xr.Dataset) -> pd.DataFrame:
    """model_id, family, owner and accuracy over observed cells, one row per model."""
    if not isinstance(responses, xr.Dataset) or "responses" not in responses.data_vars:
        raise DataError("not a response Dataset: no 'responses' variable; build one with bayesirt.data.make_responses")
    if set(responses["responses"].dims) != {"item", "model"}:
        raise DataError(
            f"'responses' has dims {responses['responses'].dims}, expected ('item', 'model'); "
            "rebuild it with bayesirt.data.make_responses"
        )
    for coord in ("family", "owner"):
        if coord not in responses.coords or responses[coord].dims != ("model",):
            raise DataError(
                f"the response Dataset has no per-model {coord!r} coordinate; build it with make_responses "
                f"(which derives it from the model ids) or add it with ds.assign_coords({coord}=('model', labels))"
            )
    y = np.asarray(responses["responses"].transpose("item", "model").values)
    ids = responses["model_id"] if "model_id" in responses.coords else responses["model"]
    n_observed = np.count_nonzero(y != MISSING, axis=0)
    n_correct = np.count_nonzero(y == 1, axis=0)
    if not n_observed.all():
        empty = str(np.asarray(ids.values)[np.argmin(n_observed)])
        raise DataError(
            f"model {empty!r} has no observed responses; drop it (make_responses(..., drop_empty=True)) first"
        )
    accuracy = n_correct / n_observed
    return pd.DataFrame(
        {
            "model_id": np.asarray(ids.values).astype(str),
            "family": np.asarray(responses["family"].values).astype(str),
            "owner": np.asarray(responses["owner"].values).astype(str),
            "accuracy": accuracy,
        }
    )


def _family_counts(family: np.ndarray, status: np.ndarray, family_set: list[str]) -> pd.Series:
    """Number of still-retained models per audited family."""
    return pd.Series(family[status == "retained"]).value_counts().reindex(family_set, fill_value=0)


def _models(n: int) -> str:
    return f"{n:,} model{'' if n == 1 else 's'}"


def _label_counts(family: np.ndarray) -> pd.Series:
    """Models per family label in the data, largest first (ties by label)."""
    counts = pd.Series(family).value_counts()
    return counts.iloc[np.lexsort((counts.index.to_numpy(dtype=str), -counts.to_numpy()))]


def _listing(items: list[str], noun: str) -> str:
    """At most ``_LISTED_LABELS`` items joined by ', ', the rest counted."""
    shown = ", ".join(items[:_LISTED_LABELS])
    rest = len(items) - _LISTED_LABELS
    return shown + (f", and {rest:,} more {noun}" if rest > 0 else "")


def _default_families(family: np.ndarray) -> list[str]:
    """The audited labels by default: every label present but ``OTHER`` and ``AMBIGUOUS``; the NT
    families first in the paper's order (so NT-labelled data give the order of the NT default),
    then the others in order of first appearance."""
    present = [f for f in pd.unique(family) if f not in _UNAUDITED]
    return [f for f in FAMILIES if f in present] + [f for f in present if f not in FAMILIES]


def _unknown_families(unknown: list[str], family: np.ndarray) -> DataError:
    """The message when an explicit ``families`` names a label no model has."""
    counts = _label_counts(family)
    present = _listing([f"{f!r} ({n:,})" for f, n in counts.items()], "labels")
    which = ", ".join(map(repr, unknown))
    return DataError(
        f"families lists {which}, which no model of the data has (family labels present, with models: {present}); "
        "name labels from this list (case matters), leave families unset to audit every label, or derive the "
        "labels from the model ids by the NT C.1 rule (--derive-families on the command line)"
    )


def _too_few_families(counts: pd.DataFrame, status: np.ndarray, family: np.ndarray, min_family_size: int) -> DataError:
    """The message when fewer than 2 families survive: every label seen with its model counts, each
    audited family's fate, and what to change.

    ``counts`` has one row per audited family and columns ``data`` (models with that label),
    ``lineage`` (left after the lineage filter) and ``capped`` (left after the owner cap).
    """
    kept = counts.index[counts["capped"] >= min_family_size]
    dropped = [
        f"{f}, all {_models(row.data)} removed by the lineage filter"
        if row.lineage == 0
        else f"{f}, {_models(row.capped)} after the owner cap, below min_family_size={min_family_size}"
        for f, row in counts[(counts["data"] > 0) & (counts["capped"] < min_family_size)].iterrows()
    ]
    seen = []
    for f, n in _label_counts(family).items():
        if f in counts.index:
            seen.append(f"{f} {n:,} / {counts.at[f, 'capped']:,}")
        else:
            why = "not audited" if f in _UNAUDITED else "not in families"
            seen.append(f"{f} {n:,} ({why})")
    return DataError(
        f"only {len(kept)} famil{'y' if len(kept) == 1 else 'ies'} left after exclusions "
        f"(family labels seen, models in the data / after the owner cap: {_listing(seen, 'labels') or 'none'}; "
        f"kept: {'; '.join(f'{f}, {_models(counts.at[f, "capped"])}' for f in kept) or 'none'}; "
        f"dropped: {'; '.join(dropped) or 'none'}; "
        f"unused: {_models(np.sum(status == 'no family'))} without an audited family, "
        f"{_models(np.sum(status == 'ambiguous family'))} ambiguous); "
        "the audit compares at least 2 families: lower min_family_size (--min-family-size), name the labels "
        "to audit with families (--families), or, if the labels should come from the model ids, derive them "
        "by the NT C.1 rule (--derive-families), or add models of more families"
    )


def _owner_split(
    table: pd.DataFrame, families: list[str], order_rng: np.random.Generator, tie_rng: np.random.Generator
) -> pd.Series:
    """Greedy owner-disjoint two-fold split of the retained rows of ``table``; fold per owner."""
    owner_code, owners = pd.factorize(table["owner"])  # owners in order of first appearance
    family_code = pd.Categorical(table["family"], categories=families).codes
    n_owners, n_fam = len(owners), len(families)
    flat = owner_code * n_fam + family_code
    counts = np.bincount(flat, minlength=n_owners * n_fam).reshape(n_owners, n_fam).astype(float)
    sums = np.bincount(flat, weights=table["residual"], minlength=n_owners * n_fam).reshape(n_owners, n_fam)
    n_family = counts.sum(axis=0)
    scale = np.bincount(family_code, weights=table["residual"].abs(), minlength=n_fam)
    inv_scale = np.divide(1.0, scale, out=np.zeros(n_fam), where=scale > _TIE_TOL)
    order = np.lexsort((order_rng.random(n_owners), -counts.sum(axis=1)))
    count_gap = np.zeros(n_fam)  # n_f0 - n_f1 over the owners assigned so far
    resid_gap = np.zeros(n_fam)  # R_f0 - R_f1
    fold = np.empty(n_owners, dtype=np.int64)
    for o in order:
        c, s = counts[o], sums[o]
        cost0 = np.abs(count_gap + c).dot(1.0 / n_family) + np.abs(resid_gap + s).dot(inv_scale)
        cost1 = np.abs(count_gap - c).dot(1.0 / n_family) + np.abs(resid_gap - s).dot(inv_scale)
        half = int(tie_rng.integers(2)) if abs(cost0 - cost1) <= _TIE_TOL else int(cost1 < cost0)
        fold[o] = half
        sign = 1.0 if half == 0 else -1.0
        count_gap += sign * c
        resid_gap += sign * s
    return pd.Series(fold, index=owners)


def _check_halves(table: pd.DataFrame, families: list[str]) -> None:
    """Every family in both halves; at least 2 owners per half."""
    per_half = table.groupby(["family", "fold"]).size().unstack(fill_value=0).reindex(columns=[0, 1], fill_value=0)
    for f in families:
        for half in (0, 1):
            if per_half.loc[f, half] == 0:
                n_own = table.loc[table["family"] == f, "owner"].nunique()
                raise DataError(
                    f"owner half {half} has no {f} models after the owner-disjoint split ({f} has "
                    f"{per_half.loc[f].sum()} retained models from {n_own} owner(s)); every family needs models "
                    f"in both halves: add {f} models from more owners or leave {f} out of families"
                )
    owners_per_half = table.groupby("fold")["owner"].nunique().reindex([0, 1], fill_value=0)
    for half in (0, 1):
        if owners_per_half[half] < 2:
            raise DataError(
                f"owner half {half} has only {owners_per_half[half]} owner after the owner-disjoint split; each half "
                "needs at least 2 owners for nested owner-held-out validation: add models from more owners"
            )


def _representatives(table: pd.DataFrame, rule: str) -> pd.Index:
    """Row labels of the representative of each (owner, family) among the rows of ``table``."""
    keys = [table["owner"], table["family"]]
    if rule == "median":
        distance = (table["accuracy"] - table.groupby(keys)["accuracy"].transform("median")).abs()
        closest = distance <= distance.groupby(keys).transform("min") + _TIE_TOL
        table = table[closest]
    ordered = table.sort_values("model_id", kind="stable")
    return ordered.drop_duplicates(["owner", "family"]).index


def audit_population(
    responses: xr.Dataset,
    *,
    owner_cap: int = 5,
    min_family_size: int = 20,
    seed: int = POPULATION_SEED,
    lineage_filter: bool = False,
    representative: str = "median",
    families: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Build the audit population of NT App. C.1: exclusions, cap, owner-disjoint folds, representatives.

    Steps, in order (a model's ``status`` is the first exclusion it meets):

    1. ``"ambiguous family"``: family label ``AMBIGUOUS``; ``"no family"``: any other label not
       audited (``OTHER`` in particular, and, with an explicit ``families``, every label not in it).
    2. ``"lineage filter"`` (only with ``lineage_filter=True``, NT D.2 item 4): the model id
       contains, case-insensitively, one of ``LINEAGE_TERMS``.
    3. ``"over owner cap"``: an owner with more than ``owner_cap`` remaining checkpoints in one
       family keeps ``owner_cap`` of them, those with the smallest uniform random keys drawn
       once per remaining model in Dataset order.
    4. ``"family below minimum"``: every remaining model of a family with fewer than
       ``min_family_size`` remaining models. The rest are ``"retained"``.

    Owner-disjoint split (two folds). With ``r_m = A_m - mean(A over the retained models of
    family f(m))`` for full-benchmark accuracy ``A_m``, owners are ordered by decreasing
    number of retained checkpoints (ties by uniform random keys drawn per owner in order of
    first appearance) and each whole owner goes to
    the half ``h`` in {0, 1} minimising, after its assignment and over the owners assigned so far,

        cost = sum_f |n_f0 - n_f1| / n_f + sum_f |R_f0 - R_f1| / S_f,

    where ``n_fh`` counts the retained checkpoints of family ``f`` in half ``h``, ``n_f`` is
    the family total, ``R_fh`` is the sum of ``r_m`` over those checkpoints and
    ``S_f = sum_{m in f} |r_m|``; a family with ``S_f <= 1e-12`` (all its accuracies equal)
    contributes no residual term (``max(S_f, tiny)`` with ``r_m = 0``). The paper names the
    two imbalances but not their normalisation; this is our reading. Costs within ``1e-12``
    of each other are a tie, resolved by a fair random draw.

    Representatives: per (owner, family), the retained checkpoint whose accuracy is closest to
    the pair's median accuracy (distances within ``1e-12`` tie), ties broken by the smaller
    model id; with ``representative="lexicographic"`` (NT D.2 item 3, score-blind) simply the
    smallest model id.

    Parameters
    ----------
    responses : xarray.Dataset
        A response Dataset (:func:`~bayesirt.data.make_responses`) with per-model ``family``
        and ``owner`` coordinates: derived from the model ids by default, or supplied.
    owner_cap : int
        Most checkpoints kept per owner and family. Default 5 (NT C.1); 1 and 3 are the D.2
        perturbations.
    min_family_size : int
        Fewest retained models a family needs. Default 20 (NT primary); D.2 uses 15.
    seed : int
        Population-selection seed. Default ``POPULATION_SEED``, the frozen seed. The cap keys,
        the owner tie keys and the cost-tie draws come from three independent streams spawned
        from it, so the result is deterministic given the seed and the Dataset's model order.
    lineage_filter : bool
        Apply the conservative lineage filter (NT D.2 item 4). Default False.
    representative : {"median", "lexicographic"}
        Representative rule. Default ``"median"`` (NT 3.1).
    families : sequence of str, optional
        Family labels audited, exactly as they appear in the Dataset's ``family`` coordinate
        (any strings; case matters). Default None: every label present except ``OTHER`` and
        ``AMBIGUOUS`` (what the NT C.1 derivation gives ids matching none / several patterns),
        each then kept if it has ``min_family_size`` models after the owner cap; labels the data
        supplied are used as given, and only data without labels carry the labels derived from
        the model ids (:func:`~bayesirt.data.make_responses`). A sequence restricts the audit to
        those labels (e.g. a subset to omit a family, NT D.2 item 5); each must be present.

    Returns
    -------
    pandas.DataFrame
        One row per model in Dataset order with columns ``model_id``, ``family``, ``owner``,
        ``accuracy`` (proportion correct over observed items), ``status`` (see above), ``fold``
        (0 or 1 for retained models, -1 otherwise) and ``representative`` (bool).

    Raises
    ------
    DataError
        A bad argument; a Dataset without ``responses``, ``family`` or ``owner``; a label in
        ``families`` that no model has; fewer than 2 families or fewer than 4 owners retained; a
        half missing a family or holding fewer than 2 owners.

    Examples
    --------
    >>> from bayesirt.data import simulate_dif_benchmark
    >>> ds, _ = simulate_dif_benchmark(n_owners=12, n_items=50, seed=1)
    >>> pop = audit_population(ds, min_family_size=5)
    >>> pop.groupby("fold")["owner"].nunique().to_dict()
    {0: 6, 1: 6}
    """
    check_int(owner_cap, name="owner_cap", caller="audit_population", low=1)
    check_int(min_family_size, name="min_family_size", caller="audit_population", low=1)
    check_int(seed, name="seed", caller="audit_population", low=0)
    check_choice(representative, REPRESENTATIVE_RULES, name="representative", caller="audit_population")
    if families is not None:
        family_set = [] if isinstance(families, str) else list(families)
        if not family_set or len(set(family_set)) != len(family_set) or not all(isinstance(f, str) for f in family_set):
            raise parameter_error("families", "audit_population", "None or a non-empty sequence of distinct family "
                                  "labels", families)
    cap_rng, order_rng, tie_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3))

    table = _population_table(responses)
    family = table["family"].to_numpy()
    if families is None:
        family_set = _default_families(family)
    else:
        present = set(family)
        unknown = [f for f in family_set if f not in present]
        if unknown:
            raise _unknown_families(unknown, family)
    status = np.where(np.isin(family, family_set), "retained", "no family").astype(object)
    status[(family == AMBIGUOUS) & (status == "no family")] = "ambiguous family"
    counts = pd.DataFrame({"data": _family_counts(family, status, family_set)})
    if lineage_filter:
        hit = table["model_id"].str.contains(_LINEAGE_PATTERN, case=False, regex=True).to_numpy()
        status[(status == "retained") & hit] = "lineage filter"
    counts["lineage"] = _family_counts(family, status, family_set)

    rows = np.flatnonzero(status == "retained")
    keys = pd.Series(cap_rng.random(len(rows)))
    rank = keys.groupby([table["owner"].to_numpy()[rows], family[rows]]).rank(method="first").to_numpy()
    status[rows[rank > owner_cap]] = "over owner cap"
    counts["capped"] = _family_counts(family, status, family_set)

    kept_families = list(counts.index[counts["capped"] >= min_family_size])
    status[(status == "retained") & ~np.isin(family, kept_families)] = "family below minimum"
    if len(kept_families) < 2:
        raise _too_few_families(counts, status, family, min_family_size)

    retained = table[status == "retained"].copy()
    retained["residual"] = retained["accuracy"] - retained.groupby("family")["accuracy"].transform("mean")
    n_owners = retained["owner"].nunique()
    if n_owners < 4:
        raise DataError(
            f"only {n_owners} owner(s) in the retained population; the owner-disjoint split needs at least 4 "
            "(2 per half, so nested validation can hold one out): add models from more owners or lower min_family_size"
        )
    retained["fold"] = retained["owner"].map(_owner_split(retained, kept_families, order_rng, tie_rng))
    _check_halves(retained, kept_families)

    out = table.assign(status=status, fold=-1, representative=False)
    out.loc[retained.index, "fold"] = retained["fold"]
    out.loc[_representatives(retained, representative), "representative"] = True
    return out
