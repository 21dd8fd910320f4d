"""The merge loop for long words (``compiled.merge_positions``) against the Python loop of
``stages.merge``: the same merges, savings and reasons to stop on random word-count tables (long
words, runs, ties, ``max_token_length``, ``min_frequency``), and work that grows with the occurrences
merged, not with the words' lengths."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("numba")

from bpe_dask.compiled.merge_positions import LongWords, learn_merges_long
from bpe_dask.rules.vocabulary import start
from bpe_dask.stages.merge import _MergeState, train_merges

ALPHABET = [b"a", b"b", b"c", b" ", b"\x00", b"\xff"]


@st.composite
def words_of(draw, longest=12):
    """A word: short, or long (hundreds of tokens) made of runs (``aaaa``), alternations (``abab``)
    and random stretches."""
    symbols = draw(st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=4, unique=True))
    if draw(st.integers(0, 3)) > 0:
        return b"".join(draw(st.lists(st.sampled_from(symbols), min_size=1, max_size=longest)))
    rng = random.Random(draw(st.integers(0, 2**32)))
    pieces, size = [], rng.randint(100, 600)
    while sum(map(len, pieces)) < size:
        kind = rng.randrange(3)
        if kind == 0:
            pieces.append(rng.choice(symbols) * rng.randint(1, 9))
        elif kind == 1:
            pieces.append((rng.choice(symbols) + rng.choice(symbols)) * rng.randint(1, 6))
        else:
            pieces.append(b"".join(rng.choice(symbols) for _ in range(rng.randint(1, 12))))
    return b"".join(pieces)


tables = st.dictionaries(words_of(), st.sampled_from([1, 1, 1, 2, 3, 5, 100]), min_size=1, max_size=10)


def both(words, vocab_size, specials=(), **options):
    """What the Python loop and the long-word loop each make of ``words``: merges, savings and the
    reasons they stopped."""
    savings, stops = [], []
    _, merges = train_merges(
        list(words.items()), vocab_size, specials, engine="python", savings=savings,
        stopped=lambda why, n: stops.append((why, n)), **options,
    )  # fmt: skip
    python = (merges, savings, stops)
    vocab, _ = start(specials)
    merges, savings, stops = [], [], []
    learned = learn_merges_long(
        list(words.items()), vocab, vocab_size, stopped=lambda why, n: stops.append((why, n)), **options
    )
    for a, b, saved in learned:
        merges.append((vocab[a], vocab[b]))
        savings.append(saved)
    return python, (merges, savings, stops)


def examples(times: float):
    """``times`` the profile's examples (tests/conftest.py: 200 in "ci", 5,000 in "long")."""
    return settings(max_examples=max(5, int(settings.default.max_examples * times)))


@examples(1.5)
@given(
    tables,
    st.integers(0, 80),
    st.sampled_from([(), ("<s>",), ("ab", "abc")]),
    st.one_of(st.none(), st.integers(1, 6)),
    st.sampled_from([0, 0, 1, 2, 3, 6, 50]),
)
def test_merges_and_savings_as_the_python_loop(words, merges, specials, max_token_length, min_frequency):
    python, positions = both(
        words, 256 + len(specials) + merges, specials,
        max_token_length=max_token_length, min_frequency=min_frequency,
    )  # fmt: skip
    assert positions == python


@examples(0.25)
@given(st.lists(words_of(longest=40), min_size=1, max_size=30), st.integers(0, 300))
def test_documents_each_once(documents, merges):
    """SuperBPE's case: words nearly all distinct, each counted once (the count never looked up)."""
    words = dict.fromkeys(documents, 1)
    python, positions = both(words, 256 + merges)
    assert positions == python


def test_overlapping_runs_merge_left_to_right():
    python, positions = both({b"aaaaa": 1, b"abababa": 2, b"aaab": 3}, 262)
    assert positions == python
    assert positions[0][0] == (b"a", b"a")


def test_flat_arrays_as_pairs():
    words = [(b"hello hello", 2), (b"x", 5), (b"", 1), (b"yellow", 1), (b"low", 0), (b"below", 3)]
    given_pairs = list(learn_merges_long(words, {i: bytes([i]) for i in range(256)}, 270))
    flat = LongWords.of(words)
    assert list(learn_merges_long(flat, {i: bytes([i]) for i in range(256)}, 270)) == given_pairs


def _one_long_word(length, seed=0):
    """A word of ``length`` tokens whose pairs are all distinct, but for ``P Q`` planted five times
    and ``R S`` three; and a vocabulary that holds its tokens."""
    rng = random.Random(seed)
    base = 256
    tokens = list(range(base + 4, base + 4 + length))
    rng.shuffle(tokens)
    p, q, r, s = base, base + 1, base + 2, base + 3
    for k in range(5):
        at = (k + 1) * length // 7
        tokens[at : at + 2] = [p, q]
    for k in range(3):
        at = (2 * k + 1) * length // 9 + 3
        tokens[at : at + 2] = [r, s]
    vocab = {i: bytes([i]) for i in range(256)}
    vocab.update({t: b"<%d>" % t for t in range(base, base + 4 + length)})
    return tokens, vocab


@pytest.mark.parametrize("length", [1_000, 100_000])
def test_work_follows_the_occurrences_not_the_word_length(length):
    tokens, vocab = _one_long_word(length)
    work = []
    merges = list(learn_merges_long([(tokens, 1)], dict(vocab), len(vocab) + 12, work=work))
    assert [m[:2] for m in merges[:2]] == [(256, 257), (258, 259)]
    # Each entry read is an occurrence merged: the planted pairs', then pairs held once (ties, to the
    # greater bytes). The same work for a word of a thousand tokens as for one of 100,000, where the
    # words' loop (``merge_holders``) reads the whole word for each merge.
    assert work == [(5, 5), (3, 3)] + [(1, 1)] * 10


def test_a_long_word_merges_as_the_python_loop():
    """20,000 tokens of a vocabulary beyond the bytes, against the Python loop given the same ids."""
    tokens, vocab = _one_long_word(20_000, seed=3)
    vocab_size = len(vocab) + 30
    mine = dict(vocab)
    got = [(mine[a], mine[b], saved) for a, b, saved in learn_merges_long([(tokens, 2)], mine, vocab_size)]
    state = _MergeState([(tokens, 2)], dict(vocab))
    want = [
        (state.vocab[a], state.vocab[b], saved) for a, b, saved in state.learn_merges(vocab_size, 0, None)
    ]
    assert got == want


def test_counts_of_many_words_are_found_by_position():
    rng = np.random.default_rng(5)
    words = {
        bytes(rng.integers(97, 101, rng.integers(2, 30)).astype(np.uint8)): int(c) for c in range(1, 400)
    }
    python, positions = both(words, 256 + 60)
    assert positions == python


def test_no_pair_to_merge():
    first = {i: bytes([i]) for i in range(256)}
    assert list(learn_merges_long([], dict(first), 300)) == []
    assert list(learn_merges_long([(b"a", 3), (b"", 2)], dict(first), 300)) == []
    assert list(learn_merges_long([(b"ab", 3), (b"ab", 2)], dict(first), 300)) == [(97, 98, 5)]
