"""The encode job: inputs and a trained tokenizer in, ``.npy`` shards of token ids out.

``encode`` plans byte ranges as counting does, encodes each in a Dask task that writes a shard
(``encoding``) straight into a staging directory, and publishes the directory whole with
``index.json`` (each shard's input, byte range and token count) and ``report.json``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence

import dask
from dask.base import tokenize

from .encoding import EncodedShard, dtype_for, encode_range_to_shard, is_encoded_file, shard_name
from .errors import BpeDaskError
from .job import Job, cluster_threads, run_tasks
from .options import JobOptions, PathLike, check_replacement_character, input_list
from .progress import TaskProgress
from .publish import check_output_dir, staged_directory
from .storage import filesystem
from .tokenizer import Tokenizer
from .version import __version__


def encode(
    inputs: PathLike | Sequence[PathLike],
    tokenizer: PathLike | Tokenizer,
    out: str,
    special_tokens: Sequence[str] | None = None,
    **options,
) -> dict:
    """Encode ``inputs`` into ``.npy`` shards of token ids in ``out``, one per range; returns the report.

    ``tokenizer`` is a ``Tokenizer`` or a directory ``bpe-dask train`` wrote; ``special_tokens``
    default to those its ``tokenizer.json`` registers. ``options`` are ``JobOptions`` fields.
    """
    started = time.perf_counter()
    opts = JobOptions.of(**options)
    if opts.work_dir:
        raise BpeDaskError("encode writes its shards straight into --out: it takes no --work-dir")
    inputs = input_list(inputs)
    source = tokenizer if isinstance(tokenizer, Tokenizer) else os.fspath(tokenizer)
    job = Job.start(opts, [*inputs, out, source if isinstance(source, str) else None])
    if not isinstance(source, Tokenizer):
        tokenizer = Tokenizer.load(source, special_tokens, job.storage_options)
    elif special_tokens is not None:
        tokenizer = Tokenizer(
            tokenizer.vocab, tokenizer.merges, special_tokens, tokenizer.pretokenizer.pattern
        )
    check_replacement_character(tokenizer.special_tokens, opts.utf8_errors)
    check_output_dir(out, opts.overwrite, is_encoded_file, job.storage_options)
    job.find_inputs(inputs, exclude=[out])
    with job.cluster() as client, staged_directory(out, job.storage_options) as staging:
        job.preflight(client, staging, [out])
        job.plan(tokenizer.pretokenizer, cluster_threads(client))
        shared = client.scatter(tokenizer, broadcast=True, hash=False)
        names = [shard_name(i, len(job.ranges)) for i in range(len(job.ranges))]
        tasks = [
            dask.delayed(encode_range_to_shard, pure=True)(
                r, shared, staging, name, job.storage_options, opts.utf8_errors,
                dask_key_name=f"encode-{tokenize(r.key(), name, staging)}",
            )
            for r, name in zip(job.ranges, names, strict=True)
        ]  # fmt: skip
        progress = (
            TaskProgress("encode", len(tasks), job.input_bytes, "tokens") if opts.show_progress else None
        )
        shards = run_tasks(client, tasks, progress, [r.size for r in job.ranges], lambda shard: shard.tokens)
        report = _report(job, shards, tokenizer, source, opts.utf8_errors, started)
        fs, path = filesystem(staging, job.storage_options)
        index = {"dtype": report["dtype"], "shards": [s.index_entry() for s in shards]}
        fs.pipe_file(f"{path}/index.json", (json.dumps(index, indent=1) + "\n").encode())
        fs.pipe_file(f"{path}/report.json", (json.dumps(report, indent=2) + "\n").encode())
    return report


def _report(
    job: Job, shards: list[EncodedShard], tokenizer: Tokenizer, source: str | Tokenizer, utf8_errors: str,
    started: float,
) -> dict:  # fmt: skip
    seconds = time.perf_counter() - started
    tokens = sum(s.tokens for s in shards)
    return {
        "version": __version__,
        "inputs": job.input_urls,
        "tokenizer": source if isinstance(source, str) else None,
        "special_tokens": tokenizer.special_tokens,
        "vocab_size": len(tokenizer.vocab),
        "dtype": dtype_for(tokenizer),
        "utf8_errors": utf8_errors,
        "shards": len(shards),
        "input_bytes": job.input_bytes,
        "tokens": tokens,
        "bytes_per_token": job.input_bytes / tokens if tokens else None,
        "seconds": seconds,
        "bytes_per_second": job.input_bytes / seconds,
    }
