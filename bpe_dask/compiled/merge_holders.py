"""One merge applied to the words that hold its pair (compiled): the inner loop of the merge loop.

Takes the merge (pair ``a b`` into token ``x``), the list of its holders in the pool and the state's
arrays; rewrites each holder word in place, takes its counts from the pairs it loses, adds the new
pairs it gains (new records when first seen) and notes each new (pair, word) holding in
``gained_pairs`` / ``gained_words``, for ``merge_loop`` to lay out as lists. Allocates nothing:
compiled without numba's reference counts (which, on arrays a loop may replace, it takes atomically
at every turn), it stops before a word that might not fit in the gained arrays, and the caller grows
them and calls again from that word.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bpe_dask.compiled.pair_map import COUNT, LENGTH, START, add, lose
from bpe_dask.compiled.prefetch import prefetch
from bpe_dask.compiled.word_records import count_of

AHEAD = 16  # holders read ahead


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def merge_holders(words, width, end, pool, listed, n_listed, j, a, b, x, index, pairs, pairs_used,
                  new_pairs, n_new, gained_pairs, gained_words, n_gained, saved):  # fmt: skip
    """Merge ``a b`` into ``x`` in holders ``j`` on of the list at ``pool[listed:listed + n_listed]``.

    Returns the holder it stopped before (``n_listed`` when done), and the pairs' records used, the
    new pairs, the gained holdings and the tokens saved so far.
    """
    for k in range(j, min(n_listed, j + AHEAD)):
        prefetch(words, np.int64(pool[listed + k]))
    while j < n_listed:
        if j + AHEAD < n_listed:  # the words are read where they lie: ask for the next ones now
            prefetch(words, np.int64(pool[listed + j + AHEAD]))
        w = np.int64(pool[listed + j])
        s, f = w + width, count_of(words, w)
        r = s
        while words[r] != end:
            r += 1
        if n_gained + (r - s) > len(gained_pairs):  # a word gains fewer holdings than it has tokens
            return j, pairs_used, n_new, n_gained, saved
        j += 1
        found = False
        r, after = s, np.int64(-1)
        while words[r] != end and words[r + 1] != end:  # the pairs the old word loses
            if words[r] == a and words[r + 1] == b:
                found = True
                if r > s and r != after:  # (where two merged spots touch, "a b a b", that pair is one)
                    lose(index, pairs, (np.int64(words[r - 1]) << 32) | a, f)
                if words[r + 2] != end:
                    lose(index, pairs, (b << 32) | np.int64(words[r + 2]), f)
                after = r + 2
                r += 2
            else:
                r += 1
        if not found:
            continue  # a stale entry
        r, out = s, s
        while words[r] != end:  # join the pairs, in place
            if words[r] == a and words[r + 1] == b:
                words[out] = x
                r += 2
            else:
                words[out] = words[r]
                r += 1
            out += 1
        words[out] = end
        saved += (r - out) * f  # tokens the merge saves in this word
        for q in range(s, out):  # the pairs the new word gains, all new
            if words[q] != x:
                continue
            for k in (
                (np.int64(words[q - 1]) << 32) | x if q > s else -1,
                (x << 32) | np.int64(words[q + 1]) if q + 1 < out and words[q + 1] != x else -1,
            ):
                if k < 0:
                    continue
                pair, created = add(index, pairs, pairs_used, k)
                if created:
                    pairs_used += 1
                    new_pairs[n_new] = pair
                    n_new += 1
                pairs[pair, COUNT] += f
                if pairs[pair, START] != w:  # (a new pair's START is the last word it was noted for)
                    pairs[pair, START] = w
                    pairs[pair, LENGTH] += 1
                    gained_pairs[n_gained], gained_words[n_gained] = pair, w
                    n_gained += 1
    return j, pairs_used, n_new, n_gained, saved
