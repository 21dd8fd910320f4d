"""Compare `bpe_dask.train_bpe` with the plain reference trainer (`bpe_dask.rules.reference`) on nasty text.

The reference itself is checked first against the CS336 handout example and the CS336
reference merges/vocab for corpus.en.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import corpus
import pytest

from bpe_dask.rules import reference

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]


# ---------------------------------------------------------------------------
# Cases: (files' texts, special tokens, vocab size)
# ---------------------------------------------------------------------------


def _edges_texts() -> list[str]:
    """Special tokens at file edges, adjacent to each other and to whitespace."""
    t = corpus.EOT
    body = corpus.words_corpus(11, 400, special=None)
    return [
        t + t + body + t,
        t + " " + body[:300] + "\n" + t + "\r\n" + t + t + t + body[300:700] + " " + t + " ",
        "\n" + t + body[::-1] + t + "\n",
        t,
        t * 5,
    ]


def _multi_file_texts() -> list[str]:
    """Several files, including empty/whitespace-only ones and words that would join across files."""
    return [
        corpus.mixed_corpus(21, 8),
        "abc",
        "def",  # must not merge with the previous file's "abc"
        "",
        "   ",
        "\r\n",
        "\n\n it's",
        "'s the end" + corpus.EOT,
        corpus.words_corpus(22, 500),
        "no trailing newline 1234",
    ]


CASES: dict[str, Callable[[], tuple[list[str], list[str], int]]] = {
    "mixed": lambda: ([corpus.mixed_corpus(1, 30)], [corpus.EOT], 256 + 1 + 120),
    "mixed_no_specials": lambda: ([corpus.mixed_corpus(2, 25, special=None)], [], 256 + 100),
    "words": lambda: ([corpus.words_corpus(3, 2500)], [corpus.EOT], 256 + 1 + 150),
    "words_no_specials": lambda: ([corpus.words_corpus(4, 2000, special=None)], [], 256 + 120),
    "overlapping_specials": lambda: (
        [corpus.overlapping_specials_corpus(5, 25)],
        corpus.OVERLAPPING_SPECIALS,
        256 + 2 + 80,
    ),
    "weird_specials": lambda: (
        [corpus.weird_specials_corpus(6, 25)],
        corpus.WEIRD_SPECIALS,
        256 + 2 + 80,
    ),
    "bordered_specials": lambda: (
        [corpus.bordered_specials_corpus(7, 40)],
        corpus.BORDERED_SPECIALS,
        256 + 2 + 80,
    ),
    "edges": lambda: (_edges_texts(), [corpus.EOT], 256 + 1 + 60),
    "multi_file": lambda: (_multi_file_texts(), [corpus.EOT], 256 + 1 + 100),
    "multi_file_no_specials": lambda: (_multi_file_texts(), [], 256 + 100),
}

CHUNK_SIZES = [None, 4096, 257, 64, 16]
CLIENT_CASES = ["mixed", "weird_specials", "multi_file"]
CLIENT_CHUNK_SIZES = [None, 64]


@functools.cache
def case_data(name: str) -> tuple[list[str], list[str], int]:
    """The texts, specials and vocab size of one case (built once)."""
    return CASES[name]()


@functools.cache
def expected(name: str) -> tuple[Vocab, Merges]:
    """The oracle's answer for one case (computed once per session)."""
    texts, specials, vocab_size = case_data(name)
    return reference.train(texts, vocab_size, specials)


def write_files(tmp_path: Path, texts: list[str]) -> list[Path]:
    """Write each text to its own file, byte-exact (no newline translation)."""
    paths = []
    for i, text in enumerate(texts):
        p = tmp_path / f"part-{i:03d}.txt"
        with open(p, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        paths.append(p)
    return paths


def assert_same(got: tuple[Vocab, Merges], want: tuple[Vocab, Merges]) -> None:
    """Assert equal merges and vocab, pointing at the first difference."""
    vocab, merges = got
    want_vocab, want_merges = want
    for i, (a, b) in enumerate(zip(merges, want_merges, strict=False)):
        assert a == b, (
            f"merge #{i} differs: got {a!r}, oracle {b!r} (previous: {want_merges[max(0, i - 3) : i]!r})"
        )
    assert len(merges) == len(want_merges), f"got {len(merges)} merges, oracle has {len(want_merges)}"
    diff = {
        k: (vocab.get(k), want_vocab.get(k))
        for k in vocab.keys() | want_vocab.keys()
        if vocab.get(k) != want_vocab.get(k)
    }
    assert not diff, f"vocab differs at {len(diff)} ids (got, oracle): {dict(sorted(diff.items())[:10])!r}"


def run_package(
    tmp_path: Path, texts: list[str], specials: list[str], vocab_size: int, **options: Any
) -> tuple[Vocab, Merges]:
    """Write the texts and train with `bpe_dask.train_bpe` (single path if one file, else a list)."""
    from bpe_dask import train_bpe

    paths = write_files(tmp_path, texts)
    options = {k: v for k, v in options.items() if v is not None}
    inputs: Any = str(paths[0]) if len(paths) == 1 else paths
    vocab, merges = train_bpe(inputs, vocab_size, list(specials), **options)
    return dict(vocab), [tuple(m) for m in merges]


# ---------------------------------------------------------------------------
# The oracle itself
# ---------------------------------------------------------------------------


def test_oracle_handout_example() -> None:
    """CS336 handout worked example (whitespace-split words, no regex, no specials)."""
    words = {b"low": 5, b"lower": 2, b"widest": 3, b"newest": 6}
    vocab, merges = reference.train_on_counts(words, 256 + 12, [])
    want = "s t, e st, o w, l ow, w est, n e, ne west, w i, wi d, wid est, low e, lowe r"
    assert merges == [tuple(p.encode() for p in m.split(" ")) for m in want.split(", ")]
    assert len(vocab) == 256 + 12
    assert vocab[256] == b"st" and vocab[267] == b"lower"


def test_oracle_tie_break_and_stop() -> None:
    """Ties go to the lexicographically greater pair; training stops when no pairs remain."""
    vocab, merges = reference.train_on_counts({b"ab": 1, b"cd": 1, b"x": 9}, 1000, ["<s>"])
    assert merges == [(b"c", b"d"), (b"a", b"b")]
    assert vocab[256] == b"<s>" and vocab[257] == b"cd" and len(vocab) == 259
    # Ties compare (bytes, bytes) tuples, not concatenations: (b"ab", b"a") > (b"a", b"z").
    _, merges = reference.train_on_counts({b"ab": 10, b"aba": 1, b"az": 1}, 256 + 3, [])
    assert merges == [(b"a", b"b"), (b"ab", b"a"), (b"a", b"z")]


def test_oracle_pretokenize_boundaries() -> None:
    """Pre-tokens never cross files or special tokens; the longest special wins."""
    counts = reference.pretokenize(["abc", "def<|a|><|a|><|a|>ghi 's'S"], ["<|a|>", "<|a|><|a|>"])
    assert counts == {b"abc": 1, b"def": 1, b"ghi": 1, b" '": 1, b"s": 1, b"'": 1, b"S": 1}


def test_oracle_cs336_reference(
    cs336_corpus_path: Path, cs336_reference_merges: Merges, cs336_reference_vocab: Vocab
) -> None:
    """The oracle reproduces the CS336 reference merges and vocab for corpus.en."""
    text = cs336_corpus_path.read_bytes().decode("utf-8")
    vocab, merges = reference.train([text], 500, ["<|endoftext|>"])
    assert merges == cs336_reference_merges
    assert set(vocab.values()) == set(cs336_reference_vocab.values())
    assert len(vocab) == 500


# ---------------------------------------------------------------------------
# Package vs oracle
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("chunk_size", CHUNK_SIZES, ids=lambda c: f"chunk{c}")
@pytest.mark.parametrize("case", list(CASES))
def test_package_matches_oracle(tmp_path: Path, case: str, chunk_size: int | None) -> None:
    """In-process training equals the oracle for every corpus and chunk size."""
    texts, specials, vocab_size = case_data(case)
    got = run_package(tmp_path, texts, specials, vocab_size, chunk_size=chunk_size)
    assert_same(got, expected(case))


@pytest.mark.parametrize("chunk_size", CLIENT_CHUNK_SIZES, ids=lambda c: f"chunk{c}")
@pytest.mark.parametrize("case", CLIENT_CASES)
def test_package_matches_oracle_distributed(
    tmp_path: Path, client: Any, case: str, chunk_size: int | None
) -> None:
    """Training on a real multi-process LocalCluster (client=...) equals the oracle."""
    texts, specials, vocab_size = case_data(case)
    got = run_package(tmp_path, texts, specials, vocab_size, chunk_size=chunk_size, client=client)
    assert_same(got, expected(case))


def test_package_workers_option(tmp_path: Path) -> None:
    """`workers=2` starts its own LocalCluster and still equals the oracle."""
    texts, specials, vocab_size = case_data("words")
    got = run_package(tmp_path, texts, specials, vocab_size, chunk_size=257, workers=2)
    assert_same(got, expected("words"))


def test_package_path_objects_and_bom(tmp_path: Path) -> None:
    """A list of Path objects works, and a leading U+FEFF is ordinary text (decoded as UTF-8)."""
    texts = ["\ufeffhello hello world" + corpus.EOT, "\ufeff\ufeff hello\r\n", "hello"]
    from bpe_dask import train_bpe

    paths = write_files(tmp_path, texts)
    vocab, merges = train_bpe(paths, 256 + 1 + 20, [corpus.EOT], chunk_size=16)
    assert_same((dict(vocab), [tuple(m) for m in merges]), reference.train(texts, 256 + 1 + 20, [corpus.EOT]))


RANDOM_CHUNK_SIZES = [1, 2, 5, 13, 16, 64]


@pytest.mark.parametrize("seed", range(20))
def test_package_matches_oracle_random(tmp_path: Path, seed: int) -> None:
    """Short random strings over a nasty alphabet, at tiny chunk sizes."""
    special = corpus.EOT if seed % 4 else None
    text = corpus.nasty_string(seed, 20 + 13 * seed, special=special)
    specials = [special] if special else []
    vocab_size = 256 + len(specials) + 5 + seed
    chunk_size = RANDOM_CHUNK_SIZES[seed % len(RANDOM_CHUNK_SIZES)]
    got = run_package(tmp_path, [text], specials, vocab_size, chunk_size=chunk_size)
    assert_same(got, reference.train([text], vocab_size, specials))


# ---------------------------------------------------------------------------
# Other split patterns: GPT-4's, o200k's and a regex of one's own
# ---------------------------------------------------------------------------

OWN_PATTERN = r"""'[a-z]+|\p{L}+|\p{N}{1,2}|[^\s\p{L}\p{N}]|\s"""  # no cut rule: cut at special tokens only
PATTERN_CHUNK_SIZES = [None, 257, 16]
# The nasty alphabet, with what GPT-4's and o200k's patterns tell apart besides: case changes inside
# words, upper-case contractions, marks, runs of digits, "/" after punctuation.
PATTERN_ALPHABET = [*corpus.NASTY_ALPHABET, "A", "E", "R", "'RE", "'ll", "x'rE", "123", "4567", "./",
                    "\u0301", "\u0903", "日本", "ǅ", "camelCase", ".\n", "a\r\n"]  # fmt: skip


@functools.cache
def expected_with_pattern(name: str, pattern: str) -> tuple[Vocab, Merges]:
    from bpe_dask.rules.pretokenize import split_pattern

    texts, specials, vocab_size = case_data(name)
    return reference.train(texts, vocab_size, specials, split_pattern(pattern).regex)


# The built-in patterns with both counting engines (auto picks the regex module for small inputs).
PATTERN_ENGINES = [
    ("gpt4", "auto"),
    ("gpt4", "numba"),
    ("o200k", "auto"),
    ("o200k", "numba"),
    (OWN_PATTERN, "auto"),
]


@pytest.mark.parametrize("chunk_size", PATTERN_CHUNK_SIZES, ids=lambda c: f"chunk{c}")
@pytest.mark.parametrize("case", ["mixed", "multi_file"])
@pytest.mark.parametrize(
    ("pattern", "engine"), PATTERN_ENGINES, ids=["gpt4", "gpt4-numba", "o200k", "o200k-numba", "own"]
)
def test_package_matches_oracle_with_other_patterns(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    pattern: str,
    engine: str,
    case: str,
    chunk_size: int | None,
) -> None:
    """Every partitioning equals the oracle run with the same pattern, with either engine; a regex
    of one's own is cut only at special tokens, and the job says so."""
    texts, specials, vocab_size = case_data(case)
    got = run_package(
        tmp_path, texts, specials, vocab_size, chunk_size=chunk_size, pattern=pattern, engine=engine
    )
    assert_same(got, expected_with_pattern(case, pattern))
    warned = "the split pattern is a regex of your own" in caplog.text
    assert warned == (pattern == OWN_PATTERN and chunk_size is not None)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("pattern", ["gpt4", "o200k"])
def test_package_matches_oracle_random_with_other_patterns(tmp_path: Path, pattern: str, seed: int) -> None:
    """Short random strings over a nasty alphabet, at tiny chunk sizes, counted by the compiled
    scanner for odd seeds."""
    import random

    from bpe_dask.rules.pretokenize import split_pattern

    rng = random.Random(seed)
    special = corpus.EOT if seed % 4 else None
    text = "".join(
        rng.choices(PATTERN_ALPHABET + [special] * 2 if special else PATTERN_ALPHABET, k=40 + 12 * seed)
    )
    specials = [special] if special else []
    vocab_size = 256 + len(specials) + 5 + seed
    chunk_size = RANDOM_CHUNK_SIZES[seed % len(RANDOM_CHUNK_SIZES)]
    engine = "numba" if seed % 2 else "auto"
    got = run_package(
        tmp_path, [text], specials, vocab_size, chunk_size=chunk_size, pattern=pattern, engine=engine
    )
    assert_same(got, reference.train([text], vocab_size, specials, split_pattern(pattern).regex))


@pytest.mark.parametrize("pattern", ["gpt4", "o200k"])
def test_package_matches_oracle_with_other_patterns_distributed(
    tmp_path: Path, client: Any, pattern: str
) -> None:
    """On a real LocalCluster: the settings, with their pattern, travel to the workers."""
    texts, specials, vocab_size = case_data("mixed")
    got = run_package(tmp_path, texts, specials, vocab_size, chunk_size=64, client=client, pattern=pattern)
    assert_same(got, expected_with_pattern("mixed", pattern))
