"""Pre-tokenization rules: text in, pre-tokens and safe cuts out. Pure: no I/O.

Everything that decides *what* gets counted lives here, and nowhere else:

- ``SplitPattern`` (defined in ``patterns``): a pre-tokenization regex (GPT-2's by default;
  GPT-4's and o200k's are built in, and any other regex may be given) with the rule that says
  between which two characters text may be cut without changing its pre-tokens.
- ``Pretokenizer``: a pattern plus special tokens. It splits the special tokens out first
  (longest first where several match at one place), pre-tokenizes and counts the rest, and
  finds safe cuts. The planner cuts files into byte ranges with it (``first_cut_in_bytes``),
  the map tasks cut ranges into blocks and the tokenizer cuts a stream of text into pieces
  (``recut``), so all three cut by one rule.

Why a cut is safe. A position ``p`` is a safe cut when pre-tokenizing ``text[:p]`` and
``text[p:]`` apart gives exactly the pre-tokens of ``text``. Two conditions make it so:

1. *No special-token occurrence straddles p* (starts before ``p`` and ends after it). Then no
   match of the left-to-right, longest-first special-token scan crosses ``p``, so the scan of the
   whole text is the scans of the two halves put together, and so are the pieces between special
   tokens, except that a piece across ``p`` is cut in two at ``p``.
2. *The pattern's cut rule allows the two characters around p*, ``x = text[p - 1]`` and
   ``y = text[p]``, so that cutting that piece at ``p`` leaves its pre-tokens unchanged.

``patterns`` says, for each built-in pattern, which pairs its rule allows and why each such cut is
safe in any text; a pattern of one's own has no rule, and is cut only where a special token starts.

The rule looks at one character on each side of ``p``, and condition 1 at the longest special
token's length, so a cut can be judged from a short window around it. Cutting is also how the
map tasks stay exact for any number of partitions: the tests check it against the plain
reference trainer (``bpe_dask.rules.reference``) for chunk sizes down to one byte.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from itertools import pairwise

import numpy as np
import regex

from bpe_dask.errors import BpeDaskError
from bpe_dask.rules.pattern_limit import finder
from bpe_dask.rules.patterns import GPT2, WHITESPACE, SplitPattern, split_pattern

__all__ = [  # the patterns' names are here too, beside the rest of the rules
    "GPT2", "WHITESPACE", "NoCutError", "Pretokenizer", "SplitPattern",
    "check_special_tokens", "split_pattern",
]  # fmt: skip


def check_special_tokens(special_tokens: Iterable[str]) -> tuple[str, ...]:
    """The special tokens as a tuple, if each is a non-empty string of valid Unicode, given once."""
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


class NoCutError(Exception):
    """``Pretokenizer.recut`` held more text than its limit without finding a safe cut."""


# Counting keeps each chunk's pre-tokens, since most chunks (" the", "\nHello,") recur from one
# block to the next. The cache is bounded by the characters it holds, and long chunks (a line of
# minified JSON, base64), which rarely recur, are not kept: a worker's memory stays bounded.
CACHE_CHARS = 1 << 23
CACHED_CHUNK_MAX = 64


class Pretokenizer:
    """A split pattern and special tokens: pre-tokens, their counts, and safe cuts."""

    def __init__(self, special_tokens: Iterable[str] = (), pattern: str | SplitPattern = GPT2) -> None:
        self.pattern = split_pattern(pattern)
        # Longest first, so that where several match at one place the longest wins.
        self.special_tokens = tuple(sorted(set(check_special_tokens(special_tokens)), key=len, reverse=True))
        alternation = "|".join(regex.escape(token) for token in self.special_tokens)
        self._specials = regex.compile(alternation) if self.special_tokens else None
        # The same alternation over UTF-8: a token starts with a byte that starts a character, so it
        # matches bytes exactly where it matches the text.
        escaped = b"|".join(regex.escape(token.encode("utf-8")) for token in self.special_tokens)
        self._special_bytes = regex.compile(escaped) if self.special_tokens else None
        self._pretoken = finder(self.pattern)  # a pattern of one's own under a time limit
        rule = self.pattern.cut_rule
        self._cuts = regex.compile(rule) if rule else None
        self._cuts_backwards = regex.compile(rule, flags=regex.REVERSE) if rule else None
        self._chunk = re.compile(self.pattern.chunk) if self.pattern.chunk else None
        self._pretokens_of: dict[str, tuple[str, ...]] = {}
        self._cached_chars = 0
        self._inner_pairs = {token[i : i + 2] for token in self.special_tokens for i in range(len(token) - 1)}
        longest = max((len(t) for t in self.special_tokens), default=0)
        # Characters a cut at p must see before and after it: the one on each side, and enough
        # to see any special-token occurrence that straddles p.
        self.context = max(1, longest - 1)

    def __reduce__(self):  # rebuilt where it lands: the compiled patterns stay out of pickles
        return Pretokenizer, (self.special_tokens, self.pattern)

    # --- pre-tokens ----------------------------------------------------------------------------

    def split(self, text: str) -> Iterator[tuple[str, bool]]:
        """The text between special tokens (``False``) and the special tokens (``True``), in order."""
        if self._specials is None:
            if text:
                yield text, False
            return
        start = 0
        for match in self._specials.finditer(text):
            if match.start() > start:
                yield text[start : match.start()], False
            yield match.group(), True
            start = match.end()
        if start < len(text):
            yield text[start:], False

    def pieces(self, text: str) -> list[str]:
        """The text between special tokens: pre-tokens never cross a special token."""
        return [text] if self._specials is None else self._specials.split(text)

    def piece_bounds(self, data: bytes) -> np.ndarray:
        """``pieces`` for UTF-8 ``data``: where each piece starts and ends, ``[start, end, start, ...]``."""
        bounds = [0]
        if self._special_bytes is not None:
            for match in self._special_bytes.finditer(data):
                bounds += [match.start(), match.end()]
        bounds.append(len(data))
        return np.array(bounds, np.int64)

    def document_bounds(self, data: bytes, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``piece_bounds`` for UTF-8 documents that each stand alone, as if a special token stood
        between any two: ``data`` holds them back to back, the ``k``-th ending at ``ends[k]``. Gives
        the bounds of their pieces, and for each gap between two pieces whether it is the end of a
        document (``True``, an empty gap) or a special token.

        The joined bytes are searched for special tokens at once. Where no occurrence crosses from
        one document into the next, the occurrences are exactly each document's own (the search
        reaches each document's start with nothing carried over, and from there finds what the
        document alone holds); where one does cross, the documents are searched one by one.
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
        return self._count_pieces(self.pieces(text), counts)

    def count_documents(
        self, documents: Iterable[str], counts: dict[str, int] | None = None
    ) -> dict[str, int]:
        """``count`` of documents that each stand alone: no pre-token crosses from one to the next."""
        return self._count_pieces((piece for text in documents for piece in self.pieces(text)), counts)

    def _count_pieces(self, pieces: Iterable[str], counts: dict[str, int] | None) -> dict[str, int]:
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

    # --- safe cuts -----------------------------------------------------------------------------

    def straddled(self, text: str, p: int) -> bool:
        """Whether a special-token occurrence starts before ``p`` and ends after it."""
        if text[p - 1 : p + 1] not in self._inner_pairs:  # no token holds these two characters
            return False
        return any(
            text.startswith(token, s)
            for token in self.special_tokens
            for s in range(max(0, p - len(token) + 1), p)
        )

    def first_cut(
        self, text: str, lo: int, hi: int, allowed: Callable[[int], bool] | None = None
    ) -> int | None:
        """The first safe cut in ``[lo, hi)`` (and ``allowed``), preferring the start of a special
        token (a document boundary) to any other. ``text`` must run ``context`` characters on
        either side."""
        lo = max(lo, 1)
        special = self._first_special_start(text, lo, hi, allowed)
        if special is not None or self._cuts is None:
            return special
        for match in self._cuts.finditer(text, lo - 1, hi):
            p = match.end()
            if not self.straddled(text, p) and (allowed is None or allowed(p)):
                return p
        return None

    def last_cut(self, text: str, lo: int, hi: int) -> int | None:
        """The last safe cut in ``[lo, hi)``, of either kind."""
        lo = max(lo, 1)
        cut = None
        if self._cuts_backwards is not None:
            for match in self._cuts_backwards.finditer(text, lo - 1, hi):
                if not self.straddled(text, match.end()):
                    cut = match.end()
                    break
        for token in self.special_tokens:
            floor = lo if cut is None else cut + 1
            cut = next(
                (p for p in _occurrences_backwards(text, token, floor, hi) if not self.straddled(text, p)),
                cut,
            )
        return cut

    def _first_special_start(
        self, text: str, lo: int, hi: int, allowed: Callable[[int], bool] | None
    ) -> int | None:
        starts = sorted(p for token in self.special_tokens for p in _occurrences(text, token, lo, hi))
        return next(
            (p for p in starts if not self.straddled(text, p) and (allowed is None or allowed(p))), None
        )

    def first_cut_in_bytes(self, data: bytes, lo: int, hi: int) -> int | None:
        """``first_cut`` for UTF-8 bytes that may begin and end mid-character: the byte offset.

        Bytes that are not valid UTF-8 are judged as characters of the class "other", the class
        of U+FFFD that ``--utf8-errors replace`` turns them into. No rule cuts between two of
        them, so every cut is a place where a decoder starts afresh.
        """
        first = _character_start(data, 0)  # skip the tail of a character cut off by the window
        lo, hi = _character_start(data, max(lo, first + 1)), _character_start(data, hi)
        if lo >= hi:
            return None
        text = data[first:].decode("utf-8", "surrogateescape")
        char_lo = len(data[first:lo].decode("utf-8", "surrogateescape"))
        char_hi = char_lo + len(data[lo:hi].decode("utf-8", "surrogateescape"))
        # Keep invalid bytes with their neighbours, so each bad spot stays in one range and the
        # job reports the first one whatever the partitioning.
        cut = self.first_cut(
            text, char_lo, char_hi, lambda p: not (_is_undecodable(text[p - 1]) or _is_undecodable(text[p]))
        )
        return None if cut is None else first + len(text[:cut].encode("utf-8", "surrogateescape"))

    def recut(self, texts: Iterable[str], limit: int | None = None) -> Iterator[str]:
        """The text of ``texts`` again, in pieces cut only at safe places, lazily.

        Each piece ends at the last safe cut in the text seen so far, so pieces follow the input's
        own sizes and text is held back only until a cut comes; each character is searched once.
        With ``limit``, holding more than ``limit`` characters without a cut raises ``NoCutError``.
        """
        held: list[str] = []  # text seen and not yet given out
        size = 0  # its length
        judged = 1  # positions below this in the held text are known not to be cuts
        for text in texts:
            if not text:
                continue
            held.append(text)
            size += len(text)
            hi = size - self.context + 1  # a cut at p needs to see up to p + context
            if hi <= judged:
                continue
            start = max(0, judged - self.context)
            cut = self.last_cut(_tail(held, size - start), judged - start, hi - start)
            if cut is None:
                judged = hi
                if limit is not None and size > limit:
                    raise NoCutError(f"no safe cut in {size} characters")
                continue
            whole = "".join(held)
            cut += start
            yield whole[:cut]
            held, size, judged = [whole[cut:]], size - cut, hi - cut
        if size:
            yield "".join(held)


def _occurrences(text: str, token: str, lo: int, hi: int) -> Iterator[int]:
    position = text.find(token, lo)
    while 0 <= position < hi:
        yield position
        position = text.find(token, position + 1)


def _occurrences_backwards(text: str, token: str, lo: int, hi: int) -> Iterator[int]:
    position = text.rfind(token, lo, hi + len(token) - 1)
    while position >= lo:
        yield position
        position = text.rfind(token, lo, position + len(token) - 1)


def _tail(pieces: list[str], length: int) -> str:
    """The last ``length`` characters of the concatenation of ``pieces``, without joining them all."""
    taken: list[str] = []
    for piece in reversed(pieces):
        if length <= 0:
            break
        taken.append(piece[-length:])
        length -= len(piece)
    return "".join(reversed(taken))


def _is_undecodable(char: str) -> bool:
    """Whether ``char`` stands for a byte that is not valid UTF-8 (``surrogateescape``'s stand-ins)."""
    return "\udc80" <= char <= "\udcff"


def _character_start(data: bytes, p: int) -> int:
    """``p``, moved past UTF-8 continuation bytes (at most three) to where a character starts."""
    end = min(len(data), p + 3)
    while p < end and 0x80 <= data[p] < 0xC0:
        p += 1
    return p
