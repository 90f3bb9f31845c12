"""ROC/AUC of the sandbagging detectors on real runs that the user labels genuine or prompted to
sandbag (SAFE Figure 6A), for :func:`bayesirt.jobs.safety.run_sandbag_job` with a
reference cohort and ``labels``."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.errors import DataError
from bayesirt.safety.personfit import roc_auc, roc_curve

__all__ = ["GENUINE_LABELS", "SANDBAG_LABELS", "read_run_labels", "labelled_roc"]

#: Labels a ``labels`` table may use for a genuine run and for a run prompted to sandbag.
GENUINE_LABELS = ("genuine", "0", "false", "no")
SANDBAG_LABELS = ("sandbag", "sandbagged", "sandbagging", "1", "true", "yes")


def read_run_labels(labels) -> pd.DataFrame:
    """Run labels as a DataFrame indexed by model id with ``sandbag`` (bool) and ``group`` (the
    optional third column, e.g. the scope or prompt framing; ``"all"`` without one).

    ``labels``: a CSV path (columns ``model``, ``label`` and optionally ``group``), a DataFrame of
    those columns, or a mapping model -> label. A label is ``genuine``/``0`` or ``sandbag``/``1``."""
    if isinstance(labels, Mapping):
        frame = pd.DataFrame({"model": list(labels), "label": list(labels.values())})
    elif isinstance(labels, pd.DataFrame):
        frame = labels.copy()
    else:
        from pathlib import Path

        path = Path(labels)
        if not path.is_file():
            raise DataError(f"no such labels file: {path}; pass a CSV with columns model,label[,group]")
        frame = pd.read_csv(path, dtype=str)
    missing = {"model", "label"} - set(frame.columns)
    if missing:
        raise DataError(f"run labels need columns model and label (genuine or sandbag), optionally group; missing "
                        f"{sorted(missing)}")
    text = frame["label"].astype(str).str.strip().str.lower()
    bad = sorted(set(text) - set(GENUINE_LABELS) - set(SANDBAG_LABELS))
    if bad:
        raise DataError(f"run labels {bad[:5]} are neither genuine ({'/'.join(GENUINE_LABELS)}) nor sandbag "
                        f"({'/'.join(SANDBAG_LABELS)})")
    out = pd.DataFrame({"sandbag": text.isin(SANDBAG_LABELS).to_numpy(),
                        "group": frame["group"].astype(str).to_numpy() if "group" in frame else "all"},
                       index=pd.Index(frame["model"].astype(str), name="model"))
    if out.index.has_duplicates:
        raise DataError("run labels name a model twice; give each run one row")
    return out


def _detector_scores(ds: xr.Dataset, statistic: str) -> dict[str, np.ndarray]:
    """Scores where low = suspicious, for :func:`bayesirt.safety.personfit.roc_curve`: person fit
    (the statistic) and ability shift (minus |shift| / resolvable gap)."""
    return {"personfit": ds[statistic].values, "shift": -np.abs(ds["shift"].values) / ds["gap"].values}


def labelled_roc(suspects: xr.Dataset, reference: xr.Dataset, labels: pd.DataFrame, *,
                 statistic: str = "lz") -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """ROC/AUC of the detectors on real runs labelled genuine or sandbagging (SAFE Figure 6A).

    Positives: the suspects labelled sandbag. Negatives: the suspects labelled genuine when there
    are any, else the reference cohort scored on the same items (SAFE: the genuine cohort). Per
    detector (person fit; ability shift, scored |shift| / gap) the AUC, pooled and per label
    ``group``, and the operating point of the flags (``tpr``/``fpr`` of ``flag_<detector>``,
    also for the combined flag). Runs without a history have no shift score and are left out of
    the shift rows.

    Returns
    -------
    (table, curves, negatives)
        ``table``: detector, group, positives, negatives, auc, tpr, fpr; ``curves``: detector,
        group, threshold, fpr, tpr; ``negatives``: which runs served as negatives.
    """
    ids = suspects["model"].values.astype(str)
    unknown = sorted(set(labels.index) - set(ids))
    if unknown:
        raise DataError(f"{len(unknown)} labelled model(s) are not suspect runs (e.g. {unknown[:3]}); label the runs "
                        "of the scored file")
    label = labels.reindex(ids)
    positive = label["sandbag"].fillna(False).to_numpy(dtype=bool)
    genuine = (label["sandbag"] == False).to_numpy()  # noqa: E712 (NaN: unlabelled, in neither)
    if not positive.any():
        raise DataError("no run is labelled sandbag; an ROC needs runs prompted to sandbag")
    if genuine.any():
        neg, negatives = suspects.isel(model=np.flatnonzero(genuine)), f"{int(genuine.sum())} runs labelled genuine"
    else:
        neg, negatives = reference, f"the reference cohort ({reference.sizes['model']} models, same items)"
    neg_scores = _detector_scores(neg, statistic)
    rows, curves = [], []
    groups = label["group"].to_numpy().astype(str)
    names = ["all", *sorted(set(groups[positive]))] if len(set(groups[positive])) > 1 else ["all"]
    for group in names:
        chosen = positive & ((groups == group) if group != "all" else True)
        pos = suspects.isel(model=np.flatnonzero(chosen))
        pos_scores = _detector_scores(pos, statistic)
        for detector in ("personfit", "shift", "combined"):
            row = {"detector": detector, "group": group, "positives": int(chosen.sum()),
                   "negatives": int(neg.sizes["model"]),
                   "tpr": float(pos[f"flag_{detector}"].mean()), "fpr": float(neg[f"flag_{detector}"].mean()),
                   "auc": np.nan}
            if detector != "combined" and np.isfinite(pos_scores[detector]).any() \
                    and np.isfinite(neg_scores[detector]).any():
                row["auc"] = roc_auc(neg_scores[detector], pos_scores[detector])
                curves.append(roc_curve(neg_scores[detector], pos_scores[detector]).assign(detector=detector,
                                                                                          group=group))
            rows.append(row)
    curve = (pd.concat(curves, ignore_index=True)[["detector", "group", "threshold", "fpr", "tpr"]] if curves
             else pd.DataFrame(columns=["detector", "group", "threshold", "fpr", "tpr"]))
    return pd.DataFrame(rows), curve, negatives
