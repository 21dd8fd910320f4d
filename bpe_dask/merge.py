"""The merge loop: word counts in, vocabulary and merges out.

Takes ``(word bytes, count)`` pairs and a target vocabulary size; gives the byte-level BPE
vocabulary (ids 0-255 the bytes, then the special tokens, then one id per merge) and the
merges in order. Each step merges the most frequent adjacent pair, ties going to the
lexicographically greater ``(bytes, bytes)`` pair.

The loop is incremental: it keeps the count of every pair, an index from each pair to the
words that hold it, and a heap of candidate pairs whose stale entries are skipped when
popped. A merge touches only the words that contain the merged pair.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from itertools import pairwise

Pair = tuple[int, int]


class _Descending(bytes):
    """Bytes that sort in reverse, so a min-heap breaks count ties towards the greater pair."""

    __slots__ = ()

    def __lt__(self, other: bytes) -> bool:  # type: ignore[override]
        return bytes.__gt__(self, other)


def initial_vocab(special_tokens: Sequence[str]) -> dict[int, bytes]:
    vocab = {i: bytes([i]) for i in range(256)}
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    return vocab


def train_merges(
    word_counts: Iterable[tuple[bytes, int]],
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    progress: Callable[[int], None] | None = None,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Learn merges until the vocabulary holds ``vocab_size`` tokens or no pair is left.

    ``progress`` is called with the number of merges done after each merge.
    """
    vocab = initial_vocab(special_tokens)
    merges: list[tuple[bytes, bytes]] = []
    state = _MergeState(word_counts, vocab)
    while len(vocab) < vocab_size:
        pair = state.pop_best()
        if pair is None:
            break
        a, b = pair
        new_id = len(vocab)
        vocab[new_id] = vocab[a] + vocab[b]
        merges.append((vocab[a], vocab[b]))
        state.merge(pair, new_id)
        if progress is not None:
            progress(len(merges))
    return vocab, merges


class _MergeState:
    """Words as lists of token ids, with pair counts, a pair-to-words index and a lazy heap.

    The heap keeps stale entries until they surface; it is never compacted, since a run of
    tens of thousands of merges pushes only a few times as many entries as there are pairs.
    """

    def __init__(self, word_counts: Iterable[tuple[bytes, int]], vocab: dict[int, bytes]) -> None:
        self.vocab = vocab
        self.descending = {token_id: _Descending(token) for token_id, token in vocab.items()}
        self.words: list[list[int]] = []
        self.freqs: list[int] = []
        self.pair_counts: dict[Pair, int] = defaultdict(int)
        self.where: dict[Pair, set[int]] = defaultdict(set)
        for word, count in word_counts:
            if len(word) < 2:
                continue  # a single byte has no pair to merge
            index = len(self.words)
            self.words.append(list(word))
            self.freqs.append(count)
            for pair in pairwise(word):
                self.pair_counts[pair] += count
                self.where[pair].add(index)
        self.heap = [self._entry(pair, count) for pair, count in self.pair_counts.items()]
        heapq.heapify(self.heap)

    def _entry(self, pair: Pair, count: int) -> tuple[int, bytes, bytes, Pair]:
        return (-count, self.descending[pair[0]], self.descending[pair[1]], pair)

    def pop_best(self) -> Pair | None:
        """The most frequent pair (ties to the greater bytes), skipping stale heap entries."""
        heap, pair_counts = self.heap, self.pair_counts
        while heap:
            negative_count, _, _, pair = heapq.heappop(heap)
            if pair_counts.get(pair) == -negative_count:
                return pair
        return None

    def merge(self, pair: Pair, new_id: int) -> None:
        """Replace ``pair`` with ``new_id`` in every word that holds it, updating counts and index."""
        self.descending[new_id] = _Descending(self.vocab[new_id])
        a, b = pair
        delta: dict[Pair, int] = defaultdict(int)
        where = self.where
        for index in where.pop(pair):
            word, freq = self.words[index], self.freqs[index]
            merged = merge_word(word, a, b, new_id)
            old_pairs, new_pairs = list(pairwise(word)), list(pairwise(merged))
            for p in old_pairs:
                delta[p] -= freq
            for p in new_pairs:
                delta[p] += freq
            old_set, new_set = set(old_pairs), set(new_pairs)
            for p in old_set - new_set:
                if p != pair:
                    where[p].discard(index)
            for p in new_set - old_set:
                where[p].add(index)
            self.words[index] = merged
        self._apply(delta)

    def _apply(self, delta: dict[Pair, int]) -> None:
        pair_counts, heap = self.pair_counts, self.heap
        for pair, change in delta.items():
            if not change:
                continue
            count = pair_counts[pair] + change
            if count > 0:
                pair_counts[pair] = count
                heapq.heappush(heap, self._entry(pair, count))
            else:
                del pair_counts[pair]
                self.where.pop(pair, None)


def merge_word(word: list[int], a: int, b: int, new_id: int) -> list[int]:
    """``word`` with every non-overlapping ``a b`` (left to right) replaced by ``new_id``."""
    merged: list[int] = []
    i, n = 0, len(word)
    while i < n:
        if i + 1 < n and word[i] == a and word[i + 1] == b:
            merged.append(new_id)
            i += 2
        else:
            merged.append(word[i])
            i += 1
    return merged
