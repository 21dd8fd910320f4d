"""Reading a range: one ``ByteRange`` in, its text out in blocks cut at safe places.

Takes a byte range, the job's ``Pretokenizer`` and how to treat invalid UTF-8; streams the range
through fsspec (decompressing on the fly), decodes it, and gives text blocks of about
``block_size`` bytes that end at safe cuts, so pre-tokenizing or encoding the blocks one by one
gives exactly what the whole range gives, in bounded memory. Both map stages read this way:
counting (``stages.count``) and encoding (``stages.encode``); the compiled counter reads the same blocks as
UTF-8 bytes (``iter_utf8``), checked but never decoded whole. A ``progress`` callable, when given,
hears how many of the range's bytes have been read before each read (``ReadProgress``).
"""

from __future__ import annotations

import codecs
import gzip
import lzma
import zlib
from collections.abc import Iterator
from typing import Protocol

import numpy as np
from fsspec.compression import compr

from bpe_dask.errors import BpeDaskError, InputError, TransientError
from bpe_dask.io.plan import ByteRange
from bpe_dask.io.retries import is_transient
from bpe_dask.io.storage import LOCAL, Store, describe
from bpe_dask.io.web import is_http
from bpe_dask.rules.cuts import character_start
from bpe_dask.rules.pretokenize import NoCutError, Pretokenizer, SplitPattern

UTF8_ERRORS = ("strict", "replace")


class ReadProgress(Protocol):
    """Told, as a partition is read, how many of its bytes have been read (in the file's own bytes:
    the compressed ones of a compressed file) and how many documents (records), before each read, so
    what was read before has been handed on; ``last`` once the partition is read."""

    def __call__(self, done: int, documents: int = 0, last: bool = False) -> None: ...


def check_utf8_errors(value: object) -> str:
    """``value`` if it names a way to treat invalid UTF-8 (stop, or read it as U+FFFD)."""
    if value not in UTF8_ERRORS:
        raise BpeDaskError(f"invalid UTF-8 handling must be strict or replace, got {value!r}")
    return value


def iter_texts(
    byte_range: ByteRange,
    pretokenizer: Pretokenizer,
    store: Store = LOCAL,
    *,
    utf8_errors: str = "strict",
    block_size: int | None = None,
    max_uncut: int | None = None,
    progress: ReadProgress | None = None,
) -> Iterator[str]:
    """The range's text in blocks of about ``block_size`` bytes, each ending at a safe cut.

    Memory stays within a few times ``block_size + max_uncut``: more than ``max_uncut``
    characters without a safe cut is an error naming the file and offset.

    With ``utf8_errors="replace"`` the bytes are first decoded with ``surrogateescape``, cut there,
    and each block then turned into what decoding with ``replace`` gives: the range decoded with
    ``replace``, at exact byte offsets (docs/exactness.md#long-texts-and-documents). ``block_size``
    and ``max_uncut`` default to the settings
    ``bpe-dask.block-size`` and ``bpe-dask.uncut-limit`` of ``store``.
    """
    block_size = block_size or store.size("block-size")
    # Text with no safe cut for this long is one giant pre-token (a run of letters, digits,
    # punctuation or whitespace): the task stops rather than let its memory grow unbounded.
    max_uncut = max_uncut or store.size("uncut-limit")
    decoded = _decoded(byte_range, store, utf8_errors, block_size, progress)
    offset = byte_range.start  # where the text not yet given out starts, in the file's bytes
    try:
        for text in pretokenizer.recut(decoded, limit=max_uncut):
            data = text.encode("utf-8", "surrogateescape")
            yield data.decode("utf-8", "replace") if utf8_errors == "replace" else text
            offset += len(data)
    except NoCutError:
        raise _uncut_error(byte_range, offset, max_uncut, pretokenizer.pattern) from None


CUT_WINDOW = 1 << 16  # bytes before a block's end decoded to find its last cut (usually within a few)


def iter_utf8(
    byte_range: ByteRange,
    pretokenizer: Pretokenizer,
    store: Store = LOCAL,
    *,
    block_size: int | None = None,
    max_uncut: int | None = None,
    progress: ReadProgress | None = None,
) -> Iterator[bytes]:
    """``iter_texts``'s blocks as UTF-8 bytes, invalid UTF-8 an error (``utf8_errors="strict"``): for
    the compiled engines, whose scanners take bytes. The bytes are checked where they are
    (``compiled.utf8``, which releases the GIL) and cut where they are; only a window before each
    block's end is decoded, to find the last safe cut in it. Decoding each block whole and encoding
    it back held the GIL for about a quarter of a compiled map task's time, which threads sharing a
    process then took turns at. The same blocks ``iter_texts`` gives, as the tests check."""
    from bpe_dask.compiled.utf8 import check_utf8

    block_size = block_size or store.size("block-size")
    max_uncut = max_uncut or store.size("uncut-limit")
    held = b""  # checked, whole characters, not yet given out
    partial = b""  # the start of a character the last read cut off
    judged = 0  # every position of ``held`` before this byte has been judged no cut
    offset = byte_range.start  # where ``held`` starts, in the file's bytes
    for block in read_blocks(byte_range, store, block_size, progress):
        data = partial + block
        invalid, complete = check_utf8(np.frombuffer(data, np.uint8))
        if invalid >= 0 or (not block and complete < len(data)):  # or a character the end cut off
            raise _decode_error(byte_range, offset + len(held) + (invalid if invalid >= 0 else complete))
        held, partial = held + data[:complete], data[complete:]
        if not block:
            break
        cut, judged = _last_cut(held, judged, pretokenizer)
        if cut is None:
            if len(held) > max_uncut and _characters_in(held) > max_uncut:
                raise _uncut_error(byte_range, offset, max_uncut, pretokenizer.pattern)
            continue
        yield held[:cut]
        held, offset, judged = held[cut:], offset + cut, judged - cut
    if held:
        yield held


def _last_cut(held: bytes, judged: int, cuts: Pretokenizer) -> tuple[int | None, int]:
    """The last safe cut in the UTF-8 ``held`` from byte ``judged`` on (before it, every position has
    been judged), as ``SafeCuts.recut`` finds it in text, and the byte it has judged up to now. Its
    last ``CUT_WINDOW`` bytes are decoded first: the last cut is nearly always in them."""
    context = cuts.context
    window = character_start(held, max(0, len(held) - CUT_WINDOW))
    if window > judged:
        text = held[window:].decode("utf-8")
        # A cut at p sees ``context`` characters on each side: room before the window's first
        # candidate, and after its last (``hi``).
        hi = len(text) - context + 1
        cut = cuts.last_cut(text, context, hi) if hi > context else None
        if cut is not None:
            return window + len(text[:cut].encode("utf-8")), window + len(text[:hi].encode("utf-8"))
    start = character_start(held, max(0, judged - 4 * context - 4))  # ``context`` characters before it
    text = held[start:].decode("utf-8")
    lo, hi = max(1, len(held[start:judged].decode("utf-8"))), len(text) - context + 1
    if hi <= lo:
        return None, judged
    cut = cuts.last_cut(text, lo, hi)
    reach = start + len(text[:hi].encode("utf-8"))
    return (None if cut is None else start + len(text[:cut].encode("utf-8"))), reach


def _characters_in(data: bytes) -> int:
    """How many characters the UTF-8 ``data`` holds: its bytes that are not continuation bytes."""
    return int(np.count_nonzero((np.frombuffer(data, np.uint8) & 0xC0) != 0x80))


def _decoded(
    byte_range: ByteRange, store: Store, utf8_errors: str, block_size: int, progress: ReadProgress | None
) -> Iterator[str]:
    """The range's bytes decoded as UTF-8, a block at a time (a character may span two blocks)."""
    decoder = codecs.getincrementaldecoder("utf-8")(
        "strict" if utf8_errors == "strict" else "surrogateescape"
    )
    offset = byte_range.start  # of the next byte read
    for block in read_blocks(byte_range, store, block_size, progress):
        held = len(decoder.getstate()[0])  # the start of a character cut off by the last block
        try:
            yield decoder.decode(block, final=not block)
        except UnicodeDecodeError as error:
            raise _decode_error(byte_range, offset - held + error.start) from None
        offset += len(block)


def read_blocks(
    byte_range: ByteRange,
    store: Store,
    block_size: int,
    progress: ReadProgress | None = None,
    last: bool = False,
) -> Iterator[bytes]:
    """The range's bytes, streamed (decompressed on the fly), ``block_size`` at a time (fewer only at
    the end), the last block empty. ``progress`` is told before each read (and, with ``last``, once
    more after the last) how many of the file's own bytes have been read: of a compressed file, the
    compressed ones the decompressor took, so a one-task ``.gz`` shows how far it has got in the unit
    its size is in. A store or a corrupt archive failing says which file it was."""
    file = byte_range.file
    fs, path = store.fs(file.url)
    compression = file.compression
    try:
        if is_http(file.url):
            # A whole file is one GET, streamed (fsspec's ``HTTPStreamFile``, which never seeks: the
            # only way to read a server that serves no byte ranges, whose files the planner never
            # cuts); a range is one ranged GET per read, of just what the read asks for (no cache).
            whole = byte_range.start == 0 and byte_range.end == file.size
            how = {"block_size": 0} if whole or compression else {"cache_type": "none"}
            raw = fs.open(path, "rb", size=file.size or None, **how)
        else:
            raw = fs.open(path, "rb")  # then decompressed as ``fs.open(path, compression=...)`` would
        if not compression:
            raw.seek(byte_range.start)
        stream = compr[compression](raw, mode="rb") if compression else raw
    except Exception as error:
        raise _read_error(byte_range, error) from None
    start = 0 if compression else byte_range.start
    remaining = None if compression or not file.sized else byte_range.size  # None: to the end
    with raw, stream:
        while True:
            if progress is not None:
                progress(raw.tell() - start)
            size = block_size if remaining is None else min(block_size, remaining)
            try:
                block = stream.read(size)
                if 0 < len(block) < size:  # a stream from a web server gives what has arrived: read on
                    parts, wanted = [block], size - len(block)
                    while wanted > 0 and (more := stream.read(wanted)):
                        parts.append(more)
                        wanted -= len(more)
                    block = b"".join(parts)
            except Exception as error:  # a broken connection, a truncated or mislabelled archive, ...
                raise _read_error(byte_range, error) from None
            if remaining is not None:
                remaining -= len(block)
            yield block
            if not block:
                if last and progress is not None:
                    progress(raw.tell() - start, last=True)
                return


# Failures that reading again cannot fix: the file is gone or forbidden, or the archive is corrupt.
_LASTING = (
    FileNotFoundError,
    PermissionError,
    IsADirectoryError,
    EOFError,
    zlib.error,
    lzma.LZMAError,
    gzip.BadGzipFile,
)


def _read_error(byte_range: ByteRange, error: Exception) -> BpeDaskError:
    lasting = isinstance(error, _LASTING) or (
        byte_range.file.compression is not None
        and (type(error).__name__ == "ZstdError" or "Invalid data stream" in str(error))  # zstandard, bz2
    )
    # Only what may be transient is retried (io.retries): a dropped connection, not a bug.
    kind = InputError if lasting else TransientError if is_transient(error) else BpeDaskError
    return kind(f"cannot read {byte_range.file.name}: {describe(error)}")


def _uncut_error(byte_range: ByteRange, offset: int, max_uncut: int, pattern: SplitPattern) -> InputError:
    limit = f"{max_uncut // 2**20} Mi" if max_uncut % 2**20 == 0 else f"{max_uncut:,}"
    where = (
        f"{byte_range.file.name}: no place to split the text in the {limit} characters "
        f"after byte offset {offset}{of_decompressed(byte_range)}"
    )
    if pattern.cut_rule is None:  # only special tokens cut the text
        return InputError(
            f"{where} (no special token; a split pattern of your own is cut only there): "
            "put special tokens between documents, or use a built-in pattern"
        )
    return InputError(
        f"{where} (no special token, and nowhere the {pattern.name} pattern may be cut: a run of letters, "
        "of digits, of punctuation or of whitespace): a single pre-token that long cannot be counted"
    )


def _decode_error(byte_range: ByteRange, offset: int) -> InputError:
    return InputError(
        f"{byte_range.file.name}: invalid UTF-8 at byte offset {offset}{of_decompressed(byte_range)} "
        '(utf8_errors="replace" substitutes U+FFFD)'
    )


def of_decompressed(byte_range: ByteRange) -> str:
    """Where an offset counts in, said after it: a compressed file's are of its decompressed data."""
    return " of the decompressed data" if byte_range.file.compression else ""
