"""The runner on a cluster: a source's parts in, one Dask map task per part out, and for counting the
reduce that sums their shards.

``map_parts`` makes a task per part of any source (a collection's part is handed its partition,
computed on the cluster from the collection's own graph) with keys of this run's own: an earlier
run's results for the same parts may still be held by the scheduler, and their shards removed
since. Where a part's shard is finished already, a task reads it instead (the part is then not
computed: ``finished`` lists the shards the work directory holds). ``count_on_cluster`` is the map
and the reduce tree (``stages.reduce``): the shards summed into the counts file ``out``, or into a
table handed back; then the partial sums are removed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

import dask
from dask.base import tokenize
from dask.delayed import Delayed
from distributed import Client

from bpe_dask.cluster.progress import MapProgress
from bpe_dask.cluster.tasks import run_tasks
from bpe_dask.io.outputs import remove_files
from bpe_dask.io.storage import Store
from bpe_dask.jobs.counted import CountResult
from bpe_dask.sources.part import Part
from bpe_dask.sources.source import Source
from bpe_dask.stages.count import CountSettings, count_part_to_shard
from bpe_dask.stages.reduce import reduce_tree
from bpe_dask.stages.shards import read_shard, shard_path


def map_parts(
    source: Source,
    parts: Sequence[Part],
    task: Callable,
    args: Sequence[Any],
    label: str,
    paths: Sequence[str],
    store: Store,
    reuse: Callable | None = None,
) -> list[Delayed]:
    """A task per part: ``task(part, *args, path, store, data=...)`` writing ``paths[k]``, or, where
    the work directory holds that file already, ``reuse(path, part, store, *args)``: the part is then
    not computed (a collection's partition would be, before its task could see the file)."""
    run = uuid.uuid4().hex
    finished = finished_files(paths, store) if reuse is not None else set()
    tasks = []
    for part, path in zip(parts, paths, strict=True):
        name = f"{label}-{tokenize(part.key(), path, store, run)}"
        if path in finished:
            tasks.append(dask.delayed(reuse, pure=True)(path, part, store, *args, dask_key_name=name))
            continue
        data = source.data(part)
        tasks.append(dask.delayed(task, pure=True)(part, *args, path, store, data=data, dask_key_name=name))
    return tasks


def finished_files(paths: Sequence[str], store: Store) -> set[str]:
    """Those of ``paths`` that exist, with their sidecars where they have one, listed once per folder."""
    found: set[str] = set()
    for folder in {path.rpartition("/")[0] for path in paths}:
        fs, where = store.fs(folder)
        fs.invalidate_cache(where)  # an object store's listing cached by an earlier job of this process
        try:
            names = {name.rstrip("/").rpartition("/")[2] for name in fs.ls(where, detail=False)}
        except FileNotFoundError:
            continue
        found |= {f"{folder}/{name}" for name in names}
    sidecar_found = lambda path: path.endswith(".parquet") or f"{path}.json" in found  # noqa: E731
    return {path for path in paths if path in found and sidecar_found(path)}


def count_on_cluster(
    client: Client,
    source: Source,
    parts: Sequence[Part],
    settings: CountSettings,
    work_dir: str,
    store: Store,
    out: str | None = None,
    overwrite: bool = True,
    progress: MapProgress | None = None,
) -> CountResult:
    """Map and reduce on the cluster: the summed counts, written to ``out`` (its URL is handed back)
    or, with no ``out``, handed back as a table; ``overwrite``: whether the sum may replace a file
    ``out`` holds."""
    shard_dir = f"{work_dir.rstrip('/')}/shards"
    paths = [shard_path(shard_dir, part, settings.key()) for part in parts]
    shards = map_parts(source, parts, count_part_to_shard, [settings], "count", paths, store, _reuse)
    final, partial_sums = reduce_tree(
        shards, out, work_dir, settings.recorded(), store, overwrite=overwrite, engine=settings.engine
    )
    sizes = [part.size for part in parts]  # None: told by the shard, once counted
    *done, counts = run_tasks(client, [*shards, final], progress, sizes, lambda shard: (shard.text_bytes, 0))
    remove_files(partial_sums, store)
    return CountResult.of_shards(counts, done)


def _reuse(path: str, part: Part, store: Store, settings: CountSettings):
    return read_shard(path, store)


def forget_shards(source: Source, paths: Sequence[str], store: Store) -> None:
    """Remove a finished job's shards (and their sidecars) where the source's part keys need not
    change with its data (``stable_keys``): only a re-run of a job that did not finish (interrupted,
    failed) may reuse them; a later one would count the old text."""
    if not source.stable_keys:
        remove_files([*paths, *(f"{path}.json" for path in paths)], store)
