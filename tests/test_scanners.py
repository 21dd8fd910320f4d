"""The compiled GPT-4, o200k and SuperBPE scanners (``bpe_dask.compiled``) against the ``regex`` module.

Pre-tokens, not only counts: each scanner's boundaries must be exactly where ``regex.findall``
with the pattern puts them, on every pair of characters of every class the patterns tell apart
(between assorted neighbours), on random text, and at the ends of pieces; then the counting path
and the encoder against the pure-Python engine.
"""

from __future__ import annotations

import functools
import random
import sys
from itertools import product

import pytest
import regex
from test_pretokenize import one_of_each_class, pretoken_ends

from bpe_dask.rules.patterns import GPT4, O200K, SUPERBPE, SUPERBPE_LINES

np = pytest.importorskip("numpy")
pytest.importorskip("numba")

EOT = "<|endoftext|>"
# One or a few characters of every class either pattern tells apart.
CHARACTERS = [
    "a", "z", "s", "t", "l", "v", "e", "r", "d", "m", "ß", "é", "я", "𝐚",  # lower case (Ll)
    "A", "Z", "S", "T", "L", "V", "E", "R", "D", "M", "É", "Я", "𝐀", "\u212a",  # upper case (Lu)
    "ſ", "ǅ", "ʰ", "々", "日", "א", "𠀀",  # the long s (an s to (?i)), title case, Lm, Lo
    "\u0301", "\u0903", "\u20dd",  # marks: Mn, Mc, Me
    "0", "7", "٣", "४", "𝟘", "½", "²", "Ⅻ",  # digits of several scripts, other numbers
    "'", "’", ".", ",", "/", "-", "!", "<", "\x00", "😀", "€", "\u200b", "\ufeff", "\ue000",  # others
    "\x1c", "\x1d", "\x1e", "\x1f",  # separators that are not \s
    " ", "\t", "\n", "\r", "\x0b", "\x0c", "\x85", "\xa0", "\u1680", "\u2000", "\u2028", "\u2029",
    "\u202f", "\u3000",  # whitespace
]  # fmt: skip
# Longer pieces for random text: contractions in every case, runs, case changes, line ends.
PIECES = [
    "'s", "'S", "'t", "'T", "'d", "'D", "'m", "'M", "'ll", "'LL", "'lL", "'ve", "'VE", "'re", "'Re", "'ſ",
    "'l", "'v", "'r", "x'", "don't", "WON'T", "He'LL", "camelCase", "HTTPServer", "ǅungla", "日本語",
    "Ще", "e\u0301", "E\u0301\u0301a", "\u0301\u0301", "12345", "٣٣٣٣", "  ", "   ", "\r\n", " \n", "\n\n",
    "\n ", " \r\n ", ".\n", "./", ".\n/", "...", "?!\r\n", "\t\t", "\u3000\u3000", "👩‍👩‍👧", " 's",
    "1234567", "99½", "2024", "١٢٣٤٥", "0000000000",  # runs of numbers in groups of three from the right
]  # fmt: skip
CONTEXTS = ["", " ", "'", "a", "A", "7", ".", "\n", "  "]


def scanner(name: str):
    from bpe_dask.compiled import pattern_number, table_of

    pattern = pattern_number(name)
    table = table_of(pattern)

    def scanned(text: str, before: bytes = b"", after: bytes = b"") -> list[str]:
        """The scanner's pre-tokens of ``text``, scanned as the piece between ``before`` and
        ``after`` in one buffer (a scanner must not look past its piece)."""
        data = before + text.encode("utf-8") + after
        lo, hi = len(before), len(data) - len(after)
        cuts = pretoken_ends(pattern, np.frombuffer(data, np.uint8), lo, hi, table).tolist()
        return [data[a:b].decode("utf-8") for a, b in zip([lo, *cuts], cuts, strict=False)]

    return scanned


PATTERNS = {"gpt4": GPT4, "o200k": O200K, "superbpe": SUPERBPE, "superbpe-lines": SUPERBPE_LINES}


def test_the_scan_table_agrees_with_regex_on_every_code_point():
    """Each bit of an entry, on every code point where an entry changes, its neighbours, and a
    sample of the rest; every letter in o200k's upper or lower class; the contraction letters."""
    from bpe_dask.compiled import code_points

    CLASS, LETTER, UPPER, LOWER = code_points.CLASS, code_points.LETTER, code_points.UPPER, code_points.LOWER
    UPPER_CLASS, LOWER_CLASS = code_points.UPPER_CLASS, code_points.LOWER_CLASS
    LETTERS = code_points.CONTRACTION_LETTERS
    table = code_points.scan_table()
    assert UPPER_CLASS in O200K.regex and LOWER_CLASS in O200K.regex
    assert (table & CLASS == code_points.class_table()).all()
    letters = table & CLASS == LETTER
    assert (table[letters] & (UPPER | LOWER) != 0).all()
    edges = np.flatnonzero(np.diff(table)) + 1
    sample = {
        *edges.tolist(),
        *(edges - 1).tolist(),
        *random.Random(0).sample(range(sys.maxunicode + 1), 30_000),
    }
    upper, lower = regex.compile(UPPER_CLASS), regex.compile(LOWER_CLASS)
    for code in sorted(sample):
        char = chr(code)
        assert bool(table[code] & UPPER) == bool(upper.match(char)), hex(code)
        assert bool(table[code] & LOWER) == bool(lower.match(char)), hex(code)
    folds = {code: LETTERS[(table[code] >> 4) - 1] for code in np.flatnonzero(table >> 4).tolist()}
    everything = "".join(map(chr, range(sys.maxunicode + 1)))
    matches = [m.start() for m in regex.finditer(r"(?i)[sdmtlver]", everything)]
    assert folds == {
        code: next(letter for letter in LETTERS if regex.fullmatch(f"(?i){letter}", chr(code)))
        for code in matches
    }
    assert folds[ord("ſ")] == "s" and folds[ord("L")] == "l"


@pytest.mark.parametrize("name", PATTERNS)
def test_every_pair_of_characters_splits_like_the_regex_module(name):
    scanned, findall = scanner(name), PATTERNS[name].compiled.findall
    for x, y in product(CHARACTERS, repeat=2):
        for before in CONTEXTS:
            for after in CONTEXTS:
                text = before + x + y + after
                assert scanned(text) == findall(text), repr(text)


@pytest.mark.parametrize("name", PATTERNS)
def test_random_text_splits_like_the_regex_module(name):
    scanned, findall = scanner(name), PATTERNS[name].compiled.findall
    rng = random.Random(name)
    alphabet = [*CHARACTERS, *PIECES, *one_of_each_class()]
    for _ in range(3000):
        text = "".join(rng.choices(alphabet, k=rng.randint(0, 60)))
        assert scanned(text) == findall(text), repr(text)
        if _ % 10 == 0:  # inside a bigger buffer: nothing past the piece's end is read
            assert scanned(text, b"a", b"a'LL \n") == findall(text), repr(text)


@pytest.mark.parametrize("name", ["gpt4", "o200k"])
def test_whitespace_at_the_end_of_a_piece_and_before_a_final_newline(name):
    """GPT-4's ``\\s++$`` takes whitespace that runs to the end, whatever ends the run (Python's
    ``$`` before a final newline never decides anything: the run takes the newline); o200k's
    ``\\s*[\\r\\n]+`` stops at the last line end and ``\\s+(?!\\S)`` takes the rest."""
    scanned, findall = scanner(name), PATTERNS[name].compiled.findall
    endings = ["", " ", "  ", "\n", " \n", "  \n", "\n ", " \n ", "\n\n", "\r\n", " \r\n", "\t\n",
               "\u3000\n", "\xa0", "\x85", "\u2028", " \u2028", "\n\u2028", "\r", " \r", "\n\r ", "\x0b\n",
               "\x1c\n"]  # fmt: skip
    for body, ending in product(["", "a", "A", "7", ".", "'s", "'", " x", "\u0301", "x\n"], endings):
        text = body + ending
        assert scanned(text) == findall(text), repr(text)
        assert scanned(text, b"", b" x") == findall(text), repr(text)  # the piece ends, the buffer not
    assert findall("a  \n") == (["a", "  \n"]) and findall("x \n ")[-1] == (" \n " if name == "gpt4" else " ")


@pytest.mark.parametrize("name", PATTERNS)
def test_the_counting_engines_agree_across_blocks_and_ranges(tmp_path, name):
    """``engine="numba"`` counts what ``engine="python"`` counts, the text cut into ranges and blocks
    of several sizes, special tokens between pieces, and the count arrays growing many times."""
    from test_plan import counts_of

    from bpe_dask.io.inputs import expand_inputs
    from bpe_dask.io.plan import plan_ranges
    from bpe_dask.rules.pretokenize import Pretokenizer
    from bpe_dask.sources.files import FilePart
    from bpe_dask.stages.count import CountSettings, count_part

    rng = random.Random(name)
    text = "".join(rng.choices([*CHARACTERS, *PIECES, EOT, EOT + " ", " " + EOT], k=4000))
    path = tmp_path / "in.txt"
    path.write_bytes(text.encode())
    files = expand_inputs([str(path)])
    totals = {}
    for engine in ("python", "numba"):
        settings = CountSettings((EOT,), pattern=name, engine=engine)
        for chunk_size, block_size in [(1 << 30, 1 << 20), (997, 64), (131, 7)]:
            total: dict[bytes, int] = {}
            for byte_range in plan_ranges(files, chunk_size, Pretokenizer([EOT], name)):
                for word, count in counts_of(
                    count_part(FilePart(byte_range), settings, block_size=block_size)
                ).items():
                    total[word] = total.get(word, 0) + count
            totals[engine, chunk_size] = total
    want = totals["python", 1 << 30]
    assert all(total == want for total in totals.values())
    from bpe_dask.compiled import Counter

    counter = Counter(name, capacity=16)
    data = text.encode()
    for _ in range(3):
        counter.add(data, Pretokenizer([EOT], name).piece_bounds(data))
    arena, offsets, counts = counter.arrays()
    got = {bytes(arena[a:b]): c for a, b, c in zip(offsets[:-1], offsets[1:], counts.tolist(), strict=True)}
    assert got == {word: 3 * count for word, count in want.items()}


def test_the_numba_engine_counts_every_built_in_pattern_and_says_which(caplog):
    from bpe_dask.errors import BpeDaskError
    from bpe_dask.rules.patterns import split_pattern
    from bpe_dask.stages.count import CountSettings, counting_engine

    for name in ("gpt2", "gpt4", "o200k", "cl100k_base", O200K.regex):
        assert split_pattern(name).builtin
        settings = CountSettings(pattern=name, engine="numba")
        assert counting_engine(settings, 1) == f"the compiled {settings.pattern} scanner (numba)"
    assert counting_engine(CountSettings(pattern="gpt4"), 1) == "the regex module (gpt4 pattern)"
    assert not split_pattern(r"\S+|\s+").builtin
    assert counting_engine(CountSettings(pattern=r"\S+|\s+"), 1 << 30) == "the regex module (custom pattern)"
    with pytest.raises(BpeDaskError, match=r"patterns only \(pattern= names one\), not \\S\+"):
        CountSettings(pattern=r"\S+|\s+", engine="numba")


@pytest.mark.parametrize("name", PATTERNS)
def test_the_compiled_encoder_equals_the_python_one_with_a_vocabulary_trained_on_the_pattern(name):
    from test_tokenizer import multilingual_text

    from bpe_dask.rules import reference
    from bpe_dask.tokenizer import Tokenizer

    rng = random.Random(name)
    specials = [EOT, "<|fin|é>"]
    texts = [multilingual_text(seed) for seed in range(3)]
    texts.append("".join(rng.choices([*CHARACTERS, *PIECES, *specials], k=3000)))
    vocab, merges = reference.train(texts, 256 + len(specials) + 400, specials, PATTERNS[name].regex)
    python = Tokenizer(vocab, merges, specials, pattern=name, engine="python")
    compiled = Tokenizer(vocab, merges, specials, pattern=name, engine="numba")
    for seed in range(3, 6):
        text = multilingual_text(seed) + "".join(rng.choices([*CHARACTERS, *PIECES, *specials], k=2000))
        assert compiled.encode(text) == python.encode(text)
    for run in ["a", "A", "=", " ", "\n", "1", "日", "e\u0301"]:  # long pre-tokens: the linked-list merge
        text = f"x {run * 300} y{EOT}{run * 30}'LL"
        assert compiled.encode(text) == python.encode(text), run
    documents = [multilingual_text(6)[:500], "", " \n", "x'S"]
    assert (
        compiled.encode_documents(documents, EOT).tolist() == python.encode_documents(documents, EOT).tolist()
    )


@pytest.mark.parametrize("name", ["gpt4", "o200k"])
def test_the_line_end_cut_in_punctuation_heavy_text(name):
    """Text of table rules, line ends and a few words: cut at every place the rule allows after a
    line end, the two halves give the whole text's pre-tokens, by the compiled scanner and by the
    ``regex`` module alike."""
    from bpe_dask.rules.pretokenize import Pretokenizer

    scanned, findall, rules = scanner(name), PATTERNS[name].compiled.findall, Pretokenizer(pattern=name)
    alphabet = ["|", "-", "\r", "\n", "\r\n", "a", "1", " ", "\t", "/", ".", "'", "'s", "A", "\u0301",
                "\x0b", "\u2028", "\x85", "|---", "\n\n", " \n", "\t\r\n"]  # fmt: skip
    rng = random.Random(f"line ends {name}")
    checked = 0
    for _ in range(3000):
        text = "".join(rng.choices(alphabet, k=rng.randint(2, 40)))
        whole = findall(text)
        assert scanned(text) == whole, repr(text)
        for p in range(1, len(text)):
            if text[p - 1] in "\r\n" and rules.first_cut(text, p, p + 1) == p:
                assert findall(text[:p]) + findall(text[p:]) == whole, (repr(text), p)
                assert scanned(text[:p]) + scanned(text[p:]) == whole, (repr(text), p)
                checked += 1
    assert checked > 5000
    cut = functools.partial(rules.first_cut, hi=2)
    assert cut("\n|", 1) == 1 and cut("\ra", 1) == 1 and cut("\n7", 1) == 1 and cut("\n\n", 1) is None
    assert cut("\n/", 1) == (1 if name == "gpt4" else None) and cut("\t|", 1) is None
