"""The encoder compiled with numba for GPT-4's and o200k's split patterns (``gpt4``, ``o200k``).

``encode_numba``'s encoder with the scanners of ``pretokenize_numba_gpt4`` in place of GPT-2's: the
same merges, the same cache of encoded pre-tokens and the same results as ``Tokenizer.encode``,
which the tests hold it to. Only how the loop is put together differs: the cache is looked up
inline and a pre-token missing from it is merged and cached in a call (``_merged``), which keeps
each loop short; ``encode_numba._encode``, GPT-2's, stays as it was, all inline.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bpe_dask.compiled.encode_gpt2 import (
    _CACHED_MAX,
    _COUNT,
    _HASH,
    _IDS,
    _LENGTH,
    _SHORT,
    _START,
    CompiledEncoder,
    _merge_long,
    _merge_short,
)
from bpe_dask.compiled.scan_gpt2 import _hash
from bpe_dask.compiled.scan_gpt4 import _next_token_gpt4, _next_token_o200k, scan_table


@njit(cache=True, nogil=True, inline="always")
def _cached(data, i, end, h, slots, arena):
    """The cache slot holding the pre-token ``data[i:end]`` (hash ``h``), or -1."""
    if end - i > _CACHED_MAX:
        return -1
    mask = len(slots) - 1
    slot = h & mask
    while slots[slot, _LENGTH] != 0:
        if slots[slot, _HASH] == h and slots[slot, _LENGTH] == end - i:
            s = slots[slot, _START]
            same = True
            for k in range(end - i):
                if arena[s + k] != data[i + k]:
                    same = False
                    break
            if same:
                return slot
        slot = (slot + 1) & mask
    return -1


@njit(cache=True, nogil=True)
def _merged(data, i, end, h, out, n, parts, ranks, byte_ids, keys, pair_ranks, pair_merged,
            slots, arena, ids_arena, used):  # fmt: skip
    """Merge the pre-token ``data[i:end]`` (hash ``h``, not in the cache), write its ids to ``out``
    from ``n`` on and cache them as ``_encode`` does; returns where they end."""
    length = end - i
    if length <= _SHORT:
        count = _merge_short(data, i, end, byte_ids, keys, pair_ranks, pair_merged, parts, ranks)
        out[n : n + count] = parts[:count]
    else:
        merged = _merge_long(data, i, end, byte_ids, keys, pair_ranks, pair_merged)
        count = len(merged)
        out[n : n + count] = merged
    if length > _CACHED_MAX:
        return n + count
    if used[0] + length > len(arena) or used[1] + count > len(ids_arena) or 2 * (used[2] + 1) > len(slots):
        slots[:, _LENGTH] = 0
        used[0] = used[1] = used[2] = 0
    slot = h & (len(slots) - 1)
    while slots[slot, _LENGTH] != 0:
        slot = (slot + 1) & (len(slots) - 1)
    arena[used[0] : used[0] + length] = data[i:end]
    ids_arena[used[1] : used[1] + count] = out[n : n + count]
    slots[slot, _HASH], slots[slot, _START], slots[slot, _LENGTH] = h, used[0], length
    slots[slot, _IDS], slots[slot, _COUNT] = used[1], count
    used[0] += length
    used[1] += count
    used[2] += 1
    return n + count


# Two loops alike but for the scanner: numba caches neither a loop given its scanner as an argument
# nor one made by a factory (``pretokenize_numba_gpt4`` says more).
@njit(cache=True, nogil=True)
def _encode_gpt4(data, bounds, specials, table, byte_ids, keys, pair_ranks, pair_merged,
            slots, arena, ids_arena, used):  # fmt: skip
    """``_encode`` with GPT-4's scanner."""
    out = np.empty(len(data) + len(specials), np.int64)
    n = 0
    parts = np.empty(_SHORT, np.int64)
    ranks = np.empty(_SHORT, np.int64)
    for piece in range(len(bounds) // 2):
        if piece > 0 and specials[piece - 1] >= 0:
            out[n] = specials[piece - 1]
            n += 1
        i, hi = bounds[2 * piece], bounds[2 * piece + 1]
        while i < hi:
            end = _next_token_gpt4(data, i, hi, table)
            if end - i == 1:
                out[n] = byte_ids[data[i]]
                n += 1
            else:
                h = np.int64(_hash(data, i, end))
                slot = _cached(data, i, end, h, slots, arena)
                if slot >= 0:
                    first, count = slots[slot, _IDS], slots[slot, _COUNT]
                    out[n : n + count] = ids_arena[first : first + count]
                    n += count
                else:
                    n = _merged(data, i, end, h, out, n, parts, ranks, byte_ids, keys, pair_ranks,
                                pair_merged, slots, arena, ids_arena, used)  # fmt: skip
            i = end
    return out[:n]


@njit(cache=True, nogil=True)
def _encode_o200k(data, bounds, specials, table, byte_ids, keys, pair_ranks, pair_merged,
            slots, arena, ids_arena, used):  # fmt: skip
    """``_encode`` with o200k's scanner."""
    out = np.empty(len(data) + len(specials), np.int64)
    n = 0
    parts = np.empty(_SHORT, np.int64)
    ranks = np.empty(_SHORT, np.int64)
    for piece in range(len(bounds) // 2):
        if piece > 0 and specials[piece - 1] >= 0:
            out[n] = specials[piece - 1]
            n += 1
        i, hi = bounds[2 * piece], bounds[2 * piece + 1]
        while i < hi:
            end = _next_token_o200k(data, i, hi, table)
            if end - i == 1:
                out[n] = byte_ids[data[i]]
                n += 1
            else:
                h = np.int64(_hash(data, i, end))
                slot = _cached(data, i, end, h, slots, arena)
                if slot >= 0:
                    first, count = slots[slot, _IDS], slots[slot, _COUNT]
                    out[n : n + count] = ids_arena[first : first + count]
                    n += count
                else:
                    n = _merged(data, i, end, h, out, n, parts, ranks, byte_ids, keys, pair_ranks,
                                pair_merged, slots, arena, ids_arena, used)  # fmt: skip
            i = end
    return out[:n]


def compiled_encoder(byte_ids: list[int], merges: dict[tuple[int, int], tuple[int, int]],
                     pattern: str) -> CompiledEncoder:  # fmt: skip
    """The compiled encoder for the built-in pattern named ``pattern``."""
    if pattern == "gpt2":
        return CompiledEncoder(byte_ids, merges)
    encode = {"gpt4": _encode_gpt4, "o200k": _encode_o200k}[pattern]
    return CompiledEncoder(byte_ids, merges, encode=encode, classes=scan_table())
