"""The merge engine's pair map and holder lists (compiled), in flat int64 arrays.

Takes pair keys (``a << 32 | b``); gives an open-addressing map (linear probing, Fibonacci
hashing) of six-int64 records: the key, the pair's count, the last merge that touched it, and
where its list of holder words starts in one shared ``pool``, the list's length and its room.
Pairs are never removed (a count drops to 0). A list that outgrows its room moves to the end of
the pool (``make_room``); ``compacted`` packs the pool again.
"""

from __future__ import annotations

import numpy as np
from numba import njit

EMPTY = np.int64(-1)
KEY, COUNT, STAMP, START, LENGTH, ROOM = range(6)  # the fields of a record


@njit(cache=True, nogil=True)
def find(pairs, key):
    """The slot of ``key``, or the empty slot where it would go (linear probing, Fibonacci hashing)."""
    mask = len(pairs) - 1
    slot = np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)) & mask
    while pairs[slot, KEY] != key and pairs[slot, KEY] != EMPTY:
        slot = (slot + 1) & mask
    return slot


@njit(cache=True, nogil=True)
def note_change(pairs, touched, before, n_touched, merge, key, change):
    """Add ``change`` to the count of ``key`` (inserting it), noting it as touched by this merge with
    its count before. Returns its slot, the pairs touched so far, and whether it was inserted."""
    slot = find(pairs, key)
    inserted = pairs[slot, KEY] == EMPTY
    if inserted:
        pairs[slot, KEY] = key
    if pairs[slot, STAMP] != merge:
        pairs[slot, STAMP] = merge
        touched[n_touched], before[n_touched] = slot, pairs[slot, COUNT]
        n_touched += 1
    pairs[slot, COUNT] += change
    return slot, n_touched, inserted


@njit(cache=True, nogil=True)
def new_pairs(size):
    pairs = np.zeros((size, 6), np.int64)
    pairs[:, KEY] = EMPTY
    pairs[:, STAMP] = -1
    return pairs


@njit(cache=True, nogil=True)
def regrown(pairs, size):
    """The map moved into ``size`` slots."""
    grown = new_pairs(size)
    for slot in range(len(pairs)):
        if pairs[slot, KEY] != EMPTY:
            at = find(grown, pairs[slot, KEY])
            for field in range(pairs.shape[1]):  # not a slice assignment: compile_once.py says why
                grown[at, field] = pairs[slot, field]
    return grown


@njit(cache=True, nogil=True)
def make_room(pairs, slot, pool, pool_used):
    """Move the holder list of ``slot`` to the end of the pool with twice the room; returns the pool
    (regrown if need be) and its use."""
    n, room = pairs[slot, LENGTH], max(4, 2 * pairs[slot, ROOM])
    if pool_used + room > len(pool):
        grown = np.empty(max(2 * len(pool), pool_used + room), pool.dtype)
        for k in range(pool_used):
            grown[k] = pool[k]
        pool = grown
    start = pairs[slot, START]
    for k in range(n):
        pool[pool_used + k] = pool[start + k]
    pairs[slot, START], pairs[slot, ROOM] = pool_used, room
    return pool, pool_used + room


@njit(cache=True, nogil=True)
def compacted(pairs, pool):
    """The pool with every list packed tight, each keeping its room; returns it and its use."""
    total = 0
    for slot in range(len(pairs)):
        if pairs[slot, KEY] != EMPTY:
            total += pairs[slot, ROOM]
    packed = np.empty(max(16, total + total // 2), pool.dtype)
    used = 0
    for slot in range(len(pairs)):
        if pairs[slot, KEY] != EMPTY:
            start, n = pairs[slot, START], pairs[slot, LENGTH]
            for k in range(n):
                packed[used + k] = pool[start + k]
            pairs[slot, START] = used
            used += pairs[slot, ROOM]
    return packed, used
