"""Split patterns: the pre-tokenization regexes, and between which characters their text may be cut.

A ``SplitPattern`` is a regex with its cut rule and chunk pattern; ``PATTERNS`` holds the built-in
ones (GPT-2's, the default, GPT-4's and o200k's, exactly as tiktoken has them) and ``split_pattern``
gives the one an option names, or a pattern of one's own from any other regex. ``pretokenize``
applies them. Pure: no I/O.

Why a cut the rule allows is safe. Cutting text at ``p``, between ``x = text[p - 1]`` and
``y = text[p]``, is safe when pre-tokenizing ``text[:p]`` and ``text[p:]`` apart gives exactly the
pre-tokens of ``text`` (``pretokenize`` adds what special tokens need).

Each rule allows a pair ``x|y`` only where two things hold: (a) the pattern does not *join* them:
no alternative, read as a plain regular expression (possessive quantifiers as greedy ones,
look-aheads and anchors left out), matches a string in which ``x`` is directly followed by ``y``
(a path that reads the two could always go on to such a match); and (b) ``x`` is not whitespace.
Then, from any start before ``p``, every path the regex engine tries (those that fail, and the
backtracking inside possessive, atomic quantifiers, included) reads no further than ``x``: one
that has read ``x`` stops at ``p`` in ``text``, where ``y`` is not what it may take next, as in
``text[:p]``, where the text ends. The patterns look ahead, with ``(?!\\S)`` and ``$``, only after
whitespace, so by (b) none looks at ``p``; and Python's ``$``, which also matches before a final
newline, would differ at ``p - 1`` only if ``x`` were one. So every attempt ends alike in both
texts, the two scans agree up to ``p``, and as each pattern matches every character (its matches
tile the text), a match ends at ``p``. No pattern looks behind, so the scan from ``p`` on is the
same in ``text[p:]``. Such a cut is safe whatever surrounds the pair, so any number of them may be
made at once. Below, *other* means neither whitespace, a letter (``\\p{L}``) nor a digit
(``\\p{N}``), and "x|y" lists what a rule allows, ``x`` whitespace only in the line-end cut.

- GPT-2's pattern ``'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+``
  joins two letters, two digits, two others, two whitespace characters, a space to what follows
  it, and in a contraction an apostrophe to a letter. Its rule allows anything before whitespace,
  and a change between letters, digits and others, except an apostrophe before a letter.
- GPT-4's (tiktoken's ``cl100k_base``) ``'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|
  \\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s`` joins besides:
  any character but ``\\r``, ``\\n``, a letter or a digit to a letter after it (one such character
  starts a word), so other|letter is no cut; an other to ``\\r`` and ``\\n`` after it. Its digits
  go in threes counted from the start of a run, so a cut inside a run would move every later
  boundary: digit|digit is never a cut (as no pair in a joined class is). The contractions are
  case-insensitive, but their case variants are letters too. Rule: a letter or digit before any
  whitespace, an other before whitespace but ``\\r`` and ``\\n``; letter|digit, letter|other (the
  apostrophe too: contractions stand alone here), digit|letter, digit|other, other|digit; and a
  line end before anything but whitespace (below). ``$`` comes after ``\\s++``, which has taken
  any final newline, so it matches at the end only, as in tiktoken's Rust engine.
- o200k's (tiktoken's ``o200k_base``) splits a run of letters where lower case turns to upper
  case, taking marks (``\\p{M}``) as letters there, while ``[^\\s\\p{L}\\p{N}]`` takes them as
  others. It joins letters and marks to each other (whatever the case: the case-insensitive
  contractions join "r" to "E" in "x'rE"), any character but ``\\r``, ``\\n``, a letter or a digit
  to a letter or mark after it, a letter or mark to an apostrophe after it (a contraction follows
  its word), an apostrophe to a letter, digits (in threes), others (marks included) to each other
  and to ``\\r``, ``\\n`` and ``/`` after them, a space to an other, and whitespace to whitespace.
  Rule: a letter or digit before any whitespace, an other or mark before whitespace but ``\\r``
  and ``\\n``; letter|digit, letter|other (but neither a mark nor an apostrophe), digit|anything
  but a digit or whitespace, other|digit and mark|digit; and a line end before anything but
  whitespace or ``/`` (below). It never cuts inside a run of letters.
- A pattern given as a regex of one's own has no rule: it is cut only at special tokens and
  between files, which is safe for any pattern.

The line-end cut (GPT-4's and o200k's rules), where ``x`` is whitespace. ``x`` is ``\\r`` or
``\\n`` and ``y`` is not whitespace (nor, for o200k, ``/``, which its ``[\\r\\n/]*`` takes after
line ends). Without it, lines of only punctuation (a Markdown table, ``|---|---|\\r\\n``) have no
cut at all. (a) holds: a line end is taken only at the end of a punctuation run (``[\\r\\n]*+``),
never as the character that may start a word (``[^\\r\\n\\p{L}\\p{N}]``), and otherwise only by the
alternatives of whitespace alone. (b) fails, so what differs between ``text`` and ``text[:p]``
is only a look-around at ``p`` (``$`` and ``(?!\\S)``, after ``\\s``), which only a path that has
read whitespace from its start up to ``p`` reaches: one starting at an ``s`` inside the run of
whitespace ``text[a:p]`` that ends at ``p``. Paths from starts before ``a`` end alike in both
texts, as above. From any ``s`` in ``[a, p)``, in both texts, the alternatives before the
whitespace ones fail: all from ``s`` to ``p - 1`` is whitespace, so a letter, digit or other
could come only at ``p``, after a single space or a word's first character at ``p - 1``, which
holds a line end instead. Then GPT-4's ``\\s++$`` takes ``text[s:p]`` in ``text[:p]``; in
``text``, ``$`` fails before ``y``, the possessive ``\\s++`` gives nothing back, and
``\\s*[\\r\\n]`` backtracks to end on the line end at ``p - 1``: ``text[s:p]`` again (``$`` is
never tried at ``p - 1``, before the final newline of ``text[:p]``: ``\\s++`` has taken it).
o200k has no ``$``, and its ``\\s*[\\r\\n]+`` takes ``text[s:p]`` in both before ``\\s+(?!\\S)``
is tried. So in both texts the match holding ``x`` ends at ``p``, and the scans from ``p`` on are
the same. GPT-2's ``\\s+(?!\\S)``, with no line-end alternative before it, leaves a run's last
whitespace character to what follows (``"\\t\\n|"``): there the cut is not safe, and not needed, as
GPT-2's punctuation does not take line ends (other|``\\r`` is its cut).

All three rules allow every cut between a non-whitespace character and whitespace other than
``\\r`` and ``\\n``, so text is cut often; their ``chunk`` patterns cut only there (GPT-2's also
before ``\\r`` and ``\\n``). The tests check every allowed pair in many contexts, random text, and
whole jobs against the reference trainer.
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
    """

    name: str
    regex: str
    cut_rule: str | None = None
    chunk: str | None = None
    hf_regex: str | None = None

    @property
    def builtin(self) -> bool:
        return PATTERNS.get(self.name) == self

    @property
    def spec(self) -> str:
        """What names the pattern in options, counts files and reports: a built-in's name, or the regex."""
        return self.name if self.builtin else self.regex

    @cached_property
    def compiled(self) -> regex.Pattern:
        return regex.compile(self.regex)


# The stdlib's ``re`` finds chunks faster than ``regex``, but its \s also takes the four separators
# \x1c-\x1f, which are not Unicode White_Space and not \s to ``regex``: take them out, so both
# agree on every character (a test checks all of Unicode).
WHITESPACE = r"[^\S\x1c-\x1f]"
NON_WHITESPACE = r"[\S\x1c-\x1f]"

GPT2 = SplitPattern(
    name="gpt2",
    regex=r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
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
# and whitespace that ends the text stays with the chunk before it.
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
    cut_rule=(
        r"[\p{L}\p{N}](?=\s)"  # a letter or digit before whitespace
        r"|[^\s\p{L}\p{N}](?=[^\S\r\n])"  # other before whitespace but \r and \n
        r"|\p{L}(?=[^\s\p{L}])"  # a letter before a digit or other
        r"|\p{N}(?=[^\s\p{N}])"  # a digit before a letter or other
        r"|[^\s\p{L}\p{N}](?=\p{N})"  # other before a digit
        r"|[\r\n](?=\S)"  # a line end before anything but whitespace (see the docstring)
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
    cut_rule=(
        r"[\p{L}\p{N}](?=\s)"  # a letter or digit before whitespace
        r"|[^\s\p{L}\p{N}](?=[^\S\r\n])"  # other or mark before whitespace but \r and \n
        r"|\p{L}(?=[^\s\p{L}\p{M}'])"  # a letter before a digit or other, neither a mark nor '
        r"|\p{N}(?=[^\s\p{N}])"  # a digit before a letter, mark or other
        r"|[^\s\p{L}\p{N}](?=\p{N})"  # other or mark before a digit
        r"|[\r\n](?=[^\s/])"  # a line end before anything but whitespace or / (see the docstring)
    ),
    chunk=_CHUNK_BEFORE_SPACE,
)
PATTERNS = {p.name: p for p in (GPT2, GPT4, O200K)}
# tiktoken's names for the same patterns.
ALIASES = {"r50k_base": GPT2, "cl100k_base": GPT4, "o200k_base": O200K}
_BY_REGEX = {r: p for p in PATTERNS.values() for r in (p.regex, p.hf_regex) if r}
_NAME_LIKE = regex.compile(r"[A-Za-z][A-Za-z0-9_.-]*")


def split_pattern(pattern: str | SplitPattern) -> SplitPattern:
    """The split pattern ``pattern`` names: a built-in's name (``gpt2``, ``gpt4``, ``o200k``, or
    tiktoken's name for one), or a regex, which is a built-in when it is one's regex and otherwise
    a pattern of its own, with no cut rule. A bare word is taken as a misspelt name, not a regex."""
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
