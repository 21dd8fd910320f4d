"""How far a running map task has read: what its reader says as it reads in, a Dask event out.

Takes, from ``io.text`` and ``io.records`` (a ``ReadProgress``), how many of the partition's bytes
(and records) have been read; gives the client, which subscribes to ``TOPIC`` (``cluster.progress``),
events through Dask's own channel (the worker's ``log_event``): ``{"key": the task's key, "bytes":
read so far, "documents": records read so far}``, one when the first block has been handed on and
then at most one every ``bpe-dask.progress-interval``; a task that is one block sends none, and a
task of records also sends its last count, so the documents add up. Outside a Dask task (counting
in this process) the reporter only keeps how far the reading got. A task tried again in place
reports from 0 again: the client keeps each task's latest report, and a finished task's exact size
replaces them.

Asked at every block, it also stops the task once its worker is closing (``WorkerClosing``) or the
scheduler let go of it (``TaskCancelled``: its job stopped): nothing else stops a running task.
``stop_if_cancelled`` does the same for a task that reads no blocks.

>>> from bpe_dask.io.storage import LOCAL
>>> reporter(LOCAL, 100).send is None  # not in a Dask task
True
>>> sent = []
>>> report = ReadReporter(lambda topic, message: sent.append(message["bytes"]), "count-1", 3600, 100)
>>> for done in (0, 40, 80, 100):  # the first block, then nothing within the hour
...     report(done)
>>> sent
[40]
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from distributed import Event, Reschedule, get_worker
from distributed.worker import WORKER_ANY_RUNNING

from bpe_dask import settings as config
from bpe_dask.io.storage import Store

log = logging.getLogger(__name__)

TOPIC = "bpe-dask-read-progress"


class WorkerClosing(Exception):
    """The worker running the task is closing: the task stops reading."""


class TaskCancelled(Reschedule):
    """The scheduler let go of the running task (its job stopped, or its client left): the task stops
    reading, which nothing else can make it do. A ``Reschedule``, so that if another job has asked
    for the same task meanwhile, the scheduler runs it again for that one rather than fail it."""


class ReadReporter:
    """A ``ReadProgress`` that keeps how far the reading got (``read``: the bytes of an input whose
    server did not say its size, which the job's report counts once they have been read), and, in a
    Dask task (``send``), tells the client.

    >>> tally = ReadReporter()  # outside a Dask task
    >>> for done in (0, 40, 100):
    ...     tally(done)
    >>> tally.read
    100

    For one task of ``size`` bytes it sends an event once its first block has been
    handed on (so the client knows counting has begun, and that the wait before it was not counting),
    then whenever ``interval`` seconds have passed since the last, and, for records, once at the end.
    Once all of it is read it sends nothing more (but the last count of records): it is about to
    finish, and its exact size will come with that.

    It is asked at every block, so it also stops the task (``WorkerClosing``) once ``closing()``
    says the worker is closing: a worker of threads in the client's process, closed as the job
    stops, cannot stop a running task otherwise; and (``TaskCancelled``) once ``cancelled()`` says
    the scheduler let go of it: on a cluster the job does not own, a task of a job that stopped
    would otherwise read on for minutes, and write into the work directory the job removes."""

    def __init__(
        self,
        send: Callable[[str, dict], None] | None = None,
        key: object = None,
        interval: float = 0.0,
        size: int = 0,
        closing: Callable[[], bool] = lambda: False,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> None:
        self.send, self.key, self.interval, self.size, self.closing = send, key, interval, size, closing
        self.cancelled = cancelled
        self.last = time.monotonic()
        self.sent = (0, 0)
        self.read = 0

    def check(self) -> None:
        """Stop the task (``WorkerClosing``) if its worker is closing. Asked at every block, and before
        the task writes what it read: a worker of threads closed as the job stopped (Ctrl-C) must not
        write into the job's temporary work directory, which the job removes meanwhile (writing there
        made it again, and left it behind)."""
        if self.closing():
            raise WorkerClosing("the worker is closing: the job stopped")
        if self.cancelled():
            raise TaskCancelled(f"the task {self.key} was cancelled: its job stopped")

    def __call__(self, done: int, documents: int = 0, last: bool = False) -> None:
        self.read = max(self.read, done)
        if self.send is None:
            return
        self.check()
        now = time.monotonic()
        if last:
            due = documents > 0 and (done, documents) != self.sent
        elif not 0 < done < self.size:
            due = False  # nothing read yet, or all of it: the task is about to say it is done
        elif self.sent == (0, 0):
            due = True
        else:
            due = now - self.last >= self.interval and (done, documents) != self.sent
        if due:
            self.last, self.sent = now, (done, documents)
            try:
                self.send(TOPIC, {"key": self.key, "bytes": done, "documents": documents})
            except Exception:  # progress is only shown: it never fails a task
                log.debug("could not report progress", exc_info=True)


def reporter(store: Store, size: int) -> ReadReporter:
    """A reporter for the Dask task running in this thread, over ``size`` bytes, with the job's
    ``progress-interval``; outside a Dask task, one that sends nothing."""
    try:
        worker = get_worker()
        key = worker.get_current_task()
    except (ValueError, KeyError):
        return ReadReporter()
    interval = config.seconds("progress-interval", store.settings)
    closing = lambda: worker.status not in WORKER_ANY_RUNNING  # noqa: E731
    return ReadReporter(worker.log_event, key, interval, size, closing, lambda: is_cancelled(worker, key))


def is_cancelled(worker: Any, key: object) -> bool:
    """Whether the scheduler let go of the task ``key`` while ``worker`` runs it: the worker's own
    record, read without a round trip (asked at every block)."""
    task = worker.state.tasks.get(key)
    return task is not None and task.state == "cancelled"


def stop_if_cancelled() -> None:
    """In a Dask task: stop it (``TaskCancelled``) if the scheduler let go of it; outside one, nothing.
    For a long task that reads no blocks: the merge loop on a worker, between its progress reports."""
    try:
        worker = get_worker()
        key = worker.get_current_task()
    except (ValueError, KeyError):
        return
    if is_cancelled(worker, key):
        raise TaskCancelled(f"the task {key} was cancelled: its job stopped")


def stopped(stop: str | None) -> bool:
    """Whether the job a task belongs to has stopped (interrupted, or another task failed): the Dask
    event ``stop`` its client sets (``jobs.context.run_tasks``). Asked by a task that would commit an
    output, just before: a task already running on a cluster the job does not own is not stopped by
    cancelling it. False outside a Dask task, or with no ``stop``."""
    if stop is None:
        return False
    try:
        return Event(stop).is_set()  # through this worker's client
    except ValueError:  # no client: not in a Dask task
        return False
