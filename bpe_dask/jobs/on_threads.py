"""The runner on threads: parts in, counted on threads of this process, one ``CountResult`` out.

What documents held in memory are counted with, and small files with no cluster asked for. The
thread that iterates the parts (an iterable's, which need not be thread-safe) only hands them to a
bounded queue; a pool of threads, each with a counter of its own (the compiled one releases the
GIL), counts them, so memory stays bounded: the queue's parts, and each thread's counts. Their
counts are then summed as the reduce sums shards (``stages.reduce.sum_sorted``). One thread counts
in the caller's thread.

A failure names the lowest part that fails, as counting them in order would, whichever thread
fails first: the parts before a failing one are still counted (one of them may fail too), those
after it dropped; an iterable that raises waits for the parts it gave to be counted. An interrupt
drops them all.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from bpe_dask import interrupts
from bpe_dask.cluster.progress import MapProgress, phase
from bpe_dask.io.counts_table import words_bytes
from bpe_dask.io.documents import BadRecords
from bpe_dask.io.storage import Store
from bpe_dask.jobs.counted import CountResult
from bpe_dask.sources.part import Part, read_bytes
from bpe_dask.stages.count import CountSettings, PretokenCounter, Seen, count_part
from bpe_dask.stages.counters import SpecialsSeen
from bpe_dask.stages.read_events import ReadReporter
from bpe_dask.stages.reduce import sum_sorted


@dataclass
class _Counting:
    """One thread's counter, and what it has counted."""

    counter: PretokenCounter
    parts: int = 0
    read: int = 0
    seen: Seen = field(default_factory=Seen)
    bad: BadRecords = field(default_factory=BadRecords)


def count_here(
    parts: Iterable[Part],
    settings: CountSettings,
    store: Store,
    counters: list[PretokenCounter],
    progress: MapProgress | None = None,
) -> CountResult:
    """Count ``parts`` on one thread per counter of ``counters`` (one: in this thread)."""
    pool = _Pool(settings, store, [_Counting(c) for c in counters], progress)
    with phase(progress):
        pool.run(parts)
    return pool.result()


class _Pool:
    def __init__(
        self, settings: CountSettings, store: Store, states: list[_Counting], progress: MapProgress | None
    ) -> None:
        self.settings, self.store, self.states, self.progress = settings, store, states, progress
        self.failed: list[tuple[int, BaseException]] = []  # (the failing part's index, the error)
        self.failed_at: int | None = None  # the index of the lowest part that failed
        self.abandoned = False  # an interrupt: nothing queued is counted
        self.lock = threading.Lock()
        self.stop = threading.Event()  # a part failed, or the iterating thread stopped: iterate no more

    def count(self, state: _Counting, part: Part) -> None:
        tally = ReadReporter()
        count_part(part, self.settings, self.store, state.counter, state.bad, tally, seen=state.seen)
        state.parts += 1
        state.read += read_bytes(part, tally.read)
        if self.progress is not None:  # a batch of documents counts as its documents, bad ones too
            self.progress.task_done(tally.read, units=part.units)

    def run(self, parts: Iterable[Part]) -> None:
        if len(self.states) == 1:
            for part in parts:
                interrupts.check()
                self.count(self.states[0], part)
            return
        work: queue.Queue[Part | None] = queue.Queue(maxsize=2 * len(self.states))
        workers = [
            threading.Thread(target=self._work, args=(work, state), name=f"bpe-dask-count-{k}", daemon=True)
            for k, state in enumerate(self.states)
        ]
        for worker in workers:
            worker.start()
        raised: Exception | None = None
        try:
            for part in parts:
                while not self.stop.is_set():  # a thread failed: stop iterating
                    interrupts.check()
                    try:
                        work.put(part, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if self.stop.is_set():
                    break
        except Exception as error:  # the iterable raised: at a later element than any part it gave
            raised = error
        except BaseException:  # an interrupt: the threads drop what is queued
            self.abandoned = True
            raise
        finally:
            self.stop.set()
            for _ in workers:
                work.put(None)  # the threads drain the queue, so there is room
            for worker in workers:
                worker.join()
        if self.failed:
            raise min(self.failed, key=lambda failure: failure[0])[1]
        if raised is not None:
            raise raised

    def _work(self, work: queue.Queue, state: _Counting) -> None:
        while (part := work.get()) is not None:
            if self.abandoned or (self.failed_at is not None and part.index > self.failed_at):
                continue  # after a failure: its error is the one to name
            try:
                self.count(state, part)
            except BaseException as error:  # raised again in the iterating thread
                with self.lock:
                    self.failed.append((part.index, error))
                    self.failed_at = min(index for index, _ in self.failed)
                self.stop.set()

    def result(self) -> CountResult:
        tables = [state.counter.sorted_table() for state in self.states]
        table = sum_sorted(tables, self.settings.engine)
        specials, bad = SpecialsSeen(), BadRecords()
        for state in self.states:
            specials.merge(state.counter.specials)
            bad.merge(state.bad)
        return CountResult(
            sum(s.parts for s in self.states),
            0,
            bad,
            specials,
            words_bytes(table) + specials.bytes,
            sum(s.read for s in self.states),
            sum(s.seen.documents for s in self.states),
            len(self.states),
            _table=table,
        )
