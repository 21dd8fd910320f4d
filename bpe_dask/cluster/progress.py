"""Progress bars (tqdm): a job's map phase as its tasks read and finish (``MapProgress``), and the
merge loop's merges (``MergeProgress``).

Takes counts of what is done as it happens (tasks finished, documents counted, how far running tasks
have read, which they report as Dask events: ``stages.read_events``; merges done, from this process
or, as events, from the worker that runs the loop); gives a tqdm bar on a terminal, a notebook's
widget in Jupyter (``tqdm.autonotebook``), and elsewhere (a log file, CI, ``nohup``) the same line as a log
record every ``LOG_EVERY`` seconds and at the end (for a job that took longer):

    count: 56%, 36.6M/62.0MB [00:03<00:02, 11.8MB/s, 9/16 partitions]
    merge: 38%, 12000/31743 merges [00:05<00:08, 2350.00 merges/s]
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import tqdm.autonotebook
import tqdm.std
from distributed import Client, get_worker

from bpe_dask import interrupts
from bpe_dask.stages.read_events import TOPIC as READ_TOPIC
from bpe_dask.wording import format_bytes

log = logging.getLogger(__name__)

MERGE_TOPIC = "bpe-dask-merge-progress"
LOG_EVERY = 5.0  # seconds between log lines where there is no terminal
TICK = 1.0  # seconds between redraws of a bar while its tasks run (its clock and ETA move on)
LOGGED = "{desc}: {percentage:.0f}%, {n_fmt}/{total_fmt}{unit} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"


class _Out:
    """Where a bar writes: the terminal as it is, or, without one, each line as a log record (or on
    the stream, where logging would show nothing: a Python program that set up none). After a signal
    only the end of the line: the job's last line is "interrupted" or "terminated", and a report may
    still be on its way (numba's call back from the merge loop). Equal to its stream, so that
    ``tqdm.write`` (log records while a bar is drawn, ``cli.main``) clears the bar first."""

    def __init__(self, stream: Any, tty: bool) -> None:
        self.stream, self.tty = stream, tty
        self.encoding = getattr(stream, "encoding", None) or "utf-8"  # tqdm draws in Unicode where it may

    def write(self, text: str) -> None:
        if interrupts.received() is not None and text != "\n":
            return
        line = text.strip("\r\n ")
        if self.tty:
            self.stream.write(text)
        elif line and log.isEnabledFor(logging.INFO) and log.hasHandlers():
            log.info(line)
        elif line:
            self.stream.write(line + "\n")

    def flush(self) -> None:
        if self.tty:
            self.stream.flush()

    def __eq__(self, other: object) -> bool:
        return other is self or other is self.stream

    def __hash__(self) -> int:
        return id(self)


def _widget(stream: Any) -> bool:
    """Whether a bar on ``stream`` is a notebook's widget: tqdm finds one in Jupyter."""
    return tqdm.autonotebook.tqdm is not tqdm.std.tqdm and stream is sys.stderr


def drawn(stream: Any = None) -> bool:
    """Whether a bar on ``stream`` (stderr) is drawn, as a widget or on a terminal, not logged."""
    stream = stream or sys.stderr
    return _widget(stream) or stream.isatty()


def bar(desc: str, total: int | None, unit: str, stream: Any = None, **options: Any) -> tqdm.std.tqdm:
    """A tqdm bar of ``total`` ``unit`` on ``stream`` (stderr): a notebook's widget where tqdm finds
    one, a bar on a terminal, else log lines at a steady pace."""
    stream = stream or sys.stderr
    tty, widget = stream.isatty(), _widget(stream)
    kind = tqdm.autonotebook.tqdm if widget else tqdm.std.tqdm
    if not (tty or widget):  # a log: a line every LOG_EVERY s from then on, and the last (``close``)
        options |= {"mininterval": LOG_EVERY, "delay": LOG_EVERY, "maxinterval": float("inf")}
        options |= {"bar_format": LOGGED, "leave": False}
    return kind(total=total, desc=desc, unit=unit, file=_Out(stream, tty), dynamic_ncols=tty, **options)


def close(bar: tqdm.std.tqdm, done: bool = True) -> None:
    """Close ``bar``: its last state shown once where it is ``done`` (a log's, ``leave=False``, which
    tqdm's close leaves unshown, unless it was the last line logged); a terminal's line ended, so
    that what comes next (the job's error, say) starts a line of its own."""
    never = bar.last_print_t < bar.start_t + bar.delay
    if done and not bar.disable and not bar.leave and (never or bar.n != bar.last_print_n):
        bar.refresh()
    bar.close()


@contextmanager
def phase(progress: MapProgress | MergeProgress | None) -> Iterator[None]:
    """Run a phase that ``progress`` (if any) shows: its bar closed at the end, its last line shown
    only if the phase ended well."""
    try:
        yield
    except BaseException:
        if progress is not None:
            progress.end(done=False)
        raise
    if progress is not None:
        progress.end()


class MapProgress:
    """A map phase's bar, whatever the source: of the input's bytes where they are known
    (``total_bytes``), else of its ``total`` units (partitions, or documents held in memory; ``None``
    when not known), with the rest beside it:

        count: 56%, 36.6M/62.0MB [00:03<00:02, 11.8MB/s, 9/16 partitions]
        count: 38%, 3/8 partitions [00:02<00:03, 1.50 partitions/s, 12.00 MiB of text]

    Hears of work as it is done (``task_done``: a task, or ``units`` documents) and, while
    ``listening``, of how far each running task has read (``task_read``), so a long partition moves
    the bar as it runs. A task's reports count up to its size; once it finishes, its exact size
    replaces them; the bar never goes back (a task tried again reads from 0). ``extra`` names a
    second quantity the tasks report (tokens). Safe to call from several threads.
    """

    def __init__(
        self,
        label: str,
        total: int | None,
        total_bytes: int | None = None,
        unit: str = "partitions",
        extra: str = "",
        stream: Any = None,
    ) -> None:
        self.by_bytes, self.drawn = total_bytes is not None, drawn(stream)
        self.total, self.unit, self.extra = total, unit, extra
        self.bar = (
            bar(label, total_bytes, "B", stream, unit_scale=True)
            if self.by_bytes
            else bar(label, total, f" {unit}", stream)
        )
        self.done = self.done_bytes = self.done_extra = 0
        self.sizes: dict = {}  # the tasks' keys, and each one's size, while ``listening``
        self.reading: dict = {}  # running tasks: the bytes each has read
        self.documents: dict = {}  # the records each task has read
        self.ended: set = set()  # tasks finished: their exact sizes are counted
        self.lock = threading.Lock()  # reports come on the client's event loop and from threads

    @contextmanager
    def listening(self, client: Client, sizes: dict) -> Iterator[None]:
        """Hear the tasks ``sizes`` names (key: bytes) report how far they have read as they run; the
        bar is redrawn every ``TICK`` seconds meanwhile, and closed at the end."""
        self.sizes = dict(sizes)
        stop = threading.Event()
        ticker = threading.Thread(target=self._tick, args=(stop,), name="bpe-dask-progress", daemon=True)
        client.subscribe_topic(READ_TOPIC, self._heard)
        ticker.start()
        try:
            with phase(self):
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
                if self.drawn and not self.bar.disable:  # its clock and time left move on
                    self.bar.refresh()

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
            if key not in self.ended and self.by_bytes:
                self.reading[key] = max(0, min(done, self.sizes[key]))
            self._show()

    def task_done(self, size: int, extra: int = 0, key: object = None, units: int = 1) -> None:
        """``units`` done (a task, or documents), of ``size`` bytes, with ``extra`` (tokens)."""
        with self.lock:
            self.done += units
            self.done_bytes += size
            self.done_extra += extra
            if key is not None:
                self.ended.add(key)
                self.reading.pop(key, None)
            self._show()
            if self.total is not None and self.done >= self.total:
                close(self.bar)

    def end(self, done: bool = True) -> None:
        """The bar closed: once everything is ``done`` (its last line), or the job stopped."""
        with self.lock:
            close(self.bar, done)

    def read_bytes(self) -> int:
        read = self.done_bytes + sum(self.reading.values())
        return read if self.bar.total is None or not self.by_bytes else min(self.bar.total, read)

    def _show(self) -> None:
        notes = [f"{self.done:,}/{self.total:,} {self.unit}"] if self.by_bytes else []
        if not self.by_bytes:
            notes.append(f"{format_bytes(self.read_bytes())} of text")
        if self.documents:
            notes.append(f"{sum(self.documents.values()):,} documents")
        if self.extra:
            notes.append(f"{self.done_extra:,} {self.extra}")
        self.bar.set_postfix_str(", ".join(notes), refresh=False)
        shown = self.read_bytes() if self.by_bytes else self.done
        self.bar.update(max(0, shown - self.bar.n))


class MergeProgress:
    """The merge loop's bar, called with the merges done: ``merge: 38%, 12000/31743 [...]``. Its rate
    is tqdm's moving average: merges get cheaper as counts fall."""

    def __init__(self, total: int, stream: Any = None) -> None:
        self.bar = bar("merge", total, " merges", stream)

    def __call__(self, done: int) -> None:
        self.bar.update(max(0, done - self.bar.n))
        if done >= (self.bar.total or 0):
            close(self.bar)

    def end(self, done: bool = True) -> None:
        """The bar closed: where the loop stopped short of the total, its last line ends there."""
        close(self.bar, done)


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
