"""What an encode call is asked: which special tokens it splits out, which it refuses, and valid text.

Takes a tokenizer's ``Pretokenizer`` and an encode call's ``allowed_special`` and
``disallowed_special``, with tiktoken's meaning ("all", or a collection of strings); gives
(``special_split``) the ``Pretokenizer`` that splits out the allowed special tokens (the others are
ordinary text) and a check that refuses text holding a disallowed one (``refuse_disallowed``); and
(``cutter``) one whose safe cuts fall inside neither. The defaults are CS336's, not tiktoken's:
every special token is allowed and none is refused. ``valid_text`` makes text with lone surrogates
encodable as tiktoken does. Pure: no I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection
from typing import Literal

from bpe_dask.errors import BpeDaskError
from bpe_dask.rules.pretokenize import Pretokenizer, SplitPattern

Allowed = Literal["all"] | Collection[str]


class DisallowedSpecialTokenError(BpeDaskError, ValueError):
    """The text holds a special token's text that ``disallowed_special`` refuses (tiktoken's ValueError).

    >>> isinstance(DisallowedSpecialTokenError("x"), (BpeDaskError, ValueError))
    True
    """


def valid_text(text: str) -> str:
    """``text`` with each lone surrogate made U+FFFD (and a surrogate pair the character it encodes),
    as tiktoken does before encoding text that is not valid Unicode.

    >>> valid_text("a\\ud800b"), valid_text("\\ud83d\\udc4d")
    ('a�b', '👍')
    """
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def utf8(text: str) -> bytes:
    """``text`` in UTF-8, lone surrogates made U+FFFD first (``valid_text``), as tiktoken does.

    >>> utf8("é"), utf8("a\\ud800")
    (b'\\xc3\\xa9', b'a\\xef\\xbf\\xbd')
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return valid_text(text).encode("utf-8")


def _tokens(given: Allowed, name: str) -> frozenset[str]:
    if isinstance(given, str) or not all(isinstance(token, str) for token in given):
        raise BpeDaskError(f'{name} must be "all" or a collection of special tokens, got {given!r}')
    return frozenset(given)


def special_split(
    pretokenizer: Pretokenizer, allowed_special: Allowed, disallowed_special: Allowed
) -> tuple[Pretokenizer, re.Pattern | None]:
    """What an encode call with a tokenizer's ``pretokenizer`` (every special token split out) asks:
    the ``Pretokenizer`` splitting out the allowed special tokens, and a search for the disallowed
    ones (``None`` when there are none), each made once and kept (``functools.lru_cache``: safe to
    share between threads). As in tiktoken, ``"all"`` disallowed means every special token not
    allowed, and a string disallowed is refused even if also allowed.

    >>> everything = Pretokenizer(["<|endoftext|>", "<|pad|>"])
    >>> pretokenizer, search = special_split(everything, {"<|pad|>"}, "all")
    >>> pretokenizer.special_tokens, search.search("a<|endoftext|>").group()
    (('<|pad|>',), '<|endoftext|>')
    """
    if allowed_special == "all" and not disallowed_special:  # the default
        return pretokenizer, None
    allowed, disallowed = _allowed_and_disallowed(pretokenizer, allowed_special, disallowed_special)
    if allowed != frozenset(pretokenizer.special_tokens):
        pretokenizer = _pretokenizer(allowed, pretokenizer.pattern)
    return pretokenizer, _search(disallowed) if disallowed else None


def cutter(pretokenizer: Pretokenizer, allowed_special: Allowed, disallowed_special: Allowed) -> Pretokenizer:
    """A ``Pretokenizer`` whose safe cuts (``recut``) never fall inside an allowed or a disallowed
    token's text, so each piece between cuts can be checked and encoded alone.

    >>> cutter(Pretokenizer(["<|endoftext|>", "<|pad|>"]), {"<|pad|>"}, "all").special_tokens
    ('<|endoftext|>', '<|pad|>')
    """
    split, search = special_split(pretokenizer, allowed_special, disallowed_special)
    if search is None:
        return split
    allowed, disallowed = _allowed_and_disallowed(pretokenizer, allowed_special, disallowed_special)
    return _pretokenizer(allowed | disallowed, pretokenizer.pattern)


def _allowed_and_disallowed(
    pretokenizer: Pretokenizer, allowed_special: Allowed, disallowed_special: Allowed
) -> tuple[frozenset[str], frozenset[str]]:
    every = frozenset(pretokenizer.special_tokens)
    allowed = every if allowed_special == "all" else every & _tokens(allowed_special, "allowed_special")
    if disallowed_special == "all":
        return allowed, every - allowed
    return allowed, _tokens(disallowed_special, "disallowed_special")


@functools.lru_cache(maxsize=64)
def _pretokenizer(special_tokens: frozenset[str], pattern: SplitPattern) -> Pretokenizer:
    return Pretokenizer(special_tokens, pattern)


@functools.lru_cache(maxsize=64)
def _search(disallowed: frozenset[str]) -> re.Pattern:
    # a search for plain strings, no text rule: the stdlib's ``re`` finds them as ``regex`` would
    return re.compile("|".join(re.escape(token) for token in sorted(disallowed)))


def refuse_disallowed(text: str, search: re.Pattern | None) -> None:
    """Raise ``DisallowedSpecialTokenError`` if ``search`` (from ``special_split``) finds a
    refused special token in ``text``.

    >>> refuse_disallowed("<|endoftext|>", re.compile(re.escape("<|endoftext|>")))
    Traceback (most recent call last):
    bpe_dask.rules.special_tokens.DisallowedSpecialTokenError: the text holds '<|endoftext|>', which ...
    """
    if search is not None and (found := search.search(text)) is not None:
        raise DisallowedSpecialTokenError(
            f"the text holds {found.group()!r}, which disallowed_special refuses: allow it as a special "
            "token (allowed_special) or encode it as text (disallowed_special=())"
        )
