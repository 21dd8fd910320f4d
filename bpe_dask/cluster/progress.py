"""Progress on stderr: a job's map phase as it runs (``MapProgress``), and the merge loop's merges
(``MergeProgress``).

Takes counts of what is done as it happens (tasks finished, documents counted, and how far running
tasks have read, which they report as Dask events: ``stages.read_events``; merges done, from this
process or, as events, from the worker that runs the loop); gives one line that redraws in place
on a terminal, and, elsewhere (a log file, CI, ``nohup``), a log line at a steady pace and one at
the end:

    count: 9/16 partitions (56%), 36.6 MiB of 62.0 MiB, 11.8 MiB/s, ETA 2.2 s
    merge: 12,000/31,743 (38%), 2,350 merges/s, ETA 6.4 s
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from distributed import Client, get_worker

from bpe_dask import interrupts
from bpe_dask.stages.read_events import TOPIC as READ_TOPIC
from bpe_dask.wording import format_bytes, format_seconds

log = logging.getLogger(__name__)

MERGE_TOPIC = "bpe-dask-merge-progress"
LOG_EVERY = 5.0  # seconds between log lines when stderr is not a terminal
TICK = 1.0  # seconds between redraws of a map phase's line while its tasks run
DONE = {"count": "counted", "encode": "encoded", "evaluate": "measured"}  # a map phase's text, once done


class _Line:
    """One progress line: redrawn in place on a terminal, logged every ``LOG_EVERY`` s elsewhere; where
    nothing would show the log line (a program of the Python API that set up no logging, whose
    ``show_progress=True`` asked for it), written to the stream as it is."""

    def __init__(self, stream=None, clock: Callable[[], float] = time.perf_counter) -> None:
        self.stream, self.clock = stream or sys.stderr, clock
        self.tty = self.stream.isatty()
        self.started = self.last_logged = clock()
        self.finished = False

    def show(self, text: str, last: bool) -> None:
        # After Ctrl-C or SIGTERM the job's one line is "interrupted" or "terminated": a signal that
        # came inside numba's call back to report progress is raised only after that call returns.
        if self.finished or interrupts.received() is not None:
            return
        self.finished = last
        if self.tty:
            self.stream.write(f"\r\x1b[2K{text}" + ("\n" if last else ""))
            self.stream.flush()
        elif last or self.clock() - self.last_logged >= LOG_EVERY:
            self.last_logged = self.clock()
            if log.isEnabledFor(logging.INFO) and log.hasHandlers():
                log.info(text)
            else:
                self.stream.write(text + "\n")
                self.stream.flush()

    def elapsed(self) -> float:
        return self.clock() - self.started


class MapProgress(_Line):
    """A map phase's line, whatever the source:

        count: 9/16 partitions (56%), 36.6 MiB of 62.0 MiB, 11.8 MiB/s, ETA 2.2 s
        count: 3/8 partitions (38%), 12.00 MiB of text, 4.00 MiB/s, ETA 6.1 s
        count: 12,288/50,000 documents (25%), 36.6 MiB of text, 11.8 MiB/s, ETA 2.2 s

    ``total`` units (partitions, or documents held in memory; ``None`` when not known) of
    ``total_bytes`` of input (``None`` when known only once read: a collection's partitions, a
    batch of documents; then the bytes are those of the text). Hears of work as it is done
    (``task_done``: a task, or ``units`` documents), and, while ``listening``, of how far each
    running task has read (``task_read``: the tasks' ``stages.read_events``), so a long partition
    shows its progress as it runs; the line is redrawn every ``TICK`` seconds meanwhile. A task's
    reports count up to its size, its latest replacing the earlier ones (a task tried again starts
    from 0); once it finishes, its exact size replaces them. The rate, and so the ETA, is that of
    the bytes (or, with no total of bytes, the units) done since the first were counted: a fresh
    worker loads or compiles its code before it counts anything, and that wait is not the pace of
    the work. ``extra`` names a second quantity to report a rate of (tokens). Safe to call from
    several threads.
    """

    def __init__(
        self,
        label: str,
        total: int | None,
        total_bytes: int | None = None,
        unit: str = "partitions",
        extra: str = "",
        **line,
    ) -> None:
        super().__init__(**line)
        self.label, self.total, self.total_bytes, self.unit, self.extra = (
            label,
            total,
            total_bytes,
            unit,
            extra,
        )
        self.done = self.done_bytes = self.done_extra = 0
        self.sizes: dict = {}  # the tasks' keys, and each one's size, while ``listening``
        self.reading: dict = {}  # running tasks: the bytes each has read
        self.documents: dict = {}  # the records each task has read (there is no exact count to replace it)
        self.ended: set = set()  # tasks finished: their exact sizes are counted
        self.first: tuple[float, int] | None = None  # when the first byte was counted, and the bytes then
        self.latest = (self.started, 0)  # the last time the bytes read grew, and to what
        self.first_unit: tuple[float, int] | None = None  # when the first unit was done, and the units then
        self.lock = threading.Lock()  # reports come on the client's event loop and from threads

    @contextmanager
    def listening(self, client: Client, sizes: dict) -> Iterator[None]:
        """Hear the tasks ``sizes`` names (key: bytes) report how far they have read as they run, and
        redraw the line every ``TICK`` seconds meanwhile."""
        self.sizes = dict(sizes)
        stop = threading.Event()
        ticker = threading.Thread(target=self._tick, args=(stop,), name="bpe-dask-progress", daemon=True)
        client.subscribe_topic(READ_TOPIC, self._heard)
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join()
            try:
                client.unsubscribe_topic(READ_TOPIC)
            except Exception:  # the scheduler is gone: the job's own error says so
                log.debug("could not unsubscribe from %s", READ_TOPIC, exc_info=True)

    def _tick(self, stop: threading.Event) -> None:
        while not stop.wait(TICK):
            with self.lock:
                self.show(self.line(), last=False)

    def _heard(self, event: tuple) -> None:
        try:
            message = event[1]
            key = message["key"]
            key = tuple(key) if isinstance(key, list) else key  # a tuple key comes back as a list
            self.task_read(key, int(message["bytes"]), int(message.get("documents", 0)))
        except Exception:  # a malformed event: progress never fails a job
            log.debug("ignored a progress event: %r", event, exc_info=True)

    def task_read(self, key: object, done: int, documents: int = 0) -> None:
        """A running task ``key`` has read ``done`` bytes of its partition and ``documents`` records."""
        with self.lock:
            if key not in self.sizes:
                return  # another job's task, on a shared scheduler
            if documents:
                self.documents[key] = max(documents, self.documents.get(key, 0))
            if key in self.ended or self.total_bytes is None:
                return  # its exact size is counted, or sizes are known only once done
            self.reading[key] = max(0, min(done, self.sizes[key]))
            self._seen()
            self.show(self.line(), last=False)

    def task_done(self, size: int, extra: int = 0, key: object = None, units: int = 1) -> None:
        """``units`` done (a task, or documents), of ``size`` bytes, with ``extra`` (tokens)."""
        with self.lock:
            self.done += units
            self.done_bytes += size
            self.done_extra += extra
            if key is not None:
                self.ended.add(key)
                self.reading.pop(key, None)
            if self.first_unit is None:
                self.first_unit = (self.clock(), self.done)
            self._seen()
            self.show(self.line(), last=self.total is not None and self.done >= self.total)

    def end(self) -> None:
        """The last line, once everything is done (where the total was not known)."""
        with self.lock:
            self.show(self.line(), last=True)

    def read_bytes(self) -> int:
        read = self.done_bytes + sum(self.reading.values())
        return read if self.total_bytes is None else min(self.total_bytes, read)

    def _seen(self) -> None:
        now, read = self.clock(), self.read_bytes()
        if self.first is None and read > 0:
            self.first = (now, read)
        if read > self.latest[1]:
            self.latest = (now, read)

    def line(self) -> str:
        read, total, finished = (
            self.read_bytes(),
            self.total,
            self.total is not None and self.done >= self.total,
        )
        if total is None:
            parts = [f"{self.label}: {self.done:,} {self.unit}"]
        else:
            if self.total_bytes is not None:
                share = read / self.total_bytes if self.total_bytes else 1
            else:
                share = self.done / total if total else 1
            parts = [f"{self.label}: {self.done:,}/{total:,} {self.unit} ({100 * share:.0f}%)"]
        if self.total_bytes is None:
            parts.append(f"{format_bytes(read)} of text")
        else:
            parts.append(f"{format_bytes(read)} of {format_bytes(self.total_bytes)}")
        if self.documents:
            parts.append(f"{sum(self.documents.values()):,} documents")
        (since, read_then), (now, read_now) = self.first or self.latest, self.latest
        if finished and not now > since:  # one report only: the whole job's pace
            (since, read_then), now = (self.started, 0), self.clock()
        if now > since and read_now > read_then:
            rate = (read_now - read_then) / (now - since)  # up to the last report: no dip between reports
            parts.append(f"{format_bytes(rate)}/s")
            if self.extra and self.done_bytes:
                parts.append(f"{rate * self.done_extra / self.done_bytes:,.0f} {self.extra}/s")
            remaining = self._remaining(read, rate, now)
            if remaining is not None and not finished:
                parts.append(f"ETA {format_seconds(max(0.0, remaining))}")
        else:
            parts.append(f"{format_seconds(self.elapsed())} so far")
            if self.first is None and self.total_bytes and not finished:  # bytes to count, none yet
                done = DONE.get(self.label, "read")  # what the job does to the text, not always counting
                parts.append(f"nothing {done} yet (a fresh worker compiles its code first)")
        return ", ".join(parts)

    def _remaining(self, read: int, rate: float, now: float) -> float | None:
        """Seconds left: by the bytes where their total is known, else by the units done since the first."""
        if self.total_bytes is not None:
            return (self.total_bytes - read) / rate - (self.clock() - now)
        if self.total is None or self.first_unit is None:
            return None
        (since, units_then), units = self.first_unit, self.done
        if self.unit == "partitions":  # the first waited for its partition and a fresh worker's code
            pace = (self.clock() - since) / (units - units_then) if units > units_then else None
        else:
            pace = self.elapsed() / units if units else None
        return None if pace is None else pace * (self.total - units)


class MergeProgress(_Line):
    """``merge: 12,000/31,743 (38%), 2,350 merges/s, ETA 6.4 s`` as merges are done.

    Merges get cheaper as counts fall (the first ones touch a third of all words), so the ETA
    comes from the rate over the last ``window`` seconds, and only once ``min_fraction`` of the
    merges and ``min_seconds`` have passed: before that no estimate would be worth showing. Time
    is counted from the first report, not from the start: reading the counts, building the loop's
    state and compiling it (numba, on a fresh install) come before any merge, and are not its pace.
    """

    def __init__(
        self, total: int, window: float = 5.0, min_seconds: float = 2.0, min_fraction: float = 0.02, **line
    ) -> None:
        super().__init__(**line)
        self.total, self.window, self.min_seconds, self.min_fraction = (
            total,
            window,
            min_seconds,
            min_fraction,
        )
        self.recent: deque[tuple[float, int]] = deque()  # (time, merges done) since the first report
        self.first: float | None = None  # the first report's time

    def __call__(self, done: int) -> None:
        now = self.clock()
        self.recent.append((now, done))
        while len(self.recent) > 2 and now - self.recent[1][0] >= self.window:
            self.recent.popleft()
        self.first = now if self.first is None else self.first
        self.show(self.line(done), last=done >= self.total)

    def line(self, done: int) -> str:
        percent = 100 * done / self.total if self.total else 100
        text = f"merge: {done:,}/{self.total:,} ({percent:.0f}%)"
        if not self.recent:
            return text
        (then, done_then), (now, _) = self.recent[0], self.recent[-1]
        if len(self.recent) < 2 and done >= self.total:  # done in one report: the loop's pace, all told
            then, done_then = self.started, 0
        if now > then and done > done_then:
            rate = (done - done_then) / (now - then)
            text += f", {rate:,.0f} merges/s"
            if (
                done < self.total
                and now - (self.first or now) >= self.min_seconds
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
