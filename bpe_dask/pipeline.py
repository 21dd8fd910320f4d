"""The job: inputs in, a trained tokenizer out, stage by stage.

plan (``plan``) -> map (``count``) -> reduce (``reduce``) -> merge (``merge``) -> write
(``formats``). ``count_words`` runs the first three on a Dask cluster (or in-process for
small inputs), ``train`` runs them all and publishes the output directory, and
``train_bpe`` is the CS336-compatible Python entry point.
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
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dask
import pyarrow as pa
from dask.base import tokenize
from distributed import Client

from . import __version__, formats
from .cluster import dask_client
from .config import DEFAULT_CHUNK_SIZE
from .count import CountSettings, Shard, count_range, count_range_to_shard, counts_table
from .errors import BpeDaskError
from .merge import train_merges
from .plan import ByteRange, expand_inputs, plan_ranges
from .reduce import read_table, reduce_tree

log = logging.getLogger(__name__)

# Below this much input the Python API counts in-process: starting a cluster costs seconds.
IN_PROCESS_LIMIT = 16 * 2**20

PathLike = str | os.PathLike


@dataclass
class CountResult:
    """The word counts (in memory, or in the Parquet file ``path``) and how they were made."""

    input_files: list[str]
    input_bytes: int
    partitions: int
    partitions_reused: int
    seconds: float
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


def validate(vocab_size: int | None, special_tokens: Sequence[str]) -> None:
    """Reject options no job could honour, before any work starts."""
    for token in special_tokens:
        if not isinstance(token, str) or not token:
            raise BpeDaskError("special tokens must be non-empty strings")
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
) -> CountResult:
    """Plan, map and reduce: the word counts of ``inputs``.

    Runs on ``client``, on ``scheduler``, or on a LocalCluster of ``workers``; with none of
    these, inputs under ``IN_PROCESS_LIMIT`` are counted in this process. ``out`` names a
    Parquet file for the counts (cluster runs only).
    """
    started = time.perf_counter()
    validate(None, list(special_tokens))
    files = expand_inputs([os.fspath(p) for p in _as_list(inputs)], storage_options)
    ranges = plan_ranges(files, chunk_size, special_tokens, storage_options)
    settings = CountSettings(tuple(special_tokens))
    total = sum(f.size for f in files)
    if in_process is None:
        in_process = (
            client is None and not scheduler and not workers and total <= IN_PROCESS_LIMIT and not out
        )
    log.info("%d input files, %d bytes, %d partitions", len(files), total, len(ranges))
    result = CountResult([f.url for f in files], total, len(ranges), 0, 0.0, storage_options=storage_options)
    if in_process:
        result._table = _count_in_process(ranges, settings, storage_options)
    else:
        with dask_client(scheduler, workers, client) as active, _work_directory(work_dir) as work:
            result.path, result.partitions_reused = _count_on_cluster(
                active, ranges, settings, out, work, storage_options
            )
            if not out:  # the work directory may be temporary: load the counts while it exists
                result.table()
    result.seconds = time.perf_counter() - started
    return result


def _count_in_process(
    ranges: Sequence[ByteRange], settings: CountSettings, storage_options: dict | None
) -> pa.Table:
    counts: Counter[str] = Counter()
    for byte_range in ranges:
        counts.update(count_range(byte_range, settings, storage_options))
    return counts_table(counts)


def _count_on_cluster(
    client: Client,
    ranges: Sequence[ByteRange],
    settings: CountSettings,
    out: str | None,
    work_dir: str,
    storage_options: dict | None,
) -> tuple[str, int]:
    """Map and reduce on the cluster: the path of the summed counts and how many shards were reused."""
    shard_dir = f"{work_dir.rstrip('/')}/shards"
    shards = [
        dask.delayed(count_range_to_shard, pure=True)(
            r, settings, shard_dir, storage_options, dask_key_name=f"count-{r.key()}-{settings.key()}"
        )
        for r in ranges
    ]
    target = out or f"{work_dir.rstrip('/')}/counts/{tokenize(shards)}.parquet"
    final = reduce_tree(shards, target, work_dir, storage_options)
    reused_flags = [dask.delayed(_was_reused, pure=True)(s) for s in shards]
    path, flags = client.compute([final, reused_flags], sync=True)
    return path, sum(flags)


def _was_reused(shard: Shard) -> bool:
    return shard.reused


@contextmanager
def _work_directory(work_dir: str | None) -> Iterator[str]:
    """The user's work directory (kept, so a re-run reuses its shards), or a temporary one."""
    if work_dir:
        yield work_dir
        return
    temporary = tempfile.mkdtemp(prefix="bpe-dask-")
    try:
        yield temporary
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def merge_counts(
    table: pa.Table, vocab_size: int, special_tokens: Sequence[str] = ()
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """The merge loop over a word-count table."""
    words = table.column("token").to_pylist()
    counts = table.column("count").to_pylist()
    return train_merges(zip(words, counts, strict=True), vocab_size, special_tokens)


def train_bpe(
    input_path: PathLike | Sequence[PathLike],
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    **options,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train a byte-level BPE tokenizer: a drop-in for CS336's ``run_train_bpe``.

    ``options`` are those of ``count_words``: ``chunk_size``, ``client``, ``scheduler``,
    ``workers``, ``work_dir``, ``storage_options``, ``in_process``.
    """
    special_tokens = list(special_tokens)
    validate(vocab_size, special_tokens)
    counted = count_words(input_path, special_tokens, **options)
    _warn_if_empty(counted.table(), counted.input_bytes)
    return merge_counts(counted.table(), vocab_size, special_tokens)


def train(
    inputs: Sequence[str],
    vocab_size: int,
    out: str,
    special_tokens: Sequence[str] = (),
    *,
    overwrite: bool = False,
    storage_options: dict | None = None,
    **count_options,
) -> dict:
    """The whole job: count, merge, and publish the output directory. Returns the report."""
    started = time.perf_counter()
    special_tokens = list(special_tokens)
    validate(vocab_size, special_tokens)
    formats.check_output_dir(out, overwrite, storage_options)
    counted = count_words(
        inputs, special_tokens, storage_options=storage_options, in_process=False, **count_options
    )
    _warn_if_empty(counted.table(), counted.input_bytes)
    report = merge_and_publish(
        counted.table(),
        vocab_size,
        out,
        special_tokens,
        storage_options=storage_options,
        report={**counted.report(), "timings": {"count": counted.seconds}},
        started=started,
    )
    return report


def merge_and_publish(
    table: pa.Table,
    vocab_size: int,
    out: str,
    special_tokens: Sequence[str] = (),
    *,
    storage_options: dict | None = None,
    report: dict | None = None,
    started: float | None = None,
) -> dict:
    """The merge loop over ``table``, then vocab, merges, tokenizer.json and report.json into ``out``."""
    started = time.perf_counter() if started is None else started
    merge_started = time.perf_counter()
    vocab, merges = merge_counts(table, vocab_size, special_tokens)
    report = dict(report or {})
    timings = {**report.pop("timings", {}), "merge": time.perf_counter() - merge_started}
    report = {
        "version": __version__,
        **report,
        "unique_words": table.num_rows,
        "vocab_size": len(vocab),
        "requested_vocab_size": vocab_size,
        "special_tokens": list(special_tokens),
        "num_merges": len(merges),
        "peak_rss_bytes": peak_rss_bytes(),
        "timings": timings,
    }
    report["timings"]["total"] = time.perf_counter() - started
    files = {
        "vocab.json": formats.vocab_json(vocab, special_tokens),
        "merges.txt": formats.merges_txt(merges),
        "tokenizer.json": formats.tokenizer_json(vocab, merges, special_tokens),
        "report.json": json.dumps(report, indent=2) + "\n",
    }
    formats.publish_directory(out, files, storage_options)
    return report


def _warn_if_empty(table: pa.Table, input_bytes: int) -> None:
    if table.num_rows == 0:
        log.warning(
            "the input holds no words (%d bytes): the vocabulary is only the bytes and special tokens",
            input_bytes,
        )


def peak_rss_bytes() -> int:
    """The peak resident memory of this process so far."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _as_list(inputs: PathLike | Sequence[PathLike]) -> list[PathLike]:
    return [inputs] if isinstance(inputs, (str, Path, os.PathLike)) else list(inputs)
