"""The two counting engines: text (or a batch of documents) in, pre-token counts as an Arrow table out.

``RegexCounter`` counts with the ``regex`` module through ``Pretokenizer``, the readable reference;
``CompiledCounter`` with the compiled scanner of a built-in pattern (``compiled.Counter``). Both
give the same counts, which the tests hold them to; ``stages.count.new_counter`` picks one.

>>> from bpe_dask.rules.pretokenize import Pretokenizer
>>> counter = RegexCounter(Pretokenizer())
>>> counter.add("the cat the")
>>> counter.table().sort_by("token").to_pylist()
[{'token': b' cat', 'count': 1}, {'token': b' the', 'count': 1}, {'token': b'the', 'count': 1}]
"""

from __future__ import annotations

import pyarrow as pa

from bpe_dask.io.counts_table import counts_table, tokens_array
from bpe_dask.io.records import Documents
from bpe_dask.rules.pretokenize import Pretokenizer

# Below this much text, loading the compiled scanner (about half a second) costs more than it saves.
COMPILED_MIN_BYTES = 4 * 2**20


class RegexCounter:
    """Pre-token counts in a dict, from ``Pretokenizer.count``: the readable reference path."""

    def __init__(self, pretokenizer: Pretokenizer) -> None:
        self.pretokenizer, self.counts = pretokenizer, {}

    def add(self, text: str) -> None:
        self.pretokenizer.count(text, self.counts)

    def add_documents(self, documents: Documents) -> None:
        self.pretokenizer.count_documents(documents.texts(), self.counts)

    def table(self) -> pa.Table:
        return counts_table(self.counts)


class CompiledCounter:
    """Pre-token counts from the compiled scanner, kept in flat arrays (``compiled.Counter``)."""

    def __init__(self, pretokenizer: Pretokenizer) -> None:
        from bpe_dask.compiled import Counter

        self.pretokenizer, self.counts = pretokenizer, Counter(pretokenizer.pattern.name)

    def add(self, text: str) -> None:
        data = text.encode("utf-8")
        self.counts.add(data, self.pretokenizer.piece_bounds(data))

    def add_documents(self, documents: Documents) -> None:
        bounds, _ = self.pretokenizer.document_bounds(documents.data, documents.ends)
        self.counts.add(documents.data, bounds)

    def table(self) -> pa.Table:
        """The counts as Arrow columns ``token`` (binary, or large_binary past 2 GiB) and ``count``
        (int64), the compiled counter's arena shared."""
        data, offsets, counts = self.counts.arrays()
        return pa.table({"token": tokens_array(data, offsets), "count": pa.array(counts, pa.int64())})
