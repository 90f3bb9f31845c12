"""Polarity of benchmarks and sign-aligned composites (SAFE App. D): each benchmark's general-factor
loading with its bootstrap interval, declared or (on request) automatic reversal, the composite
scores and the sign agreement of a composite's members (Table 5)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayesirt.errors import ConfigError
from bayesirt.structure.settings import AUTO_POLARITY_THRESHOLD
from bayesirt.utils.validation import parameter_error

__all__ = ["AUTO_POLARITY_THRESHOLD", "parse_polarity", "polarity_table", "flagged_polarity", "composite_scores",
           "alignment_table", "CompositeAlignment", "composite_alignment", "loading_clusters"]


def parse_polarity(polarity) -> tuple[dict[str, int], bool]:
    """``(declared, auto)`` from a job's ``polarity`` option: None, ``"auto"``, or a mapping of
    benchmark -> +1/-1 that may also hold ``"auto": true`` (declared benchmarks, the others automatic)."""
    if polarity is None:
        return {}, False
    if (isinstance(polarity, str) and polarity != "auto") or not isinstance(polarity, (str, Mapping)):
        raise parameter_error("polarity", "parse_polarity", "'auto' or a mapping of benchmark names to 1 or -1 "
                              "(e.g. orbench_hard=-1)", polarity)
    if isinstance(polarity, str):
        return {}, True
    declared = {str(k): v for k, v in polarity.items() if str(k) != "auto"}
    auto = polarity.get("auto", False)
    if not isinstance(auto, bool):
        raise parameter_error("polarity", "parse_polarity", "a mapping whose 'auto' is true or false", polarity)
    return declared, auto


def polarity_table(solution, declared: Mapping[str, int] | None = None, *, interval=None, auto: bool = False,
                   threshold: float = AUTO_POLARITY_THRESHOLD) -> pd.DataFrame:
    """Each benchmark's polarity and the evidence for it (module docstring).

    Parameters
    ----------
    solution : FactorSolution
        The one-factor (general) solution; reflected so that most benchmarks load positively.
    declared : mapping of str to int, optional
        Declared polarity (+1/-1) of benchmarks; the others are +1 unless ``auto``.
    interval : (lower, upper) arrays, optional
        Bootstrap interval of each general loading, in ``solution``'s orientation; without it no
        loading counts as credibly negative and ``auto`` is refused.
    auto : bool, default False
        Reverse the undeclared benchmarks whose interval lies entirely below ``threshold``.
    threshold : float, default :data:`AUTO_POLARITY_THRESHOLD`

    Returns
    -------
    pandas.DataFrame
        Indexed by benchmark: ``general_loading``, ``lower``, ``upper``, ``credibly_negative``
        (upper < 0), ``auto_reversible`` (upper < threshold), ``declared`` (+1/-1, or 0),
        ``polarity`` (declared, else -1 when auto and auto_reversible, else +1), ``source``
        (declared/auto/default) and ``agree`` (False when a declaration contradicts the data: the
        interval, or without one the point estimate, on the other side of 0).
    """
    declared = {str(k): v for k, v in (declared or {}).items()}
    names = list(solution.variables)
    unknown = sorted(set(declared) - set(names))
    if unknown or any(v not in (1, -1) for v in declared.values()):
        raise parameter_error("declared", "polarity_table", f"a mapping of benchmarks of {names} to 1 or -1", declared,
                              hint=f" (unknown: {unknown})" if unknown else "")
    sign = 1.0 if np.sum(solution.loadings[:, 0] > 0) * 2 >= len(names) else -1.0
    loading = solution.loadings[:, 0] * sign
    if interval is None:
        if auto:
            raise ConfigError("polarity_table: polarity='auto' reverses only loadings whose bootstrap interval lies "
                              f"below {threshold}; it needs the bootstrap (bootstrap >= 2), or declare the polarity")
        lower = upper = np.full(len(names), np.nan)
    else:
        lower, upper = (np.asarray(b, dtype=float) * sign for b in interval)
        lower, upper = np.minimum(lower, upper), np.maximum(lower, upper)
    table = pd.DataFrame({"general_loading": loading, "lower": lower, "upper": upper,
                          "credibly_negative": upper < 0, "auto_reversible": upper < threshold,
                          "declared": [declared.get(n, 0) for n in names]}, index=pd.Index(names, name="benchmark"))
    automatic = auto & table["auto_reversible"] & (table["declared"] == 0)
    table["polarity"] = np.where(table["declared"] != 0, table["declared"], np.where(automatic, -1, 1))
    table["source"] = np.where(table["declared"] != 0, "declared", np.where(automatic, "auto", "default"))
    if interval is None:
        against = ((table["declared"] == -1) & (loading > 0)) | ((table["declared"] == 1) & (loading < 0))
    else:
        against = ((table["declared"] == -1) & (lower > 0)) | ((table["declared"] == 1) & (upper < 0))
    table["agree"] = ~against
    return table


def flagged_polarity(table: pd.DataFrame) -> list[str]:
    """Console/report lines for benchmarks with a credibly negative general loading that are not reversed."""
    lines = []
    for name, row in table.iterrows():
        if row["credibly_negative"] and row["polarity"] == 1:
            lines.append(f"{name}: general-factor loading {row['general_loading']:.2f} "
                         f"[{row['lower']:.2f}, {row['upper']:.2f}] is credibly negative; if it measures the "
                         f"ability reversed (as OR-Bench-Hard in SAFE), declare --polarity {name}=-1 to reverse"
                         + (f" (polarity auto would reverse it: the interval lies below {AUTO_POLARITY_THRESHOLD})"
                            if row["auto_reversible"] else ""))
    return lines


def composite_scores(abilities: pd.DataFrame, polarity: pd.Series) -> pd.Series:
    """Sign-aligned composite of every model: the mean over the benchmarks it has of
    ``polarity x`` its standardized ability (z-score over the models observed on the benchmark)."""
    z = (abilities - abilities.mean()) / abilities.std(ddof=1)
    return (z * polarity.reindex(abilities.columns).to_numpy()).mean(axis=1, skipna=True).rename("composite")


def alignment_table(correlation: pd.DataFrame, polarity: pd.Series,
                    clusters: Mapping[str, Mapping[str, int]] | None = None) -> pd.DataFrame:
    """SAFE Table 5's left column for the suite's composites: the mean pairwise ability correlation
    of each composite's members as scored (``unflipped``) and after its flips (``signed``).

    Composites: every benchmark (flips: the benchmarks of polarity -1), and each latent-ability
    cluster (flips: its members of sign -1). ``against`` lists members whose mean signed
    correlation with the others stays negative (pointing the other way even after the flips)."""
    rows = []
    names = [str(c) for c in correlation.columns]
    composites = [("composite", names, [n for n in names if int(polarity.get(n, 1)) == -1])]
    composites += [(a, list(m), [n for n, s in m.items() if s == -1]) for a, m in (clusters or {}).items()
                   if len(m) >= 2]
    for name, members, flips in composites:
        result = composite_alignment(correlation, members, flips=flips)
        against = [m for m, v in result.member_agreement.items() if v < 0]
        rows.append({"composite": name, "members": " ".join(members), "flips": " ".join(flips) or "-",
                     "unflipped": result.unflipped_mean_correlation, "signed": result.mean_correlation,
                     "against": " ".join(against) or "-"})
    return pd.DataFrame(rows, columns=["composite", "members", "flips", "unflipped", "signed", "against"])


@dataclass(frozen=True)
class CompositeAlignment:
    """Sign agreement of a composite's members (SAFE App. D, Table 5).

    ``mean_correlation``: mean pairwise correlation of the members after the flips (a flipped
    member's correlations change sign); ``unflipped_mean_correlation``: the same without flips;
    ``member_agreement``: each member's mean correlation with the others after the flips (a negative
    value marks a member pointing the other way); ``flip_effects``: for each flipped member, the mean
    correlation with all flips but that one, with all flips, and the gain."""

    members: tuple[str, ...]
    flips: tuple[str, ...]
    mean_correlation: float
    unflipped_mean_correlation: float
    member_agreement: pd.Series
    flip_effects: pd.DataFrame


def _mean_signed(r: pd.DataFrame, members: list[str], flips: set[str]) -> float:
    signs = np.array([-1.0 if m in flips else 1.0 for m in members])
    signed = r.loc[members, members].to_numpy() * np.outer(signs, signs)
    return float(signed[np.triu_indices(len(members), 1)].mean())


def composite_alignment(correlation: pd.DataFrame, members: Sequence[str], *,
                        flips: Sequence[str] = ()) -> CompositeAlignment:
    """Mean signed pairwise correlation of a composite's members, and what each flip contributes.

    Parameters
    ----------
    correlation : pandas.DataFrame
        Labelled correlation matrix (e.g. from :func:`correlation_matrix`).
    members : sequence of str
        At least two distinct benchmark labels.
    flips : sequence of str, default ()
        Members whose scores are reversed before averaging (e.g. OR-Bench-Hard in SAFE).

    Returns
    -------
    CompositeAlignment
    """
    members, flips = [str(m) for m in members], [str(f) for f in flips]
    labels = [str(c) for c in correlation.columns]
    r = pd.DataFrame(np.asarray(correlation, dtype=float), index=labels, columns=labels)
    unknown = sorted(set(members) - set(labels))
    if len(set(members)) != len(members) or len(members) < 2 or unknown:
        raise parameter_error("members", "composite_alignment", f"at least 2 distinct benchmarks of {labels}", members,
                              hint=f" (unknown: {unknown})" if unknown else "")
    if not set(flips) <= set(members):
        raise parameter_error("flips", "composite_alignment", f"composite members, of {members}", flips,
                              hint=f" (not members: {sorted(set(flips) - set(members))})")
    signs = pd.Series([-1.0 if m in flips else 1.0 for m in members], index=members)
    signed = r.loc[members, members] * np.outer(signs, signs)
    agreement = (signed.sum(axis=1) - 1.0) / (len(members) - 1)
    full = _mean_signed(r, members, set(flips))
    effects = pd.DataFrame([{"member": f, "without_flip": _mean_signed(r, members, set(flips) - {f}),
                             "with_flip": full} for f in flips], columns=["member", "without_flip", "with_flip"])
    effects["gain"] = effects["with_flip"] - effects["without_flip"]
    return CompositeAlignment(tuple(members), tuple(flips), full, _mean_signed(r, members, set()),
                              agreement.rename("mean_signed_correlation"), effects)


def loading_clusters(loadings: pd.DataFrame) -> dict[str, dict[str, int]]:
    """``ability<f>`` -> ``{benchmark: sign}``: each benchmark (row) joins the factor (column) of its
    largest absolute loading; a factor is reflected so that most of its members load positively, and
    a member's sign is that of its reflected loading."""
    values = np.asarray(loadings, dtype=float)
    home = np.abs(values).argmax(axis=1)
    clusters = {}
    for f in range(values.shape[1]):
        members = np.flatnonzero(home == f)
        if members.size == 0:
            continue
        column = values[members, f]
        reflect = 1 if (column > 0).sum() * 2 >= members.size else -1
        clusters[f"ability{f + 1}"] = {str(loadings.index[m]): int(np.sign(reflect * column[j]) or 1)
                                       for j, m in enumerate(members)}
    return clusters
