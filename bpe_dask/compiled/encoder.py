"""A tokenizer's compiled encoder: its merges in flat arrays and caches of encoded pre-tokens in, the
ids of text, documents and batches of texts out.

Takes a tokenizer's byte ids, its merges by ids, a built-in pattern's name and its special tokens' ids;
gives the ids the pure-Python ``Tokenizer.encode`` gives (the tests hold it to that), by the loops of
``encode``: of UTF-8 pieces (``Encoder.encode``), of documents that each stand alone, split at the
special tokens of a ``Pretokenizer`` (``encode_documents``), of many texts in one call, as lists
(``encode_texts``) or one array (``encode_flat``), and the ids of counted pre-tokens, each alone
(``pretoken_ids``).

The merge tables are read-only once built and shared; a cache is written as it is read, so each call
borrows one of its own (``Encoder.encode``): threads may share an encoder.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from itertools import pairwise

import numpy as np

from bpe_dask.compiled.compile_once import readonly
from bpe_dask.compiled.encode import (
    CACHE_ENTRIES,
    CACHED_MAX,
    ENCODE_LOOPS,
    FIRST_ENTRIES,
    FRESH,
    FULL,
    keep_found,
    pretoken_ids,
    split_of,
)
from bpe_dask.compiled.merge_pretoken import EMPTY, SCRATCH, SHORT, fill_pairs
from bpe_dask.compiled.scan import pattern_number, table_of
from bpe_dask.compiled.word_table import AHEAD, PENDING, RECORD, grown_table, table
from bpe_dask.rules.pretokenize import Pretokenizer
from bpe_dask.rules.special_tokens import utf8

ROOM = 2 * CACHED_MAX  # the fewest bytes and ids a cache's arenas hold: those of any pre-token it keeps
BETWEEN = np.int64(1) << 62  # marks a text's end in one call over many texts: no token's id


class Encoder:
    """A tokenizer's merges in flat arrays, shared, and caches of encoded pre-tokens, one per call under
    way, for ``encode``.

    Takes the id of each byte (``byte_ids[b]``), the merges as ``{(left id, right id): (rank, merged
    id)}``, a built-in pattern's name and the special tokens' ids (``special_ids``, which the text
    and documents may hold); ``encode`` gives the ids of UTF-8 pieces. ``cache_entries`` (by default
    the class's) is how many pre-tokens each cache holds at most: a new one holds ``first_entries``,
    and doubles as it fills.

    >>> encoder = Encoder(list(range(256)), {(104, 105): (0, 256)}, "gpt2")
    >>> encoder.encode(b"hi hi", np.array([0, 5]), np.array([], np.int64)).tolist()
    [256, 32, 256]
    """

    cache_entries, first_entries = CACHE_ENTRIES, FIRST_ENTRIES

    def __init__(
        self,
        byte_ids: list[int],
        merges: dict[tuple[int, int], tuple[int, int]],
        pattern: str = "gpt2",
        cache_entries: int | None = None,
        special_ids: Mapping[str, int] | None = None,
    ) -> None:
        self.pattern = pattern_number(pattern)
        self.classes = table_of(self.pattern)
        self.special_ids = dict(special_ids or {})
        self.byte_ids = np.array(byte_ids, np.int64)
        size = 1 << max(4, (2 * len(merges) + 1).bit_length())
        self.keys = np.full(size, EMPTY, np.int64)
        self.pair_ranks = np.zeros(size, np.int64)
        self.pair_merged = np.zeros(size, np.int64)
        pairs = np.array(list(merges), np.int64).reshape(-1, 2)
        values = np.array(list(merges.values()), np.int64).reshape(-1, 2)
        left, right, ranks, merged = pairs[:, 0], pairs[:, 1], values[:, 0], values[:, 1]
        if merges:
            fill_pairs(left, right, ranks, merged, self.keys, self.pair_ranks, self.pair_merged)
        order = np.argsort(ranks, kind="stable")
        size = int(max(self.byte_ids.max(), merged.max(initial=0))) + 1
        # Where a long pre-token may be cut, and where the merges of superwords start.
        self.split = split_of(left[order], right[order], ranks[order], merged[order], self.byte_ids, size)
        # What the loops read of the merges, in the order they take it.
        self.tables = (self.byte_ids, self.keys, self.pair_ranks, self.pair_merged, self.split)
        ids = [*byte_ids, *(merged for _, merged in merges.values()), *self.special_ids.values()]
        # Each id's Python int, made once (``encode_texts``).
        self._ints = np.arange(max(ids) + 1).astype(object)
        if cache_entries is not None:
            self.cache_entries = cache_entries
        self._idle: list[tuple[np.ndarray, ...]] = []  # caches no call holds, kept warm for the next
        self._lock = threading.Lock()

    def _new_cache(self) -> tuple[np.ndarray, ...]:
        """A ``word_table`` of records, its byte arena, id arena and their use (arena use, id-arena use,
        entries), and the ring of pre-tokens scanned ahead."""
        entries = min(self.first_entries, self.cache_entries)
        arena = np.empty(max(16 * entries, ROOM), np.uint8)
        ids_arena = np.empty(max(4 * entries, ROOM), np.int64)
        pending = np.empty(AHEAD * PENDING, np.int64)
        return table(2 * entries), arena, ids_arena, np.zeros(3, np.int64), pending

    def _room(self, cache: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        """``cache`` with room for one more pre-token: its full arrays doubled, or, where one is as
        large as ``cache_entries`` lets it grow, only the pre-tokens found again kept (``keep_found``;
        emptied if those would fill three quarters of it)."""
        records, arena, ids_arena, used, pending = cache
        full = [
            (2 * (used[2] + 1) * RECORD > len(records), len(records) >= 2 * self.cache_entries * RECORD),
            (used[0] + CACHED_MAX > len(arena), len(arena) >= max(32 * self.cache_entries, ROOM)),
            (used[1] + CACHED_MAX > len(ids_arena), len(ids_arena) >= max(4 * self.cache_entries, ROOM)),
        ]
        if any(is_full and largest for is_full, largest in full):
            kept = table(len(records) // RECORD), np.empty_like(arena), np.empty_like(ids_arena)
            keep_found(records, arena, ids_arena, used, *kept)
            if (
                4 * used[2] > 3 * self.cache_entries
                or 4 * used[0] > 3 * len(arena)
                or 4 * used[1] > 3 * len(ids_arena)
            ):
                records[:], used[:] = 0, 0  # most of it recurs: keeping it would leave too little room
                return records, arena, ids_arena, used, pending
            return *kept, used, pending
        if full[0][0]:
            records = grown_table(records)
        if full[1][0]:
            arena = np.concatenate([arena, np.empty_like(arena)])
        if full[2][0]:
            ids_arena = np.concatenate([ids_arena, np.empty_like(ids_arena)])
        return records, arena, ids_arena, used, pending

    def encode(self, data: bytes, bounds: np.ndarray, specials: np.ndarray) -> np.ndarray:
        """The ids (int64) of UTF-8 ``data`` whose pieces between special tokens are ``bounds``, with
        ``specials[k]`` between pieces ``k`` and ``k + 1`` (none where it is negative).

        The compiled loop runs without the GIL and writes the cache it reads, so each call holds a
        cache no other call holds: one idle since an earlier call, or a new one. As many exist as
        calls have ever been under way at once, and each keeps what it learned for the next call."""
        with self._lock:
            cache = self._idle.pop() if self._idle else None
        if cache is None:
            cache = self._new_cache()
        view = readonly(np.frombuffer(data, np.uint8))
        out = np.empty(len(data) + len(specials), np.int64)  # a byte is at most one id
        parts, ranks = np.empty(SHORT, np.int64), np.empty(SHORT, np.int64)
        scratch = np.empty(SCRATCH * CACHED_MAX, np.int64)
        n, piece, position = 0, 0, FRESH
        try:
            while piece < len(bounds) // 2:
                n, piece, position, need = ENCODE_LOOPS[self.pattern](
                    view, bounds, specials, piece, position, out, n, parts, ranks, scratch, self.classes,
                    *self.tables, *cache,
                )  # fmt: skip
                if need == FULL:  # the cache had no room left: make some, and go on
                    cache = self._room(cache)
                elif need:  # a long pre-token: merge it in a scratch large enough, and go on
                    scratch = np.empty(2 * need, np.int64)
            return out[:n]
        finally:
            with self._lock:
                self._idle.append(cache)

    def encode_documents(
        self, data: bytes, ends: np.ndarray, between_documents: int, pretokenizer: Pretokenizer
    ) -> np.ndarray:
        """The ids (int64) of UTF-8 documents back to back in ``data``, the ``k``-th ending at
        ``ends[k]``, the special tokens ``pretokenizer`` splits out as their ids, in one call: no
        pre-token crosses from one document into the next, and ``between_documents`` (unless
        negative) is written after each but the last.

        >>> encoder = Encoder(list(range(256)), {}, "gpt2", special_ids={"<|e|>": 257})
        >>> encoder.encode_documents(b"a<|e|>b", np.array([1, 7]), 99, Pretokenizer(["<|e|>"])).tolist()
        [97, 99, 257, 98]
        """
        bounds, is_boundary = pretokenizer.document_bounds(data, ends)
        gaps = zip(bounds[1:-1:2].tolist(), bounds[2:-1:2].tolist(), is_boundary.tolist(), strict=True)
        special_id = self.special_ids
        specials = [between_documents if edge else special_id[data[a:b].decode()] for a, b, edge in gaps]
        return self.encode(data, bounds, np.array(specials, np.int64))

    def _marked(self, texts: list[str], pretokenizer: Pretokenizer) -> tuple[np.ndarray, np.ndarray]:
        """The ids of all of ``texts`` in one call, ``BETWEEN`` after each but the last, and where the
        marks are."""
        encoded = [utf8(text) for text in texts]
        ends = np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)))
        ids = self.encode_documents(b"".join(encoded), ends, BETWEEN, pretokenizer)
        return ids, np.flatnonzero(ids == BETWEEN)

    def encode_texts(self, texts: list[str], pretokenizer: Pretokenizer) -> list[list[int]]:
        """The ids of each of ``texts``, all in one call (``BETWEEN`` marks where a text ends), cut
        apart where a mark falls, the special tokens ``pretokenizer`` splits out as their ids.

        Each id is the encoder's own Python int: lists of ids share their ints rather than make one
        per token, which takes a third of the time (under the GIL, which a thread making ints holds)
        and 8 bytes a token rather than 40.

        >>> encoder = Encoder(list(range(256)), {(104, 105): (0, 256)}, "gpt2", special_ids={"<|e|>": 257})
        >>> encoder.encode_texts(["a", "", "hi<|e|>hi"], Pretokenizer(["<|e|>"]))
        [[97], [], [256, 257, 256]]
        """
        ids, marks = self._marked(texts, pretokenizer)
        ids[marks] = 0  # an id, so that all are taken at once; each list leaves the marks out
        ints = self._ints.take(ids)
        return [ints[a + 1 : b].tolist() for a, b in pairwise([-1, *marks.tolist(), len(ids)])]

    def encode_flat(self, texts: list[str], pretokenizer: Pretokenizer) -> tuple[np.ndarray, np.ndarray]:
        """The ids of ``texts`` back to back (uint32), all in one call, and where each text's ids start
        and the last's end (int64, one more than the texts): no Python int per token.

        >>> encoder = Encoder(list(range(256)), {(104, 105): (0, 256)}, "gpt2", special_ids={"<|e|>": 257})
        >>> ids, offsets = encoder.encode_flat(["a", "", "hi<|e|>hi"], Pretokenizer(["<|e|>"]))
        >>> ids.tolist(), offsets.tolist()
        ([97, 256, 257, 256], [0, 1, 1, 4])
        """
        ids, marks = self._marked(texts, pretokenizer)
        offsets = np.concatenate([[0], marks - np.arange(len(marks)), [len(ids) - len(marks)]])
        # Narrowed before the marks go: the second copy moves half the bytes.
        return np.delete(ids.astype(np.uint32), marks), offsets.astype(np.int64)

    def pretoken_ids(self, data: bytes | np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ids of pre-tokens, their UTF-8 back to back in ``data``, the ``k``-th from ``offsets[k]``
        to ``offsets[k + 1]``: the ids back to back (int32), and where each pre-token's start, and the
        last ends (int64, from 0).

        >>> encoder = Encoder(list(range(256)), {(104, 105): (0, 256)}, "gpt2")
        >>> ids, ends = encoder.pretoken_ids(b"hi hi", np.array([0, 2, 5]))
        >>> ids.tolist(), ends.tolist()
        ([256, 32, 256], [0, 1, 3])
        """
        buffer = readonly(np.frombuffer(data, np.uint8) if not isinstance(data, np.ndarray) else data)
        offsets = np.asarray(offsets, np.int64)
        ids, ends = np.empty(len(buffer), np.int32), np.zeros(len(offsets), np.int64)
        n = pretoken_ids(buffer, offsets, ids, ends[1:], *self.tables)
        return ids[:n], ends
