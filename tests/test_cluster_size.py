"""The LocalCluster a job starts is sized to the machine: never more workers than run at once (the
cores, or ``bpe-dask.max-workers``), nor more worker processes than the memory holds at
``bpe-dask.min-worker-memory`` each, one line saying so when that is fewer than asked. Real clusters,
counted by their scheduler; never more than a few processes (the old behaviour started them all)."""

from __future__ import annotations

import logging
import os

import dask
import pytest
from dask.utils import format_bytes
from distributed.system import MEMORY_LIMIT

from bpe_dask.cluster.client import dask_client
from bpe_dask.errors import BpeDaskError

CORES = len(os.sched_getaffinity(0))


class Logged(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def started(**asked) -> tuple[list[dict], list[str]]:
    """The workers of the cluster ``dask_client(**asked)`` starts, as its scheduler has them, and the
    warnings logged as it started."""
    handler, logger = Logged(), logging.getLogger("bpe_dask")
    logger.addHandler(handler)
    try:
        with dask_client(**asked) as client:
            workers = list(client.scheduler_info(n_workers=-1)["workers"].values())
    finally:
        logger.removeHandler(handler)
    return workers, handler.messages


def test_more_workers_than_cores_start_as_many_as_the_cores():
    workers, said = started(workers=3 * CORES)
    assert len(workers) == CORES and {w["nthreads"] for w in workers} == {1}
    assert len(said) == 1 and said[0].startswith(f"{3 * CORES} workers asked for on {CORES} core"), said
    threads, said = started(workers=3 * CORES, in_threads=True)  # threads of this process: the same bound
    assert [w["nthreads"] for w in threads] == [CORES] and len(said) == 1, said


def test_max_workers_lets_more_start_and_min_worker_memory_fewer():
    with dask.config.set({"bpe-dask.max-workers": CORES + 1}):
        workers, said = started(workers=CORES + 1)  # more than the cores, as asked: no line
    assert len(workers) == CORES + 1 and said == []
    least = MEMORY_LIMIT // 2 + 1  # room for one worker process only
    with dask.config.set({"bpe-dask.min-worker-memory": least}):
        workers, said = started(workers=2)
        assert len(workers) == 1 and workers[0]["memory_limit"] >= least
        shares = f"{format_bytes(least)} of this machine's {format_bytes(MEMORY_LIMIT)}"
        assert said == [f"2 workers asked for: starting 1 worker process, so that each has {shares} "
                        "(bpe-dask.min-worker-memory)"]  # fmt: skip
        threads, said = started(workers=2, in_threads=True)  # one process: its memory is the machine's
    assert [w["nthreads"] for w in threads] == [min(2, CORES)]


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("max-workers", "lots", "must be a whole number, 0 or more, got 'lots'"),
        ("min-worker-memory", "0", "must be a positive size (e.g. 8MiB), got '0'"),
    ],
)
def test_a_bad_sizing_setting_is_one_line_before_any_cluster(setting, value, message):
    with dask.config.set({f"bpe-dask.{setting}": value}), pytest.raises(BpeDaskError) as raised:
        started(workers=1)
    assert str(raised.value) == f"bpe-dask.{setting} (from dask.config.set) {message}"  # where it was set
