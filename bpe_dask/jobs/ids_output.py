"""The ids an encode job made, in; its output out, whole or not at all, in the layout model trainers read.

``output_format`` tells the format from ``--format`` or the output's name; ``publish_shards``
copies the shards into a directory (``NNNNNN.npy``, sorted names follow the input's order) with
``index.json`` and ``report.json``; ``publish_bin`` writes them into one flat ``.bin`` file at
their offsets (ranged writes where the file is local and the workers share the disk; one task
streaming them in order into an object store, which has no ranged writes), then its sidecar.
"""

from __future__ import annotations

import json
import logging
import uuid
from functools import partial
from itertools import accumulate

import dask
from distributed import Client

from bpe_dask.cluster.tasks import is_embedded, run_tasks
from bpe_dask.credentials import shown
from bpe_dask.errors import UsageError
from bpe_dask.io.outputs import check_output_dir, check_output_file
from bpe_dask.io.publish import output_file, staged_directory
from bpe_dask.io.storage import Store, is_local
from bpe_dask.io.written import ENCODED, INDEX, REPORT
from bpe_dask.jobs.context import Job
from bpe_dask.stages.encode import (
    EncodedShard,
    copy_shard,
    dtype_for,
    remove_sidecar,
    shard_name,
    stream_shards,
    write_at,
)
from bpe_dask.tokenizer import Tokenizer

FORMATS = ("npy", "bin")

log = logging.getLogger(__name__)


def output_format(out: str, format: str | None) -> str:
    """The format ``format`` names, or else ``out``'s name: ``.bin`` is one flat file, a name without
    a suffix a directory of ``.npy`` shards; any other suffix (``ids.txt``, ``x.ids``) is refused
    rather than guessed, since a name that looks like a file would silently become a directory. A
    format that the name contradicts (``npy`` into ``ids.bin``, ``bin`` into ``ids.npy``) is refused
    too: which of the two was meant, only the user knows.

    >>> output_format("train.bin", None), output_format("data/train", None), output_format("x.ids", "bin")
    ('bin', 'npy', 'bin')
    >>> output_format("j9.bin", "npy")
    Traceback (most recent call last):
    bpe_dask.errors.UsageError: format="npy" writes a directory of .npy shards, but out='j9.bin' ...
    """
    name = out.rstrip("/").rpartition("/")[2]
    if format is not None:
        if format not in FORMATS:
            raise UsageError(f"format must be npy or bin, got {format!r}")
        if format == "npy" and name.endswith(".bin"):
            raise UsageError(
                f'format="npy" writes a directory of .npy shards, but out={out!r} is named as one flat '
                'file of ids: drop the .bin, or give format="bin"'
            )
        if format == "bin" and name.endswith(".npy"):
            raise UsageError(
                f'format="bin" writes one flat file of ids, which np.load cannot read, but out={out!r} '
                'is named as a .npy array: name it .bin, or give format="npy" (a directory of .npy shards)'
            )
        return format
    if name.endswith(".bin"):
        return "bin"
    if "." not in name.lstrip("."):
        return "npy"
    raise UsageError(
        f'cannot tell the output format from the name {name!r}: give format="bin" (one flat file of ids) '
        'or format="npy" (a directory of .npy shards), or name it .bin'
    )


def check_output(out: str, fmt: str, overwrite: bool, store: Store) -> list[str]:
    """Refuse, before any work, an output that could not be published; the files the job writes."""
    if fmt == "bin":
        check_output_file(out, overwrite, store)
        return [out, f"{out}.json"]  # and its sidecar, which a folder of inputs may hold
    check_output_dir(out, overwrite, ENCODED.owns, store)  # shards, index.json, report.json
    return [out]


def say_format(out: str, fmt: str, tokenizer: Tokenizer) -> None:
    if fmt == "bin":
        log.info("writing one flat file of %s token ids: %s (and %s.json)", dtype_for(tokenizer), out, out)
    else:
        log.info("writing a directory of .npy shards of %s token ids: %s", dtype_for(tokenizer), out)


def publish_shards(client: Client, job: Job, shards: list[EncodedShard], out: str, report: dict) -> None:
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
        fs.pipe_file(f"{path}/{INDEX}", (json.dumps(index, indent=1) + "\n").encode())
        fs.pipe_file(f"{path}/{REPORT}", (json.dumps(report, indent=2) + "\n").encode())


def publish_bin(client: Client, job: Job, shards: list[EncodedShard], out: str, report: dict) -> None:
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
        unsidecar = partial(remove_sidecar, out, store) if overwrite else (lambda: None)
        with output_file(out, store, overwrite, unsidecar) as f:
            f.truncate(report["tokens"] * itemsize)  # then each task writes its shard into f.name
            offsets = accumulate((shard.tokens * itemsize for shard in shards[:-1]), initial=0)
            writes = [
                dask.delayed(write_at, pure=False)(shard, f.name, offset, store)
                for shard, offset in zip(shards, offsets, strict=True)
            ]
            run_tasks(client, writes)
    else:
        stop = f"bpe-dask-stop-{uuid.uuid4().hex}"  # set if the job stops while the task streams
        streaming = dask.delayed(stream_shards, pure=False)(shards, out, store, overwrite, stop)
        run_tasks(client, [streaming], stop=stop)
    with output_file(f"{out}.json", store, overwrite=True) as f:
        f.write((json.dumps(report, indent=2) + "\n").encode())
