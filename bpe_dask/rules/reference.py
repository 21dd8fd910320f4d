"""The reference trainer and encoder: byte-level BPE exactly as CS336 states it, written to be read, not
run fast.

``train`` takes whole texts (or ``train_on_counts`` pre-token counts), a vocabulary size and special
tokens, and gives the vocabulary and merges, from the bytes or from a ``base`` vocabulary and its
merges (continued training); ``encode`` takes text, a vocabulary, merges and special tokens, and
gives token ids. Both apply merges with the one primitive of ``bpe`` (minbpe's ``merge``). Every
training step recounts every pair of every word, and every encoding step every pair of its
pre-token: slow, and plainly right. The tests hold every engine and every partitioning
of the real jobs to these; the trainer is checked itself against the CS336 reference merges, the
encoder against tiktoken. Like tiktoken's ``_educational.py``, they ship so anyone can read the rules.
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import regex

from bpe_dask.rules.bpe import allowed, merge_pair, pair_counts
from bpe_dask.rules.patterns import GPT2
from bpe_dask.rules.vocabulary import start

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]
__all__ = ["Merges", "Vocab", "encode", "pretokenize", "start", "train", "train_on_counts"]


def _special_split(special_tokens: list[str]) -> str:
    """The alternation of the special tokens, longest first: where several match at one place the
    longest wins (why: docs/exactness.md#special-tokens)."""
    return "|".join(regex.escape(token) for token in sorted(special_tokens, key=len, reverse=True))


def pretokenize(texts: list[str], special_tokens: list[str], pattern: str = GPT2.regex) -> dict[bytes, int]:
    """Pre-token counts (as UTF-8 bytes) over all texts: none crosses a text's end or a special token.

    >>> pretokenize(["the cat<|endoftext|>the hat"], ["<|endoftext|>"])
    {b'the': 2, b' cat': 1, b' hat': 1}
    """
    counts: Counter[bytes] = Counter()
    for text in texts:
        pieces = regex.split(_special_split(special_tokens), text) if special_tokens else [text]
        for piece in pieces:
            counts.update(match.encode("utf-8") for match in regex.findall(pattern, piece))
    return dict(counts)


def train_on_counts(
    word_counts: dict[bytes, int],
    vocab_size: int,
    special_tokens: list[str],
    *,
    base: tuple[Vocab, Merges] | None = None,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    max_words: int | None = None,
    forbid: tuple[str, ...] = (),
) -> tuple[Vocab, Merges]:
    """Ids 0-255 are the bytes, then the special tokens, then one per merge: the most frequent
    adjacent pair, ties to the lexicographically greater pair of byte strings (docs/exactness.md#ties).

    With a ``base`` (a vocabulary and its merges, as this gives them) training continues from it
    (docs/exactness.md#continued-training): every word is first split into the base's tokens by its
    merges, as ``encode`` splits a pre-token, and each merge learned then takes the next free id,
    after the special tokens the base lacks (``start``); the merges returned begin with the base's.

    Only pairs whose token is ``allowed`` (``max_token_length`` bytes, ``max_words`` words, none of
    ``forbid`` in it) are candidates; others stay in the words, never chosen. Training stops when no
    candidate is left, or when the best one occurs fewer than ``min_frequency`` times (0 and 1 change
    nothing).

    >>> vocab, merges = train_on_counts({b"low": 5, b"lower": 2, b"newest": 6, b"widest": 3}, 259, [])
    >>> merges  # "e st" and "s t" both occur 9 times: the greater pair, (b"s", b"t"), goes first
    [(b's', b't'), (b'e', b'st'), (b'o', b'w')]
    >>> vocab[258]
    b'ow'
    """
    vocab, merges = start(special_tokens, base)
    specials = {token.encode("utf-8") for token in special_tokens}
    ranks = _ranks(merges)
    words: Counter[tuple[bytes, ...]] = Counter()
    for word, count in word_counts.items():
        words[tuple(_merged(word, ranks))] += count
    while len(vocab) < vocab_size:
        counts: dict[tuple[bytes, bytes], int] = {}
        for word, count in words.items():
            pair_counts(word, counts, count)
        forbidden = [part.encode("utf-8") for part in forbid]
        candidates = [(a, b) for a, b in counts if allowed(a + b, max_token_length, max_words, forbidden)]
        if not candidates:
            break
        best = max(candidates, key=lambda pair: (counts[pair], pair))
        if counts[best] < min_frequency:
            break
        merges.append(best)
        # Never a token the vocabulary holds but a special one: its bytes alone would be that token,
        # not two parts (docs/exactness.md#continued-training).
        assert best[0] + best[1] in specials or best[0] + best[1] not in vocab.values(), best
        vocab[max(vocab) + 1] = best[0] + best[1]
        merged: Counter[tuple[bytes, ...]] = Counter()
        for word, count in words.items():
            merged[tuple(merge_pair(word, best, best[0] + best[1]))] += count
        words = merged
    return vocab, merges


def train(
    texts: list[str],
    vocab_size: int,
    special_tokens: list[str],
    pattern: str = GPT2.regex,
    *,
    base: tuple[Vocab, Merges] | None = None,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    max_words: int | None = None,
    forbid: tuple[str, ...] = (),
) -> tuple[Vocab, Merges]:
    """Byte-level BPE on whole texts, one per input file, from the bytes or from ``base``.

    >>> vocab, merges = train(["low lower lowest<|endoftext|>newest"], 260, ["<|endoftext|>"])
    >>> vocab[256], merges
    (b'<|endoftext|>', [(b'w', b'e'), (b'l', b'o'), (b'we', b's')])
    >>> texts = ["low lower lowest<|endoftext|>newest"]  # from the first three merges, one more:
    >>> train(texts, 261, ["<|endoftext|>"], base=(vocab, merges)) == train(texts, 261, ["<|endoftext|>"])
    True
    """
    counts = pretokenize(texts, special_tokens, pattern)
    limits = {"min_frequency": min_frequency, "max_token_length": max_token_length, "max_words": max_words,
              "forbid": forbid}  # fmt: skip
    return train_on_counts(counts, vocab_size, special_tokens, base=base, **limits)


def _ranks(merges: Merges) -> dict[tuple[bytes, bytes], int]:
    """Each merge's rank, its first where a pair is merged twice."""
    ranks: dict[tuple[bytes, bytes], int] = {}
    for rank, pair in enumerate(merges):
        ranks.setdefault(pair, rank)
    return ranks


def _merged(word: bytes, ranks: dict[tuple[bytes, bytes], int]) -> list[bytes]:
    """The tokens of one pre-token's bytes: the pair of lowest rank merged first, every occurrence at
    once, until no pair left is a merge (GPT-2's ``bpe``; docs/exactness.md#encoding)."""
    parts = [bytes([b]) for b in word]
    while len(parts) > 1:
        pair = min(pairwise(parts), key=lambda pair: ranks.get(pair, len(ranks)))
        if pair not in ranks:
            break
        parts = merge_pair(parts, pair, pair[0] + pair[1])
    return parts


def encode(
    text: str, vocab: Vocab, merges: Merges, special_tokens: list[str] = (), pattern: str = GPT2.regex
) -> list[int]:
    """The token ids of ``text``: the special tokens split out first, the rest pre-tokenized, and the
    bytes of each pre-token merged, the pair of lowest rank (the earliest merge) first, every
    occurrence at once, until no pair left is a merge (GPT-2's ``bpe``; docs/exactness.md#encoding).

    A token's id is the least id holding its bytes; a special token's, the least such id past the
    256 bytes (a special token "\\n" is not byte 10). ``text`` must be valid Unicode.

    >>> vocab, merges = train(["low lower lowest"], 258, [])
    >>> encode("slow<|endoftext|>", {**vocab, 258: b"<|endoftext|>"}, merges, ["<|endoftext|>"])
    [115, 257, 258]
    """
    ids_of: dict[bytes, int] = {}
    for i, token in sorted(vocab.items()):
        ids_of.setdefault(token, i)
    ranks = _ranks(merges)
    ids: list[int] = []
    pieces = regex.split(f"({_special_split(special_tokens)})", text) if special_tokens else [text]
    for n, piece in enumerate(pieces):
        if n % 2:  # the split's group: a special token
            data = piece.encode("utf-8")
            ids.append(min(i for i, token in vocab.items() if token == data and i >= 256))
            continue
        for pretoken in regex.findall(pattern, piece):
            ids.extend(ids_of[part] for part in _merged(pretoken.encode("utf-8"), ranks))
    return ids
