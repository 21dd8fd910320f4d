"""The compiled encoding loops: UTF-8 pieces in, token ids out, with ``Tokenizer.encode``'s semantics.

Takes the UTF-8 bytes of text with where its pieces between special tokens lie and the ids of the
special tokens between them, a tokenizer's merges in flat arrays (``merge_pretoken.fill_pairs``'s)
and a cache; ``ENCODE_LOOPS`` holds each built-in pattern's loop, which gives the ids the pure-Python
``Tokenizer.encode`` gives (the tests hold it to that), and ``pretoken_histogram`` how often each id
occurs in the ids of counted pre-tokens. ``encoder.Encoder`` holds the arrays and caches they take.

Each distinct pre-token is merged once (``merge_pretoken``) and its ids kept in the cache: its bytes
in one arena, its ids in another, found again by hash and confirmed byte by byte. The cache is
emptied when full, so memory stays bounded.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bpe_dask.compiled.hashing import same_bytes, word_hash
from bpe_dask.compiled.merge_pretoken import SCRATCH, SHORT, merge_long, merge_short
from bpe_dask.compiled.scan import GPT2, GPT4, NUMBERS, own_cache_file
from bpe_dask.compiled.scan_gpt2 import next_token_gpt2
from bpe_dask.compiled.scan_gpt4 import next_token_gpt4, next_token_o200k

CACHED_MAX = 256  # longer pre-tokens are merged each time, not kept
FRESH = -1  # an encoding loop's position at the start of a piece
CACHE_ENTRIES = 1 << 17  # pre-tokens a cache holds: about 20 MB of arrays (one cache per concurrent call)
# The cache: slots of [hash, start in the byte arena, length, start in the id arena, id count].
_HASH, _START, _LENGTH, _IDS, _COUNT = range(5)


@njit(cache=True, nogil=True, inline="always")
def _cached(data, i, end, h, slots, arena):
    """The cache slot holding the pre-token ``data[i:end]`` (hash ``h``), or -1."""
    if end - i > CACHED_MAX:
        return -1
    mask = len(slots) - 1
    slot = h & mask
    while slots[slot, _LENGTH] != 0:
        if (
            slots[slot, _HASH] == h
            and slots[slot, _LENGTH] == end - i
            and same_bytes(arena, slots[slot, _START], data, i, end - i)
        ):
            return slot
        slot = (slot + 1) & mask
    return -1


# Inlined, though only a pre-token missing from the cache comes here: a call in the loop over every
# pre-token slows it, where inlining costs only compile time, once per install.
@njit(cache=True, nogil=True, inline="always")
def _merged(data, i, end, h, out, n, parts, ranks, scratch, byte_ids, keys,
            pair_ranks, pair_merged, slots, arena, ids_arena, used):  # fmt: skip
    """Merge the pre-token ``data[i:end]`` (hash ``h``, not in the cache), write its ids to ``out``
    from ``n`` on and cache them, emptying the cache first if it is full; returns where they end."""
    length = end - i
    if length <= SHORT:
        count = merge_short(data, i, end, byte_ids, keys, pair_ranks, pair_merged, parts, ranks)
        merged = parts
    else:
        count = merge_long(data, i, end, byte_ids, keys, pair_ranks, pair_merged, scratch)
        merged = scratch
    for k in range(count):  # not a slice assignment: compile_once.py says why
        out[n + k] = merged[k]
    if length > CACHED_MAX:
        return n + count
    if used[0] + length > len(arena) or used[1] + count > len(ids_arena) or 2 * (used[2] + 1) > len(slots):
        for slot in range(len(slots)):
            slots[slot, _LENGTH] = 0
        used[0] = used[1] = used[2] = 0
    slot = h & (len(slots) - 1)
    while slots[slot, _LENGTH] != 0:
        slot = (slot + 1) & (len(slots) - 1)
    for k in range(length):
        arena[used[0] + k] = data[i + k]
    for k in range(count):
        ids_arena[used[1] + k] = merged[k]
    slots[slot, _HASH], slots[slot, _START], slots[slot, _LENGTH] = h, used[0], length
    slots[slot, _IDS], slots[slot, _COUNT] = used[1], count
    used[0] += length
    used[1] += count
    used[2] += 1
    return n + count


def encode_loop(pattern: int):
    """The encoding loop of pattern number ``pattern``, compiled (and cached) for it alone, as
    ``count.count_loop`` is."""

    def encode_pieces(data, bounds, specials, piece, position, out, n, parts, ranks, scratch, table,
                      byte_ids, keys, pair_ranks, pair_merged, slots, arena, ids_arena, used):  # fmt: skip
        """Write the ids of the pieces ``data[bounds[2k]:bounds[2k+1]]`` to ``out`` from ``n`` on, with
        ``specials[k]`` between pieces ``k`` and ``k + 1`` unless it is negative, from ``piece`` at
        byte ``position`` (``FRESH``: the piece's start, its special token not yet written; a piece
        may start at byte 0, after an empty document). ``used`` holds the cache's arena use,
        id-arena use and entries (updated).

        Returns where the ids end, and, where it stopped early for a long pre-token that ``scratch``
        is too small to merge, the piece and byte it starts at and the scratch it needs (else 0):
        the caller gives a larger scratch and calls again from there.
        """
        while piece < len(bounds) // 2:
            if position == FRESH and piece > 0 and specials[piece - 1] >= 0:  # -1: nothing between pieces
                out[n] = specials[piece - 1]
                n += 1
            i, hi = max(position, bounds[2 * piece]), bounds[2 * piece + 1]
            while i < hi:
                end = (
                    next_token_gpt2(data, i, hi, table)
                    if pattern == GPT2  # see count.count_loop
                    else next_token_gpt4(data, i, hi, table)
                    if pattern == GPT4
                    else next_token_o200k(data, i, hi, table)
                )
                if end - i == 1:
                    out[n] = byte_ids[data[i]]
                    n += 1
                else:
                    h = np.int64(word_hash(data, i, end)[0])
                    slot = _cached(data, i, end, h, slots, arena)
                    if slot >= 0:
                        first, count = slots[slot, _IDS], slots[slot, _COUNT]
                        for k in range(count):  # not a slice assignment: compile_once.py says why
                            out[n + k] = ids_arena[first + k]
                        n += count
                    elif end - i > SHORT and SCRATCH * (end - i) > len(scratch):
                        return n, piece, i, SCRATCH * (end - i)  # the piece's special token is written
                    else:
                        n = _merged(data, i, end, h, out, n, parts, ranks, scratch, byte_ids, keys,
                                   pair_ranks, pair_merged, slots, arena, ids_arena, used)  # fmt: skip
                i = end
            piece += 1
            position = FRESH
        return n, piece, FRESH, 0

    # Without numba's reference counts, as ``count.count_loop`` says: the loop allocates nothing.
    return njit(cache=True, nogil=True, _nrt=False)(own_cache_file(encode_pieces, pattern))


ENCODE_LOOPS = {number: encode_loop(number) for number in NUMBERS.values()}


@njit(cache=True, nogil=True)
def pretoken_histogram(data, offsets, counts, histogram, byte_ids, keys, pair_ranks, pair_merged):
    """Add ``counts[k]`` to ``histogram[i]`` for each id ``i`` the pre-token ``data[offsets[k]:offsets[k +
    1]]`` merges into: no scanning (each is one pre-token already) and no cache (each is merged once)."""
    parts = np.empty(SHORT, np.int64)
    ranks = np.empty(SHORT, np.int64)
    scratch = np.empty(SCRATCH * CACHED_MAX, np.int64)
    for k in range(len(offsets) - 1):
        i, end = offsets[k], offsets[k + 1]
        if end - i <= SHORT:
            for j in range(merge_short(data, i, end, byte_ids, keys, pair_ranks, pair_merged, parts, ranks)):
                histogram[parts[j]] += counts[k]
        else:
            if SCRATCH * (end - i) > len(scratch):
                scratch = np.empty(2 * SCRATCH * (end - i), np.int64)
            for j in range(merge_long(data, i, end, byte_ids, keys, pair_ranks, pair_merged, scratch)):
                histogram[scratch[j]] += counts[k]
    return histogram
