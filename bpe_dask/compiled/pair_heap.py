"""The merge engine's heap of pairs (compiled): highest count first, then the greater pair.

Takes two parallel arrays, counts (int64) and pair ids (int32, their keys ``a << 32 | b`` in
``pairs[id, 0]``: ``pair_map``'s records), and the bytes of every token
(``token_bytes[offsets[t]:offsets[t] + sizes[t]]``); ``sift_up`` and ``sift_down`` keep them a
binary heap ordered as CS336 breaks ties: by count, then by the pair of byte strings ``(bytes of a,
bytes of b)``, the lexicographically greater first.
"""

from __future__ import annotations

from numba import njit

from bpe_dask.compiled.hashing import LOW, compare_bytes

# --- the heap -------------------------------------------------------------------------------------


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _compare_tokens(token_bytes, offsets, sizes, t, u):
    """-1, 0 or 1 as the bytes of token ``t`` sort before, equal or after those of ``u``."""
    if t == u:
        return 0
    ot, ou = offsets[t], offsets[u]
    return compare_bytes(token_bytes, ot, ot + sizes[t], token_bytes, ou, ou + sizes[u])


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _before(heap_counts, heap_ids, i, j, pairs, token_bytes, offsets, sizes):
    """Whether heap entry ``i`` comes out before ``j``: higher count, then greater pair bytes."""
    if heap_counts[i] != heap_counts[j]:
        return heap_counts[i] > heap_counts[j]
    ki, kj = pairs[heap_ids[i], 0], pairs[heap_ids[j], 0]
    order = _compare_tokens(token_bytes, offsets, sizes, ki >> 32, kj >> 32)
    if order == 0:
        order = _compare_tokens(token_bytes, offsets, sizes, ki & LOW, kj & LOW)
    return order > 0


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def sift_up(heap_counts, heap_ids, i, pairs, token_bytes, offsets, sizes):
    """Move entry ``i`` up until its parent comes out before it: the heap holds again after an entry
    is put at its end."""
    while i > 0:
        parent = (i - 1) // 2
        if not _before(heap_counts, heap_ids, i, parent, pairs, token_bytes, offsets, sizes):
            break
        heap_counts[i], heap_counts[parent] = heap_counts[parent], heap_counts[i]
        heap_ids[i], heap_ids[parent] = heap_ids[parent], heap_ids[i]
        i = parent


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def sift_down(heap_counts, heap_ids, size, i, pairs, token_bytes, offsets, sizes):
    """Move entry ``i`` of the heap's first ``size`` down until neither child comes out before it: the
    heap holds again after entry ``i`` is replaced or lowered."""
    while True:
        best, left = i, 2 * i + 1
        if left < size and _before(heap_counts, heap_ids, left, best, pairs, token_bytes, offsets, sizes):
            best = left
        right = left + 1
        if right < size and _before(heap_counts, heap_ids, right, best, pairs, token_bytes, offsets, sizes):
            best = right
        if best == i:
            return
        heap_counts[i], heap_counts[best] = heap_counts[best], heap_counts[i]
        heap_ids[i], heap_ids[best] = heap_ids[best], heap_ids[i]
        i = best
