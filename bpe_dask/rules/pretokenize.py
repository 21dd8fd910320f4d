"""Pre-tokenization: text in, pre-tokens and their counts out. Pure: no I/O.

A ``Pretokenizer`` is a split pattern (``patterns``: GPT-2's by default, GPT-4's, o200k's or a regex
of one's own) and special tokens. It splits the special tokens out first (longest first where
several match at one place), pre-tokenizes and counts the rest, and, from ``SafeCuts`` (``cuts``),
finds where text may be cut without changing its pre-tokens. Everything that decides *what* gets
counted lives here and in ``patterns``; why it is exact: docs/exactness.md.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import pairwise

import numpy as np
import regex

from bpe_dask.errors import BpeDaskError
from bpe_dask.rules.cuts import NoCutError, SafeCuts
from bpe_dask.rules.pattern_limit import finder
from bpe_dask.rules.patterns import GPT2, WHITESPACE, SplitPattern, split_pattern

__all__ = [  # the patterns' names are here too, beside the rest of the rules
    "GPT2",
    "WHITESPACE",
    "NoCutError",
    "Pretokenizer",
    "SplitPattern",
    "check_special_tokens",
    "split_pattern",
]


def check_special_tokens(special_tokens: Iterable[str]) -> tuple[str, ...]:
    """The special tokens as a tuple, if each is a non-empty string of valid Unicode, given once.

    >>> check_special_tokens(["<|endoftext|>", "<|pad|>"])
    ('<|endoftext|>', '<|pad|>')
    >>> check_special_tokens("<|endoftext|>")
    Traceback (most recent call last):
    bpe_dask.errors.BpeDaskError: special tokens must be a list of strings, not one string
    """
    if isinstance(special_tokens, str):
        raise BpeDaskError("special tokens must be a list of strings, not one string")
    tokens = tuple(special_tokens)
    for token in tokens:
        if not isinstance(token, str) or not token:
            raise BpeDaskError("special tokens must be non-empty strings")
        try:
            token.encode("utf-8")
        except UnicodeEncodeError:
            raise BpeDaskError(f"special token {token!r} is not valid Unicode text") from None
    repeated = sorted({t for t in tokens if tokens.count(t) > 1})
    if repeated:
        raise BpeDaskError(f"special token given twice: {repeated[0]!r}")
    return tokens


# Counting keeps each chunk's pre-tokens, since most chunks (" the", "\nHello,") recur from one
# block to the next. The cache is bounded by the characters it holds, and long chunks (a line of
# minified JSON, base64), which rarely recur, are not kept: a worker's memory stays bounded.
CACHE_CHARS = 1 << 23
CACHED_CHUNK_MAX = 64


class Pretokenizer(SafeCuts):
    """A split pattern and special tokens: pre-tokens, their counts, and (``SafeCuts``) safe cuts.

    >>> pretokenizer = Pretokenizer(["<|endoftext|>"], "gpt4")
    >>> pretokenizer.pretokens("Hello world<|endoftext|>it's 12345!")
    ['Hello', ' world', 'it', "'s", ' ', '123', '45', '!']
    >>> list(pretokenizer.split("a<|endoftext|>b"))
    [('a', False), ('<|endoftext|>', True), ('b', False)]
    >>> pretokenizer.count("the cat the hat")
    {'the': 1, ' cat': 1, ' the': 1, ' hat': 1}
    """

    def __init__(self, special_tokens: Iterable[str] = (), pattern: str | SplitPattern = GPT2) -> None:
        # Longest first, so that where several match at one place the longest wins
        # (docs/exactness.md#special-tokens).
        tokens = tuple(sorted(set(check_special_tokens(special_tokens)), key=len, reverse=True))
        super().__init__(tokens, split_pattern(pattern))
        alternation = "|".join(regex.escape(token) for token in self.special_tokens)
        self._specials = regex.compile(f"({alternation})") if self.special_tokens else None  # kept by split
        # The same alternation over UTF-8: a token starts with a byte that starts a character, so it
        # matches bytes exactly where it matches the text.
        escaped = b"|".join(regex.escape(token.encode("utf-8")) for token in self.special_tokens)
        self._special_bytes = regex.compile(escaped) if self.special_tokens else None
        self._pretoken = finder(self.pattern)  # a pattern of one's own under a time limit
        self._chunk = re.compile(self.pattern.chunk) if self.pattern.chunk else None
        self._pretokens_of: dict[str, tuple[str, ...]] = {}
        self._cached_chars = 0

    def __reduce__(self):  # rebuilt where it lands: the compiled patterns stay out of pickles
        return Pretokenizer, (self.special_tokens, self.pattern)

    # --- pre-tokens ----------------------------------------------------------------------------

    def split(self, text: str) -> Iterator[tuple[str, bool]]:
        """The text between special tokens (``False``) and the special tokens (``True``), in order."""
        for n, piece in enumerate(self._split(text)):
            if piece:
                yield piece, n % 2 == 1  # the split's group: a special token

    def uncovered(self, text: str) -> str:
        """The characters of ``text`` that no pre-token covers, special tokens aside, in order. The
        built-in patterns match every character; a pattern of one's own may leave some out, and such
        text is never counted, so a tokenizer trained with it cannot encode it.

        >>> Pretokenizer(["<|endoftext|>"], r"\\w+").uncovered("Hello, world!<|endoftext|>123")
        ', !'
        """
        left = []
        for piece in self.pieces(text):
            position = 0
            for match in self._pretoken.finditer(piece):
                left.append(piece[position : match.start()])
                position = max(position, match.end())
            left.append(piece[position:])
        return "".join(left)

    def pieces(self, text: str) -> list[str]:
        """The text between special tokens: pre-tokens never cross a special token."""
        return self._split(text)[::2]

    def _split(self, text: str) -> list[str]:
        """The text between special tokens and the special tokens, in turn, beginning and ending with
        text (maybe empty)."""
        return [text] if self._specials is None else self._specials.split(text)

    def piece_bounds(self, data: bytes) -> np.ndarray:
        """Where each piece of UTF-8 ``data`` between special tokens starts and ends, ``[start, end,
        start, ...]`` in bytes: the special tokens lie between an end and the next start."""
        spans = self._special_spans(data, np.empty(0, np.int64))
        return np.concatenate(([0], spans.ravel(), [len(data)]), dtype=np.int64)

    def document_bounds(self, data: bytes, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``piece_bounds`` for UTF-8 documents that each stand alone, as if a special token stood
        between any two: ``data`` holds them back to back, the ``k``-th ending at ``ends[k]``. Gives
        the bounds of their pieces, and for each gap between two pieces whether it is the end of a
        document (``True``, an empty gap) or a special token. The joined bytes are searched at once
        (why that is exact: docs/exactness.md#long-texts-and-documents).
        """
        boundaries = np.asarray(ends, np.int64)[:-1]
        specials = self._special_spans(data, boundaries)
        gap_starts = np.concatenate([specials[:, 0], boundaries])
        gap_ends = np.concatenate([specials[:, 1], boundaries])
        is_boundary = np.concatenate([np.zeros(len(specials), bool), np.ones(len(boundaries), bool)])
        order = np.lexsort((gap_ends, gap_starts))  # a document's end before a token that starts there
        bounds = np.empty(2 * len(order) + 2, np.int64)
        bounds[0], bounds[-1] = 0, len(data)
        bounds[1:-1:2], bounds[2:-1:2] = gap_starts[order], gap_ends[order]
        return bounds, is_boundary[order]

    def _special_spans(self, data: bytes, boundaries: np.ndarray) -> np.ndarray:
        """``[start, end]`` of every special-token occurrence in each document, in ``data``'s offsets."""
        if self._special_bytes is None:
            return np.empty((0, 2), np.int64)
        spans = np.array([m.span() for m in self._special_bytes.finditer(data)], np.int64).reshape(-1, 2)
        if len(spans) and len(boundaries):
            following = np.searchsorted(boundaries, spans[:, 0], side="right")  # first boundary past a start
            inside = following < len(boundaries)
            if (boundaries[following[inside]] < spans[inside, 1]).any():  # an occurrence crosses one
                edges = [0, *boundaries.tolist(), len(data)]
                each = [
                    m.span() for a, b in pairwise(edges) for m in self._special_bytes.finditer(data, a, b)
                ]
                spans = np.array(each, np.int64).reshape(-1, 2)
        return spans

    def pretokens(self, text: str) -> list[str]:
        """Every pre-token of ``text`` in order, special tokens dropped."""
        return [token for piece in self.pieces(text) for token in self._pretoken.findall(piece)]

    def count(self, text: str, counts: dict[str, int] | None = None) -> dict[str, int]:
        """How often each pre-token occurs in ``text``, added into ``counts`` when given.

        With a ``chunk`` pattern the text is first cut into chunks (``" the"``, ``"\\nhello,"``), and
        only each *distinct* chunk is pre-tokenized, its pre-tokens counted as often as it occurs.
        """
        return self.count_pieces(self.pieces(text), counts)

    def count_pieces(self, pieces: Iterable[str], counts: dict[str, int] | None = None) -> dict[str, int]:
        """How often each pre-token occurs in ``pieces``, text already split at its special tokens
        (``pieces``), added into ``counts`` when given."""
        if counts is None:
            counts = {}  # a plain dict: a Counter's __missing__ is Python code, slow on this hot path
        if self._chunk is None:
            for piece in pieces:
                for token in self._pretoken.findall(piece):
                    counts[token] = counts.get(token, 0) + 1
            return counts
        chunks: Counter[str] = Counter()
        for piece in pieces:
            chunks.update(self._chunk.findall(piece))
        cache = self._pretokens_of
        for chunk, times in chunks.items():
            pretokens = cache.get(chunk)
            if pretokens is None:
                pretokens = tuple(self._pretoken.findall(chunk))  # a tuple of str: untracked by the GC
                if len(chunk) <= CACHED_CHUNK_MAX:
                    if self._cached_chars > CACHE_CHARS:
                        cache.clear()
                        self._cached_chars = 0
                    cache[chunk] = pretokens
                    self._cached_chars += len(chunk)
            for token in pretokens:
                counts[token] = counts.get(token, 0) + times
        return counts
