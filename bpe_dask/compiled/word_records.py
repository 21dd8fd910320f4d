"""The merge loop's words as records (compiled): word counts in flat arrays in, one array of records out.

Takes the words in chunks of flat arrays (their bytes back to back, where each starts, and its
count: what an Arrow binary column holds, with no Python object per word) and the vocabulary size;
gives ``Words``, which ``merge_state.State`` takes. The loop is bound by memory, both its size and its
speed, so what a merge reads together sits together, in as few bytes as it takes:

- Every word of two bytes or more is one record in one array (``Words.records``): its count (64
  bits: four uint16 or two int32, low first), its token ids, and an end mark (``end_mark``). Token
  ids are uint16 while the vocabulary fits (at most 65,535 tokens, 0xFFFF being the end mark),
  int32 beyond (-1 the end mark). A merge shortens a word in place, moving its end mark.
- A word is known by where its record starts: uint32 while the records fit (``POSITIONS``), int64
  beyond.
- The records are in the order of their bytes (``Words.sort``), so that a pair's holders are near
  each other. What the loop learns does not depend on that order.

The records' array is allocated once, for every byte of the words (``np.empty``: pages never
written cost no memory), rather than doubled as it fills, which would hold two copies at once.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numba import njit

from bpe_dask.compiled.compile_once import readonly
from bpe_dask.compiled.hashing import LOW
from bpe_dask.compiled.prefetch import prefetch

WIDE_VOCAB = 65_535  # above this many tokens, token ids are int32 (uint16's 0xFFFF is the end mark)
POSITIONS = 2**32  # records of fewer elements than this are named by uint32 positions; more, int64
_AHEAD = 32  # records read ahead while they are sorted

Chunk = tuple[np.ndarray, np.ndarray, np.ndarray]  # bytes (uint8), where words start (int64), counts


def token_dtype(vocab_size: int) -> np.dtype:
    """The records' type for a vocabulary of ``vocab_size`` tokens."""
    return np.dtype(np.uint16 if vocab_size <= WIDE_VOCAB else np.int32)


# These three are called, not inlined by numba: compiled once rather than typed again at each call site,
# and inlined by LLVM all the same.
@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def count_width(words):
    """How many elements a record's count takes."""
    return 4 if words.itemsize == 2 else 2


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def end_mark(words):
    """The element that ends a record: 0xFFFF in uint16 records, -1 in int32 ones."""
    return 0xFFFF if words.itemsize == 2 else -1


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def count_of(words, p):
    """The count of the word whose record starts at ``p``."""
    if words.itemsize == 2:
        return (
            np.int64(words[p])
            | (np.int64(words[p + 1]) << 16)
            | (np.int64(words[p + 2]) << 32)
            | (np.int64(words[p + 3]) << 48)
        )
    return (np.int64(words[p + 1]) << 32) | (np.int64(words[p]) & LOW)


# Those that allocate nothing are compiled without numba's reference counts: less code to compile.
@njit(cache=True, nogil=True, _nrt=False, no_cfunc_wrapper=True)
def _lay_out(data, offsets, freqs, words, p):
    """Append the records of the words ``data[offsets[i]:offsets[i + 1]]`` counted ``freqs[i]`` (those
    of two bytes or more: a single byte holds no pair) at ``p``; returns where they end, how many
    there are, and the bytes of text all the words stand for (each word's bytes times its count)."""
    width, end = count_width(words), end_mark(words)
    n, text = 0, np.int64(0)
    for w in range(len(offsets) - 1):
        length = offsets[w + 1] - offsets[w]
        f = freqs[w]
        text += length * f
        if length < 2:
            continue
        if width == 4:
            for k in range(4):
                words[p + k] = (f >> (16 * k)) & 0xFFFF
        else:
            words[p], words[p + 1] = f & LOW, f >> 32
        p += width
        for k in range(length):
            words[p + k] = data[offsets[w] + k]
        p += length
        words[p] = end
        p += 1
        n += 1
    return p, n, text


@njit(cache=True, nogil=True, _nrt=False, no_cfunc_wrapper=True)
def _prefixes(words, used, keys, starts):
    """Each record's first eight bytes as a big-endian number (shorter words padded with zeros:
    their order is the order of the bytes) into ``keys``, and where it starts into ``starts``; and
    whether they are in order."""
    width, end = count_width(words), end_mark(words)
    in_order = True
    p, i = 0, 0
    while p < used:
        r, key = p + width, np.uint64(0)
        for k in range(8):
            if words[r + k] == end:
                break
            key |= np.uint64(words[r + k]) << np.uint64(56 - 8 * k)
        while words[r] != end:
            r += 1
        keys[i], starts[i] = key, p
        if i and keys[i - 1] > key:
            in_order = False
        p, i = r + 1, i + 1
    return in_order


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _radix_order(keys, order, spare, spare_keys, place):
    """The order that sorts ``keys`` (a stable radix sort, 16 bits a pass, through ``order`` and the
    ``spare`` arrays, each as long as ``keys``, and ``place``, of 65,536 elements; ``keys`` is
    overwritten): one of the two buffers. Plain loops, no numpy function: each costs compile time."""
    n = len(keys)
    for i in range(n):
        order[i] = i
    for shift in range(0, 64, 16):
        for digit in range(1 << 16):
            place[digit] = 0
        for i in range(n):
            place[(keys[i] >> np.uint64(shift)) & np.uint64(0xFFFF)] += 1
        start, alike = np.int64(0), False
        for digit in range(1 << 16):  # each digit's count, then where its keys go
            count = place[digit]
            alike |= count == n
            place[digit], start = start, start + count
        if alike:
            continue  # every key has the same 16 bits here
        for i in range(n):
            digit = (keys[i] >> np.uint64(shift)) & np.uint64(0xFFFF)
            spare[place[digit]], spare_keys[place[digit]] = order[i], keys[i]
            place[digit] += 1
        order, spare, keys, spare_keys = spare, order, spare_keys, keys
    return order


@njit(cache=True, nogil=True, _nrt=False, no_cfunc_wrapper=True)
def _gather(words, starts, order, moved):
    """The records that start at ``starts[order]``, in that order, into ``moved``."""
    width, end = count_width(words), end_mark(words)
    n, q = len(order), 0
    for i in range(min(n, 2 * _AHEAD)):
        prefetch(starts, order[i])
    for i in range(min(n, _AHEAD)):
        prefetch(words, starts[order[i]])
    for i in range(n):
        # The records lie anywhere, and so do their starts: ask for the next ones now, the starts
        # further ahead, as finding a record needs its start first.
        if i + 2 * _AHEAD < n:
            prefetch(starts, order[i + 2 * _AHEAD])
        if i + _AHEAD < n:
            prefetch(words, starts[order[i + _AHEAD]])
        p = starts[order[i]]
        for k in range(width):
            moved[q + k] = words[p + k]
        p, q = p + width, q + width
        while words[p] != end:
            moved[q] = words[p]
            p, q = p + 1, q + 1
        moved[q] = end
        q += 1


class Words:
    """The words as the merge loop's records, laid out chunk by chunk (``Chunk``: a chunk's bytes,
    where each of its words starts and the last ends, from 0, and their counts), so that whoever
    holds the words in another form can let it go before the loop starts. ``rows`` and
    ``data_bytes`` are how many words and elements the chunks hold; ``tokens`` is the tokens the
    words stand for (each word's ids times its count: its bytes, where ids are bytes)."""

    loop = "compiled loop (numba)"

    def __init__(self, chunks: Iterable[Chunk], rows: int, data_bytes: int, vocab_size: int):
        dtype = token_dtype(vocab_size)
        width = 4 if dtype.itemsize == 2 else 2
        # At most this many elements: words of one byte take none. Pages never written cost nothing.
        self.records = np.empty(max(1, data_bytes + rows * (width + 1)), dtype)
        self.rows, self.used, self.count, self.tokens = rows, 0, 0, 0
        self.of_bytes = True  # whether every id is a byte's (training from the bytes)
        for chunk in chunks:
            # Read-only, whatever the chunk's arrays are: numba compiles one version per kind.
            data, offsets, freqs = (readonly(np.asarray(a)) for a in chunk)
            self.of_bytes &= data.dtype == np.uint8
            self.used, n, text = _lay_out(data, offsets, freqs, self.records, self.used)
            self.count += n
            self.tokens += int(text)

    def sort(self) -> None:
        """Put the records in the order of their bytes (of their first eight: ``bpe-dask count``
        writes its tables in that order, and then this is one pass that finds them so). The loop
        runs faster so, as a pair's holders, which it reads in the order they are laid out, are then
        close together; what it learns does not depend on the order. Takes another copy of the
        records while it moves them, so it runs once whoever held the words in another form has let
        them go."""
        # Arrays numpy allocates (not numba): numpy asks Linux for huge pages, which these reads and
        # writes all over them need (a page table entry per 2 MiB, not per 4 KiB).
        n = self.count
        keys, starts = np.empty(n, np.uint64), np.empty(n, np.int64)
        if not _prefixes(self.records, self.used, keys, starts):
            place = np.empty(1 << 16, np.int64)
            order = _radix_order(
                keys, np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.uint64), place
            )
            del keys
            moved = np.empty_like(self.records)
            _gather(self.records, starts, order, moved)
            self.records = moved

    @property
    def positions(self) -> np.dtype:
        """The type that names a word by where its record starts."""
        return np.dtype(np.uint32 if self.used < POSITIONS else np.int64)
