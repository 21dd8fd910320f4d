"""Counting (the map stage): one part in, its pre-token counts out, and a word-count Parquet shard.

Takes a part of any source (``sources.part``) and the ``CountSettings`` of the job; reads it as
documents (a text in blocks cut at safe places, records as documents that each stand alone, one
longer than a block counted in pieces cut at safe places, so memory stays bounded either way),
counts their pre-tokens with one of two engines (the ``regex`` module through ``pretokenize``,
the reference, or the compiled scanners of ``compiled.PretokenCounter``; both give the same counts) and
writes ``token: binary, count: int64`` (``large_binary`` past 2 GiB of tokens: ``counts_table``),
sorted by token, to a shard. The shard's name is made of the part's key and the settings, so a
re-run reuses finished shards and never confuses them with other work.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bpe_dask.engines import check_engine_supports, use_compiled
from bpe_dask.io.documents import BadRecords, Documents
from bpe_dask.io.storage import LOCAL, Store
from bpe_dask.io.text import ReadProgress, check_utf8_errors
from bpe_dask.rules.pretokenize import Pretokenizer, split_pattern
from bpe_dask.sources.part import Part, PartReading, read_bytes
from bpe_dask.stages.counters import COMPILED_MIN_BYTES, CompiledCounter, RegexCounter
from bpe_dask.stages.read_events import reporter
from bpe_dask.stages.shards import Shard, read_shard, write_shard

PretokenCounter = RegexCounter | CompiledCounter

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
        return {
            "special_tokens": list(self.special_tokens),
            "utf8_errors": self.utf8_errors,
            "pattern": self.pattern,
            "counting_version": COUNTING_VERSION,
        }


@functools.lru_cache(maxsize=8)
def _pretokenizer(special_tokens: tuple[str, ...], pattern: str) -> Pretokenizer:
    """One per process and settings, so its cache of chunk pre-tokens lives from task to task."""
    return Pretokenizer(special_tokens, pattern)


def new_counter(settings: CountSettings, size: int = COMPILED_MIN_BYTES) -> PretokenCounter:
    """A counter for the settings' pattern and about ``size`` bytes of text: the compiled scanner for
    a built-in pattern (``engine="auto"``: for enough text), else the ``regex`` module, which stays
    the reference."""
    pretokenizer = settings.pretokenizer()
    return CompiledCounter(pretokenizer) if counts_compiled(settings, size) else RegexCounter(pretokenizer)


def counts_compiled(settings: CountSettings, size: int) -> bool:
    """Whether ``new_counter`` gives the compiled scanner for ``size`` bytes of text."""
    return use_compiled(
        settings.engine, size, COMPILED_MIN_BYTES, builtin_pattern=split_pattern(settings.pattern).builtin
    )


def counting_engine(settings: CountSettings, size: int) -> str:
    """Which engine ``new_counter`` picks for ``size`` bytes, in words, for the job's log."""
    if counts_compiled(settings, size):
        return f"the compiled {settings.pattern} scanner (numba)"
    return f"the regex module ({split_pattern(settings.pattern).name} pattern)"


@dataclass
class Seen:
    """What a part held: its documents, and their bytes of text."""

    documents: int = 0
    text_bytes: int = 0


def count_part(
    part: Part,
    settings: CountSettings,
    store: Store = LOCAL,
    counter: PretokenCounter | None = None,
    bad: BadRecords | None = None,
    progress: ReadProgress | None = None,
    data: Any = None,
    seen: Seen | None = None,
    block_size: int | None = None,
) -> PretokenCounter:
    """The pre-token counts of one part, added into ``counter`` when given (``counter.table()``);
    records skipped as bad are added to ``bad``; ``progress`` hears how far the reading has got;
    ``data`` is what the part's task was handed (``Part.documents``); ``seen`` tallies the
    documents and text read (all of it, counted or not); ``block_size`` is
    ``bpe-dask.block-size`` of ``store`` unless given. Without a ``counter``, the
    engine is picked for the part's text: its size where known, else its first two batches."""
    bad = BadRecords() if bad is None else bad
    pretokenizer = settings.pretokenizer()
    text_bytes = part.text_bytes
    held: list[Documents] = []
    if counter is None and text_bytes is not None:
        counter = new_counter(settings, text_bytes)
    compiled = isinstance(counter, CompiledCounter)
    reading = PartReading(pretokenizer, store, settings.utf8_errors, compiled, block_size)
    batches = part.documents(reading, bad, progress, data)
    if counter is None:  # a part of unknown size: its first batch, or more than one, decides
        held = list(itertools.islice(batches, 2))
        size = sum(len(d.data) for d in held) if len(held) < 2 else 2 * reading.block_size
        counter = new_counter(settings, size)
    limit = reading.block_size
    with _without_cycle_collection():
        for documents in itertools.chain(held, batches):
            if seen is not None:
                seen.documents += len(documents)
                seen.text_bytes += len(documents.data)
            if part.stand_alone:
                add_documents(counter, documents, pretokenizer, limit)
            else:  # a text's blocks, cut at safe places already
                counter.add_documents(documents)
    return counter


def add_documents(
    counter: PretokenCounter, documents: Documents, pretokenizer: Pretokenizer, limit: int
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


def count_part_to_shard(
    part: Part, settings: CountSettings, path: str, store: Store = LOCAL, data: Any = None
) -> Shard:
    """Count one part and write its shard ``path``, or reuse the shard a previous run finished; a
    failure that may be transient (a dropped connection, say) is retried in place."""
    return store.retries.run(_count_part_to_shard, part, settings, path, store, data)


def _count_part_to_shard(part: Part, settings: CountSettings, path: str, store: Store, data: Any) -> Shard:
    fs, fs_path = store.fs(path)
    if fs.exists(fs_path):
        return read_shard(path, store)
    bad = BadRecords()
    progress = reporter(store, part.size or 0)
    counter = count_part(part, settings, store, bad=bad, progress=progress, data=data)
    progress.check()  # the job stopped while this task read: write nothing into its removed work directory
    return write_shard(counter, bad, path, store, read_bytes(part, progress.read))
