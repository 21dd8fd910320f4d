"""The compiled merge loop's state: the words, the pairs, their holder lists and the heap.

Takes the words in chunks of flat arrays (their bytes back to back, where each starts, and its
count: what an Arrow binary column holds, with no Python object per word) and the first
vocabulary; gives the arrays ``merge_loop`` works on (``Words``, then ``State``). The loop is
bound by memory, both its size and its speed, so what a merge reads together sits together, in as
few bytes as it takes:

- Every word (of two bytes or more) is one record in one array (``Words.records``): its count (64
  bits: four uint16 or two int32, low first), its token ids, and an end mark (``end_mark``). Token
  ids are uint16 while the vocabulary fits (at most 65,535 tokens, 0xFFFF being the end mark),
  int32 beyond (-1 the end mark). A merge shortens a word in place, moving its end mark. A word is
  known by where its record starts: uint32 while the records fit (``POSITIONS``), int64 beyond.
  The records are in the order of their bytes (``Words.sort``), so that a pair's holders are near
  each other.
- A pair ``(a, b)`` is the int64 key ``a << 32 | b``, with a record of its own (``pair_map``): its
  count, and its list of holder words in ``pool``, which names them by position. Before any merge a
  pair is two bytes: a counting sort over the records makes every list in one go, each word named
  once per pair it holds. After that a pair gains holders only in the merge that creates it (every
  pair a merge adds holds the new token), so its list is written then, whole and tight; a merged or
  vanished pair's list is dead room, which the pool squeezes out in place when it fills. Lists may
  name words that lost the pair since: a merge skips those, as the pure-Python loop does.
- The heap holds one ``(count, pair id)`` entry per pair that may still be chosen, highest count
  first, then the greater pair of byte strings: a pair's count only falls after the merge that
  creates it, so its entry is pushed then (or by ``heapify``, for the byte pairs) and lowered to the
  current count when it surfaces above it.
- With a longest token (``max_token_length``), a pair that would make a longer one is counted
  like any other but never has a heap entry (none is pushed for it), so it is never chosen; tokens
  keep their bytes, so it never fits later either.

Arrays are allocated once with room to spare (``np.empty``: pages never written cost no memory)
rather than doubled as they fill, which holds two copies at once: the records for every byte of
the words, the pool with half as much room again as its lists need at first (its limit of use
rises into that room when the live lists need it; its pages past its use go back to the system
after a squeeze, ``State.give_back``), the pairs' records and the heap for a pair per word (tables
of more pairs than words, which are small ones, copy them to grow).
"""

from __future__ import annotations

import ctypes
import mmap
import sys
from collections.abc import Iterable

import numpy as np
from numba import njit

from bpe_dask.compiled.hashing import LOW
from bpe_dask.compiled.pair_heap import sift_down
from bpe_dask.compiled.pair_map import COUNT, KEY, LENGTH, NO_PAIR, START, add, index_pairs
from bpe_dask.compiled.prefetch import prefetch

UNLIMITED = 2**62  # the longest token when there is no max_token_length
WIDE_VOCAB = 65_535  # above this many tokens, token ids are int32 (uint16's 0xFFFF is the end mark)
POSITIONS = 2**32  # records of fewer elements than this are named by uint32 positions; more, int64
INDEX_LOAD = 2  # the pairs' index has at least this many slots per pair
_AHEAD = 32  # records read ahead while they are sorted

Chunk = tuple[np.ndarray, np.ndarray, np.ndarray]  # bytes (uint8), where words start (int64), counts


def token_dtype(vocab_size: int) -> np.dtype:
    """The records' type for a vocabulary of ``vocab_size`` tokens."""
    return np.dtype(np.uint16 if vocab_size <= WIDE_VOCAB else np.int32)


@njit(cache=True, nogil=True, inline="always")
def count_width(words):
    """How many elements a record's count takes."""
    return 4 if words.itemsize == 2 else 2


@njit(cache=True, nogil=True, inline="always")
def end_mark(words):
    return 0xFFFF if words.itemsize == 2 else -1


@njit(cache=True, nogil=True, inline="always")
def count_of(words, p):
    """The count of the word whose record starts at ``p``."""
    if words.itemsize == 2:
        return (np.int64(words[p]) | (np.int64(words[p + 1]) << 16) | (np.int64(words[p + 2]) << 32)
                | (np.int64(words[p + 3]) << 48))  # fmt: skip
    return (np.int64(words[p + 1]) << 32) | (np.int64(words[p]) & LOW)


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
def _prefixes(words, used, n):
    """Each record's first eight bytes as a big-endian number (shorter words padded with zeros:
    their order is the order of the bytes), and where it starts; and whether they are in order."""
    width, end = count_width(words), end_mark(words)
    keys, starts = np.empty(n, np.uint64), np.empty(n, np.int64)
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
    return keys, starts, in_order


@njit(cache=True, nogil=True)
def _radix_order(keys, order, spare, spare_keys):
    """The order that sorts ``keys`` (a stable radix sort, 16 bits a pass, through ``order`` and the
    ``spare`` arrays, each as long as ``keys``; ``keys`` is overwritten): one of the two buffers."""
    n = len(keys)
    for i in range(n):
        order[i] = i
    for shift in range(0, 64, 16):
        counts = np.zeros((1 << 16) + 1, np.int64)
        for i in range(n):
            counts[((keys[i] >> np.uint64(shift)) & np.uint64(0xFFFF)) + 1] += 1
        if counts.max() == n:
            continue  # every key has the same 16 bits here
        place = np.cumsum(counts)
        for i in range(n):
            digit = (keys[i] >> np.uint64(shift)) & np.uint64(0xFFFF)
            spare[place[digit]], spare_keys[place[digit]] = order[i], keys[i]
            place[digit] += 1
        order, spare, keys, spare_keys = spare, order, spare_keys, keys
    return order


@njit(cache=True, nogil=True)
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
    ``data_bytes`` are how many words and bytes the chunks hold; ``byte_tokens`` is the bytes of
    text the words stand for (each word's bytes times its count)."""

    def __init__(self, chunks: Iterable[Chunk], rows: int, data_bytes: int, vocab_size: int):
        dtype = token_dtype(vocab_size)
        width = 4 if dtype.itemsize == 2 else 2
        # At most this many elements: words of one byte take none. Pages never written cost nothing.
        self.records = np.empty(max(1, data_bytes + rows * (width + 1)), dtype)
        self.rows, self.used, self.count, self.byte_tokens = rows, 0, 0, 0
        for chunk in chunks:
            # Read-only views, whatever the chunk's arrays are: numba compiles one version per kind.
            data, offsets, freqs = (np.asarray(a).view() for a in chunk)
            for array in (data, offsets, freqs):
                array.flags.writeable = False
            self.used, n, text = _lay_out(data, offsets, freqs, self.records, self.used)
            self.count += n
            self.byte_tokens += int(text)

    def sort(self) -> None:
        """Put the records in the order of their bytes (of their first eight: ``bpe-dask count``
        writes its tables in that order, and then this is one pass that finds them so). The loop
        runs faster so, as a pair's holders, which it reads in the order they are laid out, are then
        close together; what it learns does not depend on the order. Takes another copy of the
        records while it moves them, so it runs once whoever held the words in another form has let
        them go."""
        keys, starts, in_order = _prefixes(self.records, self.used, self.count)
        if not in_order:
            # Arrays numpy allocates (not numba): numpy asks Linux for huge pages, which these reads
            # and writes all over them need (a page table entry per 2 MiB, not per 4 KiB).
            n = len(keys)
            order = _radix_order(keys, np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.uint64))
            del keys
            moved = np.empty_like(self.records)
            _gather(self.records, starts, order, moved)
            self.records = moved

    @property
    def positions(self) -> np.dtype:
        """The type that names a word by where its record starts."""
        return np.dtype(np.uint32 if self.used < POSITIONS else np.int64)


@njit(cache=True, nogil=True)
def fits(key, sizes, longest):
    """Whether the pair ``key`` makes a token of at most ``longest`` bytes."""
    return sizes[key >> 32] + sizes[key & LOW] <= longest


@njit(cache=True, nogil=True)
def heapify(pairs, used, heap_counts, heap_ids, token_bytes, offsets, sizes, longest):
    """Fill the heap with every pair of positive count that fits; returns its size."""
    size = np.int64(0)
    for pair in range(used):
        if pairs[pair, COUNT] > 0 and fits(pairs[pair, KEY], sizes, longest):
            heap_counts[size], heap_ids[size] = pairs[pair, COUNT], pair
            size += 1
    for i in range(size // 2 - 1, -1, -1):
        sift_down(heap_counts, heap_ids, size, i, pairs, token_bytes, offsets, sizes)
    return size


@njit(cache=True, nogil=True)
def _byte_pairs(words, used):
    """How many words of the records before ``used`` hold each byte pair, and its weighted count."""
    width, end = count_width(words), end_mark(words)
    holders = np.zeros(1 << 16, np.int64)
    weighted = np.zeros(1 << 16, np.int64)
    last = np.full(1 << 16, -1, np.int64)  # the word a pair was last counted for
    p = 0
    while p < used:
        f = count_of(words, p)
        r = p + width
        while words[r + 1] != end:
            pair = (np.int64(words[r]) << 8) | np.int64(words[r + 1])
            weighted[pair] += f
            if last[pair] != p:
                last[pair] = p
                holders[pair] += 1
            r += 1
        p = r + 2
    return holders, weighted


@njit(cache=True, nogil=True)
def _list_byte_pairs(words, used, holders, weighted, pool, pairs, index):
    """Every byte pair of the records before ``used`` into ``pairs`` (and ``index``), with its count
    (``weighted``) and its list of holders in ``pool``, ``holders`` long, in the order of the pairs'
    keys; returns how many pairs.

    Before any merge a pair is two bytes, one of 65,536: a counting sort, this second pass over the
    words after ``_byte_pairs``, groups the holders by pair, each word once per pair.
    """
    width, end = count_width(words), end_mark(words)
    fill = np.zeros(1 << 16, np.int64)
    for pair in range(1, 1 << 16):  # where each pair's list starts (a loop: compiled/compile_once.py)
        fill[pair] = fill[pair - 1] + holders[pair - 1]
    start = fill.copy()
    last = np.full(1 << 16, -1, np.int64)
    p = 0
    while p < used:
        r = p + width
        while words[r + 1] != end:
            pair = (np.int64(words[r]) << 8) | np.int64(words[r + 1])
            if last[pair] != p:
                last[pair] = p
                pool[fill[pair]] = p
                fill[pair] += 1
            r += 1
        p = r + 2
    n = np.int64(0)  # not a literal 0: numba would compile ``add`` for it apart
    for pair in range(1 << 16):
        if holders[pair]:
            add(index, pairs, n, (np.int64(pair >> 8) << 32) | (pair & 0xFF))
            pairs[n, COUNT], pairs[n, START], pairs[n, LENGTH] = weighted[pair], start[pair], holders[pair]
            n += 1
    return n


def free_pages(array: np.ndarray, start: int, end: int) -> None:
    """Give the whole pages of ``array[start:end]`` back to the system (Linux's ``madvise``
    ``MADV_DONTNEED``): they read as zeros if written again, and hold no memory until then. Elsewhere,
    nothing."""
    if _LIBC is None:
        return
    page = mmap.PAGESIZE
    first = -(-(array.ctypes.data + start * array.itemsize) // page) * page
    last = (array.ctypes.data + end * array.itemsize) // page * page
    if last > first:
        _LIBC.madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first), 4)  # 4: MADV_DONTNEED


_LIBC = ctypes.CDLL(None) if sys.platform.startswith("linux") else None


class State:
    """The arrays the compiled functions share, between batches of merges. Takes the records from
    ``words``, which is left empty."""

    def __init__(self, words: Words, vocab: dict, vocab_size: int, longest: int = UNLIMITED):
        if len(words.records) < words.used:
            raise ValueError("these words were merged already: a merge takes their records")
        if words.records.dtype != token_dtype(vocab_size):
            raise ValueError(f"words laid out for another vocabulary size than {vocab_size}")
        words.sort()
        self.words, used, positions = words.records, words.used, words.positions
        words.records = np.empty(0, self.words.dtype)
        # The bytes of every token, with room for the ones merges will add.
        capacity = max(vocab_size, len(vocab))
        self.token_bytes = np.zeros(max(1, sum(len(t) for t in vocab.values())) * 4 + 64, np.uint8)
        self.offsets = np.zeros(capacity, np.int64)
        self.sizes = np.zeros(capacity, np.int64)
        self.bytes_used = 0
        for token_id, token in vocab.items():
            self.token_bytes[self.bytes_used : self.bytes_used + len(token)] = np.frombuffer(token, np.uint8)
            self.offsets[token_id], self.sizes[token_id] = self.bytes_used, len(token)
            self.bytes_used += len(token)
        # Room for a pair per word (many more than most tables make), or for the 65,536 byte pairs.
        self.pairs = np.empty((max(1 << 17, words.count), 4), np.int64)
        self.index = np.full(INDEX_LOAD << 16, NO_PAIR, np.int32)
        holders, weighted = _byte_pairs(self.words, used)
        # The pool (numpy's: huge pages, as in ``Words.sort``): its lists, then room for the first
        # merges' new lists (an eighth more, or the longest list, which the first merge frees) up to
        # its limit of use, and half as much again.
        self.pool_used = int(holders.sum())
        self.pool_limit = self.pool_used + max(self.pool_used // 8, int(holders.max())) + 16
        self.pool = np.empty(self.pool_limit + self.pool_used // 2, positions)
        self.pairs_used = _list_byte_pairs(self.words, used, holders, weighted, self.pool, self.pairs,
                                           self.index)  # fmt: skip
        self.pool_written = self.pool_used  # how far the pool's pages hold memory (its highest use)
        self.heap_counts = np.empty(len(self.pairs), np.int64)
        self.heap_ids = np.empty(len(self.pairs), np.int32)
        self.heap_size = heapify(self.pairs, self.pairs_used, self.heap_counts, self.heap_ids,
                                 self.token_bytes, self.offsets, self.sizes, longest)  # fmt: skip
        self.gained_pairs = np.empty(1024, np.int32)  # a merge's new holders, before their lists are laid
        self.gained_words = np.empty(1024, positions)

    def give_back(self) -> None:
        """Return to the system the pages of the pool past its use, once a squeeze has left a good
        part of them unused: the pool's use is highest in the first merges, and this leaves the
        memory to the pairs, which grow in the last ones."""
        unused = (self.pool_written - self.pool_used) * self.pool.itemsize
        if unused > max(1 << 26, self.pool_used * self.pool.itemsize // 8):
            free_pages(self.pool, self.pool_used, self.pool_written)
            self.pool_written = self.pool_used

    def room_for(self, pairs: int) -> None:
        """Grow the pairs' records and the heap (copied), and the index (rebuilt), so that ``pairs``
        more fit."""
        need = self.pairs_used + pairs
        if need > len(self.pairs):
            size = max(2 * len(self.pairs), need)
            grown = np.empty((size, 4), np.int64)
            grown[: self.pairs_used] = self.pairs[: self.pairs_used]
            self.pairs = grown
            for name in ("heap_counts", "heap_ids"):
                old = getattr(self, name)
                new = np.empty(size, old.dtype)
                new[: self.heap_size] = old[: self.heap_size]
                setattr(self, name, new)
        if INDEX_LOAD * need > len(self.index):
            self.index = np.empty(0, np.int32)  # let the old one go first
            self.index = np.full(1 << (INDEX_LOAD * need - 1).bit_length(), NO_PAIR, np.int32)
            index_pairs(self.pairs, self.pairs_used, self.index)

