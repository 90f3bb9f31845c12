"""Declarations of the evaluation harnesses that :func:`bayesirt.data.harness.read_harness` reads: one module
per harness module of :mod:`bayesirt.data.harness`, of the same name, defining ``HARNESS`` (a
:class:`~bayesirt.data.registry.Harness`), and here the reading options every harness takes."""

from bayesirt.data.registry import BINARIZE, reading_option
from bayesirt.utils.options import names_or_assignments

__all__ = ["AGGREGATES", "ON_DAMAGED", "AGGREGATE", "ON_DAMAGED_OPTION", "METRIC", "SHARED_OPTIONS"]

AGGREGATES = ("mean", "majority", "first", "last")
"""Rules for repeated (model, item) records within one run; see :func:`~bayesirt.data.harness.records.build_dataset`."""

ON_DAMAGED = ("error", "skip")
"""What to do with harness output that cannot be read completely: refuse it, or skip it with a warning."""

AGGREGATE = reading_option(
    "aggregate", None, "rule for repeated responses of one model to one item (epochs, reruns) [refuse repeats]",
    type=str, choices=AGGREGATES)
ON_DAMAGED_OPTION = reading_option(
    "on_damaged", "error", "output that looks like harness output but cannot be read completely (0-byte or cut files, a "
    "HELM run without per_instance_stats.json, lm-eval without --log_samples or its results JSON, an unfinished "
    "Inspect log): refuse it, naming it, or skip it with a warning naming it", choices=ON_DAMAGED)
SHARED_OPTIONS = (AGGREGATE, BINARIZE, ON_DAMAGED_OPTION)
"""The reading options every harness reader takes (beside ``drop_empty``)."""
METRIC = reading_option(
    "metric", None, "lm-eval metric field or Inspect scorer, for every task (NAME) or one task (TASK=NAME); "
    "repeatable [the first listed]", type=object, parse=names_or_assignments, repeat=True, metavar="[TASK=]NAME")
"""The score option of lm-eval output and Inspect logs."""
