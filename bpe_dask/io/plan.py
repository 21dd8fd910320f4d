"""Planning: input files in, partitions that tile every file out.

Takes the ``InputFile``s of the job (``inputs``), a target chunk size and the ``Pretokenizer`` of
the job; gives their partitions, each the unit of work of one map task:

- a text file is cut into ``ByteRange``s. Each cut is moved forward to the start of a special
  token, or where none is near, to another safe cut of the pretokenizer (docs/exactness.md#safe-cuts
  says why they are safe), so counting each range on its own gives exactly the counts of the whole file;
- a JSON Lines file of documents (one JSON object per line) into ``ByteRange``s cut after a
  newline, so that every range holds whole records; a compressed one is read whole;
- a Parquet file into ``RowGroups``: runs of whole row groups of about the chunk size.

Documents never share a pre-token, so any cut between records is safe. Planning reads only small
windows around the cuts, and the footer of each Parquet file. A file on a web server that does not
serve byte ranges (asked once, with one small ranged request) is one partition, read as a stream,
or, for Parquet, downloaded whole by its one task (``io.footers``).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from itertools import pairwise

import fsspec

from bpe_dask.errors import BpeDaskError
from bpe_dask.io.footers import Footer, read_footer
from bpe_dask.io.inputs import InputFile, text_column_index
from bpe_dask.io.storage import LOCAL, Store
from bpe_dask.io.web import is_http, serves_ranges
from bpe_dask.rules.pretokenize import Pretokenizer

log = logging.getLogger(__name__)

DEFAULT_LOOKAHEAD = 1 << 20  # how far past a nominal cut we look for a special token
_FIRST_WINDOW = 1 << 16


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
    whole: bool = False  # read by downloading the whole file in one request (``io.footers``)

    def key(self) -> str:
        text = f"{self.file.identity()}\0row groups\0{self.start}\0{self.end}"
        return hashlib.sha256(text.encode()).hexdigest()[:32]


Partition = ByteRange | RowGroups


def plan_ranges(
    files: Iterable[InputFile],
    chunk_size: int,
    pretokenizer: Pretokenizer,
    store: Store = LOCAL,
    lookahead: int = DEFAULT_LOOKAHEAD,
    footers: Mapping[str, Footer] | None = None,
) -> list[Partition]:
    """Cut each file into partitions of about ``chunk_size`` bytes at safe cuts; a Parquet file's
    footer is taken from ``footers`` (by URL: those ``expand_inputs`` read) or read here."""
    if chunk_size < 1:
        raise BpeDaskError(f"chunk size must be positive, got {chunk_size}")
    footers = footers or {}
    ranges: list[Partition] = []
    for file in files:
        if file.format == "parquet":
            ranges.extend(plan_row_groups(file, chunk_size, store, footers.get(file.url)))
            continue
        cuts = _file_cuts(file, chunk_size, pretokenizer, store, lookahead)
        bounds = [0, *cuts, file.size]
        ranges.extend(ByteRange(file, a, b) for a, b in pairwise(bounds))
    return ranges


def plan_row_groups(
    file: InputFile, chunk_size: int, store: Store, footer: Footer | None = None
) -> list[RowGroups]:
    """Runs of whole row groups whose text column holds about ``chunk_size`` bytes of text. A file
    read ``whole`` (a web server without byte ranges: ``io.footers``) is one part: each part's task
    would download the whole file, so one task downloads it once."""
    footer = footer or read_footer(file, store)
    metadata = footer.metadata
    column = text_column_index(file, metadata.schema.to_arrow_schema())
    part_text = float("inf") if footer.whole else chunk_size
    parts: list[RowGroups] = []
    start, size, rows, text, first_row = 0, 0, 0, 0, 0
    for group in range(metadata.num_row_groups):
        chunk = metadata.row_group(group).column(column)
        size += chunk.total_compressed_size
        text += chunk.total_uncompressed_size
        rows += metadata.row_group(group).num_rows
        if text >= part_text or group == metadata.num_row_groups - 1:
            parts.append(RowGroups(file, start, group + 1, size, first_row, rows, text, footer.whole))
            start, size, first_row, rows, text = group + 1, 0, first_row + rows, 0, 0
    # Progress counts the file's bytes: the last part also stands for the footer and other columns.
    last = parts.pop() if parts else RowGroups(file, 0, 0, 0, whole=footer.whole)
    rest = file.size - sum(p.size for p in parts)
    parts.append(replace(last, size=rest))
    return parts


def _file_cuts(
    file: InputFile, chunk_size: int, pretokenizer: Pretokenizer, store: Store, lookahead: int
) -> list[int]:
    if not file.sized:
        log.info("%s: the server does not say its size: one task, read as a stream to its end", file.name)
        return []
    if file.size <= chunk_size or file.compression:
        return []
    fs, path = store.fs(file.url)
    if is_http(file.url) and not store.retries.run(serves_ranges, fs, path):
        log.warning(
            "%s: the server does not serve byte ranges (it answers a range request with the whole file), "
            "so its %s bytes are one task, read as a stream: to have it cut into partitions, serve it from "
            "a server that does, or download it first",
            file.name,
            f"{file.size:,}",
        )
        return []
    cuts: list[int] = []
    for target in range(chunk_size, file.size, chunk_size):
        start = max(target, cuts[-1] + 1 if cuts else 1)
        if start >= file.size:
            break
        # A read that failed in a way that may pass (a dropped connection, a server's 503) is tried
        # again, as the tasks' reads are (``io.retries``).
        if file.format == "jsonl":
            cut = store.retries.run(find_line_start, fs, path, file.size, start)
        else:
            cut = store.retries.run(find_cut, fs, path, file.size, start, pretokenizer, lookahead)
        if cut is None:
            log.debug("no safe cut within %d bytes after %s:%d", lookahead, file.name, start)
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
