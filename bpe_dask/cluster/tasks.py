"""Tasks on a cluster: delayed tasks in, their results out, a failure as one line; and what the
cluster has (its threads, its workers' peak memory, whether it shares this machine).

``run_tasks`` computes a job's tasks, tells a ``MapProgress`` of the map tasks as they read and as
they finish, and, on any failure or signal, stops them all (``let_go``; and sets the job's stop
event, for a task that commits an output at its end) before the failure goes on as one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import resource
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

from dask.delayed import Delayed
from distributed import Client, Event, Future, LocalCluster

from bpe_dask import interrupts
from bpe_dask.cluster.failures import failures_explained
from bpe_dask.cluster.progress import MapProgress

log = logging.getLogger(__name__)

# Seconds a stopped job waits for its tasks still running on a cluster it does not own to end (each
# stops at its next block once told, ``stages.read_events``), before it removes its work directory.
STOP_WAIT = 10.0


def workers_of(client: Client) -> dict[str, dict]:
    """The cluster's workers, by address, as the scheduler has them now. Not ``scheduler_info()``:
    it returns Dask's cached identity, which the client's periodic refresh (asking for no workers)
    may overwrite between its update and its return, so a busy machine saw no workers at all."""
    return client.sync(client.scheduler.identity, n_workers=-1)["workers"]


def cluster_threads(client: Client) -> int:
    return sum(w.get("nthreads", 1) for w in workers_of(client).values()) or 1


def run_tasks(
    client: Client,
    tasks: list[Delayed],
    progress: MapProgress | None = None,
    sizes: Sequence[int | None] = (),
    measure: Callable[[Any], tuple[int, int]] | None = None,
    stop: str | None = None,
) -> list:
    """Compute ``tasks`` and gather their results; a failure stops them all and is one line.

    Stopping a task already running is up to the task (``let_go``): one that commits an output at
    its end (``stages.encode.stream_shards``) is also told through the Dask event ``stop``, set here
    first, which it looks at just before committing (``stages.read_events.stopped``).

    The first ``len(sizes)`` tasks are map tasks over that many input bytes each (``None``: known
    once done): ``progress`` hears how far each has read as it runs, and of each as it finishes,
    with what ``measure`` tells of its result: its bytes (where its size was not known) and a
    second quantity, such as its tokens.
    """
    size_of = {task.key: size for task, size in zip(tasks, sizes, strict=False)}
    listening = progress.listening(client, size_of) if progress is not None else nullcontext()
    futures = client.compute(tasks)
    finished: queue.SimpleQueue[Future] = queue.SimpleQueue()
    for future in futures:
        future.add_done_callback(finished.put)
    try:
        with failures_explained(client), listening:
            for _ in futures:  # as they finish, in short waits that a signal stops (``interrupts``)
                future = interrupts.wait(lambda seconds: _next(finished, seconds))
                if future.status != "finished":
                    future.result()  # its error
                if progress is not None and future.key in size_of:
                    size, extra = measure(future.result()) if measure else (0, 0)
                    known = size_of[future.key]
                    progress.task_done(size if known is None else known, extra, future.key)
            return client.gather(futures)
    except BaseException:
        if stop is not None:
            with contextlib.suppress(Exception):  # the scheduler is gone: so are the tasks
                Event(stop, client=client).set()
        let_go(client, futures)  # a failed job stops at once, before its work directory goes
        raise


def _next(finished: queue.SimpleQueue[Future], seconds: float) -> Future:
    try:
        return finished.get(timeout=seconds)
    except queue.Empty:
        raise TimeoutError from None


def let_go(client: Client, futures: Sequence[Future]) -> None:
    """Stop a job's tasks: the scheduler forgets those no other client wants and tells their
    workers, whose running tasks stop at their next block (``stages.read_events``). Released, not
    cancelled: ``Client.cancel`` has the scheduler cancel each key's dependents too, asserting that
    a client wants each, which the reduce tree's inner sums are not (``assert ts.who_wants``: a
    traceback in the scheduler's log, and this client's connection dropped). Then, on a cluster the
    job does not own, which goes on after it, wait ``STOP_WAIT`` seconds at most until no worker
    runs any of them: what one writes must land before the job removes its work directory. Each
    worker waits for its own tasks, asked once (each ``Client.run`` is an INFO line in its log)."""
    for future in futures:
        future.release()
    if is_embedded(client):  # its workers close with the job, and tasks in threads stop as they do
        return
    keys = {future.key for future in futures}
    try:
        answers = client.run(tasks_stopped, keys, STOP_WAIT, on_error="return").values()
    except Exception:  # the scheduler or a worker is gone: nothing to wait for
        return
    running = sum(n for n in answers if isinstance(n, int))
    if running:
        log.info("%d of the job's tasks still run on the cluster after %g s", running, STOP_WAIT)


async def tasks_stopped(keys: set, seconds: float, dask_worker: Any) -> int:
    """On a worker: wait up to ``seconds`` until none of ``keys`` runs in its threads, told to stop
    or not, and give how many still do."""
    deadline = time.monotonic() + seconds
    while True:
        running = sum(1 for task in dask_worker.state.all_running_tasks if task.key in keys)
        if not running or time.monotonic() > deadline:
            return running
        await asyncio.sleep(0.1)


def is_embedded(client: Client) -> bool:
    """Whether the cluster is a LocalCluster on this machine (its workers share our disk)."""
    return isinstance(getattr(client, "cluster", None), LocalCluster)


def other_processes_peak_rss_bytes(client: Client) -> dict[str, int]:
    """The peak resident memory of each worker that is a process of its own, by address: a worker
    in this process (a LocalCluster of threads) is this process, whose peak the report gives."""
    here = os.getpid()
    peaks = client.run(_process_and_peak)
    return {address: peak for address, (pid, peak) in peaks.items() if pid != here}


def _process_and_peak() -> tuple[int, int]:
    return os.getpid(), peak_rss_bytes()


def peak_rss_bytes() -> int:
    """The peak resident memory of this process so far."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024
