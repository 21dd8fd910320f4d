"""The pre-tokenization rules: every cut the rules allow leaves the pre-tokens unchanged.

The GPT-2 pattern is written out again here, not imported, so the checks do not trust the code
under test; ``test_the_pattern_is_gpt2s`` ties the two together.
"""

from __future__ import annotations

import functools
import random
import re
import sys
import time
from itertools import product

import pytest
import regex

from bpe_dask.pretokenize import GPT2, WHITESPACE, Pretokenizer

PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = "<|endoftext|>"
# One or more characters of every class the pattern tells apart, and the contractions' parts.
CHARACTERS = [
    "a", "Z", "s", "t", "l", "v", "e", "r", "d", "m", "é", "ß", "я", "日", "\u0301",  # letters, a mark
    "7", "٣", "²", "Ⅻ",  # digits and other numbers
    "'", "’", ".", ",", "-", "<", "|", ">", "\x00", "\x1c", "😀", "\ufffd",  # the rest
    " ", "\n", "\r", "\t", "\x0b", "\x85", "\u00a0", "\u2028", "\u3000",  # whitespace
]  # fmt: skip


def pretokens(text: str, specials: list[str] = ()) -> list[str]:
    pieces = (
        regex.split("|".join(map(regex.escape, sorted(specials, key=len, reverse=True))), text)
        if specials
        else [text]
    )
    return [m for piece in pieces for m in regex.findall(PATTERN, piece)]


def all_cuts(pretokenizer: Pretokenizer, text: str) -> list[int]:
    """Every position the rules judge a safe cut, asked one at a time."""
    return [p for p in range(1, len(text)) if pretokenizer.first_cut(text, p, p + 1) == p]


def test_the_pattern_is_gpt2s():
    assert GPT2.regex == PATTERN


def test_every_cut_between_two_characters_is_safe_in_any_context():
    """All pairs of characters, each between several left and right neighbours."""
    rules = Pretokenizer()
    contexts = ["", " ", "'", "a", "7", ".", "  ", "\n", "ll", "'r"]
    checked = 0
    for x, y in product(CHARACTERS, repeat=2):
        if rules.first_cut(x + y, 1, 2) != 1:
            continue
        for before, after in product(contexts, repeat=2):
            text = before + x + y + after
            p = len(before) + 1
            assert pretokens(text[:p]) + pretokens(text[p:]) == pretokens(text), (before, x, y, after)
            checked += 1
    assert checked > 30_000


def test_the_rule_cuts_where_classes_change_and_before_whitespace():
    rules = Pretokenizer()
    cut = lambda x, y: rules.first_cut(x + y, 1, 2) == 1  # noqa: E731
    assert cut("a", " ") and cut(".", "\n") and cut("7", "\u3000")  # before whitespace
    assert cut("a", "7") and cut("a", ".") and cut("7", "a") and cut("7", ".") and cut(".", "7")
    assert cut(".", "a") and cut("日", "，") and cut("'", "7")
    assert not cut("'", "s") and not cut("'", "x")  # a contraction may start here
    assert not cut(" ", "a") and not cut(" ", " ") and not cut("a", "b") and not cut("1", "2")


@pytest.mark.parametrize("seed", range(10))
def test_every_cut_in_random_text_is_safe(seed):
    rng = random.Random(seed)
    specials = [[], [EOT], [EOT, EOT + EOT], ["<|a|>", "x<|a|>", "<|a|>y"], ["s1", "' "]][seed % 5]
    pieces = [*CHARACTERS, "'s", "'ll", "don't", "  ", "\r\n", *specials * 4]
    text = "".join(rng.choices(pieces, k=400))
    rules = Pretokenizer(specials)
    cuts = all_cuts(rules, text)
    assert len(cuts) > 50
    whole = pretokens(text, specials)
    for p in cuts:
        assert pretokens(text[:p], specials) + pretokens(text[p:], specials) == whole, p
    assert rules.last_cut(text, 1, len(text)) == cuts[-1]


@pytest.mark.parametrize("seed", range(6))
def test_cuts_in_bytes_are_safe_and_fall_between_characters(seed):
    rng = random.Random(seed)
    text = "".join(rng.choices([*CHARACTERS, EOT, "日本語", "👩‍👩‍👧"], k=300))
    data = text.encode()
    rules = Pretokenizer([EOT])
    whole = pretokens(text, [EOT])
    for lo in range(0, len(data), 7):
        window_start = max(0, lo - 60)
        window = data[window_start : lo + 120]
        cut = rules.first_cut_in_bytes(window, lo - window_start, len(window) - 60)
        if cut is None:
            continue
        p = window_start + cut
        left, right = data[:p].decode(), data[p:].decode()  # raises if p splits a character
        assert pretokens(left, [EOT]) + pretokens(right, [EOT]) == whole


def test_the_chunking_pattern_and_the_gpt2_pattern_agree_on_whitespace_everywhere():
    chunk_space, gpt2_space = re.compile(WHITESPACE), regex.compile(r"\s")
    disagree = [
        hex(c)
        for c in range(sys.maxunicode + 1)
        if bool(chunk_space.match(chr(c))) != bool(gpt2_space.match(chr(c)))
    ]
    assert disagree == []


@pytest.mark.parametrize("seed", range(6))
def test_recut_gives_the_text_back_in_safely_cut_pieces(seed):
    rng = random.Random(seed)
    text = "".join(rng.choices([*CHARACTERS, EOT, EOT + EOT, "'s"], k=2000))
    sizes = [1, 2, 3, 13, 50, 400]
    chunks, i = [], 0
    while i < len(text):
        n = rng.choice(sizes)
        chunks.append(text[i : i + n])
        i += n
    rules = Pretokenizer([EOT, EOT + EOT])
    pieces = list(rules.recut(chunks))
    assert "".join(pieces) == text
    assert len(pieces) > 20
    assert [t for piece in pieces for t in pretokens(piece, [EOT, EOT + EOT])] == pretokens(
        text, [EOT, EOT + EOT]
    )


def test_recut_is_lazy():
    def lines():
        yield "the first line\n"
        yield "the second line\n"
        raise AssertionError("read past what the first piece needs")

    assert next(Pretokenizer().recut(lines())) == "the first line"


def whitespace_free_text(size: int) -> str:
    rng = random.Random(size)
    return "".join(
        rng.choice(['{"k":', '"v1",', "[1,2]", "}", "日本語，", "abc", "x9"]) for _ in range(size // 4)
    )[:size]


def test_recut_searches_each_character_once():
    """The work grows linearly: the text the cut search looks at is a small multiple of the input."""
    seen = []

    class Counting(Pretokenizer):
        def last_cut(self, text, lo, hi):
            seen.append(len(text))
            return super().last_cut(text, lo, hi)

    for size in (100_000, 200_000):
        text = "a" * size  # no cut anywhere: the worst case
        pieces = [text[i : i + 200] for i in range(0, size, 200)]
        seen.clear()
        assert "".join(Counting().recut(pieces)) == text
        assert sum(seen) < 3 * size


def test_encoding_a_stream_takes_linear_time():
    """Whitespace-free text in 200-character pieces: doubling the input at most ~2.5x the time."""
    from bpe_dask import Tokenizer

    vocab = {i: bytes([i]) for i in range(256)}
    tokenizer = Tokenizer(vocab, [], [EOT])

    def seconds(text: str) -> float:
        pieces = [text[i : i + 200] for i in range(0, len(text), 200)]
        best = float("inf")
        for _ in range(3):
            started = time.process_time()
            for _ in tokenizer.encode_iterable(pieces):
                pass
            best = min(best, time.process_time() - started)
        return best

    small, large = seconds(whitespace_free_text(500_000)), seconds(whitespace_free_text(1_000_000))
    assert large < 2.5 * small, (small, large)


# --- the compiled scanner (pretokenize_numba) against the regex module ----------------------------

numba = pytest.importorskip("numba")


def scanned(text: str) -> list[str]:
    import numpy as np

    from bpe_dask.pretokenize_numba import class_table, pretoken_ends

    data = text.encode("utf-8")
    ends = pretoken_ends(np.frombuffer(data, np.uint8), 0, len(data), class_table()).tolist()
    return [data[a:b].decode("utf-8") for a, b in zip([0, *ends[:-1]], ends, strict=False)]


def test_the_class_table_agrees_with_regex_on_every_code_point():
    """One character at a time, on every code point where the class changes, its neighbours, and
    a sample of the rest (the table is built from runs, so a mistake would show at their edges)."""
    import numpy as np

    from bpe_dask.pretokenize_numba import LETTER, NUMBER, OTHER, SPACE, class_table

    table = class_table()
    edges = np.flatnonzero(np.diff(table)) + 1
    sample = {
        *edges.tolist(),
        *(edges - 1).tolist(),
        *random.Random(0).sample(range(sys.maxunicode + 1), 100_000),
    }
    assert len(edges) > 1000
    for code in sorted(sample):
        char = chr(code)
        want = (
            LETTER if regex.match(r"\p{L}", char) else NUMBER if regex.match(r"\p{N}", char)
            else SPACE if regex.match(r"\s", char) else OTHER
        )  # fmt: skip
        assert table[code] == want, hex(code)


@functools.cache
def one_of_each_class() -> list[str]:
    """A few code points of every Unicode general category, and every whitespace character."""
    import unicodedata

    by_category: dict[str, list[str]] = {}
    for code in range(sys.maxunicode + 1):
        if 0xD800 <= code <= 0xDFFF:
            continue
        by_category.setdefault(unicodedata.category(chr(code)), []).append(chr(code))
    rng = random.Random(1)
    picked = [c for chars in by_category.values() for c in rng.sample(chars, min(4, len(chars)))]
    spaces = [
        chr(c) for c in range(sys.maxunicode + 1) if regex.match(r"\s", chr(c)) and not 0xD800 <= c <= 0xDFFF
    ]
    return [*picked, *spaces, "'", "s", "d", "m", "t", "l", "v", "e", "r", " "]


@pytest.mark.parametrize("seed", range(4))
def test_the_scanner_splits_like_the_regex_module(seed):
    rng = random.Random(seed)
    alphabet = [
        *one_of_each_class(),
        "'s",
        "'ll",
        "'ve",
        "'re",
        "'d",
        "'m",
        "'t",
        "  ",
        "\r\n",
        " 's",
        "日本語",
    ]
    for _ in range(3000):
        text = "".join(rng.choices(alphabet, k=rng.randint(0, 40)))
        assert scanned(text) == regex.findall(PATTERN, text), repr(text)


def test_the_scanner_on_every_pair_of_characters():
    """Every pair of the characters the cut tests use, between assorted neighbours."""
    contexts = ["", " ", "'", "a", "7", ".", "  ", "\n", "ll", "'r", "\u3000"]
    for x, y in product([*CHARACTERS, "s", "'s"], repeat=2):
        for before in contexts:
            for after in contexts:
                text = before + x + y + after
                assert scanned(text) == regex.findall(PATTERN, text), repr(text)


@pytest.mark.parametrize("seed", range(4))
def test_compiled_counts_equal_regex_counts_across_blocks_and_growth(seed):
    from collections import Counter

    from bpe_dask.pretokenize_numba import CompiledCounts

    rng = random.Random(seed)
    words = [
        *one_of_each_class(),
        *("".join(rng.choices("abcdefghij", k=rng.randint(1, 12))) for _ in range(3000)),
    ]
    rules = Pretokenizer([EOT])
    counts = CompiledCounts(capacity=16)  # tiny, so the arena and the table grow many times
    want: Counter[bytes] = Counter()
    for _ in range(20):
        text = "".join(rng.choices([*words, " ", EOT, "\n"], k=2000))
        data = text.encode()
        counts.add(data, rules.piece_bounds(data))
        want.update(t.encode() for t in pretokens(text, [EOT]))
    table = counts.table()
    got = dict(zip(table.column("token").to_pylist(), table.column("count").to_pylist(), strict=True))
    assert got == dict(want)
