"""Pre-tokenization: text in, pre-token counts out.

Takes decoded text and the special tokens; gives a ``Counter`` of pre-tokens (``str``).
Text is split on the special tokens first (longest first at the same position), so
pre-tokens never cross a special token, and the special tokens themselves are dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import regex

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_PRETOKEN = regex.compile(GPT2_PATTERN)


def special_token_pattern(special_tokens: Iterable[str]) -> regex.Pattern | None:
    """Alternation of the special tokens, longest first, or None when there are none."""
    tokens = sorted(set(special_tokens), key=len, reverse=True)
    if not tokens:
        return None
    return regex.compile("|".join(regex.escape(token) for token in tokens))


def count_pretokens(text: str, specials: regex.Pattern | None) -> Counter[str]:
    """How often each pre-token occurs in ``text``."""
    counts: Counter[str] = Counter()
    for piece in [text] if specials is None else specials.split(text):
        counts.update(_PRETOKEN.findall(piece))
    return counts
