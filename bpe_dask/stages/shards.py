"""Shards: what a map task counted in, a word-count Parquet file out, and back.

A shard is ``token: binary, count: int64`` sorted by token (``large_binary`` past 2 GiB of tokens:
``counts_table``), with, in its metadata, what a re-run that reuses it must still report: the
records skipped, the special tokens seen, the bytes of text counted, and the bytes read of an
input whose size was not known. Its name is made of the part's key and the settings' key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pyarrow.parquet as pq

from bpe_dask.io.counts_table import words_bytes, write_counts
from bpe_dask.io.documents import BadRecords
from bpe_dask.io.storage import LOCAL, Store
from bpe_dask.io.written import METADATA_PREFIX
from bpe_dask.sources.part import Part
from bpe_dask.stages.counters import CompiledCounter, RegexCounter, SpecialsSeen


@dataclass(frozen=True)
class Shard:
    """A finished map task: where its counts are and how many distinct words they hold."""

    path: str
    unique_words: int
    reused: bool
    bad_records: BadRecords = field(default_factory=BadRecords)
    specials: SpecialsSeen = field(default_factory=SpecialsSeen)
    text_bytes: int = 0  # the UTF-8 bytes of the text counted: the words' and the special tokens'
    read_bytes: int = 0  # the bytes read of an input whose size was not known (0 for any other)


# In a shard's metadata, so that a reused shard still reports them.
# (Under bpe-dask's prefix, by which an input listing knows a shard for one: ``io.written``.)
BAD_RECORDS_KEY = METADATA_PREFIX + b"bad_records"
SPECIALS_KEY = METADATA_PREFIX + b"special_tokens_seen"
TEXT_BYTES_KEY = METADATA_PREFIX + b"text_bytes"
READ_BYTES_KEY = METADATA_PREFIX + b"read_bytes"


def shard_path(shard_dir: str, part: Part, settings_key: str) -> str:
    """Where a part's shard is: named after what the part holds and what decides its counts."""
    return f"{shard_dir.rstrip('/')}/{part.key()}-{settings_key}.parquet"


def read_shard(path: str, store: Store = LOCAL) -> Shard:
    """The finished shard ``path``, as a re-run reuses it: what its metadata says it counted."""
    fs, fs_path = store.fs(path)
    with fs.open(fs_path, "rb") as f:
        parquet = pq.ParquetFile(f)
        metadata = parquet.schema_arrow.metadata or {}
        bad, specials = (json.loads(metadata.get(key, b"{}")) for key in (BAD_RECORDS_KEY, SPECIALS_KEY))
        seen = SpecialsSeen(**specials)
        if TEXT_BYTES_KEY in metadata:
            text_bytes = int(metadata[TEXT_BYTES_KEY])
        else:  # a shard an earlier version wrote
            text_bytes = words_bytes(parquet.read()) + seen.bytes
        read_bytes = int(metadata.get(READ_BYTES_KEY, 0))
        return Shard(path, parquet.metadata.num_rows, True, BadRecords(**bad), seen, text_bytes, read_bytes)


def write_shard(
    counter: RegexCounter | CompiledCounter,
    bad: BadRecords,
    path: str,
    store: Store = LOCAL,
    read_bytes: int = 0,
) -> Shard:
    """Write what ``counter`` counted (and the records ``bad`` left out) as the shard ``path``;
    ``read_bytes``: what was read of an input whose size was not known."""
    table = counter.sorted_table()  # the reduce merges runs
    text_bytes = words_bytes(table) + counter.specials.bytes
    metadata = {SPECIALS_KEY: json.dumps(vars(counter.specials)), TEXT_BYTES_KEY: str(text_bytes)}
    if read_bytes:
        metadata[READ_BYTES_KEY] = str(read_bytes)
    if bad.count:
        metadata[BAD_RECORDS_KEY] = json.dumps(vars(bad))
    write_counts(table.replace_schema_metadata(metadata), path, store, work=True)  # never makes the work dir
    return Shard(path, table.num_rows, False, bad, counter.specials, text_bytes, read_bytes)
