"""A time limit on split patterns that are not built in: a split pattern in, what finds its pre-tokens out.

A regex of one's own (given, or read from a trusted ``tokenizer.json``) may backtrack for a time
exponential in its text's length: ``(?:x|x)+y|.`` on 24 x's takes seconds, and each x more doubles
it. ``finder`` gives the built-in patterns' compiled regex as it is, and wraps any other so that
each ``findall`` runs under ``regex``'s own ``timeout``: ``pattern_timeout()`` seconds (the
``dask.config`` setting ``bpe-dask.pattern-timeout``, 10 by default) for each started million
characters of the text it is given. The built-in patterns scan several MB a second, so a pattern
slower than 100 KB/s on a long text, or stuck for 10 s on a short one, is one gone wrong, not a slow
one; the budget grows with the text because one call may take a whole document. Past it,
``PatternTimeoutError``, one line.
"""

from __future__ import annotations

import math

import dask.config
import regex

from bpe_dask.errors import BpeDaskError
from bpe_dask.rules.patterns import GPT2, SplitPattern, split_pattern  # noqa: F401 (GPT2: examples)

DEFAULT_TIMEOUT = 10.0  # seconds per started million characters


class PatternTimeoutError(BpeDaskError):
    """A split pattern of one's own took longer than its time limit on a text.

    >>> import dask.config
    >>> with dask.config.set({"bpe-dask.pattern-timeout": 0.01}):
    ...     finder(split_pattern("(?:x|x)+y|.")).findall("x" * 40)
    Traceback (most recent call last):
    bpe_dask.rules.pattern_limit.PatternTimeoutError: split pattern '(?:x|x)+y|.' took over 0.01 s ...
    """


def pattern_timeout() -> float:
    """Seconds a pattern of one's own may take per started million characters of text.

    >>> pattern_timeout()
    10.0
    """
    return float(dask.config.get("bpe-dask.pattern-timeout", default=DEFAULT_TIMEOUT))


class _TimedPattern:
    """A compiled regex whose ``findall`` stops after its time limit."""

    def __init__(self, compiled: regex.Pattern, source: str) -> None:
        self.compiled, self.source = compiled, source

    def findall(self, text: str) -> list[str]:
        return self._timed(self.compiled.findall, text)

    def finditer(self, text: str) -> list[regex.Match]:
        return self._timed(lambda *args, **kw: list(self.compiled.finditer(*args, **kw)), text)

    def _timed(self, find, text: str):
        limit = pattern_timeout() * max(1, math.ceil(len(text) / 1_000_000))
        try:
            return find(text, timeout=limit)
        except TimeoutError:
            raise PatternTimeoutError(
                f"split pattern {self.source!r} took over {limit:g} s on {len(text):,} characters "
                "(bpe-dask.pattern-timeout): it backtracks without end; use a built-in pattern or mend it"
            ) from None


def finder(pattern: SplitPattern) -> regex.Pattern | _TimedPattern:
    """What finds ``pattern``'s pre-tokens (``findall``): the compiled regex, under a time limit unless
    the pattern is built in.

    >>> finder(GPT2) is GPT2.compiled, finder(split_pattern("[a-z]+|.")).findall("hi, you")
    (True, ['hi', ',', ' ', 'you'])
    """
    return pattern.compiled if pattern.builtin else _TimedPattern(pattern.compiled, pattern.regex)
