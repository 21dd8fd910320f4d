"""The count job: inputs in, the word counts out (plan, map, reduce).

``count_words`` plans byte ranges, counts each in a Dask task that writes a shard (``counting``),
and sums the shards in a tree of tasks (``reduce``) into one counts table: in memory, or the
Parquet file ``out``. Small inputs with no cluster asked for are counted in this process.
``count_on_cluster`` is the map and reduce that ``train`` runs too. ``count_from_iterator``, and
``count_words`` of an Arrow table or a dataset, count documents held in this process (``from_memory``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import dask
import pyarrow as pa
from dask.base import tokenize
from distributed import Client

from bpe_dask import settings as config
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.counts_table import read_counts, words_bytes, write_counts
from bpe_dask.io.in_memory import DEFAULT_BATCH_SIZE, Batch, holds_arrow_text, python_batches
from bpe_dask.io.outputs import check_output_file, remove_files
from bpe_dask.io.plan import Partition
from bpe_dask.io.records import BadRecords
from bpe_dask.io.storage import Store, absolute
from bpe_dask.jobs.cluster import NO_WARM_UP, WarmUp
from bpe_dask.jobs.context import Job, cluster_threads, report_bad_records, run_tasks
from bpe_dask.jobs.dask_collections import count_collection, is_collection
from bpe_dask.jobs.from_memory import count_input, describe_input
from bpe_dask.jobs.options import JobOptions, PathLike, input_list, positive_int
from bpe_dask.jobs.progress import TaskProgress
from bpe_dask.jobs.wording import format_bytes
from bpe_dask.stages.count import (
    CountSettings,
    ShardTotals,
    count_range,
    count_range_to_shard,
    counting_engine,
    counts_compiled,
    new_counter,
)
from bpe_dask.stages.counters import SpecialsSeen
from bpe_dask.stages.read_events import ReadTally
from bpe_dask.stages.reduce import reduce_tree

log = logging.getLogger(__name__)


@dataclass
class CountResult:
    """The word counts (in memory, or in the Parquet file ``path``) and how they were made.

    >>> _ = open("corpus.txt", "w").write("the cat the hat")
    >>> result = count_words("corpus.txt")
    >>> result.table().column_names, result.table().num_rows, result.report()["input_bytes"]
    (['token', 'count'], 4, 15)
    """

    input_files: list[str]
    input_bytes: int
    partitions: int
    partitions_reused: int = 0
    bad_records_skipped: int = 0
    specials: SpecialsSeen = field(default_factory=SpecialsSeen)  # the special tokens the inputs held
    text_bytes: int = 0  # the UTF-8 bytes of the text counted (decompressed; records' texts only)
    seconds: float = 0.0
    path: str | None = None
    store: Store = field(default_factory=Store, repr=False)  # where ``path`` is
    _table: pa.Table | None = field(default=None, repr=False)

    def table(self) -> pa.Table:
        if self._table is None:
            self._table = read_counts(self.path, self.store)
        return self._table

    def report(self) -> dict:
        return {
            "inputs": self.input_files,
            "input_bytes": self.input_bytes,
            "text_bytes": self.text_bytes,
            "partitions": self.partitions,
            "partitions_reused": self.partitions_reused,
            "partitions_computed": self.partitions - self.partitions_reused,
            "bad_records_skipped": self.bad_records_skipped,
            "special_tokens_seen": self.specials.count,
        }


def count_words(
    inputs: PathLike | Sequence[PathLike],
    special_tokens: Sequence[str] = (),
    *,
    out: str | None = None,
    **options,
) -> CountResult:
    """The word counts of ``inputs`` (a path, URL or glob, or a list of them).

    ``out`` names a Parquet file (or URL) for the counts, and then the job runs on a cluster.
    ``options`` are ``JobOptions`` fields: ``chunk_size``, ``client``, ``scheduler``, ``workers``,
    ``work_dir``, ``storage_options``, ``utf8_errors``, ``in_process``, ``overwrite``, ... ``inputs``
    may also be text in memory (a ``pyarrow`` Table, a Hugging Face dataset), as ``train``'s, or a
    Dask DataFrame column or Bag of documents, counted on its cluster (``dask_collections``).

    >>> _ = open("corpus.txt", "w").write("the cat<|endoftext|>the hat")
    >>> counts = count_words("corpus.txt", ["<|endoftext|>"]).table()  # small: counted in-process
    >>> sorted(zip(counts["token"].to_pylist(), counts["count"].to_pylist()))
    [(b' cat', 1), (b' hat', 1), (b'the', 2)]
    """
    opts = JobOptions.of(special_tokens=special_tokens, **options)
    if is_collection(inputs):  # a Dask DataFrame column or Bag: a map task per partition, on its cluster
        return CountResult(**count_collection(inputs, opts, out))
    if holds_arrow_text(inputs):  # an Arrow table or a dataset: counted here, from its buffers
        return _counted_here(None, inputs, None, opts, out)
    return count_with(input_list(inputs), opts, out)


def count_from_iterator(
    iterable: Iterable[str | bytes],
    special_tokens: Sequence[str] = (),
    *,
    pattern: str = "gpt2",
    batch_size: int = DEFAULT_BATCH_SIZE,
    length: int | None = None,
    out: str | None = None,
    **options,
) -> CountResult:
    """``count_words`` of the documents an iterable gives (``str``, or ``bytes`` of UTF-8), counted
    in this process as ``train_from_iterator`` counts them; ``out`` as ``count_words``'s.

    >>> counts = count_from_iterator(["the cat", b"the hat"]).table()
    >>> sorted(zip(counts["token"].to_pylist(), counts["count"].to_pylist()))
    [(b' cat', 1), (b' hat', 1), (b'the', 2)]
    """
    opts = JobOptions.of(special_tokens=special_tokens, pattern=pattern, **options)
    return _counted_here(python_batches(iterable, positive_int(batch_size, "batch_size")), iterable, length,
                         opts, out)  # fmt: skip


def _counted_here(
    batches: Iterator[Batch] | None, inputs: object, length: int | None, opts: JobOptions, out: str | None
) -> CountResult:
    started = time.perf_counter()
    counts = count_input(batches, inputs, length, opts, out)
    return CountResult([describe_input(inputs)], counts.text_bytes, counts.batches, 0, counts.bad.count,
                       counts.specials, counts.text_bytes, time.perf_counter() - started, counts.path,
                       counts.store, None if counts.path else counts.table)  # fmt: skip


def count_with(inputs: list[str], opts: JobOptions, out: str | None = None) -> CountResult:
    """``count_words`` with its options already checked."""
    started = time.perf_counter()
    out = absolute(out) if out else out
    if opts.in_process and out:
        raise BpeDaskError("in_process=True counts here: it cannot write out")
    job = Job.start(opts, [*inputs, out, opts.work_dir])
    if out:
        check_output_file(out, opts.overwrite, job.store)
    job.find_inputs(inputs, exclude=[out, opts.work_dir], outputs=[out])
    settings = opts.count_settings()
    pretokenizer = settings.pretokenizer()
    job.check_pattern(pretokenizer)
    in_process = opts.in_process
    if job.empty:  # nothing to count: no cluster to start, or to wait for
        in_process = True
    elif in_process is None:
        # Below this much input the Python API counts here: starting a cluster costs seconds.
        small = job.input_bytes <= config.size("in-process-limit", job.store.settings)
        in_process = not (opts.wants_cluster or out) and small
    if in_process:
        job.plan(pretokenizer)
        log.info("counting with %s", counting_engine(settings, job.input_bytes))
        result = _result(job)
        bad = BadRecords()
        counted = count_in_process(job.ranges, settings, job.store, bad, result.specials)
        result._table, job.unsized_read = counted
        result.input_bytes = job.input_bytes
        result.text_bytes = words_bytes(result._table) + result.specials.bytes
        say_text_bytes(job, result.text_bytes)
        if out:  # as the reduce records it: the settings, and the special tokens seen
            recorded = {**settings.recorded(), "special_tokens_seen": vars(result.specials)}
            write_counts(result._table, out, job.store, recorded, opts.overwrite)
            result.path = out
    else:
        settings, in_threads = counting_cluster(job, settings)
        scratch = job.work_directory(beside=None if job.embedded else out)
        with scratch as work, job.cluster(in_threads, counting_warm_up(job, [settings])) as client:
            job.preflight(client, work, [out])
            job.plan(pretokenizer, cluster_threads(client))
            log.info("counting with %s", counting_engine(settings, job.largest_range))
            result = _result(job)
            counts, result.partitions_reused, bad, result.specials, result.text_bytes = count_on_cluster(
                client, job, settings, work, out
            )
            result.input_bytes = job.input_bytes  # with what the inputs of no known size held
            if out:
                result.path = counts
            else:
                result._table = counts
    result.bad_records_skipped = bad.count
    report_bad_records(bad)
    result.seconds = time.perf_counter() - started
    return result


def counting_cluster(job: Job, settings: CountSettings) -> tuple[CountSettings, bool]:
    """The settings the map tasks count with, and whether a LocalCluster the job starts runs them in
    threads of this process: when the compiled scanner counts the job's text, which releases the GIL.
    It then counts every range, however small: loaded once in this process, not once per worker,
    it pays for itself on the job's bytes, not on each range's."""
    if job.starts_cluster and counts_compiled(settings, job.input_bytes):
        return replace(settings, engine="numba"), True
    return settings, False


def _result(job: Job) -> CountResult:
    return CountResult(job.inputs_shown, job.input_bytes, len(job.ranges), store=job.store)


def count_in_process(
    ranges: Sequence[Partition], settings: CountSettings, store: Store, bad: BadRecords,
    specials: SpecialsSeen | None = None,
) -> tuple[pa.Table, int]:
    """The counts of ``ranges``, here, and the bytes read of the inputs whose size was not known;
    records skipped are added to ``bad``, special tokens seen to ``specials``."""
    counter = new_counter(settings, sum(r.text_bytes for r in ranges))
    unsized_read = 0
    for byte_range in ranges:
        tally = ReadTally(None)
        count_range(byte_range, settings, store, counter=counter, bad=bad, progress=tally)
        unsized_read += 0 if byte_range.file.sized else tally.read
    if specials is not None:
        specials.merge(counter.specials)
    return counter.table(), unsized_read


def counting_warm_up(
    job: Job, settings: Sequence[CountSettings], stages: Sequence[str] = ("count", "reduce")
) -> WarmUp:
    """What an embedded cluster's workers warm up for tasks that count with ``settings``: the
    compiled loops of ``stages`` (by default the map's counting loop and the reduce's sum of sorted
    runs) for each pattern whose partitions will be large enough for the compiled scanner (their
    counts then large enough for the compiled sum), and nothing otherwise (the bundled sample's tasks
    run no compiled code, and its workers compile none)."""
    largest = job.expected_largest_range()
    patterns = tuple(dict.fromkeys(s.pattern for s in settings if counts_compiled(s, largest)))
    return WarmUp(patterns, tuple(stages)) if patterns else NO_WARM_UP


def count_on_cluster(
    client: Client, job: Job, settings: CountSettings, work_dir: str, out: str | None = None,
    overwrite: bool | None = None,
) -> tuple[str | pa.Table, int, BadRecords, SpecialsSeen, int]:  # fmt: skip
    """Map and reduce on the cluster: the summed counts, written to ``out`` (its URL is returned) or,
    with no ``out``, handed back as a table; how many shards were reused; the records skipped; the
    special tokens the inputs held; the bytes of text counted. ``overwrite``: whether the sum may
    replace a file ``out`` holds (by default the job's ``--overwrite``)."""
    shard_dir = f"{work_dir.rstrip('/')}/shards"
    store = job.store
    shards = [
        dask.delayed(count_range_to_shard, pure=True)(
            r, settings, shard_dir, store,
            dask_key_name=f"count-{tokenize(r.key(), settings.key(), shard_dir, store)}",
        )
        for r in job.ranges
    ]  # fmt: skip
    overwrite = job.options.overwrite if overwrite is None else overwrite
    final, partial_sums = reduce_tree(shards, out, work_dir, settings.recorded(), store,
                                      overwrite=overwrite, engine=settings.engine)  # fmt: skip
    progress = TaskProgress("count", len(shards), job.input_bytes) if job.options.show_progress else None
    *finished, counts = run_tasks(client, [*shards, final], progress, [r.size for r in job.ranges])
    remove_files(partial_sums, store)
    totals = ShardTotals.of(finished)
    job.unsized_read = totals.read_bytes
    say_text_bytes(job, totals.text_bytes)
    return counts, totals.reused, totals.bad, totals.specials, totals.text_bytes


def say_text_bytes(job: Job, text_bytes: int) -> None:
    """How much text the input held, where that is not its size: compressed files, records."""
    if any(f.compression or f.has_records for f in job.files):
        log.info("%s of text in %s of input", format_bytes(text_bytes), format_bytes(job.input_bytes))
