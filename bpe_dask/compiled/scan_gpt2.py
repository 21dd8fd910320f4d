"""The GPT-2 split pattern compiled with numba: text in, pre-token counts in flat arrays out.

Takes the UTF-8 bytes of text and where its pieces between special tokens lie; gives exactly the
counts of ``regex.findall`` with GPT-2's pattern over each piece, at machine speed. ``pretokenize``
uses it (``Pretokenizer.counter``) when numba is installed; the tests hold it to the ``regex``
module on every class of code point and on random text.

The scanner walks the pattern's alternatives in order, as the regex engine does:

    '(?:[sdmt]|ll|ve|re) | ?\\p{L}+ | ?\\p{N}+ | ?[^\\s\\p{L}\\p{N}]+ | \\s+(?!\\S) | \\s+

Which code points are letters, numbers or whitespace comes from the ``regex`` module itself, read
off every code point once per process (``class_table``), so the two cannot disagree whatever
Unicode version the installed ``regex`` follows.

Counts live in flat arrays: each distinct pre-token's bytes once, in an arena in the order first
seen, with its count and hash, and an open-addressing table of slots for finding it again (a
match is confirmed byte by byte, so a hash collision never merges two words). A whole range is
counted without making a Python object per word; ``CompiledCounts.table`` hands Arrow the arena
as it is.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import regex
from numba import njit

from bpe_dask.io.counts_table import tokens_array

OTHER, LETTER, NUMBER, SPACE = 0, 1, 2, 3
_EMPTY = -1
_FNV_OFFSET, _FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)


@functools.cache
def class_table() -> np.ndarray:
    """Every code point's class under the ``regex`` module: ``\\p{L}``, ``\\p{N}``, ``\\s`` or other."""
    everything = "".join(map(chr, range(0x110000)))  # lone surrogates included: they are "other"
    table = np.zeros(0x110000, np.uint8)
    for kind, pattern in ((LETTER, r"\p{L}+"), (NUMBER, r"\p{N}+"), (SPACE, r"\s+")):
        for match in regex.finditer(pattern, everything):
            table[match.start() : match.end()] = kind
    return table


@njit(cache=True, nogil=True, inline="always")
def _decode(data, i):
    """The code point starting at byte ``i`` of valid UTF-8, and its length in bytes."""
    b = np.int64(data[i])
    if b < 0x80:
        return b, 1
    if b < 0xE0:
        return ((b & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F), 2
    if b < 0xF0:
        return ((b & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6) | (np.int64(data[i + 2]) & 0x3F), 3
    return (
        ((b & 0x07) << 18)
        | ((np.int64(data[i + 1]) & 0x3F) << 12)
        | ((np.int64(data[i + 2]) & 0x3F) << 6)
        | (np.int64(data[i + 3]) & 0x3F)
    ), 4


@njit(cache=True, nogil=True, inline="always")
def _run_end(data, i, hi, table, kind):
    """Where the run of code points of class ``kind`` starting at ``i`` ends."""
    while i < hi:
        b = data[i]
        if b < 0x80:  # ASCII, most of most text: a byte is a character
            if table[b] != kind:
                break
            i += 1
            continue
        cp, width = _decode(data, i)
        if table[cp] != kind:
            break
        i += width
    return i


@njit(cache=True, nogil=True, inline="always")
def _next_token(data, i, hi, table):
    """The end of the GPT-2 pre-token that starts at byte ``i`` of a piece ending at ``hi``."""
    cp, width = _decode(data, i)
    if cp == 0x27 and i + 1 < hi:  # '(?:[sdmt]|ll|ve|re)
        c1 = data[i + 1]
        if c1 == 0x73 or c1 == 0x64 or c1 == 0x6D or c1 == 0x74:
            return i + 2
        if i + 2 < hi:
            c2 = data[i + 2]
            if (c1 == 0x6C and c2 == 0x6C) or (c1 == 0x76 and c2 == 0x65) or (c1 == 0x72 and c2 == 0x65):
                return i + 3
    kind = table[cp]
    if cp == 0x20 and i + 1 < hi:  # " ?" before a letter, number or other run
        following, _ = _decode(data, i + 1)
        if table[following] != SPACE:
            return _run_end(data, i + 1, hi, table, table[following])
    if kind != SPACE:  # \p{L}+, \p{N}+ or [^\s\p{L}\p{N}]+
        return _run_end(data, i, hi, table, kind)
    # \s+(?!\S) | \s+ : the whitespace run, less its last character when something follows it
    # (which then starts the next pre-token), unless the run is that one character
    last, j = i, i
    while j < hi:
        cp, width = _decode(data, j)
        if table[cp] != SPACE:
            break
        last, j = j, j + width
    if j == hi or last == i:
        return j
    return last


@njit(cache=True, nogil=True, inline="always")
def _hash(data, start, end):
    """FNV-1a over the bytes, then MurmurHash3's finaliser: FNV's low bits depend only on the bytes'
    low bits, and the table is indexed by the low bits, so they must be mixed with the high ones."""
    h = _FNV_OFFSET
    for k in range(start, end):
        h = (h ^ np.uint64(data[k])) * _FNV_PRIME
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> np.uint64(33))


# A slot of the table is one int64: the upper 32 bits of the word's hash and its number plus one
# (0: an empty slot). The words themselves are numbered in the order first seen, with their start
# in the arena, length and count in dense arrays: the frequent words come first and stay in cache.
_LOW = np.int64(0xFFFFFFFF)


@njit(cache=True, nogil=True)
def _count_pieces(data, bounds, piece, position, table, arena, used, starts, lengths, counts, n, slots):
    """Count the pre-tokens of pieces ``[bounds[2k], bounds[2k+1])``, from ``piece`` at ``position``.

    Stops early, at a pre-token boundary, when the arrays are full: returns where it stopped (the
    piece and the byte), the arena bytes used and the distinct pre-tokens held. The caller grows
    the arrays and calls again from there.
    """
    mask = len(slots) - 1
    pieces = len(bounds) // 2
    while piece < pieces:
        hi = bounds[2 * piece + 1]
        i = max(position, bounds[2 * piece])
        while i < hi:
            end = _next_token(data, i, hi, table)
            length = end - i
            h = _hash(data, i, end)
            tag = np.int64(h >> np.uint64(32)) << 32
            slot = np.int64(h) & mask
            while True:
                entry = slots[slot]
                if entry == 0:
                    if n == len(starts) or used + length > len(arena) or 2 * (n + 1) > len(slots):
                        return piece, i, used, n  # full: grow and come back
                    arena[used : used + length] = data[i:end]
                    starts[n], lengths[n], counts[n] = used, length, 1
                    slots[slot] = tag | (n + 1)
                    used += length
                    n += 1
                    break
                if entry & ~_LOW == tag:
                    t = (entry & _LOW) - 1
                    if lengths[t] == length:
                        start = starts[t]
                        same = True
                        for k in range(length):
                            if arena[start + k] != data[i + k]:
                                same = False
                                break
                        if same:
                            counts[t] += 1
                            break
                slot = (slot + 1) & mask
            i = end
        piece += 1
        position = 0
    return piece, 0, used, n


@njit(cache=True, nogil=True)
def _rehash(slots, grown, starts, lengths, arena, n):
    """Refill ``grown`` (emptied) with the words of ``slots``, by hashing their bytes again."""
    mask = len(grown) - 1
    for t in range(n):
        h = _hash(arena, starts[t], starts[t] + lengths[t])
        slot = np.int64(h) & mask
        while grown[slot] != 0:
            slot = (slot + 1) & mask
        grown[slot] = (np.int64(h >> np.uint64(32)) << 32) | (t + 1)


@njit(cache=True, nogil=True)
def pretoken_ends(data, lo, hi, table):
    """Where each pre-token of ``data[lo:hi]`` ends (for testing the scanner against ``regex``)."""
    ends = np.empty(hi - lo, np.int64)
    count, i = 0, lo
    while i < hi:
        i = _next_token(data, i, hi, table)
        ends[count] = i
        count += 1
    return ends[:count]


class CompiledCounts:
    """Pre-token counts held in flat arrays (see the module's docstring): GPT-2's pattern's, or, given
    another scanner's counting loop and class table (``pretokenize_numba_gpt4.compiled_counts``),
    that pattern's."""

    def __init__(self, capacity: int = 1 << 16, count_pieces=None, classes: np.ndarray | None = None) -> None:
        self.count_pieces = _count_pieces if count_pieces is None else count_pieces
        self.classes = class_table() if classes is None else classes
        self.arena = np.empty(16 * capacity, np.uint8)
        self.starts = np.empty(capacity, np.int64)
        self.lengths = np.empty(capacity, np.int64)
        self.counts = np.empty(capacity, np.int64)
        self.slots = np.zeros(4 * capacity, np.int64)
        self.used = self.n = 0

    def add(self, data: bytes, bounds: np.ndarray) -> None:
        """Count the pre-tokens of the pieces ``data[bounds[2k]:bounds[2k+1]]`` (UTF-8)."""
        view = np.frombuffer(data, np.uint8)
        piece, position = 0, 0
        while piece < len(bounds) // 2:
            piece, position, self.used, self.n = self.count_pieces(
                view, bounds, piece, position, self.classes, self.arena, self.used,
                self.starts, self.lengths, self.counts, self.n, self.slots,
            )  # fmt: skip
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
            _rehash(self.slots, grown, self.starts, self.lengths, self.arena, self.n)
            self.slots = grown

    def __len__(self) -> int:
        return self.n

    def table(self) -> pa.Table:
        """The counts as Arrow columns ``token`` (binary, or large_binary past 2 GiB) and ``count``
        (int64), the arena shared."""
        tokens = tokens_array(self.arena[: self.used], np.append(self.starts[: self.n], self.used))
        return pa.table({"token": tokens, "count": pa.array(self.counts[: self.n], pa.int64())})


def _grown(array: np.ndarray, size: int, keep: int) -> np.ndarray:
    grown = np.empty(size, array.dtype)
    grown[:keep] = array[:keep]
    return grown
