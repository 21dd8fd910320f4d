"""What a job's input is: the one place that tells, whatever the job.

``source_of`` takes what a job was given and gives its ``Source``: files (paths, URLs, globs, as
text, JSON Lines or Parquet: ``FileSource``), a Dask collection (a DataFrame column or a Bag:
``CollectionSource``), or documents held in this process (an iterable, Arrow text, a Hugging Face
dataset: ``MemorySource``). The jobs never ask which: every source answers the same questions.
``plan`` gives its ``Part``s (``sources.part``), which read as documents; ``reads_on`` says where
they can be read (``"here"``: documents held in this process; ``"cluster"``: a collection, on its
cluster; ``"anywhere"``: files, here when they are small); ``size`` and ``largest_part`` say how
large it is before it is read (``UNKNOWN_SIZE``: taken as large), ``known_bytes`` what its stores
told, ``totals`` and ``unit`` what a progress bar counts; ``sample`` gives its first documents,
which a split pattern of one's own is checked on, ``first_look`` reads its start as a task will,
``data`` what a part's task is handed, and ``stable_keys`` whether its parts' shards may be reused
by a later run.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from bpe_dask.errors import BpeDaskError
from bpe_dask.io.documents import RecordPolicy
from bpe_dask.io.in_memory import holds_arrow_text
from bpe_dask.io.inputs import Reading
from bpe_dask.io.storage import Store, lower_scheme
from bpe_dask.sources.collection import CollectionSource, is_collection
from bpe_dask.sources.files import FileSource
from bpe_dask.sources.memory import MemorySource

Source = FileSource | CollectionSource | MemorySource


def source_of(
    inputs: Any,
    store: Store,
    reading: Reading,
    utf8_errors: str = "strict",
    *,
    exclude: Sequence[str | None] = (),
    outputs: Sequence[str | None] = (),
    documents: bool = False,
    batch_size: int = 8192,
    length: int | None = None,
) -> Source:
    """The source ``inputs`` are: with ``documents``, an iterable whose elements are the documents
    (in batches of ``batch_size``; ``length`` of them, if known); else a Dask collection, Arrow text
    held here, or the files a path, URL or glob (or a list of them) names, what the job writes
    (``exclude``, ``outputs``) left out.

    >>> from bpe_dask.io.inputs import Reading
    >>> source_of(["the cat", "sat"], Store(), Reading(), documents=True).shown
    ['list']
    """
    policy = RecordPolicy(reading.on_bad_record, utf8_errors)
    if documents:
        return MemorySource.of_iterable(inputs, batch_size, policy, length)
    if is_collection(inputs):
        return CollectionSource.of(inputs, reading.text_column, policy)
    if holds_arrow_text(inputs):
        return MemorySource.of_arrow(inputs, reading.text_column, policy)
    return FileSource.find(input_list(inputs), store, reading, exclude, outputs)


def input_urls(inputs: Any) -> list[str]:
    """The paths and URLs among ``inputs``, when they are paths (none for other sources)."""
    try:
        return input_list(inputs)
    except BpeDaskError:
        return []


def input_list(inputs: Any) -> list[str]:
    """A path, URL or glob, or a list of them, as a list of strings (a URL's scheme in lower case).

    >>> from pathlib import Path
    >>> input_list(Path("a.txt")), input_list(["S3://b/*.txt", "c.txt"])
    (['a.txt'], ['s3://b/*.txt', 'c.txt'])
    """
    if isinstance(inputs, (str, os.PathLike)):
        return [lower_scheme(os.fspath(inputs))]
    paths = isinstance(inputs, Sequence) and all(isinstance(i, (str, os.PathLike)) for i in inputs)
    if not paths or not inputs:
        raise BpeDaskError(f"inputs must be a path or URL, or a list of them; got {inputs!r}")
    return [lower_scheme(os.fspath(i)) for i in inputs]
