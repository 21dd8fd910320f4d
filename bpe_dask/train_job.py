"""The training jobs: inputs (or counts) in, a trained tokenizer out.

``train`` is the whole job: count (``count_job``), run the merge loop (``merging``) on the client or
on the worker with the most memory, and publish the tokenizer directory with its report.
``merge`` runs the merge loop on a counts table that ``bpe-dask count`` wrote. ``train_bpe`` is the
CS336-compatible entry point: vocabulary and merges back, no files.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
from dask.base import tokenize
from distributed import Client

from . import progress
from .cluster import failures_explained
from .count_job import count_on_cluster, count_with
from .counting import counting_engine
from .counts_table import read_counts, recorded_settings
from .errors import BpeDaskError
from .gpt2_files import check_special_token_names
from .job import Job, cluster_threads, is_embedded, peak_rss_bytes
from .merging import train_merges, warm_up
from .options import JobOptions, PathLike, input_list
from .publish import check_output_dir, publish_directory
from .tokenizer import FILES, Tokenizer
from .version import __version__

log = logging.getLogger(__name__)

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]
OUTPUT_FILES = (*FILES, "report.json")


@dataclass
class Merged:
    """What the merge loop learned, and what it cost."""

    vocab: Vocab
    merges: Merges
    unique_words: int
    peak_rss_bytes: int
    seconds: float


def train(
    inputs: PathLike | Sequence[PathLike],
    vocab_size: int,
    out: str,
    special_tokens: Sequence[str] = (),
    **options,
) -> dict:
    """Count ``inputs``, learn merges up to ``vocab_size``, and publish the tokenizer directory ``out``.

    Returns the report (also written as ``out/report.json``). ``options`` are ``JobOptions``
    fields; ``merge_on`` is ``"client"``, ``"worker"``, or ``"auto"``: on a worker when the cluster
    is not an embedded LocalCluster, so the client never holds the word counts.
    """
    started = time.perf_counter()
    opts = _training_options(vocab_size, special_tokens, options)
    inputs = input_list(inputs)
    job = Job.start(opts, [*inputs, out, opts.work_dir])
    check_output_dir(out, opts.overwrite, _is_output_file, job.storage_options)
    job.find_inputs(inputs, exclude=[out, opts.work_dir])
    settings = opts.count_settings()
    if opts.merge_on != "worker" and not (opts.scheduler or opts.client):
        warm_up(opts.engine)  # the merge loop compiles (or loads) while the cluster starts and counts
    with job.work_directory() as work, job.cluster() as client:
        job.preflight(client, work, [out])
        job.plan(settings.pretokenizer(), cluster_threads(client))
        log.info("counting with %s", counting_engine(settings, job.largest_range))
        on_worker = opts.merge_on == "worker" or (opts.merge_on == "auto" and not is_embedded(client))
        # The merge reads the counts where it runs: from the work directory on a worker; here, from
        # the reduce's own result, with no file in between.
        counts_file = f"{work.rstrip('/')}/counts/{job.key(settings)}.parquet" if on_worker else None
        counts, reused = count_on_cluster(client, job, settings, work, counts_file)
        count_seconds = time.perf_counter() - started
        if on_worker:
            merged = _merge_on_cluster(client, counts, vocab_size, opts.special_tokens, job)
        else:
            merged = _merge_here(counts, vocab_size, opts)
        workers_peak = client.run(peak_rss_bytes)
    _warn_if_empty(merged.unique_words, job.input_bytes)
    report = _report(
        {"inputs": job.input_urls, "input_bytes": job.input_bytes, "partitions": len(job.ranges),
         "partitions_reused": reused, "partitions_computed": len(job.ranges) - reused,
         "utf8_errors": opts.utf8_errors},
        merged, opts.special_tokens, vocab_size, {"count": count_seconds},
    )  # fmt: skip
    report["merge_ran_on"] = "worker" if on_worker else "client"
    report["workers_peak_rss_bytes"] = workers_peak
    report["timings"]["total"] = time.perf_counter() - started
    _publish(out, merged, opts.special_tokens, report, job.storage_options)
    return report


def merge(
    counts: str, vocab_size: int, out: str, special_tokens: Sequence[str] | None = None, **options
) -> dict:
    """The merge loop over a counts table written by ``count_words``, then publish ``out``.

    ``special_tokens`` default to those the counts were made with (the counts file records them);
    other special tokens than those are refused: the counts were split on the recorded ones.
    """
    started = time.perf_counter()
    recorded = recorded_settings(counts, JobOptions.of(**options).storage_options)
    special_tokens = _special_tokens_for(counts, special_tokens, recorded)
    opts = _training_options(vocab_size, special_tokens, options)
    job = Job.start(opts, [counts, out])
    check_output_dir(out, opts.overwrite, _is_output_file, job.storage_options)
    merged = _merge_here(read_counts(counts, job.storage_options), vocab_size, opts)
    report = _report(
        {"counts": counts, "counted_with": recorded}, merged, opts.special_tokens, vocab_size, {}
    )
    report["timings"]["total"] = time.perf_counter() - started
    _publish(out, merged, opts.special_tokens, report, job.storage_options)
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


def train_bpe(
    input_path: PathLike | Sequence[PathLike], vocab_size: int, special_tokens: Sequence[str] = (), **options
) -> tuple[Vocab, Merges]:
    """Train a byte-level BPE tokenizer: a drop-in for CS336's ``run_train_bpe``.

    ``options`` are ``JobOptions`` fields: ``chunk_size``, ``client``, ``scheduler``, ``workers``,
    ``work_dir``, ``storage_options``, ``in_process``, ... Nothing is written but the work directory.
    """
    opts = _training_options(vocab_size, special_tokens, options)
    counted = count_with(input_list(input_path), opts)
    _warn_if_empty(counted.table().num_rows, counted.input_bytes)
    merged = merge_table(counted.table(), vocab_size, opts.special_tokens, engine=opts.engine)
    _warn_if_short(merged, vocab_size)
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
            f"vocab size {vocab_size} is below {smallest} (256 bytes + {tokens} special tokens)"
        )
    return opts


def _is_output_file(name: str) -> bool:
    return name in OUTPUT_FILES


def merge_table(
    table: pa.Table,
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    report_progress: Callable[[int], None] | None = None,
    engine: str = "auto",
) -> Merged:
    """The merge loop over a word-count table, in this process."""
    started = time.perf_counter()
    vocab, merges = train_merges(table, vocab_size, special_tokens, report_progress, engine=engine)
    return Merged(vocab, merges, table.num_rows, peak_rss_bytes(), time.perf_counter() - started)


def merge_on_worker(
    counts_url: str,
    vocab_size: int,
    special_tokens: Sequence[str],
    storage_options: dict,
    engine: str = "auto",
) -> Merged:
    """The merge loop as a Dask task: reads the counts where it runs, reports progress to the client."""
    total = vocab_size - 256 - len(special_tokens)
    report = progress.every(0.5, total, progress.publish_from_worker)
    return merge_table(read_counts(counts_url, storage_options), vocab_size, special_tokens, report, engine)


def _merge_on_cluster(
    client: Client, counts_url: str, vocab_size: int, special_tokens: Sequence[str], job: Job
) -> Merged:
    """Run the merge loop on the worker with the most memory: it is the job's one big task."""
    workers = client.scheduler_info()["workers"]
    roomiest = max(workers, key=lambda w: workers[w].get("memory_limit") or 0)
    if job.options.show_progress:
        progress.subscribe(client, progress.MergeProgress(vocab_size - 256 - len(special_tokens)))
    log.info("running the merge loop on %s", roomiest)
    future = client.submit(
        merge_on_worker, counts_url, vocab_size, special_tokens, job.storage_options, job.options.engine,
        key=f"merge-{tokenize(counts_url, vocab_size, special_tokens)}",
        workers=[roomiest], allow_other_workers=True, pure=False, priority=100,
    )  # fmt: skip
    with failures_explained(client):
        return future.result()


def _merge_here(counts: pa.Table, vocab_size: int, opts: JobOptions) -> Merged:
    total = vocab_size - 256 - len(opts.special_tokens)
    report = progress.every(0.2, total, progress.MergeProgress(total)) if opts.show_progress else None
    return merge_table(counts, vocab_size, opts.special_tokens, report, opts.engine)


def _publish(
    out: str, merged: Merged, special_tokens: Sequence[str], report: dict, storage_options: dict
) -> None:
    _warn_if_short(merged, report["requested_vocab_size"])
    files = Tokenizer(merged.vocab, merged.merges, special_tokens).files()
    publish_directory(out, {**files, "report.json": json.dumps(report, indent=2) + "\n"}, storage_options)


def _report(
    base: dict, merged: Merged, special_tokens: Sequence[str], vocab_size: int, timings: dict
) -> dict:
    return {
        "version": __version__,
        **base,
        "unique_words": merged.unique_words,
        "vocab_size": len(merged.vocab),
        "requested_vocab_size": vocab_size,
        "special_tokens": list(special_tokens),
        "num_merges": len(merged.merges),
        "peak_rss_bytes": merged.peak_rss_bytes,
        "timings": {**timings, "merge": merged.seconds},
    }


def _warn_if_short(merged: Merged, vocab_size: int) -> None:
    if merged.unique_words and len(merged.vocab) < vocab_size:
        log.warning(
            "the counts hold pairs for only %s merges: the vocabulary has %s tokens, not the %s asked for",
            f"{len(merged.merges):,}", f"{len(merged.vocab):,}", f"{vocab_size:,}",
        )  # fmt: skip


def _warn_if_empty(unique_words: int, input_bytes: int) -> None:
    if unique_words == 0:
        log.warning(
            "the input holds no words (%d bytes): the vocabulary is only the bytes and special tokens",
            input_bytes,
        )
