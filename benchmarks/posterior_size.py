"""Size, write and read time of a fit's ``posterior.nc`` in each storage, and whether the tables
rebuilt from the float32 file match the float64 ones to the printed digits (issue 18, item 3).

Rewrites one float64 ``posterior.nc`` uncompressed, compressed float64 (the default) and
compressed float32 (``--float32``), times each write and a full read, and rebuilds the
``items.csv`` / ``models.csv`` tables from the float64 and float32 files. Give it a posterior
written in float64: the demo's with ``float32 = false`` (``analyses/demo.toml`` sets true, and a
float32 file compares trivially equal).

Usage::

    python benchmarks/posterior_size.py DEMO_FLOAT64/posterior.nc
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import xarray as xr

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine, versions, write_results  # noqa: E402


def _timed_roundtrip(tree: xr.DataTree, path: Path, writer) -> dict:
    t0 = time.perf_counter()
    writer(tree, path)
    write = time.perf_counter() - t0
    t0 = time.perf_counter()
    with xr.open_datatree(path) as opened:
        back = opened.load()
    return {"mb": path.stat().st_size / 1e6, "write_s": write, "read_s": time.perf_counter() - t0, "tree": back}


def main() -> None:
    from bayesirt.inference.summaries import item_table, model_table
    from bayesirt.utils.outputs import write_netcdf

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("posterior", help="a posterior.nc written in float64")
    args = parser.parse_args()
    with xr.open_datatree(args.posterior) as opened:
        tree = opened.load()
    for node in tree.subtree:  # forget the source file's encoding, so "uncompressed" is uncompressed
        for var in node.to_dataset(inherit=False).variables.values():
            var.encoding = {}
    writers = {"uncompressed float64": lambda t, p: t.to_netcdf(p, engine="h5netcdf"),
               "compressed float64": lambda t, p: write_netcdf(t, p),
               "compressed float32": lambda t, p: write_netcdf(t, p, float32=True)}
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k, (name, writer) in enumerate(writers.items()):
            rows[name] = _timed_roundtrip(tree, Path(tmp) / f"{k}.nc", writer)
    tables = {}
    for name in ("compressed float64", "compressed float32"):
        back = rows[name].pop("tree")
        tables[name] = {"items": item_table(back), "models": model_table(back)}
    rows["uncompressed float64"].pop("tree")
    diffs = {}
    for table in ("items", "models"):
        a, b = tables["compressed float64"][table], tables["compressed float32"][table]
        numeric = [c for c in a.select_dtypes("number").columns if not c.endswith(("r_hat", "ess_bulk"))]
        delta = (a[numeric] - b[numeric]).abs().max()
        diffs[table] = {"max_abs_diff": float(delta.max()), "at": str(delta.idxmax())}
    result = {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "source": str(args.posterior),
              "command": f"python benchmarks/posterior_size.py {args.posterior}",
              "versions": versions(("bayesirt", "xarray", "h5netcdf")), "storage": rows, "table_diffs": diffs}

    def markdown(r: dict) -> str:
        lines = ["# posterior.nc storage", "", f"{r['date']}; {r['machine']}; `{r['command']}`.", "",
                 "| storage | MB | write s | read s |", "|---|---|---|---|"]
        lines += [f"| {k} | {v['mb']:.1f} | {v['write_s']:.2f} | {v['read_s']:.2f} |" for k, v in r["storage"].items()]
        lines += ["", "Tables rebuilt from the float32 file against the float64 one (largest absolute difference): "
                  + "; ".join(f"{k} {v['max_abs_diff']:.2g} ({v['at']})" for k, v in r["table_diffs"].items()), ""]
        return "\n".join(lines)

    write_results(Path(__file__).parent / "results" / "posterior_size.json", result, markdown, echo=True)


if __name__ == "__main__":
    main()
