"""The count job: inputs in, their word counts out, in memory or as a Parquet file.

``count_words`` finds the source, decides where to count it (small files with no cluster asked for,
and documents held in memory, here; the rest on a cluster) and counts it (``counting``): the counts
come back as a ``CountResult``, written to ``out`` when given. ``count_from_iterator`` is
``count_words`` of the documents an iterable gives.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from bpe_dask.io.in_memory import DEFAULT_BATCH_SIZE
from bpe_dask.io.outputs import check_output_file
from bpe_dask.io.storage import absolute
from bpe_dask.jobs.counted import CountResult
from bpe_dask.jobs.counting import count_source, counting_run, start_counting
from bpe_dask.jobs.on_cluster import forget_shards
from bpe_dask.jobs.options import JobOptions, PathLike, positive_int


def count_words(
    inputs: Any, special_tokens: Sequence[str] = (), *, out: PathLike | None = None, **options
) -> CountResult:
    """The word counts of ``inputs``: a path, URL or glob, or a list of them, or any other source
    (``sources.source``: a Dask DataFrame column or Bag, Arrow text held here).

    ``out`` names a Parquet file (or URL) for the counts.
    ``options`` are ``JobOptions`` fields: ``chunk_size``, ``client``, ``scheduler``, ``workers``,
    ``work_dir``, ``storage_options``, ``utf8_errors``, ``in_process``, ``overwrite``, ...

    >>> _ = open("corpus.txt", "w").write("the cat<|endoftext|>the hat")
    >>> counts = count_words("corpus.txt", ["<|endoftext|>"]).table()  # small: counted in-process
    >>> sorted(zip(counts["token"].to_pylist(), counts["count"].to_pylist()))
    [(b' cat', 1), (b' hat', 1), (b'the', 2)]
    """
    return count_with(inputs, JobOptions.of(special_tokens=special_tokens, **options), out)


def count_from_iterator(
    iterable: Iterable[str | bytes],
    special_tokens: Sequence[str] = (),
    *,
    pattern: str = "gpt2",
    batch_size: int = DEFAULT_BATCH_SIZE,
    length: int | None = None,
    out: PathLike | None = None,
    **options,
) -> CountResult:
    """``count_words`` of the documents an iterable gives (``str``, or ``bytes`` of UTF-8), counted
    in this process as ``train_from_iterator`` counts them; ``out`` as ``count_words``'s.

    >>> counts = count_from_iterator(["the cat", b"the hat"]).table()
    >>> sorted(zip(counts["token"].to_pylist(), counts["count"].to_pylist()))
    [(b' cat', 1), (b' hat', 1), (b'the', 2)]
    """
    opts = JobOptions.of(special_tokens=special_tokens, pattern=pattern, **options)
    iterating = {"documents": True, "batch_size": positive_int(batch_size, "batch_size"), "length": length}
    return count_with(iterable, opts, out, iterating)


def count_with(
    inputs: Any, opts: JobOptions, out: PathLike | None = None, iterating: dict | None = None
) -> CountResult:
    """``count_words`` with its options checked: the count job's steps."""
    started = time.perf_counter()
    out = absolute(out) if out else None
    iterating = iterating or {}
    job, source, where = start_counting(inputs, opts, out, check_output_file, iterating, writes_out=True)
    with counting_run(job, source, where, out, outputs=[out]) as run:
        counted = count_source(job, source, where, run, out, job.options.overwrite)  # 4. count
    forget_shards(source, counted.shards, job.store)  # the counts are out (or handed back): done
    counted.seconds = time.perf_counter() - started
    return counted
