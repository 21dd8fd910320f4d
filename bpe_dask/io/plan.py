"""Planning: input URLs in, partitions that tile every file out.

Takes paths, globs, directories or URLs (anything fsspec opens), a target chunk size and the
``Pretokenizer`` of the job; gives ``InputFile``s and their partitions, each the unit of work of
one map task:

- a text file is cut into ``ByteRange``s. Each cut is moved forward to the start of a special
  token, or where none is near, to another safe cut of the pretokenizer (``pretokenize`` says why
  they are safe), so counting each range on its own gives exactly the counts of the whole file;
- a JSON Lines file of documents (one JSON object per line) into ``ByteRange``s cut after a
  newline, so that every range holds whole records; a compressed one is read whole;
- a Parquet file into ``RowGroups``: runs of whole row groups of about the chunk size.

Documents never share a pre-token, so any cut between records is safe. Planning reads only small
windows around the cuts, and the footer of each Parquet file.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import pairwise
from pathlib import PurePosixPath

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.utils import infer_compression

from bpe_dask.errors import BpeDaskError
from bpe_dask.io.storage import LOCAL, Store, describe
from bpe_dask.rules.pretokenize import Pretokenizer

log = logging.getLogger(__name__)

DEFAULT_LOOKAHEAD = 1 << 20  # how far past a nominal cut we look for a special token
_FIRST_WINDOW = 1 << 16
_GLOB_CHARS = frozenset("*?[")

INPUT_FORMATS = ("text", "jsonl", "parquet")
BAD_RECORD_ACTIONS = ("error", "skip")
# Names a file is recognised by (after any compression suffix such as .gz or .zst).
_SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".jsonlines": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}


@dataclass(frozen=True)
class Reading:
    """How the job reads its inputs: the format (``None``: by each file's name), the field or
    column that holds a record's text, and what a bad record does (stop the job, or be skipped)."""

    input_format: str | None = None
    text_column: str = "text"
    on_bad_record: str = "error"

    def __post_init__(self) -> None:
        if self.input_format not in (None, *INPUT_FORMATS):
            raise BpeDaskError(f"input format must be text, jsonl or parquet, got {self.input_format!r}")
        if not isinstance(self.text_column, str) or not self.text_column:
            raise BpeDaskError(f"text column must be a non-empty name, got {self.text_column!r}")
        if self.on_bad_record not in BAD_RECORD_ACTIONS:
            raise BpeDaskError(f"on bad record must be error or skip, got {self.on_bad_record!r}")

    def format_of(self, name: str, compression: str | None) -> str:
        if self.input_format is not None:
            return self.input_format
        name = PurePosixPath(name).name.lower()
        if compression:  # data.jsonl.zst
            name = PurePosixPath(name).stem
        return _SUFFIXES.get(PurePosixPath(name).suffix, "text")


@dataclass(frozen=True)
class InputFile:
    """One input file: its full URL, its size, and what identifies this version of it."""

    url: str
    size: int
    version: str
    compression: str | None = None  # compressed files are read whole, as a stream
    format: str = "text"  # or "jsonl", "parquet": a file of records, each a document
    reading: Reading = Reading()

    @property
    def name(self) -> str:
        """The URL as a user would write it: local files as plain paths."""
        return self.url.removeprefix("file://")

    @property
    def has_records(self) -> bool:
        return self.format != "text"

    def identity(self) -> str:
        """What the file is and how it is read, for the keys of its partitions."""
        text = f"{self.url}\0{self.version}"
        if self.has_records:
            text += f"\0{self.format}\0{self.reading.text_column}\0{self.reading.on_bad_record}"
        return text


@dataclass(frozen=True)
class ByteRange:
    """Bytes ``[start, end)`` of one input file; the unit of work of one map task."""

    file: InputFile
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def text_bytes(self) -> int:
        return self.size

    def key(self) -> str:
        """A digest of what this range holds: the file's identity and version, and the range."""
        text = f"{self.file.identity()}\0{self.start}\0{self.end}"
        return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class RowGroups:
    """Row groups ``[start, end)`` of one Parquet file, the unit of work of one map task: ``size``
    bytes of the file (its text column as stored; the file's last part also counts the rest of the
    file), ``text_bytes`` of text once decompressed, ``rows`` rows, and ``first_row`` before them."""

    file: InputFile
    start: int
    end: int
    size: int
    first_row: int = 0
    rows: int = 0
    text_bytes: int = 0

    def key(self) -> str:
        text = f"{self.file.identity()}\0row groups\0{self.start}\0{self.end}"
        return hashlib.sha256(text.encode()).hexdigest()[:32]


Partition = ByteRange | RowGroups


def expand_inputs(
    inputs: Sequence[str],
    store: Store = LOCAL,
    exclude: Sequence[str] = (),
    reading: Reading = Reading(),
) -> list[InputFile]:
    """Every file the inputs name, in order: globs and directories expand sorted by path.

    Inside directories, names starting with ``.`` or ``_`` (``.DS_Store``, ``_SUCCESS``) are
    skipped, and so is anything under ``exclude`` (the job's own output and work directory).
    A file named twice is read once. Each file's format comes from ``reading``.
    """
    excluded = [url.rstrip("/") + "/" for url in _urls(exclude, store)]
    files: dict[str, InputFile] = {}
    for spec in inputs:
        found = [_with_format(file, reading) for file in _expand_one(str(spec), store)]
        if not found:
            raise BpeDaskError(f"no input files match {spec!r}")
        for file in found:
            if not any(file.url.startswith(prefix) for prefix in excluded):
                files.setdefault(file.url, file)
    return list(files.values())


def _with_format(file: InputFile, reading: Reading) -> InputFile:
    form = reading.format_of(file.url, file.compression)
    if form == "parquet" and file.compression:
        raise BpeDaskError(
            f"{file.name}: a Parquet file cannot be read compressed as a whole ({file.compression})"
        )
    return InputFile(file.url, file.size, file.version, file.compression, form, reading)


def _urls(paths: Sequence[str], store: Store) -> list[str]:
    urls = []
    for path in filter(None, paths):
        fs, stripped = store.fs(path)
        urls.append(fs.unstrip_protocol(stripped))
    return urls


def _expand_one(spec: str, store: Store) -> list[InputFile]:
    fs, path = store.fs(spec)
    try:
        return _list_files(fs, path, spec)
    except BpeDaskError:
        raise
    except Exception as error:  # an unreachable store, bad credentials, no such bucket, ...
        raise BpeDaskError(f"cannot read {spec}: {describe(error)}") from None


def _list_files(fs: fsspec.AbstractFileSystem, path: str, spec: str) -> list[InputFile]:
    if _GLOB_CHARS & set(path) and not fs.exists(path):  # a literal name like "f[1].txt" wins
        entries = fs.glob(path, detail=True)
    elif fs.isdir(path):
        entries = fs.find(path, detail=True)
        entries = {p: e for p, e in entries.items() if not _is_hidden(p[len(path) :])}
    elif fs.exists(path):
        entries = {path: fs.info(path)}
    else:
        raise BpeDaskError(f"input not found: {spec}")
    files = []
    for name in sorted(entries):
        info = entries[name]
        if info.get("type") == "directory":
            continue
        url = fs.unstrip_protocol(name)
        files.append(InputFile(url, int(info["size"]), _version_of(info), infer_compression(name)))
    return files


def _is_hidden(relative_path: str) -> bool:
    return any(part[:1] in (".", "_") for part in relative_path.split("/") if part)


def _version_of(info: dict) -> str:
    """What changes when the file changes: size plus mtime or ETag, whichever the store has."""
    for field in ("ETag", "etag", "md5Hash", "mtime", "LastModified", "last_modified", "created"):
        if info.get(field) is not None:
            return f"{info['size']}:{field}={info[field]}"
    return f"{info['size']}"


def plan_ranges(
    files: Iterable[InputFile],
    chunk_size: int,
    pretokenizer: Pretokenizer,
    store: Store = LOCAL,
    lookahead: int = DEFAULT_LOOKAHEAD,
) -> list[Partition]:
    """Cut each file into partitions of about ``chunk_size`` bytes at safe cuts."""
    if chunk_size < 1:
        raise BpeDaskError(f"chunk size must be positive, got {chunk_size}")
    files = list(files)
    parquet = [file for file in files if file.format == "parquet"]
    with ThreadPoolExecutor(16) as pool:  # a store answers many footer reads at once
        groups = dict(zip(parquet, pool.map(lambda f: plan_row_groups(f, chunk_size, store),
                                           parquet), strict=True))  # fmt: skip
    ranges: list[Partition] = []
    for file in files:
        if file.format == "parquet":
            ranges.extend(groups[file])
            continue
        cuts = _file_cuts(file, chunk_size, pretokenizer, store, lookahead)
        bounds = [0, *cuts, file.size]
        ranges.extend(ByteRange(file, a, b) for a, b in pairwise(bounds))
    return ranges


def plan_row_groups(file: InputFile, chunk_size: int, store: Store) -> list[RowGroups]:
    """Runs of whole row groups whose text column holds about ``chunk_size`` bytes of text."""
    fs, path = store.fs(file.url)
    try:
        with fs.open(path, "rb") as f:
            metadata = pq.ParquetFile(f).metadata
    except Exception as error:
        raise BpeDaskError(f"cannot read {file.name} as Parquet: {describe(error)}") from None
    column = text_column_index(file, metadata.schema.to_arrow_schema())
    parts: list[RowGroups] = []
    start, size, rows, text, first_row = 0, 0, 0, 0, 0
    for group in range(metadata.num_row_groups):
        chunk = metadata.row_group(group).column(column)
        size += chunk.total_compressed_size
        text += chunk.total_uncompressed_size
        rows += metadata.row_group(group).num_rows
        if text >= chunk_size or group == metadata.num_row_groups - 1:
            parts.append(RowGroups(file, start, group + 1, size, first_row, rows, text))
            start, size, first_row, rows, text = group + 1, 0, first_row + rows, 0, 0
    # Progress counts the file's bytes: the last part also stands for the footer and other columns.
    last = parts.pop() if parts else RowGroups(file, 0, 0, 0)
    rest = file.size - sum(p.size for p in parts)
    parts.append(RowGroups(file, last.start, last.end, rest, last.first_row, last.rows, last.text_bytes))
    return parts


def text_column_index(file: InputFile, schema: pa.Schema) -> int:
    """The index of the file's text column among its leaf columns, if it is a column of text."""
    name = file.reading.text_column
    if name not in schema.names:
        raise BpeDaskError(
            f"{file.name}: no column {name!r} (columns: {', '.join(schema.names)}; --text-column names it)"
        )
    field = schema.field(name)
    kind = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
    textual = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view, pa.types.is_binary,
               pa.types.is_large_binary)  # fmt: skip
    if not any(is_kind(kind) for is_kind in textual):
        raise BpeDaskError(f"{file.name}: column {name!r} holds {field.type}, not text")
    leaves_before = sum(_leaf_count(schema.field(i).type) for i in range(schema.get_field_index(name)))
    return leaves_before


def _leaf_count(kind: pa.DataType) -> int:
    return sum(_leaf_count(kind.field(i).type) for i in range(kind.num_fields)) if kind.num_fields else 1


def _file_cuts(
    file: InputFile, chunk_size: int, pretokenizer: Pretokenizer, store: Store, lookahead: int
) -> list[int]:
    if file.size <= chunk_size or file.compression:
        return []
    fs, path = store.fs(file.url)
    cuts: list[int] = []
    for target in range(chunk_size, file.size, chunk_size):
        start = max(target, cuts[-1] + 1 if cuts else 1)
        if start >= file.size:
            break
        if file.format == "jsonl":
            cut = find_line_start(fs, path, file.size, start)
        else:
            cut = find_cut(fs, path, file.size, start, pretokenizer, lookahead)
        if cut is None:
            log.debug("no safe cut within %d bytes after %s:%d", lookahead, file.url, start)
        elif cut < file.size:
            cuts.append(cut)
    return cuts


def find_line_start(fs: fsspec.AbstractFileSystem, path: str, size: int, start: int) -> int:
    """The first offset at or after ``start`` that follows a newline (``size`` if none does)."""
    position, length = start - 1, _FIRST_WINDOW
    while position < size:
        window = fs.cat_file(path, start=position, end=min(size, position + length))
        newline = window.find(b"\n")
        if newline >= 0:
            return position + newline + 1
        position += len(window)
        length *= 4
    return size


def find_cut(
    fs: fsspec.AbstractFileSystem,
    path: str,
    size: int,
    start: int,
    pretokenizer: Pretokenizer,
    lookahead: int,
) -> int | None:
    """The first safe cut at or after ``start``, reading windows that grow until one holds a cut
    or ``lookahead`` bytes are spent (ranged reads, so S3 fetches only what is asked)."""
    # Bytes of context a cut needs on either side: the longest special token, and a character.
    margin = 4 * pretokenizer.context + 4
    limit = min(size, start + lookahead)
    length = _FIRST_WINDOW
    while True:
        end = min(limit, start + length)
        window_start = max(0, start - margin)
        window = fs.cat_file(path, start=window_start, end=min(size, end + margin))
        cut = pretokenizer.first_cut_in_bytes(window, start - window_start, end - window_start)
        if cut is not None or end >= limit:
            return None if cut is None else window_start + cut
        length *= 4
