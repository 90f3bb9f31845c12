"""The data layer: the response Dataset, its readers, model families and populations, embedded data.

A response Dataset holds ``responses`` (item, model) as int8 with ``MISSING`` = -1, index
coordinates ``item`` and ``model`` and metadata coordinates ``item_group``, ``family`` and
``owner``; see :func:`make_responses`. Every reader validates through it and raises
:class:`~bayesirt.errors.DataError` with a one-line message on bad input."""

from typing import TYPE_CHECKING

from bayesirt.utils.lazy import attach

if TYPE_CHECKING:
    from bayesirt.data.answer_key import read_key, score_answers
    from bayesirt.data.arrays import read_npy
    from bayesirt.data.datasets import DATASETS, list_datasets, load_dataset
    from bayesirt.data.datasets.dif_benchmark import plant_family_advantage, simulate_dif_benchmark
    from bayesirt.data.datasets.simulate import simulate_pl
    from bayesirt.data.families import AMBIGUOUS, FAMILIES, OTHER, UNKNOWN_OWNER, derive_family, derive_owner
    from bayesirt.data.io import attach_metadata, load, save_responses
    from bayesirt.data.layout import OrientationWarning
    from bayesirt.data.long import read_long
    from bayesirt.data.nt import read_nt_dir, read_nt_npz
    from bayesirt.data.populations import LINEAGE_TERMS, POPULATION_SEED, audit_population
    from bayesirt.data.responses import MISSING, make_responses, observed_cells, observed_mask, summarize, validate_responses
    from bayesirt.data.wide import ORIENTATIONS, from_dataframe, read_wide_csv

__getattr__, __dir__, __all__ = attach(__name__, __file__)
