"""File handling shared by the readers: one-line errors naming the file, text and NumPy checks."""

from __future__ import annotations

import contextlib
import csv
import os
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesirt.errors import DataError

__all__ = ["TEXT_SUFFIXES", "NA_TOKENS", "NPZ_MAGIC", "reading", "parsing", "printable", "one_line", "existing",
           "read_string_table", "check_text", "np_load"]


TEXT_SUFFIXES = {".csv": ",", ".tsv": "\t", ".txt": None}


NA_TOKENS = {"", "na", "nan", "null", "none", "n/a"}


def _unreadable(path: Path, exc: BaseException) -> DataError:
    return DataError(
        f"cannot read {path} ({one_line(exc)}); "
        f"check that it is a valid {path.suffix or 'data'} file (text must be UTF-8)"
    )


def _too_large(path: Path) -> DataError:
    # a corrupt header can claim a huge array: NumPy allocates it before finding the data missing
    return DataError(
        f"cannot read {path}: it would need more memory than is available (a corrupt or truncated header "
        f"can claim a huge array); check that it is a valid {path.suffix or 'data'} file"
    )


@contextlib.contextmanager
def reading(path: Path) -> Iterator[None]:
    """Turn any failure while reading ``path`` into a one-line DataError naming the file."""
    try:
        yield
    except DataError as exc:
        msg = str(exc)
        raise DataError(msg if str(path) in msg else f"{path}: {msg}") from None
    except (ValueError, OSError, EOFError, KeyError, UnicodeError, csv.Error, zipfile.BadZipFile, zlib.error) as exc:
        # pandas/numpy/pyarrow/h5py errors on a corrupt or malformed file (zlib: a damaged compressed NPZ)
        raise _unreadable(path, exc) from None
    except MemoryError:
        raise _too_large(path) from None


@contextlib.contextmanager
def parsing(path: Path) -> Iterator[None]:
    """Around a third-party parser call only (pyarrow, NumPy's NPY/zip reader, h5py, pandas): any
    exception it raises on a corrupt file, whatever its type (pyarrow's ArrowException, zipfile's
    NotImplementedError, h5py's RuntimeError, ...), is a one-line DataError naming the file.

    Keep the package's own code outside, so that a bug in it is not reported as a corrupt file."""
    try:
        yield
    except DataError:
        raise
    except MemoryError:
        raise _too_large(path) from None
    except Exception as exc:  # noqa: BLE001 - third-party parsers raise many types on corrupt input
        raise _unreadable(path, exc) from None


def printable(value: object) -> str:
    """``str(value)`` if it prints on one line, else its ``repr`` (names read from files go into messages)."""
    text = str(value)
    return text if text.isprintable() else repr(text)


def one_line(exc: BaseException, limit: int = 200) -> str:
    """An exception as ``Type: message`` on a single line (for DataError messages)."""
    detail = " ".join(str(exc).split())[:limit]
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def existing(path: str | os.PathLike[str]) -> Path:
    if not (p := Path(path)).exists():
        raise DataError(f"no such file or folder: {p}; check the path")
    return p


def read_string_table(path: Path, missing: str) -> pd.DataFrame:
    """The text table at ``path`` with every cell a string ('' where empty); ``missing``: the
    DataError message when there is no file at ``path``."""
    if not path.is_file():
        raise DataError(missing)
    with reading(path):
        check_text(path)
        return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")


def check_text(path: Path) -> None:
    with open(path, "rb") as fh:
        if b"\x00" in fh.read(8192):
            raise DataError(f"{path} looks like a binary file, not delimited text; pass a CSV/TSV text file")


NPZ_MAGIC = b"PK"
"""First bytes of an NPZ archive (a zip file)."""


def np_load(path: Path, npz: Any = None, key: str | None = None) -> np.ndarray:
    """``np.load(path)`` of a .npy file (or ``npz[key]`` of an open NPZ archive at ``path``), refusing
    pickled object arrays, members that are not .npy arrays and corrupt files with a DataError."""
    if npz is None:
        with open(path, "rb") as fh:
            if fh.read(6) != b"\x93NUMPY":  # else np.load takes any other file for a pickle (or an NPZ)
                raise DataError(f"{path} is not a NumPy .npy file; write it with np.save")
    try:
        arr = npz[key] if npz is not None else np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "pickle" not in str(exc).lower():
            raise _unreadable(path, exc) from None
        raise DataError(
            f"array {key or path.name!r} is a pickled object array and pickled arrays are refused; save string "
            "arrays as fixed-width unicode (np.asarray(ids, dtype=str)) and responses as 0/1/NaN floats"
        ) from None
    except MemoryError:
        raise _too_large(path) from None
    except Exception as exc:  # noqa: BLE001 - zipfile, zlib or NumPy's header parser on a corrupt file
        raise _unreadable(path, exc) from None
    if not isinstance(arr, np.ndarray):  # NpzFile hands back the raw bytes of a member that is not .npy
        raise DataError(f"member {key!r} of the NPZ is not a NumPy .npy array; write the archive with np.savez")
    return arr
