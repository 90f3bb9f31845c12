"""CPU seconds of the command line's answers that need no computation (issue 41, item 4): ``--help``
of every command, ``--version``, and a refused setting.

Target: < 0.5 CPU-seconds each (user + system). Before issue 41 the option declarations sat in
modules that import PyMC, numba and the compiled kernels, so ``bayesirt fit --help`` took about
2.8 CPU-seconds and a typo as long.

Each case is ``python -m bayesirt ARGS`` in a subprocess of its own, run ``--runs`` times (5); the
figure is the median of the child's ``ru_utime + ru_stime`` (``os.wait4``), the wall time beside it.
One more run with ``python -X importtime`` lists which heavy libraries the case imported. The same
cases are measured on a baseline commit (default: 68783a7, main when issue 41 was filed), whose
``bayesirt/`` is extracted with ``git archive`` into a temporary folder and put first on
``PYTHONPATH``; ``--baseline none`` skips it.

Usage::

    .venv/bin/python benchmarks/cli_startup.py                     # every case, and the baseline
    .venv/bin/python benchmarks/cli_startup.py --baseline-runs 1   # the committed results (baseline: 1 run each)
    .venv/bin/python benchmarks/cli_startup.py --quick             # 6 cases, 2 runs: a smoke test
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import benchmark_row, fmt, loadavg, machine, source_state, versions, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results"
TARGET_S = 0.5
BASELINE = "68783a7"  # main when issue 41 was filed (its figures: fit --help 2.8 CPU-s, audit --help 3.2)
#: Libraries whose import the table reports (the first four are what the parser must not load).
LIBRARIES = ("pymc", "pytensor", "numba", "nutpie", "arviz", "matplotlib", "scipy", "xarray", "pandas", "numpy")
#: Settings refused before any work: a choice that does not exist, and counts out of range (issue 41 measured
#: ``audit DATA --workers 0`` refused only after the audit's folds had run).
REFUSED = {"refused choice": ["fit", "lsat7", "--method", "nut"], "refused range": ["fit", "lsat7", "--draws", "0"],
           "refused range (audit)": ["audit", "lsat7", "--workers", "0"]}
HEADLINE = ("--version", "fit --help", "audit --help", "refused choice", "refused range", "refused range (audit)")


def cases(quick: bool) -> dict[str, list[str]]:
    """Case label -> arguments of ``bayesirt`` (``--out`` is added to the refused settings)."""
    sys.path.insert(0, str(ROOT))  # the commands of this checkout, whichever bayesirt is installed
    from bayesirt.cli.parser import COMMANDS

    out = {"--version": ["--version"], "--help": ["--help"]}
    out |= {f"{command} --help": [command, "--help"] for command in COMMANDS}
    out |= REFUSED
    return {k: v for k, v in out.items() if k in HEADLINE} if quick else out


def cpu_seconds(argv: list[str], env: dict, cwd: Path) -> tuple[float, float, int]:
    """(user + system CPU seconds, wall seconds, exit status) of one run of ``argv``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return usage.ru_utime + usage.ru_stime, time.perf_counter() - t0, proc.returncode


def imported(argv: list[str], env: dict, cwd: Path) -> list[str]:
    """The libraries of :data:`LIBRARIES` that one run of ``argv`` imports (``-X importtime``)."""
    done = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], capture_output=True, text=True, env=env, cwd=cwd)
    names = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in done.stderr.splitlines()
             if line.startswith("import time:")}
    return [lib for lib in LIBRARIES if lib in names]


def measure(source: Path, runs: int, todo: dict[str, list[str]], scratch: Path) -> dict:
    """Every case of ``todo`` run against the bayesirt package in ``source``."""
    env = os.environ | {"PYTHONPATH": str(source), "PYTHONWARNINGS": "ignore"}
    out = {}
    for label, args in todo.items():
        argv = [sys.executable, "-m", "bayesirt", *args]
        if label in REFUSED:
            argv += ["--out", str(scratch / "out")]
        timed = [cpu_seconds(argv, env, source) for _ in range(runs)]
        out[label] = {"args": args, "cpu_s": statistics.median(t[0] for t in timed), "runs_cpu_s": [t[0] for t in timed],
                      "wall_s": statistics.median(t[1] for t in timed), "exit": sorted({t[2] for t in timed}),
                      "imports": imported(argv, env, source)}
        print(f"  {label}: {out[label]['cpu_s']:.2f} CPU-s (exit {out[label]['exit']}; {', '.join(out[label]['imports'])})",
              flush=True)
    return out


def baseline_source(commit: str, into: Path) -> Path:
    """``bayesirt/`` of ``commit`` extracted into ``into`` (read-only git: ``git archive``)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit, "bayesirt"],
                             capture_output=True, timeout=120)
    if archive.returncode != 0:
        raise SystemExit(f"git archive {commit} failed: {archive.stderr.decode(errors='replace').strip()}")
    into.mkdir(parents=True)
    extract = subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, capture_output=True, timeout=120)
    if extract.returncode != 0:
        raise SystemExit(f"tar failed: {extract.stderr.decode(errors='replace').strip()}")
    return into


def rows(result: dict) -> list[dict]:
    """The BENCHMARKS.md rows: the headline cases and the slowest command's ``--help``."""
    after, before = result["cases"], result.get("baseline", {}).get("cases", {})
    helps = {k: v for k, v in after.items() if k.endswith(" --help") and k != "--help"}
    slowest = max(helps, key=lambda k: helps[k]["cpu_s"]) if helps else None
    out = []
    for label in [k for k in HEADLINE if k in after] + ([slowest] if slowest and slowest not in HEADLINE else []):
        now, then = after[label]["cpu_s"], before.get(label, {}).get("cpu_s")
        task = f"`bayesirt {' '.join(after[label]['args'])}`" + (" (the slowest command's --help)"
                                                                   if label == slowest and label not in HEADLINE else "")
        out.append(benchmark_row(
            task=f"CLI start-up: {task}", data_size="—", bayesirt=f"{now:.2f} CPU-s",
            peer=f"bayesirt at {result['baseline']['commit']}" if before else "none (baseline not measured)",
            peer_figure=fmt(then, "{:.2f} CPU-s"), ratio=None if then is None else then / now,
            ratio_meaning="before CPU-s / after CPU-s", target=f"< {TARGET_S} CPU-s (issue 41)",
            target_met=now < TARGET_S, quality=f"imports: {', '.join(after[label]['imports']) or 'none of the listed'}",
            command=result["command"], date=result["date"]))
    return out


def markdown(result: dict) -> str:
    after, before = result["cases"], result.get("baseline", {}).get("cases", {})
    base = result.get("baseline", {}).get("commit")
    lines = ["# Command-line start-up (issue 41, item 4)", "",
             f"{result['date']}; {result['machine']}; load {result['load'][0]:.1f} at the start, {result['load'][1]:.1f} "
             f"at the end; `{result['command']}`; source {(result['bayesirt_source'].get('head') or '?')[:10]}"
             + (" + uncommitted files" if result["bayesirt_source"].get("uncommitted") else "") + ".", "",
             f"CPU seconds (user + system) of `python -m bayesirt ARGS`, median of {result['runs']} runs, each in a "
             f"process of its own; target < {TARGET_S} CPU-s. Imports: the libraries of this list that the case "
             f"imported ({', '.join(LIBRARIES)}), from one more run with `-X importtime`."
             + (f" Before: the same cases on bayesirt {base}, median of {result['baseline'].get('runs', result['runs'])} "
                f"run(s)." if base else ""), "",
             "| case | CPU-s | wall s | exit | imports | " + ("before CPU-s | before imports | " if base else "") + "met |",
             "|---|---:|---:|---|---|" + ("---:|---|" if base else "") + "---|"]
    for label, row in after.items():
        then = before.get(label)
        cells = [f"`{' '.join(row['args'])}`", f"{row['cpu_s']:.2f}", f"{row['wall_s']:.2f}",
                 ",".join(map(str, row["exit"])), ", ".join(row["imports"]) or "—"]
        if base:
            cells += [fmt(then and then["cpu_s"], "{:.2f}"), (", ".join(then["imports"]) or "—") if then else "—"]
        cells.append("yes" if row["cpu_s"] < TARGET_S else "no")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=None, help="runs per case [5; 2 with --quick]")
    parser.add_argument("--baseline", default=BASELINE, help=f"commit measured the same way, or none [{BASELINE}]")
    parser.add_argument("--baseline-runs", type=int, default=None, help="runs per case of the baseline [--runs]")
    parser.add_argument("--quick", action="store_true", help="the six headline cases only, a smoke test")
    parser.add_argument("--out", default=None, help="results JSON [results/cli_startup(_quick).json]")
    args = parser.parse_args()
    runs = args.runs or (2 if args.quick else 5)
    out = Path(args.out) if args.out else RESULTS / f"cli_startup{'_quick' if args.quick else ''}.json"
    todo = cases(args.quick)
    command = " ".join([".venv/bin/python benchmarks/cli_startup.py", *sys.argv[1:]])
    result = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(), "command": command, "runs": runs,
              "versions": versions(["numpy", "pymc", "numba", "xarray"]), "bayesirt_source": source_state()}
    load = [loadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        print(f"bayesirt at {ROOT}:", flush=True)
        result["cases"] = measure(ROOT, runs, todo, Path(tmp))
        if args.baseline.lower() != "none":
            print(f"bayesirt {args.baseline} (baseline):", flush=True)
            source = baseline_source(args.baseline, Path(tmp) / "baseline")
            base_runs = args.baseline_runs or runs
            result["baseline"] = {"commit": args.baseline, "runs": base_runs,
                                  "cases": measure(source, base_runs, todo, Path(tmp))}
    result["load"] = load + [loadavg()[0]]
    result["benchmark_rows"] = rows(result)
    write_results(out, result, markdown, echo=True)


if __name__ == "__main__":
    main()
