"""The tokenizer: a trained vocabulary and merges in, text to token ids and back out.

Takes ``vocab`` (id -> bytes), ``merges`` (in the order learned) and special tokens, as ``train_bpe``
returns them; ``Tokenizer`` gives ``encode``, ``encode_iterable`` and ``decode`` with the reference
encoder's semantics (``rules.reference.encode``, GPT-2's), on a Python or a compiled engine
(``encoding``, which says why threads may share a tokenizer). The interface is CS336's, with
tiktoken's ``encode_batch``, ``allowed_special`` and ``disallowed_special`` (CS336's defaults: every
special token is split out as its id, none is refused; docs/exactness.md#special-tokens). Lone
surrogates become U+FFFD first, as in tiktoken. Its files: ``files`` (``save``, ``load``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Self

import numpy as np

from bpe_dask.engines import check_engine, check_engine_supports
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.tokenizer_files import FILES
from bpe_dask.rules.pretokenize import GPT2, Pretokenizer, SplitPattern
from bpe_dask.rules.special_tokens import Allowed, SpecialTokenRules, refuse_disallowed, utf8
from bpe_dask.rules.vocabulary import Vocabulary
from bpe_dask.tokenizer import files as _files
from bpe_dask.tokenizer.encoding import COMPILED_MIN_CHARS, Encoding

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["COMPILED_MIN_CHARS", "FILES", "Tokenizer", "encoding_of"]


class Tokenizer:
    """Byte-level BPE encoding and decoding with a trained vocabulary.

    Read-only: ``vocab`` (an id added for each special token it lacked), ``merges``, ``special_tokens``,
    ``special_ids``, ``pretokenizer`` (every special token and the split pattern), ``engine``, and
    ``vocabulary`` (all of them as the ``rules.vocabulary.Vocabulary`` that encodes and decodes).

    >>> from bpe_dask.rules import reference
    >>> vocab, merges = reference.train(["low lower lowest"], 260, ["<|endoftext|>"])
    >>> tokenizer = Tokenizer(vocab, merges, ["<|endoftext|>"])
    >>> tokenizer.encode("lowest<|endoftext|>slow"), vocab[259]
    ([259, 115, 116, 256, 115, 258], b'lowe')
    >>> tokenizer.decode([259, 115, 116, 256])
    'lowest<|endoftext|>'
    >>> tokenizer
    Tokenizer(vocab_size=260, merges=3, special_tokens=['<|endoftext|>'], pattern='gpt2', engine='auto')
    """

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]],
        special_tokens: Iterable[str] | None = None,
        pattern: str | SplitPattern = GPT2,
        engine: str = "auto",
    ) -> None:
        engine = check_engine(engine)
        self._hold(Vocabulary(vocab, merges, special_tokens or ()), pattern, engine)

    @classmethod
    def _of(cls, vocabulary: Vocabulary, pattern: str | SplitPattern, engine: str) -> Self:
        """The tokenizer of a ``Vocabulary`` already built (one read from files)."""
        tokenizer = cls.__new__(cls)
        tokenizer._hold(vocabulary, pattern, check_engine(engine))
        return tokenizer

    def _hold(self, vocabulary: Vocabulary, pattern: str | SplitPattern, engine: str) -> None:
        """Hold ``vocabulary`` and what encoding with it under ``pattern`` on ``engine`` takes; refuse
        an engine that cannot run the pattern."""
        self.engine, self.vocabulary = engine, vocabulary
        self.vocab, self.merges = vocabulary.vocab, vocabulary.merges
        self.special_tokens, self.special_ids = vocabulary.special_tokens, vocabulary.special_ids
        self.pretokenizer = Pretokenizer(self.special_tokens, pattern)
        check_engine_supports(self.engine, self.pretokenizer.pattern.builtin, self.pretokenizer.pattern.spec)
        self._special_rules = SpecialTokenRules(self.pretokenizer)
        self._encoding = Encoding(vocabulary, self.pretokenizer, self.engine)

    def __repr__(self) -> str:
        return (
            f"Tokenizer(vocab_size={len(self.vocab)}, merges={len(self.merges)}, "
            f"special_tokens={self.special_tokens!r}, pattern={self.pretokenizer.pattern.spec!r}, "
            f"engine={self.engine!r})"
        )

    def truncated(self, vocab_size: int) -> Tokenizer:
        """The tokenizer of the first ``vocab_size`` ids: the 256 bytes, the special tokens and the first
        ``vocab_size - 256 - len(special_tokens)`` merges, which is what training to that size learns
        (the merges of a smaller vocabulary are the first merges of a larger one). Ids stay as they are.

        >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi", 257: b"hi!"}
        >>> Tokenizer(vocab, [(b"h", b"i"), (b"hi", b"!")]).truncated(257).encode("hi!")
        [256, 33]
        """
        first = 256 + len(self.special_tokens)
        whole = isinstance(vocab_size, int) and not isinstance(vocab_size, bool)
        if not (whole and first <= vocab_size <= len(self.vocab)):
            raise BpeDaskError(
                f"vocabulary size {vocab_size!r} is not between {first:,} (the 256 bytes and the special "
                f"tokens) and the tokenizer's {len(self.vocab):,}"
            )
        vocab, merges = self.vocabulary.first_ids(vocab_size)
        return Tokenizer(vocab, merges, self.special_tokens, self.pretokenizer.pattern, self.engine)

    def token_id(self, token: str | bytes) -> int:
        """The id of one whole token (a special token's text, or a token's bytes); a ``KeyError`` for
        anything else.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|x|>"]).token_id("<|x|>")
        256
        """
        return self.vocabulary.token_id(token)

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``; bytes that are not valid UTF-8 become U+FFFD.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).decode([104, 105, 255])
        'hi\ufffd'
        """
        return self.vocabulary.decode(ids)

    # Its files, written and read back (``tokenizer.files``).
    files = _files.files
    tiktoken_ranks = _files.tiktoken_ranks
    save = _files.save
    load = classmethod(_files.load)
    from_tokenizer_json = classmethod(_files.from_tokenizer_json)
    from_files = classmethod(_files.from_files)

    def encode(
        self, text: str, *, allowed_special: Allowed = "all", disallowed_special: Allowed = ()
    ) -> list[int]:
        """The token ids of ``text``. A special token neither allowed nor disallowed is ordinary text;
        text holding a disallowed one (``"all"``: every one not allowed) raises
        ``DisallowedSpecialTokenError``, a ``BpeDaskError`` and a ``ValueError``.

        >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi"}
        >>> tokenizer = Tokenizer(vocab, [(b"h", b"i")], ["<|endoftext|>"])
        >>> tokenizer.encode("hi!<|endoftext|>")
        [256, 33, 257]
        >>> tokenizer.encode("hi<|endoftext|>", allowed_special=())  # the token's text as text
        [256, 60, 124, 101, 110, 100, 111, 102, 116, 101, 120, 116, 124, 62]
        >>> tokenizer.encode("<|endoftext|>", allowed_special=(), disallowed_special="all")
        Traceback (most recent call last):
        bpe_dask.rules.special_tokens.DisallowedSpecialTokenError: the text holds '<|endoftext|>', ...
        """
        pretokenizer, disallowed = self._special_rules.of(allowed_special, disallowed_special)
        refuse_disallowed(text, disallowed)
        return self._encoding.ids(text, pretokenizer)

    def encode_array(
        self,
        text: str,
        dtype: npt.DTypeLike = np.uint32,
        *,
        allowed_special: Allowed = "all",
        disallowed_special: Allowed = (),
    ) -> np.ndarray:
        """The token ids of ``text``, as ``encode`` gives them, in a NumPy array of ``dtype`` (which must
        hold every id): no Python int per token.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).encode_array("hi", "uint16")
        array([104, 105], dtype=uint16)
        """
        pretokenizer, disallowed = self._special_rules.of(allowed_special, disallowed_special)
        refuse_disallowed(text, disallowed)
        return self._encoding.array(text, pretokenizer, dtype)

    def encode_batch(
        self,
        texts: Sequence[str],
        *,
        num_threads: int = 8,
        allowed_special: Allowed = "all",
        disallowed_special: Allowed = (),
    ) -> list[list[int]]:
        """The ids of each text, in order, as ``encode`` gives them, encoded by ``num_threads`` threads
        (the compiled encoder runs without the GIL), as tiktoken's ``Encoding.encode_batch``.

        >>> tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> tokenizer.encode_batch(["hi", "a<|endoftext|>"])
        [[104, 105], [97, 256]]
        """
        texts = list(texts)
        pretokenizer, disallowed = self._special_rules.of(allowed_special, disallowed_special)
        for text in texts:
            refuse_disallowed(text, disallowed)
        return self._encoding.batch(texts, pretokenizer, num_threads)

    def encode_documents(
        self, documents: list[str], separator: str | None = None, dtype: npt.DTypeLike = np.uint32
    ) -> np.ndarray:
        """The ids of each document in turn, each followed by the id of the special token
        ``separator`` when one is given (as nanoGPT ends every document with ``<|endoftext|>``).
        Documents stand alone: no pre-token crosses from one into the next.

        >>> tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> tokenizer.encode_documents(["hi", "!"], "<|endoftext|>")
        array([104, 105, 256,  33, 256], dtype=uint32)
        """
        encoded = [utf8(text) for text in documents]
        ends = np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)))
        end = [] if separator is None else [self.token_id(separator)]
        return self._encoding.documents(b"".join(encoded), ends, end, dtype)

    def encode_iterable(
        self, iterable: Iterable[str], *, allowed_special: Allowed = "all", disallowed_special: Allowed = ()
    ) -> Iterator[int]:
        """The token ids of the concatenation of ``iterable`` (a file's lines, say), lazily.

        Text is held back only until the next safe cut (``recut``; never inside an allowed or
        disallowed special token), so memory stays bounded by the longest stretch without one; pieces
        between cuts are encoded in batches of about ``COMPILED_MIN_CHARS``, worth the compiled engine
        (why that is exact: docs/exactness.md#long-texts-and-documents).

        >>> tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> list(tokenizer.encode_iterable(["h", "i<|endof", "text|>!"]))
        [104, 105, 256, 33]
        """
        pieces = self._special_rules.cutter(allowed_special, disallowed_special).recut(iterable)
        pretokenizer, disallowed = self._special_rules.of(allowed_special, disallowed_special)
        yield from self._encoding.stream(pieces, pretokenizer, disallowed)


def encoding_of(tokenizer: Tokenizer) -> Encoding:
    """The ``Encoding`` ``tokenizer`` encodes with, for the stages' own calls: ``documents`` (UTF-8
    documents back to back), ``histogram`` (of counted pre-tokens) and ``uses_compiled``.

    >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi"}
    >>> histogram = encoding_of(Tokenizer(vocab, [(b"h", b"i")])).histogram(b"hi hi", [0, 2, 5], [2, 1])
    >>> histogram[[32, 256]].tolist(), int(histogram.sum())  # " " once, "hi" three times
    ([1, 3], 4)
    """
    return tokenizer._encoding
