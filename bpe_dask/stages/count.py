"""Counting (the map stage): one partition in, one word-count Parquet shard out.

Takes a partition (a ``ByteRange`` of text, or of records: ``records``) and the ``CountSettings`` of
the job; reads a text range as blocks cut at safe places (``blocks``), records as batches of
documents that each stand alone (a document longer than a block in pieces cut at safe places, so
memory stays bounded either way), counts their pre-tokens with one of two engines (the ``regex``
module through ``pretokenize``, the reference, or the compiled scanners of ``compiled.Counter``;
both give the same counts) and writes ``token: binary, count: int64``
(``large_binary`` past 2 GiB of tokens: ``counts_table``), sorted by token, to a shard. The
shard's name is derived from the range's identity and the settings, so a re-run reuses finished
shards and never confuses them with other work.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pyarrow.parquet as pq

from bpe_dask.engines import check_engine_supports, use_compiled
from bpe_dask.io.counts_table import words_bytes, write_counts
from bpe_dask.io.plan import Partition
from bpe_dask.io.records import BadRecords, Documents, iter_documents
from bpe_dask.io.storage import LOCAL, Store
from bpe_dask.io.text import ReadProgress, check_utf8_errors, iter_texts, iter_utf8
from bpe_dask.rules.pretokenize import Pretokenizer, split_pattern
from bpe_dask.stages.counters import COMPILED_MIN_BYTES, CompiledCounter, RegexCounter, SpecialsSeen
from bpe_dask.stages.read_events import ReadTally, reporter

# Part of every shard's name: raise it whenever a change to the code changes what a range counts
# to, so that shards an older version left in a work directory are counted again, not reused.
COUNTING_VERSION = 4  # 4: a shard records the special tokens its range held


@dataclass(frozen=True)
class CountSettings:
    """Everything besides the input bytes that decides the counts."""

    special_tokens: tuple[str, ...] = ()
    utf8_errors: str = "strict"  # or "replace": invalid UTF-8 becomes U+FFFD
    pattern: str = "gpt2"
    engine: str = field(default="auto", compare=False)  # how, not what: never part of the key

    def __post_init__(self) -> None:
        check_utf8_errors(self.utf8_errors)
        object.__setattr__(self, "pattern", split_pattern(self.pattern).spec)  # "cl100k_base" is "gpt4"
        check_engine_supports(self.engine, split_pattern(self.pattern).builtin, self.pattern)

    def pretokenizer(self) -> Pretokenizer:
        return _pretokenizer(self.special_tokens, self.pattern)

    def key(self) -> str:
        """A digest of everything that decides the counts besides the input bytes: as JSON, so that
        no two settings give one text (joined by NUL, the special token ``"errors=replace"`` read as
        the setting, and ``["a\\0b"]`` as ``["a", "b"]``, reusing another job's shards).

        >>> CountSettings(("errors=replace",)).key() != CountSettings((), "replace").key()
        True
        """
        settings = [split_pattern(self.pattern).regex, sorted(set(self.special_tokens)), self.utf8_errors]
        text = json.dumps([*settings, COUNTING_VERSION])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def recorded(self) -> dict:
        """The settings as the counts file records them (``counts_table.recorded_settings``)."""
        return {"special_tokens": list(self.special_tokens), "utf8_errors": self.utf8_errors,
                "pattern": self.pattern, "counting_version": COUNTING_VERSION}  # fmt: skip


@functools.lru_cache(maxsize=8)
def _pretokenizer(special_tokens: tuple[str, ...], pattern: str) -> Pretokenizer:
    """One per process and settings, so its cache of chunk pre-tokens lives from task to task."""
    return Pretokenizer(special_tokens, pattern)


@dataclass(frozen=True)
class Shard:
    """A finished map task: where its counts are and how many distinct words they hold."""

    path: str
    unique_words: int
    reused: bool
    bad_records: BadRecords = field(default_factory=BadRecords)
    specials: SpecialsSeen = field(default_factory=SpecialsSeen)
    text_bytes: int = 0  # the UTF-8 bytes of the text counted: the words' and the special tokens'
    read_bytes: int = 0  # the bytes read of an input whose size was not known (0 for any other)


# In a shard's metadata, so that a reused shard still reports them.
BAD_RECORDS_KEY = b"bpe_dask.bad_records"
SPECIALS_KEY = b"bpe_dask.special_tokens_seen"
TEXT_BYTES_KEY = b"bpe_dask.text_bytes"
READ_BYTES_KEY = b"bpe_dask.read_bytes"


def shard_path(shard_dir: str, byte_range: Partition, settings: CountSettings) -> str:
    return f"{shard_dir.rstrip('/')}/{byte_range.key()}-{settings.key()}.parquet"


def new_counter(settings: CountSettings, size: int = COMPILED_MIN_BYTES) -> RegexCounter | CompiledCounter:
    """A counter for the settings' pattern and about ``size`` bytes of text: the compiled scanner for
    a built-in pattern (``engine="auto"``: for enough text), else the ``regex`` module, which stays
    the reference."""
    pretokenizer = settings.pretokenizer()
    return CompiledCounter(pretokenizer) if counts_compiled(settings, size) else RegexCounter(pretokenizer)


def counts_compiled(settings: CountSettings, size: int) -> bool:
    """Whether ``new_counter`` gives the compiled scanner for ``size`` bytes of text."""
    return use_compiled(settings.engine, size, COMPILED_MIN_BYTES,
                        builtin_pattern=split_pattern(settings.pattern).builtin)  # fmt: skip


def counting_engine(settings: CountSettings, size: int) -> str:
    """Which engine ``new_counter`` picks for ``size`` bytes, in words, for the job's log."""
    if counts_compiled(settings, size):
        return f"the compiled {settings.pattern} scanner (numba)"
    return f"the regex module ({split_pattern(settings.pattern).name} pattern)"


def count_range(
    byte_range: Partition,
    settings: CountSettings,
    store: Store = LOCAL,
    block_size: int | None = None,
    counter: RegexCounter | CompiledCounter | None = None,
    bad: BadRecords | None = None,
    progress: ReadProgress | None = None,
) -> RegexCounter | CompiledCounter:
    """The pre-token counts of one partition, added into ``counter`` when given (``counter.table()``);
    records skipped as bad are added to ``bad``; ``progress`` hears how far the reading has got.
    ``block_size``: ``bpe-dask.block-size`` of ``store``."""
    block_size = block_size or store.size("block-size")
    pretokenizer = settings.pretokenizer()
    counter = new_counter(settings, byte_range.text_bytes) if counter is None else counter
    errors = settings.utf8_errors
    with _without_cycle_collection():
        if byte_range.file.has_records:
            batches = iter_documents(byte_range, store, utf8_errors=errors, bad=bad, batch_bytes=block_size,
                                     progress=progress)  # fmt: skip
            for documents in batches:
                add_documents(counter, documents, pretokenizer, block_size)
        elif isinstance(counter, CompiledCounter) and errors == "strict":  # its scanner reads UTF-8
            for data in iter_utf8(byte_range, pretokenizer, store, block_size=block_size, progress=progress):
                counter.add_utf8(data)
        else:
            for text in iter_texts(
                byte_range, pretokenizer, store, utf8_errors=errors, block_size=block_size, progress=progress
            ):
                counter.add(text)
    return counter


def add_documents(
    counter: RegexCounter | CompiledCounter, documents: Documents, pretokenizer: Pretokenizer, limit: int
) -> None:
    """Count the documents; one longer than ``limit`` bytes is counted in pieces of at most ``limit``
    bytes cut at safe places, as a text file is read in blocks, so that a long record takes no more
    memory than the same text in a text file (why the pieces count as the whole would:
    docs/exactness.md#long-texts-and-documents)."""
    ends = documents.ends
    starts = np.concatenate(([0], ends[:-1])).astype(np.int64)
    done = 0  # the documents before this one are counted
    for k in np.flatnonzero(ends - starts > limit).tolist():
        if k > done:
            counter.add_documents(_documents_slice(documents, starts, done, k))
        for piece in _safe_pieces(documents.data[starts[k] : ends[k]], pretokenizer, limit):
            counter.add_documents(Documents(piece, np.array([len(piece)], np.int64)))
        done = k + 1
    if done == 0:
        counter.add_documents(documents)
    elif done < len(documents):
        counter.add_documents(_documents_slice(documents, starts, done, len(documents)))


def _documents_slice(documents: Documents, starts: np.ndarray, first: int, end: int) -> Documents:
    """Documents ``first`` to ``end`` (not included) of the batch."""
    base = int(starts[first])
    return Documents(documents.data[base : int(documents.ends[end - 1])], documents.ends[first:end] - base)


def _safe_pieces(data: bytes, pretokenizer: Pretokenizer, limit: int) -> Iterator[bytes]:
    """A document's UTF-8 in pieces of at most ``limit`` bytes, each ending at the last safe cut that
    allows; where there is none for ``limit`` bytes, the piece runs on to the next cut. Only a
    window of about ``limit`` bytes is decoded at a time."""
    position = 0
    while len(data) - position > limit:
        end = _character_start_back(data, position + limit)  # the furthest a piece may end
        # Enough characters past ``end`` to judge a cut there (``context``, four bytes at most each).
        window_end = _character_start_back(data, min(len(data), end + 4 * pretokenizer.context + 4))
        window = memoryview(data)[position:window_end]
        text = str(window, "utf-8")
        hi = len(text) - len(str(window[end - position :], "utf-8"))  # ``end`` in characters
        cut = pretokenizer.last_cut(text, 1, hi + 1)
        if cut is None:  # rare: decode the rest and look on
            window = memoryview(data)[position:]
            text = str(window, "utf-8")
            cut = pretokenizer.first_cut(text, hi + 1, len(text))
            if cut is None:
                break
        size = len(window) - len(text[cut:].encode("utf-8"))  # the characters after the cut are few
        yield data[position : position + size]
        position += size
    yield data[position:]


def _character_start_back(data: bytes, p: int) -> int:
    """``p``, moved back past UTF-8 continuation bytes to where a character starts."""
    while 0 < p < len(data) and 0x80 <= data[p] < 0xC0:
        p -= 1
    return p


@contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """Counting makes millions of short-lived lists and no reference cycles; without this, the
    cycle collector runs again and again over everything a Dask worker holds. Reference counting
    still frees everything as it goes."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def count_range_to_shard(
    byte_range: Partition, settings: CountSettings, shard_dir: str, store: Store = LOCAL
) -> Shard:
    """Count one range and write its shard, or reuse the shard a previous run finished.

    A failure that may be transient (a dropped connection, say) is retried in place.
    """
    return store.retries.run(_count_range_to_shard, byte_range, settings, shard_dir, store)


def _count_range_to_shard(
    byte_range: Partition, settings: CountSettings, shard_dir: str, store: Store
) -> Shard:
    path = shard_path(shard_dir, byte_range, settings)
    fs, fs_path = store.fs(path)
    if fs.exists(fs_path):
        return read_shard(path, store)
    bad = BadRecords()
    progress = ReadTally(reporter(store, byte_range.size))
    counter = count_range(byte_range, settings, store, bad=bad, progress=progress)
    progress.check()  # the job stopped while this task read: write nothing into its removed work directory
    return write_shard(counter, bad, path, store, 0 if byte_range.file.sized else progress.read)


@dataclass
class ShardTotals:
    """What a job's finished shards hold between them: the records left out, the special tokens
    seen, the bytes of text counted, how many were reused, and what inputs of no known size held."""

    bad: BadRecords
    specials: SpecialsSeen
    text_bytes: int
    reused: int
    read_bytes: int

    @classmethod
    def of(cls, shards: Sequence[Shard]) -> ShardTotals:
        bad, specials = BadRecords(), SpecialsSeen()
        for shard in shards:
            bad.merge(shard.bad_records)
            specials.merge(shard.specials)
        return cls(bad, specials, sum(s.text_bytes for s in shards), sum(s.reused for s in shards),
                   sum(s.read_bytes for s in shards))  # fmt: skip


def read_shard(path: str, store: Store = LOCAL) -> Shard:
    """The finished shard ``path``, as a re-run reuses it: what its metadata says it counted."""
    fs, fs_path = store.fs(path)
    with fs.open(fs_path, "rb") as f:
        parquet = pq.ParquetFile(f)
        metadata = parquet.schema_arrow.metadata or {}
        bad, specials = (json.loads(metadata.get(key, b"{}")) for key in (BAD_RECORDS_KEY, SPECIALS_KEY))
        seen = SpecialsSeen(**specials)
        if TEXT_BYTES_KEY in metadata:
            text_bytes = int(metadata[TEXT_BYTES_KEY])
        else:  # a shard an earlier version wrote
            text_bytes = words_bytes(parquet.read()) + seen.bytes
        read_bytes = int(metadata.get(READ_BYTES_KEY, 0))
        return Shard(path, parquet.metadata.num_rows, True, BadRecords(**bad), seen, text_bytes, read_bytes)


def write_shard(
    counter: RegexCounter | CompiledCounter, bad: BadRecords, path: str, store: Store = LOCAL,
    read_bytes: int = 0,
) -> Shard:  # fmt: skip
    """Write what ``counter`` counted (and the records ``bad`` left out) as the shard ``path``;
    ``read_bytes``: what was read of an input whose size was not known."""
    table = counter.table().sort_by("token")  # the reduce merges runs
    text_bytes = words_bytes(table) + counter.specials.bytes
    metadata = {SPECIALS_KEY: json.dumps(vars(counter.specials)), TEXT_BYTES_KEY: str(text_bytes)}
    if read_bytes:
        metadata[READ_BYTES_KEY] = str(read_bytes)
    if bad.count:
        metadata[BAD_RECORDS_KEY] = json.dumps(vars(bad))
    write_counts(table.replace_schema_metadata(metadata), path, store)
    return Shard(path, table.num_rows, False, bad, counter.specials, text_bytes, read_bytes)
