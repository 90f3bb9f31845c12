"""Progress where no terminal watches (batch jobs, CI, nohup): plain lines per stage, at every tenth of
a loop and as a heartbeat, with elapsed time and an estimate; bars on terminals; nothing when off."""

import io
import json
import re
import time

import numpy as np
import pytest

from bayesirt.data import save_responses
from bayesirt.data.datasets.simulate import simulate_pl
from bayesirt.jobs.suite import _banks_heading, run_safety_suite
from bayesirt.safety.scopes import Scope
from bayesirt.utils.progress import format_duration, heartbeat, progress_bar, show_progress, stage


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture(autouse=True)
def _progress_on():
    show_progress(True)
    yield
    show_progress(True)


def _lines(stream) -> list[str]:
    return stream.getvalue().splitlines()


def test_a_loop_off_a_terminal_writes_a_line_per_tenth_with_an_estimate():
    out = io.StringIO()
    with progress_bar(20, "fits", stream=out, heartbeat=3600, min_gap=0) as advance:
        for _ in range(20):
            advance(1)
    quick = io.StringIO()
    with progress_bar(20, "fits", stream=quick, heartbeat=3600) as advance:  # a quick loop: first and last line
        for _ in range(20):
            advance(1)
    assert len(_lines(quick)) == 2
    lines = _lines(out)
    assert lines[0] == "bayesirt: fits: started, 20 steps"
    assert lines[-1].startswith("bayesirt: fits: done, 20 steps in ")
    middle = lines[1:-1]
    assert [int(re.search(r"fits: (\d+)/20 ", m).group(1)) for m in middle] == list(range(2, 20, 2))
    assert all(re.search(r"\(\d+%\) after \d+ s, about \d+ s left$", m) for m in middle)


def test_the_estimate_is_the_mean_time_per_step_times_the_steps_left(monkeypatch):
    clock = iter([0.0, 0.0, 10.0, 10.0, 10.0, 10.0, 10.0])  # start, first line, then the 1st tenth after 10 s
    monkeypatch.setattr("bayesirt.utils.progress.time.monotonic", lambda: next(clock, 10.0))
    out = io.StringIO()
    with progress_bar(10, "splits", stream=out, heartbeat=3600) as advance:
        advance(1)
    assert "bayesirt: splits: 1/10 (10%) after 10 s, about 1 min 30 s left" in _lines(out)
    assert _lines(out)[-1] == "bayesirt: splits: done, 1 of 10 steps in 10 s"


def test_a_heartbeat_when_a_step_takes_long():
    out = io.StringIO()
    with progress_bar(1000, "marginal likelihood", stream=out, heartbeat=0.05) as advance:
        time.sleep(0.6)
        advance(1)
        time.sleep(0.6)
    beats = [line for line in _lines(out) if "after" in line and "done" not in line]
    assert any("0/1,000 (0%)" in b and "no step finished yet (no estimate)" in b for b in beats)
    assert any("1/1,000 (0%)" in b and "left" in b for b in beats)


def test_a_failed_loop_says_where_it_stopped():
    out = io.StringIO()
    with pytest.raises(RuntimeError), progress_bar(4, "refits", stream=out, heartbeat=3600) as advance:
        advance(1)
        raise RuntimeError("boom")
    assert _lines(out)[-1].startswith("bayesirt: refits: stopped at 1/4 after ")


def test_a_terminal_gets_a_bar_not_lines_and_no_progress_gets_nothing():
    tty = _Terminal()
    with progress_bar(5, "fits", stream=tty) as advance:
        advance(5)
    assert "bayesirt:" not in tty.getvalue()
    show_progress(False)
    quiet = io.StringIO()
    with progress_bar(5, "fits", stream=quiet) as advance:
        advance(5)
    stage("a stage", stream=quiet)
    assert quiet.getvalue() == ""
    show_progress(True)
    stage("a stage", stream=quiet, enabled=False)
    assert quiet.getvalue() == ""
    stage("a stage", stream=quiet)
    assert quiet.getvalue() == "bayesirt: a stage\n"


def test_a_step_without_progress_of_its_own_says_it_is_still_running():
    out, tty = io.StringIO(), _Terminal()
    with heartbeat("fit: nuts", stream=out, every=0.05), heartbeat("fit: nuts", stream=tty, every=0.05):
        time.sleep(0.4)
    assert _lines(out) and all(re.fullmatch(r"bayesirt: fit: nuts: still running after \d+ s", x) for x in _lines(out))
    assert tty.getvalue() == ""


def test_format_duration():
    assert [format_duration(s) for s in (0.4, 59.4, 61, 3599, 3600 * 2 + 7 * 60 + 1)] == [
        "0 s", "59 s", "1 min 01 s", "59 min 59 s", "2 h 07 min"]


def _scope(name):
    return Scope(name, None, {name: 1}, 1)


def test_bank_headings_name_what_was_built():
    banks = [_scope("arc"), _scope("gsm8k"), _scope("composite")]
    assert _banks_heading("cat", banks, "the factors step did not run or failed") == (
        "# cat: one item bank per benchmark and the sign-aligned composite; no latent-ability bank (the factors "
        "step did not run or failed)")
    assert _banks_heading("cat", banks + [_scope("ability1"), _scope("ability2")], "") == (
        "# cat: one item bank per benchmark, the sign-aligned composite and 2 latent-ability bank(s) "
        "(ability1, ability2)")


@pytest.mark.slow
def test_the_suite_says_which_step_and_bank_it_is_on(tmp_path, capsys):
    theta = np.random.default_rng(4).normal(size=60)
    files = [str(save_responses(simulate_pl("2pl", n_items=12, n_models=60, seed=k, theta=theta)[0],
                                tmp_path / f"bench{k}.nc")) for k in range(2)]
    out = run_safety_suite(files, tmp_path / "suite", steps=["cat", "factors"],
                           options={"cat": {"budgets": [4], "splits": 2, "random_subsets": 2, "workers": 1}})
    err = capsys.readouterr().err.splitlines()
    assert "bayesirt: safety step 1 of 2, factors: started" in err
    assert any(line.startswith("bayesirt: safety step 1 of 2, factors: skipped (the factor structure needs three")
               for line in err)
    banks = [line for line in err if line.startswith("bayesirt: cat: item bank")]
    assert banks == ["bayesirt: cat: item bank 1 of 3, bench0 (12 items x 60 models)",
                     "bayesirt: cat: item bank 2 of 3, bench1 (12 items x 60 models)",
                     "bayesirt: cat: item bank 3 of 3, composite (24 items x 60 models)"]
    assert any(re.fullmatch(r"bayesirt: safety step 2 of 2, cat: finished after \d+ s", line) for line in err)
    assert any(line.startswith("bayesirt: CAT study splits: done, 2 steps in") for line in err)
    assert (out / "cat" / "report.md").read_text().startswith(
        "# cat: one item bank per benchmark and the sign-aligned composite; no latent-ability bank (the factor "
        "structure needs three or more benchmark files)")
    assert json.loads((out / "summary.json").read_text())["steps"]["cat"]["status"] == "finished"
