"""Notes of report.md for intervals that do not contain the estimate printed with them.

Every interval of the audit report is printed in the cell of its estimate, as ``estimate (lower-
upper)``. When the estimate lies outside, the cell gets a marker ``[note n]`` and the sentence
saying why (``summary.json["intervals"]``, :mod:`bayesirt.audit.intervals`) is printed under the
table, starting with the same marker.
"""

from __future__ import annotations

__all__ = ["Notes", "MARKER"]

#: Marker of note ``n`` in a cell and at the start of its sentence.
MARKER = "[note {}]"


class Notes:
    """The report's numbered notes: :meth:`mark` a cell, then :meth:`lines` under the table."""

    def __init__(self, records: list[dict]):
        self._by_source = {r["source"]: r for r in records}
        self._count = 0
        self._pending: list[str] = []
        self._numbers: list[int] = []

    def record(self, source: str) -> dict | None:
        """The interval record of ``source`` (None when the summary holds none)."""
        return self._by_source.get(source)

    def mark(self, source: str) -> str:
        """" [note n]" when the interval ``source`` does not contain its estimate (its sentence is
        queued for :meth:`lines`), else ""."""
        record = self._by_source.get(source)
        return self.add(record["note"]) if record and record.get("note") else ""

    def add(self, sentence: str) -> str:
        """Queue ``sentence`` as the next note (or reuse the marker of the same queued sentence);
        returns its marker with a leading space."""
        if sentence not in self._pending:
            self._pending.append(sentence)
            self._numbers.append(self._count + 1)
            self._count += 1
        return " " + MARKER.format(self._numbers[self._pending.index(sentence)])

    def lines(self) -> list[str]:
        """The queued notes (one paragraph each, starting with their marker), emptied."""
        out = [line for n, note in zip(self._numbers, self._pending, strict=True)
               for line in (f"{MARKER.format(n)} {note}", "")]
        self._pending, self._numbers = [], []
        return out
