"""Counting (the map stage): one byte range in, one word-count Parquet shard out.

Takes a ``ByteRange`` and the count settings; streams the range through fsspec in blocks
cut at safe boundaries (so memory stays bounded whatever the range's size, and compressed
files are decompressed on the fly), decodes each block strictly as UTF-8, pre-tokenizes it
and writes ``token: binary, count: int64`` to a shard. The shard's name is derived from the
range's identity and the settings, so finished work is never confused with other work.
"""

from __future__ import annotations

import gc
import gzip
import hashlib
import lzma
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from . import formats
from .errors import BpeDaskError, InputError, retrying
from .plan import ByteRange, context_margin, encode_specials, find_cut_in_buffer
from .pretokenize import GPT2_PATTERN, count_pretokens, special_token_pattern
from .storage import describe, filesystem

BLOCK_SIZE = 8 * 2**20
# Text with no safe cut for this long is one giant pre-token (a run of a single letter, digit,
# punctuation or whitespace class): the task stops rather than let its memory grow unbounded.
MAX_UNCUT = 64 * 2**20


UTF8_ERRORS = ("strict", "replace")


def check_utf8_errors(value: object) -> str:
    """``value`` if it names a way to treat invalid UTF-8 (stop, or count it as U+FFFD)."""
    if value not in UTF8_ERRORS:
        raise BpeDaskError(f"invalid UTF-8 handling must be strict or replace, got {value!r}")
    return value


@dataclass(frozen=True)
class CountSettings:
    """Everything besides the input bytes that decides the counts."""

    special_tokens: tuple[str, ...] = ()
    utf8_errors: str = "strict"  # or "replace": invalid UTF-8 becomes U+FFFD

    def __post_init__(self) -> None:
        check_utf8_errors(self.utf8_errors)

    def key(self) -> str:
        text = "\0".join([GPT2_PATTERN, *sorted(set(self.special_tokens))])
        if self.utf8_errors != "strict":
            text += f"\0errors={self.utf8_errors}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Shard:
    """A finished map task: where its counts are and how many distinct words they hold."""

    path: str
    unique_words: int
    reused: bool


def shard_path(shard_dir: str, byte_range: ByteRange, settings: CountSettings) -> str:
    return f"{shard_dir.rstrip('/')}/{byte_range.key()}-{settings.key()}.parquet"


def count_range(
    byte_range: ByteRange,
    settings: CountSettings,
    storage_options: dict | None = None,
    block_size: int = BLOCK_SIZE,
    counts: dict[str, int] | None = None,
) -> dict[str, int]:
    """The pre-token counts of one range, added into ``counts`` when given."""
    specials = special_token_pattern(settings.special_tokens)
    counts = {} if counts is None else counts
    with _without_cycle_collection():
        texts = iter_texts(
            byte_range, settings.special_tokens, storage_options, block_size, utf8_errors=settings.utf8_errors
        )
        for text in texts:
            count_pretokens(text, specials, counts)
    return counts


@contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """Counting makes millions of short-lived lists and no reference cycles; without this, the
    cycle collector runs again and again over everything a Dask worker holds. Reference counting
    still frees everything as it goes."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def iter_texts(
    byte_range: ByteRange,
    special_tokens: tuple[str, ...] = (),
    storage_options: dict | None = None,
    block_size: int = BLOCK_SIZE,
    max_uncut: int = MAX_UNCUT,
    utf8_errors: str = "strict",
) -> Iterator[str]:
    """The range's text in blocks of about ``block_size`` bytes, each cut at a safe boundary.

    Counting the blocks one by one gives exactly the counts of the whole range. Memory stays
    within a few times ``block_size + max_uncut``: more than ``max_uncut`` bytes without a
    safe cut is an error naming the file and offset.
    """
    specials = encode_specials(special_tokens)
    with _open_range(byte_range, storage_options) as (stream, remaining):
        pending, offset = b"", byte_range.start  # offset: where ``pending`` starts in the file
        searched_to = None  # set while ``pending`` has been searched in vain up to here
        while True:
            block = _read(stream, block_size if remaining is None else min(block_size, remaining), byte_range)
            if remaining is not None:
                remaining -= len(block)
            if not block:
                if pending:
                    yield _decode(pending, byte_range, offset, utf8_errors)
                return
            pending += block
            # Cut near the middle of the new block, so pieces come out about block_size long.
            start = searched_to or max(1, len(pending) - len(block) // 2)
            cut = find_cut_in_buffer(pending, start, specials)
            if cut is None:
                if searched_to is None:
                    stuck_at = offset + start  # no cut from here on, so far
                searched_to = max(start, len(pending) - context_margin(specials))
                if offset + len(pending) - stuck_at > max_uncut:
                    raise _uncut_error(byte_range, stuck_at, max_uncut)
                continue
            yield _decode(pending[:cut], byte_range, offset, utf8_errors)
            pending, offset, searched_to = pending[cut:], offset + cut, None


@contextmanager
def _open_range(byte_range: ByteRange, storage_options: dict | None) -> Iterator[tuple[BinaryIO, int | None]]:
    """The range as a stream, and how many bytes to read from it (None: to the end)."""
    fs, path = filesystem(byte_range.file.url, storage_options)
    compression = byte_range.file.compression
    try:
        stream = fs.open(path, "rb", compression=compression)
        if not compression:
            stream.seek(byte_range.start)
    except Exception as error:
        raise _read_error(byte_range, error) from None
    with stream:
        yield stream, (None if compression else byte_range.size)


def _read(stream: BinaryIO, size: int, byte_range: ByteRange) -> bytes:
    """Read from the input, so that a store or a corrupt archive failing says which file it was."""
    try:
        return stream.read(size)
    except Exception as error:  # a broken connection, a truncated or mislabelled archive, ...
        raise _read_error(byte_range, error) from None


# Failures that reading again cannot fix: the file is gone or forbidden, or the archive is corrupt.
_LASTING = (
    FileNotFoundError, PermissionError, IsADirectoryError, EOFError, zlib.error, lzma.LZMAError,
    gzip.BadGzipFile,
)  # fmt: skip


def _read_error(byte_range: ByteRange, error: Exception) -> BpeDaskError:
    lasting = isinstance(error, _LASTING) or (
        byte_range.file.compression is not None
        and (type(error).__name__ == "ZstdError" or "Invalid data stream" in str(error))  # zstandard, bz2
    )
    kind = InputError if lasting else BpeDaskError  # a BpeDaskError is retried, an InputError is not
    return kind(f"cannot read {byte_range.file.name}: {describe(error)}")


def _uncut_error(byte_range: ByteRange, offset: int, max_uncut: int) -> InputError:
    return InputError(
        f"{byte_range.file.name}: no place to split the text in the {max_uncut // 2**20} MiB after byte "
        f"offset {offset}{_of_decompressed(byte_range)} (no whitespace, special token, or change between "
        "letters, digits and punctuation): a single pre-token that long cannot be counted"
    )


def _decode(data: bytes, byte_range: ByteRange, offset: int, utf8_errors: str = "strict") -> str:
    try:
        return data.decode("utf-8", utf8_errors)
    except UnicodeDecodeError as error:
        raise InputError(
            f"{byte_range.file.name}: invalid UTF-8 at byte offset {offset + error.start}"
            f"{_of_decompressed(byte_range)} (--utf8-errors replace substitutes U+FFFD)"
        ) from None


def _of_decompressed(byte_range: ByteRange) -> str:
    return " of the decompressed data" if byte_range.file.compression else ""


def count_range_to_shard(
    byte_range: ByteRange,
    settings: CountSettings,
    shard_dir: str,
    storage_options: dict | None = None,
) -> Shard:
    """Count one range and write its shard, or reuse the shard a previous run finished.

    A failure that may be transient (a dropped connection, say) is retried in place.
    """
    return retrying(_count_range_to_shard, byte_range, settings, shard_dir, storage_options)


def _count_range_to_shard(
    byte_range: ByteRange, settings: CountSettings, shard_dir: str, storage_options: dict | None
) -> Shard:
    path = shard_path(shard_dir, byte_range, settings)
    fs, fs_path = filesystem(path, storage_options)
    if fs.exists(fs_path):
        with fs.open(fs_path, "rb") as f:
            return Shard(path, pq.ParquetFile(f).metadata.num_rows, reused=True)
    table = counts_table(count_range(byte_range, settings, storage_options))
    formats.write_parquet_atomically(table, path, storage_options)
    return Shard(path, table.num_rows, reused=False)


def counts_table(counts: Mapping[str, int]) -> pa.Table:
    """Word counts as the shard schema: UTF-8 pre-token bytes and their counts."""
    return pa.table(
        {
            "token": pa.array([word.encode("utf-8") for word in counts], pa.binary()),
            "count": pa.array(list(counts.values()), pa.int64()),
        },
        schema=formats.COUNTS_SCHEMA,
    )
