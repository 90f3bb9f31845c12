"""Exact-common-model directional checks across two audits (NT B.7) on hand-built records."""

import numpy as np
import pandas as pd
import pytest

from bayesirt.audit.diagnostics.common_models import audit_records, exact_common_shifts
from bayesirt.errors import DataError
from bayesirt.jobs.audit import run_common_models_job


def _records(shifts, families, owners, ids=None):
    ids = ids or [f"m{k}" for k in range(len(shifts))]
    return pd.DataFrame({"model_id": ids, "family": families, "owner": owners, "shift": shifts})


def test_only_common_models_with_the_same_family_enter():
    left = _records([0.01, 0.02, 0.03, -0.05], ["A", "A", "B", "B"], ["o1", "o2", "o3", "o4"])
    right = _records([-0.01, -0.02, 0.04, 0.5], ["A", "A", "B", "A"], ["o1", "o2", "o3", "o4"],
                     ids=["m0", "m1", "m2", "m3"])
    table = exact_common_shifts(left, right, replicates=200, seed=1).set_index("family")
    assert table.loc["A", "models"] == 2 and table.loc["B", "models"] == 1  # m3 changed family: left out
    assert table.loc["A", "left_shift_pp"] == pytest.approx(1.5)
    assert table.loc["A", "right_shift_pp"] == pytest.approx(-1.5)
    assert table.loc["A", "difference_shift_pp"] == pytest.approx(-3.0)  # mean of differences = difference of means
    # every owner replicate of family A draws o1/o2 records whose difference is -2 or -4 pp
    assert -4 <= table.loc["A", "difference_lower_pp"] <= table.loc["A", "difference_upper_pp"] <= -2
    assert bool(table.loc["A", "direction_change"])
    assert table.loc["B", "difference_lower_pp"] == pytest.approx(1.0)  # one owner: a degenerate interval


def test_no_common_model_is_an_error():
    with pytest.raises(DataError, match="no model in common"):
        exact_common_shifts(_records([0.1], ["A"], ["o"]), _records([0.1], ["A"], ["o"], ids=["x"]))


def test_job_reads_two_written_audits(tmp_path):
    rng = np.random.default_rng(0)
    for name, sign in (("left", 1), ("right", -1)):
        folder = tmp_path / name
        folder.mkdir()
        for h in (0, 1):
            n = 20
            frame = _records(list(sign * 0.01 + rng.normal(0, 0.002, n)), ["Llama"] * n,
                             [f"o{k % 7}" for k in range(n)], ids=[f"{h}-{k}" for k in range(n)])
            frame.assign(full=0.5, anchor=0.5 + frame["shift"]).to_csv(folder / f"fold{h}_scores.csv", index=False)
    out = run_common_models_job(tmp_path / "left", tmp_path / "right", tmp_path / "out", owner_bootstrap=100)
    table = pd.read_csv(out / "common_models.csv")
    assert table["models"].item() == 40 and bool(table["direction_change"].item())
    assert "B.7" in (out / "report.md").read_text()
    with pytest.raises(DataError, match="no fold"):
        audit_records(tmp_path)


def test_the_old_name_of_the_owner_bootstrap_still_works_with_a_warning(tmp_path):
    """``replicates`` (Python) and ``--bootstrap`` (CLI) are the old spellings of ``owner_bootstrap``."""
    from bayesirt.cli.main import main
    from bayesirt.utils.options import renamed_options

    with pytest.warns(FutureWarning, match="option 'replicates' is now 'owner_bootstrap'"):
        assert renamed_options(run_common_models_job, {"replicates": 5}, caller="x") == {"owner_bootstrap": 5}
    assert main(["audit-compare", str(tmp_path / "a"), str(tmp_path / "b"), "--bootstrap=-1", "--out",
                 str(tmp_path / "o")]) == 2  # the old flag: checked as the new option, before any audit is read
