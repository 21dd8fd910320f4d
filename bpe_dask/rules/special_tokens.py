"""What an encode call is asked: which special tokens it splits out, which it refuses, and valid text.

Takes a tokenizer's ``Pretokenizer`` and an encode call's ``allowed_special`` and
``disallowed_special``, with tiktoken's meaning ("all", or a collection of strings); gives the
``Pretokenizer`` that splits out the allowed special tokens (the others are ordinary text) and a
check that refuses text holding a disallowed one. The defaults are CS336's, not tiktoken's: every
special token is allowed and none is refused. ``valid_text`` makes text with lone surrogates
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


class SpecialTokenRules:
    """A tokenizer's ``Pretokenizer`` for each set of allowed special tokens, made once and kept
    (``functools.lru_cache``: safe to share between threads).

    >>> rules = SpecialTokenRules(Pretokenizer(["<|endoftext|>", "<|pad|>"]))
    >>> pretokenizer, search = rules.of({"<|pad|>"}, "all")
    >>> pretokenizer.special_tokens, search.search("a<|endoftext|>").group()
    (('<|pad|>',), '<|endoftext|>')
    >>> rules.cutter({"<|pad|>"}, "all").special_tokens  # never cut inside a refused token either
    ('<|endoftext|>', '<|pad|>')
    """

    def __init__(self, pretokenizer: Pretokenizer) -> None:
        self.everything = pretokenizer
        self._all = frozenset(pretokenizer.special_tokens)

    def __reduce__(self):  # rebuilt where it lands
        return SpecialTokenRules, (self.everything,)

    def _split(self, allowed_special: Allowed, disallowed_special: Allowed) -> tuple[frozenset, frozenset]:
        """The special tokens allowed and those disallowed. As in tiktoken, ``"all"`` disallowed means
        every special token not allowed, and a string disallowed is refused even if also allowed."""
        if allowed_special == "all":
            allowed = self._all
        else:
            allowed = self._all & _tokens(allowed_special, "allowed_special")
        if disallowed_special == "all":
            return allowed, self._all - allowed
        return allowed, _tokens(disallowed_special, "disallowed_special")

    def of(
        self, allowed_special: Allowed, disallowed_special: Allowed
    ) -> tuple[Pretokenizer, re.Pattern | None]:
        """The ``Pretokenizer`` splitting out the allowed special tokens, and a search for the
        disallowed ones (``None`` when there are none)."""
        if allowed_special == "all" and not disallowed_special:  # the default
            return self.everything, None
        allowed, disallowed = self._split(allowed_special, disallowed_special)
        pretokenizer = (
            self.everything if allowed == self._all else _pretokenizer(allowed, self.everything.pattern)
        )
        return pretokenizer, _search(disallowed) if disallowed else None

    def cutter(self, allowed_special: Allowed, disallowed_special: Allowed) -> Pretokenizer:
        """A ``Pretokenizer`` whose safe cuts (``recut``) never fall inside an allowed or a disallowed
        token's text, so each piece between cuts can be checked and encoded alone."""
        pretokenizer, search = self.of(allowed_special, disallowed_special)
        if search is None:
            return pretokenizer
        allowed, disallowed = self._split(allowed_special, disallowed_special)
        return _pretokenizer(allowed | disallowed, self.everything.pattern)


@functools.lru_cache(maxsize=64)
def _pretokenizer(special_tokens: frozenset[str], pattern: SplitPattern) -> Pretokenizer:
    return Pretokenizer(special_tokens, pattern)


@functools.lru_cache(maxsize=64)
def _search(disallowed: frozenset[str]) -> re.Pattern:
    # a search for plain strings, no text rule: the stdlib's ``re`` finds them as ``regex`` would
    return re.compile("|".join(re.escape(token) for token in sorted(disallowed)))


def refuse_disallowed(text: str, search: re.Pattern | None) -> None:
    """Raise ``DisallowedSpecialTokenError`` if ``search`` (from ``SpecialTokenRules.of``) finds a
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
