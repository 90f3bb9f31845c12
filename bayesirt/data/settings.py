"""What the options of the data layer and above declare about data: the help of a DATA argument, the
reading options of :func:`bayesirt.data.load`, and the population rules of
:func:`~bayesirt.data.populations.audit_population`. Kept apart from the readers (NumPy, pandas,
xarray) so that building the command-line parser does not import them."""

from __future__ import annotations

from bayesirt.utils.options import Option, names_or_assignments, option_table

__all__ = ["DATA_HELP", "READ_OPTIONS", "ORIENTATIONS", "READING_OPTIONS", "POPULATION_SEED", "REPRESENTATIVE_RULES"]

ORIENTATIONS = ("auto", "models-rows", "items-rows")
"""``auto``: detect (and warn when it is a guess); ``models-rows``: one row per model (respondent), one
column per item; ``items-rows``: one row per item, one column per model."""

READING_OPTIONS = ("metric", "stat", "filter", "aggregate", "binarize", "on_damaged", "read_unfinished")
"""Keyword options of :func:`~bayesirt.data.harness.read_harness` (beside ``drop_empty``)."""

DATA_HELP = ("a data file (wide/long CSV, Parquet, NPY, NPZ, NT folder, .nc), evaluation-harness output (lm-eval "
             "--log_samples folder, Inspect AI .eval/.json logs, HELM runs) or an embedded dataset name")
"""What a DATA argument may be (command-line help)."""

#: How :func:`~bayesirt.data.io.load` reads a source: the options it passes to the reader (and ``drop_empty``). The
#: command line offers them on every command that reads DATA; analysis files in their ``[read]`` table.
READ_OPTIONS = option_table(
    metric=Option(None, "lm-eval metric field or Inspect scorer, for every task (NAME) or one task (TASK=NAME); "
                        "repeatable [the first listed]", type=object, parse=names_or_assignments, repeat=True,
                  metavar="[TASK=]NAME"),
    stat=Option(None, "HELM per-instance stat, for every run group (NAME) or one (GROUP=NAME); repeatable "
                      "[exact_match]", type=object, parse=names_or_assignments, repeat=True, metavar="[GROUP=]NAME"),
    filter=Option(None, "lm-eval filter, for tasks logged under several (e.g. strict-match), for every task or one "
                        "(TASK=NAME); repeatable", type=object, parse=names_or_assignments, repeat=True,
                  metavar="[TASK=]NAME"),
    aggregate=Option(None, "rule for repeated responses of one model to one item (epochs, reruns) [refuse repeats]",
                     type=str, choices=("mean", "majority", "first", "last")),
    binarize=Option(None, "score >= T counts as correct (partial credit, and the mean of repeats) [refuse partial "
                          "credit]", type=float, metavar="T"),
    on_damaged=Option("error", "output that looks like harness output but cannot be read completely (0-byte or cut "
                               "files, a HELM run without per_instance_stats.json, lm-eval without --log_samples, an "
                               "unfinished Inspect log): refuse it, naming it, or skip it with a warning naming it",
                      choices=("error", "skip")),
    read_unfinished=Option(False, "Inspect: read the scored samples of logs whose status is not success (killed, "
                                  "error, cancelled)"),
    drop_empty=Option(True, "refuse models or items without responses instead of dropping them (they are listed)",
                      flag="--keep-empty"),
    orientation=Option("auto", "layout of a matrix file (wide CSV, NPY, NPZ, NT folder): one row per model "
                               "(models-rows) or per item (items-rows); auto detects it from headers and ids and "
                               "warns when it has to guess", choices=ORIENTATIONS),
    key=Option(None, "answer key, a CSV with columns item_id,key: the cells are multiple-choice answers (0-4 or A-E), "
                     "scored 1 where equal to the item's key, 0 otherwise, missing stays missing [none: cells are "
                     "0/1]", type=str, metavar="KEY.csv"),
)

POPULATION_SEED = 20240521
"""Frozen population-selection seed (NT App. C.1): default ``seed`` of
:func:`~bayesirt.data.populations.audit_population`, from which the owner-cap draw, the owner
tie-break keys and the split's cost-tie draws derive."""
#: How the target model of each owner and family is chosen (NT D.2): the checkpoint closest to the
#: median accuracy, or the smallest model id.
REPRESENTATIVE_RULES = ("median", "lexicographic")
