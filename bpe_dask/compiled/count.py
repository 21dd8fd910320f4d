"""Counting pre-tokens (compiled): UTF-8 text in, each distinct pre-token's bytes and count out.

Takes a built-in pattern's name, then text as UTF-8 bytes with where its pieces between special
tokens lie; gives exactly the counts of ``regex.findall`` with the pattern over each piece, as flat
arrays: each distinct pre-token's bytes once, back to back in the order first seen, where each
starts, and its count (``Counter.arrays``, which an Arrow binary column can take as they are).

A whole range is counted without making a Python object per word: the words sit in an arena, with
their start, length and count in dense arrays (the frequent words come first and stay in cache),
and an open-addressing table of slots finds them again by hash.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bpe_dask.compiled.compile_once import readonly
from bpe_dask.compiled.hashing import LOW, fnv_hash, same_bytes
from bpe_dask.compiled.scan import GPT2, GPT4, NUMBERS, own_cache_file, pattern_number, table_of
from bpe_dask.compiled.scan_gpt2 import next_token_gpt2
from bpe_dask.compiled.scan_gpt4 import next_token_gpt4, next_token_o200k

# A slot of the table is one int64: the upper 32 bits of the word's hash and its number plus one
# (0: an empty slot).


@njit(cache=True, nogil=True, inline="always")
def _find(data, i, end, arena, starts, lengths, slots):
    """The slot of the counts table that holds the word ``data[i:end]``, or the empty slot where it
    goes; and the tag a slot holds for it."""
    h = fnv_hash(data, i, end)
    tag = np.int64(h >> np.uint64(32)) << 32
    mask = len(slots) - 1
    slot = np.int64(h) & mask
    while slots[slot] != 0:
        if slots[slot] & ~LOW == tag:
            t = (slots[slot] & LOW) - 1
            if lengths[t] == end - i and same_bytes(arena, starts[t], data, i, end - i):
                return slot, tag
        slot = (slot + 1) & mask
    return slot, tag


def count_loop(pattern: int):
    """The counting loop of pattern number ``pattern``, compiled (and cached) for it alone."""

    # ``pattern`` is a constant of the closure, and the loop branches on it where it scans: numba drops
    # the other patterns' branches before it inlines a scanner, so a job compiles its own scanner only
    # (as fast to compile as a loop written for one pattern; calling ``scan.next_token`` here would
    # inline all three first: four times the compile time). Only the number is closed over: numba's
    # cache key for a closure hashes what it closes over, the same in every process, so a new process
    # loads the loop from the cache (a scanner closed over, or passed in, would be compiled again).
    def count_pieces(data, bounds, piece, position, table, arena, used, starts, lengths, counts, n, slots):
        """Count the pre-tokens of pieces ``[bounds[2k], bounds[2k+1])``, from ``piece`` at ``position``.

        Stops early, at a pre-token boundary, when the arrays are full: returns where it stopped (the
        piece and the byte), the arena bytes used and the distinct pre-tokens held. The caller grows
        the arrays and calls again from there.
        """
        while piece < len(bounds) // 2:
            hi = bounds[2 * piece + 1]
            i = max(position, bounds[2 * piece])
            while i < hi:
                end = (
                    next_token_gpt2(data, i, hi, table)
                    if pattern == GPT2  # see the comment above
                    else next_token_gpt4(data, i, hi, table)
                    if pattern == GPT4
                    else next_token_o200k(data, i, hi, table)
                )
                slot, tag = _find(data, i, end, arena, starts, lengths, slots)
                if slots[slot] != 0:
                    counts[(slots[slot] & LOW) - 1] += 1
                elif n == len(starts) or used + end - i > len(arena) or 2 * (n + 1) > len(slots):
                    return piece, i, used, n  # full: grow and come back
                else:
                    into, word = arena[used : used + end - i], data[i:end]
                    for k in range(end - i):  # not a slice assignment: compile_once.py says why
                        into[k] = word[k]
                    starts[n], lengths[n], counts[n] = used, end - i, 1
                    slots[slot] = tag | (n + 1)
                    used += end - i
                    n += 1
                i = end
            piece += 1
            position = 0
        return piece, 0, used, n

    return njit(cache=True, nogil=True)(own_cache_file(count_pieces, pattern))


COUNT_LOOPS = {number: count_loop(number) for number in NUMBERS.values()}


@njit(cache=True, nogil=True)
def _rehash(grown, starts, lengths, arena, n):
    """Fill ``grown`` (emptied) with the ``n`` words, by hashing their bytes again."""
    mask = len(grown) - 1
    for t in range(n):
        h = fnv_hash(arena, starts[t], starts[t] + lengths[t])
        slot = np.int64(h) & mask
        while grown[slot] != 0:
            slot = (slot + 1) & mask
        grown[slot] = (np.int64(h >> np.uint64(32)) << 32) | (t + 1)


class Counter:
    """Pre-token counts of one built-in pattern, in flat arrays that grow as needed.

    Takes the pattern's name (``gpt2``, ``gpt4`` or ``o200k``) and a first capacity (words); ``add``
    counts text into it, ``arrays`` gives the counts, ``len`` how many distinct pre-tokens it holds.

    >>> counter = Counter("gpt2")
    >>> counter.add(b"the cat the", np.array([0, 11]))
    >>> data, offsets, counts = counter.arrays()
    >>> [bytes(data[a:b]) for a, b in zip(offsets, offsets[1:])], counts.tolist()
    ([b'the', b' cat', b' the'], [1, 1, 1])
    """

    def __init__(self, pattern: str, capacity: int = 1 << 16) -> None:
        self.pattern = pattern_number(pattern)
        self._loop = COUNT_LOOPS[self.pattern]
        self.classes = table_of(self.pattern)
        self.arena = np.empty(16 * capacity, np.uint8)
        self.starts = np.empty(capacity, np.int64)
        self.lengths = np.empty(capacity, np.int64)
        self.counts = np.empty(capacity, np.int64)
        self.slots = np.zeros(4 * capacity, np.int64)
        self.used = self.n = 0

    def add(self, data: bytes, bounds: np.ndarray) -> None:
        """Count the pre-tokens of the pieces ``data[bounds[2k]:bounds[2k+1]]`` (UTF-8)."""
        view = readonly(np.frombuffer(data, np.uint8))
        piece, position = 0, 0
        while piece < len(bounds) // 2:
            piece, position, self.used, self.n = self._loop(
                view,
                bounds,
                piece,
                position,
                self.classes,
                self.arena,
                self.used,
                self.starts,
                self.lengths,
                self.counts,
                self.n,
                self.slots,
            )
            if piece < len(bounds) // 2:
                self._grow(need=int(bounds[2 * piece + 1]) - position)

    def _grow(self, need: int) -> None:
        if self.used + need > len(self.arena):
            self.arena = _grown(self.arena, max(2 * len(self.arena), self.used + need), self.used)
        if self.n == len(self.starts):
            size = 2 * len(self.starts)
            self.starts, self.lengths, self.counts = (
                _grown(a, size, self.n) for a in (self.starts, self.lengths, self.counts)
            )
        if 2 * (self.n + 1) > len(self.slots):
            grown = np.zeros(2 * len(self.slots), np.int64)
            _rehash(grown, self.starts, self.lengths, self.arena, self.n)
            self.slots = grown

    def __len__(self) -> int:
        return self.n

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The distinct pre-tokens back to back (uint8, the arena itself), where each starts and the
        last ends (int64, from 0), and their counts (int64), in the order first seen."""
        return self.arena[: self.used], np.append(self.starts[: self.n], self.used), self.counts[: self.n]


def _grown(array: np.ndarray, size: int, keep: int) -> np.ndarray:
    grown = np.empty(size, array.dtype)
    grown[:keep] = array[:keep]
    return grown
