"""Counting documents held in this process: batches in, the word counts out, on all its cores.

Takes the batches of ``io.in_memory`` (a Python iterable's elements, or an Arrow table's text
column) and the job's options; gives the word counts as one table sorted by token, as the reduce
gives them (``MemoryCounts``). The thread that iterates the input (which need not be thread-safe)
only makes batches and puts them on a bounded queue; a small pool of threads, one per core by
default (``workers``), turns each into ``Documents`` and counts it with a counter of its own, the
compiled one releasing the GIL, so memory stays bounded: the queue's batches, and each thread's
counts. The threads' counts are then summed as the reduce sums shards (``stages.reduce.sum_sorted``).
An input too small for the compiled counter (``engine="auto"``) is counted in this thread.
``count_input`` is ``count_words`` of such documents (``count_from_iterator``, and ``count_words``
of an Arrow table or a dataset); ``train_here`` is ``train``'s: it runs the merge loop here and
publishes the tokenizer as ``train`` does (``publishing.merge_and_publish``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from functools import partial
from itertools import chain

import pyarrow as pa

from bpe_dask.errors import BpeDaskError
from bpe_dask.io.counts_table import words_bytes, write_counts
from bpe_dask.io.in_memory import Batch, arrow_batches
from bpe_dask.io.outputs import check_output_dir, check_output_file
from bpe_dask.io.records import BadRecords
from bpe_dask.io.sample import SAMPLE_BYTES, first_texts
from bpe_dask.io.storage import Store, absolute
from bpe_dask.jobs import compression
from bpe_dask.jobs.cluster import default_workers
from bpe_dask.jobs.context import check_sample, report_bad_records
from bpe_dask.jobs.merging import Limits
from bpe_dask.jobs.options import JobOptions
from bpe_dask.jobs.progress import DocumentProgress
from bpe_dask.jobs.publishing import is_output_file, merge_and_publish
from bpe_dask.jobs.wording import format_bytes, plural
from bpe_dask.stages.count import CountSettings, add_documents, counting_engine, counts_compiled, new_counter
from bpe_dask.stages.counters import COMPILED_MIN_BYTES, SpecialsSeen
from bpe_dask.stages.reduce import sum_sorted

log = logging.getLogger(__name__)

# Options of a job on a cluster, which counting here cannot honour: refused rather than ignored.
CLUSTER_ONLY = ("client", "scheduler", "scheduler_file", "work_dir", "chunk_size", "input_format",
                "in_process", "ship_package", "ship_credentials")  # fmt: skip


@dataclass
class MemoryCounts:
    """The word counts of documents held in memory (sorted by token), and what was counted."""

    table: pa.Table | None  # None once handed to the merge
    documents: int = 0
    batches: int = 0
    threads: int = 1
    text_bytes: int = 0
    specials: SpecialsSeen = field(default_factory=SpecialsSeen)
    bad: BadRecords = field(default_factory=BadRecords)
    seconds: float = 0.0
    path: str | None = None  # where they were written, if they were
    store: Store = field(default_factory=Store, repr=False)  # where ``path`` is


def memory_threads(opts: JobOptions) -> int:
    """The threads that count documents held here (``workers``, one per core by default); options
    of a job on a cluster, which counting here cannot honour, are refused rather than ignored."""
    defaults = {f.name: f.default for f in fields(JobOptions)}
    given = [name for name in CLUSTER_ONLY if getattr(opts, name) != defaults[name]]
    if given or opts.merge_on == "worker":
        name = given[0] if given else "merge_on='worker'"
        raise BpeDaskError(f"documents held in memory are counted in this process, on threads (workers=N): "
                           f"{name} does not apply")  # fmt: skip
    return opts.workers or default_workers()


def count_here(
    batches: Iterator[Batch], opts: JobOptions, threads: int, length: int | None = None,
    read_ahead: Callable[[bool], None] | None = None,
) -> MemoryCounts:  # fmt: skip
    """Count the batches' documents on ``threads`` threads of this process (``length``: how many
    documents to expect, for progress); ``read_ahead`` hears, before counting begins, whether the
    input is small (all of it read ahead, too little for the compiled counter)."""
    started = time.perf_counter()
    settings = opts.count_settings()
    progress = DocumentProgress(length) if opts.show_progress else None
    # Read ahead until there is enough text for the compiled counter, or there is no more. An error
    # of the iterable's comes after the batches it gave, and is raised after they are counted (one of
    # them may hold an earlier bad element, the one to name).
    held: list[Batch] = []
    size, more = 0, True
    try:
        for batch in batches:
            held.append(batch)
            size += batch.size
            if size >= COMPILED_MIN_BYTES:
                break
        else:
            more = False
    except Exception as error:
        more, batches = False, _raising(error)
    small = not more and not counts_compiled(settings, size)
    if small:  # no threads, no compiled code to load
        threads = 1
    if read_ahead is not None:
        read_ahead(small)
    check_sample(settings.pretokenizer(), first_documents(held), "the first documents", opts.strict_pattern)
    pool = _Pool(settings, opts, threads, progress, size)
    log.info("counting with %s on %s", counting_engine(settings, pool.size),
             plural(pool.threads, "thread"))  # fmt: skip
    pool.run(chain(held, batches))
    if progress is not None:
        progress.end()
    counts = pool.result()
    counts.seconds = time.perf_counter() - started
    log.info("counted %s (%s of text) in %.2f s", plural(counts.documents, "document"),
             format_bytes(counts.text_bytes), counts.seconds)  # fmt: skip
    report_bad_records(counts.bad)
    return counts


@dataclass
class _Counting:
    """One thread's counter, and what it has counted."""

    counter: object
    documents: int = 0
    batches: int = 0
    bad: BadRecords = field(default_factory=BadRecords)


class _Pool:
    """Threads that count batches from a bounded queue, each into its own counter; one thread
    (``threads=1``) counts in the caller's thread.

    A failure names the lowest element that fails, as counting them in order would, whichever
    thread fails first: the batches before a failing one are still counted (one of them may fail
    too), those after it dropped; an iterable that raises waits for the batches it gave to be
    counted. An interrupt drops them all."""

    def __init__(
        self, settings: CountSettings, opts: JobOptions, threads: int, progress: DocumentProgress | None,
        size: int,
    ) -> None:  # fmt: skip
        self.settings, self.opts, self.threads, self.progress = settings, opts, threads, progress
        # Counters for the text seen so far when it all came (one thread), else for a large input.
        self.size = size if threads == 1 else max(size, COMPILED_MIN_BYTES)
        self.limit = Store(opts.storage_options).size("block-size")  # a longer document in pieces
        self.states = [_Counting(new_counter(settings, self.size)) for _ in range(threads)]
        self.failed: list[tuple[int, BaseException]] = []  # (the failing batch's first element, the error)
        self.failed_at: int | None = None  # the first element of the lowest batch that failed
        self.abandoned = False  # an interrupt: nothing queued is counted
        self.lock = threading.Lock()
        self.stop = threading.Event()  # a batch failed, or the iterating thread stopped: iterate no more

    def count(self, state: _Counting, batch: Batch) -> None:
        documents = batch.documents(self.settings.utf8_errors, state.bad, self.opts.on_bad_record)
        add_documents(state.counter, documents, self.settings.pretokenizer(), self.limit)
        state.documents += len(documents)
        state.batches += 1
        if self.progress is not None:
            self.progress.counted(len(batch), len(documents.data))

    def run(self, batches: Iterable[Batch]) -> None:
        if self.threads == 1:
            for batch in batches:
                self.count(self.states[0], batch)
            return
        work: queue.Queue[Batch | None] = queue.Queue(maxsize=2 * self.threads)
        workers = [threading.Thread(target=self._work, args=(work, state), name=f"bpe-dask-count-{k}",
                                    daemon=True) for k, state in enumerate(self.states)]  # fmt: skip
        for worker in workers:
            worker.start()
        raised: Exception | None = None
        try:
            for batch in batches:
                while not self.stop.is_set():  # a thread failed: stop iterating
                    try:
                        work.put(batch, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if self.stop.is_set():
                    break
        except Exception as error:  # the iterable raised: at a later element than any batch it gave
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
        while (batch := work.get()) is not None:
            if self.abandoned or (self.failed_at is not None and batch.first > self.failed_at):
                continue  # after a failure: its error is the one to name
            try:
                self.count(state, batch)
            except BaseException as error:  # raised again in the iterating thread
                with self.lock:
                    self.failed.append((batch.first, error))
                    self.failed_at = min(first for first, _ in self.failed)
                self.stop.set()

    def result(self) -> MemoryCounts:
        tables = [state.counter.table().sort_by("token") for state in self.states]
        table = sum_sorted(tables, self.settings.engine)
        specials, bad = SpecialsSeen(), BadRecords()
        for state in self.states:
            specials.merge(state.counter.specials)
            bad.merge(state.bad)
        return MemoryCounts(
            table, sum(s.documents for s in self.states), sum(s.batches for s in self.states), self.threads,
            words_bytes(table) + specials.bytes, specials, bad,
        )  # fmt: skip


def _raising(error: Exception) -> Iterator[Batch]:
    """An iterable's error, raised where its next batch would have been."""
    raise error
    yield


def first_documents(batches: list[Batch], size: int = SAMPLE_BYTES) -> list[str]:
    """The first documents of ``batches``, about ``size`` bytes of text: the sample a split pattern
    of one's own is checked on (``context.check_sample``), as a file's first documents are.

    >>> first_documents([Batch(0, ["ab", "cd"], 4), Batch(2, ["ef"], 2)], size=3)
    ['ab', 'cd']
    """
    return first_texts((batch.documents("replace", BadRecords(), "skip") for batch in batches), size)


def describe_input(inputs: object) -> str:
    """What the report names as the input: the object's type (``pyarrow.lib.Table``, ``generator``)."""
    kind = type(inputs)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def count_input(
    batches: Iterator[Batch] | None, inputs: object, length: int | None, opts: JobOptions, out: str | None
) -> MemoryCounts:
    """``count_words`` of documents held here: ``batches`` of them, or (``None``) those of the Arrow
    text ``inputs`` (``io.in_memory.arrow_batches``); the counts are also written to ``out`` (a
    Parquet file, as the reduce writes it) when given."""
    threads = memory_threads(opts)
    out = absolute(out) if out else None
    store = Store.for_job(opts.storage_options, [out])
    if out:
        check_output_file(out, opts.overwrite, store)  # before any counting
    if batches is None:
        batches, length = arrow_batches(inputs, opts.text_column)
    counts = count_here(batches, opts, threads, length)
    counts.store = store
    if out:
        recorded = {**opts.count_settings().recorded(), "special_tokens_seen": vars(counts.specials)}
        write_counts(counts.table, out, store, recorded, opts.overwrite)
        counts.path = out
    return counts


def train_here(
    batches: Iterator[Batch] | None, inputs: object, length: int | None, vocab_size: int, out: str,
    opts: JobOptions, limits: Limits, started: float,
) -> dict:  # fmt: skip
    """``train`` of documents held here (``batches``, ``inputs`` and ``length`` as ``count_input``'s),
    with ``opts`` checked for training: counted, merged and published as ``train`` does."""
    threads = memory_threads(opts)
    out = absolute(out)
    store = Store.for_job(opts.storage_options, [out])
    check_output_dir(out, opts.overwrite, is_output_file, store)  # before any counting
    if batches is None:
        batches, length = arrow_batches(inputs, opts.text_column)
    # compression.png's plotting imports matplotlib (0.6 s of Python, holding the GIL), in the
    # background as train does: for a small input at once, else once counting is done, while the
    # merge loop (compiled, releasing the GIL) leaves a core free; counting threads need the GIL
    # between batches (16 MB from an iterator: 1.12 s to count with the import alongside, 0.66 s
    # without). Drawing the picture waits for an import still under way.
    background = ThreadPoolExecutor(1, thread_name_prefix="bpe-dask-plotting")
    plotting: list[Future] = []
    load = partial(background.submit, compression.load_plotting)
    try:
        counts = count_here(batches, opts, threads, length, lambda small: small and plotting.append(load()))
        if not plotting:
            plotting.append(load())
        return _merged_and_published(counts, inputs, vocab_size, out, opts, store, limits, started)
    finally:
        background.shutdown(wait=True)  # an import under way is finished, never left behind


def _merged_and_published(
    counts: MemoryCounts, inputs: object, vocab_size: int, out: str, opts: JobOptions, store: Store,
    limits: Limits, started: float,
) -> dict:  # fmt: skip
    base = {"inputs": [describe_input(inputs)], "input_bytes": counts.text_bytes,
            "text_bytes": counts.text_bytes, "documents": counts.documents, "batches": counts.batches,
            "threads": counts.threads, "utf8_errors": opts.utf8_errors,
            "bad_records_skipped": counts.bad.count, "pattern": opts.pattern}  # fmt: skip
    handed, counts.table = [counts.table], None  # the merge lets it go once its words are laid out
    return merge_and_publish(handed.pop, counts.specials, base, vocab_size, out, opts, store, limits, started,
                             {"count": counts.seconds})  # fmt: skip
