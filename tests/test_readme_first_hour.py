"""The README's "Your first hour" section runs as written: its ```bash and ```python blocks, in order, in a
fresh folder where ``.venv/bin/bayesirt`` is this interpreter's ``python -m bayesirt``; every command exits 0
and writes the files the section names."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Your first hour"


def first_hour_blocks(readme: str) -> list[tuple[str, str]]:
    """``(language, code)`` of every fenced bash/python block of the section, in order."""
    start = readme.index(SECTION + "\n")
    end = readme.find("\n## ", start + len(SECTION))
    body = readme[start:end if end >= 0 else None]
    blocks = re.findall(r"^```(bash|python)\n(.*?)^```$", body, flags=re.S | re.M)
    assert blocks and all(lang in ("bash", "python") for lang, _ in blocks)
    return blocks


def named_outputs(readme: str) -> list[str]:
    """The folders the commands write (``--out X``, ``out = "X"``) and the files the prose names in them
    (``first/...``), relative to the working folder."""
    start = readme.index(SECTION + "\n")
    body = readme[start:readme.find("\n## ", start + len(SECTION))]
    folders = re.findall(r"--out (\S+)", body) + re.findall(r'^out = "([^"]+)"', body, flags=re.M)
    files = [f for f in re.findall(r'"(first/[^"\s]+\.\w+)"', body) if not f.endswith(".toml")]
    for folder in folders:  # `file.ext` names in the paragraph that introduces the folder: `first/x/` holds ...
        para = re.search(rf"`{re.escape(folder)}/` holds (.*?)(?:\n\n|\Z)", body, flags=re.S)
        if para:
            files += [f"{folder}/{name}" for name in re.findall(r"`([\w.]+\.(?:md|csv|png|json|nc))`", para.group(1))]
    return folders + files


def test_the_section_names_what_it_checks():
    readme = (ROOT / "README.md").read_text()
    outputs = named_outputs(readme)
    assert {"first/lsat7", "first/audit", "first/lsat7/posterior.nc", "first/lsat7/abilities.png",
            "first/discrimination.png", "first/audit/audit.nc"} <= set(outputs)
    assert [lang for lang, _ in first_hour_blocks(readme)] == ["bash", "python", "bash"]


@pytest.fixture
def workdir(tmp_path):
    """A fresh folder with ``.venv/bin/bayesirt`` running this interpreter and this source tree."""
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    shim = bin_dir / "bayesirt"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m bayesirt "$@"\n')
    shim.chmod(0o755)
    return tmp_path


@pytest.mark.slow
def test_first_hour_commands_run_and_write_their_files(workdir):
    readme = (ROOT / "README.md").read_text()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               MPLBACKEND="Agg")
    for k, (lang, code) in enumerate(first_hour_blocks(readme)):
        command = ["bash", "-euo", "pipefail", "-c", code] if lang == "bash" else [sys.executable, "-c", code]
        done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"block {k + 1} ({lang}) failed:\n{code}\n--- stderr ---\n{done.stderr[-3000:]}"
    missing = [p for p in named_outputs(readme) if not (workdir / p).exists()]
    assert not missing, f"named in the section but not written: {missing}"
    assert (workdir / "first" / "lsat7" / "models.csv").read_text().count("\n") == 1001  # 1,000 persons + header


def test_the_readme_is_short_and_every_block_in_it_is_run():
    """README.md stays at most ~150 lines and starts with the two set-up commands; every command or Python block
    in it is the set-up block (run by CI as `make run`, `make test`) or one of the first hour's, run above."""
    readme = (ROOT / "README.md").read_text()
    assert readme.count("\n") <= 150
    blocks = re.findall(r"^```(\w+)\n(.*?)^```$", readme, flags=re.S | re.M)
    assert blocks[0] == ("sh", blocks[0][1]) and [line.split()[:2] for line in blocks[0][1].splitlines()] == [
        ["make", "run"], ["make", "test"]]
    first_hour = first_hour_blocks(readme)
    others = [b for b in blocks[1:] if b not in first_hour]
    assert all(lang not in ("sh", "bash", "python", "console") for lang, _ in others), others
