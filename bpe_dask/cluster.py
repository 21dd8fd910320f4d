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
from distributed import Client, KilledWorker, LocalCluster
from distributed.comm.core import CommClosedError
from distributed.utils import CancelledError

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


@contextmanager
def failures_explained(client: Client) -> Iterator[None]:
    """Turn the cluster failing under the job into one line that says where to look next."""
    try:
        yield
    except KilledWorker as error:
        raise BpeDaskError(
            f"workers died while running {_task_name(error.task)}, {error.allowed_failures + 1} times "
            f"(last {error.last_worker.address}); out of memory is the usual cause: see the worker "
            f"logs{_dashboard(client)}"
        ) from None
    except (CancelledError, CommClosedError) as error:
        reason = getattr(error, "reason", None) or describe(error)
        if "scheduler" in reason or isinstance(error, CommClosedError):
            raise BpeDaskError(
                f"lost the Dask scheduler at {client.scheduler.address} ({reason}); see its log for why"
            ) from None
        raise BpeDaskError(f"the job's tasks were cancelled on the cluster ({reason})") from None


def _task_name(key: object) -> str:
    name = key[0] if isinstance(key, tuple) else str(key)
    kind = name.split("-", 1)[0]
    kinds = {
        "count": "a map task",
        "combine": "a reduce task",
        "encode": "an encode task",
        "merge": "the merge loop",
    }
    return kinds.get(kind, name)


def _dashboard(client: Client) -> str:
    link = client.dashboard_link if client.scheduler_info().get("services", {}).get("dashboard") else None
    return f" and the dashboard at {link}" if link else " (this scheduler runs no dashboard)"
