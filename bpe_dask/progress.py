"""Progress on stderr: Dask's own bar for map and reduce, and a bar for the merge loop.

Takes futures, or merge counts as they happen; gives lines on stderr. On a terminal the bars
redraw in place; elsewhere (a log file, CI) the merge loop logs a line every tenth of the way.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from contextlib import redirect_stdout

from distributed import Client, get_worker
from distributed.diagnostics.progressbar import progress as dask_progress

log = logging.getLogger(__name__)

MERGE_TOPIC = "bpe-dask-merge-progress"


def show_task_progress(futures: list) -> None:
    """Dask's text progress bar for ``futures`` (on a terminal only), on stderr; returns when done."""
    if sys.stderr.isatty():
        with redirect_stdout(sys.stderr):
            dask_progress(futures, multi=False)
        sys.stderr.write("\n")


class MergeProgress:
    """Draws ``merge 1200/9743 12% 850 merges/s ETA 10s`` as merges are done."""

    def __init__(self, total: int, stream=None) -> None:
        self.total, self.stream = total, stream or sys.stderr
        self.started = time.perf_counter()
        self.tty = self.stream.isatty()
        self.next_log = 0.1

    def __call__(self, done: int) -> None:
        fraction = done / self.total if self.total else 1.0
        if self.tty:
            self.stream.write(f"\r{self.line(done)}" + ("\n" if done >= self.total else ""))
            self.stream.flush()
        elif fraction >= self.next_log or done >= self.total:
            log.info(self.line(done))
            self.next_log = int(fraction * 10 + 1) / 10

    def line(self, done: int) -> str:
        elapsed = time.perf_counter() - self.started
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - done) / rate if rate > 0 else float("inf")
        percent = 100 * done / self.total if self.total else 100
        return f"merge {done}/{self.total} {percent:3.0f}% {rate:,.0f} merges/s ETA {eta:,.0f}s"


def every(seconds: float, total: int, report: Callable[[int], None]) -> Callable[[int], None]:
    """``report``, called at most once per ``seconds``, and always once ``total`` is reached."""
    last = [0.0]

    def throttled(done: int) -> None:
        now = time.perf_counter()
        if now - last[0] >= seconds or done >= total:
            last[0] = now
            report(done)

    return throttled


def publish_from_worker(done: int) -> None:
    """On a worker: send merge progress to the client that subscribed to ``MERGE_TOPIC``."""
    get_worker().log_event(MERGE_TOPIC, done)


def subscribe(client: Client, progress: MergeProgress) -> None:
    client.subscribe_topic(MERGE_TOPIC, lambda event: progress(event[1]))
