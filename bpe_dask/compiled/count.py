"""Counting pre-tokens (compiled): UTF-8 text in, each distinct pre-token's bytes and count out.

Takes a built-in pattern's name, then text as UTF-8 bytes with where its pieces between special
tokens lie; gives exactly the counts of ``regex.findall`` with the pattern over each piece, as flat
arrays: each distinct pre-token's bytes once, back to back in the order first seen, where each
starts, and its count (``Counter.arrays``, which an Arrow binary column can take as they are).

A whole range is counted without making a Python object per word: the words sit in an arena, in
the order first seen, and a ``word_table`` finds them again by hash, its records holding their counts:
the loop scans ahead of the word it counts and asks for the records it will need early.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bpe_dask.compiled.compile_once import readonly
from bpe_dask.compiled.scan import (
    GPT2,
    GPT4,
    NUMBERS,
    O200K,
    SUPERBPE_LINES,
    own_cache_file,
    pattern_number,
    table_of,
)
from bpe_dask.compiled.scan_gpt2 import next_token_gpt2
from bpe_dask.compiled.scan_gpt4 import next_token_gpt4, next_token_o200k
from bpe_dask.compiled.scan_superbpe import next_token_superbpe
from bpe_dask.compiled.word_table import (
    AHEAD,
    AT,
    KEY,
    META,
    PENDING,
    RECORD,
    VALUE,
    find,
    grown_table,
    hold,
    table,
    taken,
)

COUNT = VALUE  # a record's value, in counting: how often its word occurs


def count_loop(pattern: int):
    """The counting loop of pattern number ``pattern``, compiled (and cached) for it alone."""

    # ``pattern`` is a constant of the closure, and the loop branches on it where it scans: numba drops
    # the other patterns' branches before it inlines a scanner, so a job compiles its own scanner only
    # (as fast to compile as a loop written for one pattern; a scanner that took the number as it runs
    # would inline all three first: four times the compile time). Only the number is closed over: numba's
    # cache key for a closure hashes what it closes over, the same in every process, so a new process
    # loads the loop from the cache (a scanner closed over, or passed in, would be compiled again).
    def count_pieces(data, bounds, piece, position, table, arena, used, starts, n, records, pending):
        """Count the pre-tokens of pieces ``[bounds[2k], bounds[2k+1])``, from ``piece`` at ``position``.

        Stops early, at a pre-token boundary, when the arrays are full: returns where it stopped (the
        piece and the byte), the arena bytes used and the distinct pre-tokens held. The caller grows
        the arrays and calls again from there.
        """
        pieces = len(bounds) // 2
        scanned = counted = 0  # pre-tokens put in ``pending``, and taken out of it
        while True:
            if piece < pieces:  # scan one more pre-token, and send for its record
                hi = bounds[2 * piece + 1]
                i = max(position, bounds[2 * piece])
                if i >= hi:
                    piece, position = piece + 1, 0
                    continue
                end = (
                    next_token_gpt2(data, i, hi, table)
                    if pattern == GPT2  # see the comment above
                    else next_token_gpt4(data, i, hi, table)
                    if pattern == GPT4
                    else next_token_o200k(data, i, hi, table)
                    if pattern == O200K
                    else next_token_superbpe(data, i, bounds[2 * piece], hi, table, pattern == SUPERBPE_LINES)
                )
                hold(data, i, end, piece, records, pending, scanned, True)
                scanned, position = scanned + 1, end
                if scanned - counted < AHEAD:
                    continue
            elif counted == scanned:
                return pieces, 0, used, n
            # count the oldest pre-token scanned (in the order of the text, so the first seen is first)
            i, end, at, h, key = taken(pending, counted)
            r, meta = find(data, i, end, h, key, arena, records)
            if records[r + META] != 0:
                records[r + COUNT] += 1
            elif n == len(starts) or used + end - i > len(arena) or 2 * (n + 1) * RECORD > len(records):
                return at, i, used, n  # full: grow, and come back to scan it again
            else:
                for k in range(end - i):  # not a slice assignment: compile_once.py says why
                    arena[used + k] = data[i + k]
                starts[n] = used
                records[r + KEY], records[r + META], records[r + COUNT], records[r + AT] = key, meta, 1, used
                used += end - i
                n += 1
            counted += 1

    # Without numba's reference counting (``_nrt=False``): the loop allocates nothing, and the counts
    # it would make on the arrays each inlined scanner takes, atomic, took half the time of a scan.
    compile = njit(cache=True, nogil=True, _nrt=False, no_cfunc_wrapper=True)
    return compile(own_cache_file(count_pieces, pattern))


COUNT_LOOPS = {number: count_loop(number) for number in NUMBERS.values()}


class Counter:
    """Pre-token counts of one built-in pattern, in flat arrays that grow as needed.

    Takes the pattern's name (``gpt2``, ``gpt4``, ``o200k`` or ``superbpe``) and a first capacity
    (words); ``add`` counts text into it, ``arrays`` gives the counts, ``len`` how many distinct
    pre-tokens it holds.

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
        self.records = table(2 * capacity)
        self.pending = np.empty(AHEAD * PENDING, np.int64)
        self.used = self.n = 0
        self._order: np.ndarray | None = None  # ``_in_order``'s

    def add(self, data: bytes, bounds: np.ndarray) -> None:
        """Count the pre-tokens of the pieces ``data[bounds[2k]:bounds[2k+1]]`` (UTF-8)."""
        view = readonly(np.frombuffer(data, np.uint8))
        piece, position, self._order = 0, 0, None
        while piece < len(bounds) // 2:
            # The class table, then the counts so far and the arrays that hold them, in the loop's order.
            state = (self.classes, self.arena, self.used, self.starts, self.n, self.records, self.pending)
            piece, position, self.used, self.n = self._loop(view, bounds, piece, position, *state)
            if piece < len(bounds) // 2:
                self._grow(need=int(bounds[2 * piece + 1]) - position)

    def _grow(self, need: int) -> None:
        if self.used + need > len(self.arena):
            self.arena = _grown(self.arena, max(2 * len(self.arena), self.used + need), self.used)
        if self.n == len(self.starts):
            self.starts = _grown(self.starts, 2 * len(self.starts), self.n)
        if 2 * (self.n + 1) * RECORD > len(self.records):
            self.records = grown_table(self.records)

    def __len__(self) -> int:
        return self.n

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The distinct pre-tokens back to back (uint8, the arena itself), where each starts and the
        last ends (int64, from 0), and their counts (int64), in the order first seen."""
        counts = self.records[self._in_order() + COUNT]
        return self.arena[: self.used], np.append(self.starts[: self.n], self.used), counts

    def prefixes(self) -> np.ndarray:
        """Each pre-token's first eight bytes as one big-endian number (zeros after a shorter one), in
        the order of ``arrays``: words in the order of these are in the order of their bytes, but for
        those alike in their first eight (a sort by bytes then compares only those)."""
        return self.records[self._in_order() + KEY].view(np.uint64).byteswap()  # a record's are little-endian

    def _in_order(self) -> np.ndarray:
        """Where the records start, in the order their words were first seen (kept until ``add``)."""
        if self._order is None:
            held = np.flatnonzero(self.records[META::RECORD]) * RECORD
            # Each word has its own place in the arena, in the order first seen: the records in the
            # order of their places are the words in that order.
            self._order = held[np.argsort(self.records[held + AT])]
        return self._order


def _grown(array: np.ndarray, size: int, keep: int) -> np.ndarray:
    grown = np.empty(size, array.dtype)
    grown[:keep] = array[:keep]
    return grown
