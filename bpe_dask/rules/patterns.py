"""Split patterns: the pre-tokenization regexes, and between which characters their text may be cut.

A ``SplitPattern`` is a regex with its cut rule and chunk pattern; ``PATTERNS`` holds the built-in
ones (GPT-2's, the default, GPT-4's and o200k's, exactly as tiktoken has them, and SuperBPE's
second stage) and ``split_pattern``
gives the one an option names, or a pattern of one's own from any other regex. ``pretokenize``
applies them. Why each cut a rule allows is safe, pattern by pattern: docs/exactness.md#cut-rules.
Pure: no I/O.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from functools import cached_property

import regex

from bpe_dask.errors import BpeDaskError


@dataclass(frozen=True)
class SplitPattern:
    """A pre-tokenization pattern and what is known about where its text may be cut.

    ``cut_rule`` matches the character before a safe cut (with a look-ahead at the one after):
    the cut is at the match's end. ``chunk``, for speed, is a stdlib ``re`` pattern whose matches
    tile any text with boundaries only at safe cuts; counting pre-tokenizes each distinct chunk
    once. A pattern with neither is still exact, it just cannot be cut inside a document.
    ``hf_regex`` is the regex as Hugging Face's Oniguruma engine must be given it to match the same,
    where that differs (it reads ``{1,3}+`` as "one or more of {1,3}", not as possessive).

    >>> GPT2.compiled.findall("Hello, world's 2024!")
    ['Hello', ',', ' world', "'s", ' 2024', '!']
    >>> GPT2.builtin, GPT2.spec, split_pattern("[a-z]+|.").spec
    (True, 'gpt2', '[a-z]+|.')
    """

    name: str
    regex: str
    cut_rule: str | None = None
    chunk: str | None = None
    hf_regex: str | None = None

    @property
    def builtin(self) -> bool:
        """Whether this is one of the built-in patterns (``PATTERNS``), which the compiled core scans."""
        return PATTERNS.get(self.name) == self

    @property
    def spec(self) -> str:
        """What names the pattern in options, counts files and reports: a built-in's name, or the regex."""
        return self.name if self.builtin else self.regex

    @cached_property
    def compiled(self) -> regex.Pattern:
        """The regex, compiled once per pattern."""
        return regex.compile(self.regex)


# The stdlib's ``re`` finds chunks faster than ``regex``, but its \s also takes the four separators
# \x1c-\x1f, which are not Unicode White_Space and not \s to ``regex``: take them out, so both
# agree on every character (a test checks all of Unicode).
WHITESPACE = r"[^\S\x1c-\x1f]"
NON_WHITESPACE = r"[\S\x1c-\x1f]"

GPT2 = SplitPattern(
    name="gpt2",
    regex=r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    # why each cut is safe: docs/exactness.md#gpt-2
    cut_rule=(
        r"\S(?=\s)"  # anything before whitespace
        r"|\p{L}(?=[^\s\p{L}])"  # a letter before a digit or other
        r"|\p{N}(?=[^\s\p{N}])"  # a digit before a letter or other
        r"|[^\s\p{L}\p{N}'](?=[\p{L}\p{N}])"  # other, not an apostrophe, before a letter or digit
        r"|'(?=\p{N})"  # an apostrophe before a digit
    ),
    chunk=f"{WHITESPACE}*{NON_WHITESPACE}+|{WHITESPACE}+",  # cut only before whitespace
)

# Chunks that end only where a non-whitespace character meets whitespace other than \r and \n: after
# a run of non-whitespace, a \r or \n carries the chunk on through the whitespace and the next run,
# and whitespace that ends the text stays with the chunk before it (docs/exactness.md#chunks).
_CHUNK_BEFORE_SPACE = (
    rf"{WHITESPACE}*{NON_WHITESPACE}+(?:[\r\n]{WHITESPACE}*{NON_WHITESPACE}+)*(?:[\r\n]{WHITESPACE}*)?"
    rf"|{WHITESPACE}+"
)

GPT4 = SplitPattern(
    name="gpt4",
    regex=(
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
        r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
    ),
    # why each cut is safe: docs/exactness.md#gpt-4
    cut_rule=(
        r"[\p{L}\p{N}](?=\s)"  # a letter or digit before whitespace
        r"|[^\s\p{L}\p{N}](?=[^\S\r\n])"  # other before whitespace but \r and \n
        r"|\p{L}(?=[^\s\p{L}])"  # a letter before a digit or other
        r"|\p{N}(?=[^\s\p{N}])"  # a digit before a letter or other
        r"|[^\s\p{L}\p{N}](?=\p{N})"  # other before a digit
        r"|[\r\n](?=\S)"  # a line end before non-whitespace: docs/exactness.md#the-line-end-cut
    ),
    chunk=_CHUNK_BEFORE_SPACE,
    hf_regex=(
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
        r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
    ),
)
O200K = SplitPattern(
    name="o200k",
    regex="|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    ),
    # why each cut is safe: docs/exactness.md#o200k
    cut_rule=(
        r"[\p{L}\p{N}](?=\s)"  # a letter or digit before whitespace
        r"|[^\s\p{L}\p{N}](?=[^\S\r\n])"  # other or mark before whitespace but \r and \n
        r"|\p{L}(?=[^\s\p{L}\p{M}'])"  # a letter before a digit or other, neither a mark nor '
        r"|\p{N}(?=[^\s\p{N}])"  # a digit before a letter, mark or other
        r"|[^\s\p{L}\p{N}](?=\p{N})"  # other or mark before a digit
        r"|[\r\n](?=[^\s/])"  # a line end before neither whitespace nor /: docs/exactness.md#the-line-end-cut
    ),
    chunk=_CHUNK_BEFORE_SPACE,
)
# SuperBPE's second stage (docs/exactness.md#superword-tokenizers): numbers in groups of three counted
# from the right, as its authors' Digits(individual_digits=False) and Split by (?=(\d{3})+(?!\d)) give
# them, and everything else whole: no whitespace split, so tokens can learn to bridge words.
SUPERBPE = SplitPattern(
    name="superbpe",
    regex=r"\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N}))|\P{N}+",
    # why each cut is safe: docs/exactness.md#superbpe
    cut_rule=r"\P{N}(?=\p{N})|\p{N}(?=\P{N})",  # where numbers start or end
)
# The same, cut after every line end, as its authors' trainer reads its files line by line: no token
# crosses a line end.
SUPERBPE_LINES = SplitPattern(
    name="superbpe-lines",
    regex=r"\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N}))|[^\p{N}\n]+\n?|\n",
    # why each cut is safe: docs/exactness.md#superbpe
    cut_rule=r"\P{N}(?=\p{N})|\p{N}(?=\P{N})|\n(?=[\s\S])",  # where numbers start or end, after a line end
)
PATTERNS = {p.name: p for p in (GPT2, GPT4, O200K, SUPERBPE, SUPERBPE_LINES)}
SUPERWORDS = (SUPERBPE, SUPERBPE_LINES)  # the patterns of SuperBPE's second stage
# tiktoken's names for the same patterns.
ALIASES = {"r50k_base": GPT2, "cl100k_base": GPT4, "o200k_base": O200K}
_BY_REGEX = {r: p for p in PATTERNS.values() for r in (p.regex, p.hf_regex) if r}
_NAME_LIKE = regex.compile(r"[A-Za-z][A-Za-z0-9_.-]*")


def split_pattern(pattern: str | SplitPattern) -> SplitPattern:
    """The split pattern ``pattern`` names: a built-in's name (``gpt2``, ``gpt4``, ``o200k``, ``superbpe``, or
    tiktoken's name for one), or a regex, which is a built-in when it is one's regex and otherwise
    a pattern of its own, with no cut rule. A bare word is taken as a misspelt name, not a regex.

    >>> split_pattern("cl100k_base").name, split_pattern(GPT4.regex).name, split_pattern("[a-z]+|.").name
    ('gpt4', 'gpt4', 'custom')
    >>> split_pattern("gtp4")
    Traceback (most recent call last):
    bpe_dask.errors.BpeDaskError: unknown split pattern 'gtp4' (built in: gpt2, gpt4, o200k, superbpe, ...
    """
    if isinstance(pattern, SplitPattern):
        return pattern
    if not isinstance(pattern, str) or not pattern:
        raise BpeDaskError(f"a split pattern must be a name or a regex, got {pattern!r}")
    found = PATTERNS.get(pattern) or ALIASES.get(pattern) or _BY_REGEX.get(pattern)
    if found is not None:
        return found
    if _NAME_LIKE.fullmatch(pattern):
        raise BpeDaskError(
            f"unknown split pattern {pattern!r} (built in: {', '.join(PATTERNS)}; a regex that is a plain "
            f"word can be written (?:{pattern}))"
        )
    return _custom_pattern(pattern)


@functools.lru_cache(maxsize=32)
def _custom_pattern(source: str) -> SplitPattern:
    try:
        compiled = regex.compile(source)
    except (regex.error, ValueError, OverflowError) as error:
        raise BpeDaskError(f"split pattern {source!r} is not a valid regex: {error}") from None
    if compiled.fullmatch("") is not None:
        raise BpeDaskError(f"split pattern {source!r} matches empty text: pre-tokens must not be empty")
    return SplitPattern(name="custom", regex=source)


@functools.cache
def unicode_tables() -> dict[str, str]:
    """Whose Unicode tables the split patterns classify characters by, and which version: the
    ``regex`` module's (the compiled scanners' tables are made from it too), as its own description
    says. Peers classify by tables of their own (tiktoken by Rust's ``regex`` crate, Hugging Face
    ``tokenizers`` by Oniguruma, Python's ``unicodedata`` by Python's), so a code point one version
    assigns and another does not (U+209F: a letter to regex 2026.11.19, unassigned to Python 3.11's
    Unicode 14) may split, and so encode, differently there.

    >>> tables = unicode_tables()
    >>> sorted(tables), tables["regex"] == regex.__version__
    (['regex', 'unicode'], True)
    """
    import re
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        meta = metadata("regex")  # the description: a header, or the body, as the wheel was built
        described = f"{meta.get('Description') or ''} {meta.get_payload() or ''}"
    except PackageNotFoundError:  # run from a source tree without its metadata
        described = ""
    found = re.search(r"supports Unicode (\d+(?:\.\d+)*)", str(described))
    return {"regex": regex.__version__, "unicode": found.group(1) if found else "unknown"}
