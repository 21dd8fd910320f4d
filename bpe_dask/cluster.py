"""Cluster set-up: options in, a connected ``distributed.Client`` out.

Takes a scheduler address, a worker count or an existing client; gives a client for the
duration of a ``with`` block. With no scheduler it starts a LocalCluster sized to the
machine: one single-threaded worker process per core, since pre-tokenizing is pure
Python and holds the GIL.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from distributed import Client, LocalCluster, WorkerPlugin

from .errors import BpeDaskError

log = logging.getLogger(__name__)


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@contextmanager
def dask_client(
    scheduler: str | None = None, workers: int | None = None, client: Client | None = None
) -> Iterator[Client]:
    """The given client, a client of ``scheduler``, or a client of a new LocalCluster."""
    if client is not None:
        _prepare(client)
        yield client
    elif scheduler:
        yield from _remote_client(scheduler)
    else:
        yield from _local_client(workers or default_workers())


class QuietUserErrors(WorkerPlugin):
    """Keeps workers from logging a traceback for a task that stopped on a user error.

    The error still reaches the client, which reports it in one line.
    """

    name = "bpe-dask-quiet-user-errors"

    def setup(self, worker) -> None:
        logging.getLogger("distributed.worker").addFilter(_drop_user_errors)


def _drop_user_errors(record: logging.LogRecord) -> bool:
    return "BpeDaskError(" not in record.getMessage()


def _prepare(client: Client) -> None:
    client.register_plugin(QuietUserErrors())


def _remote_client(address: str) -> Iterator[Client]:
    try:
        client = Client(address, timeout="10s")
    except (OSError, TimeoutError) as error:
        raise BpeDaskError(f"cannot reach the Dask scheduler at {address}: {error}") from None
    with client:
        _prepare(client)
        log.info("connected to %s (dashboard: %s)", address, client.dashboard_link)
        yield client


def _local_client(workers: int) -> Iterator[Client]:
    if workers < 1:
        raise BpeDaskError(f"--workers must be at least 1, got {workers}")
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address="127.0.0.1:0",
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as client,
    ):
        _prepare(client)
        log.info("started a LocalCluster with %d workers (dashboard: %s)", workers, client.dashboard_link)
        yield client
