"""A plain reference byte-level BPE trainer (the simple CS336 algorithm).

Written for obviousness, not speed: pair counts are recomputed from scratch at
every merge step. Tests compare the real implementation against this.
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import regex

PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def pretokenize(texts: list[str], special_tokens: list[str]) -> dict[bytes, int]:
    """Count pre-tokens (as UTF-8 bytes) over all texts, never crossing special tokens."""
    counts: Counter[bytes] = Counter()
    specials = sorted(special_tokens, key=len, reverse=True)
    split_pat = "|".join(regex.escape(t) for t in specials)
    for text in texts:
        pieces = regex.split(split_pat, text) if specials else [text]
        for piece in pieces:
            for m in regex.finditer(PAT, piece):
                counts[m.group().encode("utf-8")] += 1
    return dict(counts)


def merge_word(word: tuple[bytes, ...], pair: tuple[bytes, bytes]) -> tuple[bytes, ...]:
    """Replace every non-overlapping occurrence of `pair` in `word`, left to right."""
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


def oracle_train_on_words(
    word_counts: dict[bytes, int], vocab_size: int, special_tokens: list[str]
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train BPE on pre-token counts: bytes 0-255, then specials, then one id per merge."""
    vocab = {i: bytes([i]) for i in range(256)}
    for tok in special_tokens:
        vocab[len(vocab)] = tok.encode("utf-8")
    words: dict[tuple[bytes, ...], int] = Counter()
    for w, c in word_counts.items():
        words[tuple(bytes([b]) for b in w)] += c
    merges: list[tuple[bytes, bytes]] = []
    while len(vocab) < vocab_size:
        pair_counts: Counter[tuple[bytes, bytes]] = Counter()
        for word, c in words.items():
            for a, b in pairwise(word):
                pair_counts[(a, b)] += c
        if not pair_counts:
            break
        best, _ = max(pair_counts.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append(best)
        vocab[len(vocab)] = best[0] + best[1]
        merged: dict[tuple[bytes, ...], int] = Counter()
        for word, c in words.items():
            merged[merge_word(word, best)] += c
        words = merged
    return vocab, merges


def oracle_train(
    texts: list[str], vocab_size: int, special_tokens: list[str]
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train byte-level BPE on whole texts (one per input file)."""
    return oracle_train_on_words(pretokenize(texts, special_tokens), vocab_size, special_tokens)
