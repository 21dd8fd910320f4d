"""Documents held in this process as a source: a Python iterable, or Arrow text, in; batches out.

Takes the documents of a Python iterable (``str``, or ``bytes`` of UTF-8) or the text column of
Arrow data (a ``pyarrow`` Table, a Hugging Face dataset, anything giving an Arrow stream), in the
batches of ``io.in_memory``; gives them as ``MemoryPart``s, to be counted on threads of this
process (they cannot be sent to a cluster: the iterable is read once, here). The source reads
ahead before counting begins (``read_ahead``) until it holds enough text for the compiled counter
or the input ends: what it holds is the sample the split pattern is checked on, and tells whether
the input is small. An error the iterable raises while read ahead comes after the batches it
gave, where it was raised.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from bpe_dask.io.documents import STRICT, BadRecords, Documents, RecordPolicy
from bpe_dask.io.in_memory import Batch, arrow_batches, python_batches
from bpe_dask.io.sample import SAMPLE_BYTES, first_texts
from bpe_dask.io.text import ReadProgress
from bpe_dask.rules.pretokenize import Pretokenizer
from bpe_dask.sources.part import UNKNOWN_SIZE, DocumentSource, PartReading


@dataclass(frozen=True)
class MemoryPart:
    """A batch of the documents held here, read by ``policy``."""

    batch: Batch
    policy: RecordPolicy
    index: int = 0
    size = text_bytes = None  # known once read
    stand_alone = True

    @property
    def units(self) -> int:
        """The documents it stands for, in a progress line."""
        return len(self.batch)

    @property
    def where(self) -> str:
        return f"element {self.batch.first}"

    @property
    def place(self) -> tuple[str, int, int, str]:
        return "memory", self.batch.first, self.batch.first + len(self.batch), "documents"

    def key(self) -> str:
        return f"memory-{self.index}"

    def documents(
        self, reading: PartReading, bad: BadRecords, progress: ReadProgress | None = None, data: Any = None
    ) -> Iterator[Documents]:
        policy = RecordPolicy(self.policy.on_bad_record, reading.utf8_errors)
        documents = self.batch.documents(policy, bad)
        if progress is not None:
            progress(len(documents.data), len(documents), True)
        yield documents


@dataclass
class MemorySource(DocumentSource):
    """Batches of documents held here, what the report names as the input, and how many documents
    there are when that is known (``length``)."""

    batches: Iterator[Batch]
    description: str
    length: int | None = None
    policy: RecordPolicy = STRICT
    held: list[Batch] = field(default_factory=list)  # read ahead
    more: bool = True  # whether the input may hold more than ``held``
    reads_on = "here"  # the iterable is read once, in this process
    stable_keys = True  # it writes no shards
    unit = "documents"

    @classmethod
    def of_iterable(
        cls, iterable: Iterable, batch_size: int, policy: RecordPolicy, length: int | None = None
    ) -> MemorySource:
        return cls(python_batches(iterable, batch_size), describe_input(iterable), length, policy)

    @classmethod
    def of_arrow(cls, data: object, text_column: str, policy: RecordPolicy) -> MemorySource:
        batches, rows = arrow_batches(data, text_column)
        return cls(batches, describe_input(data), rows, policy)

    @property
    def size(self) -> int:
        """The input's bytes before it is counted: those read ahead, where that is all of it; else
        taken as large."""
        return sum(batch.size for batch in self.held) if not self.more else UNKNOWN_SIZE

    def totals(self, parts: object) -> tuple[int | None, None]:
        """A progress bar's totals: the documents, where their number is known."""
        return self.length, None

    def data(self, part: MemoryPart) -> None:
        """Nothing: its batches are counted in this process."""

    def read_ahead(self, size: int) -> int:
        """Hold batches until they hold ``size`` bytes of text or the input ends; their bytes."""
        held = sum(batch.size for batch in self.held)
        try:
            while held < size:
                batch = next(self.batches, None)
                if batch is None:
                    self.more = False
                    break
                self.held.append(batch)
                held += batch.size
        except Exception as error:  # raised where its next batch would have been, once these are counted
            self.more, self.batches = False, _raising(error)
        return held

    def sample(self, run: object = None) -> tuple[list[str], str]:
        """The first documents held (bad ones left out, invalid UTF-8 as U+FFFD): the sample the split
        pattern is checked on."""
        self.read_ahead(SAMPLE_BYTES)
        lenient = RecordPolicy("skip", "replace")
        sample = first_texts((batch.documents(lenient, BadRecords()) for batch in self.held), SAMPLE_BYTES)
        return sample, "the first documents"

    def plan(self, pretokenizer: Pretokenizer, chunk_size: int | None = None, threads: int | None = None):
        """The batches, those read ahead first; each is read once (the batch size made them)."""
        held, self.held = self.held, []
        for k, batch in enumerate(chain(held, self.batches)):
            yield MemoryPart(batch, self.policy, k)


def _raising(error: Exception) -> Iterator[Batch]:
    """An iterable's error, raised where its next batch would have been."""
    raise error
    yield


def describe_input(inputs: object) -> str:
    """What the report names as the input: the object's type (``pyarrow.lib.Table``, ``generator``).

    >>> describe_input(iter([])), describe_input([])
    ('list_iterator', 'list')
    """
    kind = type(inputs)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
