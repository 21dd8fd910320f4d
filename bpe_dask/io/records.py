"""Reading records: one partition of a JSON Lines or Parquet file in, its documents out.

Takes a ``ByteRange`` of a JSON Lines file (whole lines: the planner cuts after newlines) or a
``RowGroups`` of a Parquet file, and gives the text of each record (the ``--text-column`` field or
column) as ``Documents``, batches of about ``batch_bytes``, so memory stays bounded whatever the
file's size. Parquet is read a batch of rows at a time, and only the text column; a batch of valid
text with no nulls goes on as Arrow's own buffers, with no Python object per document. A bad
record (a line that is not a JSON object, a missing field, a value that is not a string, a null)
stops the job with one line naming the file and the row or byte offset, or, with
``on_bad_record="skip"``, is counted in ``BadRecords`` and left out (``documents``' rule, as for
every source). Each document stands alone: pre-tokens never cross records.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from functools import partial

import pyarrow as pa
import pyarrow.parquet as pq

from bpe_dask.errors import BpeDaskError, InputError, TransientError
from bpe_dask.io.documents import BadRecords, Documents, NotText, RecordPolicy, column_documents, utf8_of
from bpe_dask.io.inputs import text_column_index
from bpe_dask.io.plan import ByteRange, Partition, RowGroups
from bpe_dask.io.retries import is_transient
from bpe_dask.io.storage import LOCAL, Store, describe
from bpe_dask.io.text import ReadProgress, of_decompressed, read_blocks
from bpe_dask.io.web import read_whole

MAX_LINE = 1 << 28  # a JSON Lines record this long is more likely a file that is not JSON Lines


def iter_documents(
    part: Partition,
    store: Store = LOCAL,
    *,
    utf8_errors: str = "strict",
    bad: BadRecords | None = None,
    batch_bytes: int | None = None,
    progress: ReadProgress | None = None,
) -> Iterator[Documents]:
    """The texts of the partition's records, in order, in batches of about ``batch_bytes`` (by
    default the setting ``bpe-dask.block-size`` of ``store``); ``progress`` hears how far it has read
    (of a Parquet partition, its share of the partition's bytes by the text read)."""
    bad = BadRecords() if bad is None else bad
    batch_bytes = batch_bytes or store.size("block-size")
    policy = RecordPolicy(part.file.reading.on_bad_record, utf8_errors)
    read = _parquet_documents if isinstance(part, RowGroups) else _jsonl_documents
    return read(part, store, policy, bad, batch_bytes, progress or _no_progress)


def _no_progress(done: int, documents: int = 0, last: bool = False) -> None:
    pass


def _jsonl_documents(
    part: ByteRange,
    store: Store,
    policy: RecordPolicy,
    bad: BadRecords,
    batch_bytes: int,
    progress: ReadProgress,
) -> Iterator[Documents]:
    batch: list[bytes] = []
    size = records = 0  # records: read so far, for ``progress``

    def read(done: int, documents: int = 0, last: bool = False) -> None:
        progress(done, records, last)

    for offset, line in _lines(part, read_blocks(part, store, batch_bytes, read, last=True)):
        if offset == 0 and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]  # a UTF-8 byte order mark (Windows tools write one): not JSON, no text
        if not line.strip():
            continue  # a blank line (the last newline of a file, say) holds no record
        length, held = len(line), [line]
        del line  # a long record's line, its text and the text's UTF-8 are held one or two at a time
        try:
            batch.append(_record_text(held, part.file.reading.text_column, policy))
        except NotText as problem:
            where = f"{part.file.name}: the line at byte offset {offset}{of_decompressed(part)}"
            policy.handle(where, problem, bad)
            continue
        records += 1
        size += length
        if size >= batch_bytes:
            documents, batch, size = Documents.joined(batch), [], 0
            yield documents
    if batch:
        yield Documents.joined(batch)


def _lines(part: ByteRange, blocks: Iterator[bytes]) -> Iterator[tuple[int, bytes]]:
    """The lines of the range's ``blocks`` (newline dropped) and the byte offset where each starts. A
    line is held only until its newline comes, and never beyond ``MAX_LINE`` bytes."""
    offset = part.start
    held: list[bytes] = []  # the start of a line whose newline has not come yet
    held_size = 0
    for block in blocks:
        if not block:  # the end
            if held:
                yield offset, b"".join(held)
        elif b"\n" not in block:  # still inside one line: look at the new bytes only
            held.append(block)
            held_size += len(block)
            if held_size > MAX_LINE:
                where = f"{part.file.name}: the line at byte offset {offset}{of_decompressed(part)}"
                raise InputError(f"{where} is longer than {MAX_LINE:,} bytes: not JSON Lines?")
        else:
            lines = block.split(b"\n")
            lines[0] = b"".join([*held, lines[0]])
            last = lines.pop()
            held, held_size = [last], len(last)
            lines.reverse()
            while lines:  # each line let go of once given out
                start, offset = offset, offset + len(lines[-1]) + 1
                yield start, lines.pop()


def _record_text(held: list[bytes], field: str, policy: RecordPolicy) -> bytes:
    """The UTF-8 of the text of the record whose line ``held`` holds (let go of once decoded); a
    ``NotText`` says what is wrong with a bad one."""
    line = held.pop()
    try:
        data = line.decode("utf-8", policy.utf8_errors)
    except UnicodeDecodeError as error:
        raise NotText(f"invalid UTF-8 at byte {error.start} of the line", True) from None
    del line
    try:
        record = json.loads(data, parse_int=float)  # numbers are not read, only skipped: no digit limit
    except json.JSONDecodeError as error:
        raise NotText(f"not valid JSON ({error.msg}, column {error.colno})") from None
    except (ValueError, RecursionError) as error:  # nested too deep, say
        raise NotText(f"not JSON that can be read ({type(error).__name__})") from None
    del data
    if not isinstance(record, dict):
        raise NotText(f"not a JSON object but {_json_kind(record)}")
    if field not in record:
        raise NotText(f"no field {field!r}", no_field=True)
    text = record[field]
    if not isinstance(text, str):
        raise NotText(f"field {field!r} holds {_json_kind(text)}, not a string")
    return utf8_of(text, policy)  # JSON's "\ud800" escape gives a lone surrogate: not text


def _json_kind(value: object) -> str:
    kinds = {
        dict: "an object",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        float: "a number",  # every number: json.loads reads them with parse_int=float
        type(None): "null",
    }
    return kinds.get(type(value), type(value).__name__)


def _parquet_documents(
    part: RowGroups,
    store: Store,
    policy: RecordPolicy,
    bad: BadRecords,
    batch_bytes: int,
    progress: ReadProgress,
) -> Iterator[Documents]:
    fs, path = store.fs(part.file.url)
    try:
        if part.whole:  # a web server without byte ranges: the whole file, in one request
            downloaded = read_whole(fs, path, store.size("whole-file-limit"), part.file.name)
            if not part.file.sized:  # its size, known now: what progress and the report count
                part = replace(part, size=len(downloaded))
            f = pa.BufferReader(downloaded)
        else:
            f = fs.open(path, "rb")
    except BpeDaskError as error:
        raise InputError(str(error)) from None
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
            rows_per_batch, row_groups=range(part.start, part.end), columns=[part.file.reading.text_column]
        )
        while True:
            try:
                batch = next(batches, None)
            except Exception as error:  # a truncated or corrupt file, or a dropped connection
                raise _failure(error)(f"cannot read {part.file.name}: {describe(error)}") from None
            if batch is None:
                progress(part.size, documents, True)
                return
            read = column_documents(batch.column(0), policy, bad, partial(_row, part, row))
            text, documents = text + len(read.data), documents + len(read)
            yield read
            row += batch.num_rows
            progress(min(part.size, part.size * text // max(1, part.text_bytes)), documents)


def _row(part: RowGroups, first: int, i: int) -> str:
    return f"{part.file.name}: row {first + i} ({part.file.reading.text_column!r} column)"


def _failure(error: Exception) -> type[BpeDaskError]:
    """The kind of error a failed Parquet read is: one that may pass (a dropped connection, a web
    server's 503: tried again, ``io.retries``), or one of the file (corrupt, gone, changed)."""
    return TransientError if is_transient(error) else InputError
