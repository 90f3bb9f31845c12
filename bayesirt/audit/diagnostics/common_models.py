"""Exact-common-model directional checks across two benchmarks (NT B.7).

A family's mean anchor-minus-full shift can change between two benchmarks because the benchmarks
differ, or because different models of the family were evaluated on each. Holding the population
fixed removes the second reason: only models scored (as target representatives) in both audits,
under the same family, enter; each family's left shift, right shift and their difference are
means over exactly those models, with 95% intervals from the owner bootstrap (NT D.1 eq. 57-58;
:func:`bayesirt.audit.engine.bootstrap.owner_bootstrap`), all three on the same owner draws. Because the
models are the same, the difference of the two means is the mean of the per-model differences.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bayesirt.audit.engine.bootstrap import owner_bootstrap
from bayesirt.data.families import AMBIGUOUS, OTHER, derive_family
from bayesirt.errors import DataError

__all__ = ["audit_records", "exact_common_shifts", "select_families"]

_COLUMNS = ("model_id", "family", "owner", "shift")


def audit_records(folder: str | Path) -> pd.DataFrame:
    """Target representatives of a written audit (``fold0_scores.csv``, ``fold1_scores.csv``)."""
    folder = Path(folder)
    files = sorted(folder.glob("fold*_scores.csv"))
    if not files:
        raise DataError(f"{folder} holds no fold*_scores.csv; give the output folder of `bayesirt audit`")
    records = pd.concat([pd.read_csv(f, dtype={"model_id": str, "owner": str, "family": str}) for f in files],
                        ignore_index=True)
    missing = [c for c in _COLUMNS if c not in records]
    if missing:
        raise DataError(f"{files[0]} lacks the column(s) {missing}; rerun `bayesirt audit` with this version")
    return records[list(_COLUMNS)]


def exact_common_shifts(left: pd.DataFrame, right: pd.DataFrame, *, replicates: int = 2000,
                        seed: int = 0) -> pd.DataFrame:
    """Per family: common models and owners, left and right mean shifts and right - left (pp), 95% CIs.

    ``left`` and ``right`` are :func:`audit_records` tables. A model enters when it was scored in
    both audits with the same family label.
    """
    common = left.merge(right, on="model_id", suffixes=("_left", "_right"))
    common = common[common["family_left"] == common["family_right"]]
    if common.empty:
        raise DataError("the two audits score no model in common (same model_id and family); exact-common "
                        "comparisons need the same models evaluated on both benchmarks")
    family, owner = common["family_left"].to_numpy(), common["owner_left"].to_numpy()
    boots = {side: owner_bootstrap(values, family, owner, replicates=replicates, seed=seed)
             for side, values in (("left", common["shift_left"].to_numpy()),
                                  ("right", common["shift_right"].to_numpy()),
                                  ("difference", (common["shift_right"] - common["shift_left"]).to_numpy()))}
    table = pd.DataFrame({"family": boots["left"]["family"].values,
                          "models": boots["left"]["records"].values, "owners": boots["left"]["owners"].values})
    for side, boot in boots.items():
        table[f"{side}_shift_pp"] = 100 * boot["observed_shift"].values
        table[f"{side}_lower_pp"] = 100 * boot["shift_lower"].values
        table[f"{side}_upper_pp"] = 100 * boot["shift_upper"].values
    table["direction_change"] = (table["left_shift_pp"] * table["right_shift_pp"] < 0) & (
        (table["difference_lower_pp"] > 0) | (table["difference_upper_pp"] < 0))
    return table


def select_families(records: dict[str, pd.DataFrame], families, derive_families: bool) -> dict[str, pd.DataFrame]:
    """The two audits' records with NT C.1 family labels (``derive_families``; ids matching no
    family or several are left out) and only the ``families`` asked for (None: all); a label
    neither audit scored is an error."""
    if derive_families:
        records = {side: r.assign(family=derive_family(r["model_id"].to_numpy(dtype=str)))
                   for side, r in records.items()}
        records = {side: r[~r["family"].isin((OTHER, AMBIGUOUS))] for side, r in records.items()}
    if families is None:
        return records
    labels = list(families)
    seen = pd.concat([r["family"] for r in records.values()]).value_counts()
    unknown = [f for f in labels if f not in seen.index]
    if unknown:
        present = ", ".join(f"{f!r} ({n:,})" for f, n in seen.items())
        raise DataError(f"families lists {', '.join(map(repr, unknown))}, which neither audit scored (family labels "
                        f"of the scored models, with records: {present}); name labels from this list (case matters)"
                        + ("" if derive_families else ", or pass --derive-families to compare by the NT C.1 labels "
                                                      "of the model ids"))
    return {side: r[r["family"].isin(labels)] for side, r in records.items()}
