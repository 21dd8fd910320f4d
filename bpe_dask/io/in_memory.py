"""Documents held in memory: a Python iterable, or Arrow text, in; batches of documents out.

Takes a Python iterable whose elements are documents (``str``, or ``bytes`` of UTF-8), or text
already in Arrow: a ``pyarrow`` Table, RecordBatch, ChunkedArray or Array, a Hugging Face
``datasets.Dataset`` or ``IterableDataset``, or anything that gives an Arrow stream
(``__arrow_c_stream__``: a pandas or polars DataFrame, say). Gives ``Batch`` es of at most
``batch_size`` documents and about ``batch_bytes`` of text, each turned into ``Documents`` (one
UTF-8 buffer and the documents' ends) by ``Batch.documents``, where it is counted: an Arrow batch
straight from its buffers, with no Python string per document. The one thread that iterates makes
the batches; ``documents`` may run on any thread. An element that is neither ``str`` nor ``bytes``,
an iterable that raises, and a missing text column are one-line errors naming the element or the
columns; nulls and invalid UTF-8 are bad records, as for every source (``documents``). Values Arrow
cannot make one column of (a pandas Series of objects, a number among its strings; the Python rows
of a streamed dataset, which ``datasets`` cannot join where a null or a number is among them) are
read value by value, by the same rule.

>>> batches = list(python_batches(["the cat", b"the hat", "sat"], batch_size=2))
>>> [(batch.first, len(batch)) for batch in batches]
[(0, 2), (2, 1)]
>>> batches[0].documents().texts()
['the cat', 'the hat']
>>> import pyarrow as pa
>>> batches, rows = arrow_batches(pa.table({"text": ["a b", None, "c"]}), "text")
>>> rows, [batch.documents(RecordPolicy("skip")).texts() for batch in batches]
(3, [['a b', 'c']])
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice, pairwise

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bpe_dask.errors import BpeDaskError, InputError
from bpe_dask.io.documents import (
    STRICT,
    BadRecords,
    Documents,
    RecordPolicy,
    column_documents,
    is_text_type,
    values_documents,
    with_offsets,
)
from bpe_dask.io.storage import describe

DEFAULT_BATCH_SIZE = 8192  # documents per batch, as rustbpe's buffer_size
DEFAULT_BATCH_BYTES = 8 * 2**20  # and at most about this much text (the map tasks' block size)
TEXT_TYPES = "string, large_string, string_view, binary or large_binary"


@dataclass(frozen=True)
class Batch:
    """Documents ``first`` to ``first + len(items)`` of the input: Python ``str`` / ``bytes``, or an
    Arrow array of the text column ``column``."""

    first: int
    items: list | pa.Array
    size: int  # about its bytes of text
    column: str | None = None  # the Arrow column it comes from; None: a Python iterable's elements
    rows: bool = False  # Python values of a table's rows or an array's (named as rows, not elements)

    def __len__(self) -> int:
        return len(self.items)

    def documents(self, policy: RecordPolicy = STRICT, bad: BadRecords | None = None) -> Documents:
        """The batch as ``Documents``; a bad element or row (``io.documents``' rule) goes by ``policy``,
        skipped ones added to ``bad``."""
        bad = BadRecords() if bad is None else bad
        if isinstance(self.items, list):
            try:  # text, as it nearly always is: one pass
                if all(isinstance(item, str) for item in self.items):
                    return Documents.joined([item.encode("utf-8") for item in self.items])
            except UnicodeEncodeError:  # a lone surrogate: element by element
                pass
            return values_documents(self.items, policy, bad, self._row if self.rows else self._element)
        return column_documents(self.items, policy, bad, self._row)

    def _element(self, k: int) -> str:
        return f"element {self.first + k} of the iterable"

    def _row(self, k: int) -> str:
        return f"row {self.first + k} " + (f"({self.column!r} column)" if self.column else "of the array")


def python_batches(
    iterable: Iterable[str | bytes],
    batch_size: int = DEFAULT_BATCH_SIZE,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
) -> Iterator[Batch]:
    """The iterable's elements in batches of ``batch_size`` (or about ``batch_bytes``); an iterable
    that raises, or gives a list (a batch of documents, not one), stops it with one line naming the
    element. Any other element that is not text is a bad record where it is read (``Batch.documents``)."""
    if isinstance(iterable, (str, bytes, bytearray)) or hasattr(iterable, "__fspath__"):
        # A str is an iterable of characters, each of which would be a document.
        raise BpeDaskError(
            f"expected an iterable of documents, got a {type(iterable).__name__}: pass a list "
            "of texts, or a file's name to train / count_words"
        )
    try:
        iterator = iter(iterable)
    except TypeError:
        raise BpeDaskError(f"expected an iterable of str or bytes, got {type(iterable).__name__}") from None
    items: list = []
    first = size = 0
    for index, item in enumerate(_guarded(iterator, "the iterable")):
        if isinstance(item, (list, tuple)):  # Hugging Face's trainer takes batches of texts: say how
            raise InputError(
                f"element {index} of the iterable is a {type(item).__name__}, not str or bytes (batches of "
                "documents? itertools.chain.from_iterable gives their documents)"
            )
        items.append(item)
        size += len(item) if isinstance(item, (str, bytes, bytearray)) else 0  # not text: a bad record
        if len(items) >= batch_size or size >= batch_bytes:
            yield Batch(first, items, size)
            first, items, size = index + 1, [], 0
    if items:
        yield Batch(first, items, size)


def holds_arrow_text(inputs: object) -> bool:
    """Whether ``inputs`` is text in memory that ``arrow_batches`` reads (not a path, nor a Dask
    collection, which is counted on its own cluster)."""
    if isinstance(inputs, (str, bytes, list, tuple)) or hasattr(inputs, "__fspath__"):
        return False
    if isinstance(inputs, (pa.Table, pa.RecordBatch, pa.ChunkedArray, pa.Array)) or _hf_kind(inputs):
        return True
    return hasattr(inputs, "__arrow_c_stream__") and not hasattr(inputs, "__dask_graph__")


def _hf_kind(inputs: object) -> str | None:
    """``"dataset"``, ``"iterable"`` or ``"dict"`` for Hugging Face ``datasets`` objects (only
    where ``datasets`` is imported: nothing else makes one)."""
    # Told by its type's module first: ``datasets`` may be half imported by another thread.
    if not any(kind.__module__.startswith("datasets.") for kind in type(inputs).__mro__):
        return None
    import datasets  # imported already by whoever made the object: waits for an import under way

    kinds = {
        "dataset": datasets.Dataset,
        "iterable": datasets.IterableDataset,
        "dict": (datasets.DatasetDict, datasets.IterableDatasetDict),
    }
    return next((kind for kind, types in kinds.items() if isinstance(inputs, types)), None)


def arrow_batches(
    source: object,
    text_column: str = "text",
    batch_size: int = DEFAULT_BATCH_SIZE,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
) -> tuple[Iterator[Batch], int | None]:
    """The text column of ``source`` (``holds_arrow_text``) in batches, and its rows when known.
    A missing or non-text column is an error before any batch."""
    kind = _hf_kind(source)
    if kind == "dict":
        splits = ", ".join(map(repr, source))
        raise BpeDaskError(f"a DatasetDict holds splits ({splits}): pass one of them, dataset[name]")
    if isinstance(source, (pa.ChunkedArray, pa.Array)):
        _check_text(source.type, "the array")
        chunks = source.chunks if isinstance(source, pa.ChunkedArray) else [source]
        return _sliced(iter(chunks), None, batch_size, batch_bytes), len(source)
    if kind is not None:
        names = source.column_names  # None: an IterableDataset whose features are not known yet
        if names is not None:
            _check_column(names, text_column)
            source = source.select_columns([text_column])
        rows = len(source) if kind == "dataset" else None
        if kind == "iterable" and not _streams_arrow(source):
            dicts = _guarded(source.iter(batch_size=batch_size))
            return _value_batches(_column_values(dicts, text_column), text_column), None
        tables = _guarded(source.with_format("arrow").iter(batch_size=batch_size))
        return _sliced(_columns(tables, text_column), text_column, batch_size, batch_bytes), rows
    if isinstance(source, (pa.Table, pa.RecordBatch)):
        chunks = list(_columns([source], text_column))  # its column checked here, before any batch
        return _sliced(iter(chunks), text_column, batch_size, batch_bytes), source.num_rows
    try:
        reader = pa.RecordBatchReader.from_stream(source)
    except Exception as error:  # a stream of an array, not of a table's rows: a pandas or polars Series
        return _array_batches(source, error, text_column, batch_size, batch_bytes)
    _check_column(reader.schema.names, text_column)
    _check_text(reader.schema.field(text_column).type, f"column {text_column!r}")
    return _sliced(_columns(_guarded(reader), text_column), text_column, batch_size, batch_bytes), None


def _streams_arrow(dataset: object) -> bool:
    """Whether a streaming dataset's rows come as Arrow (from Parquet or JSON files, say) rather than
    as Python values (``from_generator``, a ``map``), which ``datasets`` turns into Arrow a row at a
    time and cannot join where their types differ (a null, or a number, beside strings), even when
    given the features: such rows are read as values, by the rule for values. ``datasets`` says so
    in a private attribute; without it, Arrow is tried."""
    examples = getattr(dataset, "_ex_iterable", None)
    return examples is None or getattr(examples, "iter_arrow", None) is not None


def _array_batches(
    source: object, error: Exception, text_column: str, batch_size: int, batch_bytes: int
) -> tuple[Iterator[Batch], int | None]:
    """The batches of an array that gives an Arrow stream (a pandas or polars Series). One of no
    type but null (empty, or every value null: pandas' object Series) holds no text yet: a string
    column of nulls. One Arrow cannot type (a pandas Series of objects, a number among the strings)
    is read value by value, so what is not text is a bad record named by its row."""
    try:
        array = pa.chunked_array(source)
    except Exception:
        if not hasattr(source, "__len__"):
            raise BpeDaskError(f"cannot read a {type(source).__name__} as Arrow: {describe(error)}") from None
        values = iter(source)
        chunks = iter(lambda: list(islice(values, batch_size)), [])
        return _value_batches(chunks, None), len(source)
    if pa.types.is_null(array.type):
        array = array.cast(pa.large_string())
    return arrow_batches(array, text_column, batch_size, batch_bytes)


def _column_values(dicts: Iterator[dict], text_column: str) -> Iterator[list]:
    """The values of ``text_column`` in batches of rows as dicts of lists (``datasets``' Python batches)."""
    for batch in dicts:
        _check_column(list(batch), text_column)
        yield batch[text_column]


def _value_batches(chunks: Iterator[list], column: str | None) -> Iterator[Batch]:
    """Lists of a table's or an array's values as batches, read by the rule for values (``documents``)."""
    first = 0
    for values in chunks:
        size = sum(len(v) for v in values if isinstance(v, (str, bytes)))  # about: a bad value adds none
        yield Batch(first, values, size, column, rows=True)
        first += len(values)


def _check_column(names: list[str], text_column: str) -> None:
    if text_column not in names:
        raise BpeDaskError(
            f"no column {text_column!r} (columns: {', '.join(names)}); text_column names "
            "the one holding the text"
        )


def _check_text(kind: pa.DataType, what: str) -> None:
    if not is_text_type(kind):
        raise BpeDaskError(f"{what} holds {kind}, not text ({TEXT_TYPES})")


def _guarded(items: Iterable, what: str = "the dataset") -> Iterator:
    """``items``, where an exception the source raises becomes one line saying so, and where: at which
    element of ``the iterable``, or after how many rows of a dataset's batches."""
    iterator, done = iter(items), 0
    while True:
        try:
            item = next(iterator)
        except StopIteration:
            return
        except Exception as error:
            where = f"at element {done}" if what == "the iterable" else f"after giving {done:,} rows"
            raise InputError(f"{what} raised {type(error).__name__} {where}: {describe(error)}") from error
        if what == "the iterable":
            done += 1
        else:
            done += item.num_rows if hasattr(item, "num_rows") else len(next(iter(item.values()), ()))
        yield item


def _columns(tables: Iterable, text_column: str) -> Iterator[pa.Array]:
    """The text column's chunks, table by table (a stream's schema is checked once it is known)."""
    for table in tables:
        _check_column(table.schema.names, text_column)
        column = table.column(text_column)
        _check_text(column.type, f"column {text_column!r}")
        yield from column.chunks if isinstance(column, pa.ChunkedArray) else [column]


def _sliced(
    chunks: Iterator[pa.Array], column: str | None, batch_size: int, batch_bytes: int
) -> Iterator[Batch]:
    """Each chunk cut (without copying) into batches of at most ``batch_size`` rows and, where its
    documents allow, ``batch_bytes`` of text."""
    first = 0
    for chunk in chunks:
        chunk = with_offsets(chunk)
        ends = np.cumsum(pc.binary_length(chunk).fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
        cuts, row = [0], 0
        while row < len(chunk):
            reach = int(np.searchsorted(ends, (ends[row - 1] if row else 0) + batch_bytes, "right"))
            row = min(len(chunk), row + batch_size, max(row + 1, reach))
            cuts.append(row)
        for start, end in pairwise(cuts):
            size = int(ends[end - 1] - (ends[start - 1] if start else 0))
            yield Batch(first + start, chunk.slice(start, end - start), size, column)
        first += len(chunk)
