"""Merging one pre-token (compiled): its bytes in, its token ids out, as ``Vocabulary.merged`` does.

Takes a tokenizer's byte ids and its merges as a table from a pair of ids to the merge's rank and
merged id (``fill_pairs`` builds it in three flat arrays, read-only once built); gives the ids of
a pre-token. The lowest-ranked adjacent pair is merged first, the leftmost where it occurs twice,
one occurrence at a time. A short pre-token takes the plain loop (``merge_short``); a long one (a
run of one letter, a line of "=") keeps its parts in a linked list and its pairs in a heap
(``merge_long``), so a pre-token of n bytes costs O(n log n), not O(n²).
"""

from __future__ import annotations

import numpy as np
from numba import njit

EMPTY = np.int64(-1)  # a key no pair has: an empty slot of the table
NONE = np.int64(1) << 62  # the rank of a pair no merge joins (as a limit: every merge)
SHORT = 24  # pre-tokens up to this many bytes take the plain loop
_ZERO = np.int64(0)


# Called, not inlined by numba: compiled once rather than typed again at each call site, and inlined by
# LLVM all the same (so is ``_rank``).
@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _slot_of(keys, key):
    mask = len(keys) - 1
    slot = np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)) & mask
    while keys[slot] != key and keys[slot] != EMPTY:
        slot = (slot + 1) & mask
    return slot


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def fill_pairs(left, right, ranks, merged, keys, pair_ranks, pair_merged):
    """Put merge ``i``, of ids ``left[i]`` and ``right[i]`` into ``merged[i]`` at rank ``ranks[i]``, in the
    table (``keys`` all ``EMPTY`` at first)."""
    for i in range(len(left)):
        key = (left[i] << 32) | right[i]
        slot = _slot_of(keys, key)
        keys[slot], pair_ranks[slot], pair_merged[slot] = key, ranks[i], merged[i]


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _rank(keys, pair_ranks, a, b, limit):
    """The rank of the merge of ``a`` and ``b`` when it is below ``limit``, else ``NONE``."""
    slot = _slot_of(keys, (a << 32) | b)
    return pair_ranks[slot] if keys[slot] != EMPTY and pair_ranks[slot] < limit else NONE


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def merge_short(data, start, end, byte_ids, keys, pair_ranks, pair_merged, parts, ranks, limit):
    """The ids of ``data[start:end]`` (at most ``SHORT`` bytes) in ``parts``, by the merges of rank
    below ``limit``; returns how many."""
    n = end - start
    for i in range(n):
        parts[i] = byte_ids[data[start + i]]
    for i in range(n - 1):
        ranks[i] = _rank(keys, pair_ranks, parts[i], parts[i + 1], limit)
    while n > 1:
        best, i = NONE, -1
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
            ranks[i - 1] = _rank(keys, pair_ranks, parts[i - 1], parts[i], limit)
        if i < n - 1:
            ranks[i] = _rank(keys, pair_ranks, parts[i], parts[i + 1], limit)
    return n


SCRATCH = 6  # int64 of ``merge_long``'s scratch per byte of its pre-token


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def merge_long(data, start, end, byte_ids, keys, pair_ranks, pair_merged, scratch, limit):
    """The ids of ``data[start:end]`` by the merges of rank below ``limit``, written to ``scratch``
    from 0 on (``SCRATCH`` int64 a byte at least); returns how many (``merge_parts``)."""
    for i in range(end - start):
        scratch[i] = byte_ids[data[start + i]]
    return merge_parts(end - start, keys, pair_ranks, pair_merged, scratch, limit)


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def merge_parts(n, keys, pair_ranks, pair_merged, scratch, limit):
    """The ids ``scratch[:n]`` merged by the merges of rank below ``limit``, written back to
    ``scratch`` from 0 on (``SCRATCH`` int64 an id at least); returns how many. Parts in a linked
    list, pairs in a min-heap of ``rank << 32 | position`` (the leftmost first among equal ranks),
    entries that went stale skipped. Allocates nothing, so that loops compiled without reference
    counts may call it."""
    # Four arrays in one: the parts, each one's neighbours, and the heap, which a pre-token of n
    # parts fills with at most 3n entries (n - 1 pairs at first, two more for each of n - 1 merges).
    parts, following, preceding, heap = 0, n, 2 * n, 3 * n
    for i in range(n):
        scratch[following + i] = i + 1
        scratch[preceding + i] = i - 1
    scratch[following + n - 1] = -1
    size = _ZERO  # not 0: a constant argument makes numba compile a version of the callee (compile_once.py)
    for i in range(n - 1):
        r = _rank(keys, pair_ranks, scratch[parts + i], scratch[parts + i + 1], limit)
        if r != NONE:
            scratch[heap + size] = (r << 32) | i
            size += 1
    for i in range(size // 2 - 1, -1, -1):
        _sift_down(scratch, heap, size, i)
    while size > 0:
        top = scratch[heap]
        size -= 1
        scratch[heap] = scratch[heap + size]
        _sift_down(scratch, heap, size, _ZERO)
        r, i = top >> 32, top & np.int64(0xFFFFFFFF)
        j, a = scratch[following + i], scratch[parts + i]
        if a < 0 or j < 0 or _rank(keys, pair_ranks, a, scratch[parts + j], limit) != r:
            continue  # the pair at ``i`` changed since this entry was pushed
        scratch[parts + i] = pair_merged[_slot_of(keys, (scratch[parts + i] << 32) | scratch[parts + j])]
        scratch[parts + j] = -1
        scratch[following + i] = scratch[following + j]
        if scratch[following + j] >= 0:
            scratch[preceding + scratch[following + j]] = i
        for left in (scratch[preceding + i], i):
            if left >= 0 and scratch[following + left] >= 0:
                after = scratch[following + left]
                r = _rank(keys, pair_ranks, scratch[parts + left], scratch[parts + after], limit)
                if r != NONE:
                    scratch[heap + size] = (r << 32) | left
                    size += 1
                    _sift_up(scratch, heap, size - 1)
    k, i = 0, 0
    while i >= 0:  # the parts left, in order, to the front (each is at or after its place there)
        scratch[k] = scratch[parts + i]
        k += 1
        i = scratch[following + i]
    return k


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _sift_up(scratch, heap, i):
    while i > 0:
        parent = (i - 1) // 2
        if scratch[heap + parent] <= scratch[heap + i]:
            break
        scratch[heap + parent], scratch[heap + i] = scratch[heap + i], scratch[heap + parent]
        i = parent


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _sift_down(scratch, heap, size, i):
    while True:
        smallest, left = i, 2 * i + 1
        if left < size and scratch[heap + left] < scratch[heap + smallest]:
            smallest = left
        if left + 1 < size and scratch[heap + left + 1] < scratch[heap + smallest]:
            smallest = left + 1
        if smallest == i:
            return
        scratch[heap + i], scratch[heap + smallest] = scratch[heap + smallest], scratch[heap + i]
        i = smallest
