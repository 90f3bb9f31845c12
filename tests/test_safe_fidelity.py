"""The fidelity table of docs/guide/safety.md (SAFE paper -> bayesirt function -> default) is kept true: every
default it names is the function's (or module constant's) actual default, and the suite file
runs the paper's analysis."""

import ast
import importlib
import inspect
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _rows():
    text = (ROOT / "docs" / "guide" / "safety.md").read_text()
    section = text.split("## Fidelity to the SAFE paper", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[1].startswith("`bayesirt."):
            rows.append((cells[0], cells[1].strip("`"), cells[2]))
    return rows


ROWS = _rows()


def test_the_table_is_there():
    assert len(ROWS) >= 20


def _resolve(path: str):
    module, _, name = path.rpartition(".")
    return importlib.import_module(module), name


@pytest.mark.parametrize("section,target,default", ROWS, ids=[r[0][:40] for r in ROWS])
def test_each_named_default_is_the_actual_default(section, target, default):
    module, name = _resolve(target)
    obj = getattr(module, name)
    if default == "-":
        assert callable(obj)
        return
    for pair in default.strip("`").split(";"):
        key, _, value = pair.strip().strip("`").partition("=")
        expected = ast.literal_eval(value)
        if inspect.isfunction(obj):
            actual = inspect.signature(obj).parameters[key].default
        else:
            assert key == name, f"{target}: a constant row names the constant itself"
            actual = obj
        assert actual == expected, f"{section}: {target} {key} is {actual!r}, the docs say {expected!r}"


def test_suite_file_runs_the_papers_analysis():
    spec = tomllib.loads((ROOT / "analyses" / "safety_suite.toml").read_text())["safety"]
    assert max(spec["cat"]["budgets"]) == 200 and spec["cat"]["splits"] == 20
    assert spec["cat"]["random_subsets"] == 100
    factors = spec["factors"]
    assert factors["cohort"] == "complete" and factors["disattenuate"] is False and factors["rotation"] == "oblimin"
    assert "polarity" not in factors  # only declared benchmarks are reversed
    assert spec["sandbag"]["mode"] == "ability_shift" and spec["sandbag"]["test_length"] == 40
    assert spec["personfit"]["fpr"] == spec["sandbag"]["fpr"] == 0.1


def test_fit_mml_mirt_itself_stays_ml():
    from bayesirt.frequentist.mml_mirt import fit_mml_mirt

    assert inspect.signature(fit_mml_mirt).parameters["loading_prior"].default is None
