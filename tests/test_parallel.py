"""The parallel layer: per-task seeds, identical results serially and on a local Dask cluster,
results in task order, worker thread limits, task errors surfacing, bad arguments."""

import os
import time

import numpy as np
import pytest

from bayesirt.errors import BayesIRTError
from bayesirt.utils.parallel import WORKER_ENV, parallel_map, spawn_seeds


def _random_task(task):
    """Seeded work whose finishing order differs from the task order."""
    index, seed = task
    time.sleep(0.05 * (index % 3 == 0))
    rng = np.random.default_rng(seed)
    return index, rng.normal(size=3).tolist(), os.environ.get("OMP_NUM_THREADS"), os.getpid()


def _fails_on_three(task):
    if task == 3:
        raise ValueError("task three failed")
    return task


def test_spawn_seeds_are_reproducible_distinct_and_prefix_stable():
    seeds = spawn_seeds(7, 50)
    assert seeds == spawn_seeds(7, 50)
    assert len(set(seeds)) == 50 and all(0 <= s < 2**31 for s in seeds)
    assert spawn_seeds(7, 10) == seeds[:10]  # child k does not depend on how many are spawned
    assert spawn_seeds(8, 10) != seeds[:10]


@pytest.mark.slow
def test_one_and_two_workers_give_identical_results_in_task_order():
    tasks = list(zip(range(12), spawn_seeds(3, 12), strict=True))
    serial = parallel_map(_random_task, tasks, workers=1, progress=False)
    cluster = parallel_map(_random_task, tasks, workers=2, progress=False)
    assert [r[:2] for r in serial] == [r[:2] for r in cluster]
    assert [r[0] for r in cluster] == list(range(12))
    assert {r[3] for r in serial} == {os.getpid()}  # workers=1 runs in this process
    assert os.getpid() not in {r[3] for r in cluster}  # workers=2 runs in worker processes
    assert {r[2] for r in cluster} == {WORKER_ENV["OMP_NUM_THREADS"]} == {"1"}


@pytest.mark.slow
def test_a_task_error_is_raised_to_the_caller():
    with pytest.raises(ValueError, match="task three failed"):
        parallel_map(_fails_on_three, range(5), workers=1, progress=False)
    with pytest.raises(ValueError, match="task three failed"):
        parallel_map(_fails_on_three, range(5), workers=2, progress=False)


@pytest.mark.parametrize("workers", [0, -2, 1.5, True])
def test_bad_worker_counts_are_refused(workers):
    with pytest.raises(BayesIRTError, match="The 'workers' parameter of parallel_map must be a positive integer or None"):
        parallel_map(_random_task, [(0, 1)], workers=workers, progress=False)


@pytest.mark.slow
def test_unreachable_scheduler_is_one_clear_error(monkeypatch):
    monkeypatch.setattr("bayesirt.utils.parallel.CONNECT_TIMEOUT", "1s")
    with pytest.raises(BayesIRTError, match="cannot reach the Dask scheduler"):
        parallel_map(_random_task, [(0, 1), (1, 2)], scheduler="tcp://127.0.0.1:1", progress=False)
