"""Pre-tokenization: text in, pre-token counts out.

Takes decoded text and the special tokens; gives a ``Counter`` of pre-tokens (``str``).
Text is split on the special tokens first (longest first at the same position), so
pre-tokens never cross a special token, and the special tokens themselves are dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

import regex

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_PRETOKEN = regex.compile(GPT2_PATTERN)


def special_token_pattern(special_tokens: Iterable[str]) -> regex.Pattern | None:
    """Alternation of the special tokens, longest first, or None when there are none."""
    tokens = sorted(set(special_tokens), key=len, reverse=True)
    if not tokens:
        return None
    return regex.compile("|".join(regex.escape(token) for token in tokens))


def split_on_special_tokens(text: str, specials: regex.Pattern | None) -> list[str]:
    """The pieces of text between special tokens (possibly empty strings)."""
    return [text] if specials is None else specials.split(text)


def iter_pretokens(text: str) -> Iterator[str]:
    """The GPT-2 pre-tokens of one piece of text without special tokens."""
    return (match.group() for match in _PRETOKEN.finditer(text))


def count_pretokens(text: str, specials: regex.Pattern | None) -> Counter[str]:
    """How often each pre-token occurs in ``text``."""
    counts: Counter[str] = Counter()
    for piece in split_on_special_tokens(text, specials):
        counts.update(_PRETOKEN.findall(piece))
    return counts
