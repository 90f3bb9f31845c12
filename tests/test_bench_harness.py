"""benchmarks/harness.py's comparisons of every NUTS spec family (issue 43): their commands, and the date and
source of a results JSON of several cases (one per missing share), which sit in its cases."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import harness  # noqa: E402


def test_every_family_is_a_comparison_with_its_own_command_and_results():
    assert {c.name for c in harness.COMPARISONS} >= {f"numpyro-{f}" for f in ("1pl", "mirt-confirmatory", "dif")}
    comp = harness.BY_NAME["numpyro-mirt-confirmatory"]
    full, quick = comp.command(False), comp.command(True)
    assert "--spec mirt-confirmatory --missing 0,0.5 --seeds 3" in full
    assert full.endswith("--out benchmarks/results/nuts_numpyro_200x500_mirt-confirmatory.json")
    assert quick.endswith("--quick --out benchmarks/results/nuts_numpyro_200x500_mirt-confirmatory_quick.json")
    assert harness.BY_NAME["numpyro"].command(False) == (f"{harness.PY} benchmarks/nuts_numpyro.py --data-seeds 5 "
                                                         "--data-seed 1 --seeds 3 --seed 1 --out "
                                                         "benchmarks/results/nuts_numpyro.json")


def test_a_run_of_several_cases_takes_its_first_case_date_and_source(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "RESULTS", tmp_path)
    monkeypatch.setattr(harness, "ROOT", tmp_path.parent)
    row = {"task": "t", "status": "ok", "date": "2026-12-06T23:27:54+0000"}
    case = {"date": "2026-12-06T23:27:54+0000", "bayesirt_source": {"head": "9c88dc9d0a6a", "uncommitted": []},
            "benchmark_rows": [row]}
    (tmp_path / "nuts_numpyro_200x500_2pl.json").write_text(
        json.dumps({"command": "c", "cases": [case, case | {"date": "later"}], "benchmark_rows": [row, row]}))
    rows, source = harness.rows_for(harness.BY_NAME["numpyro-2pl"], False, {})
    assert len(rows) == 2
    assert source["date"] == "2026-12-06T23:27:54+0000" and source["source"] == "run at 9c88dc9d0a"
