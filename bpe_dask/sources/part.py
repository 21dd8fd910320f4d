"""Parts: what every source gives, whatever its kind; one part in, its documents out.

A job's input is a ``Source`` (``sources.source``) that gives ``Part``s, each the unit of work of
one map task, or of one batch counted on a thread of this process. Every part reads the same
way: ``Part.documents`` gives ``Documents`` (batches of UTF-8 documents, ``io.documents``), so the
stages that count, encode and measure text take every kind of input through one loop. A part
whose documents ``stand_alone`` holds records (a JSON Lines or Parquet record, an element of a
collection or an iterable): no pre-token crosses from one into the next. Otherwise it is one text
read in blocks cut at safe places (``io.text``), each given as one document: the cuts leave the
pre-tokens unchanged (docs/exactness.md#safe-cuts).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from bpe_dask.io.documents import BadRecords, Documents
from bpe_dask.io.storage import LOCAL, Store
from bpe_dask.io.text import ReadProgress
from bpe_dask.rules.pretokenize import Pretokenizer

# An input's size where it is not known before it is read (a collection, an iterable not read to its
# end): taken as large, so that the compiled loops are loaded for it (each task still picks its
# engine by its own text).
UNKNOWN_SIZE = 1 << 40


@dataclass(frozen=True)
class PartReading:
    """How a stage reads a part: the pretokenizer whose cuts a text is read at (and whose special
    tokens it holds), the store, how invalid UTF-8 reads (``strict`` or ``replace``), and whether a
    text's blocks go on as UTF-8 checked where it lies (``as_utf8``, for the compiled engines, which
    take bytes) or decoded (the ``regex`` module's engine)."""

    pretokenizer: Pretokenizer
    store: Store = LOCAL
    utf8_errors: str = "strict"
    as_utf8: bool = False
    block: int | None = None  # None: the store's ``bpe-dask.block-size``

    @property
    def block_size(self) -> int:
        """About how much text a block, or a batch of documents, holds."""
        return self.block or self.store.size("block-size")


class Part(Protocol):
    """One unit of work of a source.

    ``index`` is its place in the source (the order ids are written in, and which failure is named
    first); ``size`` the input bytes it covers, and ``text_bytes`` the text it holds, each ``None``
    where known only once it is read; ``units`` what a progress bar counts it as (one part, or a
    batch's documents);
    ``key()`` a digest of what it holds and how it is read (its shards' names: a re-run reuses
    them); ``where`` names it in messages; ``place`` is what an encoded shard records of it
    (the input, start, end, and what they count)."""

    index: int

    @property
    def size(self) -> int | None: ...

    @property
    def text_bytes(self) -> int | None: ...

    @property
    def units(self) -> int: ...

    @property
    def stand_alone(self) -> bool: ...

    @property
    def where(self) -> str: ...

    @property
    def place(self) -> tuple[str, int, int, str]: ...

    def key(self) -> str: ...

    def documents(
        self, reading: PartReading, bad: BadRecords, progress: ReadProgress | None = None, data: Any = None
    ) -> Iterator[Documents]:
        """The part's documents, in order; bad records go by the source's rule (skipped ones added to
        ``bad``); ``progress`` hears how far the reading has got; ``data`` is what the part's task
        was handed (a Dask collection's partition), or ``None``."""
        ...


def read_bytes(part: Part, progress_read: int) -> int:
    """The input bytes a part counts for once read, where its size was not known before (a web
    file served with no size, a partition of a collection, a batch in memory): what was read of
    it; 0 for a part of known size, which its source counts already."""
    return progress_read if part.size is None else 0


class DocumentSource:
    """What a source of documents (a Dask collection, or documents held here) answers as every such
    source does, unlike files: its size is known only once read (``known_bytes``), and its largest
    part no better than its ``size``; every document is a record; no files the workers must reach,
    nor any to look at before the job starts; reports name it by its ``description``."""

    description: str
    known_bytes = 0
    has_records = True
    files = ()

    @property
    def shown(self) -> list[str]:
        return [self.description]

    def largest_part(self, threads: int, chunk_size: int | None) -> int:
        return self.size

    def first_look(self, utf8_errors: str, pretokenizer: Pretokenizer) -> None:
        """Nothing to read before the job starts: a collection's partitions are on its cluster, and
        documents held here were read ahead as the job was placed."""
