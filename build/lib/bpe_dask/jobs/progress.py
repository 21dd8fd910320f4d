"""Progress on stderr: tasks done as a job's map phase runs, and merges done in the merge loop.

Takes counts of what is done as it happens; gives one line that redraws in place on a terminal,
and, elsewhere (a log file, CI, ``nohup``), a log line at a steady pace and one at the end:

    count: 9/16 partitions (56%), 36.6 MiB of 62.0 MiB, 11.8 MiB/s, ETA 2.2 s
    merge: 12,000/31,743 (38%), 2,350 merges/s, ETA 6.4 s
"""

from __future__ import annotations

import logging
import sys
import time
from collections import deque
from collections.abc import Callable

from distributed import Client, get_worker

from bpe_dask.jobs.wording import format_bytes, format_seconds

log = logging.getLogger(__name__)

MERGE_TOPIC = "bpe-dask-merge-progress"
LOG_EVERY = 5.0  # seconds between log lines when stderr is not a terminal


class _Line:
    """One progress line: redrawn in place on a terminal, logged every ``LOG_EVERY`` s elsewhere."""

    def __init__(self, stream=None, clock: Callable[[], float] = time.perf_counter) -> None:
        self.stream, self.clock = stream or sys.stderr, clock
        self.tty = self.stream.isatty()
        self.started = self.last_logged = clock()
        self.finished = False

    def show(self, text: str, last: bool) -> None:
        if self.finished:
            return
        self.finished = last
        if self.tty:
            self.stream.write(f"\r\x1b[2K{text}" + ("\n" if last else ""))
            self.stream.flush()
        elif last or self.clock() - self.last_logged >= LOG_EVERY:
            self.last_logged = self.clock()
            log.info(text)

    def elapsed(self) -> float:
        return self.clock() - self.started


class TaskProgress(_Line):
    """``count: 9/16 partitions (56%), 36.6 MiB of 62.0 MiB, 11.8 MiB/s, ETA 2.2 s``.

    The rate is that of the input read so far, which is steady in a map phase; there is no ETA
    until a task has finished. ``extra`` names a second quantity to report a rate of (tokens).
    """

    def __init__(self, label: str, tasks: int, total_bytes: int, extra: str = "", **line) -> None:
        super().__init__(**line)
        self.label, self.tasks, self.total_bytes, self.extra = label, tasks, total_bytes, extra
        self.done = self.done_bytes = self.done_extra = 0

    def task_done(self, size: int, extra: int = 0) -> None:
        self.done += 1
        self.done_bytes += size
        self.done_extra += extra
        self.show(self.line(), last=self.done >= self.tasks)

    def line(self) -> str:
        elapsed = self.elapsed()
        percent = 100 * self.done_bytes / self.total_bytes if self.total_bytes else 100
        parts = [
            f"{self.label}: {self.done:,}/{self.tasks:,} partitions ({percent:.0f}%)",
            f"{format_bytes(self.done_bytes)} of {format_bytes(self.total_bytes)}",
        ]
        if self.done and elapsed > 0:
            parts.append(f"{format_bytes(self.done_bytes / elapsed)}/s")
            if self.extra:
                parts.append(f"{self.done_extra / elapsed:,.0f} {self.extra}/s")
            if self.done < self.tasks and self.done_bytes:
                remaining = (self.total_bytes - self.done_bytes) * elapsed / self.done_bytes
                parts.append(f"ETA {format_seconds(remaining)}")
        else:
            parts.append(f"{format_seconds(elapsed)} so far")
        return ", ".join(parts)


class MergeProgress(_Line):
    """``merge: 12,000/31,743 (38%), 2,350 merges/s, ETA 6.4 s`` as merges are done.

    Merges get cheaper as counts fall (the first ones touch a third of all words), so the ETA
    comes from the rate over the last ``window`` seconds, and only once ``min_fraction`` of the
    merges and ``min_seconds`` have passed: before that no estimate would be worth showing.
    """

    def __init__(self, total: int, window: float = 5.0, min_seconds: float = 2.0, min_fraction: float = 0.02,
                 **line) -> None:  # fmt: skip
        super().__init__(**line)
        self.total, self.window, self.min_seconds, self.min_fraction = (
            total,
            window,
            min_seconds,
            min_fraction,
        )
        self.recent: deque[tuple[float, int]] = deque([(self.started, 0)])

    def __call__(self, done: int) -> None:
        now = self.clock()
        self.recent.append((now, done))
        while len(self.recent) > 2 and now - self.recent[1][0] >= self.window:
            self.recent.popleft()
        self.show(self.line(done), last=done >= self.total)

    def line(self, done: int) -> str:
        percent = 100 * done / self.total if self.total else 100
        text = f"merge: {done:,}/{self.total:,} ({percent:.0f}%)"
        (then, done_then), (now, _) = self.recent[0], self.recent[-1]
        if now > then and done > done_then:
            rate = (done - done_then) / (now - then)
            text += f", {rate:,.0f} merges/s"
            if (
                done < self.total
                and self.elapsed() >= self.min_seconds
                and done >= self.min_fraction * self.total
            ):
                text += f", ETA {format_seconds((self.total - done) / rate)}"
        return text


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
