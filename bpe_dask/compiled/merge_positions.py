"""The merge loop for long words (compiled): each merge costs in proportion to its pair's occurrences,
not to the lengths of the words that hold it: the loop of SuperBPE's second stage, whose words are
whole documents, nearly all distinct (``stages.merge`` takes it for words of ``LONG_WORD`` bytes on
average).

Takes the words laid out as ``LongWords`` (or as ``(token ids, count)`` pairs), the first vocabulary
(ids to bytes; ids up to ``len(vocab)`` in use, as ``rules.vocabulary.start`` lays them out) and the
vocabulary size; gives, like ``merge_loop.learn_merges``, each merge as it is made: the two ids it
joins and the tokens it saves (``learn_merges_long``). Promises the merges of ``stages.merge``'s
Python loop: the pair of highest count (weighted by the words' counts) first, ties to the greater
pair of byte strings (the heap of ``pair_heap``), each merge replacing its pair left to right without
overlaps in every word, pairs whose token the limits rule out never chosen, ``min_frequency``
stopping the loop.

How: the words' tokens lie in one flat int32 array (``tok``), each word followed by a boundary
(``BOUND``). A token keeps the position of its first byte's token; the positions it swallowed are
dead (``tok`` below ``BOUND``), and the dead positions hold the links, so that a live one needs no
room for them: a dead position alone between two live ones is ``ONE_DEAD`` (its neighbours are
the live ones), and a longer run of them holds, in its first position, the next live one (or the
boundary) and in its last the previous live one (each as ``-3 - position``): both neighbours of a
live position are found in one step. Each pair (``pair_map``'s records and
index) has a count and a list, in ``pool``, of the positions where it occurs (its left token's),
in increasing order: the first pairs' lists are made by a counting sort over the positions, and a
merge's new pairs (all hold the new token, so each gains occurrences only in the merge that makes
it) get theirs as the merge walks its pair's occurrences in order. Entries left stale by other
merges (a dead position, or other tokens there now) are skipped when read. A word's count is found
from its position by a galloping search over the words' starts, from the last one found (the
occurrences come in order); with every count 1 (documents) it is not looked up at all.

Memory model, for N input tokens in W words: ``tok`` 4 bytes a position (N + W positions); the
pool 4 bytes an entry, N at first, with half as much room again, then up to two entries per
occurrence merged (the lists of merged pairs, and of pairs counted down to 0, are squeezed out when
it fills, and its pages past its use given back); 16 bytes a word (starts and counts); 8 bytes a
position while the first pairs are made; about 60 bytes a distinct pair (record 32, index 8 to 16,
heap 12), never freed. Measured at 650 MB of documents (docs/performance.md#superword-tokenizers):
19.7 bytes a token above the laid-out words. Against the words' loop (``merge_loop``), from the
bytes to 8,000 tokens: 3.4 s against 42.5 s for 16 MB of documents, 3.7 s against 140 s for 16 MB
as one word. Positions are int32: under 2**31 tokens and words.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
from numba import njit

from bpe_dask import interrupts
from bpe_dask.compiled.compile_once import readonly
from bpe_dask.compiled.hashing import LOW
from bpe_dask.compiled.merge_state import (  # ``uses`` as ``merge_state.State`` has them
    BYTES_USED,
    HEAP_SIZE,
    INDEX_LOAD,
    PAIRS_USED,
    POOL_LIMIT,
    POOL_USED,
    POOL_WRITTEN,
    UNLIMITED,
    Pairs,
    best_pair,
    fits,
    grown,
    heapify,
    join_tokens,
    lay_lists,
    pop_top,
    token_rules,
)
from bpe_dask.compiled.pair_heap import sift_up
from bpe_dask.compiled.pair_map import COUNT, KEY, LENGTH, NO_PAIR, START, add, find, index_pairs
from bpe_dask.compiled.word_records import Chunk
from bpe_dask.errors import BpeDaskError
from bpe_dask.wording import format_bytes

BOUND = -1  # ``tok`` at a word's end; dead positions are below it
ONE_DEAD = -2  # ``tok`` of a dead position alone between two live ones; longer runs link their ends
MAX_POSITIONS = 2**31 - 3  # a run's link, -3 - position, is an int32
# What the loop holds at its peak per token of its words, about, besides the words themselves (4 bytes
# a token): measured 12 to 22 (docs/performance.md#superword-tokenizers).
BYTES_PER_TOKEN = 24
_BATCH = 256  # merges per compiled call, between progress reports
# What each merge reports (``out`` rows): the pair, the tokens saved, and the work: list entries read
# (stale ones included) and occurrences merged.
A, B, SAVED, READ, MERGED = range(5)


@njit(cache=True, nogil=True, _nrt=False, no_cfunc_wrapper=True)
def _lay_out(data, offsets, freqs, tok, starts, counts, at, w):
    """Append the words ``data[offsets[k]:offsets[k + 1]]`` counted ``freqs[k]`` (those of two tokens or
    more) to ``tok`` at ``at``, each followed by ``BOUND``, their starts to ``starts`` and their counts
    to ``counts`` at ``w``. Returns where they end, how many words there are, and the tokens all the
    words stand for (each word's tokens times its count)."""
    text = np.int64(0)
    for k in range(len(offsets) - 1):
        s, e = offsets[k], offsets[k + 1]
        text += (e - s) * freqs[k]
        if e - s < 2:
            continue
        starts[w], counts[w] = at, freqs[k]
        w += 1
        for q in range(s, e):
            tok[at] = data[q]
            at += 1
        tok[at] = BOUND
        at += 1
    return at, w, text


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _first_pairs(tok, starts, counts, n_words, capacity, pool):
    """Every adjacent pair of the words, as records (key, count, list start, list length) in order of
    their left token, then of where each first occurs; their occurrences in ``pool``, each pair's
    list in increasing order, the lists in the order of the records. Returns the records and how
    many there are.

    No hashing, and every array read in order: the positions are first sorted by their left token (a
    counting sort into the pool, where the lists of that token's pairs go, each with its right token
    and its word beside it), then each token's share again by the right token, with counters of
    ``capacity`` entries that only its pairs touch."""
    unit = True
    for w in range(n_words):
        unit &= counts[w] == 1
    first = np.zeros(capacity + 1, np.int64)  # where each left token's positions go in the pool
    for w in range(n_words):
        for i in range(starts[w], starts[w + 1] - 2):
            first[tok[i] + 1] += 1
    for t in range(capacity):
        first[t + 1] += first[t]
    total = first[capacity]
    right = np.empty(total, np.int32)
    word = np.empty(0 if unit else total, np.int32)
    placed = first[:-1].copy()
    for w in range(n_words):
        for i in range(starts[w], starts[w + 1] - 2):
            q = placed[tok[i]]
            pool[q], right[q] = i, tok[i + 1]
            if not unit:
                word[q] = w
            placed[tok[i]] = q + 1
    seen, pair_of = np.empty(capacity, np.int64), np.full(capacity, -1, np.int64)
    occurrences, weight = np.zeros(capacity, np.int64), np.zeros(capacity, np.int64)
    spare = np.empty(0, np.int32)
    pairs = np.empty((max(1 << 16, total // 16), 4), np.int64)
    n = np.int64(0)
    for a in range(capacity):
        lo, hi = first[a], first[a + 1]
        if lo == hi:
            continue
        kinds = 0
        for q in range(lo, hi):  # count each right token's pairs
            b = right[q]
            if occurrences[b] == 0:
                seen[kinds] = b
                kinds += 1
            occurrences[b] += 1
            weight[b] += 1 if unit else counts[word[q]]
        if n + kinds > len(pairs):
            grown = np.empty((2 * len(pairs) + kinds, 4), np.int64)
            grown[:n] = pairs[:n]
            pairs = grown
        at = lo
        for k in range(kinds):  # a record per pair, its list's room after the one before
            b = seen[k]
            pairs[n, KEY], pairs[n, COUNT] = (np.int64(a) << 32) | b, weight[b]
            pairs[n, START], pairs[n, LENGTH] = at, 0
            pair_of[b], at = n, at + occurrences[b]
            occurrences[b] = weight[b] = 0
            n += 1
        if hi - lo > len(spare):
            spare = np.empty(2 * (hi - lo), np.int32)
        for q in range(lo, hi):
            spare[q - lo] = pool[q]
        for q in range(lo, hi):  # each position into its pair's list, in order
            pair = pair_of[right[q]]
            pool[pairs[pair, START] + pairs[pair, LENGTH]] = spare[q - lo]
            pairs[pair, LENGTH] += 1
    return pairs, n


@njit(cache=True, nogil=True, inline="always")
def _next_live(tok, i):
    """The live position after live ``i`` in its word, or its word's boundary."""
    t = np.int64(tok[i + 1])
    if t >= BOUND:
        return i + 1
    if t == ONE_DEAD:
        return i + 2
    return -3 - t


@njit(cache=True, nogil=True, inline="always")
def _prev_live(tok, i):
    """The live position before live ``i`` in its word, or -1 at its word's start."""
    if i == 0:
        return np.int64(-1)
    t = np.int64(tok[i - 1])
    if t >= 0:
        return i - 1
    if t == BOUND:
        return np.int64(-1)
    if t == ONE_DEAD:
        return i - 2
    return -3 - t


@njit(cache=True, nogil=True, inline="always")
def _word_of(starts, n_words, w, i):
    """The word holding position ``i``, at or after word ``w`` (galloping, then halving)."""
    if starts[w + 1] > i:
        return w
    lo, step = w + 1, np.int64(1)
    hi = lo + 1
    while hi < n_words and starts[hi] <= i:
        lo = hi
        step *= 2
        hi = lo + step
    hi = min(hi, n_words)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if starts[mid] <= i:
            lo = mid
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True, inline="always")
def _lose(index, pairs, key, f, first_new):
    """Take ``f`` from the count of ``key``; an old pair no word holds any more has a dead list (a
    pair this merge made keeps counting its new occurrences in ``LENGTH``)."""
    pair = find(index, pairs, key)
    pairs[pair, COUNT] -= f
    if pairs[pair, COUNT] == 0 and pair < first_new:
        pairs[pair, LENGTH] = 0


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _merge_batch(
    words,
    n_words,
    pairs,
    index,
    pool,
    heap,
    tokens,
    gained,
    uses,
    next_id,
    last_id,
    out,
    min_frequency,
    rules,
):
    """Up to ``last_id - next_id`` merges, each reported in a row of ``out`` (``A``, ``B``, ``SAVED``,
    ``READ``, ``MERGED``). Stops early, before a merge, when the pairs' records or their index might
    fill up during it (the caller makes room and calls again), or when the best pair occurs fewer
    than ``min_frequency`` times (its count is then returned as ``below``, else 0). Returns how many
    merges were made, ``below``, and the parts it may have regrown: the pool, ``tokens`` (bytes,
    offsets, sizes) and ``gained`` (a merge's new occurrences: pair ids, positions). ``words`` are
    ``tok``, the words' starts and counts; ``heap`` its counts and pair ids."""
    tok, starts, counts = words
    heap_counts, heap_ids = heap
    token_bytes, offsets, sizes = tokens
    gained_pairs, gained_at = gained
    pairs_used, pool_used, pool_limit = uses[PAIRS_USED], uses[POOL_USED], uses[POOL_LIMIT]
    pool_written, heap_size, bytes_used = uses[POOL_WRITTEN], uses[HEAP_SIZE], uses[BYTES_USED]
    made, below = 0, np.int64(0)
    unit = True
    for w in range(n_words):
        if counts[w] != 1:
            unit = False
            break
    new_pairs = np.empty(2 * last_id + 8, np.int64)
    while next_id + made < last_id:
        room = 2 * (next_id + made) + 2
        if pairs_used + room > len(pairs) or INDEX_LOAD * (pairs_used + room) > len(index):
            break
        best, heap_size = best_pair(heap_counts, heap_ids, heap_size, pairs, token_bytes, offsets, sizes)
        if best < 0:
            break
        if heap_counts[0] < min_frequency:
            below = heap_counts[0]
            break
        heap_size = pop_top(heap_counts, heap_ids, heap_size, pairs, token_bytes, offsets, sizes)
        x = next_id + made
        key = pairs[best, KEY]
        a, b = key >> 32, key & LOW
        token_bytes, bytes_used = join_tokens(token_bytes, offsets, sizes, bytes_used, a, b, x)
        # Every occurrence, left to right: merged where ``a b`` still stands there.
        listed, n_listed = pairs[best, START], pairs[best, LENGTH]
        if 2 * n_listed > len(gained_pairs):  # each occurrence gains at most two
            gained_pairs = np.empty(2 * n_listed + 64, np.int32)
            gained_at = np.empty(2 * n_listed + 64, np.int32)
        first_new, n_new, n_gained, saved, merged, w = pairs_used, 0, 0, np.int64(0), 0, np.int64(0)
        for e in range(n_listed):
            i = np.int64(pool[listed + e])
            if tok[i] != a:
                continue  # dead, or another token there now
            j = _next_live(tok, i)
            if tok[j] != b:
                continue
            n = _next_live(tok, j)
            p = _prev_live(tok, i)
            if unit:
                f = np.int64(1)
            else:
                w = _word_of(starts, n_words, w, i)
                f = counts[w]
            # ``j`` joins ``i``: positions i + 1 to n - 1 are dead; of a run of two or more, the first
            # links on to ``n``, the last back to ``i``.
            tok[i] = x
            tok[j] = ONE_DEAD
            if n - i > 2:
                tok[i + 1] = -3 - n
                tok[n - 1] = -3 - i
            merged += 1
            saved += f
            for side in range(2):
                if side == 0:
                    if p < 0:
                        continue
                    c = np.int64(tok[p])
                    _lose(index, pairs, (c << 32) | a, f, first_new)
                    gain, at = (c << 32) | x, p
                else:
                    d = np.int64(tok[n])
                    if d < 0:
                        continue
                    _lose(index, pairs, (b << 32) | d, f, first_new)
                    gain, at = (x << 32) | d, i
                pair, created = add(index, pairs, pairs_used, gain)
                if created:
                    pairs_used += 1
                    new_pairs[n_new] = pair
                    n_new += 1
                pairs[pair, COUNT] += f
                pairs[pair, LENGTH] += 1
                gained_pairs[n_gained], gained_at[n_gained] = pair, at
                n_gained += 1
        out[made, A], out[made, B], out[made, SAVED] = a, b, saved
        out[made, READ], out[made, MERGED] = n_listed, merged
        made += 1
        pairs[best, COUNT] = pairs[best, LENGTH] = 0  # its list is dead room now
        pool, pool_used, pool_limit = lay_lists(
            pairs,
            pairs_used,
            pool,
            pool_used,
            pool_limit,
            new_pairs,
            n_new,
            gained_pairs,
            gained_at,
            n_gained,
        )
        pool_written = max(pool_written, pool_used)
        for k in range(n_new):  # a heap entry for each new pair that may be chosen
            pair = new_pairs[k]
            if pairs[pair, COUNT] <= 0:
                pairs[pair, LENGTH] = 0  # made and lost in this merge ("a b a b": x a)
            elif fits(pairs[pair, KEY], token_bytes, offsets, sizes, rules):
                heap_counts[heap_size], heap_ids[heap_size] = pairs[pair, COUNT], pair
                heap_size += 1
                sift_up(heap_counts, heap_ids, heap_size - 1, pairs, token_bytes, offsets, sizes)
    for k, use in enumerate((pairs_used, pool_used, pool_limit, pool_written, heap_size, bytes_used)):
        uses[k] = use
    return made, below, pool, (token_bytes, offsets, sizes), (gained_pairs, gained_at)


class LongWords:
    """The words as this loop takes them, laid out chunk by chunk as ``word_records.Words`` is (a
    chunk: its words' bytes or ids back to back, where each starts and the last ends, and their
    counts), so that whoever holds the words in another form can let them go: ``tok``, the words'
    ``starts`` (one more: the end) and ``counts``. ``rows`` and ``data_bytes`` are how many words
    and elements the chunks hold; ``tokens`` is the tokens the words stand for (each word's ids times
    its count). The loop merges them in place."""

    loop = "compiled loop for long words (numba)"

    def __init__(self, chunks: Iterable[Chunk], rows: int, data_bytes: int):
        size = data_bytes + rows + 1
        if size > MAX_POSITIONS:
            raise BpeDaskError(
                f"the words hold {data_bytes:,} tokens: the merge loop for long words takes fewer than "
                f"{MAX_POSITIONS:,} (count less text, or cut it into more documents)"
            )
        self.tok = np.empty(size, np.int32)  # pages never written cost nothing
        self.starts, self.counts = np.empty(rows + 1, np.int64), np.empty(max(rows, 1), np.int64)
        self.rows, self.tokens = rows, 0
        at, w = 0, 0
        for chunk in chunks:
            data, offsets, freqs = (readonly(np.asarray(a)) for a in chunk)
            at, w, text = _lay_out(data, offsets, freqs, self.tok, self.starts, self.counts, at, w)
            self.tokens += int(text)
        self.starts[w], self.n_words = at, int(w)
        self.tok[at:] = BOUND

    @classmethod
    def of(cls, words: Iterable[tuple[Iterable[int] | bytes | np.ndarray, int]]) -> LongWords:
        """``(ids, count)`` pairs (ids as bytes where they are bytes) laid out."""
        parts, counts, offsets = [], [], [0]
        for ids, count in words:
            part = np.frombuffer(ids, np.uint8) if isinstance(ids, bytes) else np.asarray(ids, np.int64)
            parts.append(part.astype(np.int32))
            counts.append(count)
            offsets.append(offsets[-1] + len(part))
        data = np.concatenate(parts) if parts else np.empty(0, np.int32)
        return cls([(data, np.array(offsets, np.int64), np.array(counts, np.int64))], len(counts), len(data))


class _State(Pairs):
    """The arrays a batch of merges works on, between batches."""

    def __init__(self, words: LongWords, vocab, vocab_size, rules):
        self.tok, self.starts, self.counts = words.tok, words.starts, words.counts
        self.n_words = words.n_words
        capacity = max(vocab_size, max(vocab) + 1)
        self.uses = np.zeros(6, np.int64)
        self.tokens = self.token_table(vocab, vocab_size)
        positions = int(self.starts[self.n_words]) - self.n_words  # a pair at each but a word's last
        room = positions + max(positions // 8, 1 << 16) + 16  # the first lists, then the first merges'
        self.pool = np.empty(room + positions // 2, np.int32)
        self.pairs, n = _first_pairs(self.tok, self.starts, self.counts, self.n_words, capacity, self.pool)
        n = int(n)
        self.index = np.full(1 << (INDEX_LOAD * max(n, len(self.pairs)) - 1).bit_length(), NO_PAIR, np.int32)
        index_pairs(self.pairs, n, self.index)
        used = int(self.pairs[:n, LENGTH].sum())
        limit = used + max(used // 8, int(self.pairs[:n, LENGTH].max(initial=0))) + 16
        if limit + used // 2 > len(self.pool):  # one pair holds most positions: its list's room again
            self.pool = grown(self.pool, limit + used // 2, used)
        self.uses[PAIRS_USED], self.uses[POOL_USED] = n, used
        self.uses[POOL_LIMIT], self.uses[POOL_WRITTEN] = limit, used
        self.heap = (np.empty(len(self.pairs), np.int64), np.empty(len(self.pairs), np.int32))
        self.uses[HEAP_SIZE] = heapify(self.pairs, n, *self.heap, *self.tokens, rules)
        self.gained = (np.empty(1024, np.int32), np.empty(1024, np.int32))


def memory_free() -> int:
    """The bytes this process may still take: under its Dask worker's memory limit, where it runs in
    a worker that has one, else what the machine has available."""
    import psutil

    try:
        from distributed import get_worker

        limit = get_worker().memory_manager.memory_limit
    except (ImportError, ValueError, AttributeError):  # not in a worker
        limit = None
    available = psutil.virtual_memory().available
    if limit:
        return min(available, max(0, limit - psutil.Process().memory_info().rss))
    return available


def check_memory(words: LongWords) -> None:
    """A one-line ``BpeDaskError`` where the loop over ``words`` would need more memory than this
    process may take (``memory_free``): before it starts, not when the machine runs out."""
    positions = int(words.starts[words.n_words])
    need, free = BYTES_PER_TOKEN * positions, memory_free()
    if need > free:
        longest = int(np.diff(words.starts[: words.n_words + 1]).max(initial=1)) - 1
        raise BpeDaskError(
            f"the merge loop needs about {format_bytes(need)} for its {words.n_words:,} words of "
            f"{positions:,} tokens (the longest {longest:,}), and this process has {format_bytes(free)} "
            'free: merge on a machine with more memory (merge_on="worker" takes the cluster\'s largest '
            "worker), or train on less text"
        )


def learn_merges_long(
    words: LongWords | Iterable[tuple[Iterable[int] | bytes | np.ndarray, int]],
    vocab: dict[int, bytes],
    vocab_size: int,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    max_words: int | None = None,
    forbid: tuple[str, ...] = (),
    stopped: Callable[[str, int], None] | None = None,
    work: list[tuple[int, int]] | None = None,
) -> Iterator[tuple[int, int, int]]:
    """Add merges to ``vocab`` until it holds ``vocab_size`` tokens or no pair is left, as
    ``merge_loop.learn_merges`` does, giving each as it is added: the two ids it joins and the tokens
    it saves. ``words`` are ``LongWords`` (merged in place) or ``(ids, count)`` pairs (ids as bytes
    where they are bytes); ``min_frequency``, ``max_token_length`` and ``stopped`` are
    ``train_merges``'s. ``work``, when given, gets for each merge the pool entries it read (stale
    ones included) and the occurrences it merged: the work it did, which never depends on how long
    the words are."""
    if not isinstance(words, LongWords):
        words = LongWords.of(words)
    check_memory(words)
    rules = token_rules(max_token_length, max_words, forbid)
    min_frequency = min(min_frequency, UNLIMITED)
    state = _State(words, vocab, vocab_size, rules)
    out = np.zeros((_BATCH, 5), np.int64)
    while len(vocab) < vocab_size:
        interrupts.check()
        first = len(vocab)
        want = min(vocab_size, first + _BATCH) - first
        words = (state.tok, state.starts, state.counts)
        arrays = (state.pairs, state.index, state.pool, state.heap, state.tokens, state.gained, state.uses)
        made, below, state.pool, state.tokens, state.gained = _merge_batch(
            words, state.n_words, *arrays, first, first + want, out, min_frequency, rules
        )
        state.give_back()
        for a, b, saved, read, merged in out[:made].tolist():
            vocab[len(vocab)] = vocab[a] + vocab[b]
            if work is not None:
                work.append((read, merged))
            yield a, b, saved
        if below:
            if stopped is not None:
                stopped("min_frequency", int(below))
            return
        if made < want:
            if state.uses[HEAP_SIZE] == 0:
                counted = state.pairs[: state.uses[PAIRS_USED], COUNT]
                if stopped is not None and (counted > 0).any():  # pairs are left, all ruled out
                    stopped("token_limits", 0)
                return
            state.room_for(2 * len(vocab) + 2)
