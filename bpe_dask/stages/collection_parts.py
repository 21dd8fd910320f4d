"""A partition of a Dask collection (a DataFrame column, a Bag) in, its documents out: counted into a
word-count shard, or encoded into a shard of ids.

A task of the collection's own graph hands over the partition's data: a pandas Series (a partition
of a Dask Series) or the list or iterator of a Bag's partition. Each element is a document, counted
or encoded on its own as a Parquet record is: no pre-token crosses documents, special tokens inside
are split out. A string (or bytes of UTF-8) is a document; a null (None, NaN, pandas' NA) or
anything else is a bad record: one line naming the collection, the partition, the element and what
it holds, or, with ``on_bad_record="skip"``, left out and counted in ``BadRecords``. A Series of
valid text with no nulls goes on as Arrow's own buffers, with no Python object per document. The
documents come in batches of about ``batch_bytes``; a document longer than that is counted in
pieces (``count.add_documents``). A partition's shards are named after its Dask key and the
settings (``CollectionPart.key``), so a re-run of the same graph reuses them. Nothing here imports
pandas: a Series is told by its type's module.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from bpe_dask.errors import InputError
from bpe_dask.io.records import BadRecords, Documents
from bpe_dask.io.sample import first_texts
from bpe_dask.io.storage import LOCAL, Store
from bpe_dask.rules.special_tokens import valid_text
from bpe_dask.stages.count import CountSettings, Shard, add_documents, new_counter, write_shard
from bpe_dask.stages.encode import EncodedShard, dtype_for, write_encoded_shard
from bpe_dask.tokenizer import Tokenizer

UNIT = "partitions"  # what an encoded shard's start and end count


@dataclass(frozen=True)
class CollectionPart:
    """Partition ``index`` of ``collection`` (its description, for messages), whose Dask key is
    ``dask_key``; ``on_bad_record`` says what a bad element does.

    >>> part = CollectionPart("the Dask Bag 'docs'", 2, "('docs-5f1e', 2)")
    >>> part.where, len(part.key())
    ("the Dask Bag 'docs', partition 2", 32)
    """

    collection: str
    index: int
    dask_key: str
    on_bad_record: str = "error"

    @property
    def where(self) -> str:
        return f"{self.collection}, partition {self.index}"

    def key(self) -> str:
        """A digest of what the partition holds, as Dask names it (the same graph gives the same
        key), and how it is read: its shards' names."""
        text = f"dask collection\0{self.dask_key}\0{self.on_bad_record}"
        return hashlib.sha256(text.encode()).hexdigest()[:32]


def part_documents(
    data: Iterable, part: CollectionPart, utf8_errors: str = "strict", bad: BadRecords | None = None,
    batch_bytes: int = 8 * 2**20,
) -> Iterator[Documents]:  # fmt: skip
    """The partition's documents in order, in batches of about ``batch_bytes``; bad elements are
    added to ``bad`` (``on_bad_record="skip"``) or stop it with one line.

    >>> part = CollectionPart("the Dask Bag 'docs'", 0, "k", on_bad_record="skip")
    >>> bad = BadRecords()
    >>> [d.texts() for d in part_documents(["a b", None, b"c", 7], part, bad=bad)], bad.count
    ([['a b', 'c']], 2)
    >>> bad.first
    "the Dask Bag 'docs', partition 0, element 1: null"
    >>> list(part_documents(["a", 7], CollectionPart("the Dask Bag 'docs'", 3, "k")))
    Traceback (most recent call last):
    bpe_dask.errors.InputError: the Dask Bag 'docs', partition 3, element 1: an int, not a string ...
    """
    bad = BadRecords() if bad is None else bad
    if _is_series(data):
        array = _arrow_text(data)
        if array is not None:
            return _array_documents(array, batch_bytes)
        data = data.astype(object)  # one element at a time: NA and NaN stay themselves
    return _element_documents(data, part, utf8_errors, bad, batch_bytes)


def sample_part(data: Iterable, part: CollectionPart, size: int) -> list[str]:
    """The partition's first documents, about ``size`` bytes of text (bad elements left out, invalid
    UTF-8 as U+FFFD): the sample a split pattern of one's own is checked on.

    >>> sample_part(["ab", None, "cd", "ef"], CollectionPart("the Dask Bag 'docs'", 0, "k"), 3)
    ['ab', 'cd']
    """
    lenient = replace(part, on_bad_record="skip")
    return first_texts(part_documents(data, lenient, "replace", BadRecords(), batch_bytes=size), size)


def _is_series(data: object) -> bool:
    """Whether ``data`` is a pandas Series, told by its type's module first: another of the worker's
    threads may be importing pandas (pyarrow does, the first time it makes an array), and its
    half-made module has no ``Series`` yet. Whoever made a Series imported pandas, so ``import``
    here only waits for an import under way to finish."""
    if not any(kind.__module__.startswith("pandas.") for kind in type(data).__mro__):
        return False
    import pandas

    return isinstance(data, pandas.Series)


def _arrow_text(series) -> pa.Array | None:
    """The Series as an Arrow array of text, if it is valid text with no nulls; else None."""
    try:
        array = pa.array(series, from_pandas=True)
    except (pa.ArrowException, UnicodeError, TypeError, ValueError):
        return None  # mixed types, lone surrogates: element by element
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    kinds = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary)
    if array.null_count or not any(kind(array.type) for kind in kinds):
        return None
    try:
        array.cast(pa.large_string()).validate(full=True)  # bytes, or strings Arrow took unchecked
    except pa.ArrowInvalid:
        return None
    return array.cast(pa.large_binary())


def _array_documents(array: pa.Array, batch_bytes: int) -> Iterator[Documents]:
    """Documents from an Arrow array of valid UTF-8, a batch of rows at a time, from its buffers."""
    offsets = np.frombuffer(array.buffers()[1], np.int64)[array.offset : array.offset + len(array) + 1]
    data = array.buffers()[2]
    rows = len(array)
    total = int(offsets[-1] - offsets[0])
    step = max(1, batch_bytes * rows // max(1, total))
    for first in range(0, rows, step):
        ends = offsets[first : min(rows, first + step) + 1]
        chunk = b"" if data is None else bytes(memoryview(data)[ends[0] : ends[-1]])
        yield Documents(chunk, (ends[1:] - ends[0]).astype(np.int64))


def _element_documents(
    elements: Iterable, part: CollectionPart, utf8_errors: str, bad: BadRecords, batch_bytes: int
) -> Iterator[Documents]:
    batch: list[bytes] = []
    size = 0
    for i, element in enumerate(elements):
        try:
            encoded = _utf8(element, utf8_errors)
        except _BadElement as problem:
            where = f"{part.where}, element {i}"
            if part.on_bad_record == "error":
                raise InputError(
                    f'{where}: {problem} (on_bad_record="skip" leaves such elements out)'
                ) from None
            bad.add(f"{where}: {problem}")
            continue
        batch.append(encoded)
        size += len(encoded)
        if size >= batch_bytes:
            yield Documents.joined(batch)
            batch, size = [], 0
    if batch:
        yield Documents.joined(batch)


class _BadElement(Exception):
    """What is wrong with an element (the reader stops at it, or skips it)."""


def _utf8(element: object, utf8_errors: str) -> bytes:
    if isinstance(element, str):
        try:
            return element.encode("utf-8")
        except UnicodeEncodeError:
            if utf8_errors == "strict":
                raise _BadElement("text holding a lone surrogate, which is not valid Unicode") from None
            return valid_text(element).encode("utf-8")  # one U+FFFD a lone surrogate, as encoding does
    if isinstance(element, (bytes, bytearray, memoryview)):
        data = bytes(element)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as error:
            if utf8_errors == "strict":
                raise _BadElement(f"invalid UTF-8 at byte {error.start} (utf8_errors=\"replace\" substitutes "
                                  "U+FFFD)") from None  # fmt: skip
            return data.decode("utf-8", "replace").encode("utf-8")
        return data
    if element is None or (isinstance(element, float) and element != element) or _is_pandas_null(element):
        raise _BadElement("null")
    kind = type(element).__name__
    raise _BadElement(f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}, not a string")


def _is_pandas_null(element: object) -> bool:
    return type(element).__name__ in ("NAType", "NaTType") and type(element).__module__.startswith("pandas")


def count_part_to_shard(
    data: Iterable, part: CollectionPart, settings: CountSettings, path: str, store: Store = LOCAL
) -> Shard:
    """Count the partition's documents and write its shard ``path`` (the write is retried in place
    if it fails in a way that may pass). The counter is the compiled one where ``new_counter``'s
    rule picks it for the partition's text: its first batch, or more than one batch."""
    block = store.size("block-size")
    bad = BadRecords()
    batches = part_documents(data, part, settings.utf8_errors, bad, block)
    first = next(batches, None)
    second = next(batches, None) if first is not None else None
    size = (len(first.data) if first is not None else 0) if second is None else 2 * block
    counter = new_counter(settings, size)
    pretokenizer = settings.pretokenizer()
    for documents in itertools.chain([d for d in (first, second) if d is not None], batches):
        add_documents(counter, documents, pretokenizer, block)
    return store.retries.run(write_shard, counter, bad, path, store)


def encode_part_to_shard(
    data: Iterable, part: CollectionPart, tokenizer: Tokenizer, path: str, store: Store = LOCAL,
    utf8_errors: str = "strict", separator: str | None = None,
) -> EncodedShard:  # fmt: skip
    """Encode the partition's documents, each followed by ``separator``'s id, into the shard
    ``path`` (its start and end are the partition's index and the next: ``unit`` "partitions")."""
    dtype = np.dtype(dtype_for(tokenizer))
    bad = BadRecords()
    parts, text_bytes = [], 0
    for documents in part_documents(data, part, utf8_errors, bad, store.size("block-size")):
        parts.append(tokenizer.encode_utf8_documents(documents.data, documents.ends, separator, dtype))
        text_bytes += len(documents.data)
    where = (part.collection, part.index, part.index + 1, UNIT)
    return store.retries.run(write_encoded_shard, parts, dtype, path, where, bad, text_bytes, store)
