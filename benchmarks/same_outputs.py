"""Are two runs' output folders the same? Every CSV byte for byte, every NetCDF file's values
(xarray ``equals`` on each group's variables and coordinates), with the attributes that differ
listed (not those that record when and how a file was written; inside a JSON attribute, the paths
of the values that differ), and the other files listed as same or different.

    python benchmarks/same_outputs.py BEFORE_FOLDER AFTER_FOLDER

Used for the acceptance line of issue 41 ("the restructure changes no number"): run
``bayesirt run analyses/demo.toml`` and ``analyses/near_tie_audit.toml`` at two commits into
separate folders and compare them. Exit status 0 when every CSV and NetCDF file agrees.
"""

from __future__ import annotations

import filecmp
import json
import sys
from pathlib import Path

import numpy as np
import xarray as xr

#: Attributes that say when, where or by which version a file was written, not what it holds.
PROVENANCE = ("created_at", "creation_date", "date", "time", "timestamp", "bayesirt_version", "version",
              "arviz_version", "inference_library_version", "sampling_time", "wall_seconds", "command", "git",
              "commit", "host", "provenance", "elapsed", "seconds", "timing")


def _strip(ds: xr.Dataset) -> xr.Dataset:
    out = ds.copy()
    out.attrs = {k: v for k, v in ds.attrs.items() if not any(p in k.lower() for p in PROVENANCE)}
    return out


def _paths(key: str, a, b) -> list[str]:
    """Where two attribute values differ: the key, or inside a JSON text the paths of the values."""
    if isinstance(a, str) and isinstance(b, str) and a[:1] in "{[" and b[:1] in "{[":
        try:
            return _json_paths(key, json.loads(a), json.loads(b))
        except ValueError:
            pass
    return [] if np.array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object)) else [key]


def _json_paths(key: str, a, b) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [p for k in sorted(set(a) | set(b)) for p in _json_paths(f"{key}.{k}", a.get(k), b.get(k))]
    return [] if a == b else [key]


def _same_netcdf(a: Path, b: Path) -> tuple[bool, str]:
    tree_a, tree_b = xr.open_datatree(a), xr.open_datatree(b)
    groups_a = {n.path: n for n in tree_a.subtree}
    groups_b = {n.path: n for n in tree_b.subtree}
    if set(groups_a) != set(groups_b):
        return False, f"groups differ: {sorted(set(groups_a) ^ set(groups_b))}"
    notes = []
    for path in sorted(groups_a):
        da, db = _strip(groups_a[path].to_dataset(inherit=False)), _strip(groups_b[path].to_dataset(inherit=False))
        if not da.equals(db):
            return False, f"group {path}: values differ"
        if not da.identical(db):
            changed = [p for k in sorted(set(da.attrs) | set(db.attrs)) for p in _paths(k, da.attrs.get(k), db.attrs.get(k))]
            notes.append(f"group {path}: attributes differ: {changed}")
    return True, "; ".join(notes) or f"{len(groups_a)} group(s) identical"


def compare(before: Path, after: Path) -> bool:
    names = sorted({p.relative_to(before) for p in before.rglob("*") if p.is_file()}
                   | {p.relative_to(after) for p in after.rglob("*") if p.is_file()})
    ok = True
    for name in names:
        a, b = before / name, after / name
        if not (a.is_file() and b.is_file()):
            print(f"{name}: only in {'before' if a.is_file() else 'after'}")
            ok = False
            continue
        if name.suffix == ".nc":
            same, note = _same_netcdf(a, b)
        else:
            same = filecmp.cmp(a, b, shallow=False)
            note = "byte-identical" if same else "bytes differ"
        print(f"{name}: {note}")
        if name.suffix in (".csv", ".nc"):
            ok &= same
    return ok


if __name__ == "__main__":
    sys.exit(0 if compare(Path(sys.argv[1]), Path(sys.argv[2])) else 1)
