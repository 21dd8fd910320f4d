"""Safe cuts: a split pattern's cut rule and special tokens in, where text may be cut out. Pure: no I/O.

A position ``p`` is a safe cut when pre-tokenizing ``text[:p]`` and ``text[p:]`` apart gives exactly
the pre-tokens of ``text``: no special-token occurrence straddles ``p``, and the pattern's cut rule
allows the two characters around it (why that suffices: docs/exactness.md#safe-cuts). ``SafeCuts``
is the part of ``Pretokenizer`` that finds them: the planner cuts files into byte ranges with it
(``first_cut_in_bytes``), the map tasks cut ranges into blocks and the tokenizer cuts a stream of
text into pieces (``recut``), so all three cut by one rule.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator

import regex

from bpe_dask.rules.patterns import SplitPattern


class NoCutError(Exception):
    """``SafeCuts.recut`` held more text than its limit without finding a safe cut.

    >>> from bpe_dask.rules.pretokenize import Pretokenizer
    >>> list(Pretokenizer().recut(["a" * 10, "b" * 10], limit=15))
    Traceback (most recent call last):
    bpe_dask.rules.cuts.NoCutError: no safe cut in 20 characters
    """


class SafeCuts:
    """Where text may be cut for a split pattern and special tokens (longest first).

    >>> from bpe_dask.rules.pretokenize import Pretokenizer
    >>> cuts = Pretokenizer(["<|endoftext|>"])  # a Pretokenizer is SafeCuts
    >>> cuts.first_cut("hello world", 1, 11)  # before the space: " world" is one pre-token
    5
    >>> cuts.straddled("a<|endoftext|>b", 3), cuts.first_cut("ab<|endoftext|>", 1, 15)
    (True, 2)
    >>> list(Pretokenizer().recut(["hel", "lo wor", "ld!"]))  # each piece ends at the last cut seen
    ['hello', ' world', '!']
    """

    def __init__(self, special_tokens: tuple[str, ...], pattern: SplitPattern) -> None:
        self.special_tokens, self.pattern = special_tokens, pattern
        rule = pattern.cut_rule
        self._cuts = regex.compile(rule) if rule else None
        self._cuts_backwards = regex.compile(rule, flags=regex.REVERSE) if rule else None
        self._inner_pairs = {token[i : i + 2] for token in special_tokens for i in range(len(token) - 1)}
        longest = max((len(t) for t in special_tokens), default=0)
        # Characters a cut at p must see before and after it: the one on each side, and enough
        # to see any special-token occurrence that straddles p.
        self.context = max(1, longest - 1)

    def straddled(self, text: str, p: int) -> bool:
        """Whether a special-token occurrence starts before ``p`` and ends after it
        (docs/exactness.md#special-tokens)."""
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
        specials = sorted(p for token in self.special_tokens for p in _occurrences(text, token, lo, hi))
        others = (match.end() for match in self._cuts.finditer(text, lo - 1, hi)) if self._cuts else ()
        candidates = itertools.chain(specials, others)  # others looked for only once no special start is one
        return next(
            (p for p in candidates if not self.straddled(text, p) and (allowed is None or allowed(p))), None
        )

    def last_cut(self, text: str, lo: int, hi: int) -> int | None:
        """The last safe cut in ``[lo, hi)``, of either kind."""
        lo = max(lo, 1)
        backwards = self._cuts_backwards.finditer(text, lo - 1, hi) if self._cuts_backwards else ()
        cut = next((m.end() for m in backwards if not self.straddled(text, m.end())), None)
        for token in self.special_tokens:
            floor = lo if cut is None else cut + 1
            cut = next(
                (p for p in _occurrences_backwards(text, token, floor, hi) if not self.straddled(text, p)),
                cut,
            )
        return cut

    def first_cut_in_bytes(self, data: bytes, lo: int, hi: int) -> int | None:
        """The byte offset of the first safe cut in bytes ``[lo, hi)`` of UTF-8 ``data``, which may begin
        and end mid-character, preferring the start of a special token as ``first_cut`` does. Invalid
        bytes are judged as the class "other" (why: docs/exactness.md#long-texts-and-documents)."""
        first = character_start(data, 0)  # skip the tail of a character cut off by the window
        lo, hi = character_start(data, max(lo, first + 1)), character_start(data, hi)
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

    def recut(self, texts: Iterable[str], limit: int | None = None, least: int = 0) -> Iterator[str]:
        """The text of ``texts`` again, in pieces cut only at safe places, lazily: each ends at the
        last safe cut in the text seen so far (docs/exactness.md#long-texts-and-documents), once
        ``least`` characters are held (but the last piece). With ``limit``, holding more than
        ``limit`` characters without a cut raises ``NoCutError``.

        >>> from bpe_dask.rules.pretokenize import Pretokenizer
        >>> list(Pretokenizer().recut(["hel", "lo wor", "ld!"], least=8))  # looked for once 9 are held
        ['hello', ' world!']
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
            if hi <= judged or size < least:
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


def character_start(data: bytes, p: int) -> int:
    """``p``, moved past UTF-8 continuation bytes (at most three) to where a character starts.

    >>> character_start("éé".encode("utf-8"), 1)  # within the first "é": the second starts at 2
    2
    """
    end = min(len(data), p + 3)
    while p < end and 0x80 <= data[p] < 0xC0:
        p += 1
    return p
