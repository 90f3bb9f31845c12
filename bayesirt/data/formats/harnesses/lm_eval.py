"""lm-evaluation-harness per-sample logs (:mod:`bayesirt.data.harness.lm_eval`)."""

from bayesirt.data.formats.harnesses import METRIC
from bayesirt.data.registry import Harness, reading_option
from bayesirt.utils.options import names_or_assignments

__all__ = ["HARNESS", "FILTER"]

FILTER = reading_option(
    "filter", None, "lm-eval filter, for tasks logged under several (e.g. strict-match), for every task or one "
    "(TASK=NAME); repeatable", type=object, parse=names_or_assignments, repeat=True, metavar="[TASK=]NAME")
"""The reading option only lm-eval output takes."""

HARNESS = Harness("lm-eval", "an lm-eval --output_path folder (OUT/<model>/samples_<task>_<timestamp>.jsonl) or one "
                  "model folder", "lm-eval output", "bayesirt.data.harness.lm_eval", "find", "read_lm_eval",
                  (METRIC, FILTER))
