"""Parquet footers: a Parquet input file in, its footer out, read once, wherever the file is.

Takes a file (its URL, name and size, as ``io.inputs.InputFile`` has them) and the job's
``Store``; gives its ``Footer``: the file's metadata (row groups, schema, the key-value metadata
that says bpe-dask wrote it), read from the end of the file, and whether the file's task reads it
``whole``. A web server that serves no byte ranges (it answers a range request with the whole file,
as ``python -m http.server`` does), or says no size, cannot be asked for the end alone: the file is
downloaded whole, in one streamed request, as pandas and pyarrow read such a file, up to the
setting ``bpe-dask.whole-file-limit``, since it is held in memory; a larger one is refused in one
line that names the setting. Its one task downloads it once more (``io.records``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from bpe_dask.errors import BpeDaskError
from bpe_dask.io.storage import Store, describe
from bpe_dask.io.web import is_http, read_whole, serves_ranges, too_large


class ParquetInput(Protocol):
    """What a footer read needs to know of an input file (``io.inputs.InputFile`` has it)."""

    url: str
    size: int
    sized: bool

    @property
    def name(self) -> str: ...


@dataclass(frozen=True)
class Footer:
    """A Parquet file's footer, and whether its task reads the file ``whole``, in one request: from
    a web server that serves no byte ranges (or says no size), as the footer, at its end, was read."""

    metadata: pq.FileMetaData
    whole: bool = False


def read_footer(file: ParquetInput, store: Store) -> Footer:
    """The footer of the Parquet ``file``: read from the end of the file, or, from a web server that
    serves no byte ranges, from the file downloaded whole, up to ``bpe-dask.whole-file-limit``.
    A read that fails in a way that may pass is tried again (``io.retries``)."""
    fs, path = store.fs(file.url)
    whole = is_http(file.url) and not (file.sized and store.retries.run(serves_ranges, fs, path))
    limit = store.size("whole-file-limit")
    if whole and file.sized and file.size > limit:  # refused before a byte is downloaded
        raise too_large(file.name, file.size, limit)
    try:
        if whole:
            data = store.retries.run(read_whole, fs, path, limit, file.name)
            return Footer(pq.ParquetFile(pa.BufferReader(data)).metadata, whole=True)
        return Footer(store.retries.run(_footer, fs, path))
    except BpeDaskError:
        raise
    except Exception as error:
        raise BpeDaskError(f"cannot read {file.name} as Parquet: {describe(error)}") from None


def _footer(fs: fsspec.AbstractFileSystem, path: str) -> pq.FileMetaData:
    with fs.open(path, "rb") as f:
        return pq.ParquetFile(f).metadata
