"""Parallel execution: the one place that decides between in-process, local-cluster and
remote-cluster execution of independent tasks (Dask distributed).

- ``workers=1`` (and no scheduler): a plain loop in this process; no cluster is started.
- ``workers=N > 1`` (default: the machine's CPU count): a ``distributed.LocalCluster`` of ``N``
  worker *processes* with one thread each, whose BLAS/OpenMP pools are limited to one thread
  (``WORKER_ENV``) so that PyTensor and nutpie inside the workers do not oversubscribe the cores.
- ``scheduler="tcp://host:8786"``: an existing Dask scheduler (a cluster started elsewhere).

Results come back in task order. Nothing here draws random numbers: a task that needs
randomness carries its own seed (see :func:`spawn_seeds`), so results are bit-identical
whatever the worker count.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from bayesirt.errors import ConfigError
from bayesirt.utils.options import declare, option
from bayesirt.utils.progress import progress_bar

#: The options of every function that runs in parallel, declared once.
WORKERS = option(None, "worker processes (1: in this process) [one per core]", type=int, low=1)
SCHEDULER = option(None, "address of an existing Dask scheduler (instead of local workers)", type=str)

__all__ = ["WORKERS", "SCHEDULER", "parallel_map", "shared_cluster", "blas_threads", "spawn_seeds", "WORKER_ENV", "CONNECT_TIMEOUT"]

#: How long to wait for an existing scheduler to answer.
CONNECT_TIMEOUT = "30s"

#: Environment of every local worker process: one thread per BLAS/OpenMP pool.
WORKER_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
}


def spawn_seeds(seed: int, n: int) -> list[int]:
    """``n`` independent task seeds derived from one seed (``numpy.random.SeedSequence.spawn``).

    Returns plain integers in ``[0, 2**31)`` (31 bits of each child's state: the range every
    seed-taking library accepts, including NumPy's legacy ``RandomState`` used by PyMC's ADVI),
    so they can be passed on and written to files.
    """
    children = np.random.SeedSequence(seed).spawn(n)
    return [int(c.generate_state(1, dtype=np.uint32)[0] >> np.uint32(1)) for c in children]


@declare()
def parallel_map(
    function: Callable[[Any], Any],
    tasks: Sequence[Any],
    *,
    workers: int | None = WORKERS,
    scheduler: str | None = SCHEDULER,
    progress: bool = True,
    description: str = option("tasks", "what the progress bar counts"),
    on_result: Callable[[int, Any], None] | None = option(None, "called with (task index, result) as each task "
                                                                "finishes, in this process", type=object,
                                                          cli="a Python callable", toml="a Python callable"),
) -> list[Any]:
    """Apply ``function`` to every task; return the results in task order.

    Parameters
    ----------
    function : callable
        Takes one task. Must be importable by the workers (a module-level function) when run on
        a cluster; tasks and results must be picklable.
    tasks : sequence
        One element per call; each should carry its own seed if ``function`` is random.
    workers : int, optional
        ``1``: run serially in this process. ``N > 1``: a local cluster of ``N`` single-threaded
        processes. Default: ``os.cpu_count()`` (serial on a one-core machine). Ignored when
        ``scheduler`` is given.
    scheduler : str, optional
        Address of an existing Dask scheduler (e.g. ``"tcp://10.0.0.5:8786"``).
    progress : bool, default True
        A progress bar over tasks (advanced as tasks finish, in any order).
    description : str
        Label of the progress bar.
    on_result : callable, optional
        ``on_result(index, result)`` in this process as each task finishes (in any order): per-task
        progress lines of the caller.

    Returns
    -------
    list
        ``[function(t) for t in tasks]``, whatever the execution mode. An exception raised by a
        task is re-raised here.
    """
    tasks = list(tasks)
    if scheduler is None:
        workers = workers or os.cpu_count() or 1
        if workers == 1 or len(tasks) <= 1:
            return _serial(function, tasks, progress, description, on_result)
    return _distributed(function, tasks, workers, scheduler, progress, description, on_result)


@contextlib.contextmanager
def blas_threads(n: int | None) -> Iterator[None]:
    """Limit BLAS threads to ``n`` (threadpoolctl) inside the block; None leaves them alone.

    On the 2-core benchmark machine, under load, one thread was faster for the audit's folds
    (K selection 1.0 vs 2.5 s, purification 10.7 vs 14.8 s at 5,000 x 1,267) and for MML.
    """
    if n is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=int(n), user_api="blas"):
        yield


@contextlib.contextmanager
def shared_cluster(workers: int | None, scheduler: str | None) -> Iterator[tuple[int | None, str | None]]:
    """One local cluster for several :func:`parallel_map` calls (a cluster takes seconds to start).

    Yields the ``(workers, scheduler)`` to pass on: the address of a started local cluster of
    ``workers`` single-threaded processes, or the arguments unchanged when a ``scheduler`` is
    given or ``workers`` is 1 (nothing is started). The cluster is closed on exit.
    """
    workers = workers or os.cpu_count() or 1
    if scheduler is not None or workers == 1:
        yield workers, scheduler
        return
    from distributed import LocalCluster

    # silence_logs 50 (CRITICAL): a task's error reaches the caller through its future; what the workers would log
    # beyond that is noise, like the failed heartbeats of workers still busy when an interrupt closes the cluster
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                      env=dict(WORKER_ENV), silence_logs=50) as cluster:
        yield workers, cluster.scheduler_address


def _serial(function, tasks, progress, description, on_result) -> list:
    out = []
    with progress_bar(len(tasks), description, enabled=progress) as advance:
        for k, task in enumerate(tasks):
            out.append(function(task))
            if on_result is not None:
                on_result(k, out[-1])
            advance(1)
    return out


def _distributed(function, tasks, workers, scheduler, progress, description, on_result) -> list:
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover (a declared dependency)
        raise ConfigError("parallel_map: parallel runs need the 'distributed' package; reinstall bayesirt "
                          "(pip install -e .)") from None

    with shared_cluster(min(workers, len(tasks)) if scheduler is None else workers, scheduler) as (_, address):
        try:
            client = Client(address, timeout=CONNECT_TIMEOUT)
        except OSError as err:
            raise ConfigError(f"parallel_map: cannot reach the Dask scheduler at {address} ({err}); check the "
                              "address or omit it to run locally") from None
        return _gather(client, function, tasks, progress, description, on_result)


def _gather(client, function, tasks, progress, description, on_result) -> list:
    from distributed import as_completed

    try:
        # pure=False: identical tasks are still separate calls; index keys keep the order.
        futures = client.map(function, tasks, pure=False)
        index = {f.key: k for k, f in enumerate(futures)}
        results: list = [None] * len(tasks)
        with progress_bar(len(tasks), description, enabled=progress) as advance:
            for future in as_completed(futures):
                k = index[future.key]
                results[k] = future.result()  # re-raises a task's exception
                if on_result is not None:
                    on_result(k, results[k])
                advance(1)
        return results
    finally:
        client.close()
