"""A cluster failing under a job, in; one line that says where to look, out; and Dask's own logging kept
to what a user needs.

``failures_explained`` turns a worker killed again and again (out of memory, usually), a lost
scheduler or cancelled tasks into one ``BpeDaskError``; ``quiet_dask_errors`` lets Dask's memory
warnings through but not its tracebacks, which the job's one line would only repeat.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from distributed import Client, KilledWorker
from distributed.comm.core import CommClosedError
from distributed.utils import CancelledError

from bpe_dask.cluster.client import dashboard_works
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.storage import describe


@contextmanager
def failures_explained(client: Client) -> Iterator[None]:
    """Turn the cluster failing under the job into one line that says where to look next."""
    try:
        yield
    except KilledWorker as error:
        dashboard = f" and the dashboard at {client.dashboard_link}"
        if not dashboard_works(client):
            dashboard = " (this scheduler runs no dashboard: pip install bokeh where it runs for one)"
        raise BpeDaskError(
            f"workers died while running {_task_name(error.task)}, {error.allowed_failures + 1} times "
            f"(last {error.last_worker.address}); out of memory is the usual cause: see the worker "
            f"logs{dashboard}"
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


# Dask's warnings that matter to a user: memory pressure, the usual sign before a lost worker.
MEMORY_WARNINGS = ("distributed.worker.memory", "distributed.nanny.memory", "distributed.spill")


def quiet_dask_errors() -> None:
    """Let Dask's memory warnings through, but not its other messages or its errors: a failure
    reaches the user as the job's one line, which Dask's tracebacks of a lost connection, say,
    would repeat at length, and shutdown notices are noise. ``-v`` shows everything."""
    names = [n for n in logging.root.manager.loggerDict if _is_dask(n)]
    for name in {"distributed", "dask", *names}:  # Dask's config gives some child loggers levels of their own
        logger = logging.getLogger(name)
        logger.setLevel(logging.WARNING)
        for handler in logger.handlers:
            handler.addFilter(_shown)
    for name in ("tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    for handler in logging.root.handlers:
        handler.addFilter(_shown)


def _shown(record: logging.LogRecord) -> bool:
    if not _is_dask(record.name):
        return True
    return record.levelno == logging.WARNING and record.name in MEMORY_WARNINGS


def _is_dask(name: str) -> bool:
    return name.split(".")[0] in ("distributed", "dask")
