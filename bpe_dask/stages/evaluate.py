"""Evaluating (the map stage of ``bpe-dask evaluate``): one partition and tokenizers in, how many tokens
the partition is under each of them out; no ids are kept.

Takes a partition, the tokenizers to measure (which share one split pattern and one set of special
tokens: ``CountSettings``) and the job's store; reads the partition as counting does (text in blocks
cut at safe places, records as batches of documents), counts its pre-tokens once, then, for each
tokenizer, merges each distinct pre-token once and multiplies how many ids it makes by its count,
and adds one token per special token. That is exactly ``len(Tokenizer.encode(text))``, because
encoding merges every pre-token on its own, and it costs one count of the text however many
tokenizers (or vocabulary sizes of one) are measured, rather than one encoding each.

>>> from bpe_dask.io.inputs import InputFile
>>> from bpe_dask.io.plan import ByteRange
>>> from bpe_dask.tokenizer import Tokenizer
>>> _ = open("held-out.txt", "w").write("hi hi<|endoftext|>hi!")
>>> part = ByteRange(InputFile("held-out.txt", 21, "v1"), 0, 21)
>>> vocab = {**{i: bytes([i]) for i in range(256)}, 257: b"hi"}
>>> bytes_only = Tokenizer(vocab, [], ["<|endoftext|>"])
>>> merged = Tokenizer(vocab, [(b"h", b"i")], ["<|endoftext|>"])
>>> measure_range(part, [bytes_only, merged], CountSettings(("<|endoftext|>",)))
Measured(text_bytes=21, documents=0, tokens=(9, 6), bad_records=BadRecords(count=0, first=None))
>>> len(merged.encode("hi hi<|endoftext|>hi!"))
6
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from bpe_dask.io.plan import Partition
from bpe_dask.io.records import BadRecords, iter_documents
from bpe_dask.io.storage import LOCAL, Store
from bpe_dask.io.text import iter_texts
from bpe_dask.stages.count import CountSettings, add_documents, new_counter
from bpe_dask.tokenizer import Tokenizer


@dataclass(frozen=True)
class Measured:
    """A partition's UTF-8 text bytes, its documents (records; 0 for text files) and its tokens under
    each tokenizer, in the order given."""

    text_bytes: int
    documents: int
    tokens: tuple[int, ...]
    bad_records: BadRecords = field(default_factory=BadRecords)


def measure_range(
    byte_range: Partition, tokenizers: Sequence[Tokenizer], settings: CountSettings, store: Store = LOCAL
) -> Measured:
    """The tokens of one partition under each of ``tokenizers``, whose split pattern and special tokens
    are ``settings``'; a failure that may be transient is retried in place."""
    return store.retries.run(_measure_range, byte_range, tokenizers, settings, store)


def _measure_range(
    byte_range: Partition, tokenizers: Sequence[Tokenizer], settings: CountSettings, store: Store
) -> Measured:
    block_size = store.size("block-size")
    pretokenizer = settings.pretokenizer()
    counter = new_counter(settings, byte_range.text_bytes)
    bad = BadRecords()
    text_bytes = documents = 0
    if byte_range.file.has_records:
        batches = iter_documents(byte_range, store, utf8_errors=settings.utf8_errors, bad=bad,
                                 batch_bytes=block_size)  # fmt: skip
        for batch in batches:
            documents += len(batch)
            text_bytes += len(batch.data)
            add_documents(counter, batch, pretokenizer, block_size)
    else:
        errors = settings.utf8_errors
        for text in iter_texts(byte_range, pretokenizer, store, utf8_errors=errors, block_size=block_size):
            text_bytes += len(text.encode("utf-8"))  # the text as read: U+FFFD for invalid UTF-8 replaced
            counter.add(text)
    data, offsets, counts = word_arrays(counter.table())
    specials = counter.specials.count
    tokens = tuple(int(t.pretoken_lengths(data, offsets) @ counts) + specials for t in tokenizers)
    return Measured(text_bytes, documents, tokens, bad)


def word_arrays(table: pa.Table) -> tuple[bytes, np.ndarray, np.ndarray]:
    """A counts table's words back to back (UTF-8), where each starts and ends (the ``k``-th from
    ``offsets[k]`` to ``offsets[k + 1]``) and their counts, from Arrow's own buffers.

    >>> data, offsets, counts = word_arrays(pa.table({"token": [b"the", b" cat"], "count": [2, 1]}))
    >>> data[offsets[1] : offsets[2]], counts.tolist()
    (b' cat', [2, 1])
    """
    tokens = table.column("token").combine_chunks()
    counts = table.column("count").to_numpy().astype(np.int64, copy=False)
    if len(tokens) == 0:
        return b"", np.zeros(1, np.int64), counts
    wide = pa.types.is_large_binary(tokens.type)
    _, offsets_buffer, data_buffer = tokens.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int64 if wide else np.int32)
    offsets = offsets[tokens.offset : tokens.offset + len(tokens) + 1].astype(np.int64)
    return data_buffer.to_pybytes(), offsets, counts
