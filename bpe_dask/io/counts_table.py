"""The word-count table: pre-token counts in, a Parquet file out, and back, checked.

Takes a ``{pre-token: count}`` dict or a table; gives Parquet with the schema ``token: binary``
(UTF-8 bytes of a pre-token; ``large_binary`` past 2 GiB of them), ``count: int64``. The same
schema serves the map tasks' shards, the reduce's partial sums, and the counts file ``bpe-dask
count`` writes; ``read_counts`` is the one reader for all of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bpe_dask.errors import BpeDaskError
from bpe_dask.io.documents import flat_bytes
from bpe_dask.io.publish import output_file
from bpe_dask.io.storage import LOCAL, Store
from bpe_dask.io.written import METADATA_PREFIX

COUNTS_SCHEMA = pa.schema([("token", pa.binary()), ("count", pa.int64())])
# Arrow's binary type finds its bytes by int32 offsets: a column holds at most this many bytes of
# tokens. A table with more (a task with over 2 GiB of distinct pre-tokens) has its tokens as
# large_binary, with int64 offsets, and every reader takes both. Tests lower it.
BINARY_LIMIT = 2**31 - 1
LARGE_COUNTS_SCHEMA = pa.schema([("token", pa.large_binary()), ("count", pa.int64())])
SETTINGS_KEY = METADATA_PREFIX + b"counting"  # Parquet metadata: the settings the counts were made with


def words_bytes(table: pa.Table) -> int:
    """The UTF-8 bytes of the text the counted words stand for: each word's bytes times its count.

    >>> words_bytes(counts_table({"the": 2, " cat": 1}))
    10
    """
    tokens, counts = table.column("token"), table.column("count")
    return pc.sum(pc.multiply(pc.binary_length(tokens), counts)).as_py() or 0


def counts_table(counts: Mapping[str, int]) -> pa.Table:
    """Word counts in the table schema."""
    tokens = [word.encode("utf-8") for word in counts]
    schema = LARGE_COUNTS_SCHEMA if sum(map(len, tokens)) > BINARY_LIMIT else COUNTS_SCHEMA
    arrays = [pa.array(tokens, schema.field("token").type), pa.array(list(counts.values()), pa.int64())]
    return pa.Table.from_arrays(arrays, schema=schema)


def tokens_array(data: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """The tokens ``data[offsets[k]:offsets[k + 1]]`` (uint8 bytes, offsets from 0) as an Arrow
    array over ``data`` itself: binary, or large_binary past ``BINARY_LIMIT`` bytes."""
    large = int(offsets[-1]) > BINARY_LIMIT
    offsets = offsets.astype(np.int64 if large else np.int32)
    kind = pa.large_binary() if large else pa.binary()
    return pa.Array.from_buffers(kind, len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def as_arrays(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The table's tokens back to back (uint8), where each starts and the last ends (int64), and the
    counts (int64): Arrow's own buffers where it can, with no Python object per word."""
    data, offsets = flat_bytes(table.column("token").cast(pa.large_binary()).combine_chunks())  # past 2 GiB
    return data, offsets, table.column("count").to_numpy().astype(np.int64)


def word_chunks(table: pa.Table) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The table's words batch by batch, as ``as_arrays`` gives a whole table's, over Arrow's own
    buffers: no more than one batch's offsets is copied at a time."""
    for batch in table.to_batches():
        if batch.num_rows:
            data, offsets = flat_bytes(batch.column("token"))
            yield data, offsets, batch.column("count").to_numpy()


def token_bytes(table: pa.Table) -> int:
    """The bytes of the table's tokens (each word once), from Arrow's offsets.

    >>> token_bytes(counts_table({"the": 2, " cat": 1}))
    7
    """
    total = 0
    for chunk in table.column("token").chunks:
        if len(chunk):
            _, offsets, _ = chunk.buffers()
            kind = np.int64 if pa.types.is_large_binary(chunk.type) else np.int32
            ends = np.frombuffer(offsets, kind)[[chunk.offset, chunk.offset + len(chunk)]]
            total += int(ends[1] - ends[0])
    return total


def write_counts(
    table: pa.Table,
    url: str,
    store: Store = LOCAL,
    settings: dict | None = None,
    overwrite: bool = True,
    work: bool = False,
) -> None:
    """Write the table under a temporary name and commit it when complete (``publish.output_file``:
    exclusively unless ``overwrite``; ``work``: a file of the work directory); ``settings`` (what
    the counts were made with) go into the file's metadata."""
    if settings is not None:
        table = table.replace_schema_metadata({SETTINGS_KEY: json.dumps(settings)})
    with output_file(url, store, overwrite, work=work) as f:
        pq.write_table(table, f)


def recorded_settings(url: str, store: Store = LOCAL) -> dict | None:
    """The counting settings a counts file records, or None for a table bpe-dask did not write."""
    fs, path = store.fs(url)
    try:
        with fs.open(path, "rb") as f:
            metadata = pq.ParquetFile(f).schema_arrow.metadata or {}
        return json.loads(metadata[SETTINGS_KEY]) if SETTINGS_KEY in metadata else None
    except (OSError, ValueError, pa.ArrowException):
        return None  # a directory of files, or not Parquet: read_counts says what is wrong


def count_rows(url: str, store: Store = LOCAL) -> int:
    fs, path = store.fs(url)
    with fs.open(path, "rb") as f:
        return pq.ParquetFile(f).metadata.num_rows


def read_counts(url: str, store: Store = LOCAL) -> pa.Table:
    """A word-count table (a Parquet file or a directory of them), checked against the schema."""
    fs, path = store.fs(url)
    if not fs.exists(path):
        raise BpeDaskError(f"counts not found: {url}")
    try:
        table = pq.read_table(path, filesystem=fs)
    except (pa.ArrowException, OSError) as error:
        raise BpeDaskError(f"{url}: not a readable Parquet counts table ({error})") from None
    try:
        large = table.schema.field("token").type in (pa.large_binary(), pa.large_string())
        table = table.select(COUNTS_SCHEMA.names).cast(LARGE_COUNTS_SCHEMA if large else COUNTS_SCHEMA)
    except (KeyError, pa.ArrowException):
        raise BpeDaskError(
            f"{url}: counts need columns token (binary or large_binary) and count (int64); found "
            + ", ".join(f"{field.name} ({field.type})" for field in table.schema)
        ) from None
    if table.column("token").null_count or table.column("count").null_count:
        raise BpeDaskError(f"{url}: counts hold empty (null) values")
    if table.num_rows and pc.min(table.column("count")).as_py() < 1:
        raise BpeDaskError(f"{url}: counts must be positive")
    return table
