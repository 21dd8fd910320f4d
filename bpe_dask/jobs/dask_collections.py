"""Dask collections as input: a Dask DataFrame column (a Series of strings) or a Bag of strings in;
word counts, a trained tokenizer or token ids out (``train``, ``count_words`` and ``encode`` hand
such an input here).

Each element is a document, as a Parquet record is (``stages.collection_parts``). Each partition of
the collection is one map task on the cluster the collection lives on: the job's ``client`` or
``scheduler`` if given, else the current ``distributed`` client (``get_client()``), else the
LocalCluster the job starts. The tasks are built on the collection's own graph (``to_delayed``), so
nothing is collected to the client: each counts its partition into a shard in the work directory,
named after the partition's Dask key and the settings, and the reduce and the merge loop follow as
for files. A re-run of a job that did not finish, with the same ``work_dir``, reuses the shards it
finished without computing their partitions again; a job that finishes removes them
(``forget_shards`` says why). Nothing here imports ``dask.dataframe``, nor pandas until handed
a Dask Series (which has loaded it): a collection is told by ``dask.is_dask_collection`` and its
type's module.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, replace

import dask
import pyarrow as pa
from dask.base import tokenize
from dask.delayed import Delayed
from distributed import Client, get_client

from bpe_dask.errors import BpeDaskError
from bpe_dask.io.outputs import check_output_dir, check_output_file, remove_files
from bpe_dask.io.records import BadRecords
from bpe_dask.io.sample import SAMPLE_BYTES
from bpe_dask.io.storage import Store, absolute
from bpe_dask.jobs.cluster import NO_WARM_UP, WarmUp
from bpe_dask.jobs.context import (
    Job,
    check_sample,
    is_embedded,
    other_processes_peak_rss_bytes,
    report_bad_records,
    run_tasks,
)
from bpe_dask.jobs.merging import Limits, merge_here, merge_on_cluster
from bpe_dask.jobs.options import JobOptions
from bpe_dask.jobs.progress import PartitionProgress
from bpe_dask.jobs.publishing import (
    compression_curve,
    is_output_file,
    publish_tokenizer,
    training_report,
    warn_if_empty,
)
from bpe_dask.jobs.wording import format_bytes, plural
from bpe_dask.rules.pretokenize import Pretokenizer
from bpe_dask.stages.collection_parts import (
    UNIT,
    CollectionPart,
    count_part_to_shard,
    encode_part_to_shard,
    sample_part,
)
from bpe_dask.stages.count import (
    CountSettings,
    ShardTotals,
    counting_engine,
    counts_compiled,
    read_shard,
    shard_path,
)
from bpe_dask.stages.counters import COMPILED_MIN_BYTES, SpecialsSeen
from bpe_dask.stages.encode import EncodedShard, encoding_key, read_encoded_shard
from bpe_dask.stages.encode import shard_path as encoded_shard_path
from bpe_dask.stages.reduce import reduce_tree
from bpe_dask.tokenizer import Tokenizer

log = logging.getLogger(__name__)

# A collection's size is not known before it is counted: taken as large, so that a LocalCluster the
# job starts runs the compiled loops in threads (each task still picks its engine by its own text).
UNKNOWN_SIZE = 1 << 40


def is_collection(inputs: object) -> bool:
    """Whether ``inputs`` is a Dask collection (a DataFrame, Series or Bag is one of documents).

    >>> import dask.bag
    >>> is_collection(dask.bag.from_sequence(["a b", "c"])), is_collection("corpus.txt")
    (True, False)
    """
    return dask.is_dask_collection(inputs)


@dataclass(frozen=True)
class DocumentCollection:
    """A collection's partitions, each a task of its graph whose result is one partition's
    elements, and a description of it for messages and reports."""

    description: str
    partitions: tuple[Delayed, ...]

    def parts(self, on_bad_record: str) -> list[CollectionPart]:
        return [CollectionPart(self.description, i, str(d.key), on_bad_record)
                for i, d in enumerate(self.partitions)]  # fmt: skip

    def key(self) -> str:
        return tokenize([str(d.key) for d in self.partitions])


def documents_of(collection: object, text_column: str = "text") -> DocumentCollection:
    """The documents of a Dask Bag, a Dask Series of text, or the ``text_column`` of a Dask DataFrame;
    anything else is refused in one line."""
    kind, module = type(collection).__name__, type(collection).__module__
    if module.startswith("dask.bag") and kind == "Bag":
        return DocumentCollection(f"the Dask Bag {collection.name!r}", tuple(collection.to_delayed()))
    if not module.startswith(("dask.dataframe", "dask_expr")) or kind not in ("DataFrame", "Series"):
        raise BpeDaskError(
            f"a Dask {kind} is not a collection of documents: give a Dask DataFrame column (a Series of "
            "strings), a DataFrame and its text_column, or a Dask Bag of strings"
        )
    if kind == "DataFrame":
        if text_column not in collection.columns:
            columns = ", ".join(repr(c) for c in collection.columns)
            raise BpeDaskError(f"the Dask DataFrame has no column {text_column!r} (its columns: {columns}): "
                               "give text_column=, or the column itself (ddf['text'])")  # fmt: skip
        collection = collection[text_column]
    description = "the Dask Series" + ("" if collection.name is None else f" {collection.name!r}")
    if not _holds_text(collection.dtype):
        raise BpeDaskError(
            f"{description} holds {collection.dtype}, not text: each element must be a document"
        )
    return DocumentCollection(description, tuple(collection.to_delayed()))


def _holds_text(dtype: object) -> bool:
    """Whether a pandas dtype can hold strings: object, pandas' string types, Arrow's string or binary,
    or categories of these."""
    import pandas  # handed a Dask Series: pandas is loaded

    if isinstance(dtype, pandas.CategoricalDtype):  # strings stored once each: text all the same
        return _holds_text(dtype.categories.dtype)

    if isinstance(dtype, pandas.ArrowDtype):
        kind = dtype.pyarrow_dtype
        kinds = ("is_string", "is_large_string", "is_binary", "is_large_binary", "is_string_view")
        return any(getattr(pa.types, k, lambda _: False)(kind) for k in kinds)  # string views: pyarrow 16
    return pandas.api.types.is_string_dtype(dtype) or pandas.api.types.is_object_dtype(dtype)


def collection_options(opts: JobOptions) -> JobOptions:
    """Where a collection's tasks run: the place the options give; else the current ``distributed``
    client, whose cluster holds what the collection was persisted on; else nowhere yet (the job
    starts a LocalCluster)."""
    if opts.in_process:
        raise BpeDaskError("in_process=True counts here: a Dask collection is counted on its cluster")
    if opts.chunk_size:
        log.warning("chunk_size does not apply to a Dask collection: each of its partitions is a task "
                    "(repartition it for others)")  # fmt: skip
    if opts.wants_cluster:
        return opts
    try:
        client = get_client()
    except ValueError:  # no client: the job starts a LocalCluster
        return opts
    return JobOptions.of(opts, client=client)


def _counting(job: Job) -> tuple[CountSettings, bool, WarmUp]:
    """The settings the tasks count with, whether a LocalCluster the job starts runs them in threads
    of this process, and what its workers warm up: the compiled scanner wherever it may count, since
    the collection's size is not known before it is counted (``count.counting_cluster``'s rule)."""
    settings = job.options.count_settings()
    if job.starts_cluster and counts_compiled(settings, UNKNOWN_SIZE):
        return replace(settings, engine="numba"), True, WarmUp((settings.pattern,), ("count", "reduce"))
    return settings, False, NO_WARM_UP


def _finished(folder: str, store: Store) -> set[str]:
    """The names of the files in ``folder`` (none if there is no such folder)."""
    fs, path = store.fs(folder)
    fs.invalidate_cache(path)  # an object store's listing cached by an earlier job of this process
    try:
        return {name.rstrip("/").rpartition("/")[2] for name in fs.ls(path, detail=False)}
    except FileNotFoundError:
        return set()


def check_pattern(
    client: Client, job: Job, documents: DocumentCollection, pretokenizer: Pretokenizer
) -> None:
    """``Job.check_pattern`` for a collection: on the first documents of its first partition, computed
    on its cluster (a second time, for a pattern of one's own only: the built-in ones cover all text)."""
    if pretokenizer.pattern.builtin or not documents.partitions:
        return
    part = documents.parts(job.options.on_bad_record)[0]
    sample = run_tasks(client, [dask.delayed(sample_part)(documents.partitions[0], part, SAMPLE_BYTES)])[0]
    what = f"the first documents of {documents.description}"
    check_sample(pretokenizer, sample, what, job.options.strict_pattern)


def count_parts(
    client: Client,
    job: Job,
    documents: DocumentCollection,
    settings: CountSettings,
    work_dir: str,
    out: str | None,
    overwrite: bool = False,
) -> tuple[str | pa.Table, int, BadRecords, SpecialsSeen, int, list[str]]:
    """Map and reduce on the cluster, as ``count.count_on_cluster`` for files: a count task per
    partition, or, where its shard is finished, a task that reads the shard's figures (its partition
    is then not computed); the same summed counts, reuses, bad records, special tokens and text bytes,
    and the shards' paths (for ``forget_shards``). ``overwrite``: whether the sum may replace a file
    ``out`` already holds."""
    check_pattern(client, job, documents, settings.pretokenizer())
    shard_dir = f"{work_dir.rstrip('/')}/shards"
    store = job.store
    finished = _finished(shard_dir, store)
    # Task keys of this run's own: an earlier run's results for the same partitions may still be held
    # by the scheduler, and its shards removed since (``forget_shards``).
    run = uuid.uuid4().hex
    shards, paths = [], []
    for part, data in zip(documents.parts(job.options.on_bad_record), documents.partitions, strict=True):
        path = shard_path(shard_dir, part, settings)
        paths.append(path)
        name = f"count-{tokenize(part.key(), settings.key(), shard_dir, store, run)}"
        if path.rpartition("/")[2] in finished:
            shards.append(dask.delayed(read_shard, pure=True)(path, store, dask_key_name=name))
        else:
            task = dask.delayed(count_part_to_shard, pure=True)
            shards.append(task(data, part, settings, path, store, dask_key_name=name))
    final, partial_sums = reduce_tree(shards, out, work_dir, settings.recorded(), store,
                                      overwrite=overwrite, engine=settings.engine)  # fmt: skip
    progress = PartitionProgress("count", len(shards)) if job.options.show_progress else None
    text_bytes_of = lambda shard: shard.text_bytes  # noqa: E731
    *done, counts = run_tasks(client, [*shards, final], progress, [0] * len(shards), text_bytes_of)
    remove_files(partial_sums, store)
    totals = ShardTotals.of(done)
    log.info("%s of text in %s, %s reused", format_bytes(totals.text_bytes), plural(len(done), "partition"),
             totals.reused)  # fmt: skip
    return counts, totals.reused, totals.bad, totals.specials, totals.text_bytes, paths


def forget_shards(paths: list[str], store: Store) -> None:
    """Remove a finished job's shards of a collection (and their sidecars): only a re-run of a job
    that did not finish (interrupted, failed) may reuse them. A shard is named after its partition's
    Dask key, which need not change with the data: ``dask.bag.read_text`` of a file written anew, a
    function of one's own that reads files, give the same keys, and a later run reusing their shards
    would count the old text."""
    remove_files([*paths, *(f"{path}.json" for path in paths)], store)


def count_collection(collection: object, opts: JobOptions, out: str | None = None) -> dict:
    """``count_words`` of a collection: the fields of its ``CountResult``.

    >>> import dask.bag
    >>> from distributed import Client
    >>> from bpe_dask import count_words
    >>> documents = dask.bag.from_sequence(["the cat", "the<|endoftext|>hat", "the"], npartitions=2)
    >>> with Client(processes=False, n_workers=1, dashboard_address=None) as client:
    ...     counted = count_words(documents, ["<|endoftext|>"], client=client)
    >>> sorted(zip(counted.table()["token"].to_pylist(), counted.table()["count"].to_pylist()))
    [(b' cat', 1), (b'hat', 1), (b'the', 3)]
    >>> counted.partitions, counted.report()["special_tokens_seen"]
    (2, 1)
    """
    started = time.perf_counter()
    documents = documents_of(collection, opts.text_column)
    opts = collection_options(opts)
    out = absolute(out) if out else out
    job = Job.start(opts, [out, opts.work_dir])
    if out:
        check_output_file(out, opts.overwrite, job.store)
    settings, in_threads, warm_up = _counting(job)
    with (
        job.work_directory(beside=None if job.embedded else out) as work,
        job.cluster(in_threads, warm_up) as client,
    ):
        job.preflight(client, work, [out])
        _say_counting(documents, settings)
        counted = count_parts(client, job, documents, settings, work, out, opts.overwrite)
        counts, reused, bad, specials, text_bytes, shards = counted
    forget_shards(shards, job.store)  # the counts are out (or handed back): the job is done
    report_bad_records(bad)
    return {
        "input_files": [documents.description], "input_bytes": text_bytes, "text_bytes": text_bytes,
        "partitions": len(documents.partitions), "partitions_reused": reused,
        "bad_records_skipped": bad.count, "specials": specials, "seconds": time.perf_counter() - started,
        "store": job.store, "path": counts if out else None, "_table": None if out else counts,
    }  # fmt: skip


def _say_counting(documents: DocumentCollection, settings: CountSettings) -> None:
    engine = counting_engine(settings, UNKNOWN_SIZE)
    if counts_compiled(settings, UNKNOWN_SIZE) and not counts_compiled(settings, 0):  # each task picks
        engine += (
            f" for partitions of {format_bytes(COMPILED_MIN_BYTES)} of text or more, else "
            f"{counting_engine(settings, 0)}"
        )
    log.info("%s, %s, counted with %s", documents.description,
             plural(len(documents.partitions), "partition"), engine)  # fmt: skip


def train_collection(
    collection: object, vocab_size: int, out: str, opts: JobOptions, limits: Limits, started: float
) -> dict:
    """``train`` of a collection (``opts`` checked, ``started`` when the job did): count its
    partitions on its cluster, run the merge loop, publish ``out``; the report."""
    documents = documents_of(collection, opts.text_column)
    opts = collection_options(opts)
    out = absolute(out)
    job = Job.start(opts, [out, opts.work_dir])
    check_output_dir(out, opts.overwrite, is_output_file, job.store)
    settings, in_threads, warm_up = _counting(job)
    with (
        job.work_directory(beside=None if job.embedded else out) as work,
        job.cluster(in_threads, warm_up) as client,
    ):
        job.preflight(client, work)  # the tokenizer is published from here, not by the tasks
        _say_counting(documents, settings)
        on_worker = opts.merge_on == "worker" or (opts.merge_on == "auto" and not is_embedded(client))
        counts_file = f"{work.rstrip('/')}/counts/{tokenize(documents.key(), settings.key())}.parquet"
        # The counts file is the job's own, named after what it sums: a re-run may write it again.
        counted = count_parts(
            client, job, documents, settings, work, counts_file if on_worker else None, True
        )
        counts, reused, bad, specials, text_bytes, shards = counted
        count_seconds = time.perf_counter() - started
        if on_worker:
            merged = merge_on_cluster(client, counts, vocab_size, opts.special_tokens, job, limits)
        else:
            merged = merge_here(counts, vocab_size, opts, limits)
        workers_peak = other_processes_peak_rss_bytes(client)
    report_bad_records(bad)
    warn_if_empty(merged.unique_words, text_bytes)
    partitions = len(documents.partitions)
    report = training_report(
        {"inputs": [documents.description], "input_bytes": text_bytes, "text_bytes": text_bytes,
         "partitions": partitions, "partitions_reused": reused, "partitions_computed": partitions - reused,
         "utf8_errors": opts.utf8_errors, "bad_records_skipped": bad.count, "pattern": opts.pattern},
        merged, opts.special_tokens, vocab_size, limits, {"count": count_seconds},
    )  # fmt: skip
    report["merge_ran_on"] = "worker" if on_worker else "client"
    report["workers_peak_rss_bytes"] = workers_peak
    report["timings"]["total"] = time.perf_counter() - started
    curve = compression_curve(merged, opts.special_tokens, specials)
    publish_tokenizer(out, merged, opts, report, job.store, limits, curve=curve)
    forget_shards(shards, job.store)
    return report


def encode_parts(
    client: Client,
    job: Job,
    documents: DocumentCollection,
    tokenizer: Tokenizer,
    work: str,
    separator: str | None,
) -> list[EncodedShard]:
    """A shard of ids per partition, in the partition order, as ``encode`` makes for files: each
    document followed by ``separator``'s id; a finished shard is reused without computing its
    partition."""
    check_pattern(client, job, documents, tokenizer.pretokenizer)
    store, options = job.store, job.options
    shared = client.scatter(tokenizer, broadcast=True, hash=False)
    key = encoding_key(tokenizer, separator, options.utf8_errors)
    finished = _finished(f"{work.rstrip('/')}/encoded", store)
    run = uuid.uuid4().hex  # this run's own task keys, as count_parts's
    tasks = []
    for part, data in zip(documents.parts(options.on_bad_record), documents.partitions, strict=True):
        path = encoded_shard_path(work, part, key)
        name = f"encode-{tokenize(part.key(), key, work, run)}"
        if path.rpartition("/")[2] in finished and f"{path.rpartition('/')[2]}.json" in finished:
            where = (part.collection, part.index, part.index + 1, UNIT)
            tasks.append(dask.delayed(read_encoded_shard, pure=True)(path, shared, where, store,
                                                                     dask_key_name=name))  # fmt: skip
        else:
            task = dask.delayed(encode_part_to_shard, pure=True)
            tasks.append(
                task(data, part, shared, path, store, options.utf8_errors, separator, dask_key_name=name)
            )
    progress = PartitionProgress("encode", len(tasks)) if options.show_progress else None
    shards = run_tasks(client, tasks, progress, [0] * len(tasks), lambda shard: shard.text_bytes)
    bad = BadRecords()
    for shard in shards:
        bad.merge(shard.bad_records)
    report_bad_records(bad)
    return shards
