"""A table of words (compiled): open addressing over records of half a cache line, and the ring of words
scanned ahead of the one looked up; counting (``count``) and encoding (``encode``) both find words in it.

Takes a word as bytes of an array (``data[i:end]``) with its hash and first eight bytes
(``hashing.word_hash``); ``find`` gives its record, or the empty one where it goes. A record is four
int64 side by side: the word's first eight bytes (``KEY``, zeros after a shorter word), its hash's
upper half (the tag, which also picks its home slot) and its length (``META``; 0: empty), a value
of the table's user (``VALUE``: a count, or where the word's ids lie), and where the word's bytes
lie in an arena (``AT``: read only for a word of more than eight bytes, whose bytes past the eighth
``find`` compares). So finding a word, checking it and using its value touch one cache line, and a
loop that scans ``AHEAD`` words ahead of the one it looks up asks for their records early (``hold``
puts a word in its ring, ``pending``, of ``PENDING`` int64 a word; ``taken`` gives it back): their
cache misses overlap.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bpe_dask.compiled.hashing import compare_bytes, word_hash
from bpe_dask.compiled.prefetch import prefetch

# A length fits in 32 bits: a word lies within one block of text (``bpe-dask.block-size``).
KEY, META, VALUE, AT = range(4)
RECORD = 4
HIGH = np.uint64(0xFFFFFFFF00000000)
LENGTH = 0xFFFFFFFF  # a meta's low half: its word's length
# A word scanned but not yet looked up: where it starts and ends, its piece, its hash and key.
START, END, PIECE, HASH, FIRST = range(5)
PENDING = 5
AHEAD = 16  # words scanned ahead of the one looked up: their records are on their way from memory


@njit(cache=True, nogil=True, inline="always")
def home(h, mask):
    """The slot where the search for a word of hash ``h`` starts: its hash's upper half, which is
    also the tag its record holds (so a grown table finds the slot again from the record alone)."""
    return np.int64(h >> np.uint64(32)) & mask


@njit(cache=True, nogil=True, inline="always")
def find(data, i, end, h, key, arena, records):
    """The record of the word ``data[i:end]`` (of hash ``h`` and first bytes ``key``) in the table,
    or the empty one where it goes; and the meta a record holds for it."""
    length = end - i
    meta = np.int64(h & HIGH) | length
    mask = len(records) // RECORD - 1
    slot = home(h, mask)
    while True:
        r = slot * RECORD
        held = records[r + META]
        if held == 0:
            return r, meta
        if held == meta and records[r + KEY] == key:
            at = records[r + AT]  # where its bytes lie: compared past the eighth, as the key holds those
            if length <= 8 or compare_bytes(arena, at + 8, at + length, data, i + 8, end) == 0:
                return r, meta
        slot = (slot + 1) & mask


@njit(cache=True, nogil=True, inline="always")
def hold(data, i, end, piece, records, ring, k, look_up):
    """Hold the ``k``-th word scanned, ``data[i:end]`` of piece ``piece``, in ``ring`` (a loop's
    ``pending``); with ``look_up``, its hash and first bytes too, its home record asked for from
    memory now (``prefetch``): it is looked up ``AHEAD`` words later."""
    h, key = np.uint64(0), np.uint64(0)
    if look_up:
        h, key = word_hash(data, i, end)
        prefetch(records, home(h, len(records) // RECORD - 1) * RECORD)
    e = (k % AHEAD) * PENDING
    ring[e + START], ring[e + END], ring[e + PIECE] = i, end, piece
    ring[e + HASH], ring[e + FIRST] = np.int64(h), np.int64(key)


@njit(cache=True, nogil=True, inline="always")
def taken(ring, k):
    """The ``k``-th word scanned, from ``ring``: where it starts and ends, its piece, its hash and its
    first bytes."""
    e = (k % AHEAD) * PENDING
    return ring[e + START], ring[e + END], ring[e + PIECE], np.uint64(ring[e + HASH]), ring[e + FIRST]


@njit(cache=True, nogil=True, inline="always")
def free_record(records, meta):
    """Where a record of ``meta`` moved into ``records`` (another table) goes: the first empty record
    from its home slot, which its tag gives (no word is hashed again)."""
    mask = len(records) // RECORD - 1
    slot = home(np.uint64(meta), mask)  # the tag is the upper half of the word's hash
    while records[slot * RECORD + META] != 0:
        slot = (slot + 1) & mask
    return slot * RECORD


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _rehash(grown, records):
    """Move the records of ``records`` into ``grown`` (emptied), each to its home slot there."""
    for r in range(0, len(records), RECORD):
        if records[r + META] != 0:
            g = free_record(grown, records[r + META])
            for k in range(RECORD):  # not a slice assignment: compile_once.py says why
                grown[g + k] = records[r + k]


def grown_table(records: np.ndarray) -> np.ndarray:
    """A table of twice as many records holding those of ``records``."""
    grown = table(2 * len(records) // RECORD)
    _rehash(grown, records)
    return grown


def table(slots: int) -> np.ndarray:
    """An empty table of at least ``slots`` records, a power of two (the probes wrap around by a mask),
    each within one 64-byte cache line: the array starts on a line's boundary, a record is half a line."""
    slots = 1 << max(0, slots - 1).bit_length()
    memory = np.zeros(slots * RECORD + 8, np.int64)
    skip = (-memory.ctypes.data % 64) // 8
    return memory[skip : skip + slots * RECORD]
