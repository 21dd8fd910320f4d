"""The training jobs: inputs (or counts) in, a trained tokenizer out.

``train`` is the whole job: count (``count_job``), run the merge loop (``merging``) on the client or
on the worker with the most memory, and publish the tokenizer directory with its report.
``merge`` runs the merge loop on a counts table that ``bpe-dask count`` wrote. ``train_bpe`` is the
CS336-compatible entry point: vocabulary and merges back, no files. ``train_from_iterator``, and
``train`` of an Arrow table or a Hugging Face dataset, count documents held in this process
(``from_memory``), then merge and publish the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from bpe_dask.errors import BpeDaskError
from bpe_dask.io.counts_table import counts_table, read_counts, recorded_settings
from bpe_dask.io.in_memory import DEFAULT_BATCH_SIZE, holds_arrow_text, python_batches
from bpe_dask.io.outputs import check_output_dir
from bpe_dask.io.storage import Store, absolute
from bpe_dask.io.tokenizer_formats import check_special_token_names
from bpe_dask.jobs import compression
from bpe_dask.jobs.context import (
    Job,
    cluster_threads,
    is_embedded,
    other_processes_peak_rss_bytes,
    report_bad_records,
)
from bpe_dask.jobs.count import count_on_cluster, count_with, counting_cluster, counting_warm_up
from bpe_dask.jobs.dask_collections import is_collection, train_collection
from bpe_dask.jobs.from_memory import train_here
from bpe_dask.jobs.merging import Limits, Merges, Vocab, merge_here, merge_on_cluster, merge_table
from bpe_dask.jobs.options import JobOptions, PathLike, input_list, positive_int
from bpe_dask.jobs.publishing import (
    compression_curve,
    is_output_file,
    merge_and_publish,
    publish_tokenizer,
    tokenizer_files,
    training_report,
    warn_if_empty,
    warn_if_short,
)
from bpe_dask.rules.pretokenize import split_pattern
from bpe_dask.stages.count import counting_engine
from bpe_dask.stages.counters import SpecialsSeen
from bpe_dask.stages.merge import compile_merge_loop_in_background

log = logging.getLogger(__name__)
PLOT_EARLY = 16 * 2**20  # input bytes below which compression.png's library loads as the job starts


def train(
    inputs: PathLike | Sequence[PathLike],
    vocab_size: int,
    out: str,
    special_tokens: Sequence[str] = (),
    *,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    **options,
) -> dict:
    """Count ``inputs``, learn merges up to ``vocab_size``, and publish the tokenizer directory ``out``.

    Returns the report (also written as ``out/report.json``). ``min_frequency`` and
    ``max_token_length`` (bytes) are the ``Limits`` of the merge loop. ``options`` are ``JobOptions``
    fields; ``merge_on`` is ``"client"``, ``"worker"``, or ``"auto"``: on a worker when the cluster
    is not an embedded LocalCluster, so the client never holds the word counts. ``inputs`` may also
    be text in memory: a ``pyarrow`` Table (its ``text_column``), RecordBatch or string array, a
    Hugging Face ``datasets.Dataset`` or ``IterableDataset``, anything giving an Arrow stream,
    counted in this process from its Arrow buffers (``train_from_iterator`` says how); or a Dask
    DataFrame column or Bag of documents, counted on its cluster (``dask_collections``).

    >>> from distributed import Client
    >>> _ = open("corpus.txt", "w").write("low lower lowest<|endoftext|>newest widest")
    >>> with Client(processes=False, n_workers=1, dashboard_address=None) as client:
    ...     report = train("corpus.txt", 260, "tokenizer", ["<|endoftext|>"], client=client)
    >>> report["num_merges"], open("tokenizer/merges.txt").read().splitlines()
    (3, ['w e', 's t', 'l o'])
    """
    started = time.perf_counter()
    opts = _training_options(vocab_size, special_tokens, options)
    limits = Limits(min_frequency, max_token_length)
    if is_collection(inputs):  # a Dask DataFrame column or Bag: a map task per partition, on its cluster
        return train_collection(inputs, vocab_size, out, opts, limits, started)
    if holds_arrow_text(inputs):  # an Arrow table or a dataset: counted here, from its buffers
        return train_here(None, inputs, None, vocab_size, out, opts, limits, started)
    inputs, out = input_list(inputs), absolute(out)
    job = Job.start(opts, [*inputs, out, opts.work_dir])
    check_output_dir(out, opts.overwrite, is_output_file, job.store)
    job.find_inputs(inputs, exclude=[out, opts.work_dir], outputs=[out])
    settings = opts.count_settings()
    job.check_pattern(settings.pretokenizer())
    if job.empty:  # nothing to count: no cluster to start, or to wait for
        return _train_on_nothing(job, vocab_size, out, limits, started)
    settings, in_threads = counting_cluster(job, settings)
    if opts.merge_on != "worker" and job.starts_cluster:
        compile_merge_loop_in_background(opts.engine, job.input_bytes, vocab_size)
    background = ThreadPoolExecutor(1)
    # Drawing compression.png imports matplotlib: 0.6 s of Python, holding the GIL. In the background,
    # finished before the cluster closes (compression.load_plotting says why): for a large input once
    # counting, which keeps every core busy and takes the GIL between blocks, is done and the merge
    # loop, which releases the GIL, leaves a core free (on 65 MB, 0.7 s less a run); for a small one,
    # whose counting is over sooner than the import, at once, while the cluster starts.
    plotting = background.submit(compression.load_plotting) if job.input_bytes < PLOT_EARLY else None
    cluster = job.cluster(in_threads, counting_warm_up(job, [settings]))
    with job.work_directory(beside=None if job.embedded else out) as work, cluster as client:
        job.preflight(client, work)  # the tokenizer is published from here, not by the tasks
        job.plan(settings.pretokenizer(), cluster_threads(client))
        log.info("counting with %s", counting_engine(settings, job.largest_range))
        on_worker = opts.merge_on == "worker" or (opts.merge_on == "auto" and not is_embedded(client))
        # The merge reads the counts where it runs: from the work directory on a worker; here, from
        # the reduce's own result, with no file in between.
        counts_file = f"{work.rstrip('/')}/counts/{job.key(settings)}.parquet" if on_worker else None
        # The counts file is the job's own, named after what it sums: a re-run may write it again.
        counts, reused, bad, specials, text_bytes = count_on_cluster(
            client, job, settings, work, counts_file, overwrite=True
        )  # unpacked at once: a tuple kept of them would keep the table through the merge
        count_seconds = time.perf_counter() - started
        plotting = plotting or background.submit(compression.load_plotting)
        if on_worker:
            merged = merge_on_cluster(client, counts, vocab_size, opts.special_tokens, job, limits)
        else:  # handed over, not kept here: the merge lets the table go once its words are laid out
            handed, counts = [counts], None
            merged = merge_here(handed.pop, vocab_size, opts, limits)
        workers_peak = other_processes_peak_rss_bytes(client)
        # The tokenizer's files take a moment to make (tiktoken's ranks are checked): made while the
        # cluster closes, with everything they import already imported.
        curve = compression_curve(merged, opts.special_tokens, specials)
        plotting.result()
        files = background.submit(tokenizer_files, merged, opts.special_tokens, opts.pattern, curve)
        background.shutdown(wait=False)  # the thread ends with its task
    report_bad_records(bad)
    warn_if_empty(merged.unique_words, job.input_bytes)
    report = training_report(
        {"inputs": job.inputs_shown, "input_bytes": job.input_bytes, "text_bytes": text_bytes,
         "partitions": len(job.ranges),
         "partitions_reused": reused, "partitions_computed": len(job.ranges) - reused,
         "utf8_errors": opts.utf8_errors, "bad_records_skipped": bad.count, "pattern": opts.pattern},
        merged, opts.special_tokens, vocab_size, limits, {"count": count_seconds},
    )  # fmt: skip
    report["merge_ran_on"] = "worker" if on_worker else "client"
    report["workers_peak_rss_bytes"] = workers_peak
    report["timings"]["total"] = time.perf_counter() - started
    publish_tokenizer(out, merged, opts, report, job.store, limits, files.result(), curve)
    return report


def train_from_iterator(
    iterable: Iterable[str | bytes],
    vocab_size: int,
    out: str,
    special_tokens: Sequence[str] = (),
    *,
    pattern: str = "gpt2",
    batch_size: int = DEFAULT_BATCH_SIZE,
    length: int | None = None,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    **options,
) -> dict:
    """``train`` of the documents an iterable gives (``str``, or ``bytes`` of UTF-8), counted here.

    Each element is a document: no pre-token crosses from one into the next, and special tokens
    inside one are split out, so the merges are those of the documents joined by a special token
    (one that cannot overlap itself, as ``<|endoftext|>``). Counted in batches of ``batch_size``
    documents on ``workers`` threads of this process (one per core by default), in bounded memory;
    ``length``, how many documents to expect, gives ``show_progress=True`` a percentage and an ETA.
    ``options`` are the ``JobOptions`` that apply here (``utf8_errors``, ``engine``, ``overwrite``,
    ``storage_options`` for ``out``, ...). Returns the report, also written as ``out/report.json``.

    >>> documents = ["low lower lowest", "newest widest"]
    >>> report = train_from_iterator(iter(documents), 260, "tokenizer", ["<|endoftext|>"])
    >>> report["documents"], open("tokenizer/merges.txt").read().splitlines()
    (2, ['w e', 's t', 'l o'])
    """
    started = time.perf_counter()
    opts = _training_options(vocab_size, special_tokens, {**options, "pattern": pattern})
    limits = Limits(min_frequency, max_token_length)
    batches = python_batches(iterable, positive_int(batch_size, "batch_size"))
    return train_here(batches, iterable, length, vocab_size, out, opts, limits, started)


def _train_on_nothing(job: Job, vocab_size: int, out: str, limits: Limits, started: float) -> dict:
    """``train`` of inputs that hold no bytes, here: the bytes and the special tokens, no merges."""
    opts = job.options
    job.plan(opts.count_settings().pretokenizer())
    base = {"inputs": job.inputs_shown, "input_bytes": 0, "text_bytes": 0, "partitions": len(job.ranges),
            "partitions_reused": 0, "partitions_computed": len(job.ranges), "utf8_errors": opts.utf8_errors,
            "bad_records_skipped": 0, "pattern": opts.pattern}  # fmt: skip
    return merge_and_publish(counts_table({}), SpecialsSeen(), base, vocab_size, out, opts, job.store, limits,
                             started, {"count": 0.0})  # fmt: skip


def merge(
    counts: str,
    vocab_size: int,
    out: str,
    special_tokens: Sequence[str] | None = None,
    *,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    **options,
) -> dict:
    """The merge loop over a counts table written by ``count_words``, then publish ``out``.

    ``special_tokens`` default to those the counts were made with (the counts file records them);
    other special tokens than those are refused: the counts were split on the recorded ones. So with
    the ``pattern`` option: it defaults to the recorded split pattern, which the tokenizer keeps.
    ``min_frequency`` and ``max_token_length`` are those of ``train``.

    >>> from distributed import Client
    >>> from bpe_dask import count_words
    >>> _ = open("corpus.txt", "w").write("low lower lowest<|endoftext|>newest widest")
    >>> with Client(processes=False, n_workers=1, dashboard_address=None) as client:
    ...     _ = count_words("corpus.txt", ["<|endoftext|>"], out="counts.parquet", client=client)
    >>> merge("counts.parquet", 259, "tokenizer")["special_tokens"]  # as the counts were made
    ['<|endoftext|>']
    >>> open("tokenizer/merges.txt").read().splitlines()
    ['w e', 's t']
    """
    started = time.perf_counter()
    limits = Limits(min_frequency, max_token_length)
    counts, out = absolute(counts), absolute(out)
    recorded = recorded_settings(counts, Store(JobOptions.of(**options).storage_options))
    special_tokens = _special_tokens_for(counts, special_tokens, recorded)
    options = {**options, "pattern": _pattern_for(counts, options.get("pattern"), recorded)}
    opts = _training_options(vocab_size, special_tokens, options)
    job = Job.start(opts, [counts, out])
    check_output_dir(out, opts.overwrite, is_output_file, job.store)
    merged = merge_here(partial(read_counts, counts, job.store), vocab_size, opts, limits)
    warn_if_empty(merged.unique_words, None)
    base = {"counts": counts, "counted_with": recorded, "pattern": opts.pattern}
    report = training_report(base, merged, opts.special_tokens, vocab_size, limits, {})
    report["timings"]["total"] = time.perf_counter() - started
    seen = (recorded or {}).get("special_tokens_seen")  # absent from counts an older bpe-dask wrote
    curve = compression_curve(merged, opts.special_tokens, None if seen is None else SpecialsSeen(**seen))
    if seen is not None:
        report["text_bytes"] = merged.byte_tokens + seen["bytes"]
    publish_tokenizer(out, merged, opts, report, job.store, limits, curve=curve)
    return report


def _special_tokens_for(counts: str, given: Sequence[str] | None, recorded: dict | None) -> Sequence[str]:
    if recorded is None:
        return given or ()
    counted_with = recorded.get("special_tokens", [])
    if given is None:
        return counted_with
    if set(given) != set(counted_with):
        raise BpeDaskError(
            f"{counts} was counted with special tokens {counted_with!r}, not {list(given)!r}: leave "
            "--special-token out to use the recorded ones, or count again with the ones you want"
        )
    return given


def _pattern_for(counts: str, given: str | None, recorded: dict | None) -> str:
    """The split pattern the counts were made with (the tokenizer splits text by it too); another
    given is refused, as other special tokens are."""
    counted_with = (recorded or {}).get("pattern")
    if counted_with is None:
        return given or "gpt2"
    if given is not None and split_pattern(given).regex != split_pattern(counted_with).regex:
        raise BpeDaskError(
            f"{counts} was counted with split pattern {counted_with!r}, not {given!r}: leave --pattern "
            "out to use the recorded one, or count again with the one you want"
        )
    return counted_with


def train_bpe(
    input_path: PathLike | Sequence[PathLike],
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    *,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    **options,
) -> tuple[Vocab, Merges]:
    """Train a byte-level BPE tokenizer: a drop-in for CS336's ``run_train_bpe``.

    ``min_frequency`` and ``max_token_length`` are those of ``train``. ``options`` are ``JobOptions``
    fields: ``chunk_size``, ``client``, ``scheduler``, ``workers``, ``work_dir``, ``storage_options``,
    ``in_process``, ... Nothing is written but the work directory.

    >>> _ = open("corpus.txt", "w").write("low lower lowest<|endoftext|>newest widest")
    >>> vocab, merges = train_bpe("corpus.txt", 260, ["<|endoftext|>"])  # small: counted in-process
    >>> vocab[256], merges
    (b'<|endoftext|>', [(b'w', b'e'), (b's', b't'), (b'l', b'o')])
    """
    opts = _training_options(vocab_size, special_tokens, options)
    limits = Limits(min_frequency, max_token_length)
    counted = count_with(input_list(input_path), opts)
    warn_if_empty(counted.table().num_rows, counted.input_bytes)
    merged = merge_table(counted.table(), vocab_size, opts.special_tokens, engine=opts.engine, limits=limits)
    warn_if_short(merged, vocab_size, limits)
    return merged.vocab, merged.merges


def _training_options(vocab_size: int, special_tokens: Sequence[str], options: dict) -> JobOptions:
    opts = JobOptions.of(special_tokens=special_tokens, **options)
    check_special_token_names(opts.special_tokens)
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise BpeDaskError(f"vocab size must be a whole number, got {vocab_size!r}")
    smallest = 256 + len(opts.special_tokens)
    if vocab_size < smallest:
        tokens = len(opts.special_tokens)
        raise BpeDaskError(
            f"vocab size {vocab_size} is below {smallest} (256 bytes + {tokens} special "
            f"token{'' if tokens == 1 else 's'})"
        )
    return opts
