"""Reducing: many word-count shards in, one word-count table out.

Takes the shard paths the map tasks wrote (each sorted by token); gives one Parquet table with the
same schema, sorted the same way, in which each word appears once with its total count. Built as a
tree of Dask tasks, each merging a few sorted runs (``sum_sorted``), so no single process (least
of all the client) ever holds more than ``FAN_IN`` tables at once. The runs are summed by the
compiled merge of sorted runs, or by Arrow's group-by and sort, the reference, for fewer than
``COMPILED_MIN_WORDS`` words (the engine rule of ``bpe_dask.engines``: a small job loads no compiled
code).
"""

from __future__ import annotations

from collections.abc import Sequence

import dask
import numpy as np
import pyarrow as pa
from dask.base import tokenize
from dask.delayed import Delayed

from bpe_dask.engines import use_compiled
from bpe_dask.io.counts_table import LARGE_COUNTS_SCHEMA, as_arrays, read_counts, tokens_array, write_counts
from bpe_dask.io.storage import LOCAL, Store
from bpe_dask.stages.counters import SpecialsSeen
from bpe_dask.stages.read_events import stop_if_cancelled
from bpe_dask.stages.shards import Shard

# Each combine holds its inputs and their sum: 16 shards of a million words is about 1 GB. Fewer
# levels mean fewer Parquet round trips, each a write and a read of every word.
FAN_IN = 16
COMPILED_MIN_WORDS = 50_000  # words in the runs of one sum; below this, loading compiled code costs more


def combine(
    parts: Sequence[Shard | str],
    out: str | None,
    store: Store = LOCAL,
    *,
    settings: dict | None = None,
    overwrite: bool = True,
    shards: Sequence[Shard] = (),
    engine: str = "auto",
    work: bool = False,
) -> str | pa.Table:
    """Sum the counts of ``parts`` (shards or earlier sums, each sorted by token) into the Parquet
    file ``out``, sorted the same way, with ``engine`` (``sum_sorted``); the last combine records the
    counting ``settings`` in it,
    with the special tokens all the ``shards`` held (``special_tokens_seen``, for the compression
    curve of a later ``merge``). With no ``out`` the sum is returned, for a client that wants it in
    memory anyway. ``work``: ``out`` is in the work directory (``io.publish.output_file``).

    Sorted counts make the same input give the same file, and the merge loop run faster: words
    that share bytes sit together in memory, so a pair's holders do too.
    """
    if settings is not None and shards:
        seen = SpecialsSeen()
        for shard in shards:
            seen.merge(shard.specials)
        settings = {**settings, "special_tokens_seen": vars(seen)}
    return store.retries.run(_combine, parts, out, store, settings, overwrite, engine, work)


def _combine(
    parts: Sequence[Shard | str],
    out: str | None,
    store: Store,
    settings: dict | None,
    overwrite: bool,
    engine: str,
    work: bool,
) -> str | pa.Table:
    paths = [p.path if isinstance(p, Shard) else p for p in parts]
    table = sum_sorted([read_counts(p, store) for p in paths], engine)  # shards are sorted by token
    if out is None:
        return table
    stop_if_cancelled()  # its job stopped while it summed: nothing to write into its work directory
    write_counts(table, out, store, settings, overwrite, work)
    return out


def sum_sorted(tables: list[pa.Table], engine: str = "auto") -> pa.Table:
    """One table, sorted by token, each token once with the sum of its counts in ``tables`` (each
    sorted by token): by the compiled merge of sorted runs (``engine="numba"``, or ``"auto"`` from
    ``COMPILED_MIN_WORDS`` words), else by Arrow's group-by and sort."""
    tables = [table for table in tables if table.num_rows]
    if use_compiled(engine, sum(table.num_rows for table in tables), COMPILED_MIN_WORDS):
        from bpe_dask.compiled import sum_sorted as sum_sorted_runs

        data, offsets, counts = sum_sorted_runs([as_arrays(table) for table in tables])
    elif tables:
        joined = pa.concat_tables([table.cast(LARGE_COUNTS_SCHEMA) for table in tables])  # binary and large
        summed = joined.group_by("token").aggregate([("count", "sum")]).sort_by("token")
        data, offsets, counts = as_arrays(pa.table({"token": summed["token"], "count": summed["count_sum"]}))
    else:
        data, offsets, counts = np.zeros(0, np.uint8), np.zeros(1, np.int64), np.zeros(0, np.int64)
    return pa.table({"token": tokens_array(data, offsets), "count": pa.array(counts, pa.int64())})


def reduce_tree(
    shards: Sequence[Delayed],
    out: str | None,
    work_dir: str,
    settings: dict,
    store: Store = LOCAL,
    overwrite: bool = True,
    engine: str = "auto",
) -> tuple[Delayed, list[str]]:
    """A Dask graph that sums ``shards`` level by level into ``out`` (sorted by token, ``settings``
    recorded) with ``engine``, or into a table the graph gives back when there is no ``out``.

    Also gives the paths of the partial sums it writes on the way, to delete afterwards.
    """
    level: list[Delayed] = list(shards)
    partial_sums: list[str] = []
    while len(level) > FAN_IN:
        groups = [level[i : i + FAN_IN] for i in range(0, len(level), FAN_IN)]
        paths = [_partial_path(work_dir, group) for group in groups]
        partial_sums += paths
        level = [
            dask.delayed(combine, pure=True)(group, path, store, engine=engine, work=True)
            for group, path in zip(groups, paths, strict=True)
        ]
    in_work = out is not None and out.startswith(f"{work_dir.rstrip('/')}/")  # the counts a worker merges
    final = dask.delayed(combine, pure=True)(
        level,
        out,
        store,
        settings=settings,
        overwrite=overwrite,
        shards=list(shards),
        engine=engine,
        work=in_work,
    )
    return final, partial_sums


def _partial_path(work_dir: str, group: Sequence[Delayed]) -> str:
    """A name as unique as the group's inputs, so concurrent jobs never share one."""
    return f"{work_dir.rstrip('/')}/reduce/{tokenize(*group)}.parquet"
