"""The merge loop compiled with numba: the algorithm of ``stages.merge``, at machine speed.

Takes the words laid out as its records (``word_records.Words``) and the first vocabulary; gives the
same vocabulary and merges as the pure-Python loop of ``stages.merge``, which uses it for large
tables; the tests hold both to the reference trainer. The arrays it works on, and how they are
laid out, are ``merge_state``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
from numba import njit

from bpe_dask import interrupts
from bpe_dask.compiled.cache import cached_versions
from bpe_dask.compiled.hashing import LOW
from bpe_dask.compiled.merge_holders import merge_holders
from bpe_dask.compiled.merge_state import (
    HEAP_SIZE,
    INDEX_LOAD,
    PAIRS_USED,
    POOL_USED,
    UNLIMITED,
    State,
    best_pair,
    fits,
    grown,
    join_tokens,
    lay_lists,
    pop_top,
    token_rules,
)
from bpe_dask.compiled.pair_heap import sift_up
from bpe_dask.compiled.pair_map import COUNT, KEY, LENGTH, START, compact
from bpe_dask.compiled.word_records import WIDE_VOCAB, Words, count_width, end_mark, token_dtype

_BATCH = 256  # merges per compiled call, between progress reports
_ZERO = np.int64(0)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _merge_batch(
    words, pairs, index, pool, heap, gained, tokens, uses, next_id, last_id, out_pairs, min_frequency, rules
):
    """Up to ``last_id - next_id`` merges. Stops early, before a merge, when the pairs' records or
    their index might fill up during it (the caller makes room and calls again), or when the best
    pair occurs fewer than ``min_frequency`` times (its count is then returned as ``below``, else 0).
    Takes the state's parts first (``merge_state.BATCH_TAKES``), and updates its ``uses`` in place;
    returns how many merges were made, ``below``, then the parts it may have regrown
    (``merge_state.BATCH_GIVES``). Pairs that would make a token the ``rules`` rule out
    (``merge_state.token_rules``) are never chosen. ``pool_written`` is how far the pool has been
    written, its highest use.

    The pool is used up to ``pool_limit``, then squeezed (``compact``); the limit rises when the live
    lists need more, into the pool's room (pages the loop never wrote cost no memory), and only past
    that is the pool copied into a larger one.

    A merge creates pairs only with its new token, at most two per distinct neighbour: at most
    twice the vocabulary's size. Every pair it creates is new, and gains holders now or never.
    """
    heap_counts, heap_ids = heap
    gained_pairs, gained_words = gained
    token_bytes, offsets, sizes = tokens
    pairs_used, pool_used, pool_limit, pool_written, heap_size, bytes_used = uses
    made, below = 0, np.int64(0)
    width, end = count_width(words), end_mark(words)
    new_pairs = np.empty(2 * last_id + 8, np.int64)
    while next_id + made < last_id:
        room = 2 * (next_id + made) + 2
        if pairs_used + room > len(pairs) or INDEX_LOAD * (pairs_used + room) > len(index):
            break  # the caller makes room
        best, heap_size = best_pair(heap_counts, heap_ids, heap_size, pairs, token_bytes, offsets, sizes)
        if best < 0:
            break
        if heap_counts[0] < min_frequency:
            below = heap_counts[0]
            break
        heap_size = pop_top(heap_counts, heap_ids, heap_size, pairs, token_bytes, offsets, sizes)
        merge = next_id + made
        key = pairs[best, KEY]
        a, b, x = key >> 32, key & LOW, merge
        out_pairs[made, 0], out_pairs[made, 1], out_pairs[made, 2] = a, b, 0
        made += 1
        token_bytes, bytes_used = join_tokens(token_bytes, offsets, sizes, bytes_used, a, b, x)
        # Every occurrence is merged: the pair is gone, and its list is dead room once read here.
        listed, n_listed = pairs[best, START], pairs[best, LENGTH]
        pairs[best, COUNT] = pairs[best, LENGTH] = 0
        j, n_new, n_gained, saved = _ZERO, _ZERO, _ZERO, _ZERO  # not 0: see compiled/compile_once.py
        while True:
            j, pairs_used, n_new, n_gained, saved = merge_holders(
                words, width, end, pool, listed, n_listed, j, a, b, x, index, pairs, pairs_used,
                new_pairs, n_new, gained_pairs, gained_words, n_gained, saved,
            )  # fmt: skip
            if j == n_listed:
                break
            gained_pairs = grown(gained_pairs, 2 * len(gained_pairs), n_gained)  # until a word fits
            gained_words = grown(gained_words, len(gained_pairs), n_gained)
        out_pairs[made - 1, 2] = saved
        pool, pool_used, pool_limit = lay_lists(
            pairs,
            pairs_used,
            pool,
            pool_used,
            pool_limit,
            new_pairs,
            n_new,
            gained_pairs,
            gained_words,
            n_gained,
        )
        pool_written = max(pool_written, pool_used)
        # An entry for each new pair that may be chosen.
        for k in range(n_new):
            pair = new_pairs[k]
            if fits(pairs[pair, KEY], token_bytes, offsets, sizes, rules):
                heap_counts[heap_size], heap_ids[heap_size] = pairs[pair, COUNT], pair
                heap_size += 1
                sift_up(heap_counts, heap_ids, heap_size - 1, pairs, token_bytes, offsets, sizes)
    for k, use in enumerate((pairs_used, pool_used, pool_limit, pool_written, heap_size, bytes_used)):
        uses[k] = use  # in the order of ``merge_state.PAIRS_USED`` and the rest
    return made, below, pool, (gained_pairs, gained_words), (token_bytes, offsets, sizes)


def learn_merges(
    words: Words,
    vocab: dict[int, bytes],
    vocab_size: int,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    max_words: int | None = None,
    forbid: tuple[str, ...] = (),
    stopped: Callable[[str, int], None] | None = None,
) -> Iterator[tuple[int, int, int]]:
    """Add merges to ``vocab`` (the bytes and special tokens) until it holds ``vocab_size`` tokens or
    no pair is left, as the pure-Python loop does (``stages.merge._MergeState.learn_merges``), giving
    each as it is added, a batch at a time: the two ids it joins and the tokens it saves.

    The words are ``words``' records (laid out for ``vocab_size``; they are taken from it and merged
    in place). ``min_frequency``, ``max_token_length``, ``max_words``, ``forbid`` and ``stopped`` are
    ``train_merges``'s.
    """
    rules = token_rules(max_token_length, max_words, forbid)
    min_frequency = min(min_frequency, UNLIMITED)  # int64 in compiled code
    state = State(words, vocab, vocab_size, rules)
    out_pairs = np.empty((_BATCH, 3), np.int64)  # each merge's pair, and the tokens it saves
    while len(vocab) < vocab_size:
        interrupts.check()  # between batches: compiled code sees no signal, and garbles one raised in it
        first = len(vocab)
        want = min(vocab_size, first + _BATCH) - first
        made, below, *given = _merge_batch(
            *state.batch_arrays(), first, first + want, out_pairs, min_frequency, rules
        )
        state.take(given)
        state.give_back()
        for a, b, saved in out_pairs[:made].tolist():
            vocab[len(vocab)] = vocab[a] + vocab[b]
            yield a, b, saved
        if below:  # the best pair left is too rare
            if stopped is not None:
                stopped("min_frequency", int(below))
            return
        if made < want:
            if state.uses[HEAP_SIZE] == 0:  # no pair left that fits
                counted = state.pairs[: state.uses[PAIRS_USED], COUNT]
                if stopped is not None and (counted > 0).any():  # pairs are left, all ruled out
                    stopped("token_limits", 0)
                return
            state.room_for(2 * len(vocab) + 2)


def compile_merge_loop(vocab_sizes: tuple[int, ...] = (300, WIDE_VOCAB + 1), sort: bool = True) -> None:
    """Run every compiled function of the merge loop once on tiny tables, so numba compiles them all
    (or loads them from its cache) before the real work needs them: for the records ``vocab_sizes``
    take (uint16; int32 for a vocabulary over 65,535 tokens), the rarely taken regrowths and the
    pool's squeeze included. Each width is a version of its own, seconds to compile: a job that knows
    its vocabulary size compiles the one it merges with. ``sort=False`` leaves out the records' sort
    (``Words.sort``), which words in a counts table's order (a training job's) never run."""
    words = [(bytes([97 + i % 7, 98 + i % 5, 97 + i % 3]) * (1 + i % 4), 1 + i % 3) for i in range(64)]
    if not sort:
        words.sort()  # in order already: the sort's two functions are not compiled
    data = np.frombuffer(b"".join(w for w, _ in words), np.uint8)
    offsets = np.concatenate(([0], np.cumsum([len(w) for w, _ in words]))).astype(np.int64)
    chunk = (data, offsets, np.array([c for _, c in words], np.int64))
    first = {i: bytes([i]) for i in range(256)}
    for vocab_size in vocab_sizes:
        state = State(Words([chunk], len(words), len(data), vocab_size), first, vocab_size)
        state.room_for(len(state.pairs))  # the records copied, the index rebuilt
        state.uses[POOL_USED] = compact(state.pairs, state.uses[PAIRS_USED], state.pool)
        list(learn_merges(Words([chunk], len(words), len(data), vocab_size), dict(first), vocab_size))


def merge_loop_cached(vocab_sizes: tuple[int, ...]) -> bool:
    """Whether numba's cache holds the merge loop for the records of each of ``vocab_sizes`` on this
    machine (compiled last by ``compile_merge_loop``, after the functions it calls): a process loads
    it in well under a second rather than compiling it."""
    held = {str(version[0].dtype) for version in cached_versions(_merge_batch)}
    return all(str(token_dtype(size)) in held for size in vocab_sizes)
