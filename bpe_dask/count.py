"""Counting (the map stage): one byte range in, one word-count Parquet shard out.

Takes a ``ByteRange`` and the count settings; reads the range through fsspec, decodes it
strictly as UTF-8, pre-tokenizes it and writes ``token: binary, count: int64`` to a shard
whose name is derived from the range's identity and the settings, so finished work is
never confused with other work and can be reused.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from . import formats
from .errors import BpeDaskError
from .plan import ByteRange
from .pretokenize import GPT2_PATTERN, count_pretokens, special_token_pattern


@dataclass(frozen=True)
class CountSettings:
    """Everything besides the input bytes that decides the counts."""

    special_tokens: tuple[str, ...] = ()

    def key(self) -> str:
        text = "\0".join([GPT2_PATTERN, *sorted(set(self.special_tokens))])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Shard:
    """A finished map task: where its counts are and how many distinct words they hold."""

    path: str
    unique_words: int
    reused: bool


def shard_path(shard_dir: str, byte_range: ByteRange, settings: CountSettings) -> str:
    return f"{shard_dir.rstrip('/')}/{byte_range.key()}-{settings.key()}.parquet"


def read_text(byte_range: ByteRange, storage_options: dict | None = None) -> str:
    """The range's bytes decoded as strict UTF-8 (no newline translation)."""
    fs, path = fsspec.core.url_to_fs(byte_range.file.url, **(storage_options or {}))
    data = fs.cat_file(path, byte_range.start, byte_range.end) if byte_range.size else b""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        offset = byte_range.start + error.start
        raise BpeDaskError(f"{byte_range.file.name}: invalid UTF-8 at byte offset {offset}") from None


def count_range(
    byte_range: ByteRange, settings: CountSettings, storage_options: dict | None = None
) -> Counter[str]:
    """The pre-token counts of one range."""
    text = read_text(byte_range, storage_options)
    return count_pretokens(text, special_token_pattern(settings.special_tokens))


def count_range_to_shard(
    byte_range: ByteRange,
    settings: CountSettings,
    shard_dir: str,
    storage_options: dict | None = None,
) -> Shard:
    """Count one range and write its shard, or reuse the shard a previous run finished."""
    path = shard_path(shard_dir, byte_range, settings)
    fs, fs_path = fsspec.core.url_to_fs(path, **(storage_options or {}))
    if fs.exists(fs_path):
        with fs.open(fs_path, "rb") as f:
            return Shard(path, pq.ParquetFile(f).metadata.num_rows, reused=True)
    table = counts_table(count_range(byte_range, settings, storage_options))
    formats.write_parquet_atomically(table, path, storage_options)
    return Shard(path, table.num_rows, reused=False)


def counts_table(counts: Counter[str]) -> pa.Table:
    """Word counts as the shard schema: UTF-8 pre-token bytes and their counts."""
    return pa.table(
        {
            "token": pa.array([word.encode("utf-8") for word in counts], pa.binary()),
            "count": pa.array(list(counts.values()), pa.int64()),
        },
        schema=formats.COUNTS_SCHEMA,
    )
