"""The embedded LocalCluster's workers: how many this machine runs, and their start, which a signal stops.

Takes the workers asked for (none: one per core) and a LocalCluster started with none. Gives how many
to start: at most what runs at once (the cores, or ``bpe-dask.max-workers``) and, of worker
processes, at most what the memory holds at ``bpe-dask.min-worker-memory`` each (Dask shares the
memory among them, and pauses a worker that holds more than its share: 500 of them on 23 GiB each
got 48 MiB and were paused at once), with one line saying so when it is fewer than asked. The
result never depends on the number of workers, only the time. Then starts them: SIGINT and SIGTERM
(``interrupts``) stop the start at once, the worker processes still starting killed, so that the
cluster closes within seconds and leaves no process behind. Closes it (``close_cluster``) with the
time a loaded machine takes, so that a job whose work is done is never failed by its cluster's close.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager, suppress

from distributed import LocalCluster, Nanny
from distributed.core import Status
from distributed.system import MEMORY_LIMIT

from bpe_dask import interrupts, settings
from bpe_dask.wording import format_bytes, plural

log = logging.getLogger(__name__)
STOP_SECONDS = 30.0  # at most, killing the workers still starting after a signal (it takes a moment)
CLOSE_SECONDS = 60.0  # each worker's, to stop and be reaped (Dask gives 5)


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def planned_workers(asked: int | None) -> int:
    """The worker threads a job plans its partitions for: ``asked`` (one per core by default), at
    most what runs at once (``cluster_size``'s first bound)."""
    return min(asked or cores(), settings.count("max-workers") or cores())


def cluster_size(asked: int | None, processes: bool) -> tuple[int, str]:
    """How many workers (worker processes with ``processes``, else threads of this process) a
    LocalCluster starts for ``asked`` (None: one per core), and the line that says why, if fewer
    than asked: at most what runs at once, and of processes what the memory holds.

    >>> import dask
    >>> with dask.config.set({"bpe-dask.max-workers": 4, "bpe-dask.min-worker-memory": "1MiB"}):
    ...     cluster_size(2, processes=True), cluster_size(500, processes=False)
    ((2, ''), (4, '500 workers asked for: starting 4 threads (bpe-dask.max-workers)'))
    """
    ceiling = settings.count("max-workers")
    count = min(asked or cores(), ceiling or cores())
    if ceiling:
        why = f": starting {how_many(count, processes)} (bpe-dask.max-workers)"
    else:
        why = (
            f" on {plural(cores(), 'core')}: starting {how_many(count, processes)}, the most that run at "
            "once (the result is the same; bpe-dask.max-workers allows more)"
        )
    least = settings.size("min-worker-memory")
    if processes and MEMORY_LIMIT // least < count:
        count = max(1, MEMORY_LIMIT // least)
        why = (
            f": starting {how_many(count, processes)}, so that each has {format_bytes(least)} of this "
            f"machine's {format_bytes(MEMORY_LIMIT)} (bpe-dask.min-worker-memory)"
        )
    return count, f"{plural(asked, 'worker')} asked for{why}" if asked and asked > count else ""


def how_many(count: int, processes: bool) -> str:
    """``1 worker process``, ``2 worker processes``, ``2 threads``."""
    if processes:
        return f"{count:,} worker process{'' if count == 1 else 'es'}"
    return plural(count, "thread")


def start_workers(cluster: LocalCluster, count: int) -> None:
    """Start ``count`` workers in ``cluster`` (started with none) and wait for them all, as
    LocalCluster's own constructor does, but so that a signal (raised here by ``interrupts.wait``) stops
    the start within seconds: the worker processes still starting are killed (``_stop_starting``)
    and the signal goes on, for the caller to close the cluster. A worker that fails to start is
    Dask's error, the others stopped the same way."""
    while len(cluster.worker_spec) < count:
        cluster.worker_spec.update(cluster.new_worker_spec())

    async def start() -> None:
        await cluster._correct_state()  # what LocalCluster's constructor awaits: every worker up

    starting = asyncio.run_coroutine_threadsafe(start(), cluster.loop.asyncio_loop)
    try:
        interrupts.wait(starting.result)
    except BaseException:
        _stop_starting(cluster, starting)
        raise


def _stop_starting(cluster: LocalCluster, starting: Future) -> None:
    """Kill the worker processes of ``cluster`` still starting, until its start is over: closing it
    would otherwise wait for each to come up first (seconds each, minutes for many). A worker up
    already is left to close as usual; Dask's complaints about the ones killed are ours, not
    news."""
    deadline = time.monotonic() + STOP_SECONDS
    with _quiet("distributed.nanny", "distributed.deploy.spec", "distributed.core"):
        while not starting.done() and time.monotonic() < deadline:
            for nanny in list(cluster._created):  # every worker it made, up or starting
                pid = nanny.pid if isinstance(nanny, Nanny) and nanny.status == Status.init else None
                if pid:
                    with suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            with suppress(Exception):  # still starting (a timeout), or failed: the workers killed
                starting.result(timeout=0.05)


def close_cluster(cluster: LocalCluster) -> None:
    """Close the embedded cluster, its workers first, each given ``CLOSE_SECONDS``. Dask gives a
    worker 5 s, and on a loaded machine a worker process it has killed may not be reaped within
    them: Dask then raises TimeoutError (and logs it twice), which would fail a job whose work is
    done before it publishes. A worker not gone even then was killed; the system reaps it."""
    with _quiet("distributed.nanny", "distributed.deploy.spec", "tornado.application"):
        for worker in list(cluster.workers.values()):
            with suppress(TimeoutError):
                cluster.sync(worker.close, timeout=CLOSE_SECONDS)
        with suppress(TimeoutError):
            cluster.close()


@contextmanager
def _quiet(*names: str) -> Iterator[None]:
    """The loggers ``names`` say nothing for the block."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
