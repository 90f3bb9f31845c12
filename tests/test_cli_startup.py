"""The command line answers ``--help``, ``--version`` and a refused setting without importing the
samplers: building the parser of any command (its declared options) loads neither PyMC, PyTensor,
numba, nutpie nor bayesirt's compiled kernels. Each case runs in a fresh interpreter, since
``sys.modules`` only grows. How long it takes is measured in ``benchmarks/cli_startup.py``, not
asserted here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bayesirt.cli.parser import COMMANDS, cli_options, command_job

ROOT = Path(__file__).resolve().parents[1]
#: Libraries that only fitting and the analyses need (each takes 0.3-1 CPU-second to import).
HEAVY = ("pymc", "pytensor", "numba", "nutpie")

#: Run in a fresh interpreter: the Python statements given, then print which heavy modules are loaded.
_PROBE = """
import json, sys
{body}
kernels = [m for m in sys.modules if m.startswith("bayesirt.") and (
    m.rsplit(".", 1)[-1].endswith(("kernel", "kernels")) or m.endswith((".nutpie_direct", ".numba_cache")))]
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set({heavy!r}))
print(json.dumps({{"heavy": heavy, "kernels": sorted(kernels), "status": status, "text": text}}))
"""


def _probe(body: str) -> dict:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _PROBE.format(body=body, heavy=HEAVY)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _main(argv: list[str]) -> str:
    """Statements calling ``bayesirt.cli.main.main(argv)``: its exit status in ``status``, what it
    printed in ``text``."""
    return ("import contextlib, io\nfrom bayesirt.cli.main import main\nout = io.StringIO()\n"
            "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):\n"
            f"    try:\n        status = main({argv!r})\n    except SystemExit as exit:\n        status = exit.code\n"
            "text = out.getvalue()\n")


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.slow
def test_a_commands_help_imports_no_sampler_or_kernel(command):
    """``bayesirt COMMAND --help`` lists every declared option of the command's job."""
    found = _probe(_main([command, "--help"]))
    assert found["status"] == 0
    assert found["heavy"] == [] and found["kernels"] == []
    flags = [opt.cli_flag for opt in cli_options(command_job(command)).values()]
    assert flags and [f for f in flags if f not in found["text"]] == []


@pytest.mark.parametrize("argv", [["--version"], ["--help"]])
@pytest.mark.slow
def test_help_and_version_import_no_sampler_or_kernel(argv):
    found = _probe(_main(argv))
    assert found["status"] == 0
    assert found["heavy"] == [] and found["kernels"] == []


@pytest.mark.parametrize("argv", [["fit", "lsat7", "--method", "nut"], ["fit", "lsat7", "--draws", "0"],
                                  ["audit", "lsat7", "--workers", "0"]], ids=["choice", "range", "audit range"])
@pytest.mark.slow
def test_a_refused_setting_is_refused_before_any_sampler_or_kernel_loads(tmp_path, argv):
    """A value that is not a choice or out of its range ends the command with the usage status, having read
    no data (issue 41 measured ``audit DATA --workers 0`` refused only after the audit's folds ran)."""
    found = _probe(_main([*argv, "--out", str(tmp_path / "out")]))
    assert found["status"] == 2
    assert found["heavy"] == [] and found["kernels"] == []
    assert f"got {argv[-1]}" in found["text"] or f"{argv[-1]!r}" in found["text"]  # names the value given
    assert argv[-2].lstrip("-") in found["text"]  # and the option
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_probe_sees_a_sampler_when_one_is_loaded():
    """The check can fail: importing the fitting engine's kernels is seen."""
    found = _probe("import bayesirt.inference.nutpie_direct\nstatus, text = 0, ''")
    assert "numba" in found["heavy"] and "bayesirt.inference.nutpie_direct" in found["kernels"]
