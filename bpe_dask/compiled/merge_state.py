"""The compiled merge loop's state: the words, the pair map and the heap, built from the word counts.

Takes the words as flat arrays (their bytes back to back, where each starts, and its count: what
an Arrow binary column holds, with no Python object per word) and the first vocabulary; gives the
arrays ``merge_loop`` works on (``State``). The loop is bound by memory, so what a merge reads
together sits together:

- Every word is one record in an int32 array (``words``): its length, its count in two int32,
  then its token ids, the length shrinking in place as merges join its tokens. A word is known by
  where its record starts.
- A pair ``(a, b)`` is the int64 key ``a << 32 | b``. The pair map is open-addressing, one record
  of six int64 per slot: the key, the pair's count, the last merge that touched it, and its list of
  holder words (where the list starts in ``pool``, its length, its room). A list that outgrows its
  room moves to the end of the pool, which is compacted when mostly abandoned room. Lists may name
  a word twice or name words that lost the pair: a merge skips those, as the pure-Python loop does.
- The heap holds ``(count, key)`` entries, highest count first, then the greater pair of byte
  strings. A merge pushes an entry for each pair whose count grew; a pair whose count fell keeps
  its older, higher entry, which is lowered to the current count when it surfaces.
- With a longest token (``max_token_length``), a pair that would make a longer one is counted
  like any other but never has a heap entry (none is pushed for it), so it is never chosen; tokens
  keep their bytes, so it never fits later either.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bpe_dask.compiled.hashing import LOW
from bpe_dask.compiled.pair_heap import sift_down
from bpe_dask.compiled.pair_map import COUNT, EMPTY, KEY, LENGTH, ROOM, START, find, new_pairs

UNLIMITED = 2**62  # the longest token when there is no max_token_length


@njit(cache=True, nogil=True)
def fits(key, sizes, longest):
    """Whether the pair ``key`` makes a token of at most ``longest`` bytes."""
    return sizes[key >> 32] + sizes[key & LOW] <= longest


@njit(cache=True, nogil=True)
def heapify(pairs, heap_counts, heap_keys, token_bytes, offsets, sizes, longest):
    """Fill the heap with every pair of positive count that fits; returns its size."""
    size = np.int64(0)  # not 0, which numba would compile sift_down for apart (compile_once.py)
    for slot in range(len(pairs)):
        key = pairs[slot, KEY]
        if key != EMPTY and pairs[slot, COUNT] > 0 and fits(key, sizes, longest):
            heap_counts[size], heap_keys[size] = pairs[slot, COUNT], key
            size += 1
    for i in range(size // 2 - 1, -1, -1):
        sift_down(heap_counts, heap_keys, size, i, token_bytes, offsets, sizes)
    return size


@njit(cache=True, nogil=True)
def _layout(data, offsets, freqs):
    """The words as records ``[length, count low 32 bits, count high 32 bits, token ids...]`` (words
    of one byte left out: they hold no pair), and where each record starts."""
    n, size = 0, 0
    for w in range(len(offsets) - 1):
        if offsets[w + 1] - offsets[w] >= 2:
            n += 1
            size += 3 + offsets[w + 1] - offsets[w]
    words, at = np.empty(size, np.int32), np.empty(n, np.int64)
    p, i = 0, 0
    for w in range(len(offsets) - 1):
        length = offsets[w + 1] - offsets[w]
        if length < 2:
            continue
        at[i] = p
        words[p], words[p + 1], words[p + 2] = length, np.int32(freqs[w] & LOW), np.int32(freqs[w] >> 32)
        for k in range(length):
            words[p + 3 + k] = data[offsets[w] + k]
        p += 3 + length
        i += 1
    return words, at


@njit(cache=True, nogil=True)
def count_of(words, p):
    return (np.int64(words[p + 2]) << 32) | (np.int64(words[p + 1]) & LOW)


@njit(cache=True, nogil=True)
def _initial_pairs(words, at, pairs, like):
    """Every byte pair into the map, with its weighted count and the words holding it; returns the
    pool of holder lists (in the type of ``like``: int32 while records fit) and its use.

    Before any merge a pair is two bytes, one of 65,536: a counting sort in two passes over the
    words groups the holders by pair. A word holding a pair twice is listed twice.
    """
    occurrences = np.zeros(1 << 16, np.int64)
    weighted = np.zeros(1 << 16, np.int64)
    for p in at:
        f = count_of(words, p)
        for r in range(p + 3, p + 3 + words[p] - 1):
            pair = (words[r] << 8) | words[r + 1]
            occurrences[pair] += 1
            weighted[pair] += f
    place = np.zeros((1 << 16) + 1, np.int64)
    for pair in range(1 << 16):  # not a slice assignment: compile_once.py says why
        place[pair + 1] = place[pair] + occurrences[pair]
    pool = np.empty(max(16, place[-1]), like.dtype)
    fill = place[:-1].copy()
    for p in at:
        for r in range(p + 3, p + 3 + words[p] - 1):
            pair = (words[r] << 8) | words[r + 1]
            pool[fill[pair]] = p
            fill[pair] += 1
    for pair in range(1 << 16):
        if occurrences[pair]:
            slot = find(pairs, (np.int64(pair >> 8) << 32) | (pair & 0xFF))
            pairs[slot, KEY] = (np.int64(pair >> 8) << 32) | (pair & 0xFF)
            pairs[slot, COUNT] = weighted[pair]
            pairs[slot, START] = place[pair]
            pairs[slot, LENGTH] = pairs[slot, ROOM] = occurrences[pair]
    return pool, place[-1]


class State:
    """The arrays the compiled functions share, between batches of merges."""

    def __init__(
        self,
        data: np.ndarray,
        offsets: np.ndarray,
        freqs: np.ndarray,
        vocab: dict,
        vocab_size: int,
        longest: int = UNLIMITED,
    ):
        self.words, at = _layout(data, offsets, freqs)
        # The bytes of every token, with room for the ones merges will add.
        capacity = max(vocab_size, len(vocab))
        self.token_bytes = np.zeros(max(1, sum(len(t) for t in vocab.values())) * 4 + 64, np.uint8)
        self.offsets = np.zeros(capacity, np.int64)
        self.sizes = np.zeros(capacity, np.int64)
        used = 0
        for token_id, token in vocab.items():
            self.token_bytes[used : used + len(token)] = np.frombuffer(token, np.uint8)
            self.offsets[token_id], self.sizes[token_id] = used, len(token)
            used += len(token)
        self.bytes_used = used
        self.pairs = new_pairs(1 << 17)  # room for all 65,536 byte pairs at half load
        like = np.empty(0, np.int32 if len(self.words) < 2**31 else np.int64)
        self.pool, self.pool_used = _initial_pairs(self.words, at, self.pairs, like)
        self.check_pool_at = 2 * self.pool_used
        self.pairs_used = int(np.count_nonzero(self.pairs[:, KEY] != EMPTY))
        self.heap_counts = np.empty(max(16, 2 * self.pairs_used), np.int64)
        self.heap_keys = np.empty_like(self.heap_counts)
        self.heap_size = heapify(
            self.pairs, self.heap_counts, self.heap_keys, self.token_bytes, self.offsets, self.sizes, longest
        )
