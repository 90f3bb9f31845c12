"""Long tables (:mod:`bayesirt.data.long`): asked before the wide table, which takes any other text table."""

from bayesirt.data.registry import BINARIZE, KEY, Reader

__all__ = ["READERS", "LONG_COLUMNS"]

LONG_COLUMNS = ("model", "item", "correct")
"""The columns that make a table long (one row per model and item), and the Python keywords that name other
columns for them; :func:`~bayesirt.data.long.read_long` also reads the optional ``item_group`` (per item),
``family`` and ``owner`` (per model)."""

READERS = (Reader("long table", ".csv/.tsv/.txt with columns model, item, correct (long), .parquet/.pq (long)",
                  "bayesirt.data.long", "read_long", "is_long_table", (KEY, BINARIZE), LONG_COLUMNS, order=50),)
