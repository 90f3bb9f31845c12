"""What the options of the data layer and above declare about data: the help of a DATA argument, the
reading options of :func:`bayesirt.data.load` (the union of what the formats declare), and the population rules of
:func:`~bayesirt.data.populations.audit_population`. Kept apart from the readers (NumPy, pandas,
xarray) so that building the command-line parser does not import them."""

from __future__ import annotations

from bayesirt.data.registry import DROP_EMPTY, readers, reading_option, union_of_options

__all__ = ["DATA_HELP", "READ_OPTIONS", "KEEP_EMPTY", "POPULATION_SEED", "REPRESENTATIVE_RULES"]

DATA_HELP = ("a data file (wide/long CSV, Parquet, NPY, NPZ, NT folder, .nc), evaluation-harness output (lm-eval "
             "--log_samples folder, Inspect AI .eval/.json logs, HELM runs) or an embedded dataset name")
"""What a DATA argument may be (command-line help)."""

KEEP_EMPTY = reading_option(
    "keep_empty", False, "deprecated spelling of --refuse-empty (it never kept empty models or items: it refused "
    "them); warns")
"""``--keep-empty`` / ``keep_empty``: the old spelling of ``drop_empty=False`` (``--refuse-empty``), kept for one
release with a :class:`~bayesirt.data.io.DeprecatedSpellingWarning`."""

#: How :func:`~bayesirt.data.io.load` reads a source: the union of the reading options the formats of the
#: registry declare (:mod:`bayesirt.data.formats`), with ``drop_empty`` (every format takes it). The command
#: line offers them on every command that reads DATA; analysis files in their ``[read]`` table.
READ_OPTIONS = union_of_options([(DROP_EMPTY, KEEP_EMPTY), *(r.options for r in readers())], "bayesirt.data.settings")

POPULATION_SEED = 20240521
"""Frozen population-selection seed (NT App. C.1): default ``seed`` of
:func:`~bayesirt.data.populations.audit_population`, from which the owner-cap draw, the owner
tie-break keys and the split's cost-tie draws derive."""
#: How the target model of each owner and family is chosen (NT D.2): the checkpoint closest to the
#: median accuracy, or the smallest model id.
REPRESENTATIVE_RULES = ("median", "lexicographic")
