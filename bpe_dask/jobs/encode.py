"""The encode job: inputs and a trained tokenizer in, token ids out, in the layout model trainers read.

``encode`` finds the source as counting does and encodes each of its parts in a Dask task that
writes a shard of ids into the work directory (``stages.encode``; a re-run with the same
``--work-dir`` reuses the finished ones). Then, on the cluster, the output appears whole: a
directory of ``.npy`` shards with ``index.json`` and ``report.json``, or one flat ``.bin`` file of
``uint16`` / ``uint32`` ids (what nanoGPT and the CS336 training loop ``np.memmap``) with a JSON
sidecar saying its dtype and length.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from typing import Any

from bpe_dask import interrupts
from bpe_dask.cluster.client import NO_WARM_UP, WarmUp
from bpe_dask.cluster.local import planned_workers
from bpe_dask.cluster.progress import MapProgress
from bpe_dask.cluster.tasks import cluster_threads, run_tasks
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.documents import BadRecords
from bpe_dask.io.storage import absolute
from bpe_dask.jobs.context import Job, Run, job_tokenizer, report_bad_records
from bpe_dask.jobs.ids_output import check_output, output_format, publish_bin, publish_shards, say_format
from bpe_dask.jobs.on_cluster import forget_shards, map_parts
from bpe_dask.jobs.options import JobOptions, PathLike, check_replacement_character
from bpe_dask.jobs.report import input_bytes
from bpe_dask.sources.source import Source
from bpe_dask.stages.encode import (
    EncodedShard,
    dtype_for,
    encode_part_to_shard,
    encoding_key,
    ids_path,
    read_encoded_shard,
)
from bpe_dask.tokenizer import Tokenizer, uses_compiled
from bpe_dask.version import __version__

log = logging.getLogger(__name__)


def encode(
    inputs: Any,
    tokenizer: PathLike | Tokenizer,
    out: PathLike,
    special_tokens: Sequence[str] | None = None,
    *,
    format: str | None = None,
    document_separator: str | None = None,
    trust_pattern: bool = False,
    **options,
) -> dict:
    """Encode ``inputs`` with ``tokenizer`` into ``out``; returns the report.

    ``format`` is ``"bin"`` (the default for an ``out`` named ``.bin``): one flat file of ids, and
    ``out + ".json"``; or ``"npy"``: a directory of ``.npy`` shards, one per part. ``tokenizer`` is
    a ``Tokenizer``, a directory ``bpe-dask train`` wrote or a Hugging Face ``tokenizer.json`` of the
    byte-level BPE kind, as ``evaluate`` takes (its split pattern, if not built in, only with
    ``trust_pattern``); ``special_tokens`` default to its own. Records (Parquet, JSON
    Lines, a Dask collection's elements) are encoded each alone, then ``document_separator``'s id
    (a special token). ``options`` are ``JobOptions`` fields; a ``work_dir`` keeps the shards, for
    a re-run after an interruption to reuse.

    >>> import numpy as np
    >>> from distributed import Client
    >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi"}
    >>> tokenizer = Tokenizer(vocab, [(b"h", b"i")], ["<|endoftext|>"])
    >>> _ = open("corpus.txt", "w").write("hi!<|endoftext|>hi")
    >>> with Client(processes=False, n_workers=1, dashboard_address=None) as client:
    ...     report = encode("corpus.txt", tokenizer, "ids.bin", client=client)
    >>> report["dtype"], np.fromfile("ids.bin", report["dtype"]).tolist()
    ('uint16', [256, 33, 257, 256])
    """
    started = time.perf_counter()
    opts, out = JobOptions.of(**options), absolute(os.fspath(out))
    fmt = output_format(out, format)
    given = tokenizer if isinstance(tokenizer, Tokenizer) else absolute(os.fspath(tokenizer))
    job = Job.start(opts, inputs, [out, opts.work_dir, given if isinstance(given, str) else None])
    tokenizer = job_tokenizer(given, job.store, opts.engine, trust_pattern, special_tokens)
    check_replacement_character(tokenizer.special_tokens, opts.utf8_errors)
    written = check_output(out, fmt, opts.overwrite, job.store)  # 1. the output may be written
    source = job.find_source(inputs, exclude=[out, opts.work_dir], outputs=written)  # 2. what the input is
    _check_source(source, document_separator, tokenizer)
    say_format(out, fmt, tokenizer)
    in_threads, warm_up = _placement(job, source, tokenizer)  # 3. where it is encoded
    scratch = None if job.embedded else out
    with job.running(source, False, tokenizer.pretokenizer, in_threads, warm_up, scratch, [out]) as run:
        shards = _encode_parts(run, job, source, tokenizer, document_separator)  # 4. encode
        report = _report(job, source, shards, tokenizer, given, fmt, started)  # 5. report
        report["document_separator"] = document_separator
        publish = publish_shards if fmt == "npy" else publish_bin
        publish(run.client, job, shards, out, report)  # 6. publish
    forget_shards(source, [shard.path for shard in shards], job.store)
    return report


def _placement(job: Job, source: Source, tokenizer: Tokenizer) -> tuple[bool, WarmUp]:
    """Whether a LocalCluster the job starts runs the tasks in threads of this process (the compiled
    encoder releases the GIL), and what its workers warm up: an encode task's loop, where it runs."""
    in_threads = job.starts_cluster and uses_compiled(tokenizer, source.size)
    largest = source.largest_part(planned_workers(job.options.workers), job.options.chunk_size)
    compiled = in_threads or uses_compiled(tokenizer, largest)
    warm_up = WarmUp((tokenizer.pretokenizer.pattern.name,), ("encode",))
    return in_threads, warm_up if compiled else NO_WARM_UP


def _check_source(source: Source, separator: str | None, tokenizer: Tokenizer) -> None:
    """Encoded are files and Dask collections; a separator follows records only."""
    if source.reads_on == "here":
        raise BpeDaskError(
            "encode writes the ids of files or of a Dask collection: for documents held here, use "
            "Tokenizer.encode_batch"
        )
    if separator is None:
        return
    if separator not in tokenizer.special_ids:
        known = ", ".join(repr(t) for t in tokenizer.special_tokens) or "none"
        raise BpeDaskError(
            f"document separator {separator!r} is not a special token of the tokenizer ({known})"
        )
    if not source.has_records:
        raise BpeDaskError(
            "document_separator= applies to inputs of records (Parquet, JSON Lines): text holds its own"
        )


def _encode_parts(
    run: Run, job: Job, source: Source, tokenizer: Tokenizer, separator: str | None
) -> list[EncodedShard]:
    """A shard of ids per part, in the parts' order: each document of records followed by
    ``separator``'s id; a finished shard is reused."""
    opts, client = job.options, run.client
    parts = interrupts.call(source.plan, tokenizer.pretokenizer, opts.chunk_size, cluster_threads(client))
    shared = client.scatter(tokenizer, broadcast=True, hash=False)
    key = encoding_key(tokenizer, separator, opts.utf8_errors)
    paths = [ids_path(run.work, part, key) for part in parts]
    args = [shared, opts.utf8_errors, separator]
    tasks = map_parts(
        source, parts, encode_part_to_shard, args, "encode", paths, job.store, read_encoded_shard
    )
    progress = None
    if opts.show_progress:
        progress = MapProgress("encode", *source.totals(parts), extra="tokens")
    sizes = [part.size for part in parts]
    shards = run_tasks(client, tasks, progress, sizes, lambda shard: (shard.text_bytes, shard.tokens))
    bad = BadRecords()
    for shard in shards:
        bad.merge(shard.bad_records)
    report_bad_records(bad)
    return shards


def _report(
    job: Job,
    source: Source,
    shards: list[EncodedShard],
    tokenizer: Tokenizer,
    given: str | Tokenizer,
    fmt: str,
    started: float,
) -> dict:
    seconds = time.perf_counter() - started
    tokens = sum(s.tokens for s in shards)
    text_bytes = sum(s.text_bytes for s in shards)
    read = input_bytes(source, sum(s.read_bytes for s in shards))
    reused = sum(s.reused for s in shards)
    return {
        "version": __version__,
        "inputs": source.shown,
        "tokenizer": given if isinstance(given, str) else None,
        "special_tokens": tokenizer.special_tokens,
        "vocab_size": len(tokenizer.vocab),
        "format": fmt,
        "dtype": dtype_for(tokenizer),
        "tokens": tokens,
        "utf8_errors": job.options.utf8_errors,
        "shards": len(shards),
        "shards_reused": reused,
        "shards_computed": len(shards) - reused,
        "bad_records_skipped": sum(s.bad_records.count for s in shards),
        "input_bytes": read,
        "text_bytes": text_bytes,
        "bytes_per_token": text_bytes / tokens if tokens else None,
        "seconds": seconds,
        "bytes_per_second": read / seconds,
        "tokens_per_second": tokens / seconds,
    }
