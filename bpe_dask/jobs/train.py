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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import pyarrow as pa
from dask.base import tokenize
from distributed import Client

from bpe_dask import interrupts
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.counts_table import read_counts, recorded_settings
from bpe_dask.io.outputs import check_output_dir
from bpe_dask.io.publish import publish_directory
from bpe_dask.io.storage import Store, absolute
from bpe_dask.io.tokenizer_formats import check_special_token_names
from bpe_dask.jobs import progress
from bpe_dask.jobs.cluster import failures_explained
from bpe_dask.jobs.context import Job, cluster_threads, is_embedded, peak_rss_bytes, report_bad_records
from bpe_dask.jobs.count import count_on_cluster, count_with
from bpe_dask.jobs.options import JobOptions, PathLike, input_list
from bpe_dask.rules.pretokenize import split_pattern
from bpe_dask.stages.count import counting_engine
from bpe_dask.stages.merge import train_merges, warm_up
from bpe_dask.tokenizer import FILES, Tokenizer
from bpe_dask.version import __version__

log = logging.getLogger(__name__)

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]
OUTPUT_FILES = (*FILES, "report.json")


@dataclass(frozen=True)
class Stop:
    """Why the merge loop stopped before the vocabulary was full, when an option made it stop:
    ``"min_frequency"`` (the best pair left occurs only ``count`` times) or ``"max_token_length"``
    (every pair left would make too long a token)."""

    reason: str
    count: int = 0


@dataclass
class Merged:
    """What the merge loop learned, and what it cost."""

    vocab: Vocab
    merges: Merges
    unique_words: int
    peak_rss_bytes: int
    seconds: float
    stopped: Stop | None = None  # when --min-frequency or --max-token-length ended the loop early


@dataclass(frozen=True)
class Limits:
    """The options that may stop the merge loop before the vocabulary is full (as in Hugging Face's
    trainer): a merge only when the best pair occurs at least ``min_frequency`` times (0 and 1 change
    nothing), and never a token over ``max_token_length`` bytes (None: no limit)."""

    min_frequency: int = 0
    max_token_length: int | None = None

    def __post_init__(self) -> None:
        if not _whole(self.min_frequency) or self.min_frequency < 0:
            raise BpeDaskError(f"min_frequency must be a whole number, 0 or more, got {self.min_frequency!r}")
        longest = self.max_token_length
        if longest is not None and (not _whole(longest) or longest < 1):
            raise BpeDaskError(f"max_token_length must be a positive whole number of bytes, got {longest!r}")


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
    is not an embedded LocalCluster, so the client never holds the word counts.
    """
    started = time.perf_counter()
    opts = _training_options(vocab_size, special_tokens, options)
    limits = Limits(min_frequency, max_token_length)
    inputs, out = input_list(inputs), absolute(out)
    job = Job.start(opts, [*inputs, out, opts.work_dir])
    check_output_dir(out, opts.overwrite, _is_output_file, job.store)
    job.find_inputs(inputs, exclude=[out, opts.work_dir])
    settings = opts.count_settings()
    if opts.merge_on != "worker" and not (opts.scheduler or opts.client):
        warm_up(opts.engine)  # the merge loop compiles (or loads) while the cluster starts and counts
    with job.work_directory(beside=None if job.embedded else out) as work, job.cluster() as client:
        job.preflight(client, work)  # the tokenizer is published from here, not by the tasks
        job.plan(settings.pretokenizer(), cluster_threads(client))
        log.info("counting with %s", counting_engine(settings, job.largest_range))
        on_worker = opts.merge_on == "worker" or (opts.merge_on == "auto" and not is_embedded(client))
        # The merge reads the counts where it runs: from the work directory on a worker; here, from
        # the reduce's own result, with no file in between.
        counts_file = f"{work.rstrip('/')}/counts/{job.key(settings)}.parquet" if on_worker else None
        counts, reused, bad = count_on_cluster(client, job, settings, work, counts_file)
        count_seconds = time.perf_counter() - started
        if on_worker:
            merged = _merge_on_cluster(client, counts, vocab_size, opts.special_tokens, job, limits)
        else:
            merged = _merge_here(counts, vocab_size, opts, limits)
        workers_peak = client.run(peak_rss_bytes)
        # The tokenizer's files take a moment to make (tiktoken's ranks are checked): made while the
        # cluster closes.
        background = ThreadPoolExecutor(1)
        files = background.submit(_tokenizer_files, merged, opts.special_tokens, opts.pattern)
        background.shutdown(wait=False)  # the thread ends with its task
    report_bad_records(bad)
    _warn_if_empty(merged.unique_words, job.input_bytes)
    report = _report(
        {"inputs": job.input_urls, "input_bytes": job.input_bytes, "partitions": len(job.ranges),
         "partitions_reused": reused, "partitions_computed": len(job.ranges) - reused,
         "utf8_errors": opts.utf8_errors, "bad_records_skipped": bad.count, "pattern": opts.pattern},
        merged, opts.special_tokens, vocab_size, limits, {"count": count_seconds},
    )  # fmt: skip
    report["merge_ran_on"] = "worker" if on_worker else "client"
    report["workers_peak_rss_bytes"] = workers_peak
    report["timings"]["total"] = time.perf_counter() - started
    _publish(out, merged, opts, report, job.store, limits, files.result())
    return report


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
    """
    started = time.perf_counter()
    limits = Limits(min_frequency, max_token_length)
    counts, out = absolute(counts), absolute(out)
    recorded = recorded_settings(counts, Store(JobOptions.of(**options).storage_options))
    special_tokens = _special_tokens_for(counts, special_tokens, recorded)
    options = {**options, "pattern": _pattern_for(counts, options.get("pattern"), recorded)}
    opts = _training_options(vocab_size, special_tokens, options)
    job = Job.start(opts, [counts, out])
    check_output_dir(out, opts.overwrite, _is_output_file, job.store)
    merged = _merge_here(read_counts(counts, job.store), vocab_size, opts, limits)
    base = {"counts": counts, "counted_with": recorded, "pattern": opts.pattern}
    report = _report(base, merged, opts.special_tokens, vocab_size, limits, {})
    report["timings"]["total"] = time.perf_counter() - started
    _publish(out, merged, opts, report, job.store, limits)
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
    """
    opts = _training_options(vocab_size, special_tokens, options)
    limits = Limits(min_frequency, max_token_length)
    counted = count_with(input_list(input_path), opts)
    _warn_if_empty(counted.table().num_rows, counted.input_bytes)
    merged = merge_table(counted.table(), vocab_size, opts.special_tokens, engine=opts.engine, limits=limits)
    _warn_if_short(merged, vocab_size, limits)
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
    limits: Limits = Limits(),
) -> Merged:
    """The merge loop over a word-count table, in this process."""
    started = time.perf_counter()
    stops: list[Stop] = []
    vocab, merges = train_merges(table, vocab_size, special_tokens, report_progress, engine=engine,
                                 **asdict(limits), stopped=lambda *why: stops.append(Stop(*why)))  # fmt: skip
    seconds = time.perf_counter() - started
    return Merged(vocab, merges, table.num_rows, peak_rss_bytes(), seconds, stops[0] if stops else None)


def merge_on_worker(
    counts_url: str,
    vocab_size: int,
    special_tokens: Sequence[str],
    store: Store,
    engine: str = "auto",
    limits: Limits = Limits(),
) -> Merged:
    """The merge loop as a Dask task: reads the counts where it runs, reports progress to the client."""
    total = vocab_size - 256 - len(special_tokens)
    report = progress.every(0.5, total, progress.publish_from_worker)
    table = read_counts(counts_url, store)
    return merge_table(table, vocab_size, special_tokens, report, engine, limits)


def _merge_on_cluster(
    client: Client, counts_url: str, vocab_size: int, special_tokens: Sequence[str], job: Job, limits: Limits
) -> Merged:
    """Run the merge loop on the worker with the most memory: it is the job's one big task."""
    workers = client.scheduler_info()["workers"]
    roomiest = max(workers, key=lambda w: workers[w].get("memory_limit") or 0)
    bar = None
    if job.options.show_progress:
        bar = progress.MergeProgress(vocab_size - 256 - len(special_tokens))
        progress.subscribe(client, bar)
    log.info("running the merge loop on %s", roomiest)
    future = client.submit(
        merge_on_worker, counts_url, vocab_size, special_tokens, job.store, job.options.engine,
        limits, key=f"merge-{tokenize(counts_url, vocab_size, special_tokens, limits)}",
        workers=[roomiest], allow_other_workers=True, pure=False, priority=100,
    )  # fmt: skip
    with failures_explained(client):
        merged = future.result()
    _end_early(bar, merged)
    return merged


def _merge_here(counts: pa.Table, vocab_size: int, opts: JobOptions, limits: Limits) -> Merged:
    total = vocab_size - 256 - len(opts.special_tokens)
    bar = progress.MergeProgress(total) if opts.show_progress else None
    report = progress.every(0.2, total, bar) if bar is not None else None
    merged = merge_table(counts, vocab_size, opts.special_tokens, report, opts.engine, limits)
    _end_early(bar, merged)
    return merged


def _end_early(bar: progress.MergeProgress | None, merged: Merged) -> None:
    """The progress line's last state when the loop stopped short of the total (it ends there)."""
    if bar is not None and merged.stopped is not None:
        bar.show(bar.line(len(merged.merges)), last=True)


def _publish(
    out: str,
    merged: Merged,
    opts: JobOptions,
    report: dict,
    store: Store,
    limits: Limits,
    files: dict[str, str] | None = None,
) -> None:
    _warn_if_short(merged, report["requested_vocab_size"], limits)
    files = files or _tokenizer_files(merged, opts.special_tokens, report["pattern"])
    files = {**files, "report.json": json.dumps(report, indent=2) + "\n"}
    interrupts.check()  # nothing is published after a signal, even one some library swallowed
    publish_directory(out, files, store, overwrite=opts.overwrite)  # checked again as it commits


def _tokenizer_files(merged: Merged, special_tokens: Sequence[str], pattern: str) -> dict[str, str]:
    return Tokenizer(merged.vocab, merged.merges, special_tokens, pattern).files()


def _report(
    base: dict, merged: Merged, special_tokens: Sequence[str], vocab_size: int, limits: Limits, timings: dict
) -> dict:
    return {
        "version": __version__,
        **base,
        "unique_words": merged.unique_words,
        "vocab_size": len(merged.vocab),
        "requested_vocab_size": vocab_size,
        "special_tokens": list(special_tokens),
        **asdict(limits),
        "num_merges": len(merged.merges),
        "stopped_by": _stopped_by(merged, vocab_size),
        "peak_rss_bytes": merged.peak_rss_bytes,
        "timings": {**timings, "merge": merged.seconds},
    }


def _stopped_by(merged: Merged, vocab_size: int) -> str:
    """What ended the merge loop: ``vocab_size`` (full), ``min_frequency``, ``max_token_length``, or
    ``no_pairs`` (every word is one token)."""
    if len(merged.vocab) >= vocab_size:
        return "vocab_size"
    return merged.stopped.reason if merged.stopped else "no_pairs"


def _warn_if_short(merged: Merged, vocab_size: int, limits: Limits = Limits()) -> None:
    """Why the vocabulary is short, if it is: an info line when the user's limit did it, else a warning."""
    stopped, done = merged.stopped, f"{len(merged.merges):,}"
    if stopped is not None and stopped.reason == "min_frequency":
        fitting = "" if limits.max_token_length is None else f" of at most {limits.max_token_length:,} bytes"
        log.info(
            "stopped at %s merges: the most frequent pair%s occurs %s times, under --min-frequency %s",
            done, fitting, f"{stopped.count:,}", f"{limits.min_frequency:,}",
        )  # fmt: skip
    elif stopped is not None and stopped.reason == "max_token_length":
        log.info(
            "stopped at %s merges: every pair left would make a token longer than --max-token-length %s",
            done, f"{limits.max_token_length:,}",
        )  # fmt: skip
    elif merged.unique_words and len(merged.vocab) < vocab_size:
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
