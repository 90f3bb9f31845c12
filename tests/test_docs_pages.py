"""The generated documentation pages (docs/_ext, written by ``make docs`` at build time) cover what they
promise: every command with every declared option, default and range; every public name of every module;
every benchmark script with its command and every results file with a page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import api_reference  # noqa: E402
import benchmark_pages  # noqa: E402
import cli_reference  # noqa: E402

from bayesirt.cli.parser import COMMANDS, build_parser, cli_options, command_job  # noqa: E402
from bayesirt.utils.options import positional_of  # noqa: E402
from bayesirt.data.settings import READ_OPTIONS  # noqa: E402


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    src = tmp_path_factory.mktemp("docs")
    app = SimpleNamespace(srcdir=str(src))
    for extension in (cli_reference, api_reference, benchmark_pages):
        extension.write(app)
    return src / "_generated"


def test_cli_reference_lists_every_command_and_option(generated):
    text = (generated / "cli.md").read_text()
    top = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert len(top) >= 21
    for command in top:
        section = text.split(f"## `bayesirt {command}`\n", 1)[1].split("\n## ", 1)[0]
        if command not in COMMANDS:
            continue
        declared = {**cli_options(command_job(command))}
        for opt in declared.values():
            row = next((line for line in section.splitlines() if line.startswith(f"| `{opt.cli_flag}`")), None)
            assert row is not None, f"{command}: {opt.cli_flag} missing"
            if opt.low is not None:
                assert str(opt.low) in row.split("|")[3], (command, row)
            if opt.choices:
                assert all(f"`{c}`" in row for c in opt.choices), (command, row)
        if "data" in positional_of(command_job(command)):
            assert all(f"| `{o.cli_flag}`" in section for o in READ_OPTIONS.values()), command


def test_cli_range_and_default_forms():
    opt = SimpleNamespace(choices=None, low=0, high=1, open=True, required=False, default=0.9)
    assert cli_reference._range(opt) == "(0, 1)"
    assert cli_reference._range(SimpleNamespace(choices=None, low=1, high=None, open=False)) == "[1, inf)"
    assert cli_reference._default(SimpleNamespace(nargs=None, required=False, default=None), opt) == "`0.9`"


def test_api_reference_covers_every_public_name(generated):
    pages = "\n".join(p.read_text() for p in (generated / "api").glob("*.rst"))
    missing = []
    for name in api_reference.modules():
        module = __import__(name, fromlist=["_"])
        assert f".. automodule:: {name}\n" in pages
        for n in api_reference.public_names(module):
            if f"{name}.{n}`" not in pages and f".{n}`" not in pages:
                missing.append(f"{name}.{n}")
    assert missing == []
    assert "bayesirt.inference.fitting.fit`" in pages and ".. autofunction:: bayesirt.inference.fitting.fit" in pages


def test_api_summaries_are_valid_text():
    assert api_reference.escape_bars("mean |a - b| of ``x | y``") == "mean \\|a - b\\| of ``x | y``"
    lines = ["a |x|", "::", "", "    literal |x|", "b |y|"]
    api_reference.bars_in_docstrings(None, "function", "f", None, None, lines)
    assert lines == ["a \\|x\\|", "::", "", "    literal |x|", "b \\|y\\|"]


def test_benchmark_pages_list_every_script_and_results_file(generated):
    index = (generated / "benchmarks" / "index.md").read_text()
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        if not script.name.startswith("_"):
            assert f"| `{script.name}` | `.venv/bin/python benchmarks/{script.name}" in index, script.name
    for result in (ROOT / "benchmarks" / "results").glob("*.json"):
        if not result.stem.endswith("_quick"):
            assert (generated / "benchmarks" / f"{result.stem}.md").exists()
    assert "| task | data size | ratio | target | met | status | results |" in index
