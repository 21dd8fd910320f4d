"""Reading records: one partition of a JSON Lines or Parquet file in, its documents out.

Takes a ``ByteRange`` of a JSON Lines file (whole lines: the planner cuts after newlines) or a
``RowGroups`` of a Parquet file, and gives the text of each record (the ``--text-column`` field or
column) as ``Documents``, batches of about ``batch_bytes``, so memory stays bounded whatever the
file's size. Parquet is read a batch of rows at a time, and only the text column; a batch of valid
text with no nulls goes on as Arrow's own buffers, with no Python object per document. A bad
record (a line that is not a JSON object, a missing field, a value that is not a string, a null)
stops the job with one line naming the file and the row or byte offset, or, with
``on_bad_record="skip"``, is counted in ``BadRecords`` and left out. Each document stands alone:
pre-tokens never cross records.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bpe_dask.errors import BpeDaskError, InputError, TransientError
from bpe_dask.io.inputs import text_column_index
from bpe_dask.io.plan import ByteRange, Partition, RowGroups
from bpe_dask.io.retries import is_transient
from bpe_dask.io.storage import LOCAL, Store, describe
from bpe_dask.io.text import ReadProgress, open_range, read_range
from bpe_dask.rules.special_tokens import valid_text

MAX_LINE = 1 << 28  # a JSON Lines record this long is more likely a file that is not JSON Lines


@dataclass
class BadRecords:
    """The records ``on_bad_record="skip"`` left out: how many, and the first, described."""

    count: int = 0
    first: str | None = None

    def add(self, description: str) -> None:
        self.count += 1
        self.first = self.first or description

    def merge(self, other: BadRecords) -> None:
        self.count += other.count
        self.first = self.first or other.first


@dataclass(frozen=True)
class Documents:
    """A batch of documents: their UTF-8 bytes back to back, the ``k``-th ending at ``ends[k]``."""

    data: bytes
    ends: np.ndarray

    @classmethod
    def of(cls, texts: list[str]) -> Documents:
        return cls.joined([text.encode("utf-8") for text in texts])

    @classmethod
    def joined(cls, encoded: list[bytes]) -> Documents:
        """The documents of UTF-8 ``encoded`` (one alone is not copied)."""
        return cls(b"".join(encoded), np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded))))

    def __len__(self) -> int:
        return len(self.ends)

    def texts(self) -> list[str]:
        starts_ends = pairwise([0, *self.ends.tolist()])
        return [self.data[a:b].decode("utf-8") for a, b in starts_ends]


def iter_documents(part: Partition, store: Store = LOCAL, *, utf8_errors: str = "strict",
                   bad: BadRecords | None = None, batch_bytes: int | None = None,
                   progress: ReadProgress | None = None) -> Iterator[Documents]:  # fmt: skip
    """The texts of the partition's records, in order, in batches of about ``batch_bytes`` (by
    default the setting ``bpe-dask.block-size`` of ``store``); ``progress`` hears how far it has read
    (of a Parquet partition, its share of the partition's bytes by the text read)."""
    bad = BadRecords() if bad is None else bad
    batch_bytes = batch_bytes or store.size("block-size")
    progress = progress or _no_progress
    if isinstance(part, RowGroups):
        return _parquet_documents(part, store, utf8_errors, bad, batch_bytes, progress)
    return _jsonl_documents(part, store, utf8_errors, bad, batch_bytes, progress)


def _no_progress(done: int, documents: int = 0, last: bool = False) -> None:
    pass


def _jsonl_documents(
    part: ByteRange, store: Store, utf8_errors: str, bad: BadRecords, batch_bytes: int, progress: ReadProgress
) -> Iterator[Documents]:
    reading = part.file.reading
    batch: list[bytes] = []
    size = records = 0  # records: read so far, for ``progress``

    def read(done: int, last: bool = False) -> None:
        progress(done, records, last)

    for offset, line in _lines(part, store, batch_bytes, read):
        if offset == 0 and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]  # a UTF-8 byte order mark (Windows tools write one): not JSON, no text
        if not line.strip():
            continue  # a blank line (the last newline of a file, say) holds no record
        length, held = len(line), [line]
        del line  # a long record's line, its text and the text's UTF-8 are held one or two at a time
        try:
            batch.append(_record_text(held, reading.text_column, utf8_errors))
        except _BadRecord as problem:
            where = f"{part.file.name}: the line at byte offset {offset}{_of_decompressed(part)}"
            if reading.on_bad_record == "error":
                raise InputError(
                    f"{where}: {problem} (--on-bad-record skip leaves such records out)"
                ) from None
            bad.add(f"{where}: {problem}")
            continue
        records += 1
        size += length
        if size >= batch_bytes:
            documents, batch, size = Documents.joined(batch), [], 0
            yield documents
    if batch:
        yield Documents.joined(batch)


def _lines(
    part: ByteRange, store: Store, batch_bytes: int, read: Callable[[int, bool], None]
) -> Iterator[tuple[int, bytes]]:
    """The range's lines (newline dropped) and the byte offset where each starts. A line is held
    only until its newline comes, and never beyond ``MAX_LINE`` bytes. ``read`` hears how many bytes
    have been read before each read, and at the end."""
    with open_range(part, store) as (stream, remaining, consumed):
        offset = part.start
        held: list[bytes] = []  # the start of a line whose newline has not come yet
        held_size = 0
        while True:
            read(consumed(), False)
            block = read_range(
                stream, batch_bytes if remaining is None else min(batch_bytes, remaining), part
            )
            if remaining is not None:
                remaining -= len(block)
            if not block:
                if held:
                    yield offset, b"".join(held)
                read(consumed(), True)
                return
            if b"\n" not in block:  # still inside one line: look at the new bytes only
                held.append(block)
                held_size += len(block)
                if held_size > MAX_LINE:
                    where = f"{part.file.name}: the line at byte offset {offset}{_of_decompressed(part)}"
                    raise InputError(f"{where} is longer than {MAX_LINE:,} bytes: not JSON Lines?")
                continue
            lines = block.split(b"\n")
            lines[0] = b"".join([*held, lines[0]])
            last = lines.pop()
            held, held_size = [last], len(last)
            lines.reverse()
            while lines:  # each line let go of once given out
                start, offset = offset, offset + len(lines[-1]) + 1
                yield start, lines.pop()


def _record_text(held: list[bytes], field: str, utf8_errors: str) -> bytes:
    """The UTF-8 of the text of the record whose line ``held`` holds (let go of once decoded); a
    ``_BadRecord`` says what is wrong with a bad one."""
    line = held.pop()
    try:
        data = line.decode("utf-8", utf8_errors)
    except UnicodeDecodeError as error:
        raise _BadRecord(
            f"invalid UTF-8 at byte {error.start} of the line (--utf8-errors replace substitutes U+FFFD)"
        ) from None
    del line
    try:
        record = json.loads(data, parse_int=float)  # numbers are not read, only skipped: no digit limit
    except json.JSONDecodeError as error:
        raise _BadRecord(f"not valid JSON ({error.msg}, column {error.colno})") from None
    except (ValueError, RecursionError) as error:  # nested too deep, say
        raise _BadRecord(f"not JSON that can be read ({type(error).__name__})") from None
    del data
    if not isinstance(record, dict):
        raise _BadRecord(f"not a JSON object but {_json_kind(record)}")
    if field not in record:
        raise _BadRecord(f"no field {field!r}")
    text = record[field]
    if not isinstance(text, str):
        raise _BadRecord(f"field {field!r} holds {_json_kind(text)}, not a string")
    return _utf8(text, utf8_errors)


class _BadRecord(Exception):
    """What is wrong with a record (the reader stops at it, or skips it)."""


def _utf8(text: str, utf8_errors: str) -> bytes:
    """The text's UTF-8. JSON's ``\\ud800`` escapes give lone surrogates, which are not text: an
    error, or U+FFFD, one for each, as the tokenizer encodes such text (``valid_text``, tiktoken's
    rule): training and encoding see the same text."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        if utf8_errors == "strict":
            raise _BadRecord(
                "text holding a lone surrogate (an escape such as \\ud800), which is not valid Unicode"
            ) from None
        return valid_text(text).encode("utf-8")


def _json_kind(value: object) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}  # fmt: skip
    return kinds.get(type(value), type(value).__name__)


def _of_decompressed(part: ByteRange) -> str:
    return " of the decompressed data" if part.file.compression else ""


def _parquet_documents(
    part: RowGroups, store: Store, utf8_errors: str, bad: BadRecords, batch_bytes: int, progress: ReadProgress
) -> Iterator[Documents]:
    reading = part.file.reading
    fs, path = store.fs(part.file.url)
    try:
        f = fs.open(path, "rb")
    except Exception as error:
        raise _failure(error)(f"cannot read {part.file.name}: {describe(error)}") from None
    with f:
        try:  # the file may have changed since planning; reading it again would not help
            parquet = pq.ParquetFile(f)
            text_column_index(part.file, parquet.schema_arrow)
        except BpeDaskError as error:
            raise InputError(str(error)) from None
        except Exception as error:
            raise _failure(error)(f"cannot read {part.file.name} as Parquet: {describe(error)}") from None
        row = part.first_row
        if part.start == part.end:
            return
        text = documents = 0  # read so far: the partition's share of its bytes is that of its text
        rows_per_batch = max(1, batch_bytes * part.rows // max(1, part.text_bytes))
        batches = parquet.iter_batches(
            rows_per_batch, row_groups=range(part.start, part.end), columns=[reading.text_column]
        )
        while True:
            try:
                batch = next(batches, None)
            except Exception as error:  # a truncated or corrupt file, or a dropped connection
                raise _failure(error)(f"cannot read {part.file.name}: {describe(error)}") from None
            if batch is None:
                progress(part.size, documents, True)
                return
            read = _column_documents(batch.column(0), part, row, utf8_errors, bad)
            text, documents = text + len(read.data), documents + len(read)
            yield read
            row += batch.num_rows
            progress(min(part.size, part.size * text // max(1, part.text_bytes)), documents)


def _failure(error: Exception) -> type[BpeDaskError]:
    """The kind of error a failed Parquet read is: one that may pass (a dropped connection, a web
    server's 503: tried again, ``io.retries``), or one of the file (corrupt, gone, changed)."""
    return TransientError if is_transient(error) else InputError


def _column_documents(
    column: pa.Array, part: RowGroups, first_row: int, utf8_errors: str, bad: BadRecords
) -> Documents:
    name, field = part.file.name, part.file.reading.text_column
    return column_documents(column, utf8_errors, bad, part.file.reading.on_bad_record,
                            lambda i: f"{name}: row {first_row + i} ({field!r} column)")  # fmt: skip


def column_documents(
    column: pa.Array, utf8_errors: str, bad: BadRecords, on_bad_record: str, where: Callable[[int], str]
) -> Documents:
    """A column of text (string, large_string, string_view, binary, dictionary-encoded) as documents.
    pyarrow reads a string column without checking its UTF-8: check it, and where it is invalid or
    holds nulls, go row by row; a null or invalid UTF-8 is a bad record, named by ``where(row)``."""
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if column.null_count and on_bad_record == "skip" and _valid_utf8(kept := column.drop_null()):
        for row in np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False)).tolist():
            bad.add(f"{where(row)}: null")  # and the rest from the buffers, as if there were none
        column = kept
    if column.null_count == 0 and _valid_utf8(column):
        text = column.cast(pa.large_binary())
        _, offsets, data = text.buffers()
        offsets = np.frombuffer(offsets, np.int64)[text.offset : text.offset + len(text) + 1]
        data = b"" if data is None else bytes(memoryview(data)[offsets[0] : offsets[-1]])
        return Documents(data, offsets[1:] - offsets[0])
    return Documents.of(_column_texts(column, utf8_errors, bad, on_bad_record, where))


def _valid_utf8(column: pa.Array) -> bool:
    try:
        if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            column.cast(pa.large_string())  # checks the UTF-8
        else:
            column.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _column_texts(
    column: pa.Array, utf8_errors: str, bad: BadRecords, on_bad_record: str, where: Callable[[int], str]
) -> list[str]:
    """The batch's texts, row by row: a null or invalid UTF-8 is a bad record."""
    texts = []
    for i, value in enumerate(column.cast(pa.large_binary()).to_pylist()):
        problem = None
        if value is None:
            problem = "null"
        else:
            try:
                texts.append(value.decode("utf-8", utf8_errors))
                continue
            except UnicodeDecodeError as error:
                problem = f"invalid UTF-8 at byte {error.start} (--utf8-errors replace substitutes U+FFFD)"
        if on_bad_record == "error":
            raise InputError(f"{where(i)}: {problem} (--on-bad-record skip leaves such records out)")
        bad.add(f"{where(i)}: {problem}")
    return texts
