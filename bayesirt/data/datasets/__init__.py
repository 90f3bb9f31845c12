"""Small real response datasets shipped with bayesirt, and simulators.

Embedded data (sources and licences in ``NOTICE.md`` next to this file):

- ``lsat6``, ``lsat7``: LSAT Sections 6 and 7, 5 items x 1,000 persons (Bock & Lieberman 1970;
  Bock & Aitkin 1981); item ids ``Q1..Q5``, person (model) ids ``p0001..p1000``.
- ``chembench``: ChemBench, 2,854 items x 22 language models, from lamalab-org/irt-on-bench
  (MIT); item ids ``chembench_0..``, family and owner derived from the model names.

>>> from bayesirt.data.datasets import load_dataset
>>> load_dataset("lsat6")["responses"].shape
(5, 1000)
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import as_file, files
from types import MappingProxyType

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.data.datasets.simulate import simulate_pl
from bayesirt.data.files import reading
from bayesirt.data.responses import make_responses
from bayesirt.data.wide import wide_parts
from bayesirt.errors import DataError

__all__ = ["DatasetInfo", "DATASETS", "list_datasets", "load_dataset", "simulate_pl"]


@dataclass(frozen=True)
class DatasetInfo:
    """One embedded dataset.

    Attributes
    ----------
    file : str
        CSV file inside this package.
    orientation : str
        Layout of the file (``"items_by_models"`` or ``"models_by_items"``).
    description, citation, licence : str
        Human-readable text for listings and the Dataset attrs.
    n_items, n_models : int
        Shape after loading (items x models).
    item_id_format, model_id_format : str or None
        ``str.format`` templates for the ids, given ``id`` (the id in the file) and ``n``
        (1-based position); None keeps the ids of the file.
    """

    file: str
    orientation: str
    description: str
    citation: str
    licence: str
    n_items: int
    n_models: int
    item_id_format: str | None = None
    model_id_format: str | None = None


_LSAT_CITATION = (
    "Bock, R. D. & Lieberman, M. (1970), Psychometrika 35, 179-197; "
    "Bock, R. D. & Aitkin, M. (1981), Psychometrika 46, 443-459 (as republished in R ltm / mirt)"
)

DATASETS = MappingProxyType(
    {
        "lsat6": DatasetInfo(
            file="lsat6.csv",
            orientation="models_by_items",
            description="LSAT Section 6: 5 items, 1,000 persons (classic 2PL/Rasch reference data)",
            citation=_LSAT_CITATION,
            licence="public data (classic, widely republished)",
            n_items=5,
            n_models=1000,
            model_id_format="p{n:04d}",
        ),
        "lsat7": DatasetInfo(
            file="lsat7.csv",
            orientation="models_by_items",
            description="LSAT Section 7: 5 items, 1,000 persons",
            citation=_LSAT_CITATION,
            licence="public data (classic, widely republished)",
            n_items=5,
            n_models=1000,
            model_id_format="p{n:04d}",
        ),
        "chembench": DatasetInfo(
            file="chembench_items_by_models.csv",
            orientation="items_by_models",
            description="ChemBench: 2,854 chemistry items answered by 22 language models (binary correctness)",
            citation="ChemBench responses from lamalab-org/irt-on-bench (MIT)",
            licence="MIT",
            n_items=2854,
            n_models=22,
            item_id_format="chembench_{id}",
        ),
    }
)
"""Registry of embedded datasets: name -> :class:`DatasetInfo`."""


def list_datasets() -> pd.DataFrame:
    """Table of the embedded datasets.

    Returns
    -------
    pandas.DataFrame
        Columns ``name``, ``items``, ``models``, ``description``, ``licence``; one row per dataset.
    """
    rows = [
        {"name": name, "items": i.n_items, "models": i.n_models, "description": i.description, "licence": i.licence}
        for name, i in DATASETS.items()
    ]
    return pd.DataFrame(rows, columns=["name", "items", "models", "description", "licence"])


def _format_ids(ids: np.ndarray, template: str | None) -> np.ndarray:
    if template is None:
        return ids
    return np.array([template.format(id=v, n=k + 1) for k, v in enumerate(ids)], dtype=str)


def load_dataset(name: str) -> xr.Dataset:
    """Load an embedded dataset as a response Dataset.

    Parameters
    ----------
    name : str
        One of ``DATASETS`` (``"lsat6"``, ``"lsat7"``, ``"chembench"``).

    Returns
    -------
    xarray.Dataset
        Response Dataset (items x models) with attrs ``name``, ``source``, ``citation``, ``licence``.

    Raises
    ------
    DataError
        Unknown name (the message lists the available ones).
    """
    if name not in DATASETS:
        raise DataError(f"unknown dataset {name!r}; available datasets: {', '.join(DATASETS)}")
    info = DATASETS[name]
    with as_file(files(__name__) / info.file) as path, reading(path):
        values, row_ids, cols, _ = wide_parts(path, info.orientation, "auto")
    n_rows = values.shape[0]
    row_ids = np.array([str(i) for i in range(n_rows)] if row_ids is None else row_ids, dtype=str)
    cols = np.asarray(cols, dtype=str)
    if info.orientation == "items_by_models":
        matrix, items, models = values, row_ids, cols
    else:
        matrix, items, models = values.T, cols, row_ids
    ds = make_responses(
        matrix,
        item_id=_format_ids(items, info.item_id_format),
        model_id=_format_ids(models, info.model_id_format),
        name=name,
        source=f"bayesirt embedded dataset {name!r} ({info.file})",
    )
    ds.attrs.update(citation=info.citation, licence=info.licence)
    return ds
