"""The merge engine's pairs (compiled): one dense record per pair, found by key through an index.

Takes pair keys (``a << 32 | b``); gives pair ids. A pair's record (``pairs[id]``, four int64) holds
its key, its count, and where its list of holder words starts in the shared pool and how long it
is. Records are added at the end (``add``), never removed or moved: a pair whose count falls to 0
keeps its record. The index finds a key's id: an open-addressing table (linear probing, Fibonacci
hashing) of int32 ids, at most half full, rebuilt from the records when it grows (``index_pairs``),
so the records themselves are never copied to grow it. Lists are written whole when their pair
appears (``merge_loop``: a pair only ever gains holders in the merge that creates it); dead lists
(pairs merged, or counted down to 0) are squeezed out of the pool in place (``compact``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

KEY, COUNT, START, LENGTH = range(4)  # the fields of a pair's record
NO_PAIR = np.int32(-1)  # an empty slot of the index
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def slot_of(index, pairs, key):
    """The index slot that holds ``key``'s id, or the empty slot where it would go."""
    mask = len(index) - 1
    slot = np.int64((np.uint64(key) * _GOLDEN) >> np.uint64(32)) & mask  # the product's high bits mix best
    while True:
        found = index[slot]
        if found == NO_PAIR or pairs[found, KEY] == key:
            return slot
        slot = (slot + 1) & mask


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def find(index, pairs, key):
    """The id of ``key``, or -1."""
    return index[slot_of(index, pairs, key)]


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def lose(index, pairs, key, f):
    """Take ``f`` from the count of ``key``; a pair no word holds any more has a dead list."""
    pair = find(index, pairs, key)
    pairs[pair, COUNT] -= f
    if pairs[pair, COUNT] == 0:
        pairs[pair, LENGTH] = 0


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def add(index, pairs, used, key):
    """The id of ``key``, a new record (count 0, no list) if it had none; returns it and whether new.
    The caller makes sure there is room: ``used`` records below ``len(pairs)``, the index under half
    full."""
    slot = slot_of(index, pairs, key)
    found = index[slot]
    if found != NO_PAIR:
        return np.int64(found), False
    pairs[used, KEY], pairs[used, COUNT], pairs[used, START], pairs[used, LENGTH] = key, 0, -1, 0
    index[slot] = used
    return np.int64(used), True


@njit(cache=True, nogil=True, _nrt=False, no_cfunc_wrapper=True)
def index_pairs(pairs, used, index):
    """Fill ``index`` (empty, of a power of two slots) with the first ``used`` records."""
    for pair in range(used):
        index[slot_of(index, pairs, pairs[pair, KEY])] = pair


@njit(cache=True, nogil=True, _nrt=False, no_cfunc_wrapper=True)
def compact(pairs, used, pool):
    """Squeeze the pool in place: every live list (of positive length, and laid: a pair being created
    has none yet, ``START`` -1) moved down; returns the pool's use. Lists lie in the order of their
    pairs' ids (the byte pairs' in key order, then each merge's at the end of the pool as it creates
    them, and a squeeze keeps the order), so each moves only down, over room already read."""
    filled = 0
    for pair in range(used):
        start, length = pairs[pair, START], pairs[pair, LENGTH]
        if length <= 0 or start < 0:
            continue
        if start != filled:
            for k in range(length):
                pool[filled + k] = pool[start + k]
            pairs[pair, START] = filled
        filled += length
    return filled
