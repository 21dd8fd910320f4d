"""What counting gives, whichever runner counted: the summed word counts, and what the input held.

``Counted`` is the one result of the count stage (``jobs.counting``), from threads of this process
(``jobs.on_threads``) or from map tasks on a cluster (``jobs.on_cluster``): the counts (a table, or
the URL of the Parquet file that holds them), how many parts there were and how many were reused,
the records skipped, the special tokens seen, the bytes of text counted, and the bytes read of
parts whose size was not known before (a web file served with no size, a collection's partition,
documents held in memory), which the input's bytes add to what its store told.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from bpe_dask.io.documents import BadRecords
from bpe_dask.stages.counters import SpecialsSeen
from bpe_dask.stages.shards import Shard


@dataclass
class Counted:
    """The summed counts and what the parts held between them."""

    counts: pa.Table | str | None  # a table, or the counts file's URL; None once handed to the merge
    parts: int
    reused: int = 0
    bad: BadRecords = field(default_factory=BadRecords)
    specials: SpecialsSeen = field(default_factory=SpecialsSeen)
    text_bytes: int = 0
    read_bytes: int = 0
    documents: int | None = None  # counted on threads here: how many documents
    threads: int | None = None  # counted on threads here: on how many
    shards: list[str] = field(default_factory=list)  # the map tasks' shards, in the work directory

    @classmethod
    def of_shards(cls, counts: pa.Table | str, shards: list[Shard]) -> Counted:
        """What the map tasks' shards hold between them, with their sum ``counts``."""
        bad, specials = BadRecords(), SpecialsSeen()
        for shard in shards:
            bad.merge(shard.bad_records)
            specials.merge(shard.specials)
        return cls(
            counts,
            len(shards),
            sum(s.reused for s in shards),
            bad,
            specials,
            sum(s.text_bytes for s in shards),
            sum(s.read_bytes for s in shards),
            shards=[s.path for s in shards],
        )

    def hand_over(self) -> pa.Table | str:
        """The counts, let go of here: the merge loop frees the table once its words are laid out."""
        counts, self.counts = self.counts, None
        return counts
