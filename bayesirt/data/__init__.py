"""The data layer: the response Dataset, its readers, model populations and embedded data.

A response Dataset holds ``responses`` (item, model) as int8 with ``MISSING`` = -1, index
coordinates ``item`` and ``model`` and metadata coordinates ``item_group``, ``family`` and
``owner``; see :func:`make_responses`. Every reader validates through it and raises
:class:`~bayesirt.errors.DataError` with a one-line message on bad input.
"""

from bayesirt.data.datasets import DATASETS, list_datasets, load_dataset
from bayesirt.data.datasets.dif_benchmark import simulate_dif_benchmark
from bayesirt.data.datasets.simulate import simulate_pl
from bayesirt.data.io import (
    from_dataframe,
    load,
    read_long,
    read_nt_dir,
    read_nt_npz,
    read_wide_csv,
    save_responses,
)
from bayesirt.data.populations import (
    AMBIGUOUS,
    FAMILIES,
    LINEAGE_TERMS,
    OTHER,
    POPULATION_SEED,
    UNKNOWN_OWNER,
    audit_population,
    derive_family,
    derive_owner,
)
from bayesirt.data.responses import MISSING, make_responses, observed_cells, observed_mask, summarize, validate_responses

__all__ = [
    "MISSING",
    "make_responses",
    "validate_responses",
    "summarize",
    "observed_mask",
    "observed_cells",
    "read_wide_csv",
    "read_long",
    "read_nt_npz",
    "read_nt_dir",
    "from_dataframe",
    "load",
    "save_responses",
    "FAMILIES",
    "OTHER",
    "AMBIGUOUS",
    "UNKNOWN_OWNER",
    "derive_family",
    "derive_owner",
    "POPULATION_SEED",
    "LINEAGE_TERMS",
    "audit_population",
    "DATASETS",
    "list_datasets",
    "load_dataset",
    "simulate_pl",
    "simulate_dif_benchmark",
]
