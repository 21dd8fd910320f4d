"""A trained vocabulary: ``vocab`` (id -> bytes), ``merges`` and special tokens in, the tables an
encoder reads, decoding, and the vocabulary of its first ids out. Pure: no I/O.

``start`` lays out the ids training gives: the bytes (or a base's tokens), the special tokens, then
one per merge. ``Vocabulary`` knows what the ids are: the id of each token's bytes (the first id,
where two hold the same bytes), of each special token, and the merges by ids, ``(left id, right
id) -> (rank, merged id)``, so that merging never touches bytes.
"""

from __future__ import annotations

from collections.abc import Iterable

from bpe_dask.errors import BpeDaskError
from bpe_dask.rules.bpe import merge_lowest_first
from bpe_dask.rules.pretokenize import check_special_tokens


def start(
    special_tokens: Iterable[str], base: tuple[dict[int, bytes], list[tuple[bytes, bytes]]] | None = None
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """The vocabulary and merges training starts from: ids 0-255 the bytes, or ``base``'s (each of
    its tokens keeps its id), then each special token it does not hold under the next free id. Each
    merge then takes the next free id (``max(vocab) + 1``): the one place the ids are laid out.

    >>> vocab, merges = start(["<|endoftext|>"])
    >>> len(vocab), vocab[256], merges
    (257, b'<|endoftext|>', [])
    >>> start(["<|endoftext|>", "<|pad|>"], (vocab, merges))[0][257]  # the one the base lacks
    b'<|pad|>'
    """
    vocab, merges = (dict(base[0]), list(base[1])) if base else ({i: bytes([i]) for i in range(256)}, [])
    for token in special_tokens:
        special_id(vocab, token)
    return vocab, merges


def special_id(vocab: dict[int, bytes], token: str) -> int:
    """The first id of ``vocab`` that holds the special token and is not a byte's (a special token
    "\\n" is not byte 10: CS336's vocabularies put ``<|endoftext|>`` at id 0 and the bytes after it),
    or, for a token ``vocab`` lacks, the next free id, which it is added under.

    >>> vocab = {i: bytes([i]) for i in range(256)}
    >>> special_id(vocab, "\\n"), special_id({**vocab, 0: b"<|endoftext|>"}, "<|endoftext|>"), len(vocab)
    (256, 0, 257)
    """
    data = token.encode("utf-8")
    found = [i for i, t in vocab.items() if t == data and (len(data) > 1 or i >= 256)]
    if found:
        return min(found)
    new_id = max(vocab, default=-1) + 1
    vocab[new_id] = data
    return new_id


class Vocabulary:
    """Ids by bytes (``ids_by_bytes``), special ids (``special_ids``), each byte's id (``byte_ids``),
    the merges by ids (``merge_ranks``), and ``decode``.

    A special token the vocabulary lacks is added to it, under the next free id. Raises ``KeyError``
    for a vocabulary without a token for each byte, or a merge of tokens it does not hold.

    >>> vocabulary = Vocabulary({**{i: bytes([i]) for i in range(256)}, 256: b"hi"}, [(b"h", b"i")])
    >>> vocabulary.token_id(b"hi"), vocabulary.decode([256, 33]), vocabulary.merged(b"hi!")
    (256, 'hi!', (256, 33))
    >>> vocabulary.merge_ranks, Vocabulary(vocabulary.vocab, [], ["<|endoftext|>"]).special_ids
    ({(104, 105): (0, 256)}, {'<|endoftext|>': 257})
    """

    def __init__(
        self, vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], special_tokens: Iterable[str] = ()
    ) -> None:
        self.vocab = dict(vocab)
        self.merges = list(merges)
        self.special_tokens = list(check_special_tokens(special_tokens))
        ids: dict[bytes, int] = {}
        for i, token in sorted(self.vocab.items()):
            ids.setdefault(token, i)  # where two ids hold the same bytes, the first is the token's
        self.ids_by_bytes = ids
        self.special_ids = {token: special_id(self.vocab, token) for token in self.special_tokens}
        for i in self.special_ids.values():
            ids.setdefault(self.vocab[i], i)  # a special token the vocabulary lacked, added
        self.byte_ids = [ids[bytes([b])] for b in range(256)]
        self.merge_ranks = {
            (ids[a], ids[b]): (rank, ids[a + b]) for rank, (a, b) in enumerate(self.merges) if a + b in ids
        }

    @property
    def first_size(self) -> int:
        """The ids before the first merge: the 256 bytes and the special tokens (``start``'s layout)."""
        return 256 + len(self.special_tokens)

    def token_id(self, token: str | bytes) -> int:
        """The id of one whole token (a special token's text, or a token's bytes); a ``KeyError`` for
        anything else.

        >>> Vocabulary({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"]).token_id("<|endoftext|>")
        256
        """
        if isinstance(token, str) and token in self.special_ids:
            return self.special_ids[token]
        token = token.encode("utf-8") if isinstance(token, str) else token
        try:
            return self.ids_by_bytes[token]
        except KeyError:
            raise KeyError(f"{token!r} is not a token of this vocabulary") from None

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``; bytes that are not valid UTF-8 become U+FFFD.

        >>> Vocabulary({i: bytes([i]) for i in range(256)}, []).decode([104, 105, 0xE2, 33])
        'hi�!'
        """
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")

    def merged(self, word: bytes) -> tuple[int, ...]:
        """The ids of one pre-token's bytes, its merges applied (``bpe.merge_lowest_first``).

        >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"ll", 257: b"ell"}
        >>> Vocabulary(vocab, [(b"l", b"l"), (b"e", b"ll")]).merged(b"hello")
        (104, 257, 111)
        """
        return merge_lowest_first([self.byte_ids[b] for b in word], self.merge_ranks)

    def first_ids(self, vocab_size: int) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
        """The vocabulary and merges of the first ``vocab_size`` ids (at least the bytes and the special
        tokens): the 256 bytes, the special tokens and the first ``vocab_size - 256 -
        len(special_tokens)`` merges, which is what training to that size learns (the merges of a
        smaller vocabulary are the first merges of a larger one). Ids stay as they are.

        >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi", 257: b"hi!"}
        >>> vocab, merges = Vocabulary(vocab, [(b"h", b"i"), (b"hi", b"!")]).first_ids(257)
        >>> len(vocab), vocab[256], merges
        (257, b'hi', [(b'h', b'i')])
        """
        merges = self.merges[: vocab_size - self.first_size]
        # What the merges make, and what they join (the same, for merges that each join what earlier
        # ones made, as trained ones do); a merge whose token is missing changes nothing.
        tokens = (self.ids_by_bytes.get(token) for a, b in merges for token in (a + b, a, b))
        kept = {*self.byte_ids, *self.special_ids.values(), *(i for i in tokens if i is not None)}
        return {i: self.vocab[i] for i in sorted(kept)}, merges


def training_base(vocabulary: Vocabulary, inherit: int | None, name: str) -> Vocabulary:
    """``vocabulary`` cut to its first ``inherit`` merges (all of them: None) and its tokens they make,
    as continued training starts from it (docs/exactness.md#continued-training), or a one-line
    ``BpeDaskError`` naming ``name`` where training cannot start from it exactly: ``inherit`` beyond
    its merges, ids that leave a hole the new tokens would fill, a token of several bytes (special
    tokens aside) that its merges do not make of its own bytes.

    >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi", 257: b"hi!"}
    >>> base = training_base(Vocabulary(vocab, [(b"h", b"i"), (b"hi", b"!")]), 1, "base")
    >>> len(base.vocab), base.merges
    (257, [(b'h', b'i')])
    >>> training_base(Vocabulary({**vocab, 258: b"hey"}, [(b"h", b"i"), (b"hi", b"!")]), None, "base")
    Traceback (most recent call last):
    bpe_dask.errors.BpeDaskError: base: token 258 (b'hey') is not what its merges make of its bytes ...
    """
    merges = vocabulary.merges
    if inherit is not None:
        if isinstance(inherit, bool) or not isinstance(inherit, int) or not 0 <= inherit <= len(merges):
            raise BpeDaskError(f"inherit={inherit!r} is not one of 0 to {name}'s {len(merges):,} merges")
        kept, merges = vocabulary.first_ids(vocabulary.first_size + inherit)
        vocabulary = Vocabulary(kept, merges, vocabulary.special_tokens)
    specials = set(vocabulary.special_ids.values())
    hole = next((i for i in range(max(vocabulary.vocab) + 1) if i not in vocabulary.vocab), None)
    if hole is not None:
        largest = max(vocabulary.vocab)
        raise BpeDaskError(
            f"{name}: its ids leave {hole:,} free below its largest, {largest:,} "
            f"({vocabulary.vocab[largest]!r}), where the new tokens would go; train from all its merges "
            "(leave inherit= out), or from a base whose ids have no hole"
        )
    for i, token in sorted(vocabulary.vocab.items()):
        if len(token) > 1 and i not in specials and vocabulary.merged(token) != (i,):
            raise BpeDaskError(
                f"{name}: token {i} ({token!r}) is not what its merges make of its bytes (nor a special "
                "token): training cannot continue from it exactly"
            )
    return vocabulary
