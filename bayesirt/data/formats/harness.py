"""Evaluation-harness output (:func:`bayesirt.data.harness.read_harness`): the harnesses of :mod:`.harnesses`,
asked first (it names what it dropped itself)."""

from bayesirt.data.formats.harnesses import SHARED_OPTIONS
from bayesirt.data.registry import Reader, harness_formats, union_of_options

__all__ = ["READERS", "OWN_OPTIONS", "HARNESS_OPTIONS"]

OWN_OPTIONS = union_of_options((h.options for h in harness_formats()), "bayesirt.data.formats.harness")
"""The reading options only some harnesses take, by name."""
HARNESS_OPTIONS = union_of_options((SHARED_OPTIONS, tuple(OWN_OPTIONS.values())), "bayesirt.data.formats.harness")
"""Every reading option of :func:`~bayesirt.data.harness.read_harness` (beside ``drop_empty``), by name."""

READERS = (Reader("evaluation-harness output",
                  "evaluation-harness output (" + "; ".join(h.looks_like for h in harness_formats()) + ")",
                  "bayesirt.data.harness", "read_harness", "is_harness_input", tuple(HARNESS_OPTIONS.values()),
                  family="evaluation-harness output", order=10),)
