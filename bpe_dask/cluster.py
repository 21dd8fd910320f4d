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

import dask
from distributed import Client, LocalCluster

from .errors import BpeDaskError
from .storage import describe

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
        yield client
    elif scheduler:
        yield from _remote_client(scheduler)
    else:
        yield from _local_client(workers or default_workers())


def _remote_client(address: str) -> Iterator[Client]:
    try:
        client = Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError) as error:
        raise BpeDaskError(f"cannot reach the Dask scheduler at {address}: {describe(error)}") from None
    with client:
        log.info("connected to %s (dashboard: %s)", address, client.dashboard_link)
        yield client


def _local_client(workers: int) -> Iterator[Client]:
    if workers < 1:
        raise BpeDaskError(f"--workers must be at least 1, got {workers}")
    # Distributed's statistical profiler samples the worker's stack every 10 ms; on pure-Python
    # tasks that costs several percent, for a dashboard view the embedded cluster rarely needs.
    with (
        dask.config.set({"distributed.worker.profile.enabled": False}),
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address="127.0.0.1:0",
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as client,
    ):
        log.info("started a LocalCluster with %d workers (dashboard: %s)", workers, client.dashboard_link)
        yield client
