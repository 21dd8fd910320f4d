"""Encoding (the map stage of ``bpe-dask encode``): one partition and a tokenizer in, one shard of
token ids out, and the tasks that assemble the shards into the output.

Takes a part of any source (``sources.part``) and a ``Tokenizer``; reads a text in blocks cut at
safe places (the cuts that leave the pre-tokens unchanged leave the encoding unchanged too), or
records as documents (each encoded alone, then the separator's id), encodes them and writes the
ids as a NumPy ``.npy`` array in the work directory, under a name made of the part's key and the
tokenizer's, so a re-run reuses finished shards. Then the output: shards
copied under their position in the plan (``NNNNNN.npy``, sorted names follow the input order), or
written into one flat ``.bin`` file at their offsets (ranged writes where the file is local; one
task streaming them in order into an object store, which has no ranged writes).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bpe_dask.io.documents import BadRecords
from bpe_dask.io.publish import output_file
from bpe_dask.io.storage import LOCAL, Store
from bpe_dask.sources.part import Part, PartReading, read_bytes
from bpe_dask.stages.read_events import reporter, stopped
from bpe_dask.tokenizer import Tokenizer, encode_utf8_documents

# Part of every shard's name: raise it whenever a change to the code changes what a range encodes to.
ENCODING_VERSION = 2  # 2: each shard has its sidecar (text bytes, bad records)


@dataclass(frozen=True)
class EncodedShard:
    """A finished encode task: where its ids are, the range they encode, and how many there are."""

    path: str
    input: str
    start: int
    end: int
    tokens: int
    reused: bool
    bad_records: BadRecords = field(default_factory=BadRecords)
    unit: str = "bytes"  # what start and end count: bytes, or a Parquet file's row groups
    text_bytes: int = 0  # the UTF-8 bytes of the text encoded (decompressed; records' texts only)
    read_bytes: int = 0  # the bytes read of an input whose size was not known (0 for any other)


def dtype_for(tokenizer: Tokenizer) -> str:
    """``uint16`` while every id fits, as model trainers read ``train.bin``; ``uint32`` beyond."""
    return "uint16" if max(tokenizer.vocab) < 2**16 else "uint32"


def encoding_key(tokenizer: Tokenizer, separator: str | None = None, utf8_errors: str = "strict") -> str:
    """A digest of everything besides the input that decides the ids: the tokenizer, the documents'
    separator and how invalid UTF-8 is read."""
    digest = hashlib.sha256(
        f"{ENCODING_VERSION}\0{tokenizer.pretokenizer.pattern.regex}\0{separator}\0{utf8_errors}".encode()
    )
    for token_id, token in sorted(tokenizer.vocab.items()):
        digest.update(b"%d\0%s\0" % (token_id, token))
    for a, b in tokenizer.merges:
        digest.update(b"%s\0%s\0" % (a, b))
    for token, token_id in sorted(tokenizer.special_ids.items()):
        digest.update(f"{token}\0{token_id}\0".encode())
    return digest.hexdigest()[:16]


def ids_path(work_dir: str, part: Part, key: str) -> str:
    """Where a part's ids are: named after what the part holds and what decides its ids."""
    return f"{work_dir.rstrip('/')}/encoded/{part.key()}-{key}.npy"


def shard_name(position: int, total: int) -> str:
    return f"{position:0{max(6, len(str(total - 1)))}d}.npy"


def encode_part_to_shard(
    part: Part,
    tokenizer: Tokenizer,
    utf8_errors: str,
    separator: str | None,
    path: str,
    store: Store = LOCAL,
    data: Any = None,
) -> EncodedShard:
    """Encode one part into the shard ``path``, or reuse the shard a previous run finished; a failure
    that may be transient is retried in place. Each document of records ends with ``separator``'s
    id; ``data`` is what the part's task was handed (``Part.documents``). The arguments are in the
    order ``on_cluster.map_parts`` gives them to a task."""

    def _encode_part_to_shard() -> EncodedShard:
        fs, fs_path = store.fs(path)
        if fs.exists(fs_path):  # its sidecar was written before it
            return read_encoded_shard(path, part, store, tokenizer)
        dtype = np.dtype(dtype_for(tokenizer))
        bad = BadRecords()
        progress = reporter(store, part.size or 0)  # how far the reading has got, to the client
        # UTF-8 as it lies, which the compiled encoder takes as it is; decoded where it is to be mended.
        reading = PartReading(tokenizer.pretokenizer, store, utf8_errors, as_utf8=utf8_errors == "strict")
        end = [tokenizer.token_id(separator)] if separator is not None and part.stand_alone else []
        parts, text_bytes = [], 0  # (a text holds its own separators)
        for documents in part.documents(reading, bad, progress, data):
            parts.append(encode_utf8_documents(tokenizer, documents.data, documents.ends, end, dtype))
            text_bytes += len(documents.data)
        progress.check()  # as a count task: nothing written once the job has stopped
        tokens, read = sum(len(ids) for ids in parts), read_bytes(part, progress.read)
        # Beside the shard, written first: what a re-run that reuses the shard reports of it.
        sidecar = {"text_bytes": text_bytes, "bad_records": vars(bad), "read_bytes": read}
        with output_file(f"{path}.json", store, overwrite=True, work=True) as f:
            f.write(json.dumps(sidecar).encode())
        header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (tokens,)}
        with output_file(path, store, overwrite=True, work=True) as f:
            np.lib.format.write_array_header_1_0(f, header)  # then the ids, block by block: np.save's layout
            for ids in parts:
                f.write(ids.data)
        *place, unit = part.place
        return EncodedShard(path, *place, tokens, False, bad, unit, text_bytes, read)

    return store.retries.run(_encode_part_to_shard)


def read_encoded_shard(path: str, part: Part, store: Store, tokenizer: Tokenizer, *_: object) -> EncodedShard:
    """The finished shard ``path`` of ids of ``part``, as a re-run reuses it (``on_cluster.map_parts``
    gives it the task's arguments, of which the others decide nothing here)."""
    fs, fs_path = store.fs(path)
    with fs.open(fs_path, "rb") as f:
        ids_bytes = fs.size(fs_path) - _ids_offset(f.read(10), path)
    tokens = ids_bytes // np.dtype(dtype_for(tokenizer)).itemsize
    sidecar = json.loads(fs.cat_file(f"{fs_path}.json"))
    bad = BadRecords(**sidecar["bad_records"])
    *place, unit = part.place
    read_bytes = sidecar.get("read_bytes", 0)
    return EncodedShard(path, *place, tokens, True, bad, unit, sidecar["text_bytes"], read_bytes)


def _shard_ids(shard: EncodedShard, store: Store) -> memoryview:
    """The raw ids of a shard, its ``.npy`` header skipped, not parsed: ``np.load`` parses it with
    ``ast.literal_eval``, and CPython 3.11's parser is not safe to run in two threads at once (a
    ``SystemError`` "AST constructor recursion depth mismatch", python/cpython#106905), which is
    what several threads per worker do. The header is ours (``encode_range``): format 1.0."""
    fs, path = store.fs(shard.path)
    with fs.open(path, "rb") as f:
        data = memoryview(f.read())
    ids = data[_ids_offset(data[:10], shard.path) :]
    if shard.tokens and len(ids) % shard.tokens:
        raise ValueError(f"{shard.path} holds {len(ids)} bytes, not {shard.tokens} ids")
    return ids


def _ids_offset(head: bytes | memoryview, path: str) -> int:
    """Where the ids start in a shard, from its first 10 bytes: magic, version 1.0, header length."""
    if bytes(head[:8]) != b"\x93NUMPY\x01\x00" or len(head) < 10:
        raise ValueError(f"{path} is not an encoded shard (.npy format 1.0)")
    return 10 + int.from_bytes(head[8:10], "little")


def copy_shard(shard: EncodedShard, destination: str, store: Store = LOCAL) -> str:
    """Copy a shard into the output directory under its place in the plan (a server-side copy in an
    object store)."""
    fs, source = store.fs(shard.path)
    target_fs, target = store.fs(destination)
    if fs.protocol == target_fs.protocol:
        store.retries.run(fs.copy, source, target)
    else:  # the work directory in one store, the output in another (S3 to a shared disk): stream it
        store.retries.run(_copy_across, fs, source, target_fs, target)
    return destination


def _copy_across(fs, source: str, target_fs, target: str) -> None:
    with fs.open(source, "rb") as reading, target_fs.open(target, "wb") as writing:
        shutil.copyfileobj(reading, writing, 8 * 2**20)


def write_at(shard: EncodedShard, path: str, offset: int, store: Store = LOCAL) -> int:
    """Write a shard's ids into the local file ``path`` at ``offset`` bytes (a ranged write): shards
    fill their parts of the file at once, side by side."""
    data = _shard_ids(shard, store)
    with open(path, "r+b") as f:  # each task a file object of its own: no shared position
        f.seek(offset)
        return f.write(data)


def stream_shards(
    shards: list[EncodedShard],
    url: str,
    store: Store = LOCAL,
    overwrite: bool = False,
    stop: str | None = None,
) -> int:
    """Write the shards' ids in order into the file ``url`` (an object store's multipart upload, or a
    temporary local file), holding one shard at a time, and commit it (``publish.output_file``), the
    sidecar ``url + ".json"`` of an earlier run removed just before with ``overwrite``; returns the
    bytes written. Nothing is committed once the job has stopped (``read_events.stopped``)."""
    written = 0

    def before_commit() -> None:
        if stopped(stop):  # the client was interrupted meanwhile: the output stays as it was
            raise JobStopped(f"the job stopped before {url} was committed")
        if overwrite:
            remove_sidecar(url, store)

    with output_file(url, store, overwrite, before_commit) as f:
        for shard in shards:
            written += f.write(_shard_ids(shard, store))
    return written


class JobStopped(Exception):
    """A task's job stopped while it ran: what it would have committed is dropped."""


def remove_sidecar(url: str, store: Store) -> None:
    """Remove an earlier run's ``.json`` beside the ``.bin`` about to be committed: it describes
    the file being replaced, and must never be read as describing the new one."""
    fs, path = store.fs(f"{url}.json")
    if fs.exists(path):
        fs.rm_file(path)
