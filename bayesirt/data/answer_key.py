"""Raw multiple-choice answers scored against an answer key (item -> correct option).

An answer is a non-negative integer (options 0, 1, 2, ... as ``2`` or ``2.0``) or one letter (``A`` ..
``Z``, any case); a cell equal to its item's key is 1, any other answer 0, a missing cell stays missing.
The key is a CSV with columns ``item_id`` and ``key`` (``item`` and ``answer`` are read too), one row per
item of the data. Numbers and letters are never matched with each other.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.data.files import NA_TOKENS, printable, read_string_table, reading
from bayesirt.data.reading import shown_ids
from bayesirt.errors import DataError

__all__ = ["read_key", "score_answers", "record_key", "KEY_COLUMNS"]

KEY_COLUMNS = (("item_id", "item"), ("key", "answer"))
"""Accepted headers of the key's two columns: the item id, and the correct option."""

_FIX = "write each answer as a non-negative integer (0-4) or one letter (A-E) and leave missing cells empty"


def _codes(cells: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cells -> (option code: n for the integer n >= 0, -1 for A, -2 for B, ..., NaN otherwise; missing mask;
    invalid mask), all flat."""
    arr = np.asarray(cells)
    letter = np.zeros(arr.size, dtype=bool)
    if arr.dtype.kind in "iuf":
        number = arr.astype(np.float64).ravel()
        missing = np.isnan(number)
    else:
        raw = pd.Series(arr.astype(object).ravel(), dtype=object)
        text = raw.astype(str).str.strip()
        missing = (raw.isna() | text.str.lower().isin(NA_TOKENS)).to_numpy(dtype=bool)
        number = pd.to_numeric(text.where(~missing, ""), errors="coerce").to_numpy(dtype=np.float64)
        letter = text.str.fullmatch(r"[A-Za-z]").to_numpy(dtype=bool) & ~missing
    whole = ~missing & np.isfinite(number) & (number >= 0) & (np.floor(number) == number)
    code = np.where(whole, number, np.nan)
    if letter.any():
        code[letter] = 64 - text[letter].str.upper().map(ord).to_numpy(dtype=np.float64)
    return code, missing, ~missing & ~whole & ~letter


def _text(code: float) -> str:
    return str(int(code)) if code >= 0 else chr(64 - int(code))


def read_key(path: str | os.PathLike[str]) -> dict[str, str]:
    """The answer key at ``path``: ``{item id: correct option}`` (options as in :func:`score_answers`)."""
    p = Path(path)
    table = read_string_table(p, f"no answer key at {p}; give a CSV with columns item_id,key (one row per item)")
    with reading(p):
        found = [next((c for c in names if c in table.columns), None) for names in KEY_COLUMNS]
        if None in found:
            raise DataError(f"answer key {p} needs the columns item_id and key (has {list(table.columns)[:6]}); "
                            "write one row per item: item_id,key")
        ids, answers = table[found[0]].str.strip(), table[found[1]]
        if (ids == "").any() or ids.duplicated().any():
            bad = ids[(ids == "") | ids.duplicated()].iloc[0]
            raise DataError(f"answer key {p}: item id {printable(bad)!r} is blank or repeated; give each item one row")
        codes, missing, invalid = _codes(answers.to_numpy())
        if (missing | invalid).any():
            row = int(np.flatnonzero(missing | invalid)[0])
            raise DataError(f"answer key {p}: the key of item {printable(ids.iloc[row])!r} is "
                            f"{printable(answers.iloc[row])!r}, not an option; {_FIX}")
    return dict(zip(ids.tolist(), map(_text, codes), strict=True))


def score_answers(values: Any, item_ids: Any, model_ids: Any, key_path: str | os.PathLike[str],
                  where: Any) -> np.ndarray:
    """Score an items x models matrix of answers against the key at ``key_path``: 1.0 where the answer is
    the item's key, 0.0 for any other answer, NaN where missing. ``where`` names the data in messages."""
    key = read_key(key_path)
    items = [str(i) for i in item_ids]
    known = set(items)
    unknown = [i for i in key if i not in known]
    if unknown:
        raise DataError(f"answer key {key_path}: {len(unknown)} item(s) are not items of {where} "
                        f"({shown_ids(unknown, 3)}); remove them from the key, or check the item ids and --orientation")
    absent = [i for i in items if i not in key]
    if absent:
        raise DataError(f"answer key {key_path} has no key for {len(absent)} item(s) of {where} "
                        f"({shown_ids(absent, 3)}); add a row item_id,key for every item")
    arr = np.asarray(values)
    code, missing, invalid = _codes(arr)
    wanted = np.repeat(_codes(np.array([key[i] for i in items], dtype=object))[0], arr.shape[1])
    mixed = ~missing & ~invalid & ((code < 0) != (wanted < 0))
    problems = ((invalid, "is not an answer option"), (mixed, "is not written like its key (numbers vs letters)"))
    for bad, why in problems:
        if bad.any():
            i, m = divmod(int(np.flatnonzero(bad)[0]), arr.shape[1])
            raise DataError(f"{where}: the answer {printable(arr[i, m])!r} of model {printable(model_ids[m])!r} to "
                            f"item {printable(items[i])!r} {why} (key {key_path}); {_FIX}")
    scored = np.where(missing, np.nan, (code == wanted).astype(np.float64))
    return scored.reshape(arr.shape)


def record_key(ds: xr.Dataset, key_path: str | os.PathLike[str]) -> xr.Dataset:
    """``ds`` with the answer key it was scored with in its attributes (read by the reading record)."""
    ds.attrs["answer_key"] = str(key_path)
    return ds
