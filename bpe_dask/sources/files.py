"""Files as a source: paths, URLs and globs in; partitions that tile every file out.

``FileSource.find`` expands the inputs (``io.inputs``: directories, globs, ``s3://`` and web URLs;
never the job's own outputs); ``FileSource.plan`` cuts the files into ``FilePart``s of about a
chunk size (``io.plan``: text at safe cuts, JSON Lines after newlines, Parquet at row groups),
sized, when no chunk size is given, for the cluster's threads (``partition_size``). A part reads
its byte range as documents: a text range in blocks that end at safe cuts, each one document, a
range of records a document per record (``io.records``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from bpe_dask import settings as config
from bpe_dask.credentials import shown
from bpe_dask.io.documents import BadRecords, Documents
from bpe_dask.io.footers import Footer
from bpe_dask.io.inputs import InputFile, Reading, expand_inputs
from bpe_dask.io.plan import Partition, RowGroups, plan_ranges
from bpe_dask.io.records import iter_documents
from bpe_dask.io.sample import first_look, sample_documents
from bpe_dask.io.storage import Store
from bpe_dask.io.text import ReadProgress, iter_texts, iter_utf8
from bpe_dask.rules.pretokenize import Pretokenizer
from bpe_dask.sources.part import PartReading

log = logging.getLogger(__name__)

TINY_CHUNK = 4096  # an explicit chunk size below this is likely a unit left out ("64" for 64MiB)


@dataclass(frozen=True)
class FilePart:
    """Partition ``index`` of a job's files: a byte range of one file, or row groups of a Parquet file."""

    range: Partition
    index: int = 0
    units = 1

    @property
    def size(self) -> int | None:
        return self.range.size if self.range.file.sized else None

    @property
    def text_bytes(self) -> int:
        """About the text it holds: its bytes, or a Parquet part's text column uncompressed."""
        return self.range.text_bytes

    @property
    def stand_alone(self) -> bool:
        return self.range.file.has_records

    @property
    def where(self) -> str:
        return self.range.file.name

    @property
    def place(self) -> tuple[str, int, int, str]:
        unit = "row groups" if isinstance(self.range, RowGroups) else "bytes"
        return self.range.file.url, self.range.start, self.range.end, unit

    def key(self) -> str:
        return self.range.key()

    def documents(
        self, reading: PartReading, bad: BadRecords, progress: ReadProgress | None = None, data: Any = None
    ) -> Iterator[Documents]:
        part, store, errors, block = self.range, reading.store, reading.utf8_errors, reading.block_size
        if self.stand_alone:
            yield from iter_documents(
                part, store, utf8_errors=errors, bad=bad, batch_bytes=block, progress=progress
            )
        elif reading.as_utf8 and errors == "strict":  # checked where it lies, never decoded whole
            for data in iter_utf8(part, reading.pretokenizer, store, block_size=block, progress=progress):
                yield Documents.one(data)
        else:
            texts = iter_texts(
                part, reading.pretokenizer, store, utf8_errors=errors, block_size=block, progress=progress
            )
            for text in texts:
                yield Documents.one(text.encode("utf-8"))


@dataclass
class FileSource:
    """The files a job's inputs name, as found on the client, and how they are read; the Parquet
    footers read to find them (``expand_inputs``), by URL, which the planner takes."""

    files: list[InputFile]
    store: Store
    footers: dict[str, Footer] = field(default_factory=dict, repr=False)
    reads_on = "anywhere"  # here, or on any cluster whose workers reach the files
    stable_keys = True  # a part's key names its file's version: a later run may reuse its shards
    unit = "partitions"

    @classmethod
    def find(
        cls,
        inputs: Sequence[str],
        store: Store,
        reading: Reading,
        exclude: Sequence[str | None] = (),
        outputs: Sequence[str | None] = (),
    ) -> FileSource:
        """The files ``inputs`` name; what the job writes is never read back as an input: anything
        under ``exclude`` (its output and work directories) or one of ``outputs`` (files it writes),
        which, named as an input, is an error."""
        footers: dict[str, Footer] = {}
        found = expand_inputs(
            inputs,
            store,
            exclude=[e for e in exclude if e],
            reading=reading,
            outputs=[o for o in outputs if o],
            footers=footers,
        )
        return cls(found, store, footers)

    @property
    def shown(self) -> list[str]:
        """The input URLs as reports name them, credentials hidden."""
        return [shown(f.url) for f in self.files]

    @property
    def known_bytes(self) -> int:
        """The files' sizes, as far as their stores tell them."""
        return sum(f.size for f in self.files)

    size = known_bytes  # the input's bytes before it is read: the files' sizes

    @property
    def empty(self) -> bool:
        """Whether the files hold nothing to read (and none's size is unknown)."""
        return all(f.sized and not f.size for f in self.files)

    @property
    def has_records(self) -> bool:
        return any(f.has_records for f in self.files)

    @property
    def all_records(self) -> bool:
        return bool(self.files) and all(f.has_records for f in self.files)

    def first_look(self, utf8_errors: str, pretokenizer: Pretokenizer) -> None:
        """The start of the first file read as its task will (``io.sample.first_look``)."""
        if self.files:
            first_look(self.files[0], self.store, utf8_errors, pretokenizer)

    def sample(self, run: object = None) -> tuple[list[str], str]:
        """The first documents of the first file, and what they are, for the split pattern's check."""
        if not self.files:
            return [], ""
        return sample_documents(self.files[0], self.store), f"a sample of {self.files[0].name}"

    def plan(
        self, pretokenizer: Pretokenizer, chunk_size: int | None = None, threads: int | None = None
    ) -> list[FilePart]:
        """The files cut into parts of ``chunk_size`` bytes, or sized for ``threads`` worker threads
        (``None``: as large as a task may be, for counting in this process)."""
        given = chunk_size
        chunk_size = chunk_size or partition_size(self.known_bytes, threads, self.store.settings)
        parts = [
            FilePart(r, k)
            for k, r in enumerate(
                plan_ranges(self.files, chunk_size, pretokenizer, self.store, footers=self.footers)
            )
        ]
        self._say_plan(parts, chunk_size)
        if pretokenizer.pattern.cut_rule is None and any(
            f.size > chunk_size and not f.has_records for f in self.files
        ):
            log.warning(
                "the split pattern is a regex of your own, with no rule for where its text may be cut: "
                "text files are cut only where a special token starts, so a long document without one "
                "is one task"
            )
        if given and chunk_size < TINY_CHUNK and len(parts) > 1:
            log.warning(
                "chunk_size=%d is %d bytes, so %d partitions, each a Dask task; "
                "sizes take units (e.g. %dMiB)",
                chunk_size,
                chunk_size,
                len(parts),
                chunk_size,
            )
        return parts

    def _say_plan(self, parts: list[FilePart], chunk_size: int) -> None:
        from bpe_dask.wording import format_bytes, plural

        compressed = sum(1 for f in self.files if f.compression)
        size, count = format_bytes(self.known_bytes), plural(len(parts), "partition")
        if compressed == len(self.files):  # the chunk size cuts nothing: the sizes are not the text's
            sizes = f"{size} compressed, {count} (a compressed file is read whole, as one task)"
        else:
            whole = f" ({compressed} compressed, each read whole as one task)" if compressed else ""
            sizes = f"{size}{whole}, {count} of about {format_bytes(chunk_size)}"
        log.info("%s, %s", plural(len(self.files), "input file"), sizes)

    def totals(self, parts: list[FilePart]) -> tuple[int, int]:
        """A progress bar's totals: the parts, and the files' bytes."""
        return len(parts), self.known_bytes

    def identity(self) -> list[str]:
        """What the files are, as they are now: a name for what a job counts of them."""
        return [f.identity() for f in self.files]

    def data(self, part: FilePart) -> None:
        """What a part's task is handed besides the part: nothing, it reads its file."""

    def largest_part(self, threads: int, chunk_size: int | None) -> int:
        """About the largest part ``plan`` will make for ``threads`` threads, before it plans (a
        compressed file is one part, of more text than its size)."""
        chunk = chunk_size or partition_size(self.known_bytes, threads, self.store.settings)
        return max((f.size if f.compression else min(f.size, chunk) for f in self.files), default=0)


def partition_size(input_bytes: int, threads: int | None, settings: dict | None = None) -> int:
    """Bytes per map task when none is given: about ``bpe-dask.partitions-per-thread`` tasks per
    worker thread, so that every thread has work and one that finishes early takes another, within
    ``bpe-dask.partition-min`` (each partition costs a dict of its own words, a shard and a share of
    the reduce) and ``bpe-dask.partition-max`` (a task's memory, and the work lost with a worker).
    ``threads=None``: as large as a task may be.

    >>> partition_size(2**30, 8) // 2**20, partition_size(2**30, None) // 2**20  # 16 tasks; the largest
    (64, 64)
    >>> partition_size(2**20, 8) // 2**10  # never below 1 MiB
    1024
    """
    largest = config.size("partition-max", settings)
    if threads is None:
        return largest
    per_thread = config.count("partitions-per-thread", settings, least=1)
    wanted = -(-input_bytes // max(1, per_thread * threads))
    return max(min(config.size("partition-min", settings), largest), min(largest, wanted))
