"""The reference trainer: byte-level BPE exactly as CS336 states it, written to be read, not run fast.

Takes whole texts (or pre-token counts), a vocabulary size and special tokens; gives the vocabulary
and merges. Every merge step recounts every pair of every word: slow, and plainly right. The tests
hold every engine and every partitioning of the real job to this; it is checked itself against the
CS336 reference merges. Like tiktoken's ``_educational.py``, it ships so anyone can read the rules.
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import regex

from bpe_dask.rules.pretokenize import GPT2

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]


def pretokenize(texts: list[str], special_tokens: list[str], pattern: str = GPT2.regex) -> dict[bytes, int]:
    """Pre-token counts (as UTF-8 bytes) over all texts: none crosses a text's end or a special token."""
    counts: Counter[bytes] = Counter()
    longest_first = sorted(special_tokens, key=len, reverse=True)
    for text in texts:
        pieces = regex.split("|".join(map(regex.escape, longest_first)), text) if special_tokens else [text]
        for piece in pieces:
            counts.update(match.encode("utf-8") for match in regex.findall(pattern, piece))
    return dict(counts)


def merge_word(word: tuple[bytes, ...], pair: tuple[bytes, bytes]) -> tuple[bytes, ...]:
    """``word`` with every occurrence of ``pair`` joined, left to right, without overlaps."""
    out: list[bytes] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def train_on_counts(
    word_counts: dict[bytes, int],
    vocab_size: int,
    special_tokens: list[str],
    *,
    min_frequency: int = 0,
    max_token_length: int | None = None,
) -> tuple[Vocab, Merges]:
    """Ids 0-255 are the bytes, then the special tokens, then one per merge: the most frequent
    adjacent pair, ties to the lexicographically greater pair of byte strings.

    With ``max_token_length`` (bytes), only pairs that make a token that long at most are candidates;
    longer ones stay in the words, never chosen. Training stops when no candidate is left, or when
    the best one occurs fewer than ``min_frequency`` times (0 and 1 change nothing)."""
    vocab = {i: bytes([i]) for i in range(256)}
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    words: Counter[tuple[bytes, ...]] = Counter()
    for word, count in word_counts.items():
        words[tuple(bytes([b]) for b in word)] += count
    merges: Merges = []
    while len(vocab) < vocab_size:
        pair_counts: Counter[tuple[bytes, bytes]] = Counter()
        for word, count in words.items():
            for pair in pairwise(word):
                pair_counts[pair] += count
        candidates = [
            (a, b) for a, b in pair_counts if max_token_length is None or len(a) + len(b) <= max_token_length
        ]
        if not candidates:
            break
        best = max(candidates, key=lambda pair: (pair_counts[pair], pair))
        if pair_counts[best] < min_frequency:
            break
        merges.append(best)
        vocab[len(vocab)] = best[0] + best[1]
        merged: Counter[tuple[bytes, ...]] = Counter()
        for word, count in words.items():
            merged[merge_word(word, best)] += count
        words = merged
    return vocab, merges


def train(
    texts: list[str],
    vocab_size: int,
    special_tokens: list[str],
    pattern: str = GPT2.regex,
    *,
    min_frequency: int = 0,
    max_token_length: int | None = None,
) -> tuple[Vocab, Merges]:
    """Byte-level BPE on whole texts, one per input file."""
    counts = pretokenize(texts, special_tokens, pattern)
    return train_on_counts(
        counts, vocab_size, special_tokens, min_frequency=min_frequency, max_token_length=max_token_length
    )
