"""Pre-tokenization: text in, pre-token counts out.

Takes decoded text and the special tokens; gives a dict from pre-token (``str``) to count.
Text is split on the special tokens first (longest first at the same position), so
pre-tokens never cross a special token, and the special tokens themselves are dropped.

Counting is done in two steps, for speed: the text is cut into chunks of optional
whitespace followed by non-whitespace ("  the", "\\nhello,"), which a simple pattern finds
fast; only each *distinct* chunk is then pre-tokenized with the GPT-2 pattern, its
pre-tokens counted as often as the chunk occurs. Every chunk boundary falls between a
non-whitespace and a whitespace character, where (see ``plan._is_safe_whitespace_cut``) the
GPT-2 pattern never spans, so the counts are exactly those of pre-tokenizing the whole text.
A process keeps the pre-tokens of the chunks it has seen (up to ``CACHE_LIMIT`` of them),
since most chunks recur from one range to the next.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

import regex

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_PRETOKEN = regex.compile(GPT2_PATTERN)

# The stdlib's ``re`` finds chunks faster than ``regex``, but its \s also takes the four
# separators \x1c-\x1f, which are not Unicode White_Space and not \s to ``regex``: take them
# out, so both patterns agree on every character (a test checks all of Unicode).
WHITESPACE = r"[^\S\x1c-\x1f]"
NON_WHITESPACE = r"[\S\x1c-\x1f]"
_CHUNK = re.compile(f"{WHITESPACE}*{NON_WHITESPACE}+|{WHITESPACE}+")

CACHE_LIMIT = 1 << 20
_pretokens_of: dict[str, tuple[str, ...]] = {}


def special_token_pattern(special_tokens: Iterable[str]) -> regex.Pattern | None:
    """Alternation of the special tokens, longest first, or None when there are none."""
    tokens = sorted(set(special_tokens), key=len, reverse=True)
    if not tokens:
        return None
    return regex.compile("|".join(regex.escape(token) for token in tokens))


def count_pretokens(
    text: str, specials: regex.Pattern | None, counts: dict[str, int] | None = None
) -> dict[str, int]:
    """How often each pre-token occurs in ``text``, added into ``counts`` when given."""
    chunks: Counter[str] = Counter()
    for piece in [text] if specials is None else specials.split(text):
        chunks.update(_CHUNK.findall(piece))
    if len(_pretokens_of) > CACHE_LIMIT:
        _pretokens_of.clear()
    if counts is None:
        counts = {}  # a plain dict: a Counter's __missing__ is Python code, slow on this hot path
    for chunk, times in chunks.items():
        pretokens = _pretokens_of.get(chunk)
        if pretokens is None:
            pretokens = _pretokens_of[chunk] = tuple(_PRETOKEN.findall(chunk))  # untracked by the GC
        for pretoken in pretokens:
            counts[pretoken] = counts.get(pretoken, 0) + times
    return counts
