"""Benchmark harness: run the side-by-side comparisons and write BENCHMARKS.md from their results.

Each comparison is one script in ``benchmarks/`` that runs bayesirt and a peer tool on the same data
with the same settings, in one run (the peer in the same process unless its row says otherwise), and
writes a results JSON whose ``benchmark_rows`` (built with ``_common.benchmark_row``) are the rows of
BENCHMARKS.md:

    name    script                  results JSON (quick run: <stem>_quick.json)   peer
    nuts    nuts_2pl.py             nuts_2pl.json                                 naive PyMC 2PL + nutpie; + pm.NUTS
    stan    nuts_stan.py            nuts_stan.json                                Stan (PyStan 3, own venv): naive and
                                                                                  bayesirt's reparameterization
    numpyro nuts_numpyro.py         nuts_numpyro.json                             NumPyro on CPU (own venv): bayesirt's
                                                                                  reparameterization and the naive model,
                                                                                  5 generated datasets x 3 sampler seeds
    numpyro-<family> (8: NUTS_FAMILIES) nuts_numpyro_200x500_<family>.json        the same, per spec family, 200 x 500
    advi    advi_pyirt.py           advi_pyirt.json                               py-irt
    mml     mml_mirt.py             mml_mirt.json                                 mirt (PyPI)
    cat     cat_catsim.py           cat_catsim.json                               catsim
    factor  fa_factor_analyzer.py   factor_analyzer.json                          factor_analyzer
    scale   scale_advi.py           scale_advi.json                               (see the script)
    leaderboard leaderboard_posterior.py leaderboard_posterior.json               NUTS (coverage), minibatch ADVI (time)
    cli     cli_startup.py          cli_startup.json                              bayesirt at 68783a7 (before issue 41)

Every script takes ``--quick`` (a small smoke-test design) and ``--out PATH.json``.

Running (``make bench`` = ``.venv/bin/python benchmarks/harness.py``): installs the pinned peer
packages the selected comparisons need (``--no-install`` skips this), then runs each selected
comparison as its own subprocess, one after the other, so a failing comparison never stops the
others; its output is shown and kept in ``benchmarks/results/logs/``. A script that exits non-zero
(or does not write its JSON) becomes a row "harness: <script> failed: <last error line>"; a peer
that fails to install or to run is reported in its rows' status by the script itself (and the
install failure by the harness). The outcome of every run is recorded in
``benchmarks/results/harness_runs.json`` so that ``--render-only`` keeps showing a failure until
the comparison's JSON is rewritten by a later successful run.

Rendering reads only the JSONs, so BENCHMARKS.md is a deterministic function of them. Rows come
from each JSON's ``benchmark_rows``; for results written before that key existed (the committed
nuts_2pl.json and mml_mirt.json) the rows are derived by the script's own ``benchmark_rows``
function (the script module is imported; its ``main`` is not run). A comparison without a JSON gets
a row "not run yet (command: ...)".

Usage::

    .venv/bin/python benchmarks/harness.py                    # install peers, run all, write BENCHMARKS.md
    .venv/bin/python benchmarks/harness.py --run mml,factor   # rerun two; the others are rendered from their JSONs
    .venv/bin/python benchmarks/harness.py --render-only      # no runs: BENCHMARKS.md from the existing JSONs
    .venv/bin/python benchmarks/harness.py --quick            # smoke test: *_quick.json -> results/BENCHMARKS_quick.md

Full runs take hours (the NUTS comparison alone about 2 h on 2 cores); timings are only comparable
on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import tomllib
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
LOGS = RESULTS / "logs"
PY = ".venv/bin/python"  # how commands are shown (the harness itself runs scripts with sys.executable)
sys.path.insert(0, str(BENCH))
from _nuts_families import FAMILIES  # noqa: E402 (the families' table: benchmarks/ is not a package)

# Peer packages: where their pin lives. An extra of pyproject.toml is installed whole, as
# `make bench-mml` does (".[bench]"); catsim has no extra, so its pin is here.
PEERS = {
    "mirt": {"extra": "bench"},
    "factor-analyzer": {"extra": "test"},
    "catsim": {"requirement": "catsim==0.21.0"},
}


@dataclass(frozen=True)
class Comparison:
    name: str  # the --run key
    script: str  # file in benchmarks/
    stem: str  # benchmarks/results/<stem>.json (quick: <stem>_quick.json)
    task: str  # shown in placeholder rows (not run yet, harness failure)
    peer: str
    target: str  # the issue's target, for the header and placeholder rows
    peers: tuple = ()  # keys of PEERS installed before running
    note: str = ""  # shown in the "not run yet" row of a full render
    args: tuple = ()  # the script's arguments of a full run (none: its defaults)

    def results(self, quick: bool) -> Path:
        return RESULTS / f"{self.stem}{'_quick' if quick else ''}.json"

    def argv(self, quick: bool) -> list[str]:
        """Script arguments: full runs use ``args`` and results/<stem>.json (none: the script's defaults,
        which write there); quick runs add --quick and name the separate quick results file."""
        out = ["--out", str(self.results(quick).relative_to(ROOT))]
        if quick:
            return [*self.args, "--quick", *out]
        return [*self.args, *out] if self.args else []

    def command(self, quick: bool) -> str:
        return " ".join([PY, f"benchmarks/{self.script}", *self.argv(quick)])


#: The spec families of benchmarks/_nuts_families.py, each a comparison of its own (issue 43).
NUTS_FAMILIES = tuple(FAMILIES)
COMPARISONS = (
    Comparison("nuts", "nuts_2pl.py", "nuts_2pl", "2PL posterior sampling, NUTS (min bulk ESS per second)",
               "naive PyMC 2PL + nutpie (control) and + pm.NUTS", "bayesirt >= 2x the naive model in min bulk ESS/s"),
    Comparison("stan", "nuts_stan.py", "nuts_stan", "2PL posterior sampling, NUTS vs Stan (min bulk ESS per second)",
               "Stan 2.39 via PyStan 3.14 (its own venv, benchmarks/.peer-venvs/stan): naive model and bayesirt's "
               "reparameterization; naive PyMC model + nutpie (control)",
               "bayesirt >= 3x Stan with the same reparameterization at 300 x 1,000 (wall incl. compile)"),
    Comparison("numpyro", "nuts_numpyro.py", "nuts_numpyro",
               "2PL posterior sampling, NUTS vs NumPyro on CPU (min bulk ESS per second)",
               "NumPyro 0.22 / JAX 0.12 on CPU (its own venv, benchmarks/.peer-venvs/numpyro): bayesirt's "
               "reparameterization and the naive model",
               "bayesirt >= 2x NumPyro with the same reparameterization at 300 x 1,000 (wall incl. compile), "
               ">= 1.5x on every dataset",
               args=("--data-seeds", "5", "--data-seed", "1", "--seeds", "3", "--seed", "1")),
    *(Comparison(f"numpyro-{family}", "nuts_numpyro.py", f"nuts_numpyro_200x500_{family}",
                 f"{family} posterior sampling, NUTS vs NumPyro on CPU, 200 x 500 (min bulk ESS per second)",
                 "NumPyro 0.22 / JAX 0.12 on CPU (its own venv): bayesirt's reparameterization and the naive model",
                 "bayesirt >= 1x NumPyro's reparameterized model and >= 2x its naive one, complete and 50% missing "
                 "(issue 43)",
                 args=("--size", "200x500", "--spec", family, "--missing", "0,0.5", "--seeds", "3"))
      for family in NUTS_FAMILIES),
    Comparison("advi", "advi_pyirt.py", "advi_pyirt", "2PL ADVI vs py-irt", "py-irt",
               ">= 3x faster than py-irt at equal or better correlation with the truth"),
    Comparison("mml", "mml_mirt.py", "mml_mirt", "2PL / 3PL marginal ML (Bock-Aitkin EM)", "mirt (PyPI)",
               "no slower than mirt", peers=("mirt",)),
    Comparison("cat", "cat_catsim.py", "cat_catsim", "CAT, fixed-length tests (max Fisher information)", "catsim",
               "no slower than catsim", peers=("catsim",),
               note="an earlier run, from before the script wrote a JSON, is in benchmarks/results/cat_catsim.md"),
    Comparison("factor", "fa_factor_analyzer.py", "factor_analyzer", "Exploratory factor analysis: minres + oblimin",
               "factor_analyzer", "none set (ratio reported)", peers=("factor-analyzer",)),
    Comparison("scale", "scale_advi.py", "scale_advi", "ADVI at scale", "see benchmarks/scale_advi.py", "—"),
    Comparison("leaderboard", "leaderboard_posterior.py", "leaderboard_posterior",
               "Whole-leaderboard 2PL posterior (Laplace approximation)",
               "NUTS (interval agreement, 300 x 1,000); minibatch ADVI (time, scale_advi.json)",
               "<= 300 s wall and <= 4 GB at 5,000 x 14,042 with calibrated 90% intervals"),
    Comparison("cli", "cli_startup.py", "cli_startup",
               "CLI start-up: --help of every command, --version, a refused setting (CPU seconds)",
               "bayesirt at 68783a7 (main when issue 41 was filed)", "< 0.5 CPU-s each (issue 41)"),
)
BY_NAME = {c.name: c for c in COMPARISONS}
ISSUE_TARGETS = (
    ("NUTS", "bayesirt >= 2x the naive PyMC 2PL in minimum bulk ESS per second, sampled by nutpie (the control: the "
             "same sampler) and by PyMC's NUTS"),
    ("NUTS vs Stan", "bayesirt >= 3x Stan given bayesirt's own reparameterization in minimum bulk ESS per wall second, "
                     "compile included, at 300 models x 1,000 items (sampling-only ratio, the naive Stan model and "
                     "the nutpie control reported beside it)"),
    ("NUTS vs NumPyro", "bayesirt >= 2x NumPyro (CPU defaults) given bayesirt's reparameterization in minimum bulk ESS "
                        "per wall second, compile included, at 300 models x 1,000 items (issue 31)"),
    ("NUTS vs NumPyro, every spec family", "bayesirt >= 2x NumPyro's naive model and >= 1x its reparameterized "
                                           "one in minimum bulk ESS per wall second, compile included, at 200 models "
                                           "x 500 items, complete and 50% missing, pooled over 3 seeds (issue 43; "
                                           "not judged where a sampler's largest R-hat is above 1.1)"),
    ("ADVI", "bayesirt >= 3x faster than py-irt at equal or better correlation with the truth"),
    ("MML", "bayesirt no slower than mirt"),
    ("CAT", "bayesirt no slower than catsim"),
    ("Factor analysis", "ratio reported, no target"),
    ("CLI start-up", "`bayesirt --version`, every command's `--help` and a refused setting in < 0.5 CPU-seconds "
                     "(issue 41)"),
)


# ------------------------------------------------------------------------------------- install
def _installed(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _extra_requirement(extra: str, dist: str) -> str | None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get("optional-dependencies", {})
    norm = dist.lower().replace("_", "-")
    for req in deps.get(extra, []):
        if re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].lower().replace("_", "-") == norm:
            return req
    return None


def _satisfied(requirement: str | None, dist: str) -> bool:
    have = _installed(dist)
    if have is None or requirement is None:
        return False
    m = re.fullmatch(r"[A-Za-z0-9_.\-]+\s*==\s*([^\s;]+)", requirement.strip())
    return have == m.group(1) if m else True  # an unpinned requirement: any installed version


def install_peers(names) -> dict:
    """pip-install the pinned peer packages the selected comparisons need (skipped when the pinned
    version is already installed). Returns {dist: {"ok", "detail", "command"}}; a failure is kept
    and reported, never raised."""
    out = {}
    for dist in dict.fromkeys(p for n in names for p in BY_NAME[n].peers):
        spec = PEERS[dist]
        if "extra" in spec:
            requirement = _extra_requirement(spec["extra"], dist)
            target = f".[{spec['extra']}]"
            pip_args = ["-e", target]
        else:
            requirement = target = spec["requirement"]
            pip_args = [requirement]
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-c", "requirements.lock",
               *pip_args]
        shown = " ".join([PY, "-m", "pip", "install", "-c", "requirements.lock", *(f'"{a}"' if "[" in a else a for a in pip_args)])
        if _satisfied(requirement, dist):
            out[dist] = {"ok": True, "detail": f"already installed ({dist} {_installed(dist)})", "command": shown}
            print(f"harness: {dist} {_installed(dist)} already installed", flush=True)
            continue
        print(f"harness: installing {dist} ({requirement or target}): {shown}", flush=True)
        try:
            p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            ok = p.returncode == 0 and _installed(dist) is not None
            tail = _last_line(p.stderr) or _last_line(p.stdout) or f"pip exited {p.returncode}"
        except OSError as e:
            ok, tail = False, f"{type(e).__name__}: {e}"
        out[dist] = {"ok": ok, "detail": f"installed {dist} {_installed(dist)}" if ok else tail, "command": shown}
        if not ok:
            print(f"harness: {dist} failed to install: {tail}", flush=True)
    return out


# ----------------------------------------------------------------------------------------- runs
def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def _results_date(path: Path) -> str | None:
    """The ``date`` a results JSON records (None when absent or unreadable)."""
    try:
        return json.loads(path.read_text()).get("date")
    except (OSError, ValueError, AttributeError):
        return None


def run_comparison(comp: Comparison, quick: bool, timeout: float | None) -> dict:
    """Run one comparison script as a subprocess, streaming its output to the console and a log."""
    script = BENCH / comp.script
    out_json = comp.results(quick)
    log = LOGS / f"{comp.stem}{'_quick' if quick else ''}.log"
    record = {"script": f"benchmarks/{comp.script}", "command": comp.command(quick),
              "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "log": str(log.relative_to(ROOT)),
              "results": str(out_json.relative_to(ROOT)), "results_date_before": _results_date(out_json)}
    mtime0 = out_json.stat().st_mtime_ns if out_json.exists() else None
    if not script.exists():
        return record | {"status": "failed", "returncode": None, "seconds": 0.0,
                         "error": f"script not found: benchmarks/{comp.script}"}
    LOGS.mkdir(parents=True, exist_ok=True)
    print(f"\n=== harness: {comp.name}: {comp.command(quick)}", flush=True)
    t0 = time.perf_counter()
    tail: list[str] = []
    error = None
    timed_out = threading.Event()

    def stop(proc):
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # the script and its children (chain processes, workers)
        except ProcessLookupError:
            pass

    with log.open("w") as fh:
        proc = subprocess.Popen([sys.executable, str(script), *comp.argv(quick)], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1, start_new_session=True)
        watchdog = None
        if timeout is not None:
            watchdog = threading.Timer(timeout, lambda: (timed_out.set(), stop(proc)))
            watchdog.start()
        try:
            for line in proc.stdout:
                sys.stdout.write(line)
                fh.write(line)
                if line.strip():
                    tail = (tail + [line.strip()])[-20:]
            rc = proc.wait()
        except KeyboardInterrupt:
            stop(proc)
            proc.wait()
            raise
        finally:
            if watchdog is not None:
                watchdog.cancel()
    if timed_out.is_set():
        error = f"timed out after {timeout:.0f} s"
    seconds = time.perf_counter() - t0
    written = out_json.exists() and out_json.stat().st_mtime_ns != mtime0
    if error is None and rc != 0:
        error = tail[-1][:300] if tail else f"exited {rc} without output"
    elif error is None and not written:
        error = f"exited 0 but did not write {out_json.relative_to(ROOT)}"
    record |= {"returncode": rc, "seconds": round(seconds, 1), "status": "failed" if error else "ok", "error": error,
               "results_date_after": _results_date(out_json)}
    print(f"=== harness: {comp.name}: {'FAILED: ' + error if error else 'ok'} ({seconds:.0f} s)", flush=True)
    return record


def _runs_path(quick: bool) -> Path:
    return RESULTS / f"harness_runs{'_quick' if quick else ''}.json"


def load_runs(quick: bool) -> dict:
    try:
        return json.loads(_runs_path(quick).read_text())
    except (OSError, ValueError):
        return {}


# ------------------------------------------------------------------------------------ rendering
def _legacy_rows(comp: Comparison, result: dict) -> list[dict]:
    """Rows of a results JSON written before ``benchmark_rows`` was stored: derived by the script's own
    ``benchmark_rows`` (the module is imported; its main guard keeps it from running)."""
    path = BENCH / comp.script
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))  # the scripts import _common
    spec = importlib.util.spec_from_file_location(f"_bench_{comp.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.benchmark_rows(result)


def _placeholder(comp: Comparison, quick: bool, status: str, date: str = "—") -> dict:
    return {"task": comp.task, "data_size": "—", "bayesirt": "—", "peer": comp.peer, "peer_figure": "—", "ratio": None,
            "ratio_meaning": "", "target": comp.target, "target_met": None, "quality": "—", "status": status,
            "command": comp.command(quick), "date": date, "machine": None}


def rows_for(comp: Comparison, quick: bool, runs: dict) -> tuple[list[dict], dict]:
    """(rows, source) of one comparison for the table and the sources list."""
    path = comp.results(quick)
    rel = str(path.relative_to(ROOT))
    result = None
    if path.exists():
        try:
            result = json.loads(path.read_text())
        except ValueError as e:
            result = {"_unreadable": f"{type(e).__name__}: {e}"}
    if result and result.get("cases") and "date" not in result:  # a run of several cases: its first's date and source
        result |= {k: result["cases"][0][k] for k in ("date", "bayesirt_source") if k in result["cases"][0]}
    date = None if result is None else result.get("date")
    source = {"name": comp.name, "results": rel, "date": date, "command": comp.command(quick), "origin": "not run yet",
              "source": source_of(result if isinstance(result, dict) else None, path) if result is not None else "—"}
    run = runs.get(comp.name)
    # a failed harness run counts until the JSON is rewritten (its date changes) by a later run
    if run and run.get("status") == "failed" and date == run.get("results_date_before"):
        earlier = f" (earlier results of {date} remain in {rel})" if date else ""
        status = f"harness: {run['script']} failed: {run['error']}{earlier}"
        if run.get("install_failures"):
            status += "; " + _install_note(run)
        source |= {"origin": f"harness run of {run['started']} failed", "date": run["started"]}
        return [_placeholder(comp, quick, status, run["started"])], source
    if result is None:
        note = f"; {comp.note}" if comp.note and not quick else ""
        return [_placeholder(comp, quick, f"not run yet (command: {comp.command(quick)}){note}")], source
    if "_unreadable" in result:
        return [_placeholder(comp, quick, f"results unreadable: {result['_unreadable']} ({rel})", date or "—")], source
    if "benchmark_rows" in result:
        rows, source["origin"] = result["benchmark_rows"], "benchmark_rows stored by the run"
    else:
        try:
            rows = _legacy_rows(comp, result)
            source["origin"] = f"derived from the run's numbers by {comp.script}'s benchmark_rows (JSON predates the key)"
        except Exception as e:  # noqa: BLE001 -- reported as a row, never dropped
            rows = [_placeholder(comp, quick, f"rows could not be derived from {rel}: {type(e).__name__}: {e}"[:300], date or "—")]
    if not rows:
        rows = [_placeholder(comp, quick, f"{rel} holds no benchmark rows", date or "—")]
    rows = [r if r.get("source") else r | {"source": source["source"]} for r in rows]
    if run and run.get("status") == "failed" and date == run.get("results_date_after"):
        # the script wrote its JSON and then failed: keep its rows, say so
        rows = [r | {"status": f"harness: {run['script']} failed after writing its results: {run['error']}; "
                               f"{r.get('status')}"} for r in rows]
    if run and run.get("install_failures") and date == run.get("results_date_after"):
        note = _install_note(run)
        rows = [r | {"status": note + ("" if r.get("status") == "ok" else f"; {r.get('status')}")} for r in rows]
    return rows, source


def _git(*args: str) -> str:
    """Output of a read-only git command in the repository ("" when git is unavailable)."""
    try:
        p = subprocess.run(["git", "--no-optional-locks", "-C", str(ROOT), *args], capture_output=True, text=True,
                           timeout=60)
        return p.stdout.strip() if p.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def source_of(result: dict | None, path: Path) -> str:
    """Which bayesirt source a results JSON measured: the HEAD its run recorded (with the count of
    files under bayesirt/ that differed from it), else the commit that committed the JSON (the run
    did not record its HEAD), else that the JSON is not committed."""
    src = (result or {}).get("bayesirt_source") or (result or {}).get("source")
    src = src if isinstance(src, dict) else {}
    head = src.get("head") or (result or {}).get("bayesirt_head")
    if head:
        dirty = len(src.get("uncommitted") or [])
        return f"run at {head[:10]}" + (f" + {dirty} uncommitted file(s) under bayesirt/" if dirty else "")
    rel = str(path.relative_to(ROOT))
    if _git("status", "--porcelain", "--", rel):
        return "not committed yet (the run did not record its source commit)"
    committed = _git("log", "-1", "--format=%h", "--", rel)
    return f"results committed in {committed} (the run did not record its source commit)" if committed else "—"


def _install_note(run: dict) -> str:
    return "; ".join(f"peer failed to install: {d} ({x})" for d, x in sorted(run["install_failures"].items()))


def _cell(x) -> str:
    text = "—" if x is None or x == "" else str(x)
    return text.replace("|", "\\|").replace("\n", " ")


def _ratio(r: dict) -> str:
    if r.get("ratio") is None:
        return "—"
    return f"**{r['ratio']:.3g}x**" + (f": {r['ratio_meaning']}" if r.get("ratio_meaning") else "")


def _target(r: dict) -> str:
    met = r.get("target_met")
    verdict = "" if met is None else (": **met**" if met else ": **NOT met**")
    if met is None and "not judged" in str(r.get("status")):
        verdict = ": **not judged** (see status)"
    return f"{r.get('target') or '—'}{verdict}"


def render(quick: bool) -> str:
    runs = load_runs(quick)
    table, sources = [], []
    for comp in COMPARISONS:
        rows, source = rows_for(comp, quick, runs)
        table += rows
        sources.append(source)
    machines = list(dict.fromkeys(r["machine"] for r in table if r.get("machine")))
    label = {m: f"M{i + 1}" for i, m in enumerate(machines)}
    with_target = [r for r in table if r.get("target_met") is not None]
    missed = [r for r in with_target if not r["target_met"]]
    # a target the run could not judge (e.g. timed on an overloaded machine) is named, never counted as met
    unjudged = [r for r in table if r.get("target_met") is None and r.get("ratio") is not None
                and "not judged" in str(r.get("status"))]
    title = "# Benchmarks: bayesirt side by side with peer tools" + (" (QUICK smoke run)" if quick else "")
    lines = [title, "",
             "<!-- Generated by benchmarks/harness.py from the results JSONs in benchmarks/results/; do not edit by hand. -->", ""]
    if quick:
        lines += ["**Quick mode**: small designs that only check that every comparison runs end to end. These are not "
                  "benchmark figures; the full results are in BENCHMARKS.md at the repository root.", ""]
    lines += ["Each comparison runs bayesirt and a peer tool in one run of its script, on the same machine, data and "
              "settings: the peer in the same process, except where its row says otherwise (py-irt runs in a "
              "subprocess of its own Python 3.11 environment; single-threaded mirt in a subprocess; PyMC's NUTS samples "
              "its chains in worker processes). Details and every number are in the script's own Markdown next to its "
              "JSON in `benchmarks/results/`. **Source**: the bayesirt commit the run measured, as the run recorded it, "
              "or else the commit that committed its results. "
              "**Ratio**: oriented so that **> 1 means bayesirt is better** (faster, or more effective samples per "
              "second); each cell says how it was computed. **Quality check**: agreement with the simulated truth or "
              "with the peer. **Status**: `ok`, or why a peer or a run failed (failures are rows, never dropped).", "",
              "Targets (from the issue):", ""]
    lines += [f"- {name}: {text}" for name, text in ISSUE_TARGETS]
    lines += ["", f"Rows with a target: {len(with_target)}; met: {len(with_target) - len(missed)}; not met: {len(missed)}"
              + (" (" + "; ".join(f"{r['task']}, {r['data_size']}" for r in missed) + ")" if missed else "")
              + (f"; not judged: {len(unjudged)} (" + "; ".join(f"{r['task']}, {r['data_size']}" for r in unjudged)
                 + ": see their status)" if unjudged else "") + ".", "",
              "| Task | Data size | bayesirt | Peer (exact settings) | Peer figure | Ratio | Target | Quality check | Status "
              "| Date | Source | Machine |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        cells = [r.get("task"), r.get("data_size"), r.get("bayesirt"), r.get("peer"), r.get("peer_figure"), _ratio(r),
                 _target(r), r.get("quality"), r.get("status"), r.get("date"), r.get("source"),
                 label.get(r.get("machine"), "—")]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines += ["", "Machines: " + ("; ".join(f"{label[m]} = {m}" for m in machines) if machines else "—") + ".", "",
              "## How these figures were produced", "",
              "Every row's figures come from a single run of its comparison script, the run recorded in the results "
              "JSON listed below (its date is the row's Date); rows of different comparisons may come from different "
              "runs and days. Timings depend on the machine's load: each script's Markdown records the load average "
              "around every timed run.", "",
              "| Comparison | Results JSON | Run date | Source | Rows from | Command |", "|---|---|---|---|---|---|"]
    for s in sources:
        lines.append(f"| {s['name']} | `{s['results']}` | {_cell(s['date'])} | {_cell(s.get('source'))} "
                     f"| {_cell(s['origin'])} | `{s['command']}` |")
    lines += ["", "Regenerate:", "", "```bash",
              "make bench                                                   # install the peers, run every comparison, write BENCHMARKS.md",
              f"{PY} benchmarks/harness.py --run mml,factor     # rerun some comparisons; the others keep their recorded runs",
              f"{PY} benchmarks/harness.py --render-only        # rewrite BENCHMARKS.md from the results JSONs, no runs",
              f"{PY} benchmarks/harness.py --quick              # smoke test -> benchmarks/results/BENCHMARKS_quick.md",
              "```", ""]
    return "\n".join(lines)


def output_path(quick: bool) -> Path:
    return RESULTS / "BENCHMARKS_quick.md" if quick else ROOT / "BENCHMARKS.md"


# ----------------------------------------------------------------------------------------- main
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", default=",".join(c.name for c in COMPARISONS),
                   help=f"comma list of comparisons to (re)run: {', '.join(BY_NAME)} (default: all)")
    p.add_argument("--quick", action="store_true",
                   help="each script's quick mode; results to *_quick.json and benchmarks/results/BENCHMARKS_quick.md")
    p.add_argument("--render-only", action="store_true", help="no runs: render from the existing results JSONs")
    p.add_argument("--no-install", action="store_true", help="do not pip-install the pinned peer packages first")
    p.add_argument("--timeout", type=float, default=None, help="seconds per comparison before it is stopped (default: none)")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.run.split(",") if n.strip()]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        p.error(f"unknown comparison(s) {', '.join(unknown)}; choose from {', '.join(BY_NAME)}")

    failed = []
    if not args.render_only:
        installs = {} if args.no_install else install_peers(names)
        runs = load_runs(args.quick)
        for name in names:
            comp = BY_NAME[name]
            record = run_comparison(comp, args.quick, args.timeout)
            bad = {d: x["detail"] for d, x in installs.items() if d in comp.peers and not x["ok"]}
            if bad:
                record["install_failures"] = bad
            runs[name] = record
            _runs_path(args.quick).write_text(json.dumps(runs, indent=2, sort_keys=True) + "\n")
            if record["status"] != "ok":
                failed.append(name)
    out = output_path(args.quick)
    out.write_text(render(args.quick))
    print(f"\nwrote {out.relative_to(ROOT)}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
