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


def command_line(script: str, argv=None) -> str:
    """The command that reproduces a run of the benchmark script ``script`` (its ``__file__``) with ``argv``
    (default: this process's arguments), as its results header states it."""
    import sys
    from pathlib import Path

    return " ".join([".venv/bin/python", f"benchmarks/{Path(script).name}",
                     *(argv if argv is not None else sys.argv[1:])])


def run_header(script: str, argv=None) -> dict:
    """The ``command``, ``date``, ``machine`` and ``source`` every results JSON opens with."""
    import time

    return {"command": command_line(script, argv), "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": machine(), "source": source_state()}


def run_header_lines(result: dict) -> list[str]:
    """The Markdown lines of :func:`run_header`'s fields (command, date, machine, source commit) and a blank line."""
    return [f"Command: `{result['command']}`  ",
            f"Date: {result['date']}; {result['machine']}; source {result['source'].get('head')}", ""]


def report(out, result: dict, markdown) -> int:
    """Write ``result`` to ``out`` (:func:`write_results`, echoed) or, without ``out``, print its Markdown; 0."""
    if out:
        write_results(out, result, markdown, echo=True)
    else:
        print(markdown(result))
    return 0


def run_seeds(script: str, argv, description: str, benchmark, summarize, markdown, *, seeds: int = 60) -> int:
    """The command line of a probe over benchmark seeds 0..--seeds-1: ``benchmark(seed)`` gives rows, ``summarize``
    pools them; the results (header, ``seeds``, ``summary``, ``rows``) go to ``--out`` (:func:`report`)."""
    import argparse
    from pathlib import Path

    p = argparse.ArgumentParser(description=description)
    p.add_argument("--seeds", type=int, default=seeds)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    rows = [row for seed in range(args.seeds) for row in benchmark(seed)]
    return report(args.out, {**run_header(script, argv), "seeds": args.seeds, "summary": summarize(rows),
                             "rows": rows}, markdown)


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


def peer_python(venv) -> "Path":
    """The Python of a peer venv (``benchmarks/.peer-venvs/<name>``)."""
    from pathlib import Path

    return Path(venv) / "bin" / "python"


def peer_versions(venv, code: str) -> dict | None:
    """Run ``code`` (which prints a JSON object as its last line) with the venv's Python: that object, or
    None when the venv is missing or the code fails (e.g. the peer does not import there)."""
    import json

    py = peer_python(venv)
    if not py.exists():
        return None
    try:
        p = run_command([py, "-c", code], timeout=300)
    except Exception:  # noqa: BLE001 (a broken venv is reported as missing)
        return None
    return json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else None


def ensure_peer_venv(venv, versions, attempts, *, base_python=None, reinstall: bool = False,
                     timeout: float = 1800) -> dict:
    """Create (or reuse) a peer's venv: {"ok", "versions", "reason", "created", "path", "log", "seconds"}.

    ``versions()`` returns the peer's versions from inside the venv, or None when the peer does not
    import there (see :func:`peer_versions`): a venv where it imports is reused. Otherwise the venv
    is made anew with ``base_python`` (default: this interpreter's base; a callable is asked only then,
    given the log, and may return None when no suitable interpreter exists), and each package list of
    ``attempts`` is pip-installed in turn until one installs. A failure is reported in the result,
    never raised, so that a benchmark still writes its own rows."""
    import shutil
    import sys
    import time
    import traceback
    from pathlib import Path

    t0 = time.perf_counter()
    venv, log = Path(venv), []
    root = Path(__file__).resolve().parent.parent
    info = {"path": str(venv.relative_to(root) if venv.is_relative_to(root) else venv), "created": False, "log": log,
            "requirements": [list(a) for a in attempts]}

    def done(**result):
        return info | result | {"seconds": time.perf_counter() - t0}

    if reinstall and venv.exists():
        shutil.rmtree(venv)
    found = versions()
    if found is not None:
        log.append("reused the existing venv")
        return done(ok=True, versions=found)
    try:
        base = base_python(log) if callable(base_python) else base_python
        base = base or (None if callable(base_python) else getattr(sys, "_base_executable", None) or sys.executable)
        if base is None:
            return done(ok=False, reason="no suitable Python to make the venv with (see the log)")
        if venv.exists():
            shutil.rmtree(venv)  # a half-made venv from an interrupted run
        venv.parent.mkdir(parents=True, exist_ok=True)
        p = run_command([base, "-m", "venv", venv], timeout=600)
        if p.returncode != 0:
            return done(ok=False, reason=f"venv creation failed: {last_line(p.stderr, 160)}")
        info["created"], info["base_python"] = True, str(base)
        for packages in attempts:
            print(f"    pip install {' '.join(packages)} into {info['path']} ...", flush=True)
            p = run_command([peer_python(venv), "-m", "pip", "install", "--disable-pip-version-check", "-q", *packages],
                            timeout=timeout)
            log.append(f"pip install {' '.join(packages)}: rc={p.returncode} "
                       f"{last_line(p.stderr, 160) if p.returncode else ''}".strip())
            if p.returncode == 0:
                break
        found = versions()
        if found is None:
            reason = last_line(p.stderr, 160) if p.returncode else "the peer does not import after installing"
            return done(ok=False, reason=f"pip install failed: {reason}")
        return done(ok=True, versions=found)
    except Exception as e:  # noqa: BLE001 (never drop the peer: report why)
        traceback.print_exc()
        return done(ok=False, reason=f"{type(e).__name__}: {str(e)[:150]}")
