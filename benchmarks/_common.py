"""Helpers shared by the benchmark scripts."""

from __future__ import annotations

import platform
from importlib.metadata import version


def versions(packages) -> dict:
    """Python and package versions for the results header ("not installed" when absent)."""
    out = {"python": platform.python_version()}
    for pkg in packages:
        try:
            out[pkg] = version(pkg)
        except Exception:  # noqa: BLE001
            out[pkg] = "not installed"
    return out


def machine() -> str:
    """One-line machine description for result headers and BENCHMARKS.md."""
    import os

    return f"{platform.platform()}, {os.cpu_count()} CPUs, {platform.python_implementation()} {platform.python_version()}"


def benchmark_row(*, task: str, data_size: str, bayesirt: str, peer: str, peer_figure: str, ratio: float | None,
                  ratio_meaning: str, target: str, target_met: bool | None, quality: str, status: str = "ok",
                  command: str, date: str, machine_description: str | None = None) -> dict:
    """One row of BENCHMARKS.md, as every comparison script stores it under ``benchmark_rows`` in its
    results JSON (``benchmarks/harness.py`` renders the table from these rows only).

    ``bayesirt`` and ``peer_figure`` are display strings with units (e.g. "0.479 ESS/s");
    ``ratio`` is oriented so that > 1 means bayesirt is better (faster / more ESS per second),
    and ``ratio_meaning`` says how it was computed (e.g. "py-irt s / bayesirt s"); ``status`` is
    "ok" or why the peer could not run ("peer failed to install: ..."), never omitted.
    """
    return {
        "task": task, "data_size": data_size, "bayesirt": bayesirt, "peer": peer, "peer_figure": peer_figure,
        "ratio": None if ratio is None else float(ratio), "ratio_meaning": ratio_meaning, "target": target,
        "target_met": target_met, "quality": quality, "status": status, "command": command, "date": date,
        "machine": machine_description or machine(),
    }


def write_results(out, result: dict, markdown, *, echo: bool = False) -> str:
    """Write a results dict as ``out`` (JSON) and its Markdown ``markdown(result)`` next to it
    (``.md``), each through a temporary file and a rename, so an interrupted write leaves the
    previous results whole. ``echo``: also print the Markdown and the two paths. Returns the Markdown."""
    import json
    from pathlib import Path

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    md = markdown(result)
    for path, text in ((out, json.dumps(result, indent=2, default=float) + "\n"), (out.with_suffix(".md"), md)):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    if echo:
        print(md)
        print(f"wrote {out} and {out.with_suffix('.md')}")
    return md
