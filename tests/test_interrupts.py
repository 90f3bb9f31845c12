"""Interrupts: SIGINT or SIGTERM at any stage of a command ends it with exit 130 and one line, no
traceback, no output folder and no error log; ``compare`` keeps its finished specs for a rerun.

The slow tests start the real command (``python -m bayesirt``), wait for the stage's line on stderr
and send the signal then (no timing: the stage's own progress line is the cue)."""

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bayesirt.cli.main import main
from bayesirt.data.datasets.dif_benchmark import simulate_dif_benchmark
from bayesirt.data.datasets.simulate import simulate_pl
from bayesirt.data.io import save_responses
from bayesirt.utils import interrupts
from bayesirt.utils.outputs import staged_output

ROOT = Path(__file__).resolve().parents[1]
NOTHING = "bayesirt: interrupted: nothing was written"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("interrupt_data")
    for n_items, n_models in ((300, 200), (1000, 300), (60, 80)):
        save_responses(simulate_pl("2pl", n_items=n_items, n_models=n_models, seed=1)[0],
                       root / f"sim_{n_items}x{n_models}.nc")
    save_responses(simulate_dif_benchmark(n_owners=60, n_items=120, seed=2)[0], root / "bench.nc")
    return root


def _interrupt(args, marker, out, sig=signal.SIGINT, timeout=300):
    """Run ``bayesirt ARGS --out OUT``, send ``sig`` when a stderr line contains ``marker``; returns
    (exit status, stderr lines, whether the marker was seen before the process ended)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "bayesirt", *map(str, args), "--out", str(out)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines, seen = [], threading.Event()

    def read():
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if marker in line:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    while not seen.wait(0.05) and proc.poll() is None:
        pass
    if seen.is_set() and proc.poll() is None:
        proc.send_signal(sig)
    status = proc.wait(timeout=timeout)
    reader.join(timeout=10)
    return status, lines, seen.is_set()


def _check_nothing_written(status, lines, seen, out, marker):
    assert seen, f"the stage line {marker!r} never came: {lines}"
    text = "\n".join(lines)
    assert status == 130, text
    assert lines[-1].startswith(NOTHING), text
    assert "Traceback" not in text and "internal error" not in text
    assert not out.exists() and not out.with_name(f"{out.name}.error.log").exists()
    assert not [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]  # no staging left


STAGES = {
    # stage: (arguments, the line that says the stage is running)
    "nuts_warmup": (["fit", "sim_1000x300.nc", "--method", "nuts", "--tune", "3000", "--draws", "100"],
                    "(warm-up)"),
    "nuts_sampling": (["fit", "sim_300x200.nc", "--method", "nuts", "--tune", "200", "--draws", "6000"],
                      "(sampling)"),
    "advi": (["fit", "sim_1000x300.nc", "--method", "advi"], "ADVI (advi): started"),
    "laplace": (["fit", "sim_1000x300.nc", "--method", "laplace"], "Laplace centre search (Newton steps): started"),
    "map": (["fit", "sim_1000x300.nc", "--method", "map"], "by map (MAP-EM"),
    "audit": (["audit", "bench.nc"], "audit: fold 1 of 2"),
    "cat": (["cat", "sim_300x200.nc", "--budgets", "10,25"], "CAT study splits: started"),
}


@pytest.mark.slow
@pytest.mark.parametrize("stage", list(STAGES))
def test_an_interrupt_at_each_stage_writes_nothing(stage, data, tmp_path):
    args, marker = STAGES[stage]
    args = [data / a if a.endswith(".nc") else a for a in args]
    out = tmp_path / "out"
    _check_nothing_written(*_interrupt(args, marker, out), out, marker)


@pytest.mark.slow
def test_sigterm_is_an_interrupt(data, tmp_path):
    out = tmp_path / "out"
    marker = "ADVI (advi): started"
    _check_nothing_written(*_interrupt(["fit", data / "sim_300x200.nc", "--method", "advi"], marker, out,
                                       sig=signal.SIGTERM), out, marker)


@pytest.mark.slow
def test_an_interrupted_score_writes_nothing(data, tmp_path):
    bank = tmp_path / "bank"
    assert main(["fit", str(data / "sim_300x200.nc"), "--method", "map", "--out", str(bank), "--no-progress"]) == 0
    out = tmp_path / "out"
    marker = "score: scoring"
    _check_nothing_written(*_interrupt(["score", bank / "map.nc", data / "sim_300x200.nc", "--samples", "200000"],
                                       marker, out), out, marker)


@pytest.mark.slow
def test_compare_keeps_its_finished_specs_and_a_rerun_continues(data, tmp_path, capsys):
    out = tmp_path / "cmp"
    args = ["compare", data / "sim_60x80.nc", "--specs", "rasch,2pl", "--draws", "1000", "--tune", "300",
            "--chains", "2", "--kfold", "never"]
    status, lines, seen = _interrupt(args, "spec 2 of 2: 2pl - fitting", out)
    text = "\n".join(lines)
    assert seen and status == 130, text
    kept = out.with_name(f".{out.name}.kept")
    assert lines[-1] == (f"bayesirt: interrupted: kept the finished specs rasch (1 of 2) in {kept}; rerun the same "
                         "command (same data, settings and --out) to continue from them"), text
    assert "Traceback" not in text and not out.exists() and len(list(kept.iterdir())) == 1
    # the rerun fits only the spec that was not finished, and removes what was kept
    assert main([*map(str, args), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"continuing an interrupted comparison: rasch kept from it ({kept})" in err
    assert "spec 1 of 2: rasch - fitting" not in err and "spec 2 of 2: 2pl - fitting" in err
    assert (out / "compare.csv").exists() and not kept.exists()


def test_a_swallowed_interrupt_stops_the_writer(tmp_path, monkeypatch):
    """A library that caught the interrupt and returned as if finished (nutpie, PyMC) never gets
    its result written: the staged folder checks the record of the signal."""
    monkeypatch.setitem(interrupts._RECEIVED, "signal", signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with staged_output(tmp_path / "o", force=False) as folder:
            (folder / "x.txt").write_text("partial")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_successful_run_removes_the_error_log_of_a_failed_one(tmp_path):
    out = tmp_path / "lsat7"
    log = tmp_path / "lsat7.error.log"
    log.write_text("Traceback of an earlier failure")
    assert main(["fit", "lsat7", "--method", "advi", "--advi-iterations", "300", "--draws", "20", "--no-progress",
                 "--out", str(out)]) == 0
    assert out.is_dir() and not log.exists()
