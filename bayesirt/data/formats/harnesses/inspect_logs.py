"""Inspect AI eval logs (:mod:`bayesirt.data.harness.inspect_logs`)."""

from bayesirt.data.formats.harnesses import METRIC
from bayesirt.data.registry import Harness, reading_option

__all__ = ["HARNESS", "READ_UNFINISHED"]

READ_UNFINISHED = reading_option(
    "read_unfinished", False, "Inspect: read the scored samples of logs whose status is not success (killed, error, "
    "cancelled)")
"""The reading option only Inspect logs take."""

HARNESS = Harness("inspect", "an Inspect AI log (.eval or .json) or a folder of them", "Inspect logs",
                  "bayesirt.data.harness.inspect_logs", "find", "read_inspect", (METRIC, READ_UNFINISHED))
