"""Tasks on a cluster: delayed tasks in, their results out, a failure as one line; and what the
cluster has (its threads, its workers' peak memory, whether it shares this machine).

``run_tasks`` computes a job's tasks, tells a ``MapProgress`` of the map tasks as they read and as
they finish, and, on any failure or signal, cancels them all (and sets the job's stop event, for
a task that commits an output at its end) before the failure goes on as one line.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

from dask.delayed import Delayed
from distributed import Client, Event, LocalCluster, as_completed

from bpe_dask.cluster.failures import failures_explained
from bpe_dask.cluster.progress import MapProgress


def cluster_threads(client: Client) -> int:
    return sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values()) or 1


def run_tasks(
    client: Client,
    tasks: list[Delayed],
    progress: MapProgress | None = None,
    sizes: Sequence[int | None] = (),
    measure: Callable[[Any], tuple[int, int]] | None = None,
    stop: str | None = None,
) -> list:
    """Compute ``tasks`` and gather their results; a failure cancels them all and is one line.

    Cancelling does not stop a task already running on a cluster the job does not own: one that
    commits an output at its end (``stages.encode.stream_shards``) is told through the Dask event
    ``stop``, set here first, which it looks at just before committing (``stages.read_events.stopped``).

    The first ``len(sizes)`` tasks are map tasks over that many input bytes each (``None``: known
    once done): ``progress`` hears how far each has read as it runs, and of each as it finishes,
    with what ``measure`` tells of its result: its bytes (where its size was not known) and a
    second quantity, such as its tokens.
    """
    size_of = {task.key: size for task, size in zip(tasks, sizes, strict=False)}
    listening = progress.listening(client, size_of) if progress is not None else nullcontext()
    futures = client.compute(tasks)
    try:
        with failures_explained(client), listening:
            if progress is not None:
                for future in as_completed(futures[: len(sizes)]):
                    if future.status != "finished":
                        break  # gathering raises its error
                    size, extra = measure(future.result()) if measure else (0, 0)
                    known = size_of[future.key]
                    progress.task_done(size if known is None else known, extra, future.key)
            return client.gather(futures)
    except BaseException:
        if stop is not None:
            with contextlib.suppress(Exception):  # the scheduler is gone: so are the tasks
                Event(stop, client=client).set()
        client.cancel(futures)  # a failed job stops at once, before its work directory goes
        raise


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
