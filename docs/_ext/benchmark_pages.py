"""Sphinx extension: ``_generated/benchmarks/``, the benchmark pages, written at build time from
``benchmarks/results/*.json``: a summary table of the side-by-side comparisons on top (task, ratio, target,
status: the rows ``benchmarks/harness.py`` renders into BENCHMARKS.md), one page per results file with its
script's own summary and its settings below, and every script in ``benchmarks/`` with its command."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
RESULTS = BENCH / "results"
#: The keys of a results file shown as its settings (the rest are the numbers, shown by the script's summary).
SETTINGS = ("command", "date", "machine", "wall_s", "total_wall_s", "versions", "config", "settings", "quick", "seed",
            "data", "size", "source", "bayesirt_source", "loadavg_start", "loadavg_end", "cpu_count", "method")


def _harness():
    spec = importlib.util.spec_from_file_location("_bench_harness", BENCH / "harness.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _cell(text, limit: int = 160) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _script_commands() -> dict[str, str]:
    """script name -> its documented command (the first `.venv/bin/python benchmarks/NAME.py ...` line of its
    docstring or of benchmarks/README.md), else the bare command."""
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    out = {}
    for path in sorted(BENCH.glob("*.py")):
        if path.name.startswith("_"):
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        pattern = rf"(?:\.venv/bin/)?python \S*benchmarks/{re.escape(path.name)}[^\n`#]*"
        found = re.search(pattern, doc) or re.search(pattern, readme)
        command = found.group(0).strip() if found else f"python benchmarks/{path.name}"
        command = re.sub(r"^(?:\.venv/bin/)?python ", ".venv/bin/python ", command)
        first = doc.strip().split("\n\n")[0] if doc else ""
        out[path.name] = (command, " ".join(first.split()))
    return out


def summary_table(harness) -> list[str]:
    runs = harness.load_runs(False)
    lines = ["| task | data size | ratio | target | met | status | results |", "|---|---|---|---|---|---|---|"]
    for comp in harness.COMPARISONS:
        rows, source = harness.rows_for(comp, False, runs)
        page = Path(source["results"]).stem
        link = f"[{page}]({page}.md)" if (RESULTS / f"{page}.json").exists() else "—"
        for r in rows:
            ratio = "—" if r.get("ratio") is None else f"{r['ratio']:.3g}x"
            met = {True: "yes", False: "**no**", None: "—"}[r.get("target_met")]
            lines.append(f"| {_cell(r.get('task'), 60)} | {_cell(r.get('data_size'), 40)} | {ratio} | "
                         f"{_cell(r.get('target') or '—', 60)} | {met} | {_cell(r.get('status'), 60)} | {link} |")
    return lines


def _short(value, depth: int = 0):
    """Settings shown whole, long lists cut to their first entries."""
    if isinstance(value, list) and len(value) > 8:
        return [_short(v, depth + 1) for v in value[:8]] + [f"... {len(value) - 8} more"]
    if isinstance(value, dict):
        return {k: _short(v, depth + 1) for k, v in value.items()}
    return value


def result_page(path: Path) -> str:
    data = json.loads(path.read_text(encoding="utf-8"))
    stem = path.stem
    lines = [f"# `{path.name}`", ""]
    meta = data.get("meta", data) if isinstance(data, dict) else {}
    command = meta.get("command") if isinstance(meta, dict) else None
    if command:
        lines += ["Reproduce:", "", "```bash", command if isinstance(command, str) else " ".join(command), "```", ""]
    summary = RESULTS / f"{stem}.md"
    if summary.exists():
        lines += ["## Summary written by the script", "", "```{include} " + f"../../../benchmarks/results/{summary.name}",
                  ":heading-offset: 1", "```", ""]
    settings = {k: _short(meta[k]) for k in SETTINGS if isinstance(meta, dict) and k in meta}
    lines += ["## Settings and environment", "", "```json", json.dumps(settings, indent=1, default=str), "```", "",
              f"The full numbers: `benchmarks/results/{path.name}` "
              f"({len(json.dumps(data)) // 1000 or 1} kB, keys: {', '.join(f'`{k}`' for k in data) if isinstance(data, dict) else 'a list'}).",
              ""]
    return "\n".join(lines)


def write(app) -> None:
    out = Path(app.srcdir) / "_generated" / "benchmarks"
    out.mkdir(parents=True, exist_ok=True)
    harness = _harness()
    scripts = _script_commands()
    results = sorted(p for p in RESULTS.glob("*.json") if not p.stem.endswith("_quick"))
    pages = {}
    for path in results:
        pages[f"{path.stem}.md"] = result_page(path)
    index = ["# Benchmarks", "",
             "Generated at build time from `benchmarks/results/*.json` (the machine of each run is named on its "
             "page; most ran on a shared, loaded 2-core machine). Ratio > 1: bayesirt better. "
             "The same rows, with every setting, are BENCHMARKS.md (`make bench`, `benchmarks/harness.py --render-only`).",
             "", "## Side-by-side comparisons", "", *summary_table(harness), "",
             "## Every script", "",
             "| script | command | what it measures |", "|---|---|---|"]
    index += [f"| `{name}` | `{_cell(cmd, 200)}` | {_cell(first, 220)} |" for name, (cmd, first) in scripts.items()]
    index += ["", "How the comparisons are run and what every figure means: [the benchmarks' README](readme.md).", "",
              "```{toctree}", ":maxdepth: 1", ":hidden:", "", "readme", *[p.removesuffix(".md") for p in pages], "```", ""]
    pages["index.md"] = "\n".join(index)
    pages["readme.md"] = "```{include} ../../../benchmarks/README.md\n:heading-offset: 0\n```\n"
    for image in RESULTS.glob("*.png"):  # the scripts' summaries show their figures beside them
        if not (out / image.name).exists() or (out / image.name).stat().st_mtime < image.stat().st_mtime:
            shutil.copy2(image, out / image.name)
    for name, text in pages.items():
        target = out / name
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
    for stale in set(out.glob("*.md")) - {out / name for name in pages}:  # a results file deleted since
        stale.unlink()


def setup(app):
    app.connect("builder-inited", write)
    return {"parallel_read_safe": True, "version": "1"}
