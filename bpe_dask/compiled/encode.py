"""The compiled encoding loops: UTF-8 pieces in, token ids out, with ``Tokenizer.encode``'s semantics.

Takes the UTF-8 bytes of text with where its pieces between special tokens lie and the ids of the
special tokens between them, a tokenizer's merges in flat arrays (``merge_pretoken.fill_pairs``'s)
and a cache; ``ENCODE_LOOPS`` holds each built-in pattern's loop, which gives the ids the pure-Python
``Tokenizer.encode`` gives (the tests hold it to that), and ``pretoken_ids`` the ids of counted
pre-tokens, each alone. ``encoder.Encoder`` holds the arrays and caches they take.

Each distinct pre-token is merged once (``merge_pretoken``) and its ids kept in a cache: a
``word_table`` whose records hold where a word's ids lie in an arena of ids (or its one id itself),
its bytes past the eighth in an arena of bytes. The loop scans ``AHEAD`` pre-tokens ahead of the one
it encodes and asks for their records early, as counting does. The cache grows as it fills, up to
``CACHE_ENTRIES`` pre-tokens; full at that size, it keeps only the pre-tokens found again since they
were cached (``keep_found``), so memory stays bounded and the words that recur stay.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bpe_dask.compiled.merge_pretoken import NONE, SCRATCH, SHORT, merge_long, merge_parts, merge_short
from bpe_dask.compiled.scan import GPT2, GPT4, NUMBERS, O200K, SUPERBPE_LINES, own_cache_file
from bpe_dask.compiled.scan_gpt2 import next_token_gpt2
from bpe_dask.compiled.scan_gpt4 import next_token_gpt4, next_token_o200k
from bpe_dask.compiled.scan_superbpe import next_token_superbpe
from bpe_dask.compiled.word_table import (
    AHEAD,
    AT,
    KEY,
    LENGTH,
    META,
    RECORD,
    VALUE,
    find,
    free_record,
    hold,
    taken,
)

CACHED_MAX = 256  # longer pre-tokens are merged each time, not kept
FRESH = -1  # an encoding loop's position at the start of a piece
FULL = -1  # what an encoding loop needs when it stopped for a cache with no room left
CACHE_ENTRIES = 1 << 19  # pre-tokens a cache holds at most: 64 MB or less (a cache per concurrent call)
FIRST_ENTRIES = 1 << 12  # pre-tokens a new cache holds: it doubles as they come, up to ``CACHE_ENTRIES``
# A record's value, in encoding: its pre-token's id count in the low 16 bits (a cached pre-token has at
# most ``CACHED_MAX`` ids), above them its one id or where its ids start in the arena of ids, and
# above those whether it was found again since it was cached (``keep_found``).
IDS = VALUE
COUNT_BITS, WHERE_BITS = 16, 32
COUNT_MASK, WHERE_MASK = (1 << COUNT_BITS) - 1, (1 << WHERE_BITS) - 1
FOUND = np.int64(1) << (COUNT_BITS + WHERE_BITS)


@njit(cache=True, nogil=True, inline="always")
def _specials(specials, written, piece, out, n):
    """Write the special token before each piece after ``written`` up to ``piece`` (none before the
    first piece, nor where it is negative: nothing between the pieces); returns where the ids end."""
    for k in range(max(written + 1, 1), piece + 1):
        if specials[k - 1] >= 0:
            out[n] = specials[k - 1]
            n += 1
    return n


@njit(cache=True, nogil=True, inline="always")
def _full(length, records, arena, ids_arena, used):
    """Whether the cache lacks room for a pre-token of ``length`` bytes (and so at most as many ids)."""
    return (
        2 * (used[2] + 1) * RECORD > len(records)
        or used[0] + length > len(arena)
        or used[1] + length > len(ids_arena)
    )


@njit(cache=True, nogil=True, inline="always")
def _merge_into(data, i, end, out, n, parts, ranks, scratch, byte_ids, keys, pair_ranks, pair_merged, split):
    """Merge the pre-token ``data[i:end]`` and write its ids to ``out`` from ``n`` on: a short one in
    ``parts`` and ``ranks``, a long one in ``scratch`` (``SCRATCH`` int64 a byte at least); returns
    how many.

    A long one is merged in two phases (``split``: a junction table and a rank; why both are exact:
    docs/exactness.md#encoding-in-segments). First by the merges below the rank, in segments cut
    where two bytes meet that none of them joins: a superword tokenizer's pre-tokens, whole
    documents, fall into words there. Then, where the tokenizer has more merges, by all of them over
    those ids: only the later merges can join anything then."""
    junctions, limit = split
    if end - i <= SHORT:
        count = merge_short(data, i, end, byte_ids, keys, pair_ranks, pair_merged, parts, ranks, NONE)
        for k in range(count):  # not a slice assignment: compile_once.py says why
            out[n + k] = parts[k]
        return count
    m, start = n, i
    while start < end:
        cut = start + 1
        while cut < end and junctions[(np.int64(data[cut - 1]) << 8) | data[cut]]:
            cut += 1
        if cut - start <= SHORT:
            count = merge_short(
                data, start, cut, byte_ids, keys, pair_ranks, pair_merged, parts, ranks, limit
            )
            merged = parts
        else:
            count = merge_long(data, start, cut, byte_ids, keys, pair_ranks, pair_merged, scratch, limit)
            merged = scratch
        for k in range(count):
            out[m + k] = merged[k]
        m, start = m + count, cut
    if limit == NONE or m - n < 2:
        return m - n
    for k in range(m - n):
        scratch[k] = out[n + k]
    count = merge_parts(m - n, keys, pair_ranks, pair_merged, scratch, NONE)
    for k in range(count):
        out[n + k] = scratch[k]
    return count


# Inlined, though only a pre-token missing from the cache comes here: a call in the loop over every
# pre-token slows it, where inlining costs only compile time, once per install.
@njit(cache=True, nogil=True, inline="always")
def _merged(data, i, end, h, key, r, meta, out, n, parts, ranks, scratch, byte_ids, keys,
            pair_ranks, pair_merged, split, records, arena, ids_arena, used):  # fmt: skip
    """Merge the pre-token ``data[i:end]`` (hash ``h``, first bytes ``key``, not in the cache, whose
    record goes at ``r`` with ``meta``), write its ids to ``out`` from ``n`` on and cache them (the
    cache has room: ``_full``); returns where they end."""
    length = end - i
    count = _merge_into(
        data, i, end, out, n, parts, ranks, scratch, byte_ids, keys, pair_ranks, pair_merged, split
    )
    if length > CACHED_MAX:
        return n + count
    if length > 8:  # the bytes ``find`` compares past the key
        for k in range(length):
            arena[used[0] + k] = data[i + k]
        records[r + AT] = used[0]
        used[0] += length
    if count == 1:
        records[r + IDS] = (out[n] << COUNT_BITS) | 1
    else:
        for k in range(count):
            ids_arena[used[1] + k] = out[n + k]
        records[r + IDS] = (used[1] << COUNT_BITS) | count
        used[1] += count
    records[r + KEY], records[r + META] = key, meta
    used[2] += 1
    return n + count


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def keep_found(records, arena, ids_arena, used, kept, kept_arena, kept_ids):
    """Put in the empty cache ``kept`` (its table, byte arena and id arena) the pre-tokens of the cache
    ``records`` that were found again since they were cached or last kept, marked as not yet found
    again, and set ``used`` to what they use: the words of a text that recur stay, and those met once,
    most of its distinct words, go."""
    at = ids_at = entries = 0
    for r in range(0, len(records), RECORD):
        value = records[r + IDS]
        if records[r + META] == 0 or not value & FOUND:
            continue
        k = free_record(kept, records[r + META])
        kept[k + KEY], kept[k + META] = records[r + KEY], records[r + META]
        length = records[r + META] & LENGTH
        if length > 8:
            for j in range(length):  # not a slice assignment: compile_once.py says why
                kept_arena[at + j] = arena[records[r + AT] + j]
            kept[k + AT] = at
            at += length
        count, where = value & COUNT_MASK, (value >> COUNT_BITS) & WHERE_MASK
        if count > 1:
            for j in range(count):
                kept_ids[ids_at + j] = ids_arena[where + j]
            where = ids_at
            ids_at += count
        kept[k + IDS] = (where << COUNT_BITS) | count
        entries += 1
    used[0], used[1], used[2] = at, ids_at, entries


def encode_loop(pattern: int):
    """The encoding loop of pattern number ``pattern``, compiled (and cached) for it alone, as
    ``count.count_loop`` is."""

    def encode_pieces(data, bounds, specials, piece, position, out, n, parts, ranks, scratch, table,
                      byte_ids, keys, pair_ranks, pair_merged, split, records, arena, ids_arena, used,
                      pending):  # fmt: skip
        """Write the ids of the pieces ``data[bounds[2k]:bounds[2k+1]]`` to ``out`` from ``n`` on, with
        ``specials[k]`` between pieces ``k`` and ``k + 1`` unless it is negative, from ``piece`` at
        byte ``position`` (``FRESH``: the piece's start, its special token not yet written; a piece
        may start at byte 0, after an empty document). ``used`` holds the cache's arena use,
        id-arena use and entries (updated); ``pending`` is the ring of pre-tokens scanned ahead.

        Returns where the ids end, and, where it stopped early before a pre-token, the piece and byte
        it starts at and what it needs (else 0): the scratch a long pre-token needs to be merged, or
        ``FULL``, a cache with room for one more. The caller gives it and calls again from there.
        """
        pieces = len(bounds) // 2
        written = piece if position != FRESH else piece - 1  # the last piece its special token is written for
        scanned = encoded = 0  # pre-tokens put in ``pending``, and taken out of it
        while True:
            if piece < pieces:  # scan one more pre-token, and send for its record
                hi = bounds[2 * piece + 1]
                i = max(position, bounds[2 * piece])
                if i >= hi:
                    piece, position = piece + 1, FRESH
                    continue
                end = (
                    next_token_gpt2(data, i, hi, table)
                    if pattern == GPT2  # see count.count_loop
                    else next_token_gpt4(data, i, hi, table)
                    if pattern == GPT4
                    else next_token_o200k(data, i, hi, table)
                    if pattern == O200K
                    else next_token_superbpe(data, i, bounds[2 * piece], hi, table, pattern == SUPERBPE_LINES)
                )
                hold(data, i, end, piece, records, pending, scanned, end - i > 1)  # a byte's id is known
                scanned, position = scanned + 1, end
                if scanned - encoded < AHEAD:
                    continue
            elif encoded == scanned:
                return _specials(specials, written, pieces - 1, out, n), pieces, FRESH, 0
            # encode the oldest pre-token scanned, after the special tokens of the pieces it passed
            i, end, at, h, key = taken(pending, encoded)
            if at > written:
                n, written = _specials(specials, written, at, out, n), at
            if end - i == 1:
                out[n] = byte_ids[data[i]]
                n += 1
            else:
                r, meta = find(data, i, end, h, key, arena, records)
                if records[r + META] != 0:
                    ids = records[r + IDS]
                    records[r + IDS] = ids | FOUND
                    count, where = ids & COUNT_MASK, (ids >> COUNT_BITS) & WHERE_MASK
                    if count == 1:
                        out[n] = where
                    else:
                        for k in range(count):  # not a slice assignment: compile_once.py says why
                            out[n + k] = ids_arena[where + k]
                    n += count
                elif end - i > SHORT and SCRATCH * (end - i) > len(scratch):
                    return n, at, i, SCRATCH * (end - i)  # the piece's special token is written
                elif end - i <= CACHED_MAX and _full(end - i, records, arena, ids_arena, used):
                    return n, at, i, FULL
                else:
                    n = _merged(data, i, end, h, key, r, meta, out, n, parts, ranks, scratch, byte_ids, keys,
                                pair_ranks, pair_merged, split, records, arena, ids_arena, used)  # fmt: skip
            encoded += 1

    # Without numba's reference counts, as ``count.count_loop`` says: the loop allocates nothing.
    compile = njit(cache=True, nogil=True, _nrt=False, no_cfunc_wrapper=True)
    return compile(own_cache_file(encode_pieces, pattern))


ENCODE_LOOPS = {number: encode_loop(number) for number in NUMBERS.values()}


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def pretoken_ids(data, offsets, ids, ends, byte_ids, keys, pair_ranks, pair_merged, split):
    """The ids of each pre-token ``data[offsets[k]:offsets[k + 1]]`` into ``ids`` (at least as long as
    ``data``: a pre-token has no more ids than bytes), the ``k``-th ending at ``ends[k]``: no scanning
    (each is one pre-token already) and no cache (each is merged once). Returns how many ids."""
    parts = np.empty(SHORT, np.int64)
    ranks = np.empty(SHORT, np.int64)
    scratch = np.empty(SCRATCH * CACHED_MAX, np.int64)
    n = 0
    for k in range(len(offsets) - 1):
        i, end = offsets[k], offsets[k + 1]
        if SCRATCH * (end - i) > len(scratch):  # never for a short one, which takes no scratch
            scratch = np.empty(2 * SCRATCH * (end - i), np.int64)
        n += _merge_into(
            data, i, end, ids, n, parts, ranks, scratch, byte_ids, keys, pair_ranks, pair_merged, split
        )
        ends[k] = n
    return n


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def split_of(left, right, ranks, merged, byte_ids, size):
    """Where a long pre-token may be cut (docs/exactness.md#encoding-in-segments), for the merges
    ``left[k]``, ``right[k]`` into ``merged[k]`` at ``ranks[k]``, in the order of their ranks (each
    token made before it is merged; ids up to ``size``): which two bytes, side by side, the merges
    before the first that joins a visible ASCII character to a space after it join (``[first << 8 |
    second]``, 1 if so), and that first merge's rank (``NONE`` where there is none: GPT-2's, GPT-4's
    and o200k's patterns never put a space after such a character in a pre-token). The junction of a
    merge is the last byte of its left token and the first of its right one."""
    first, last = np.full(size, -1, np.int64), np.full(size, -1, np.int64)
    for b in range(256):
        first[byte_ids[b]] = last[byte_ids[b]] = b
    joined = np.zeros(1 << 16, np.uint8)
    for k in range(len(left)):
        a, b = first[left[k]], last[left[k]]
        c, d = first[right[k]], last[right[k]]
        if a < 0 or c < 0:
            continue
        if 0x20 < b < 0x7F and c == 0x20:  # a visible character to a space: the superwords' merges start
            return joined, ranks[k]
        joined[(b << 8) | c] = 1
        first[merged[k]], last[merged[k]] = a, d
    return joined, NONE
