"""The merge loop compiled with numba: the algorithm of ``stages.merge``, at machine speed.

Takes the words as flat arrays (their bytes back to back, where each starts, and its count) and the
first vocabulary; gives the same vocabulary and merges as the pure-Python loop of ``stages.merge``,
which uses it for large tables; the tests hold both to the reference trainer. The arrays it works
on, and how they are laid out, are ``merge_state``'s.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit

from bpe_dask import interrupts
from bpe_dask.compiled.hashing import LOW
from bpe_dask.compiled.merge_state import UNLIMITED, State, count_of, fits, heapify
from bpe_dask.compiled.pair_heap import sift_down, sift_up
from bpe_dask.compiled.pair_map import (
    COUNT,
    EMPTY,
    KEY,
    LENGTH,
    ROOM,
    START,
    compacted,
    find,
    make_room,
    note_change,
    regrown,
)

_BATCH = 256  # merges per compiled call, between progress reports
_ZERO = np.int64(0)  # not 0: a constant argument makes numba compile the callee apart (compile_once.py)


@njit(cache=True, nogil=True)
def _merge_batch(words, pairs, pairs_used, pool, pool_used, heap_counts, heap_keys, heap_size,
                 token_bytes, offsets, sizes, bytes_used, next_id, last_id, out_pairs,
                 min_frequency, longest):  # fmt: skip
    """Up to ``last_id - next_id`` merges. Stops early, before a merge, when the map might fill up
    during it (the caller grows it and calls again), or when the best pair occurs fewer than
    ``min_frequency`` times (its count is then returned as ``below``, else 0). Returns how many merges
    were made, ``below``, and the map's use, the pool, the heap and the token bytes (all maybe
    regrown) and their use. Pairs that would make a token over ``longest`` bytes are never chosen.

    A merge creates pairs only with its new token, at most two per distinct neighbour: at most
    twice the vocabulary's size. It touches at most that many, and as many that it takes from.
    """
    made, below = 0, np.int64(0)
    touched = np.empty(4 * last_id + 8, np.int64)
    before = np.empty_like(touched)
    while next_id + made < last_id:
        if 2 * (pairs_used + 2 * (next_id + made) + 2) > len(pairs):
            break  # the map could fill up: the caller grows it
        # The best pair whose heap entry is current. Every pair with a count has an entry at least
        # that high: an entry above its pair's count is lowered to it and put back in its place.
        best_slot = np.int64(-1)
        while heap_size > 0:
            count, key = heap_counts[0], heap_keys[0]
            slot = find(pairs, key)
            now = pairs[slot, COUNT] if pairs[slot, KEY] == key else 0
            if now == count and now > 0:
                best_slot = slot
                break
            if 0 < now < count:
                heap_counts[0] = now
            else:  # gone, or below a newer entry
                heap_size -= 1
                heap_counts[0], heap_keys[0] = heap_counts[heap_size], heap_keys[heap_size]
            sift_down(heap_counts, heap_keys, heap_size, _ZERO, token_bytes, offsets, sizes)
        if best_slot < 0:
            break
        if heap_counts[0] < min_frequency:
            below = heap_counts[0]
            break
        heap_size -= 1  # pop it
        heap_counts[0], heap_keys[0] = heap_counts[heap_size], heap_keys[heap_size]
        sift_down(heap_counts, heap_keys, heap_size, _ZERO, token_bytes, offsets, sizes)
        merge = next_id + made
        best = pairs[best_slot, KEY]
        a, b, x = best >> 32, best & LOW, merge
        out_pairs[made, 0], out_pairs[made, 1], out_pairs[made, 2] = a, b, 0
        made += 1
        # The new token's bytes.
        need = sizes[a] + sizes[b]
        if bytes_used + need > len(token_bytes):
            grown = np.zeros(2 * len(token_bytes) + need, np.uint8)
            for k in range(bytes_used):  # not a slice assignment: compile_once.py says why
                grown[k] = token_bytes[k]
            token_bytes = grown
        for k in range(sizes[a]):
            token_bytes[bytes_used + k] = token_bytes[offsets[a] + k]
        for k in range(sizes[b]):
            token_bytes[bytes_used + sizes[a] + k] = token_bytes[offsets[b] + k]
        offsets[x], sizes[x] = bytes_used, need
        bytes_used += need
        # Every occurrence is merged: the pair is gone, and its holders are read from the pool below
        # (lists only ever move to the end of the pool, so nothing is written over them).
        listed, n_listed = pairs[best_slot, START], pairs[best_slot, LENGTH]
        pairs[best_slot, COUNT] = pairs[best_slot, LENGTH] = 0
        n_touched = _ZERO
        for j in range(n_listed):
            w = pool[listed + j]
            s, length, f = w + 3, np.int64(words[w]), count_of(words, w)
            last = s + length - 2
            found = False
            r, end = s, np.int64(-1)
            while r <= last:  # the pairs the old word loses
                if words[r] == a and words[r + 1] == b:
                    found = True
                    if r > s and r != end:  # (where two merged spots touch, "a b a b", that pair is one)
                        k = (np.int64(words[r - 1]) << 32) | a
                        slot, n_touched, inserted = note_change(
                            pairs, touched, before, n_touched, merge, k, -f
                        )
                    if r < last:
                        k = (b << 32) | words[r + 2]
                        slot, n_touched, inserted = note_change(
                            pairs, touched, before, n_touched, merge, k, -f
                        )
                    end = r + 2
                    r += 2
                else:
                    r += 1
            if not found:
                continue  # a stale or repeated entry
            r, out = s, s
            while r < s + length:  # join the pairs, in place
                if r + 1 < s + length and words[r] == a and words[r + 1] == b:
                    words[out] = x
                    r += 2
                else:
                    words[out] = words[r]
                    r += 1
                out += 1
            words[w] = out - s
            out_pairs[made - 1, 2] += (length - (out - s)) * f  # tokens the merge saves in this word
            for q in range(s, out):  # the pairs the new word gains, which it is now listed under
                if words[q] != x:
                    continue
                for k in (
                    (np.int64(words[q - 1]) << 32) | x if q > s else EMPTY,
                    (np.int64(x) << 32) | words[q + 1] if q + 1 < out and words[q + 1] != x else EMPTY,
                ):
                    if k == EMPTY:
                        continue
                    slot, n_touched, inserted = note_change(pairs, touched, before, n_touched, merge, k, f)
                    pairs_used += inserted
                    if pairs[slot, LENGTH] == pairs[slot, ROOM]:
                        pool, pool_used = make_room(pairs, slot, pool, pool_used)
                    pool[pairs[slot, START] + pairs[slot, LENGTH]] = w
                    pairs[slot, LENGTH] += 1
        # A new entry for each pair that gained; one that lost keeps its (now too high) entry.
        for t in range(n_touched):
            slot = touched[t]
            if pairs[slot, COUNT] > before[t]:
                if not fits(pairs[slot, KEY], sizes, longest):
                    continue  # never a candidate: no entry
                if heap_size == len(heap_counts):
                    grown_counts = np.empty(2 * heap_size, np.int64)
                    grown_keys = np.empty(2 * heap_size, np.int64)
                    for k in range(heap_size):
                        grown_counts[k], grown_keys[k] = heap_counts[k], heap_keys[k]
                    heap_counts, heap_keys = grown_counts, grown_keys
                heap_counts[heap_size], heap_keys[heap_size] = pairs[slot, COUNT], pairs[slot, KEY]
                heap_size += 1
                sift_up(heap_counts, heap_keys, heap_size - 1, token_bytes, offsets, sizes)
            elif pairs[slot, COUNT] == 0:
                pairs[slot, LENGTH] = 0  # no word holds it any more
    return (made, below, pairs_used, pool, pool_used, heap_counts, heap_keys, heap_size, token_bytes,
            bytes_used)  # fmt: skip


def train_merges(
    data: np.ndarray,
    offsets: np.ndarray,
    freqs: np.ndarray,
    vocab: dict[int, bytes],
    vocab_size: int,
    progress: Callable[[int], None] | None = None,
    *,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    stopped: Callable[[str, int], None] | None = None,
    savings: list[int] | None = None,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Add merges to ``vocab`` (the bytes and special tokens) until it holds ``vocab_size`` tokens.

    The words are ``data[offsets[i]:offsets[i + 1]]`` (uint8, int64 offsets), counted ``freqs[i]``.
    ``min_frequency``, ``max_token_length``, ``stopped`` and ``savings`` are those of
    ``stages.merge.train_merges``.
    """
    longest = UNLIMITED if max_token_length is None else min(max_token_length, UNLIMITED)
    min_frequency = min(min_frequency, UNLIMITED)  # both int64 in compiled code
    state = State(data, offsets, freqs, vocab, vocab_size, longest)
    merges: list[tuple[bytes, bytes]] = []
    out_pairs = np.empty((_BATCH, 3), np.int64)  # each merge's pair, and the tokens it saves
    while len(vocab) < vocab_size:
        interrupts.check()  # between batches: compiled code sees no signal, and garbles one raised in it
        first = len(vocab)
        want = min(vocab_size, first + _BATCH) - first
        (made, below, state.pairs_used, state.pool, state.pool_used, state.heap_counts, state.heap_keys,
         state.heap_size, state.token_bytes, state.bytes_used) = _merge_batch(
            state.words, state.pairs, state.pairs_used, state.pool, state.pool_used, state.heap_counts,
            state.heap_keys, state.heap_size, state.token_bytes, state.offsets, state.sizes, state.bytes_used,
            first, first + want, out_pairs, min_frequency, longest,
        )  # fmt: skip
        for a, b, saved in out_pairs[:made].tolist():
            if savings is not None:
                savings.append(saved)
            vocab[len(vocab)] = vocab[a] + vocab[b]
            merges.append((vocab[a], vocab[b]))
            if progress is not None:
                progress(len(merges))
        if below:  # the best pair left is too rare
            if stopped is not None:
                stopped("min_frequency", int(below))
            break
        if made < want:
            if state.heap_size == 0:  # no pair left that fits
                if max_token_length is not None and stopped is not None and (state.pairs[:, COUNT] > 0).any():
                    stopped("max_token_length", 0)
                break
            need = 2 * (state.pairs_used + 2 * len(vocab) + 2)
            state.pairs = regrown(state.pairs, 1 << (need - 1).bit_length())
        if state.heap_size > 4 * state.pairs_used + (1 << 20):  # mostly stale entries: rebuild
            state.heap_size = heapify(state.pairs, state.heap_counts, state.heap_keys, state.token_bytes,
                                       state.offsets, state.sizes, longest)  # fmt: skip
        if state.pool_used > state.check_pool_at:  # the pool doubled: compact it if mostly abandoned room
            if state.pool_used > 2 * int(state.pairs[:, ROOM].sum()):
                state.pool, state.pool_used = compacted(state.pairs, state.pool)
            state.check_pool_at = 2 * state.pool_used
    return vocab, merges


def warm_up() -> None:
    """Run every compiled function once on a tiny table, so numba compiles them all (or loads them
    from its cache) before the real work needs them, the rarely called regrowths included."""
    words = [(bytes([97 + i % 7, 98 + i % 5, 97 + i % 3]) * (1 + i % 4), 1 + i % 3) for i in range(64)]
    data = np.frombuffer(b"".join(w for w, _ in words), np.uint8)
    offsets = np.concatenate(([0], np.cumsum([len(w) for w, _ in words]))).astype(np.int64)
    freqs = np.array([c for _, c in words], np.int64)
    state = State(data, offsets, freqs, {i: bytes([i]) for i in range(256)}, 300)
    state.pairs = regrown(state.pairs, 2 * len(state.pairs))
    state.pool, state.pool_used = compacted(state.pairs, state.pool)
    train_merges(data, offsets, freqs, {i: bytes([i]) for i in range(256)}, 300)
