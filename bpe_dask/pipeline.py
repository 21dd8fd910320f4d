"""The job: inputs in, a trained tokenizer out, stage by stage.

plan (``plan``) -> map (``count``) -> reduce (``reduce``) -> merge (``merge``) -> write
(``formats``). ``count_words`` runs the first three, ``train`` runs them all and publishes
the output directory, ``merge`` runs the last two on a counts table, and ``train_bpe`` is the
CS336-compatible Python entry point.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dask
import pyarrow as pa
from dask.base import tokenize
from dask.delayed import Delayed
from distributed import Client, LocalCluster

from . import __version__, formats, progress
from . import encode as encode_module
from .cluster import dask_client, failures_explained
from .config import DEFAULT_CHUNK_SIZE
from .count import CountSettings, Shard, check_utf8_errors, count_range, count_range_to_shard, counts_table
from .errors import BpeDaskError
from .merge import train_merges
from .plan import ByteRange, InputFile, expand_inputs, plan_ranges
from .preflight import check_workers
from .reduce import read_table, reduce_tree
from .storage import describe, filesystem, job_storage_options, required_packages
from .tokenizer import Tokenizer

log = logging.getLogger(__name__)

# Below this much input the Python API counts in-process: starting a cluster costs seconds.
IN_PROCESS_LIMIT = 16 * 2**20

PathLike = str | os.PathLike
Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]


@dataclass
class CountResult:
    """The word counts (in memory, or in the Parquet file ``path``) and how they were made."""

    input_files: list[str]
    input_bytes: int
    partitions: int
    partitions_reused: int = 0
    seconds: float = 0.0
    path: str | None = None
    storage_options: dict | None = None
    _table: pa.Table | None = None

    def table(self) -> pa.Table:
        if self._table is None:
            self._table = read_table(self.path, self.storage_options)
        return self._table

    def report(self) -> dict:
        return {
            "inputs": self.input_files,
            "input_bytes": self.input_bytes,
            "partitions": self.partitions,
            "partitions_reused": self.partitions_reused,
            "partitions_computed": self.partitions - self.partitions_reused,
        }


@dataclass
class Merged:
    """What the merge loop learned, and what it cost."""

    vocab: Vocab
    merges: Merges
    unique_words: int
    peak_rss_bytes: int
    seconds: float


def validate(vocab_size: int | None, special_tokens: Sequence[str]) -> None:
    """Reject options no job could honour, before any work starts."""
    single_bytes = set(formats.bytes_to_unicode().values())
    for token in special_tokens:
        if not isinstance(token, str) or not token:
            raise BpeDaskError("special tokens must be non-empty strings")
        try:
            token.encode("utf-8")
        except UnicodeEncodeError:
            raise BpeDaskError(f"special token {token!r} is not valid Unicode text") from None
        if token in single_bytes:
            raise BpeDaskError(f"special token {token!r} is the name of a single byte in vocab.json")
    duplicates = sorted({t for t in special_tokens if special_tokens.count(t) > 1})
    if duplicates:
        raise BpeDaskError(f"special token given twice: {duplicates[0]!r}")
    if vocab_size is not None:
        smallest = 256 + len(special_tokens)
        if vocab_size < smallest:
            raise BpeDaskError(
                f"vocab size {vocab_size} is below {smallest} "
                f"(256 bytes + {len(special_tokens)} special tokens)"
            )


# --- plan, map, reduce -------------------------------------------------------------------------


def count_words(
    inputs: PathLike | Sequence[PathLike],
    special_tokens: Sequence[str] = (),
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    out: str | None = None,
    client: Client | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    work_dir: str | None = None,
    storage_options: dict | None = None,
    in_process: bool | None = None,
    ship_package: bool = False,
    show_progress: bool = False,
    utf8_errors: str = "strict",
) -> CountResult:
    """Plan, map and reduce: the word counts of ``inputs``.

    Runs on ``client``, on ``scheduler``, or on a LocalCluster of ``workers``; with none of
    these, inputs under ``IN_PROCESS_LIMIT`` are counted in this process. ``out`` names a
    Parquet file (or URL) for the counts; cluster runs only. ``utf8_errors="replace"`` counts
    invalid UTF-8 as U+FFFD instead of stopping at it.
    """
    started = time.perf_counter()
    special_tokens = _token_list(special_tokens)
    validate(None, special_tokens)
    inputs = [os.fspath(p) for p in _as_list(inputs)]
    storage_options = job_storage_options(storage_options, [*inputs, out or "", work_dir or ""])
    files, ranges = _plan(inputs, chunk_size, special_tokens, storage_options, exclude=[out, work_dir])
    result = CountResult([f.url for f in files], sum(f.size for f in files), len(ranges))
    result.storage_options = storage_options
    cluster_wanted = bool(client or scheduler or workers or out)
    if in_process and cluster_wanted:
        raise BpeDaskError("in_process=True counts here: it cannot take client, scheduler, workers or out")
    if in_process is None:
        in_process = not cluster_wanted and result.input_bytes <= IN_PROCESS_LIMIT
    settings = CountSettings(tuple(special_tokens), utf8_errors)
    if in_process:
        result._table = _count_in_process(ranges, settings, storage_options)
    else:
        with (
            _work_directory(work_dir, storage_options) as work,
            dask_client(scheduler, workers, client) as active,
        ):
            _preflight(active, files, out, work, storage_options, ship_package)
            result.path, result.partitions_reused = _count_on_cluster(
                active, ranges, settings, out, work, storage_options, show_progress
            )
            if not out:  # the work directory may be temporary: load the counts while it exists
                result.table()
    result.seconds = time.perf_counter() - started
    return result


def _plan(
    inputs: list[str],
    chunk_size: int,
    special_tokens: list[str],
    storage_options: dict,
    exclude: list[str | None],
) -> tuple[list[InputFile], list[ByteRange]]:
    """Inputs to byte ranges; the job's own outputs are never read back as inputs."""
    files = expand_inputs(inputs, storage_options, exclude=[e for e in exclude if e])
    ranges = plan_ranges(files, chunk_size, special_tokens, storage_options)
    log.info("%d input files, %d bytes, %d partitions", len(files), sum(f.size for f in files), len(ranges))
    return files, ranges


def _count_in_process(
    ranges: Sequence[ByteRange], settings: CountSettings, storage_options: dict | None
) -> pa.Table:
    counts: dict[str, int] = {}
    for byte_range in ranges:
        count_range(byte_range, settings, storage_options, counts=counts)
    return counts_table(counts)


def _preflight(
    client: Client,
    files: list[InputFile],
    out: str | None,
    work_dir: str,
    storage_options: dict,
    ship_package: bool,
) -> None:
    urls = [f.url for f in files] + [work_dir] + ([out] if out else [])
    packages = required_packages(urls, [f.compression for f in files])
    shared = None if _is_embedded(client) else work_dir  # LocalCluster workers share our disk
    check_workers(
        client,
        packages,
        work_dir=shared,
        inputs=[f.url for f in files[:1]],
        storage_options=storage_options,
        ship_package=ship_package,
    )


def _count_on_cluster(
    client: Client,
    ranges: Sequence[ByteRange],
    settings: CountSettings,
    out: str | None,
    work_dir: str,
    storage_options: dict | None,
    show_progress: bool,
) -> tuple[str, int]:
    """Map and reduce on the cluster: the path of the summed counts and how many shards were reused."""
    shard_dir = f"{work_dir.rstrip('/')}/shards"
    shards = [
        dask.delayed(count_range_to_shard, pure=True)(
            r,
            settings,
            shard_dir,
            storage_options,
            dask_key_name=f"count-{tokenize(r.key(), settings.key(), shard_dir, storage_options)}",
        )
        for r in ranges
    ]
    target = out or f"{work_dir.rstrip('/')}/counts/{tokenize(shards)}.parquet"
    final, partial_sums = reduce_tree(shards, target, work_dir, storage_options)
    reused = [dask.delayed(_was_reused, pure=True)(s) for s in shards]
    path, *flags = _run_on_cluster(client, [final, *reused], show_progress)
    _remove(partial_sums, storage_options)
    return path, sum(flags)


def _run_on_cluster(client: Client, tasks: list[Delayed], show_progress: bool) -> list:
    """Compute ``tasks`` and gather their results; a failure cancels them all and is one line."""
    futures = client.compute(tasks)
    try:
        if show_progress:
            progress.show_task_progress(futures)
        with failures_explained(client):
            return client.gather(futures)
    except BaseException:
        client.cancel(futures)  # a failed job stops at once, before its work directory goes
        raise


def _was_reused(shard: Shard) -> bool:
    return shard.reused


def _remove(urls: list[str], storage_options: dict | None) -> None:
    """Delete intermediate files this job wrote (never a whole folder another job may share)."""
    for url in urls:
        fs, path = filesystem(url, storage_options)
        if fs.exists(path):
            fs.rm_file(path)


@contextmanager
def _work_directory(work_dir: str | None, storage_options: dict | None = None) -> Iterator[str]:
    """The user's work directory (kept, so a re-run reuses its shards), or a temporary one."""
    if work_dir:
        fs, path = filesystem(work_dir, storage_options)
        try:
            fs.makedirs(path, exist_ok=True)
        except Exception as error:
            raise BpeDaskError(f"cannot use --work-dir {work_dir}: {describe(error)}") from None
        yield work_dir
        return
    temporary = tempfile.mkdtemp(prefix="bpe-dask-")
    try:
        yield temporary
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def _is_embedded(client: Client) -> bool:
    return isinstance(getattr(client, "cluster", None), LocalCluster)


# --- merge and write ---------------------------------------------------------------------------


def merge_table(
    table: pa.Table,
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    report_progress: Callable[[int], None] | None = None,
) -> Merged:
    """The merge loop over a word-count table, in this process."""
    started = time.perf_counter()
    words = table.column("token").to_pylist()
    counts = table.column("count").to_pylist()
    vocab, merges = train_merges(zip(words, counts, strict=True), vocab_size, special_tokens, report_progress)
    return Merged(vocab, merges, table.num_rows, peak_rss_bytes(), time.perf_counter() - started)


def merge_on_worker(
    counts_url: str, vocab_size: int, special_tokens: list[str], storage_options: dict
) -> Merged:
    """The merge loop as a Dask task: reads the counts where it runs, reports progress to the client."""
    table = formats.read_counts(counts_url, storage_options)
    total = vocab_size - 256 - len(special_tokens)
    return merge_table(
        table, vocab_size, special_tokens, progress.every(0.5, total, progress.publish_from_worker)
    )


def _merge_on_cluster(
    client: Client,
    counts_url: str,
    vocab_size: int,
    special_tokens: list[str],
    storage_options: dict,
    show_progress: bool,
) -> Merged:
    """Run the merge loop on the worker with the most memory: it is the job's one big task."""
    workers = client.scheduler_info()["workers"]
    roomiest = max(workers, key=lambda w: workers[w].get("memory_limit") or 0)
    if show_progress:
        progress.subscribe(client, progress.MergeProgress(vocab_size - 256 - len(special_tokens)))
    log.info("running the merge loop on %s", roomiest)
    future = client.submit(
        merge_on_worker, counts_url, vocab_size, special_tokens, storage_options,
        key=f"merge-{tokenize(counts_url, vocab_size, special_tokens)}",
        workers=[roomiest], allow_other_workers=True, pure=False, priority=100,
    )  # fmt: skip
    with failures_explained(client):
        return future.result()


def _merge_here(counts: pa.Table, vocab_size: int, special_tokens: list[str], show_progress: bool) -> Merged:
    total = vocab_size - 256 - len(special_tokens)
    report = progress.every(0.2, total, progress.MergeProgress(total)) if show_progress else None
    return merge_table(counts, vocab_size, special_tokens, report)


def train(
    inputs: Sequence[PathLike],
    vocab_size: int,
    out: str,
    special_tokens: Sequence[str] = (),
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    client: Client | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    work_dir: str | None = None,
    storage_options: dict | None = None,
    overwrite: bool = False,
    merge_on: str = "auto",
    ship_package: bool = False,
    show_progress: bool = False,
    utf8_errors: str = "strict",
) -> dict:
    """The whole job: count, merge, and publish the output directory ``out``. Returns the report.

    ``merge_on`` is ``"client"``, ``"worker"``, or ``"auto"``: on a worker when the cluster
    is not an embedded LocalCluster, so the client never holds the word counts.
    """
    started = time.perf_counter()
    special_tokens = _token_list(special_tokens)
    validate(vocab_size, special_tokens)
    inputs = [os.fspath(p) for p in inputs]
    storage_options = job_storage_options(storage_options, [*inputs, out, work_dir or ""])
    formats.check_output_dir(out, overwrite, storage_options)
    files, ranges = _plan(inputs, chunk_size, special_tokens, storage_options, exclude=[out, work_dir])
    settings = CountSettings(tuple(special_tokens), utf8_errors)
    with (
        _work_directory(work_dir, storage_options) as work,
        dask_client(scheduler, workers, client) as active,
    ):
        _preflight(active, files, out, work, storage_options, ship_package)
        counts_url, reused = _count_on_cluster(
            active, ranges, settings, None, work, storage_options, show_progress
        )
        count_seconds = time.perf_counter() - started
        on_worker = merge_on == "worker" or (merge_on == "auto" and not _is_embedded(active))
        if on_worker:
            merged = _merge_on_cluster(
                active, counts_url, vocab_size, special_tokens, storage_options, show_progress
            )
        else:
            merged = _merge_here(
                read_table(counts_url, storage_options), vocab_size, special_tokens, show_progress
            )
    counted = CountResult([f.url for f in files], sum(f.size for f in files), len(ranges), reused)
    _warn_if_empty(merged.unique_words, counted.input_bytes)
    report = _report(
        {**counted.report(), "utf8_errors": utf8_errors}, merged, special_tokens, vocab_size,
        {"count": count_seconds},
    )  # fmt: skip
    report["merge_ran_on"] = "worker" if on_worker else "client"
    report["timings"]["total"] = time.perf_counter() - started
    formats.publish_directory(out, _artifacts(merged, special_tokens, report), storage_options)
    return report


def merge(
    counts_url: str,
    vocab_size: int,
    out: str,
    special_tokens: Sequence[str] = (),
    *,
    overwrite: bool = False,
    storage_options: dict | None = None,
    show_progress: bool = False,
) -> dict:
    """The merge loop over a counts table written by ``count_words``, then publish ``out``."""
    started = time.perf_counter()
    special_tokens = _token_list(special_tokens)
    validate(vocab_size, special_tokens)
    storage_options = job_storage_options(storage_options, [counts_url, out])
    formats.check_output_dir(out, overwrite, storage_options)
    merged = _merge_here(
        formats.read_counts(counts_url, storage_options), vocab_size, special_tokens, show_progress
    )
    report = _report({"counts": counts_url}, merged, special_tokens, vocab_size, {})
    report["timings"]["total"] = time.perf_counter() - started
    formats.publish_directory(out, _artifacts(merged, special_tokens, report), storage_options)
    return report


def _report(base: dict, merged: Merged, special_tokens: list[str], vocab_size: int, timings: dict) -> dict:
    return {
        "version": __version__,
        **base,
        "unique_words": merged.unique_words,
        "vocab_size": len(merged.vocab),
        "requested_vocab_size": vocab_size,
        "special_tokens": special_tokens,
        "num_merges": len(merged.merges),
        "peak_rss_bytes": merged.peak_rss_bytes,
        "timings": {**timings, "merge": merged.seconds},
    }


def _artifacts(merged: Merged, special_tokens: list[str], report: dict) -> dict[str, str]:
    return {
        "vocab.json": formats.vocab_json(merged.vocab, special_tokens),
        "merges.txt": formats.merges_txt(merged.merges),
        "tokenizer.json": formats.tokenizer_json(merged.vocab, merged.merges, special_tokens),
        "report.json": json.dumps(report, indent=2) + "\n",
    }


# --- encode ----------------------------------------------------------------------------------


def load_tokenizer(
    tokenizer_dir: str, special_tokens: Sequence[str] | None = None, storage_options: dict | None = None
) -> Tokenizer:
    """The tokenizer in a directory ``bpe-dask train`` wrote: ``vocab.json``, ``merges.txt``, and the
    special tokens ``tokenizer.json`` registers (unless ``special_tokens`` are given)."""
    folder = tokenizer_dir.rstrip("/")
    fs, path = filesystem(folder, storage_options)
    try:
        if special_tokens is None:
            tokenizer_json = f"{path}/tokenizer.json"
            text = fs.cat_file(tokenizer_json).decode("utf-8") if fs.exists(tokenizer_json) else "{}"
            special_tokens = formats.special_tokens_in(text)
        return Tokenizer.from_files(
            f"{folder}/vocab.json", f"{folder}/merges.txt", special_tokens, storage_options
        )
    except FileNotFoundError as error:
        raise BpeDaskError(f"--tokenizer {tokenizer_dir}: no {Path(error.filename or '').name or 'file'} "
                           "there (a directory `bpe-dask train` wrote)") from None  # fmt: skip
    except (OSError, ValueError, KeyError) as error:
        raise BpeDaskError(f"--tokenizer {tokenizer_dir}: cannot read it ({describe(error)})") from None


def encode(
    inputs: Sequence[PathLike],
    tokenizer_dir: str,
    out: str,
    special_tokens: Sequence[str] | None = None,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    client: Client | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    storage_options: dict | None = None,
    overwrite: bool = False,
    ship_package: bool = False,
    show_progress: bool = False,
    utf8_errors: str = "strict",
) -> dict:
    """Encode ``inputs`` into ``.npy`` shards of token ids in ``out``, one per range; returns the report."""
    started = time.perf_counter()
    inputs = [os.fspath(p) for p in _as_list(inputs)]
    storage_options = job_storage_options(storage_options, [*inputs, out, tokenizer_dir])
    tokenizer = load_tokenizer(tokenizer_dir, None if special_tokens is None else _token_list(special_tokens),
                               storage_options)  # fmt: skip
    check_utf8_errors(utf8_errors)
    formats.check_output_dir(out, overwrite, storage_options, ours=formats.is_encoded_file)
    files, ranges = _plan(inputs, chunk_size, tokenizer.special_tokens, storage_options, exclude=[out])
    with (
        dask_client(scheduler, workers, client) as active,
        formats.staged_directory(out, storage_options) as staging,
    ):
        _preflight(active, files, out, staging, storage_options, ship_package)
        shared = active.scatter(tokenizer, broadcast=True, hash=False)
        names = [encode_module.shard_name(i, len(ranges)) for i in range(len(ranges))]
        tasks = [
            dask.delayed(encode_module.encode_range_to_shard, pure=True)(
                r, shared, staging, name, storage_options, utf8_errors,
                dask_key_name=f"encode-{tokenize(r.key(), name, staging)}",
            )
            for r, name in zip(ranges, names, strict=True)
        ]  # fmt: skip
        shards = _run_on_cluster(active, tasks, show_progress)
        report = _encode_report(files, shards, tokenizer, tokenizer_dir, utf8_errors, started)
        fs, path = filesystem(staging, storage_options)
        index = {"dtype": report["dtype"], "shards": [s.index_entry() for s in shards]}
        fs.pipe_file(f"{path}/index.json", (json.dumps(index, indent=1) + "\n").encode())
        fs.pipe_file(f"{path}/report.json", (json.dumps(report, indent=2) + "\n").encode())
    return report


def _encode_report(
    files: list[InputFile],
    shards: list[encode_module.EncodedShard],
    tokenizer: Tokenizer,
    tokenizer_dir: str,
    utf8_errors: str,
    started: float,
) -> dict:
    seconds = time.perf_counter() - started
    input_bytes = sum(f.size for f in files)
    tokens = sum(s.tokens for s in shards)
    return {
        "version": __version__,
        "inputs": [f.url for f in files],
        "tokenizer": tokenizer_dir,
        "special_tokens": tokenizer.special_tokens,
        "vocab_size": len(tokenizer.vocab),
        "dtype": encode_module.dtype_for(tokenizer),
        "utf8_errors": utf8_errors,
        "shards": len(shards),
        "input_bytes": input_bytes,
        "tokens": tokens,
        "bytes_per_token": input_bytes / tokens if tokens else None,
        "seconds": seconds,
        "bytes_per_second": input_bytes / seconds,
    }


# --- the CS336 entry point ---------------------------------------------------------------------


def train_bpe(
    input_path: PathLike | Sequence[PathLike],
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    **options,
) -> tuple[Vocab, Merges]:
    """Train a byte-level BPE tokenizer: a drop-in for CS336's ``run_train_bpe``.

    ``options`` are those of ``count_words``: ``chunk_size``, ``client``, ``scheduler``,
    ``workers``, ``work_dir``, ``storage_options``, ``in_process``.
    """
    special_tokens = _token_list(special_tokens)
    validate(vocab_size, special_tokens)
    counted = count_words(input_path, special_tokens, **options)
    _warn_if_empty(counted.table().num_rows, counted.input_bytes)
    merged = merge_table(counted.table(), vocab_size, special_tokens)
    return merged.vocab, merged.merges


def _warn_if_empty(unique_words: int, input_bytes: int) -> None:
    if unique_words == 0:
        log.warning(
            "the input holds no words (%d bytes): the vocabulary is only the bytes and special tokens",
            input_bytes,
        )


def peak_rss_bytes() -> int:
    """The peak resident memory of this process so far."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _token_list(special_tokens: Sequence[str]) -> list[str]:
    if isinstance(special_tokens, str):
        raise BpeDaskError("special tokens must be a list of strings, not one string")
    return list(special_tokens)


def _as_list(inputs: PathLike | Sequence[PathLike]) -> list[PathLike]:
    return [inputs] if isinstance(inputs, (str, Path, os.PathLike)) else list(inputs)
