"""Distributed execution on a real Dask cluster: a scheduler and two single-threaded workers
started as separate OS processes (``python -m distributed.cli.dask_scheduler`` / ``dask_worker``
of this environment, on localhost), the audit's resampling sent to them with ``scheduler=`` (API)
and ``--scheduler`` (CLI), the numbers identical to ``workers=1``, and every resampling task seen
running on those two worker processes. The cluster is shut down after the module, pass or fail."""

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import distributed
import numpy as np
import pytest
import xarray as xr

from bayesirt.audit import AuditConfig, run_audit
from bayesirt.audit.engine.bootstrap import BOOTSTRAP_BLOCK
from bayesirt.audit.engine.resampling import CONTROL_BLOCK, control_blocks
from bayesirt.cli.main import main
from bayesirt.data import simulate_dif_benchmark
from bayesirt.utils.parallel import WORKER_ENV

REPLICATES = 199  # --quick's controls and bootstraps: several tasks per resampling, so both workers get work
CONFIG = AuditConfig(quick=True, controls=REPLICATES, composition_bootstrap=REPLICATES, owner_bootstrap=39)
EXPECTED_TASKS = {"_control_task": len(control_blocks(REPLICATES, block=CONTROL_BLOCK)),
                  "_bootstrap_task": len(control_blocks(REPLICATES, block=BOOTSTRAP_BLOCK))}
START_TIMEOUT = 60  # s; a loaded 2-core CI machine starts each process in a few seconds
STOP_TIMEOUT = 15  # s per process after SIGTERM, then SIGKILL


@dataclass
class Cluster:
    address: str
    client: distributed.Client  # observer: task stream and worker facts, never submits work
    worker_pids: set[int]


def _log_summary(path: Path) -> str:
    """The exception lines of a process log (its last lines if none), and where the whole log is."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"no log at {path}"
    errors = [line for line in lines if re.match(r"[\w.]*(Error|Exception|Timeout)\w*: ", line)]
    return "\n".join(dict.fromkeys(errors) or lines[-5:]) + f"\n(full log: {path})"


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM the processes (all at once), wait for them, SIGKILL any still running."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("dask_cluster")
    env = os.environ | WORKER_ENV
    scheduler_file = root / "scheduler.json"
    workers: list[subprocess.Popen] = []
    scheduler = None
    client = None
    logs = []

    def start(name, args):
        log = open(root / f"{name}.log", "wb")  # a file, not a pipe: a full pipe would block the process
        logs.append(log)
        # cwd outside the repository: the workers must import bayesirt as installed in this environment
        try:
            return subprocess.Popen([sys.executable, "-m", *args], stdout=log, stderr=subprocess.STDOUT, env=env,
                                    cwd=root, stdin=subprocess.DEVNULL)
        except OSError as err:
            pytest.skip(f"cannot start a local Dask cluster (cannot run {sys.executable}: {err})")

    def skip(reason, name):
        pytest.skip(f"cannot start a local Dask cluster ({reason}); {name} log:\n{_log_summary(root / f'{name}.log')}")

    try:
        # Port 0: the OS picks a free port when the scheduler binds (no race with other test runs);
        # the scheduler writes the address it got to the scheduler file. --idle-timeout ends it
        # by itself should this process be killed before the finalizer runs.
        scheduler = start("scheduler", ["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                                        "--no-dashboard", "--scheduler-file", str(scheduler_file),
                                        "--idle-timeout", "300s"])
        deadline = time.monotonic() + START_TIMEOUT
        address = None
        while address is None:
            if scheduler.poll() is not None:
                skip(f"the scheduler exited with code {scheduler.returncode}", "scheduler")
            if time.monotonic() > deadline:
                skip(f"no scheduler address after {START_TIMEOUT} s", "scheduler")
            try:
                address = json.loads(scheduler_file.read_text())["address"]
            except (OSError, ValueError, KeyError):  # not written yet, or half written
                time.sleep(0.2)
        for k in range(2):
            workers.append(start(f"worker{k}", ["distributed.cli.dask_worker", address, "--name", f"worker{k}",
                                                "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host",
                                                "127.0.0.1", "--local-directory", str(root / f"worker{k}"),
                                                "--death-timeout", "60s"]))
        try:
            client = distributed.Client(address, timeout="30s", set_as_default=False)
        except OSError as err:
            skip(f"cannot connect to {address}: {err}", "scheduler")
        try:
            client.wait_for_workers(2, timeout=START_TIMEOUT)
        except TimeoutError:
            dead = [f"worker{k}" for k, w in enumerate(workers) if w.poll() is not None]
            skip(f"fewer than 2 workers after {START_TIMEOUT} s (exited: {dead or 'none'})",
                 dead[0] if dead else "worker0")
        yield Cluster(address=address, client=client, worker_pids={w.pid for w in workers})
    finally:
        if client is not None:
            client.close()
        _stop(workers)  # the workers first, then their scheduler
        _stop([scheduler] if scheduler is not None else [])
        for log in logs:
            log.close()


@pytest.fixture(scope="module")
def bench():
    return simulate_dif_benchmark(n_owners=90, n_items=120, seed=3)[0]


def _check_remote(cluster: Cluster, stream: list[dict]) -> None:
    """Every resampling task ran, without error, on the two worker processes started here (both used)."""
    info = cluster.client.scheduler_info()["workers"]
    assert len(info) == 2 and all(w["nthreads"] == 1 for w in info.values())
    pids = cluster.client.run(os.getpid)  # {worker address: pid}, asked of the workers themselves
    assert set(pids.values()) == cluster.worker_pids and os.getpid() not in cluster.worker_pids
    assert set(cluster.client.run(os.getenv, "OMP_NUM_THREADS").values()) == {"1"}
    ran = {name: [r for r in stream if str(r["key"]).startswith(name + "-")] for name in EXPECTED_TASKS}
    assert {name: len(records) for name, records in ran.items()} == EXPECTED_TASKS
    records = [r for records in ran.values() for r in records]
    assert all(r["status"] == "OK" for r in records)
    assert {r["worker"] for r in records} == set(pids)  # both workers, and only them


@pytest.mark.slow
def test_run_audit_on_a_remote_scheduler_gives_the_same_numbers_as_one_local_worker(cluster, bench):
    local = run_audit(bench, CONFIG, workers=1, progress=False)
    with distributed.get_task_stream(client=cluster.client) as stream:
        remote = run_audit(bench, CONFIG, scheduler=cluster.address, progress=False)
    _check_remote(cluster, stream.data)

    assert remote.summary == local.summary and remote.summary["status"] == "estimated"
    assert remote.population.equals(local.population)
    xr.testing.assert_identical(remote.controls, local.controls)
    xr.testing.assert_identical(remote.composition, local.composition)
    xr.testing.assert_identical(remote.owners, local.owners)
    # the equality is not vacuous: the replicates are there and differ from one another
    rate = remote.controls["rate"].sel(pair_set="primary").values
    assert remote.controls.sizes["replicate"] == REPLICATES and np.unique(rate).size > 1
    assert remote.composition.sizes["replicate"] == REPLICATES
    assert np.unique(remote.composition["rate"].sel(pair_set="primary").values).size > 1


def _without_timings(path: Path, name: str):
    """An output file with its run times (the only part that may differ between runs) removed."""
    if name == "summary.json":
        summary = json.loads(path.read_text())
        summary.pop("timings_s", None)
        return summary
    if name == "report.md":
        return [line for line in path.read_text().splitlines() if "Run time" not in line]
    if name == "audit.nc":
        with xr.open_datatree(path) as tree:
            tree = tree.load()
        summary = json.loads(tree.attrs["summary"])
        summary.pop("timings_s", None)
        tree.attrs["summary"] = json.dumps(summary)
        return tree
    return path.read_bytes()


@pytest.mark.slow
def test_cli_audit_with_scheduler_writes_the_same_files_as_one_local_worker(cluster, bench, tmp_path, capsys):
    data = tmp_path / "bench.nc"
    bench.to_netcdf(data)
    common = ["audit", str(data), "--quick", "--controls", str(REPLICATES), "--composition-bootstrap", str(REPLICATES),
              "--no-progress"]
    assert main([*common, "--out", str(tmp_path / "local"), "--workers", "1"]) == 0, capsys.readouterr().err
    with distributed.get_task_stream(client=cluster.client) as stream:
        code = main([*common, "--out", str(tmp_path / "remote"), "--scheduler", cluster.address])
    assert code == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "remote" / "summary.json").read_text())["config"]["controls"] == REPLICATES
    _check_remote(cluster, stream.data)

    names = sorted(p.name for p in (tmp_path / "local").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "remote").iterdir())
    assert {"audit.nc", "summary.json", "random_controls.csv", "composition_bootstrap.csv",
            "controls.png"} <= set(names)
    for name in names:
        local, remote = (_without_timings(tmp_path / side / name, name) for side in ("local", "remote"))
        if name == "audit.nc":
            xr.testing.assert_identical(remote, local)
        else:
            assert remote == local, f"{name} differs between --scheduler and --workers 1"
