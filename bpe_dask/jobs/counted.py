"""What counting gives, whichever runner counted: the summed word counts, and what the input held.

``CountResult`` is the one result of the count stage (``jobs.counting``), from threads of this
process (``jobs.on_threads``) or from map tasks on a cluster (``jobs.on_cluster``), and what
``count_words`` hands back: the counts (a table, or the Parquet file ``path`` that holds them), how
many partitions there were and how many were reused, the records skipped, the special tokens seen,
the bytes of text counted, and the bytes read of parts whose size was not known before (a web file
served with no size, a collection's partition, documents held in memory), which the input's bytes
add to what its store told (``input_bytes``, once ``count_source`` knows the source).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from bpe_dask.io.counts_table import read_counts
from bpe_dask.io.documents import BadRecords
from bpe_dask.io.storage import Store
from bpe_dask.stages.counters import SpecialsSeen
from bpe_dask.stages.shards import Shard


@dataclass
class CountResult:
    """The word counts (in memory, or in the Parquet file ``path``) and how they were made.

    >>> from bpe_dask import count_words
    >>> _ = open("corpus.txt", "w").write("the cat the hat")
    >>> result = count_words("corpus.txt")
    >>> result.table().column_names, result.table().num_rows, result.report()["input_bytes"]
    (['token', 'count'], 4, 15)
    """

    partitions: int
    partitions_reused: int = 0
    bad: BadRecords = field(default_factory=BadRecords)  # the records skipped
    specials: SpecialsSeen = field(default_factory=SpecialsSeen)  # the special tokens the inputs held
    text_bytes: int = 0  # the UTF-8 bytes of the text counted (decompressed; records' texts only)
    read_bytes: int = 0  # the bytes read of parts of no known size
    documents: int | None = None  # counted on threads here: how many documents
    threads: int | None = None  # counted on threads here: on how many
    shards: list[str] = field(default_factory=list, repr=False)  # the map tasks', in the work directory
    input_files: list[str] = field(default_factory=list)  # the inputs as named to the user
    input_bytes: int = 0  # what their stores told, and ``read_bytes``
    seconds: float = 0.0
    path: str | None = None
    store: Store = field(default_factory=Store, repr=False)  # where ``path`` is
    _table: pa.Table | None = field(default=None, repr=False)

    @property
    def bad_records_skipped(self) -> int:
        return self.bad.count

    @classmethod
    def of_shards(cls, counts: pa.Table | str, shards: list[Shard]) -> CountResult:
        """What the map tasks' shards hold between them, with their sum ``counts`` (a table, or the
        counts file's URL)."""
        bad, specials = BadRecords(), SpecialsSeen()
        for shard in shards:
            bad.merge(shard.bad_records)
            specials.merge(shard.specials)
        table, path = (None, counts) if isinstance(counts, str) else (counts, None)
        return cls(
            len(shards),
            sum(s.reused for s in shards),
            bad,
            specials,
            sum(s.text_bytes for s in shards),
            sum(s.read_bytes for s in shards),
            shards=[s.path for s in shards],
            path=path,
            _table=table,
        )

    def table(self) -> pa.Table:
        if self._table is None:
            self._table = read_counts(self.path, self.store)
        return self._table

    def hand_over(self) -> pa.Table | None:
        """The table, let go of here: the merge loop frees it once its words are laid out."""
        table, self._table = self._table, None
        return table

    def report(self) -> dict:
        return {
            "inputs": self.input_files,
            "input_bytes": self.input_bytes,
            "text_bytes": self.text_bytes,
            "partitions": self.partitions,
            "partitions_reused": self.partitions_reused,
            "partitions_computed": self.partitions - self.partitions_reused,
            "bad_records_skipped": self.bad.count,
            "special_tokens_seen": self.specials.count,
        }
