"""The compiled merge loop's state: the words' records in, their pairs, holder lists and heap out.

Takes ``Words`` (``word_records``: the words laid out as records), the first vocabulary and the
vocabulary size; gives ``State``, the arrays ``merge_loop`` works on, between its batches of merges:

- A pair ``(a, b)`` is the int64 key ``a << 32 | b``, with a record of its own (``pair_map``): its
  count, and its list of holder words in ``pool``, which names them by position. Before any merge,
  two passes over the records (a counting sort) make every list in one go, each word named once per
  pair it holds; a pair of two bytes has the record whose id is the pair itself. After that a pair
  gains holders only in the merge that creates it (every pair a merge adds holds the new token), so
  its list is written then, whole and tight; a merged or vanished pair's list is dead room, which
  the pool squeezes out in place when it fills. Lists may name words that lost the pair since: a
  merge skips those, as the pure-Python loop does.
- The heap holds one ``(count, pair id)`` entry per pair that may still be chosen, highest count
  first, then the greater pair of byte strings: a pair's count only falls after the merge that
  creates it, so its entry is pushed then (or by ``heapify``, for the byte pairs) and lowered to the
  current count when it surfaces above it.
- With limits on the tokens (``rules.bpe.allowed``: ``max_token_length``, ``max_words``,
  ``forbid``, as ``token_rules`` lays them out), a pair that would make a token they rule out is
  counted like any other but never has a heap entry, so it is never chosen; tokens keep their
  bytes, so it never fits later either.

Arrays are allocated once with room to spare (``np.empty``: pages never written cost no memory)
rather than doubled as they fill, which holds two copies at once: the pool with half as much room
again as its lists need at first (its limit of use rises into that room when the live lists need
it; its pages past its use go back to the system after a squeeze, ``State.give_back``), the pairs'
records and the heap for a pair per word (tables of more pairs than words, which are small ones,
copy them to grow: ``State.room_for``).
"""

from __future__ import annotations

import ctypes
import mmap
import sys

import numpy as np
from numba import njit

from bpe_dask.compiled.hashing import LOW
from bpe_dask.compiled.pair_heap import sift_down
from bpe_dask.compiled.pair_map import COUNT, KEY, LENGTH, NO_PAIR, START, add, compact, find, index_pairs
from bpe_dask.compiled.word_records import Words, count_of, count_width, end_mark, token_dtype

UNLIMITED = 2**62  # the longest token when there is no max_token_length
INDEX_LOAD = 2  # the pairs' index has at least this many slots per pair
# What each element of ``State.uses`` (int64; a batch of merges updates it in place) is: how many of
# the pairs' records are used, the pool's use, its limit of use and its highest use (how far its pages
# hold memory), the heap's size, and how many bytes of the tokens' bytes are used.
PAIRS_USED, POOL_USED, POOL_LIMIT, POOL_WRITTEN, HEAP_SIZE, BYTES_USED = range(6)
# The parts of the state that ``merge_loop._merge_batch`` takes first, and those it gives back (arrays
# it may have regrown) after how many merges it made and ``below``, in order (``State.batch_arrays``,
# ``take``).
BATCH_TAKES = "words pairs index pool heap gained tokens uses"
BATCH_GIVES = "pool gained tokens"


# The functions here allocate nothing: compiled without numba's reference counts, they are less code to
# compile (and to run).
def token_rules(
    max_token_length: int | None = None, max_words: int | None = None, forbid: tuple[str, ...] = ()
) -> tuple:
    """The limits on the tokens as the compiled loops take them (``fits``): the longest token in
    bytes, the most words (``UNLIMITED``: none), and the byte strings no token may hold, back to
    back, with where each ends."""
    parts = [part.encode("utf-8") for part in forbid]
    data = np.frombuffer(b"".join(parts) or b"\0", np.uint8).copy()
    ends = np.cumsum([0, *map(len, parts)]).astype(np.int64)
    return (
        np.int64(UNLIMITED if max_token_length is None else min(max_token_length, UNLIMITED)),
        np.int64(UNLIMITED if max_words is None else min(max_words, UNLIMITED)),
        data,
        ends,
    )


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _byte(token_bytes, offsets, sizes, a, b, k):
    """Byte ``k`` of token ``a`` followed by token ``b``."""
    return token_bytes[offsets[a] + k] if k < sizes[a] else token_bytes[offsets[b] + k - sizes[a]]


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def fits(key, token_bytes, offsets, sizes, rules):
    """Whether the pair ``key`` makes a token the ``rules`` (``token_rules``) allow, as
    ``rules.bpe.allowed`` says."""
    longest, most_words, forbid, ends = rules
    a, b = key >> 32, key & LOW
    size = sizes[a] + sizes[b]
    if size > longest:
        return False
    if most_words < UNLIMITED:
        words, spaced = 0, True
        for k in range(size):
            space = _byte(token_bytes, offsets, sizes, a, b, k) == 0x20
            words += not space and spaced
            spaced = space
        if words > most_words:
            return False
    for f in range(len(ends) - 1):
        length = ends[f + 1] - ends[f]
        for at in range(size - length + 1):
            k = 0
            while k < length and _byte(token_bytes, offsets, sizes, a, b, at + k) == forbid[ends[f] + k]:
                k += 1
            if k == length:
                return False
    return True


@njit(cache=True, nogil=True, inline="always")
def grown(array, size, keep):
    """A new array of ``size`` elements that starts with the first ``keep`` of ``array`` (copied in a
    loop: compiled/compile_once.py says why)."""
    bigger = np.empty(size, array.dtype)
    for k in range(keep):
        bigger[k] = array[k]
    return bigger


# The steps of a merge both loops take alike (``merge_loop``'s words, ``merge_positions``' long ones),
# called, not inlined by numba: compiled once, and inlined by LLVM all the same.
@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def best_pair(heap_counts, heap_ids, heap_size, pairs, token_bytes, offsets, sizes):
    """The best pair whose heap entry is current (-1: none left), at the top of the heap, and the
    heap's size. Every pair with a count has one entry, at least that high: an entry above its
    pair's count is lowered to it and put back in its place; one of a pair no word holds is dropped."""
    while heap_size > 0:
        count, pair = heap_counts[0], heap_ids[0]
        now = pairs[pair, COUNT]
        if now == count:
            return np.int64(pair), heap_size
        if now > 0:
            heap_counts[0] = now
        else:  # merged, or no word holds it any more
            heap_size -= 1
            heap_counts[0], heap_ids[0] = heap_counts[heap_size], heap_ids[heap_size]
        sift_down(heap_counts, heap_ids, heap_size, np.int64(0), pairs, token_bytes, offsets, sizes)
    return np.int64(-1), heap_size


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def pop_top(heap_counts, heap_ids, heap_size, pairs, token_bytes, offsets, sizes):
    """Take the heap's top entry out; returns its size."""
    heap_size -= 1
    heap_counts[0], heap_ids[0] = heap_counts[heap_size], heap_ids[heap_size]
    sift_down(heap_counts, heap_ids, heap_size, np.int64(0), pairs, token_bytes, offsets, sizes)
    return heap_size


@njit(cache=False, nogil=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def join_tokens(token_bytes, offsets, sizes, bytes_used, a, b, x):
    """Token ``x``'s bytes, ``a``'s then ``b``'s, after the tokens' bytes (which grow when full);
    returns them and their use."""
    need = sizes[a] + sizes[b]
    if bytes_used + need > len(token_bytes):
        token_bytes = grown(token_bytes, 2 * len(token_bytes) + need, bytes_used)
    for k in range(sizes[a]):
        token_bytes[bytes_used + k] = token_bytes[offsets[a] + k]
    for k in range(sizes[b]):
        token_bytes[bytes_used + sizes[a] + k] = token_bytes[offsets[b] + k]
    offsets[x], sizes[x] = bytes_used, need
    return token_bytes, bytes_used + need


@njit(cache=False, nogil=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def lay_lists(
    pairs, pairs_used, pool, pool_used, pool_limit, new_pairs, n_new, gained_pairs, gained, n_gained
):
    """The lists of a merge's ``new_pairs``, laid tight at the end of the pool (squeezed first if
    full; the limit of use raised, and the pool grown, when the live lists need it), each holding
    its ``gained`` in order; returns the pool, its use and its limit."""
    for k in range(n_new):
        pairs[new_pairs[k], START] = -1  # not a list yet
    if pool_used + n_gained > pool_limit:
        pool_used = compact(pairs, pairs_used, pool)
        pool_limit = max(pool_limit, pool_used + n_gained + (pool_used + n_gained) // 8)
        if pool_limit > len(pool):
            pool = grown(pool, max(len(pool) + len(pool) // 4, pool_limit), pool_used)
    for k in range(n_new):
        pair = new_pairs[k]
        pairs[pair, START] = pool_used
        pool_used += pairs[pair, LENGTH]
        pairs[pair, LENGTH] = 0
    for g in range(n_gained):
        pair = gained_pairs[g]
        pool[pairs[pair, START] + pairs[pair, LENGTH]] = gained[g]
        pairs[pair, LENGTH] += 1
    return pool, pool_used, pool_limit


@njit(cache=True, nogil=True, _nrt=False, no_cfunc_wrapper=True)
def heapify(pairs, used, heap_counts, heap_ids, token_bytes, offsets, sizes, rules):
    """Fill the heap with every pair of positive count that fits the ``rules``; returns its size."""
    size = np.int64(0)
    for pair in range(used):
        if pairs[pair, COUNT] > 0 and fits(pairs[pair, KEY], token_bytes, offsets, sizes, rules):
            heap_counts[size], heap_ids[size] = pairs[pair, COUNT], pair
            size += 1
    for i in range(size // 2 - 1, -1, -1):
        sift_down(heap_counts, heap_ids, size, i, pairs, token_bytes, offsets, sizes)
    return size


@njit(cache=True, nogil=True, _nrt=False, no_cfunc_wrapper=True)
def _count_pairs(words, used, pairs, index, last, of_bytes):
    """Every pair of the records before ``used`` into ``pairs`` (found through ``index``, both empty):
    its count, and how many words hold it (``LENGTH``, each word once per pair it holds; ``last``, as
    long as ``pairs``, is the word a pair was last counted for). Returns how many pairs, or -1 when
    ``pairs`` or its index is too small for them (nothing kept: the caller makes both larger and calls
    again).

    Words whose ids are bytes (``of_bytes``, training from the bytes) hold only byte pairs, one of
    65,536: each has a record first, in the order of their keys, whose id is the pair itself
    (``a << 8 | b``), so that both passes over the words find it without the index.
    """
    width, end = count_width(words), end_mark(words)
    n = np.int64(0)
    if of_bytes:
        for pair in range(1 << 16):
            add(index, pairs, n, (np.int64(pair >> 8) << 32) | (pair & 0xFF))
            last[n] = -1
            n += 1
    p = np.int64(0)  # not 0: see compiled/compile_once.py
    while p < used:
        f = count_of(words, p)
        r = p + width
        while words[r + 1] != end:
            a, b = np.int64(words[r]), np.int64(words[r + 1])
            if of_bytes:
                pair = (a << 8) | b
            elif n == len(pairs) or INDEX_LOAD * n >= len(index):
                return np.int64(-1)
            else:
                pair, new = add(index, pairs, n, (a << 32) | b)
                if new:
                    last[pair] = -1
                    n += 1
            pairs[pair, COUNT] += f
            if last[pair] != p:
                last[pair] = p
                pairs[pair, LENGTH] += 1
            r += 1
        p = r + 2
    return n


@njit(cache=True, nogil=True, _nrt=False, no_cfunc_wrapper=True)
def _list_pairs(words, used, pairs, n, index, pool, last, of_bytes):
    """The holders of each of the ``n`` pairs ``_count_pairs`` found into ``pool``, the pairs' lists in
    the order of their ids (``last`` all -1 as it comes in); returns the pool's use."""
    start = np.int64(0)
    for pair in range(n):  # where each list starts; its length counts up again as it is filled
        pairs[pair, START], start = start, start + pairs[pair, LENGTH]
        pairs[pair, LENGTH] = 0
    width, end = count_width(words), end_mark(words)
    p = 0
    while p < used:
        r = p + width
        while words[r + 1] != end:
            a, b = np.int64(words[r]), np.int64(words[r + 1])
            pair = (a << 8) | b if of_bytes else np.int64(find(index, pairs, (a << 32) | b))
            if last[pair] != p:
                last[pair] = p
                pool[pairs[pair, START] + pairs[pair, LENGTH]] = p
                pairs[pair, LENGTH] += 1
            r += 1
        p = r + 2
    return start


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


class Pairs:
    """What both merge loops' states hold alike: the tokens' bytes, the pairs' records, their index,
    the heap and the pool, and how much of each is used (``uses``)."""

    uses: np.ndarray
    pairs: np.ndarray
    index: np.ndarray
    heap: tuple[np.ndarray, np.ndarray]
    pool: np.ndarray

    def token_table(self, vocab: dict, vocab_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The bytes of every token, back to back with room for the ones merges will add, where each
        starts and how long it is (ties compare them); their use goes in ``uses``."""
        capacity = max(vocab_size, max(vocab) + 1)
        token_bytes = np.zeros(max(1, sum(len(t) for t in vocab.values())) * 4 + 64, np.uint8)
        offsets, sizes = np.zeros(capacity, np.int64), np.zeros(capacity, np.int64)
        at = 0
        for token_id, token in vocab.items():
            token_bytes[at : at + len(token)] = np.frombuffer(token, np.uint8)
            offsets[token_id], sizes[token_id] = at, len(token)
            at += len(token)
        self.uses[BYTES_USED] = at
        return token_bytes, offsets, sizes

    def give_back(self) -> None:
        """Return to the system the pages of the pool past its use, once a squeeze has left a good
        part of them unused: the pool's use is highest in the first merges, and this leaves the
        memory to the pairs, which grow in the last ones."""
        used, written = int(self.uses[POOL_USED]), int(self.uses[POOL_WRITTEN])
        if (written - used) * self.pool.itemsize > max(1 << 26, used * self.pool.itemsize // 8):
            free_pages(self.pool, used, written)
            self.uses[POOL_WRITTEN] = used

    def room_for(self, pairs: int) -> None:
        """Grow the pairs' records and the heap (copied), and the index (rebuilt), so that ``pairs``
        more fit."""
        used, heap_size = int(self.uses[PAIRS_USED]), int(self.uses[HEAP_SIZE])
        need = used + pairs
        if need > len(self.pairs):
            size = max(2 * len(self.pairs), need)
            grown = np.empty((size, 4), np.int64)
            grown[:used] = self.pairs[:used]
            self.pairs = grown
            heap = tuple(np.empty(size, part.dtype) for part in self.heap)
            for new, old in zip(heap, self.heap, strict=True):
                new[:heap_size] = old[:heap_size]
            self.heap = heap
        if INDEX_LOAD * need > len(self.index):
            self.index = np.empty(0, np.int32)  # let the old one go first
            self.index = np.full(1 << (INDEX_LOAD * need - 1).bit_length(), NO_PAIR, np.int32)
            index_pairs(self.pairs, used, self.index)


class State(Pairs):
    """The arrays the compiled functions share, between batches of merges. Takes the records from
    ``words``, which is left empty."""

    def __init__(self, words: Words, vocab: dict, vocab_size: int, rules: tuple | None = None):
        if len(words.records) < words.used:
            raise ValueError("these words were merged already: a merge takes their records")
        if words.records.dtype != token_dtype(vocab_size):
            raise ValueError(f"words laid out for another vocabulary size than {vocab_size}")
        words.sort()
        self.words, used, positions = words.records, words.used, words.positions
        words.records = np.empty(0, self.words.dtype)
        self.uses = np.zeros(6, np.int64)  # ``PAIRS_USED`` and the rest
        self.tokens = self.token_table(vocab, vocab_size)
        self._first_pairs(used, positions, words.count, words.of_bytes)
        self.heap = (np.empty(len(self.pairs), np.int64), np.empty(len(self.pairs), np.int32))  # counts, ids
        rules = token_rules() if rules is None else rules
        self.uses[HEAP_SIZE] = heapify(self.pairs, self.uses[PAIRS_USED], *self.heap, *self.tokens, rules)
        # A merge's new holdings (pair ids, words), before their lists are laid.
        self.gained = (np.empty(1024, np.int32), np.empty(1024, positions))

    def _first_pairs(self, used: int, positions: np.dtype, words: int, of_bytes: bool) -> None:
        """The pairs before any merge, counted and then listed by two passes over the words: found
        through the index (which grows, and they are counted again, until they fit), or, of words
        whose ids are bytes, by the pair itself."""
        size = max(1 << 17, words)  # room for a pair per word (many more than most tables make)
        while True:
            self.pairs = np.empty((size, 4), np.int64)
            self.index = np.full(1 << (INDEX_LOAD * size - 1).bit_length(), NO_PAIR, np.int32)
            last = np.empty(size, np.int64)
            n = int(_count_pairs(self.words, used, self.pairs, self.index, last, of_bytes))
            if n >= 0:
                break
            size *= 2
        self._pool_for(self.pairs[:n, LENGTH], positions)
        last[:n] = -1
        _list_pairs(self.words, used, self.pairs, n, self.index, self.pool, last, of_bytes)
        self.uses[PAIRS_USED] = n

    def _pool_for(self, holders: np.ndarray, positions: np.dtype) -> None:
        """The pool (numpy's: huge pages, as in ``Words.sort``) for lists of ``holders`` words: their
        room, then room for the first merges' new lists (an eighth more, or the longest list, which
        the first merge frees) up to its limit of use, and half as much again."""
        used = int(holders.sum())
        limit = used + max(used // 8, int(holders.max(initial=0))) + 16
        self.uses[POOL_USED], self.uses[POOL_LIMIT], self.uses[POOL_WRITTEN] = used, limit, used
        self.pool = np.empty(limit + used // 2, positions)

    def batch_arrays(self) -> list:
        """The parts of the state that a batch of merges takes (``BATCH_TAKES``), in order.

        >>> import inspect
        >>> from bpe_dask.compiled import merge_loop
        >>> takes = list(inspect.signature(merge_loop._merge_batch.py_func).parameters)
        >>> takes[:8] == BATCH_TAKES.split(), takes[8:]
        (True, ['next_id', 'last_id', 'out_pairs', 'min_frequency', 'rules'])
        """
        return [getattr(self, name) for name in BATCH_TAKES.split()]

    def take(self, given: list) -> None:
        """Hold what a batch of merges gives back (``BATCH_GIVES``, in order): arrays it may have
        regrown."""
        for name, value in zip(BATCH_GIVES.split(), given, strict=True):
            setattr(self, name, value)
