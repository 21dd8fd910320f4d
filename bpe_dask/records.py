"""Reading records: one partition of a JSON Lines or Parquet file in, its documents' texts out.

Takes a ``ByteRange`` of a JSON Lines file (whole lines: the planner cuts after newlines) or a
``RowGroups`` of a Parquet file, and gives the text of each record (the ``--text-column`` field or
column) in batches of about ``batch_bytes``, so memory stays bounded whatever the file's size.
Parquet is read a batch of rows at a time, and only the text column. A bad record (a line that is
not a JSON object, a missing field, a value that is not a string, a null) stops the job with one
line naming the file and the row or byte offset, or, with ``on_bad_record="skip"``, is counted in
``BadRecords`` and left out. Each document stands alone: pre-tokens never cross records.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from .blocks import BLOCK_SIZE, open_range, read_range
from .errors import InputError
from .plan import ByteRange, Partition, RowGroups, text_column_index
from .storage import describe, filesystem

PARQUET_BATCH_ROWS = 8192


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


def iter_documents(
    part: Partition,
    storage_options: dict | None = None,
    *,
    utf8_errors: str = "strict",
    bad: BadRecords | None = None,
    batch_bytes: int = BLOCK_SIZE,
) -> Iterator[list[str]]:
    """The texts of the partition's records, in order, in batches of about ``batch_bytes``."""
    bad = BadRecords() if bad is None else bad
    if isinstance(part, RowGroups):
        return _parquet_documents(part, storage_options, utf8_errors, bad)
    return _jsonl_documents(part, storage_options, utf8_errors, bad, batch_bytes)


def _jsonl_documents(
    part: ByteRange, storage_options: dict | None, utf8_errors: str, bad: BadRecords, batch_bytes: int
) -> Iterator[list[str]]:
    reading = part.file.reading
    batch: list[str] = []
    size = 0
    for offset, line in _lines(part, storage_options, batch_bytes):
        if not line.strip():
            continue  # a blank line (the last newline of a file, say) holds no record
        text = _record_text(line, reading.text_column, utf8_errors)
        if not isinstance(text, _Bad):
            batch.append(text)
            size += len(line)
            if size >= batch_bytes:
                yield batch
                batch, size = [], 0
            continue
        where = f"{part.file.name}: the line at byte offset {offset}{_of_decompressed(part)}"
        if reading.on_bad_record == "error":
            raise InputError(f"{where}: {text} (--on-bad-record skip leaves such records out)")
        bad.add(f"{where}: {text}")
    if batch:
        yield batch


def _lines(part: ByteRange, storage_options: dict | None, batch_bytes: int) -> Iterator[tuple[int, bytes]]:
    """The range's lines (newline dropped) and the byte offset where each starts."""
    with open_range(part, storage_options) as (stream, remaining):
        offset = part.start
        held = b""
        while True:
            block = read_range(
                stream, batch_bytes if remaining is None else min(batch_bytes, remaining), part
            )
            if remaining is not None:
                remaining -= len(block)
            if not block:
                if held:
                    yield offset, held
                return
            lines = (held + block).split(b"\n")
            held = lines.pop()
            for line in lines:
                yield offset, line
                offset += len(line) + 1


def _record_text(line: bytes, field: str, utf8_errors: str) -> str:
    """The record's text, or, for a bad record, what is wrong with it (a ``_Bad`` string)."""
    try:
        data = line.decode("utf-8", utf8_errors)
    except UnicodeDecodeError as error:
        return _Bad(
            f"invalid UTF-8 at byte {error.start} of the line (--utf8-errors replace substitutes U+FFFD)"
        )
    try:
        record = json.loads(data)
    except json.JSONDecodeError as error:
        return _Bad(f"not valid JSON ({error.msg}, column {error.colno})")
    if not isinstance(record, dict):
        return _Bad(f"not a JSON object but {_json_kind(record)}")
    if field not in record:
        return _Bad(f"no field {field!r}")
    text = record[field]
    if not isinstance(text, str):
        return _Bad(f"field {field!r} holds {_json_kind(text)}, not a string")
    return _valid_unicode(text, utf8_errors)


class _Bad(str):
    """What is wrong with a record: a string the reader tells apart from a document's text."""


def _valid_unicode(text: str, utf8_errors: str) -> str:
    """JSON's ``\\ud800`` escapes give lone surrogates, which are not text: an error, or U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        if utf8_errors == "strict":
            return _Bad(
                "text holding a lone surrogate (an escape such as \\ud800), which is not valid Unicode"
            )
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def _json_kind(value: object) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}  # fmt: skip
    return kinds.get(type(value), type(value).__name__)


def _of_decompressed(part: ByteRange) -> str:
    return " of the decompressed data" if part.file.compression else ""


def _parquet_documents(
    part: RowGroups, storage_options: dict | None, utf8_errors: str, bad: BadRecords
) -> Iterator[list[str]]:
    reading = part.file.reading
    fs, path = filesystem(part.file.url, storage_options)
    try:
        f = fs.open(path, "rb")
    except Exception as error:
        raise InputError(f"cannot read {part.file.name}: {describe(error)}") from None
    with f:
        parquet = pq.ParquetFile(f)
        text_column_index(part.file, parquet.schema_arrow)  # the file may have changed since planning
        row = part.first_row
        if part.start == part.end:
            return
        batches = parquet.iter_batches(
            PARQUET_BATCH_ROWS, row_groups=range(part.start, part.end), columns=[reading.text_column]
        )
        while True:
            try:
                batch = next(batches, None)
            except Exception as error:  # a truncated or corrupt file
                raise InputError(f"cannot read {part.file.name}: {describe(error)}") from None
            if batch is None:
                return
            yield _column_texts(batch.column(0), part, row, utf8_errors, bad)
            row += batch.num_rows


def _column_texts(
    column: pa.Array, part: RowGroups, first_row: int, utf8_errors: str, bad: BadRecords
) -> list[str]:
    """The batch's texts; a null is a bad record (Parquet strings are UTF-8, checked by the decode)."""
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
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
        where = f"{part.file.name}: row {first_row + i} ({part.file.reading.text_column!r} column)"
        if part.file.reading.on_bad_record == "error":
            raise InputError(f"{where}: {problem} (--on-bad-record skip leaves such records out)")
        bad.add(f"{where}: {problem}")
    return texts
