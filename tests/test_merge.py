"""The merge loop against the reference trainer on random word tables built to provoke ties and repeats."""

from __future__ import annotations

import random

import corpus
import pytest

from bpe_dask.rules.reference import train_on_counts
from bpe_dask.stages.merge import train_merges

try:
    import numba  # noqa: F401

    NUMBA = True
except ImportError:
    NUMBA = False

# Few symbols, some of them prefixes of each other's merges: many equal counts, so the
# tie-break decides; runs like b"aaaa" test overlapping pairs.
ALPHABET = [b"a", b"b", b"\x00", b"\xff"]


def random_words(rng: random.Random) -> dict[bytes, int]:
    symbols = rng.sample(ALPHABET, rng.randint(1, 4))
    words: dict[bytes, int] = {}
    for _ in range(rng.randint(1, 12)):
        word = b"".join(rng.choice(symbols) for _ in range(rng.randint(1, 9)))
        words[word] = words.get(word, 0) + rng.choice([1, 1, 2, 3, 5, 100])
    return words


ENGINES = ["python", pytest.param("numba", marks=pytest.mark.skipif(not NUMBA, reason="numba not installed"))]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("block", range(10))
def test_random_tables_merge_like_the_oracle(block, engine):
    for seed in range(block * 300, (block + 1) * 300):
        rng = random.Random(seed)
        words = random_words(rng)
        specials = rng.choice([[], ["<s>"], ["ab", "abc"]])
        vocab_size = 256 + len(specials) + rng.randint(0, 30)
        got = train_merges(list(words.items()), vocab_size, specials, engine=engine)
        assert got == train_on_counts(words, vocab_size, specials), (seed, words)


@pytest.mark.skipif(not NUMBA, reason="numba not installed")
def test_both_engines_agree_on_a_real_corpus(tmp_path):
    from bpe_dask import count_words

    path = tmp_path / "in.txt"
    path.write_text(
        corpus.words_corpus(41, 40_000, vocab_words=3000) + corpus.mixed_corpus(42, 30), encoding="utf-8"
    )
    table = count_words(path, ["<|endoftext|>"]).table()
    words = list(zip(table.column("token").to_pylist(), table.column("count").to_pylist(), strict=True))
    python = train_merges(words, 1500, ["<|endoftext|>"], engine="python")
    assert train_merges(words, 1500, ["<|endoftext|>"], engine="numba") == python
    assert len(python[1]) == 1500 - 257


def test_progress_reports_every_merge():
    seen: list[int] = []
    _, merges = train_merges([(b"abcabc", 3), (b"abd", 1)], 256 + 4, progress=seen.append)
    assert seen == list(range(1, len(merges) + 1))
