"""HELM run folders (:mod:`bayesirt.data.harness.helm`)."""

from bayesirt.data.registry import Harness, reading_option
from bayesirt.utils.options import names_or_assignments

__all__ = ["HARNESS", "STAT"]

STAT = reading_option(
    "stat", None, "HELM per-instance stat, for every run group (NAME) or one (GROUP=NAME); repeatable [exact_match]",
    type=object, parse=names_or_assignments, repeat=True, metavar="[GROUP=]NAME")
"""The reading option only HELM runs take."""

HARNESS = Harness("helm", "a HELM run folder (run_spec.json + per_instance_stats.json) or a folder of runs",
                  "HELM runs", "bayesirt.data.harness.helm", "find", "read_helm", (STAT,))
