"""Hostile input and faults (issue 21): analysis files checked before any work, multi-step runs that
keep what finished and resume, stale staging folders removed, write failures reported in one line
with earlier results intact, and exit statuses that tell usage, output and internal errors apart."""

from __future__ import annotations

import errno
import json
import os
import re
import socket
import subprocess
import sys

import pandas as pd
import pytest

from bayesirt.cli.main import EXIT_INTERNAL, EXIT_OUTPUT, EXIT_USAGE, main
from bayesirt.data.datasets.simulate import simulate_pl
from bayesirt.data.io import save_responses
from bayesirt.errors import OutputError
from bayesirt.utils.outputs import remove_stale_staging, staged_output

QUIET = ["--no-progress"]


@pytest.fixture(scope="module")
def bench_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    files = []
    for k in range(5):
        responses, _ = simulate_pl("2pl", n_items=12, n_models=60, seed=40 + k)
        files.append(str(save_responses(responses, root / f"bench{k}.nc")))
    return files


def _suite(tmp_path, files, tables: str, steps=("information", "personfit", "sandbag"), name="suite.toml"):
    spec = tmp_path / name
    spec.write_text(f'[analysis]\nkind = "safety"\ndata = {json.dumps(files)}\nout = "{tmp_path / "suite"}"\n'
                    f'[safety]\nsteps = {json.dumps(list(steps))}\n{tables}')
    return spec


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("bayesirt: warning:")]
    assert len(lines) == 1 and lines[0].startswith("bayesirt: error:"), err
    return lines[0]


# -- 1. analysis files checked before any work ------------------------------------------------------------

@pytest.mark.parametrize("table, fragment", [
    ("[safety.personfit]\nfpr_typo = 0.1\n",
     r"\[safety.personfit\] unknown option 'fpr_typo' \(did you mean 'fpr'\?\); allowed: \['fpr', 'posterior'"),
    ("[safety.sandbag]\ndirection = \"dwn\"\n", r"\[safety.sandbag\] The 'direction' parameter of sandbag must be one of "
                                                r"\{'down', 'up'\}; got 'dwn' \(did you mean 'down'\?\)\."),
    ("[safety.cat]\nbudgets = [10, 0]\n", r"\[safety.cat\] The 'budgets' parameter of cat must be a list of positive integers"),
    ("[safety.cat]\nsplits = \"20\"\n", r"\[safety.cat\] The 'splits' parameter of cat must be a positive integer; got '20'"),
    ("[safety.personfit]\nfpr = 1.5\n", r"The 'fpr' parameter of personfit must be a number in \(0, 1\); got 1.5\."),
    ("[safety.personfit]\nstatistic = \"lz\"\nseed = true\n", r"The 'seed' parameter of personfit must be a non-negative integer; got True\."),
    ("[safety.sandbags]\nfpr = 0.1\n", r"\[safety\] unknown option 'sandbags' \(did you mean 'sandbag'\?\)"),
])
def test_a_bad_safety_option_is_one_line_before_any_work(tmp_path, capsys, bench_files, table, fragment):
    spec = _suite(tmp_path, bench_files, table)
    assert main(["run", str(spec), *QUIET]) == EXIT_USAGE
    assert re.search(fragment, _one_line_error(capsys))
    assert not (tmp_path / "suite").exists()


def test_fit_table_typo_names_the_closest_option(tmp_path, capsys):
    spec = tmp_path / "fit.toml"
    spec.write_text('[analysis]\nkind = "fit"\ndata = "lsat6"\nmodel = "2pl"\nout = "o"\n[fit]\ndraw = 10\n')
    assert main(["run", str(spec), *QUIET]) == EXIT_USAGE
    assert "[fit] unknown option 'draw' (did you mean 'draws'?)" in _one_line_error(capsys)


@pytest.mark.parametrize("table, steps, fragment", [
    ("[safety.factors]\nn_factors = [1, 2, 3]\n", ("information", "factors"),
     "n_factors: The 'n_factors' parameter of factor_analysis must be at most 2 for 5 benchmarks (3 factors leave -2"),
    ("[safety.cat]\nbudgets = [10, 100]\n", ("information", "cat"),
     "budgets [100] exceed the 60 items of the item bank 'composite'"),
    ("[safety.cat]\nbudgets = [20, 40]\n", ("information", "cat"), "every budget exceeds the 12 items of the item bank 'bench0'"),
    ("[safety.sandbag]\ntest_length = 13\n", ("information", "sandbag"),
     "test_length 13 exceeds the 12 items of the item bank 'bench0'"),
])
def test_what_the_data_cannot_support_stops_the_run_before_any_step(tmp_path, capsys, bench_files, table, steps,
                                                                     fragment):
    spec = _suite(tmp_path, bench_files, table, steps=steps)
    assert main(["run", str(spec), *QUIET]) == EXIT_USAGE
    assert fragment in _one_line_error(capsys)
    assert not (tmp_path / "suite").exists()  # information, listed first, never ran


# -- 2. multi-step jobs keep what finished; --resume ----------------------------------------------------------

SMALL_SANDBAG = "[safety.sandbag]\ntest_length = 10\nstrengths = [0.5, 1.0]\n"


@pytest.mark.slow
def test_a_failing_step_keeps_the_others_and_resume_reruns_only_it(tmp_path, capsys, bench_files, monkeypatch):
    import bayesirt.jobs.safety as personfit
    from bayesirt.errors import DataError

    real = personfit.run_personfit_job

    def broken(*args, **kwargs):
        raise DataError("the cohort has no variance (simulated failure)")

    monkeypatch.setattr(personfit, "run_personfit_job", broken)
    spec = _suite(tmp_path, bench_files, SMALL_SANDBAG)
    assert main(["run", str(spec), *QUIET]) == EXIT_USAGE
    message = _one_line_error(capsys)
    assert "1 of 3 safety steps failed (personfit: the cohort has no variance" in message and "--resume" in message
    out = tmp_path / "suite"
    assert (out / "information" / "report.md").is_file() and (out / "sandbag" / "report.md").is_file()
    assert not (out / "personfit").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert {s: e["status"] for s, e in summary["steps"].items()} == {
        "information": "finished", "personfit": "failed", "sandbag": "finished"}
    assert "**personfit failed**: the cohort has no variance" in (out / "report.md").read_text()
    finished_at = {s: (out / s / "report.md").stat().st_mtime_ns for s in ("information", "sandbag")}

    monkeypatch.setattr(personfit, "run_personfit_job", real)
    assert main(["run", str(spec), "--resume", *QUIET]) == 0
    assert (out / "personfit" / "report.md").is_file()
    assert {s: (out / s / "report.md").stat().st_mtime_ns for s in finished_at} == finished_at  # not rerun
    assert all(e["status"] == "finished" for e in json.loads((out / "summary.json").read_text())["steps"].values())

    # the resumed run equals an uninterrupted one
    (tmp_path / "fresh").mkdir()
    assert main(["run", str(_suite(tmp_path / "fresh", bench_files, SMALL_SANDBAG)), *QUIET]) == 0
    for table in ("personfit/composite/models.csv", "sandbag/bench0/detection.csv", "sandbag/composite/detection.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(out / table), pd.read_csv(tmp_path / "fresh" / "suite" / table))


@pytest.mark.slow
def test_a_bug_in_one_step_exits_1_with_its_traceback_kept(tmp_path, capsys, bench_files, monkeypatch):
    import bayesirt.jobs.safety as cat_study

    monkeypatch.setattr(cat_study, "run_information_job", lambda *a, **k: 1 / 0)
    spec = _suite(tmp_path, bench_files, SMALL_SANDBAG, steps=("information", "personfit"))
    assert main(["run", str(spec), *QUIET]) == EXIT_INTERNAL
    assert "information: internal error (ZeroDivisionError" in _one_line_error(capsys)
    log = tmp_path / "suite" / "information.error.log"
    assert "ZeroDivisionError" in log.read_text() and (tmp_path / "suite" / "personfit").is_dir()


@pytest.mark.slow
def test_a_run_killed_in_its_first_step_resumes(tmp_path, bench_files):
    """A real kill during the first step: summary.json is already there, so --resume finishes the run."""
    spec = _suite(tmp_path, bench_files, "", steps=("information", "personfit"))
    script = ("import os, signal\nimport bayesirt.jobs.safety as c\n"
              "c.run_information_job = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
              f"from bayesirt.cli.main import main\nmain(['run', {str(spec)!r}, '--no-progress'])\n")
    subprocess.run([sys.executable, "-c", script])
    summary = json.loads((tmp_path / "suite" / "summary.json").read_text())
    assert {e["status"] for e in summary["steps"].values()} == {"pending"}
    assert main(["run", str(spec), "--resume", *QUIET]) == 0
    assert (tmp_path / "suite" / "information" / "report.md").is_file()
    assert (tmp_path / "suite" / "personfit" / "report.md").is_file()


def test_resume_needs_an_earlier_run_and_contradicts_force(tmp_path, capsys, bench_files):
    spec = _suite(tmp_path, bench_files, "")
    assert main(["run", str(spec), "--resume", *QUIET]) == EXIT_OUTPUT
    assert "nothing to resume" in _one_line_error(capsys)
    assert main(["run", str(spec), "--resume", "--force", *QUIET]) == EXIT_USAGE
    assert "--force and --resume contradict" in _one_line_error(capsys)


# -- 3. stale staging folders -----------------------------------------------------------------------------------

def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


@pytest.mark.slow
def test_stale_staging_of_a_dead_process_is_removed_and_a_live_ones_kept(tmp_path):
    host = socket.gethostname().replace(".", "-")
    target = tmp_path / "result"
    dead = tmp_path / f".result.{host}.{_dead_pid()}.abc123.partial"
    retired = tmp_path / f".result.{host}.{_dead_pid()}.replaced"
    live = tmp_path / f".result.{host}.{os.getpid()}.def456.partial"
    foreign = tmp_path / f".result.another-host.{_dead_pid()}.ghi789.partial"
    other = tmp_path / f".other.{host}.{_dead_pid()}.jkl.partial"
    for folder in (dead, retired, live, foreign, other):
        folder.mkdir()
        (folder / "x.csv").write_text("half")
    with pytest.warns(UserWarning, match=r"removed 2 staging folder\(s\) left by an interrupted run on .*result"):
        with staged_output(target, force=False) as folder:
            (folder / "done.txt").write_text("ok")
    assert not dead.exists() and not retired.exists()
    assert live.exists() and foreign.exists() and other.exists()  # running, another machine's, another target's
    assert (target / "done.txt").read_text() == "ok"
    assert remove_stale_staging(target) == []


@pytest.mark.slow
def test_a_killed_run_leaves_staging_that_the_next_run_removes(tmp_path, capsys):
    """A real kill: a process stops inside staged_output; the next CLI run on the target cleans up."""
    out = tmp_path / "mml"
    script = (f"import os, signal; from bayesirt.utils.outputs import staged_output\n"
              f"with staged_output({str(out)!r}, force=False) as f:\n"
              f"    (f / 'half.csv').write_text('x'); os.kill(os.getpid(), signal.SIGKILL)\n")
    subprocess.run([sys.executable, "-c", script])
    assert len(list(tmp_path.glob(".mml.*.partial"))) == 1
    with pytest.warns(UserWarning, match=r"removed 1 staging folder\(s\) left by an interrupted run"):
        assert main(["mml", "lsat6", "--out", str(out)]) == 0
    assert list(tmp_path.glob(".mml.*")) == []


# -- 4. write failures ------------------------------------------------------------------------------------------

def test_disk_full_while_writing_is_one_line_and_the_earlier_result_stays(tmp_path, capsys, monkeypatch):
    out = tmp_path / "mml"
    assert main(["mml", "lsat6", "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pd.DataFrame, "to_csv", full)
    assert main(["mml", "lsat6", "--out", str(out), "--force"]) == EXIT_OUTPUT
    message = _one_line_error(capsys)
    assert "No space left on device" in message and "earlier result there is untouched" in message
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["mml"]  # no staging folder left


def test_a_netcdf_write_failure_is_an_output_error(tmp_path, monkeypatch):
    import xarray as xr

    from bayesirt.utils.outputs import write_netcdf

    def read_only(self, *args, **kwargs):
        raise PermissionError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(xr.Dataset, "to_netcdf", read_only)
    with pytest.raises(OutputError, match=r"cannot write .*x.nc \(Read-only file system\)"):
        write_netcdf(xr.Dataset({"a": ("x", [1.0])}), tmp_path / "x.nc")


# -- 6. exit statuses -------------------------------------------------------------------------------------------

def test_exit_statuses_tell_usage_output_and_internal_errors_apart(tmp_path, capsys, monkeypatch):
    out = tmp_path / "mml"
    with pytest.raises(SystemExit) as usage:
        main(["mml"])  # argparse: missing arguments
    assert usage.value.code == EXIT_USAGE
    assert main(["mml", str(tmp_path / "missing.csv"), "--out", str(out)]) == EXIT_USAGE  # data error
    assert main(["mml", "lsat6", "--out", str(out)]) == 0
    assert main(["mml", "lsat6", "--out", str(out)]) == EXIT_OUTPUT  # exists, no --force
    capsys.readouterr()

    import bayesirt.frequentist as frequentist  # the mml job imports fit_mml from it when it runs

    monkeypatch.setattr(frequentist, "fit_mml", lambda *a, **k: {}["no such key"])
    assert main(["mml", "lsat6", "--out", str(tmp_path / "bug")]) == EXIT_INTERNAL
    err = capsys.readouterr().err.strip()
    log = tmp_path / "bug.error.log"
    assert err.count("\n") == 0 and "internal error (KeyError" in err and str(log) in err
    assert "Traceback (most recent call last)" in log.read_text() and "no such key" in log.read_text()
    assert not (tmp_path / "bug").exists()
