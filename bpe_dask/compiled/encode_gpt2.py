"""The encoder compiled with numba: UTF-8 text in, token ids out, with ``Tokenizer.encode``'s semantics.

Takes a ``Tokenizer`` (its byte ids, and its merges as a table from a pair of ids to the merge's
rank and the merged id) and the UTF-8 bytes of text with where the pieces between special tokens
lie; gives the ids the pure-Python ``Tokenizer.encode`` gives, which the tests hold it to. This is
GPT-2's split pattern's (``pretokenize_numba``); ``encode_numba_gpt4`` has GPT-4's and o200k's.

Each distinct pre-token is merged once and its ids kept in a cache (its bytes in one arena, its ids
in another, found again by hash and confirmed byte by byte); the cache is emptied when full, so
memory stays bounded. The merge tables are read-only and shared; a cache is written as it is read,
so each call borrows one of its own (``CompiledEncoder.encode``): threads may share an encoder.

Merging applies the lowest-ranked adjacent pair first, the leftmost where it occurs twice, one
occurrence at a time, as ``Tokenizer._merge`` does. A short pre-token takes the plain loop; a long
one (a run of one letter, a line of "=") keeps its parts in a linked list and its pairs in a heap,
so a pre-token of n bytes costs O(n log n), not O(n²).
"""

from __future__ import annotations

import threading

import numpy as np
from numba import njit

from bpe_dask.compiled.scan_gpt2 import _hash, _next_token, class_table

_EMPTY = np.int64(-1)
_NONE = np.int64(1) << 62  # the rank of a pair no merge joins
_SHORT = 24  # pre-tokens up to this many bytes take the plain loop
_CACHED_MAX = 256  # longer pre-tokens are merged each time, not kept
CACHE_ENTRIES = 1 << 17  # pre-tokens a cache holds: about 20 MB of arrays (one cache per concurrent call)
# The cache: slots of [hash, start in the byte arena, length, start in the id arena, id count].
_HASH, _START, _LENGTH, _IDS, _COUNT = range(5)


# --- the merges: a table from a pair of ids to (rank, merged id) ----------------------------------


@njit(cache=True, nogil=True, inline="always")
def _slot_of(keys, key):
    mask = len(keys) - 1
    slot = np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)) & mask
    while keys[slot] != key and keys[slot] != _EMPTY:
        slot = (slot + 1) & mask
    return slot


@njit(cache=True, nogil=True)
def _fill_pairs(left, right, ranks, merged, keys, pair_ranks, pair_merged):
    for i in range(len(left)):
        key = (left[i] << 32) | right[i]
        slot = _slot_of(keys, key)
        keys[slot], pair_ranks[slot], pair_merged[slot] = key, ranks[i], merged[i]


@njit(cache=True, nogil=True, inline="always")
def _rank(keys, pair_ranks, a, b):
    slot = _slot_of(keys, (a << 32) | b)
    return pair_ranks[slot] if keys[slot] != _EMPTY else _NONE


# --- merging one pre-token -------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _merge_short(data, start, end, byte_ids, keys, pair_ranks, pair_merged, parts, ranks):
    """The ids of ``data[start:end]`` (at most ``_SHORT`` bytes) in ``parts``; returns how many."""
    n = end - start
    for i in range(n):
        parts[i] = byte_ids[data[start + i]]
    for i in range(n - 1):
        ranks[i] = _rank(keys, pair_ranks, parts[i], parts[i + 1])
    while n > 1:
        best, i = _NONE, -1
        for j in range(n - 1):
            if ranks[j] < best:
                best, i = ranks[j], j
        if i < 0:
            break
        parts[i] = pair_merged[_slot_of(keys, (parts[i] << 32) | parts[i + 1])]
        for j in range(i + 1, n - 1):  # part i + 1 is gone, and so is pair i
            parts[j] = parts[j + 1]
        for j in range(i, n - 2):
            ranks[j] = ranks[j + 1]
        n -= 1
        if i > 0:
            ranks[i - 1] = _rank(keys, pair_ranks, parts[i - 1], parts[i])
        if i < n - 1:
            ranks[i] = _rank(keys, pair_ranks, parts[i], parts[i + 1])
    return n


@njit(cache=True, nogil=True)
def _merge_long(data, start, end, byte_ids, keys, pair_ranks, pair_merged):
    """The ids of ``data[start:end]``: parts in a linked list, pairs in a min-heap of ``rank << 32 |
    position`` (the leftmost first among equal ranks), entries that went stale skipped."""
    n = end - start
    parts = np.empty(n, np.int64)
    following = np.arange(1, n + 1, dtype=np.int64)
    preceding = np.arange(-1, n - 1, dtype=np.int64)
    following[n - 1] = -1
    for i in range(n):
        parts[i] = byte_ids[data[start + i]]
    heap = np.empty(2 * n + 4, np.int64)
    size = 0
    for i in range(n - 1):
        r = _rank(keys, pair_ranks, parts[i], parts[i + 1])
        if r != _NONE:
            heap[size] = (r << 32) | i
            size += 1
    for i in range(size // 2 - 1, -1, -1):
        _sift_down(heap, size, i)
    alive = n
    while size > 0:
        top = heap[0]
        size -= 1
        heap[0] = heap[size]
        _sift_down(heap, size, 0)
        r, i = top >> 32, top & np.int64(0xFFFFFFFF)
        j = following[i]
        if parts[i] < 0 or j < 0 or _rank(keys, pair_ranks, parts[i], parts[j]) != r:
            continue  # the pair at ``i`` changed since this entry was pushed
        parts[i] = pair_merged[_slot_of(keys, (parts[i] << 32) | parts[j])]
        parts[j] = -1
        following[i] = following[j]
        if following[j] >= 0:
            preceding[following[j]] = i
        alive -= 1
        for left in (preceding[i], i):
            if left >= 0 and following[left] >= 0:
                r = _rank(keys, pair_ranks, parts[left], parts[following[left]])
                if r != _NONE:
                    if size == len(heap):
                        grown = np.empty(2 * size, np.int64)
                        grown[:size] = heap[:size]
                        heap = grown
                    heap[size] = (r << 32) | left
                    size += 1
                    _sift_up(heap, size - 1)
    ids = np.empty(alive, np.int64)
    k, i = 0, 0
    while i >= 0:
        ids[k] = parts[i]
        k += 1
        i = following[i]
    return ids


@njit(cache=True, nogil=True)
def _sift_up(heap, i):
    while i > 0:
        parent = (i - 1) // 2
        if heap[parent] <= heap[i]:
            break
        heap[parent], heap[i] = heap[i], heap[parent]
        i = parent


@njit(cache=True, nogil=True)
def _sift_down(heap, size, i):
    while True:
        smallest, left = i, 2 * i + 1
        if left < size and heap[left] < heap[smallest]:
            smallest = left
        if left + 1 < size and heap[left + 1] < heap[smallest]:
            smallest = left + 1
        if smallest == i:
            return
        heap[i], heap[smallest] = heap[smallest], heap[i]
        i = smallest


# --- encoding text ---------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _encode(data, bounds, specials, classes, byte_ids, keys, pair_ranks, pair_merged,
            slots, arena, ids_arena, used):  # fmt: skip
    """The ids of the pieces ``data[bounds[2k]:bounds[2k+1]]``, with ``specials[k]`` between pieces
    ``k`` and ``k + 1`` unless it is negative. ``used`` holds the cache's arena use, id-arena use and
    entries (updated)."""
    out = np.empty(len(data) + len(specials), np.int64)
    n = 0
    parts = np.empty(_SHORT, np.int64)
    ranks = np.empty(_SHORT, np.int64)
    mask = len(slots) - 1
    for piece in range(len(bounds) // 2):
        if piece > 0 and specials[piece - 1] >= 0:  # -1: nothing between these pieces
            out[n] = specials[piece - 1]
            n += 1
        i, hi = bounds[2 * piece], bounds[2 * piece + 1]
        while i < hi:
            end = _next_token(data, i, hi, classes)
            length = end - i
            if length == 1:
                out[n] = byte_ids[data[i]]
                n += 1
                i = end
                continue
            h = np.int64(_hash(data, i, end))
            slot = h & mask
            found = False
            if length <= _CACHED_MAX:
                while slots[slot, _LENGTH] != 0:
                    if slots[slot, _HASH] == h and slots[slot, _LENGTH] == length:
                        s = slots[slot, _START]
                        same = True
                        for k in range(length):
                            if arena[s + k] != data[i + k]:
                                same = False
                                break
                        if same:
                            found = True
                            break
                    slot = (slot + 1) & mask
            if found:
                first, count = slots[slot, _IDS], slots[slot, _COUNT]
                out[n : n + count] = ids_arena[first : first + count]
                n += count
                i = end
                continue
            if length <= _SHORT:
                count = _merge_short(data, i, end, byte_ids, keys, pair_ranks, pair_merged, parts, ranks)
                out[n : n + count] = parts[:count]
            else:
                merged = _merge_long(data, i, end, byte_ids, keys, pair_ranks, pair_merged)
                count = len(merged)
                out[n : n + count] = merged
            if length <= _CACHED_MAX:  # keep it, emptying the cache first if it is full
                if (
                    used[0] + length > len(arena)
                    or used[1] + count > len(ids_arena)
                    or 2 * (used[2] + 1) > len(slots)
                ):
                    slots[:, _LENGTH] = 0
                    used[0] = used[1] = used[2] = 0
                    slot = h & mask
                    while slots[slot, _LENGTH] != 0:
                        slot = (slot + 1) & mask
                arena[used[0] : used[0] + length] = data[i:end]
                ids_arena[used[1] : used[1] + count] = out[n : n + count]
                slots[slot, _HASH], slots[slot, _START], slots[slot, _LENGTH] = h, used[0], length
                slots[slot, _IDS], slots[slot, _COUNT] = used[1], count
                used[0] += length
                used[1] += count
                used[2] += 1
            n += count
            i = end
    return out[:n]


class CompiledEncoder:
    """A tokenizer's merges in flat arrays, shared, and caches of encoded pre-tokens, one per call under
    way, for ``encode``."""

    def __init__(self, byte_ids: list[int], merges: dict[tuple[int, int], tuple[int, int]],
                 cache_entries: int | None = None, encode=None,
                 classes: np.ndarray | None = None) -> None:  # fmt: skip
        # GPT-2's scanner, or another's loop and class table (encode_numba_gpt4.compiled_encoder)
        self._encode = _encode if encode is None else encode
        self.classes = class_table() if classes is None else classes
        self.byte_ids = np.array(byte_ids, np.int64)
        size = 1 << max(4, (2 * len(merges) + 1).bit_length())
        self.keys = np.full(size, _EMPTY, np.int64)
        self.pair_ranks = np.zeros(size, np.int64)
        self.pair_merged = np.zeros(size, np.int64)
        if merges:
            pairs = np.array(list(merges), np.int64)
            values = np.array(list(merges.values()), np.int64)
            _fill_pairs(pairs[:, 0], pairs[:, 1], values[:, 0], values[:, 1], self.keys, self.pair_ranks,
                        self.pair_merged)  # fmt: skip
        self.cache_entries = CACHE_ENTRIES if cache_entries is None else cache_entries
        self._idle: list[tuple[np.ndarray, ...]] = []  # caches no call holds, kept warm for the next
        self._lock = threading.Lock()

    def _new_cache(self) -> tuple[np.ndarray, ...]:
        """Slots, byte arena, id arena and their use (arena use, id-arena use, entries)."""
        entries = self.cache_entries
        return (np.zeros((2 * entries, 5), np.int64), np.empty(16 * entries, np.uint8),
                np.empty(8 * entries, np.int64), np.zeros(3, np.int64))  # fmt: skip

    def encode(self, data: bytes, bounds: np.ndarray, specials: np.ndarray) -> np.ndarray:
        """The ids (int64) of UTF-8 ``data`` whose pieces between special tokens are ``bounds``.

        The compiled loop runs without the GIL and writes the cache it reads, so each call holds a
        cache no other call holds: one idle since an earlier call, or a new one. As many exist as
        calls have ever been under way at once, and each keeps what it learned for the next call."""
        with self._lock:
            cache = self._idle.pop() if self._idle else None
        if cache is None:
            cache = self._new_cache()
        try:
            return self._encode(np.frombuffer(data, np.uint8), bounds, specials, self.classes, self.byte_ids,
                                self.keys, self.pair_ranks, self.pair_merged, *cache)  # fmt: skip
        finally:
            with self._lock:
                self._idle.append(cache)
