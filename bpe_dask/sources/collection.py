"""A Dask collection as a source: a Dask DataFrame column (a Series of strings) or a Bag of strings in;
a part per partition out, each a task of the collection's own graph.

Each element is a document, as a Parquet record is. The parts are built on the collection's own
graph (``to_delayed``), so nothing is collected to the client: the task that reads a part is
handed the partition's data (a pandas Series, or the list of a Bag's partition) as it is computed
on the cluster. A Series Arrow makes a column of text is read as every Arrow column is
(``io.documents.column_documents``: valid text from its own buffers); anything else element by
element, by the same rule. A Series that is not text is refused before any
work, one of numbers Dask's ``dataframe.convert-string`` turned into strings too (``_stringified``).
A part's key is its partition's Dask key and how it is read: a re-run of the same graph finds its
shards. Nothing here imports ``dask.dataframe``, nor pandas until handed a Dask Series (which has
loaded it): a collection and a Series are told by their type's module.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import dask
import pyarrow as pa
import pyarrow.compute as pc
from dask.delayed import Delayed

from bpe_dask.errors import BpeDaskError
from bpe_dask.io.documents import (
    STRICT,
    BadRecords,
    Documents,
    NotText,
    RecordPolicy,
    column_documents,
    is_text_type,
    utf8_of,
    with_offsets,
)
from bpe_dask.io.sample import SAMPLE_BYTES, first_texts
from bpe_dask.io.text import ReadProgress
from bpe_dask.rules.pretokenize import Pretokenizer
from bpe_dask.sources.part import UNKNOWN_SIZE, DocumentSource, PartReading

UNIT = "partitions"  # what an encoded shard's start and end count


def is_collection(inputs: object) -> bool:
    """Whether ``inputs`` is a Dask collection (a DataFrame, Series or Bag is one of documents).

    >>> import dask.bag
    >>> is_collection(dask.bag.from_sequence(["a b", "c"])), is_collection("corpus.txt")
    (True, False)
    """
    return dask.is_dask_collection(inputs)


@dataclass(frozen=True)
class CollectionPart:
    """Partition ``index`` of ``collection`` (its description, for messages), whose Dask key is
    ``dask_key``; ``policy`` says what a bad element does.

    >>> part = CollectionPart("the Dask Bag 'docs'", 2, "('docs-5f1e', 2)")
    >>> part.where, len(part.key())
    ("the Dask Bag 'docs', partition 2", 32)
    """

    collection: str
    index: int
    dask_key: str
    policy: RecordPolicy = STRICT
    size = text_bytes = None  # known once read
    units = 1
    stand_alone = True

    @property
    def where(self) -> str:
        return f"{self.collection}, partition {self.index}"

    @property
    def place(self) -> tuple[str, int, int, str]:
        return self.collection, self.index, self.index + 1, UNIT

    def key(self) -> str:
        """A digest of what the partition holds, as Dask names it (the same graph gives the same
        key), and how it is read: its shards' names."""
        text = f"dask collection\0{self.dask_key}\0{self.policy.on_bad_record}"
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def documents(
        self, reading: PartReading, bad: BadRecords, progress: ReadProgress | None = None, data: Any = None
    ) -> Iterator[Documents]:
        """The partition's documents (``data``), in batches of about ``reading.block_size``.

        >>> part = CollectionPart("the Dask Bag 'docs'", 0, "k", RecordPolicy("skip"))
        >>> bad = BadRecords()
        >>> [d.texts() for d in part.documents(PartReading(None), bad, data=["a b", None, b"c", 7])]
        [['a b', 'c']]
        >>> bad.first
        "the Dask Bag 'docs', partition 0, element 1: null"
        """
        policy = RecordPolicy(self.policy.on_bad_record, reading.utf8_errors)
        text = documents = 0
        for batch in self._batches(data, policy, bad, reading.block_size):
            text, documents = text + len(batch.data), documents + len(batch)
            yield batch
        if progress is not None:
            progress(text, documents, True)

    def _batches(
        self, data: Iterable, policy: RecordPolicy, bad: BadRecords, size: int
    ) -> Iterator[Documents]:
        if _is_series(data):
            array = _text_array(data)
            if array is not None:  # from Arrow's buffers, a batch of rows at a time (``column_documents``)
                total = pc.sum(pc.binary_length(array)).as_py() or 0
                step = max(1, size * len(array) // max(1, total))
                for first in range(0, len(array), step):
                    where = lambda k, first=first: f"{self.where}, element {first + k}"  # noqa: E731
                    yield column_documents(array.slice(first, step), policy, bad, where)
                return
            data = data.astype(object)  # one element at a time: NA and NaN stay themselves
        batch: list[bytes] = []
        held = 0
        for k, element in enumerate(data):
            try:
                batch.append(utf8_of(element, policy))
            except NotText as problem:
                policy.handle(f"{self.where}, element {k}", problem, bad)
                continue
            held += len(batch[-1])
            if held >= size:
                yield Documents.joined(batch)
                batch, held = [], 0
        if batch:
            yield Documents.joined(batch)


def _is_series(data: object) -> bool:
    """Whether ``data`` is a pandas Series, told by its type's module first: another of the worker's
    threads may be importing pandas (pyarrow does, the first time it makes an array), and its
    half-made module has no ``Series`` yet. Whoever made a Series imported pandas, so ``import``
    here only waits for an import under way to finish."""
    if not any(kind.__module__.startswith("pandas.") for kind in type(data).__mro__):
        return False
    import pandas

    return isinstance(data, pandas.Series)


def _text_array(series) -> pa.Array | None:
    """The Series as an Arrow array of text, with offsets; None where Arrow cannot make one of it (mixed
    types, lone surrogates) or makes one that is not text."""
    try:
        array = pa.array(series, from_pandas=True)
    except (pa.ArrowException, UnicodeError, TypeError, ValueError):
        return None
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    return with_offsets(array) if is_text_type(array.type) else None


def sample_part(data: Iterable, part: CollectionPart, size: int = SAMPLE_BYTES) -> list[str]:
    """The partition's first documents, about ``size`` bytes of text (bad elements left out, invalid
    UTF-8 as U+FFFD): the sample a split pattern of one's own is checked on.

    >>> sample_part(["ab", None, "cd", "ef"], CollectionPart("the Dask Bag 'docs'", 0, "k"), 3)
    ['ab', 'cd']
    """
    return first_texts(part._batches(data, RecordPolicy("skip", "replace"), BadRecords(), size), size)


@dataclass(frozen=True)
class CollectionSource(DocumentSource):
    """A collection's partitions, each a task of its graph whose result is one partition's
    elements, and a description of it for messages and reports."""

    description: str
    partitions: tuple[Delayed, ...]
    policy: RecordPolicy = STRICT
    reads_on = "cluster"  # its partitions are computed on its cluster
    # A shard is named after its partition's Dask key, which need not change with the data
    # (``dask.bag.read_text`` of a file written anew gives the same keys): only a re-run of a job
    # that did not finish may reuse them.
    stable_keys = False
    unit = UNIT
    size = UNKNOWN_SIZE

    @classmethod
    def of(cls, collection: object, text_column: str, policy: RecordPolicy) -> CollectionSource:
        """The documents of a Dask Bag, a Dask Series of text, or the ``text_column`` of a Dask
        DataFrame; anything else is refused in one line."""
        kind, module = type(collection).__name__, type(collection).__module__
        if module.startswith("dask.bag") and kind == "Bag":
            return cls(f"the Dask Bag {collection.name!r}", tuple(collection.to_delayed()), policy)
        if not module.startswith(("dask.dataframe", "dask_expr")) or kind not in ("DataFrame", "Series"):
            raise BpeDaskError(
                f"a Dask {kind} is not a collection of documents: give a Dask DataFrame column (a Series "
                "of strings), a DataFrame and its text_column, or a Dask Bag of strings"
            )
        if kind == "DataFrame":
            if text_column not in collection.columns:
                columns = ", ".join(repr(c) for c in collection.columns)
                raise BpeDaskError(
                    f"the Dask DataFrame has no column {text_column!r} (its columns: {columns}): give "
                    "text_column=, or the column itself (ddf['text'])"
                )
            collection = collection[text_column]
        description = "the Dask Series" + ("" if collection.name is None else f" {collection.name!r}")
        if not _holds_text(collection.dtype):
            raise BpeDaskError(
                f"{description} holds {collection.dtype}, not text: each element must be a document"
            )
        if held := _stringified(collection):
            raise BpeDaskError(
                f"{description} holds values that are not text (pandas says {held}), which Dask's "
                "dataframe.convert-string made strings (1 became '1'): make each element a str (or None) "
                "before from_pandas, or set dataframe.convert-string to False first (they are bad records)"
            )
        return cls(description, tuple(collection.to_delayed()), policy)

    def plan(
        self, pretokenizer: Pretokenizer, chunk_size: int | None = None, threads: int | None = None
    ) -> list[CollectionPart]:
        """A part per partition (the collection's partitioning made them)."""
        return [
            CollectionPart(self.description, i, str(d.key), self.policy)
            for i, d in enumerate(self.partitions)
        ]

    def sample(self, run: Callable[[list[Delayed]], list]) -> tuple[list[str], str]:
        """The first documents of the first partition, computed on the cluster by ``run``, and what
        they are: the sample a split pattern of one's own is checked on."""
        if not self.partitions:
            return [], ""
        first = self.plan(None)[0]
        sample = run([dask.delayed(sample_part)(self.partitions[0], first)])[0]
        return sample, f"the first documents of {self.description}"

    def totals(self, parts: list[CollectionPart]) -> tuple[int, None]:
        """A progress bar's totals: the partitions (their bytes are known once read)."""
        return len(parts), None

    def identity(self) -> list[str]:
        """What the collection is: its partitions' keys (``CollectionPart.key``)."""
        return [part.key() for part in self.plan(None)]

    def data(self, part: CollectionPart) -> Delayed:
        """What the part's task is handed: its partition, computed on the cluster."""
        return self.partitions[part.index]


def _stringified(series: object) -> str | None:
    """What a pandas column of objects held, if not text, that Dask turned into strings: with
    ``dataframe.convert-string`` (on by default), ``from_pandas`` and ``from_dict`` make every value
    of an object column a string as they make the partitions (``str(1)``), so a column of numbers
    would be counted as text. Told from the pandas data such a collection keeps on the client, by
    pandas' own word for what it holds (``integer``, ``mixed-integer``, ...); ``None`` for text, or
    where Dask keeps no such data (read from files, where text is text)."""
    import pandas  # handed a Dask Series: pandas is loaded

    try:  # Dask's expressions: where a version lays them out otherwise, nothing is told
        steps = [s for s in series.expr.walk() if type(s).__name__ == "FromPandas"]
        frames = [s.operand("frame")._data for s in steps if s.operand("pyarrow_strings_enabled")]
    except (AttributeError, KeyError, TypeError):
        return None
    for data in frames:
        if isinstance(data, pandas.DataFrame):
            data = data.get(series.name)
        if isinstance(data, pandas.Series) and pandas.api.types.is_object_dtype(data.dtype):
            held = pandas.api.types.infer_dtype(data, skipna=True)
            if held not in ("string", "bytes", "empty"):
                return held
    return None


def _holds_text(dtype: object) -> bool:
    """Whether a pandas dtype can hold strings: object, pandas' string types, Arrow's string or binary,
    or categories of these."""
    import pandas  # handed a Dask Series: pandas is loaded

    if isinstance(dtype, pandas.CategoricalDtype):  # strings stored once each: text all the same
        return _holds_text(dtype.categories.dtype)
    if isinstance(dtype, pandas.ArrowDtype):
        return is_text_type(dtype.pyarrow_dtype)
    return pandas.api.types.is_string_dtype(dtype) or pandas.api.types.is_object_dtype(dtype)
