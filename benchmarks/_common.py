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


def run_command(cmd, timeout=None, env=None, cwd=None):
    """``subprocess.run`` of ``cmd`` (items converted to str) with its output captured as text."""
    import subprocess

    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)


def last_line(text: str, limit: int = 200) -> str:
    """The last informative line of a tool's output (warnings skipped), shortened, for a status string."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip() and not ln.lstrip().startswith("WARNING")]
    return (lines[-1] if lines else "no output")[:limit]


def loadavg() -> list:
    """The 1-, 5- and 15-minute load averages, rounded."""
    import os

    return [round(x, 2) for x in os.getloadavg()]


def fmt(x, spec="{:.1f}") -> str:
    """``spec.format(x)``, or an em dash for a missing or non-finite value."""
    import math

    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "\u2014"
    return spec.format(x)


def parse_size(text: str) -> tuple[int, int]:
    """A size "MODELSxITEMS" as (models, items)."""
    models, items = text.lower().split("x")
    return int(models), int(items)


def source_state() -> dict:
    """Which bayesirt source a run timed: HEAD, the uncommitted files under bayesirt/ and a hash of
    its .py files (read-only git calls; the working tree may hold work in progress)."""
    import hashlib
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    out: dict = {}
    try:
        out["head"] = run_command(["git", "-C", root, "rev-parse", "HEAD"], timeout=60).stdout.strip() or None
        st = run_command(["git", "--no-optional-locks", "-C", root, "status", "--porcelain", "--", "bayesirt"],
                         timeout=60)
        out["uncommitted"] = [ln.strip() for ln in st.stdout.splitlines()]
    except Exception as e:  # noqa: BLE001
        out["git_error"] = f"{type(e).__name__}: {e}"[:200]
    h = hashlib.sha256()
    for f in sorted((root / "bayesirt").rglob("*.py")):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    out["bayesirt_py_sha256"] = h.hexdigest()[:16]
    return out
