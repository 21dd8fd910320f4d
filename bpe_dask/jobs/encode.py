"""The encode job: inputs and a trained tokenizer in, token ids out, in the layout model trainers read.

``encode`` finds the source as counting does and encodes each of its parts in a Dask task that
writes a shard of ids into the work directory (``stages.encode``; a re-run with the same
``--work-dir`` reuses the finished ones). Then, on the cluster, the output appears whole: a
directory of ``.npy`` shards with ``index.json`` and ``report.json``, or one flat ``.bin`` file of
``uint16`` / ``uint32`` ids (what nanoGPT and the CS336 training loop ``np.memmap``) with a JSON
sidecar saying its dtype and length.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Sequence
from functools import partial as partial_function
from typing import Any

import dask
from distributed import Client

from bpe_dask.credentials import shown
from bpe_dask.errors import BpeDaskError, UsageError
from bpe_dask.io.documents import BadRecords
from bpe_dask.io.outputs import check_output_dir, check_output_file
from bpe_dask.io.publish import atomic_file, staged_directory
from bpe_dask.io.storage import Store, absolute, is_local
from bpe_dask.jobs.cluster import NO_WARM_UP, WarmUp, default_workers
from bpe_dask.jobs.context import Job, Run, cluster_threads, is_embedded, report_bad_records, run_tasks
from bpe_dask.jobs.on_cluster import forget_shards, map_parts
from bpe_dask.jobs.options import JobOptions, PathLike, check_replacement_character
from bpe_dask.jobs.progress import MapProgress
from bpe_dask.sources.collection import UNKNOWN_SIZE
from bpe_dask.sources.part import Part
from bpe_dask.sources.source import Source
from bpe_dask.stages.encode import (
    EncodedShard,
    copy_shard,
    dtype_for,
    encode_part_to_shard,
    encoding_key,
    is_encoded_file,
    read_encoded_shard,
    remove_sidecar,
    shard_name,
    shard_path,
    stream_shards,
    write_at,
)
from bpe_dask.tokenizer import Tokenizer
from bpe_dask.version import __version__

FORMATS = ("npy", "bin")

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

    ``format`` is ``"bin"`` (the default when ``out`` ends in ``.bin``): one flat file of ids, with
    ``out + ".json"`` beside it; or ``"npy"``: a directory of ``.npy`` shards, one per range.
    ``tokenizer`` is a ``Tokenizer`` or a directory ``bpe-dask train`` wrote; ``special_tokens``
    default to those its ``tokenizer.json`` registers. With inputs of records (Parquet, JSON Lines)
    each document is encoded alone and, with ``document_separator`` (a special token), followed by
    that token's id. A tokenizer directory whose split pattern is not built in is refused unless
    ``trust_pattern`` (``Tokenizer.load``). ``options`` are ``JobOptions`` fields; a
    ``work_dir`` keeps the shards, so that a re-run after an interruption reuses them. ``inputs`` may
    be a Dask DataFrame column or Bag of documents instead (``sources.collection``), encoded as records.

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
    tokenizer = _tokenizer(given, special_tokens, opts.engine, job.store, trust_pattern)
    check_replacement_character(tokenizer.special_tokens, opts.utf8_errors)
    if fmt == "bin":  # 1. the output may be written
        check_output_file(out, opts.overwrite, job.store)
    else:
        check_output_dir(out, opts.overwrite, is_encoded_file, job.store)
    sidecar = f"{out}.json" if fmt == "bin" else None  # the .bin's, which a folder of inputs may hold
    source = job.find_source(inputs, exclude=[out, opts.work_dir], outputs=[out, sidecar])  # 2.
    _check_source(source, document_separator, tokenizer)
    _say_format(out, fmt, tokenizer)
    in_threads, warm_up = _placement(job, source, tokenizer)  # 3. where it is encoded
    scratch = None if job.embedded else out
    with job.running(source, False, tokenizer.pretokenizer, in_threads, warm_up, scratch, [out]) as run:
        shards = _encode_parts(run, job, source, tokenizer, document_separator)  # 4. encode
        report = _report(job, source, shards, tokenizer, given, fmt, started)  # 5. report
        report["document_separator"] = document_separator
        publish = _publish_shards if fmt == "npy" else _publish_bin
        publish(run.client, job, shards, out, report)  # 6. publish
    if source.kind == "collection":  # a re-run of a finished job must not reuse them
        forget_shards([shard.path for shard in shards], job.store)
    return report


def _placement(job: Job, source: Source, tokenizer: Tokenizer) -> tuple[bool, WarmUp]:
    """Whether a LocalCluster the job starts runs the tasks in threads of this process (the compiled
    encoder releases the GIL), and what its workers warm up: an encode task's loop, where it runs."""
    size = source.known_bytes if source.kind == "files" else UNKNOWN_SIZE
    in_threads = job.starts_cluster and tokenizer.uses_compiled(size)
    threads = job.options.workers or default_workers()
    largest = (
        source.expected_largest_part(threads, job.options.chunk_size) if source.kind == "files" else size
    )
    compiled = in_threads or tokenizer.uses_compiled(largest)
    warm_up = WarmUp((tokenizer.pretokenizer.pattern.name,), ("encode",))
    return in_threads, warm_up if compiled else NO_WARM_UP


def output_format(out: str, format: str | None) -> str:
    """The format ``format`` names, or else ``out``'s name: ``.bin`` is one flat file, a name without
    a suffix a directory of ``.npy`` shards; any other suffix (``ids.txt``, ``x.ids``) is refused
    rather than guessed, since a name that looks like a file would silently become a directory.

    >>> output_format("train.bin", None), output_format("data/train", None), output_format("x.ids", "bin")
    ('bin', 'npy', 'bin')
    """
    if format is not None:
        if format not in FORMATS:
            raise UsageError(f"format must be npy or bin, got {format!r}")
        return format
    name = out.rstrip("/").rpartition("/")[2]
    if name.endswith(".bin"):
        return "bin"
    if "." not in name.lstrip("."):
        return "npy"
    raise UsageError(
        f"cannot tell the output format from the name {name!r}: give --format bin (one flat file of ids) "
        "or --format npy (a directory of .npy shards), or name it .bin"
    )


def _say_format(out: str, fmt: str, tokenizer: Tokenizer) -> None:
    if fmt == "bin":
        log.info("writing one flat file of %s token ids: %s (and %s.json)", dtype_for(tokenizer), out, out)
    else:
        log.info("writing a directory of .npy shards of %s token ids: %s", dtype_for(tokenizer), out)


def _tokenizer(
    source: str | Tokenizer,
    special_tokens: Sequence[str] | None,
    engine: str,
    store: Store,
    trust_pattern: bool = False,
) -> Tokenizer:
    """The tokenizer to encode with: loaded, or the one given, with the job's special tokens and,
    unless it is ``auto``, the job's engine."""
    if isinstance(source, str):
        return Tokenizer.load(source, special_tokens, store.options, engine, trust_pattern=trust_pattern)
    engine = source.engine if engine == "auto" else engine
    if special_tokens is None and engine == source.engine:
        return source
    tokens = source.special_tokens if special_tokens is None else special_tokens
    return Tokenizer(source.vocab, source.merges, tokens, source.pretokenizer.pattern, engine)


def _check_source(source: Source, separator: str | None, tokenizer: Tokenizer) -> None:
    """Encoded are files and Dask collections; a separator follows records only."""
    if source.kind == "memory":
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
    if source.kind == "files" and not source.has_records:
        raise BpeDaskError(
            "--document-separator applies to inputs of records (Parquet, JSON Lines): text holds its own"
        )


def _encode_parts(
    run: Run, job: Job, source: Source, tokenizer: Tokenizer, separator: str | None
) -> list[EncodedShard]:
    """A shard of ids per part, in the parts' order: each document of records followed by
    ``separator``'s id; a finished shard is reused."""
    opts, client = job.options, run.client
    if source.kind == "collection":
        parts = source.parts()
    else:
        parts = source.plan(tokenizer.pretokenizer, opts.chunk_size, cluster_threads(client))
    shared = client.scatter(tokenizer, broadcast=True, hash=False)
    key = encoding_key(tokenizer, separator, opts.utf8_errors)
    paths = [shard_path(run.work, part, key) for part in parts]
    tasks = map_parts(
        source, parts, _encode, [shared, opts.utf8_errors, separator], "encode", paths, job.store, _reuse
    )
    progress = None
    if opts.show_progress:
        total_bytes = source.known_bytes if source.kind == "files" else None
        progress = MapProgress("encode", len(tasks), total_bytes, extra="tokens")
    sizes = [part.size for part in parts]
    shards = run_tasks(client, tasks, progress, sizes, lambda shard: (shard.text_bytes, shard.tokens))
    bad = BadRecords()
    for shard in shards:
        bad.merge(shard.bad_records)
    report_bad_records(bad)
    return shards


def _encode(
    part: Part,
    tokenizer: Tokenizer,
    utf8_errors: str,
    separator: str | None,
    path: str,
    store: Store,
    data: object = None,
) -> EncodedShard:
    return encode_part_to_shard(part, tokenizer, path, store, utf8_errors, separator, data)


def _reuse(path: str, part: Part, store: Store, tokenizer: Tokenizer, *_: object) -> EncodedShard:
    return read_encoded_shard(path, tokenizer, part.place, store)


def _publish_shards(client: Client, job: Job, shards: list[EncodedShard], out: str, report: dict) -> None:
    """The output directory: the shards under their place in the plan, ``index.json``, ``report.json``."""
    store = job.store
    with staged_directory(out, store, job.options.overwrite) as staging:
        names = [shard_name(i, len(shards)) for i in range(len(shards))]
        copies = [
            dask.delayed(copy_shard, pure=False)(shard, f"{staging}/{name}", store)
            for shard, name in zip(shards, names, strict=True)
        ]
        run_tasks(client, copies)
        index = {
            "dtype": report["dtype"],
            "shards": [
                {
                    "shard": name,
                    "input": shown(s.input),
                    "start": s.start,
                    "end": s.end,
                    "unit": s.unit,
                    "tokens": s.tokens,
                }
                for name, s in zip(names, shards, strict=True)
            ],
        }
        fs, path = store.fs(staging)
        fs.pipe_file(f"{path}/index.json", (json.dumps(index, indent=1) + "\n").encode())
        fs.pipe_file(f"{path}/report.json", (json.dumps(report, indent=2) + "\n").encode())


def _publish_bin(client: Client, job: Job, shards: list[EncodedShard], out: str, report: dict) -> None:
    """One flat file of ids, then its sidecar. Where the file is local and the workers share the disk,
    each shard is written at its offset by a task (ranged writes, side by side); elsewhere one task
    streams them in order into the store. The ``.bin`` is committed (exclusively unless
    ``--overwrite``) once whole, and the new sidecar after; with ``--overwrite`` an earlier sidecar
    is removed just before the commit (without it, the commit fails if there is a ``.bin``, whose
    sidecar, another job's maybe, stays): a ``.bin`` with a ``.json`` beside it is always described
    by it (docs/outputs.md)."""
    store, overwrite = job.store, job.options.overwrite
    itemsize = 2 if report["dtype"] == "uint16" else 4
    if is_local(out) and is_embedded(client):
        unsidecar = partial_function(remove_sidecar, out, store) if overwrite else (lambda: None)
        with atomic_file(out, store, overwrite, unsidecar) as (_, partial):
            with open(partial, "wb") as f:
                f.truncate(report["tokens"] * itemsize)
            offsets = [0]
            for shard in shards[:-1]:
                offsets.append(offsets[-1] + shard.tokens * itemsize)
            writes = [
                dask.delayed(write_at, pure=False)(shard, partial, offset, store)
                for shard, offset in zip(shards, offsets, strict=True)
            ]
            run_tasks(client, writes)
    else:
        stop = f"bpe-dask-stop-{uuid.uuid4().hex}"  # set if the job stops while the task streams
        streaming = dask.delayed(stream_shards, pure=False)(shards, out, store, overwrite, stop)
        run_tasks(client, [streaming], stop=stop)
    with atomic_file(f"{out}.json", store) as (fs, partial):
        fs.pipe_file(partial, (json.dumps(report, indent=2) + "\n").encode())


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
    read = getattr(source, "known_bytes", 0) + sum(s.read_bytes for s in shards)  # and of no known size
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
