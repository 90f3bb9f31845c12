"""The blinded content audit of the NT paper (sections 4.5 and 5.4, App. B.8 and D.4).

Two annotators label the same matched items (stable high-DIF items and exact-cell controls) on
ten binary and three ordinal content axes. This module computes, from one long label table:

- inter-annotator reliability: Cohen's kappa per binary axis, Spearman's rho per ordinal axis,
  their medians and the frozen criterion of NT eq. 73;
- per annotator, the paired prevalence differences (high-DIF minus control, NT eqs. 74-75) with
  exact two-sided McNemar p-values, Benjamini-Hochberg q-values over the ten binary axes, the
  per-benchmark directions and the four-part dual-annotator confirmatory rule;
- per annotator, paired Wilcoxon signed-rank tests of the ordinal axes (BH over those axes);
- the exploratory benchmark-stratified label-permutation test of the stable advantaged family.

The label table has one row per annotator and item: ``annotator, blinded_id, benchmark,
pair_id, group, discovery_advantaged_family, validation_advantaged_family`` and the axes in
:data:`BINARY_AXES` and :data:`ORDINAL_AXES` (other columns, e.g. ``model``, are carried along).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from bayesirt.errors import DataError

__all__ = ["BINARY_AXES", "ORDINAL_AXES", "HIGH", "CONTROL", "ContentAudit", "read_labels", "validate_labels",
           "cohen_kappa", "mcnemar_exact", "annotator_agreement", "paired_binary_tests", "benchmark_directions",
           "confirmatory_rule", "paired_ordinal_tests", "family_permutation_tests", "content_audit"]

BINARY_AXES = ("quantitative_symbolic", "formal_rule_reasoning", "factual_domain_knowledge", "contextual_reading",
               "commonsense_narrative", "spatial_temporal", "linguistic_wordplay", "negation_exception",
               "code_structured_representation", "distractor_discrimination")
ORDINAL_AXES = ("reasoning_steps", "context_burden", "ambiguity_degree")
HIGH, CONTROL = "stable_high_dif", "matched_control"
_META = ("annotator", "blinded_id", "benchmark", "pair_id", "group", "discovery_advantaged_family",
         "validation_advantaged_family")
_SHARED = _META[2:]  # item metadata both annotators must agree on
_RELIABILITY = {"median_kappa": 0.45, "median_spearman": 0.50}  # NT eq. 73


@dataclass(frozen=True)
class ContentAudit:
    """Tables of :func:`content_audit`; ``summary`` holds the headline numbers (JSON-ready)."""

    agreement: pd.DataFrame
    binary: pd.DataFrame
    directions: pd.DataFrame
    confirmatory: pd.DataFrame
    ordinal: pd.DataFrame
    family: pd.DataFrame
    summary: dict


def read_labels(path: str | os.PathLike) -> pd.DataFrame:
    """Read and validate a content-audit label CSV (see :func:`validate_labels`)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"label file {path} not found; pass the path of the content-audit labels CSV")
    return validate_labels(pd.read_csv(path, dtype={c: str for c in _META}))


def validate_labels(labels: pd.DataFrame) -> pd.DataFrame:
    """Check the long label table and return it with integer axes, rows in their original order.

    Requires exactly two annotators labelling the same items with the same metadata, every
    ``pair_id`` holding one ``stable_high_dif`` and one ``matched_control`` item of one benchmark,
    binary axes in {0, 1} and ordinal axes in {0, 1, 2, 3}.
    """
    missing = [c for c in (*_META, *BINARY_AXES, *ORDINAL_AXES) if c not in labels.columns]
    if missing:
        raise DataError(f"labels lack column(s) {', '.join(missing)}; give the NT content-audit label table")
    columns = [*_META, *BINARY_AXES, *ORDINAL_AXES]
    if labels[columns].isna().any().any():
        bad = [c for c in columns if labels[c].isna().any()]
        raise DataError(f"labels have missing values in {', '.join(bad)}; fill or drop those rows")
    annotators = sorted(labels["annotator"].astype(str).unique())
    if len(annotators) != 2:
        raise DataError(f"labels have {len(annotators)} annotator(s) ({', '.join(annotators)}); the content audit "
                        "compares exactly two, so keep the rows of two annotators")
    for axes, allowed in ((BINARY_AXES, {0, 1}), (ORDINAL_AXES, {0, 1, 2, 3})):
        for axis in axes:
            values = pd.to_numeric(labels[axis], errors="coerce")
            if values.isna().any() or not set(values.unique()) <= allowed:
                raise DataError(f"axis {axis} must hold only {sorted(allowed)}; recode its labels")
    labels = labels.astype({a: int for a in (*BINARY_AXES, *ORDINAL_AXES)} | {c: str for c in _META})
    if labels.duplicated(["annotator", "blinded_id"]).any():
        raise DataError("an annotator labels a blinded_id twice; keep one row per annotator and item")
    first, second = (labels[labels["annotator"] == a].set_index("blinded_id")[list(_SHARED)].sort_index()
                     for a in annotators)
    if not first.index.equals(second.index) or not first.equals(second):
        raise DataError(f"annotators {annotators[0]} and {annotators[1]} label different items or disagree on "
                        f"their metadata ({', '.join(_SHARED)}); give both the same items")
    if not set(first["group"]) <= {HIGH, CONTROL}:
        raise DataError(f"group must be {HIGH!r} or {CONTROL!r}; found {sorted(set(first['group']))}")
    pairs = first.groupby("pair_id").agg(n=("group", "size"), high=("group", lambda g: (g == HIGH).sum()),
                                         benchmarks=("benchmark", "nunique"))
    if not ((pairs["n"] == 2) & (pairs["high"] == 1) & (pairs["benchmarks"] == 1)).all():
        raise DataError("every pair_id must hold one stable_high_dif and one matched_control item of the same "
                        "benchmark; fix the pair_id column")
    return labels


def cohen_kappa(x, y) -> float:
    """Cohen's (1960) kappa of two binary label vectors; NaN when both are the same constant label.

    ``(p_o - p_e) / (1 - p_e)`` with ``p_e`` from the two annotators' own marginals, so it matches
    ``sklearn.metrics.cohen_kappa_score`` on binary labels. It is undefined exactly when
    ``p_e = 1``, that is when both annotators give every item the same single label.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    observed = np.mean(x == y)
    expected = x.mean() * y.mean() + (1 - x.mean()) * (1 - y.mean())
    return float("nan") if expected >= 1.0 else float((observed - expected) / (1.0 - expected))


def mcnemar_exact(high_only: int, control_only: int) -> float:
    """Exact two-sided McNemar p-value from the discordant-pair counts (McNemar, 1947).

    The exact binomial test of ``high_only`` successes in ``high_only + control_only`` trials at
    probability 1/2 (:func:`scipy.stats.binomtest`); 1.0 when there is no discordant pair.
    """
    n = int(high_only) + int(control_only)
    return 1.0 if n == 0 else float(stats.binomtest(int(high_only), n, 0.5).pvalue)


def _annotators(labels: pd.DataFrame) -> list[str]:
    return sorted(labels["annotator"].unique())


def _items(labels: pd.DataFrame, annotator: str) -> pd.DataFrame:
    return labels[labels["annotator"] == annotator].set_index("blinded_id").sort_index()


def _pairs(labels: pd.DataFrame, annotator: str, axes) -> tuple[pd.DataFrame, pd.Series]:
    """Per-pair differences ``X_high - X_control`` on ``axes`` (sorted by pair_id) and the benchmarks."""
    rows = labels[labels["annotator"] == annotator]
    high = rows[rows["group"] == HIGH].set_index("pair_id").sort_index()
    control = rows[rows["group"] == CONTROL].set_index("pair_id").sort_index()
    return high[list(axes)] - control[list(axes)], high["benchmark"]


def annotator_agreement(labels: pd.DataFrame) -> pd.DataFrame:
    """Kappa per binary axis and Spearman's rho per ordinal axis, items aligned by ``blinded_id``,
    with each annotator's mean label (the prevalence, on binary axes).

    Rho is NaN (not an error) when an annotator gives one ordinal axis a constant label.
    """
    names = _annotators(labels)
    first, second = (_items(labels, a) for a in names)
    rows = []
    for a in (*BINARY_AXES, *ORDINAL_AXES):
        if a in BINARY_AXES:
            kind, statistic, value = "binary", "cohen_kappa", cohen_kappa(first[a], second[a])
        else:
            constant = first[a].nunique() < 2 or second[a].nunique() < 2
            rho = float("nan") if constant else float(stats.spearmanr(first[a], second[a]).statistic)
            kind, statistic, value = "ordinal", "spearman_rho", rho
        rows.append({"axis": a, "kind": kind, "statistic": statistic, "value": value,
                     f"mean_{names[0]}": first[a].mean(), f"mean_{names[1]}": second[a].mean()})
    return pd.DataFrame(rows)


def paired_binary_tests(labels: pd.DataFrame) -> pd.DataFrame:
    """Per annotator and binary axis: prevalences, pooled paired difference, McNemar p, BH q.

    ``difference`` is the mean of ``d_pj`` over all pairs (NT eq. 75: the 250 pairs, concordant
    ones included); q is Benjamini-Hochberg over the ten binary axes of one annotator
    (:func:`scipy.stats.false_discovery_control`).
    """
    rows = []
    for annotator in _annotators(labels):
        d, _ = _pairs(labels, annotator, BINARY_AXES)
        own = labels[labels["annotator"] == annotator]
        prevalence = own.groupby("group")[list(BINARY_AXES)].mean()
        block = pd.DataFrame({"annotator": annotator, "axis": list(BINARY_AXES), "n_pairs": len(d),
                              "high_prevalence": prevalence.loc[HIGH].to_numpy(),
                              "control_prevalence": prevalence.loc[CONTROL].to_numpy(),
                              "difference": d.mean().to_numpy(), "high_only": (d == 1).sum().to_numpy(),
                              "control_only": (d == -1).sum().to_numpy()})
        block["p"] = [mcnemar_exact(h, c) for h, c in zip(block["high_only"], block["control_only"])]
        block["q"] = stats.false_discovery_control(block["p"].to_numpy())
        rows.append(block)
    return pd.concat(rows, ignore_index=True)


def benchmark_directions(labels: pd.DataFrame) -> pd.DataFrame:
    """Per annotator, binary axis and benchmark: the paired difference and its sign (-1, 0, +1)."""
    rows = []
    for annotator in _annotators(labels):
        d, benchmark = _pairs(labels, annotator, BINARY_AXES)
        means = d.groupby(benchmark).mean()
        for bench, row in means.iterrows():
            rows += [{"annotator": annotator, "axis": a, "benchmark": bench, "difference": row[a],
                      "direction": int(np.sign(row[a]))} for a in BINARY_AXES]
    return pd.DataFrame(rows)


def confirmatory_rule(binary: pd.DataFrame, directions: pd.DataFrame, *, q_max: float = 0.05,
                      min_difference: float = 0.08, min_benchmarks: int = 3) -> pd.DataFrame:
    """The four-part dual-annotator rule of NT D.4, one row per binary axis.

    An axis passes when, for both annotators, (1) the pooled difference has the same nonzero
    direction, (2) BH q <= ``q_max``, (3) |difference| >= ``min_difference`` and (4) the pooled
    direction occurs in at least ``min_benchmarks`` benchmarks. Defaults are the frozen values.
    """
    pooled = binary.set_index(["axis", "annotator"])
    sign = np.sign(pooled["difference"])
    agree = directions.join(sign.rename("pooled"), on=["axis", "annotator"])
    same = (agree["direction"] == agree["pooled"]) & (agree["pooled"] != 0)
    n_same = same.groupby([agree["axis"], agree["annotator"]]).sum().reindex(pooled.index, fill_value=0)
    per = pd.DataFrame({"direction": sign, "q_ok": pooled["q"] <= q_max,
                        "size_ok": pooled["difference"].abs() >= min_difference - 1e-12,
                        "benchmarks_same_direction": n_same}).unstack("annotator")
    out = pd.DataFrame(index=pd.Index(BINARY_AXES, name="axis"))
    out["same_direction"] = (per["direction"].nunique(axis=1) == 1) & (per["direction"].iloc[:, 0] != 0)
    out["q_le_max"] = per["q_ok"].all(axis=1)
    out["size_ge_min"] = per["size_ok"].all(axis=1)
    out["benchmarks_ge_min"] = (per["benchmarks_same_direction"] >= min_benchmarks).all(axis=1)
    out["passes"] = out.all(axis=1)
    for annotator in per["direction"].columns:
        out[f"benchmarks_{annotator}"] = per["benchmarks_same_direction"][annotator].astype(int)
    return out.reset_index()


def paired_ordinal_tests(labels: pd.DataFrame) -> pd.DataFrame:
    """Per annotator and ordinal axis: paired Wilcoxon signed-rank test, BH over the ordinal axes.

    SciPy's defaults (two-sided, ``zero_method="wilcox"``: tied pairs dropped, ``method="auto"``);
    p is 1.0 when every pair is tied. Reported, not part of the confirmatory rule.
    """
    rows = []
    for annotator in _annotators(labels):
        d, _ = _pairs(labels, annotator, ORDINAL_AXES)
        block = pd.DataFrame({"annotator": annotator, "axis": list(ORDINAL_AXES), "n_pairs": len(d),
                              "mean_difference": d.mean().to_numpy(), "n_nonzero": (d != 0).sum().to_numpy()})
        tests = [stats.wilcoxon(d[a]) if (d[a] != 0).any() else None for a in ORDINAL_AXES]
        block["statistic"] = [np.nan if t is None else float(t.statistic) for t in tests]
        block["p"] = [1.0 if t is None else float(t.pvalue) for t in tests]
        block["q"] = stats.false_discovery_control(block["p"].to_numpy())
        rows.append(block)
    return pd.concat(rows, ignore_index=True)


def _stratum_excess(codes: np.ndarray, x: np.ndarray, n_families: int) -> tuple[np.ndarray, np.ndarray]:
    """Per family and axis, the labelled-1 count minus its expectation ``n_f * p`` in one benchmark,
    and the variance term ``n_f * p * (1 - p)``. ``codes`` may carry leading permutation dims."""
    size = np.bincount(codes[(0,) * (codes.ndim - 1)], minlength=n_families).astype(float)
    prevalence = x.mean(axis=0)
    ones = np.einsum("...nf,nj->...fj", np.eye(n_families)[codes], x)
    return ones - size[:, None] * prevalence, size[:, None] * prevalence * (1.0 - prevalence)


def family_permutation_tests(labels: pd.DataFrame, *, permutations: int = 10_000, seed: int = 0) -> pd.DataFrame:
    """Exploratory association of the stable advantaged family with each binary axis (NT D.4).

    Items: the ``stable_high_dif`` items whose ``discovery_advantaged_family`` equals
    ``validation_advantaged_family``. Statistic (D.4 does not name one), per axis: a
    Mantel-Haenszel-type sum over families of the squared benchmark-pooled excess,
    ``sum_f (sum_b (O_bf - n_bf p_b))**2 / sum_b n_bf p_b (1 - p_b)``, with ``O_bf`` the family's
    items labelled 1 in benchmark ``b`` and ``p_b`` the benchmark's prevalence; it is large when a
    family's items lean the same way across benchmarks (families with a zero denominator add 0).
    Null: family labels permuted within benchmark, ``permutations`` times; benchmarks in sorted
    order, items in file order, drawn from ``numpy.random.default_rng(seed)`` afresh for each
    annotator, so both annotators and all axes share the same permutations.
    p = (1 + #{T* >= T}) / (1 + permutations); q is BH over the ten axes of one annotator.
    """
    if int(permutations) < 1:
        raise DataError(f"permutations must be a positive integer, not {permutations}; use e.g. 10000")
    rows = []
    for annotator in _annotators(labels):
        own = labels[labels["annotator"] == annotator]
        stable = own[(own["group"] == HIGH)
                     & (own["discovery_advantaged_family"] == own["validation_advantaged_family"])]
        families = sorted(stable["discovery_advantaged_family"].unique())
        rng = np.random.default_rng(seed)
        variance = np.zeros((len(families), len(BINARY_AXES)))
        observed, null = np.zeros_like(variance), np.zeros((int(permutations), *variance.shape))
        for _, items in stable.groupby("benchmark", sort=True):
            codes = pd.Categorical(items["discovery_advantaged_family"], categories=families).codes.astype(int)
            x = items[list(BINARY_AXES)].to_numpy(float)
            order = rng.permuted(np.tile(np.arange(codes.size), (int(permutations), 1)), axis=1)
            excess, var = _stratum_excess(codes, x, len(families))
            observed += excess
            variance += var
            null += _stratum_excess(codes[order], x, len(families))[0]
        scale = np.where(variance > 0, 1.0 / np.where(variance > 0, variance, 1.0), 0.0)
        statistic, null = (observed ** 2 * scale).sum(axis=0), (null ** 2 * scale).sum(axis=1)
        exceed = (null >= statistic - 1e-9 * np.maximum(1.0, statistic)).sum(axis=0)
        p = (1.0 + exceed) / (1.0 + int(permutations))
        rows.append(pd.DataFrame({"annotator": annotator, "axis": list(BINARY_AXES), "n_items": len(stable),
                                  "n_families": len(families), "statistic": statistic, "p": p,
                                  "q": stats.false_discovery_control(p)}))
    return pd.concat(rows, ignore_index=True)


def _median(values: pd.Series) -> float:
    values = values.dropna()
    return float(values.median()) if len(values) else float("nan")


def content_audit(labels: pd.DataFrame, *, permutations: int = 10_000, seed: int = 0) -> ContentAudit:
    """Every statistic of the NT content audit on a label table (validated first)."""
    labels = validate_labels(labels)
    agreement = annotator_agreement(labels)
    binary, directions = paired_binary_tests(labels), benchmark_directions(labels)
    confirmatory = confirmatory_rule(binary, directions)
    ordinal = paired_ordinal_tests(labels)
    family = family_permutation_tests(labels, permutations=permutations, seed=seed)
    kappa = agreement.loc[agreement["kind"] == "binary", "value"]
    rho = agreement.loc[agreement["kind"] == "ordinal", "value"]
    reliability = {"median_kappa": _median(kappa), "n_kappa_axes": int(kappa.notna().sum()),
                   "median_spearman": _median(rho), "n_spearman_axes": int(rho.notna().sum()),
                   "criteria": _RELIABILITY}
    reliability["passes"] = bool(reliability["median_kappa"] >= _RELIABILITY["median_kappa"]
                                 and reliability["median_spearman"] >= _RELIABILITY["median_spearman"])
    largest = {a: block.loc[block["difference"].abs().idxmax(), ["axis", "difference", "p", "q"]].to_dict()
               for a, block in binary.groupby("annotator")}
    own = labels[labels["annotator"] == _annotators(labels)[0]]
    high = own[own["group"] == HIGH]
    summary = {
        "annotators": _annotators(labels), "n_pairs": int(own["pair_id"].nunique()), "n_items": len(own),
        "pairs_per_benchmark": {b: int(n) for b, n in high["benchmark"].value_counts().sort_index().items()},
        "reliability": reliability,
        "confirmatory": {"passes": bool(confirmatory["passes"].any()),
                         "axes_passing": confirmatory.loc[confirmatory["passes"], "axis"].tolist()},
        "largest_difference": largest,
        "family": {"n_stable": int(family["n_items"].iloc[0]), "n_high_dif": len(high),
                   "permutations": int(permutations), "seed": int(seed),
                   "axes_q_le_05": {a: b.loc[b["q"] <= 0.05, "axis"].tolist() for a, b in family.groupby("annotator")}},
    }
    return ContentAudit(agreement, binary, directions, confirmatory, ordinal, family, summary)
