"""The pre-tokenization rules: every cut the rules allow leaves the pre-tokens unchanged.

The GPT-2 pattern is written out again here, not imported, so the checks do not trust the code
under test; ``test_the_pattern_is_gpt2s`` ties the two together.
"""

from __future__ import annotations

import collections
import functools
import itertools
import random
import re
import sys
import time
from itertools import product

import pytest
import regex

from bpe_dask.errors import BpeDaskError
from bpe_dask.rules.patterns import GPT4, O200K, SUPERBPE, SUPERBPE_LINES, split_pattern
from bpe_dask.rules.pretokenize import GPT2, WHITESPACE, Pretokenizer

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


def test_recut_looks_for_a_cut_only_once_least_characters_are_held():
    """``encode_iterable``'s batches: a stream in 200-character pieces is searched for a cut about once
    per ``least`` characters, not once a piece, and every piece but the last holds about ``least``
    (the last cut in what is held, when that first reaches ``least``)."""
    seen = []

    class Counting(Pretokenizer):
        def last_cut(self, text, lo, hi):
            seen.append(len(text))
            return super().last_cut(text, lo, hi)

    text = " ".join(random.Random(0).choices(["the", "cat", "sat", "on", "a", "mat."], k=40_000))
    pieces = list(Counting().recut([text[i : i + 200] for i in range(0, len(text), 200)], least=10_000))
    assert "".join(pieces) == text
    assert all(len(piece) >= 10_000 - 200 for piece in pieces[:-1])
    assert len(seen) <= len(text) // 10_000 + 1


def test_encoding_a_stream_takes_linear_time():
    """Whitespace-free text in 200-character pieces: four times the input at most 8x the time, where
    linear work takes 4x and quadratic 16x (a margin a busy machine's noise does not cross)."""
    from bpe_dask import Tokenizer

    vocab = {i: bytes([i]) for i in range(256)}
    tokenizer = Tokenizer(vocab, [], [EOT])
    texts = [whitespace_free_text(size) for size in (500_000, 2_000_000)]
    pieces = [[text[i : i + 200] for i in range(0, len(text), 200)] for text in texts]

    def seconds(stream: list[str]) -> float:
        started = time.process_time()
        for _ in tokenizer.encode_iterable(stream):
            pass
        return time.process_time() - started

    # Best of 5, the two sizes taken in turn, so that a slow moment of a shared machine is seen by both.
    rounds = [(seconds(pieces[0]), seconds(pieces[1])) for _ in range(5)]
    small, large = min(r[0] for r in rounds), min(r[1] for r in rounds)
    assert large < 8 * small, (small, large)


# --- GPT-4's and o200k's patterns, and patterns of one's own ---------------------------------------

NEW_PATTERNS = [GPT4, O200K]
# Every class the three patterns tell apart: upper, lower, title-case and modifier letters, marks
# (non-spacing and spacing), digits in runs, punctuation (the "/" o200k takes after others), the
# apostrophes, and whitespace of every kind. The contractions' letters come in both cases.
MIXED = [
    *CHARACTERS, "A", "E", "L", "R", "S", "T", "D", "M", "V", "ǅ", "ʰ", "ſ", "\u0903", "\u0308", "/",
    "日本語", "한국어", "'s", "'S", "'re", "'RE", "'ll", "'Ve", "'d", "12", "345", "6789", "x'rE",
    "camelCase", "ÉCOLE", "naïve", "e\u0301", "  ", "\r\n", "\n\n", " \n", "\t\t", "\u3000\u3000",
]  # fmt: skip


def _tiktoken_pattern(function) -> str:
    """The ``pat_str`` a tiktoken constructor uses, read from its source (calling it would download)."""
    import ast
    import inspect
    import textwrap

    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(function)))):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and key.value == "pat_str"
                    and isinstance(value, ast.Constant)
                ):
                    return value.value
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "pat_str":
            call = node.value  # "|".join([...])
            return call.func.value.value.join(ast.literal_eval(call.args[0]))
    raise AssertionError(f"no pat_str in {function.__name__}")


def test_the_built_in_patterns_are_tiktokens():
    openai_public = pytest.importorskip("tiktoken_ext.openai_public")
    assert GPT4.regex == _tiktoken_pattern(openai_public.cl100k_base)
    assert O200K.regex == _tiktoken_pattern(openai_public.o200k_base)


def cut_allowed(rules: Pretokenizer, x: str, y: str) -> bool:
    return rules.first_cut(x + y, 1, 2) == 1


@pytest.mark.parametrize("pattern", [*NEW_PATTERNS, SUPERBPE, SUPERBPE_LINES], ids=lambda p: p.name)
def test_every_allowed_pair_is_safe_in_any_context_for_the_new_patterns(pattern):
    rules, findall = Pretokenizer(pattern=pattern), pattern.compiled.findall
    characters = [c for c in MIXED if len(c) == 1]
    contexts = ["", " ", "'", "a", "A", "7", "777", ".", "/", "\n", "\r", "'r", "'R", "x'", "\u0301"]
    checked = 0
    for x, y in product(characters, repeat=2):
        if not cut_allowed(rules, x, y):
            continue
        for before, after in product(contexts, repeat=2):
            text = before + x + y + after
            p = len(before) + 1
            assert findall(text[:p]) + findall(text[p:]) == findall(text), (before, x, y, after)
            checked += 1
    assert checked > (100_000 if pattern in NEW_PATTERNS else 20_000)


@pytest.mark.parametrize("pattern", NEW_PATTERNS, ids=lambda p: p.name)
def test_the_new_rules_cut_before_spaces_and_never_where_their_pattern_joins(pattern):
    rules = Pretokenizer(pattern=pattern)
    cut = functools.partial(cut_allowed, rules)
    assert cut("a", " ") and cut("a", "\n") and cut("7", "\n") and cut(".", " ") and cut("\u0301", "\t")
    assert cut("a", "7") and cut("7", "a") and cut("7", ".") and cut(".", "7") and cut("a", ".")
    assert not cut("1", "2")  # digits go in threes from the start of a run
    assert not cut(".", "a") and not cut("'", "a") and not cut(" ", "a")  # one character starts a word
    assert not cut(".", "\n") and not cut(".", "\r")  # punctuation takes the line ends after it
    assert not cut(" ", " ") and not cut("a", "b") and not cut(".", ",")
    if pattern is O200K:
        assert not cut("a", "'")  # a contraction follows its word
        assert not cut("a", "B") and not cut("r", "E")  # "x'rE" is one pre-token
        assert not cut("a", "\u0301") and not cut("\u0301", "a") and not cut("\u0301", ".")
        assert not cut(".", "/") and not cut("\u0301", "\n")
    else:
        assert cut("a", "'") and cut("a", "\u0301") and not cut("\u0301", ".")


def mixed_text(seed: int, k: int, specials: list[str] = ()) -> str:
    rng = random.Random(seed)
    return "".join(rng.choices([*MIXED, *specials * 6], k=k))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("pattern", [GPT2, *NEW_PATTERNS, SUPERBPE, SUPERBPE_LINES], ids=lambda p: p.name)
def test_every_cut_in_random_mixed_text_is_safe(pattern, seed):
    specials = [[], [EOT], ["<|a|>", "x<|a|>", "<|a|>y"], ["s1", "' "], [EOT, EOT + EOT]][seed % 5]
    text = mixed_text(seed, 500, specials)
    rules = Pretokenizer(specials, pattern)
    cuts = all_cuts(rules, text)
    assert len(cuts) > 40
    whole = rules.pretokens(text)
    assert whole == [t for piece in rules.pieces(text) for t in regex.findall(pattern.regex, piece)]
    for p in cuts:
        assert rules.pretokens(text[:p]) + rules.pretokens(text[p:]) == whole, p
    assert rules.last_cut(text, 1, len(text)) == cuts[-1]


@pytest.mark.parametrize("pattern", [GPT2, *NEW_PATTERNS], ids=lambda p: p.name)
def test_chunks_tile_the_text_and_end_only_at_allowed_cuts(pattern):
    rules, chunk = Pretokenizer(pattern=pattern), re.compile(pattern.chunk)
    for seed in range(4):
        text = mixed_text(100 + seed, 500) + "a.\n  \r\n"[seed:]
        chunks = chunk.findall(text)
        assert "".join(chunks) == text and "" not in chunks
        ends = itertools.accumulate(map(len, chunks[:-1]))
        assert all(cut_allowed(rules, text[p - 1], text[p]) for p in ends)
        want = collections.Counter(pattern.compiled.findall(text))
        assert rules.count(text) == want


def test_superbpe_cuts_only_where_numbers_start_or_end():
    rules = Pretokenizer(pattern=SUPERBPE)
    cut = functools.partial(cut_allowed, rules)
    assert cut("a", "7") and cut("7", "a") and cut(" ", "7") and cut("7", "\n") and cut("½", ".")
    assert not cut("1", "2")  # digits go in threes from the end of a run
    assert not cut("a", " ") and not cut(" ", "a") and not cut(".", "\n") and not cut("\n", "a")
    assert SUPERBPE.compiled.findall("By the way, in 2024 I paid $1234567.\n") == [
        "By the way, in ", "2", "024", " I paid $", "1", "234", "567", ".\n"
    ]  # fmt: skip
    lines = Pretokenizer(pattern=SUPERBPE_LINES)
    assert lines.first_cut("a\nb", 1, 3) == 2 and not cut_allowed(lines, "\r", "\n")
    assert lines.first_cut_in_bytes("\x85\n".encode(), 0, 3) is None  # a cut needs a character after it
    assert SUPERBPE_LINES.compiled.findall("one two\r\n\nthree 45\n") == [
        "one two\r\n", "\n", "three ", "45", "\n"
    ]  # fmt: skip


@pytest.mark.parametrize("pattern", [*NEW_PATTERNS, SUPERBPE, SUPERBPE_LINES], ids=lambda p: p.name)
def test_hugging_face_splits_text_as_the_regex_module_does(pattern):
    """``tokenizer.json`` gives Oniguruma ``hf_regex``: it must find the same pre-tokens."""
    tokenizers = pytest.importorskip("tokenizers")
    split = tokenizers.pre_tokenizers.Split(
        tokenizers.Regex(pattern.hf_regex or pattern.regex), behavior="removed", invert=True
    )
    for seed in range(300):
        text = mixed_text(seed, 25)
        assert [piece for piece, _ in split.pre_tokenize_str(text)] == pattern.compiled.findall(text), text


def test_split_pattern_takes_names_aliases_and_regexes():
    assert split_pattern("gpt2") is GPT2 and split_pattern("gpt4") is GPT4 and split_pattern("o200k") is O200K
    assert split_pattern("cl100k_base") is GPT4 and split_pattern("o200k_base") is O200K
    assert split_pattern(GPT4.regex) is GPT4 and split_pattern(GPT4.hf_regex) is GPT4
    own = split_pattern(r"\p{L}+|\p{N}|\s+|[^\s\p{L}\p{N}]+")
    assert own.name == "custom" and own.cut_rule is None and own.chunk is None
    assert own.spec == own.regex and GPT4.spec == "gpt4"
    rules = Pretokenizer([EOT], own)
    text = f"one two{EOT}three four"
    assert [p for p in range(1, len(text)) if rules.first_cut(text, p, p + 1) == p] == [text.index(EOT)]
    for bad, message in [("gpt3", "unknown split pattern 'gpt3'"), ("(a", "not a valid regex"),
                         (r"\w*", "matches empty text"), ("", "a name or a regex")]:  # fmt: skip
        with pytest.raises(BpeDaskError, match=regex.escape(message)):
            split_pattern(bad)
    assert split_pattern("(?:gpt3)").regex == "(?:gpt3)"  # a plain word, as a regex


def test_the_job_options_and_count_settings_name_a_pattern_one_way():
    from bpe_dask.jobs.options import JobOptions
    from bpe_dask.stages.count import CountSettings

    assert JobOptions.of(pattern="cl100k_base").pattern == "gpt4"
    assert CountSettings(pattern=O200K.regex).pattern == "o200k"
    assert CountSettings(pattern="gpt4").key() == CountSettings(pattern="cl100k_base").key()
    assert CountSettings(pattern="gpt4").key() != CountSettings(pattern="o200k").key()
    assert CountSettings(pattern=r"\S+|\s+").recorded()["pattern"] == r"\S+|\s+"
    with pytest.raises(BpeDaskError, match="numba engine works with the built-in patterns only"):
        CountSettings(pattern=r"\S+|\s+", engine="numba")
    assert CountSettings(pattern="cl100k_base", engine="numba").pattern == "gpt4"
    with pytest.raises(BpeDaskError, match="not a valid regex"):
        JobOptions.of(pattern="[")


# --- the compiled scanners (bpe_dask.compiled) against the regex module ---------------------------

numba = pytest.importorskip("numba")
np = pytest.importorskip("numpy")
compiled = pytest.importorskip("bpe_dask.compiled")
from bpe_dask.compiled.scan import GPT2 as GPT2_NUMBER  # noqa: E402
from bpe_dask.compiled.scan import GPT4 as GPT4_NUMBER  # noqa: E402
from bpe_dask.compiled.scan import O200K as O200K_NUMBER  # noqa: E402
from bpe_dask.compiled.scan import SUPERBPE_LINES as LINES_NUMBER  # noqa: E402
from bpe_dask.compiled.scan import own_cache_file  # noqa: E402
from bpe_dask.compiled.scan_gpt2 import next_token_gpt2  # noqa: E402
from bpe_dask.compiled.scan_gpt4 import next_token_gpt4, next_token_o200k  # noqa: E402
from bpe_dask.compiled.scan_superbpe import next_token_superbpe  # noqa: E402


@functools.cache
def _pretoken_ends_of(pattern: int):
    """``pretoken_ends`` compiled for one pattern with its scanner only, as the package's loops are
    (one compiled for every pattern inlines all three scanners: several times the compile time)."""

    def ends_of(data, lo, hi, table):
        ends = np.empty(hi - lo, np.int64)
        count, i = 0, lo
        while i < hi:
            i = (
                next_token_gpt2(data, i, hi, table)
                if pattern == GPT2_NUMBER
                else next_token_gpt4(data, i, hi, table)
                if pattern == GPT4_NUMBER
                else next_token_o200k(data, i, hi, table)
                if pattern == O200K_NUMBER
                else next_token_superbpe(data, i, lo, hi, table, pattern == LINES_NUMBER)
            )
            ends[count] = i
            count += 1
        return ends[:count]

    return numba.njit(cache=True)(own_cache_file(ends_of, pattern))


def pretoken_ends(pattern: int, data, lo: int, hi: int, table) -> np.ndarray:
    """Where each pre-token of ``data[lo:hi]`` ends, by the compiled scanner of pattern number
    ``pattern`` (the tests hold the scanners to the ``regex`` module)."""
    return _pretoken_ends_of(pattern)(data, lo, hi, table)


def scanned(text: str) -> list[str]:
    data, gpt2 = text.encode("utf-8"), compiled.pattern_number("gpt2")
    ends = pretoken_ends(gpt2, np.frombuffer(data, np.uint8), 0, len(data), compiled.table_of(gpt2)).tolist()
    return [data[a:b].decode("utf-8") for a, b in zip([0, *ends[:-1]], ends, strict=False)]


def test_the_class_table_agrees_with_regex_on_every_code_point():
    """One character at a time, on every code point where the class changes, its neighbours, and
    a sample of the rest (the table is built from runs, so a mistake would show at their edges)."""
    from bpe_dask.compiled import code_points

    LETTER, NUMBER, OTHER, SPACE = (code_points.LETTER, code_points.NUMBER, code_points.OTHER,
                                    code_points.SPACE)  # fmt: skip
    table = code_points.class_table()
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

    rng = random.Random(seed)
    words = [
        *one_of_each_class(),
        *("".join(rng.choices("abcdefghij", k=rng.randint(1, 12))) for _ in range(3000)),
    ]
    rules = Pretokenizer([EOT])
    counts = compiled.Counter("gpt2", capacity=16)  # tiny, so the arena and the table grow many times
    want: Counter[bytes] = Counter()
    for _ in range(20):
        text = "".join(rng.choices([*words, " ", EOT, "\n"], k=2000))
        data = text.encode()
        counts.add(data, rules.piece_bounds(data))
        want.update(t.encode() for t in pretokens(text, [EOT]))
    data, offsets, counts = counts.arrays()
    got = {bytes(data[a:b]): c for a, b, c in zip(offsets[:-1], offsets[1:], counts.tolist(), strict=True)}
    assert got == dict(want)


def test_the_compiled_counter_keeps_apart_words_alike_in_their_first_eight_bytes_and_length():
    """A table record holds a word's first eight bytes (zeros after a shorter word) and its length:
    runs of NUL bytes all have the key 0, and long words alike in both differ only in the arena."""
    from collections import Counter

    rng = random.Random(0)
    text = " ".join(
        [
            *("\x00" * rng.randint(1, 20) for _ in range(300)),  # one key (0), many lengths
            *("abcdefgh" + "".join(rng.choices("xyz", k=4)) for _ in range(300)),  # one key, one length
            *(" abcdefg" + "".join(rng.choices("xyz", k=rng.randint(0, 3))) for _ in range(300)),
        ]
    )
    data = text.encode()
    counts = compiled.Counter("gpt2", capacity=16)
    counts.add(data, Pretokenizer().piece_bounds(data))
    data, offsets, counts = counts.arrays()
    got = {bytes(data[a:b]): c for a, b, c in zip(offsets[:-1], offsets[1:], counts.tolist(), strict=True)}
    assert got == dict(Counter(t.encode() for t in pretokens(text, [])))


def test_the_word_table_keeps_apart_words_of_one_hash():
    """Two words of one hash, first eight bytes and length are told apart by their bytes in the arena
    (the table the counter counts in, and the encoder caches ids in)."""
    import numpy as np

    from bpe_dask.compiled.count import COUNT
    from bpe_dask.compiled.word_table import AT, KEY, META, find, table

    records, arena = table(8), np.zeros(64, np.uint8)
    data = np.frombuffer(b"abcdefgh-one abcdefgh-two abcdefgh-one", np.uint8)
    h, key = np.uint64(12345 << 32), np.int64(int.from_bytes(b"abcdefgh", "little"))
    seen = []
    for i in (0, 13, 26):
        r, meta = find(data, i, i + 12, h, key, arena, records)
        if records[r + META] == 0:
            arena[i : i + 12] = data[i : i + 12]
            records[r + KEY], records[r + META], records[r + COUNT], records[r + AT] = key, meta, 0, i
        records[r + COUNT] += 1
        seen.append(r)
    assert seen[0] != seen[1] and seen[2] == seen[0]
    assert records[seen[0] + COUNT] == 2 and records[seen[1] + COUNT] == 1
