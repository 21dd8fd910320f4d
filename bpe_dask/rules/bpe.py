"""The one BPE step, as minbpe writes it: a sequence of parts in, the same with one pair joined out.

``merge`` joins every occurrence of a pair, left to right, without overlaps; ``pair_counts`` counts
the neighbouring pairs; ``allowed`` says which tokens training may make. The reference trainer and
the reference encoder (``reference``) are built on these and nothing else, so that what "applying a
merge" means is written once; the fast
engines (``stages.merge``, ``Tokenizer``, ``compiled``) are held to those references by the tests.
Parts may be anything comparable: token ids, or the tokens' bytes. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from itertools import pairwise
from typing import TypeVar

Symbol = TypeVar("Symbol", bound=Hashable)


def merge_pair(ids: Sequence[Symbol], pair: tuple[Symbol, Symbol], idx: Symbol) -> list[Symbol]:
    """``ids`` with every occurrence of ``pair`` replaced by ``idx``, left to right, no overlaps.

    >>> merge_pair([1, 2, 3, 1, 2], (1, 2), 4)
    [4, 3, 4]
    >>> merge_pair([b"a", b"a", b"a"], (b"a", b"a"), b"aa")  # the leftmost occurrence wins
    [b'aa', b'a']
    """
    out: list[Symbol] = []
    i = 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(idx)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def pair_counts(
    ids: Sequence[Symbol], counts: dict[tuple[Symbol, Symbol], int] | None = None, weight: int = 1
) -> dict[tuple[Symbol, Symbol], int]:
    """How often each neighbouring pair occurs in ``ids``, each occurrence counted ``weight`` times,
    added into ``counts`` when given (a word that occurs ``weight`` times in a corpus).

    >>> pair_counts([1, 2, 3, 1, 2])
    {(1, 2): 2, (2, 3): 1, (3, 1): 1}
    >>> pair_counts([1, 1, 1], {(1, 1): 1}, weight=10)  # overlapping pairs count each time
    {(1, 1): 21}
    """
    counts = {} if counts is None else counts
    for pair in pairwise(ids):
        counts[pair] = counts.get(pair, 0) + weight
    return counts


def words_in(token: bytes) -> int:
    """How many words ``token`` spans: runs of bytes other than the space (SuperBPE's count; a tab, a
    line end or punctuation does not part words).

    >>> words_in(b" of the"), words_in(b", and"), words_in(b"  "), words_in(b"\\n\\nThe")
    (2, 2, 0, 1)
    """
    return sum(1 for run in token.split(b" ") if run)


def allowed(
    token: bytes,
    max_token_length: int | None = None,
    max_words: int | None = None,
    forbid: Iterable[bytes] = (),
) -> bool:
    """Whether training may make ``token``: at most ``max_token_length`` bytes, at most ``max_words``
    words (``words_in``), holding none of ``forbid`` (None and nothing: no limit). A pair whose token
    is not allowed is never merged, however frequent; the same pair never becomes allowed later, as a
    pair's token is always the same bytes.

    >>> allowed(b" of the cat", max_words=2), allowed(b"see: the", forbid=[b": "])
    (False, False)
    """
    return (
        (max_token_length is None or len(token) <= max_token_length)
        and (max_words is None or words_in(token) <= max_words)
        and not any(part in token for part in forbid)
    )


_UNMERGEABLE = (float("inf"), -1)  # (rank, merged id) of a pair no merge joins


def merge_lowest_first(parts: list[int], ranks: dict[tuple[int, int], tuple[int, int]]) -> tuple[int, ...]:
    """``parts`` (token ids) with the merges ``ranks`` holds, ``(left, right) -> (rank, merged id)``,
    applied: the lowest-ranked neighbouring pair first, the leftmost of equals, one occurrence at a
    time. What ``merge`` of the lowest-ranked pair, again and again, gives (docs/exactness.md#encoding),
    faster: each pair's rank is kept, and only the two next to a join are looked up again.

    >>> merge_lowest_first([1, 2, 3, 1, 2], {(1, 2): (0, 4), (4, 3): (1, 5)})
    (5, 4)
    """
    parts = list(parts)
    rank_of = ranks.get
    pair_ranks = [rank_of(pair, _UNMERGEABLE) for pair in pairwise(parts)]  # [i]: parts i, i + 1
    while pair_ranks:
        best = min(pair_ranks)
        if best is _UNMERGEABLE:
            break
        i = pair_ranks.index(best)
        parts[i : i + 2] = [best[1]]
        del pair_ranks[i]
        if i > 0:
            pair_ranks[i - 1] = rank_of((parts[i - 1], parts[i]), _UNMERGEABLE)
        if i < len(pair_ranks):
            pair_ranks[i] = rank_of((parts[i], parts[i + 1]), _UNMERGEABLE)
    return tuple(parts)
