"""Wide tables (:mod:`bayesirt.data.wide`): a text table that is not long (the long table is asked first)."""

from bayesirt.data.registry import BINARIZE, KEY, ORIENTATION, Reader

__all__ = ["READERS"]

READERS = (Reader("wide table", ".csv/.tsv/.txt (wide: one row per model or per item)", "bayesirt.data.wide",
                  "read_wide_csv", "is_wide_table", (ORIENTATION, KEY, BINARIZE), ("id_column",),
                  family="matrix files", order=60),)
