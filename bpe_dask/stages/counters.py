"""The two counting engines: text (or a batch of documents) in, pre-token counts as an Arrow table out.

``RegexCounter`` counts with the ``regex`` module through ``Pretokenizer``, the readable reference;
``CompiledCounter`` with the compiled scanner of a built-in pattern (``compiled.Counter``). Both
give the same counts, which the tests hold them to; ``stages.count.new_counter`` picks one. Each
also tallies the special tokens it splits out (``SpecialsSeen``): one token each in the training
data, which the compression curve counts.

>>> from bpe_dask.rules.pretokenize import Pretokenizer
>>> counter = RegexCounter(Pretokenizer())
>>> counter.add("the cat the")
>>> counter.sorted_table().to_pylist()
[{'token': b' cat', 'count': 1}, {'token': b' the', 'count': 1}, {'token': b'the', 'count': 1}]
>>> counter = RegexCounter(Pretokenizer(["<|endoftext|>"]))
>>> counter.add("the<|endoftext|>cat<|endoftext|>")
>>> counter.specials
SpecialsSeen(count=2, bytes=26)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from bpe_dask.io.counts_table import counts_table, tokens_array
from bpe_dask.io.documents import Documents
from bpe_dask.rules.pretokenize import Pretokenizer

# Below this much text, loading the compiled scanner (about half a second) costs more than it saves.
COMPILED_MIN_BYTES = 4 * 2**20


@dataclass
class SpecialsSeen:
    """How many special tokens the counted text held, and their UTF-8 bytes."""

    count: int = 0
    bytes: int = 0

    def merge(self, other: SpecialsSeen) -> None:
        self.count += other.count
        self.bytes += other.bytes

    def add_gaps(self, bounds: np.ndarray, is_special: np.ndarray | None = None) -> None:
        """The special tokens between the pieces ``bounds`` (``[start, end, start, ...]``): each gap
        between two pieces, or those where ``is_special`` holds."""
        gaps = bounds[2:-1:2] - bounds[1:-1:2]
        if is_special is not None:
            gaps = gaps[is_special]
        self.count += len(gaps)
        self.bytes += int(gaps.sum())


class RegexCounter:
    """Pre-token counts in a dict, from ``Pretokenizer.count``: the readable reference path."""

    def __init__(self, pretokenizer: Pretokenizer) -> None:
        self.pretokenizer, self.counts, self.specials = pretokenizer, {}, SpecialsSeen()

    def add(self, text: str) -> None:
        self.pretokenizer.count_pieces(self._pieces([text]), self.counts)

    def add_documents(self, documents: Documents) -> None:
        # One call for the batch (each document split on its own: no pre-token crosses into the next).
        self.pretokenizer.count_pieces(self._pieces(documents.texts()), self.counts)

    def _pieces(self, texts: Iterable[str]) -> Iterator[str]:
        """The text between special tokens, streamed; the special tokens are tallied on the way."""
        specials = self.specials
        for text in texts:
            for segment, special in self.pretokenizer.split(text):
                if special:
                    specials.count += 1
                    specials.bytes += len(segment.encode("utf-8"))
                else:
                    yield segment

    def table(self) -> pa.Table:
        return counts_table(self.counts)

    def sorted_table(self) -> pa.Table:
        """``table`` sorted by token, as a shard holds it."""
        return self.table().sort_by("token")


class CompiledCounter:
    """Pre-token counts from the compiled scanner, kept in flat arrays (``compiled.Counter``)."""

    def __init__(self, pretokenizer: Pretokenizer) -> None:
        from bpe_dask.compiled import Counter

        self.pretokenizer, self.counts = pretokenizer, Counter(pretokenizer.pattern.name)
        self.specials = SpecialsSeen()

    def add(self, text: str) -> None:
        self.add_utf8(text.encode("utf-8"))

    def add_utf8(self, data: bytes) -> None:
        """``add`` for text given as UTF-8 (``io.text.iter_utf8``'s blocks)."""
        bounds = self.pretokenizer.piece_bounds(data)
        self.specials.add_gaps(bounds)
        self.counts.add(data, bounds)

    def add_documents(self, documents: Documents) -> None:
        if len(documents) == 1:  # one document is a text: its pieces lie between special tokens only
            self.add_utf8(documents.data)
            return
        bounds, is_boundary = self.pretokenizer.document_bounds(documents.data, documents.ends)
        self.specials.add_gaps(bounds, ~is_boundary)
        self.counts.add(documents.data, bounds)

    def table(self) -> pa.Table:
        """The counts as Arrow columns ``token`` (binary, or large_binary past 2 GiB) and ``count``
        (int64), the compiled counter's arena shared."""
        data, offsets, counts = self.counts.arrays()
        return pa.table({"token": tokens_array(data, offsets), "count": pa.array(counts, pa.int64())})

    def sorted_table(self) -> pa.Table:
        """``table`` sorted by token, as a shard holds it: by each token's first eight bytes as a
        number first, then by its bytes where those tie (the same order: zeros pad a shorter token,
        and a zero byte sorts first), in about half the time of a sort by bytes alone."""
        keyed = self.table().append_column("prefix", pa.array(self.counts.prefixes()))
        return keyed.sort_by([("prefix", "ascending"), ("token", "ascending")]).drop_columns("prefix")
