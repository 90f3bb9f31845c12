"""How many rows a forest-style figure draws, which ones, and the note that says so.

A forest plot of hundreds of models or items is unreadable (and, one row per item, tens of
thousands of pixels tall); such figures draw at most ``MAX_FOREST_ROWS`` rows at evenly spaced
ranks, first and last included, and say so in the figure and the report.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MAX_FOREST_ROWS", "forest_rows", "forest_note"]

MAX_FOREST_ROWS = 60


def forest_rows(n: int, limit: int = MAX_FOREST_ROWS) -> np.ndarray:
    """Positions (0-based, increasing) of the rows drawn out of ``n`` ranked rows."""
    if n <= limit:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, limit)).astype(int))


def forest_note(n: int, what: str, table: str, limit: int = MAX_FOREST_ROWS) -> str:
    """One sentence for the report ('' when every row is drawn)."""
    if n <= limit:
        return ""
    return (f"The figure draws {len(forest_rows(n, limit))} of the {n:,} {what}, at evenly spaced ranks from the "
            f"first to the last; every one is in `{table}`.")
