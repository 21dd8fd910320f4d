"""The merge loop compiled with numba: the algorithm of ``merging``, at machine speed.

Takes the same word counts and gives the same vocabulary and merges as the pure-Python loop
of ``merging``, which uses it when numba is installed (``pip install bpe-dask[fast]``); the tests
check both against the reference trainer.

Layout: every word's token ids sit in one int32 array (``tokens``, a word at
``starts[w]``, ``lengths[w]`` long, shrinking in place as merges join its tokens). A pair
``(a, b)`` is the int64 key ``a << 32 | b``; ``counts`` maps it to its weighted count and
``slots`` to a list of the words holding it (with stale and repeated entries, skipped as in
the pure-Python loop). The heap holds ``(count, key)`` entries ordered by count, then by the
pair's bytes, descending; entries whose count changed are skipped when they surface.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
from numba import njit, types
from numba.typed import Dict, List

_INT64 = types.int64
_BATCH = 256  # merges per compiled call, between progress reports


@njit(cache=True)
def _count_of(table, key):
    """``table[key]``, or 0 where absent (numba's ``dict.get`` gives an optional, not a number)."""
    if key in table:
        return table[key]
    return 0


@njit(cache=True)
def _compare_tokens(pool, offsets, sizes, t, u):
    """-1, 0 or 1 as the bytes of token ``t`` sort before, equal or after those of ``u``."""
    if t == u:
        return 0
    ot, ou, nt, nu = offsets[t], offsets[u], sizes[t], sizes[u]
    for i in range(min(nt, nu)):
        if pool[ot + i] != pool[ou + i]:
            return -1 if pool[ot + i] < pool[ou + i] else 1
    if nt == nu:
        return 0
    return -1 if nt < nu else 1


@njit(cache=True)
def _before(heap_counts, heap_keys, i, j, pool, offsets, sizes):
    """Whether heap entry ``i`` comes out before ``j``: higher count, then greater pair bytes."""
    if heap_counts[i] != heap_counts[j]:
        return heap_counts[i] > heap_counts[j]
    ki, kj = heap_keys[i], heap_keys[j]
    order = _compare_tokens(pool, offsets, sizes, ki >> 32, kj >> 32)
    if order == 0:
        order = _compare_tokens(pool, offsets, sizes, ki & 0xFFFFFFFF, kj & 0xFFFFFFFF)
    return order > 0


@njit(cache=True)
def _sift_up(heap_counts, heap_keys, i, pool, offsets, sizes):
    while i > 0:
        parent = (i - 1) // 2
        if not _before(heap_counts, heap_keys, i, parent, pool, offsets, sizes):
            break
        heap_counts[i], heap_counts[parent] = heap_counts[parent], heap_counts[i]
        heap_keys[i], heap_keys[parent] = heap_keys[parent], heap_keys[i]
        i = parent


@njit(cache=True)
def _sift_down(heap_counts, heap_keys, size, i, pool, offsets, sizes):
    while True:
        best, left = i, 2 * i + 1
        if left < size and _before(heap_counts, heap_keys, left, best, pool, offsets, sizes):
            best = left
        if left + 1 < size and _before(heap_counts, heap_keys, left + 1, best, pool, offsets, sizes):
            best = left + 1
        if best == i:
            return
        heap_counts[i], heap_counts[best] = heap_counts[best], heap_counts[i]
        heap_keys[i], heap_keys[best] = heap_keys[best], heap_keys[i]
        i = best


@njit(cache=True)
def _add_holder(slots, holders, filled, free, key, word):
    """List ``word`` as holding pair ``key``."""
    slot = slots[key] if key in slots else np.int64(-1)
    if slot < 0:
        if len(free) > 0:
            slot = np.int64(free.pop())
            holders[slot] = np.empty(4, np.int32)
            filled[slot] = 0
        else:
            slot = np.int64(len(holders))
            holders.append(np.empty(4, np.int32))
            filled.append(0)
        slots[key] = slot
    n = filled[slot]
    array = holders[slot]
    if n == len(array):
        grown = np.empty(2 * n, np.int32)
        grown[:n] = array
        holders[slot] = grown
        array = grown
    array[n] = word
    filled[slot] = n + 1


@njit(cache=True)
def _drop_holders(slots, holders, filled, free, key):
    if key in slots:
        slot = slots[key]
        del slots[key]
        holders[slot] = np.empty(0, np.int32)
        filled[slot] = 0
        free.append(slot)


class _State:
    """Plain holder of the arrays and typed containers the compiled functions share."""


def _build(word_counts: Iterable[tuple[bytes, int]], vocab: dict[int, bytes], vocab_size: int) -> _State:
    state = _State()
    words = [(w, c) for w, c in word_counts if len(w) >= 2]
    state.lengths = np.fromiter((len(w) for w, _ in words), np.int32, len(words))
    state.starts = np.zeros(len(words), np.int64)
    if len(words):
        state.starts[1:] = np.cumsum(state.lengths[:-1], dtype=np.int64)
    state.tokens = np.frombuffer(b"".join(w for w, _ in words), np.uint8).astype(np.int32)
    state.freqs = np.fromiter((c for _, c in words), np.int64, len(words))
    # The bytes of every token, with room for the ones merges will add.
    capacity = max(vocab_size, len(vocab))
    state.pool = np.zeros(max(1, sum(len(t) for t in vocab.values())) * 4 + 64, np.uint8)
    state.offsets = np.zeros(capacity, np.int64)
    state.sizes = np.zeros(capacity, np.int64)
    used = 0
    for token_id, token in vocab.items():
        state.pool[used : used + len(token)] = np.frombuffer(token, np.uint8)
        state.offsets[token_id], state.sizes[token_id] = used, len(token)
        used += len(token)
    state.pool_used = used
    state.counts = Dict.empty(_INT64, _INT64)
    state.slots = Dict.empty(_INT64, _INT64)
    state.holders = List.empty_list(types.int32[::1])
    state.filled = List.empty_list(_INT64)
    state.free = List.empty_list(_INT64)
    keys, counts, holders, bounds = _initial_pairs(state.tokens, state.lengths, state.freqs)
    _fill(keys, counts, holders, bounds, state.counts, state.slots, state.holders, state.filled)
    state.heap_counts = np.empty(max(16, 2 * len(state.counts)), np.int64)
    state.heap_keys = np.empty_like(state.heap_counts)
    state.heap_size = _heapify(state.counts, state.heap_counts, state.heap_keys, state.pool, state.offsets,
                               state.sizes)  # fmt: skip
    return state


def _initial_pairs(tokens: np.ndarray, lengths: np.ndarray, freqs: np.ndarray) -> tuple:
    """Every distinct pair, its weighted count, and the words holding it, grouped by pair (numpy).

    Before any merge every token is a byte, so a pair fits in 16 bits and numpy's radix sort
    groups the pairs in one fast pass.
    """
    word_of = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
    left = np.flatnonzero(word_of[:-1] == word_of[1:])  # positions whose right neighbour is in the same word
    dense = (tokens[left] << 8 | tokens[left + 1]).astype(np.uint16)
    order = np.argsort(dense, kind="stable")
    dense, holders = dense[order], word_of[left][order]
    first = np.flatnonzero(np.diff(dense.astype(np.int32), prepend=-1))  # where each pair's run starts
    keys = (dense[first].astype(np.int64) >> 8) << 32 | (dense[first].astype(np.int64) & 0xFF)
    bounds = np.append(first, len(dense)).astype(np.int64)
    counts = np.add.reduceat(freqs[holders], first) if len(dense) else np.zeros(0, np.int64)
    return keys, counts.astype(np.int64), holders, bounds


@njit(cache=True)
def _fill(keys, counts, holders, bounds, counts_map, slots, holder_lists, filled):
    for i in range(len(keys)):
        counts_map[keys[i]] = counts[i]
        slots[keys[i]] = i
        holder_lists.append(holders[bounds[i] : bounds[i + 1]].copy())
        filled.append(bounds[i + 1] - bounds[i])


@njit(cache=True)
def _heapify(counts, heap_counts, heap_keys, pool, offsets, sizes):
    size = 0
    for key, count in counts.items():
        heap_counts[size], heap_keys[size] = count, key
        size += 1
    for i in range(size // 2 - 1, -1, -1):
        _sift_down(heap_counts, heap_keys, size, i, pool, offsets, sizes)
    return size


@njit(cache=True)
def _merge_batch(tokens, starts, lengths, freqs, counts, slots, holders, filled, free,
                 heap_counts, heap_keys, heap_size, pool, offsets, sizes, pool_used,
                 next_id, last_id, out_pairs):  # fmt: skip
    """Up to ``last_id - next_id`` merges. Returns how many were made, heap size, pool use,
    and the (possibly regrown) heap and pool arrays; the pairs go to ``out_pairs``."""
    made = 0
    while next_id + made < last_id:
        # The best pair whose heap entry is still current.
        best = -1
        while heap_size > 0:
            count, key = heap_counts[0], heap_keys[0]
            heap_size -= 1
            heap_counts[0], heap_keys[0] = heap_counts[heap_size], heap_keys[heap_size]
            _sift_down(heap_counts, heap_keys, heap_size, 0, pool, offsets, sizes)
            if key in counts and counts[key] == count:
                best = key
                break
        if best < 0:
            break
        a, b, x = best >> 32, best & 0xFFFFFFFF, next_id + made
        out_pairs[made, 0], out_pairs[made, 1] = a, b
        made += 1
        # The new token's bytes.
        need = sizes[a] + sizes[b]
        if pool_used + need > len(pool):
            grown = np.zeros(2 * len(pool) + need, np.uint8)
            grown[:pool_used] = pool[:pool_used]
            pool = grown
        pool[pool_used : pool_used + sizes[a]] = pool[offsets[a] : offsets[a] + sizes[a]]
        pool[pool_used + sizes[a] : pool_used + need] = pool[offsets[b] : offsets[b] + sizes[b]]
        offsets[x], sizes[x] = pool_used, need
        pool_used += need
        # Merge it in every word listed under it.
        slot = slots[best]
        listed, n_listed = holders[slot], filled[slot]
        _drop_holders(slots, holders, filled, free, best)
        delta = Dict.empty(_INT64, _INT64)
        for j in range(n_listed):
            w = listed[j]
            s, length, f = starts[w], lengths[w], freqs[w]
            last = s + length - 2
            r, end, found = s, -1, False
            while r <= last:  # the pairs the old word loses
                if tokens[r] == a and tokens[r + 1] == b:
                    found = True
                    delta[best] = _count_of(delta, best) - f
                    if r > s and r != end:
                        k = (np.int64(tokens[r - 1]) << 32) | a
                        delta[k] = _count_of(delta, k) - f
                    if r < last:
                        k = (b << 32) | tokens[r + 2]
                        delta[k] = _count_of(delta, k) - f
                    end = r + 2
                    r += 2
                else:
                    r += 1
            if not found:
                continue  # a stale or repeated entry
            r, out = s, s
            while r < s + length:  # join the pairs, in place
                if r + 1 < s + length and tokens[r] == a and tokens[r + 1] == b:
                    tokens[out] = x
                    r += 2
                else:
                    tokens[out] = tokens[r]
                    r += 1
                out += 1
            lengths[w] = out - s
            for q in range(s, out):  # the pairs the new word gains
                if tokens[q] != x:
                    continue
                if q > s:
                    k = (np.int64(tokens[q - 1]) << 32) | x
                    delta[k] = _count_of(delta, k) + f
                    _add_holder(slots, holders, filled, free, k, w)
                if q + 1 < out and tokens[q + 1] != x:
                    k = (np.int64(x) << 32) | tokens[q + 1]
                    delta[k] = _count_of(delta, k) + f
                    _add_holder(slots, holders, filled, free, k, w)
        for k, change in delta.items():
            if change == 0:
                continue
            count = _count_of(counts, k) + change
            if count > 0:
                counts[k] = count
                if heap_size == len(heap_counts):
                    grown_counts = np.empty(2 * heap_size, np.int64)
                    grown_keys = np.empty(2 * heap_size, np.int64)
                    grown_counts[:heap_size] = heap_counts
                    grown_keys[:heap_size] = heap_keys
                    heap_counts, heap_keys = grown_counts, grown_keys
                heap_counts[heap_size], heap_keys[heap_size] = count, k
                heap_size += 1
                _sift_up(heap_counts, heap_keys, heap_size - 1, pool, offsets, sizes)
            else:
                if k in counts:
                    del counts[k]
                _drop_holders(slots, holders, filled, free, k)
    return made, heap_size, pool_used, heap_counts, heap_keys, pool


def train_merges(
    word_counts: Iterable[tuple[bytes, int]],
    vocab: dict[int, bytes],
    vocab_size: int,
    progress: Callable[[int], None] | None = None,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Add merges to ``vocab`` (the bytes and special tokens) until it holds ``vocab_size`` tokens."""
    state = _build(word_counts, vocab, vocab_size)
    merges: list[tuple[bytes, bytes]] = []
    out_pairs = np.empty((_BATCH, 2), np.int64)
    while len(vocab) < vocab_size:
        first = len(vocab)
        made, state.heap_size, state.pool_used, state.heap_counts, state.heap_keys, state.pool = _merge_batch(
            state.tokens, state.starts, state.lengths, state.freqs, state.counts, state.slots, state.holders,
            state.filled, state.free, state.heap_counts, state.heap_keys, state.heap_size, state.pool,
            state.offsets, state.sizes, state.pool_used, first, min(vocab_size, first + _BATCH), out_pairs,
        )  # fmt: skip
        if state.heap_size > 4 * len(state.counts) + (1 << 20):  # mostly stale entries: rebuild
            state.heap_size = _heapify(state.counts, state.heap_counts, state.heap_keys, state.pool,
                                       state.offsets, state.sizes)  # fmt: skip
        for a, b in out_pairs[:made].tolist():
            vocab[len(vocab)] = vocab[a] + vocab[b]
            merges.append((vocab[a], vocab[b]))
            if progress is not None:
                progress(len(merges))
        if made < min(vocab_size, first + _BATCH) - first:
            break
    return vocab, merges
