"""The tokenizer: a trained vocabulary and merges in, text to token ids and back out.

Takes ``vocab`` (id -> bytes), ``merges`` (in the order learned) and special tokens, as ``train_bpe``
returns them; gives ``encode``, ``encode_iterable`` and ``decode`` with the reference encoder's
semantics (``rules.reference.encode``, GPT-2's), by a Python or a compiled engine. The interface is
CS336's, with tiktoken's ``encode_batch``, ``allowed_special`` and ``disallowed_special`` (CS336's
defaults). ``Vocabulary`` holds the tables and ``decode``; ``TokenizerFiles`` ``save`` and ``load``.

Threads may share a tokenizer: its merge tables are read-only once built (the compiled ones under a
lock, once), the Python path's cache is a dict read and written one whole entry at a time under the
GIL, and the compiled encoder lends each call a cache of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np

from bpe_dask.engines import check_engine, check_engine_supports, use_compiled
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.tokenizer_files import FILES, TokenizerFiles
from bpe_dask.rules.pattern_limit import finder
from bpe_dask.rules.pretokenize import GPT2, Pretokenizer, SplitPattern
from bpe_dask.rules.special_tokens import Allowed, SpecialTokenRules, refuse_disallowed, valid_text
from bpe_dask.rules.vocabulary import Vocabulary

if TYPE_CHECKING:
    import numpy.typing as npt

    from bpe_dask.compiled import Encoder

__all__ = ["FILES", "Tokenizer"]

CACHE_LIMIT = 1 << 20
COMPILED_MIN_CHARS = 1 << 16  # below this, loading compiled code costs more than it saves
LONG_PRETOKEN = 256  # characters: past this, the pure-Python merge's O(n²) starts to show
_BETWEEN = np.int64(1) << 62  # marks a document's end in one compiled call over many: no token's id


class Tokenizer(TokenizerFiles, Vocabulary):
    """Byte-level BPE encoding and decoding with a trained vocabulary.

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
        self.engine = check_engine(engine)
        super().__init__(vocab, merges, special_tokens or ())
        self.pretokenizer = Pretokenizer(self.special_tokens, pattern)
        check_engine_supports(engine, self.pretokenizer.pattern.builtin, self.pretokenizer.pattern.spec)
        self._special_rules = SpecialTokenRules(self.pretokenizer)
        self._cache: dict[str, tuple[int, ...]] = {}
        self._compiled: Encoder | None = None
        self._compiling = threading.Lock()

    def __repr__(self) -> str:
        return (f"Tokenizer(vocab_size={len(self.vocab)}, merges={len(self.merges)}, "
                f"special_tokens={self.special_tokens!r}, pattern={self.pretokenizer.pattern.spec!r}, "
                f"engine={self.engine!r})")  # fmt: skip

    def truncated(self, vocab_size: int) -> Tokenizer:
        """The tokenizer of the first ``vocab_size`` ids: the 256 bytes, the special tokens and the first
        ``vocab_size - 256 - len(special_tokens)`` merges, which is what training to that size learns
        (the merges of a smaller vocabulary are the first merges of a larger one). Ids stay as they are.

        >>> from bpe_dask.rules import reference
        >>> vocab, merges = reference.train(["low lower lowest"], 260, ["<|endoftext|>"])
        >>> smaller = Tokenizer(vocab, merges, ["<|endoftext|>"]).truncated(258)
        >>> len(smaller.vocab), smaller.merges, smaller.encode("lowest")
        (258, [(b'o', b'w')], [108, 257, 101, 115, 116])
        """
        first = 256 + len(self.special_tokens)
        whole = isinstance(vocab_size, int) and not isinstance(vocab_size, bool)
        if not (whole and first <= vocab_size <= len(self.vocab)):
            raise BpeDaskError(f"vocabulary size {vocab_size!r} is not between {first:,} (the 256 bytes and "
                               f"the special tokens) and the tokenizer's {len(self.vocab):,}")  # fmt: skip
        merges = self.merges[: vocab_size - first]
        # What the merges make, and what they join (the same, for merges that each join what earlier
        # ones made, as trained ones do); a merge whose token is missing changes nothing.
        tokens = (self._ids.get(token) for a, b in merges for token in (a + b, a, b))
        kept = {*self._byte_ids, *self.special_ids.values(), *(i for i in tokens if i is not None)}
        vocab = {i: self.vocab[i] for i in sorted(kept)}
        return Tokenizer(vocab, merges, self.special_tokens, self.pretokenizer.pattern, self.engine)

    def __getstate__(self) -> dict:  # caches and compiled state are rebuilt where the tokenizer lands
        state = {**self.__dict__, "_cache": {}, "_compiled": None}
        del state["_compiling"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _compiling=threading.Lock())

    # --- encoding ------------------------------------------------------------------------------
    #
    # ``allowed_special`` and ``disallowed_special`` are tiktoken's, with CS336's defaults: every
    # special token in the text is split out as its id, none is refused (``SpecialTokenRules``;
    # docs/exactness.md#special-tokens). Lone surrogates become U+FFFD first, as in tiktoken.

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
        if self.uses_compiled(len(text)):
            return self._encode_compiled(text, pretokenizer).tolist()
        try:
            return self._encode_python(text, pretokenizer)
        except UnicodeEncodeError:
            return self._encode_python(valid_text(text), pretokenizer)

    def encode_array(self, text: str, dtype: npt.DTypeLike = np.uint32, *, allowed_special: Allowed = "all",
                     disallowed_special: Allowed = ()) -> np.ndarray:  # fmt: skip
        """``encode`` as a NumPy array (of ``dtype``, which must hold every id): no Python int per
        token.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).encode_array("hi", "uint16")
        array([104, 105], dtype=uint16)
        """
        pretokenizer, disallowed = self._special_rules.of(allowed_special, disallowed_special)
        refuse_disallowed(text, disallowed)
        if self.uses_compiled(len(text)):
            return self._encode_compiled(text, pretokenizer).astype(dtype)
        try:
            return np.array(self._encode_python(text, pretokenizer), dtype)
        except UnicodeEncodeError:
            return np.array(self._encode_python(valid_text(text), pretokenizer), dtype)

    def encode_batch(self, texts: Sequence[str], *, num_threads: int = 8, allowed_special: Allowed = "all",
                     disallowed_special: Allowed = ()) -> list[list[int]]:  # fmt: skip
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
        size = sum(map(len, texts))
        if not self.uses_compiled(size):
            one = partial(self.encode, allowed_special=allowed_special, disallowed_special=disallowed_special)
            if num_threads <= 1 or size < COMPILED_MIN_CHARS:
                return [one(text) for text in texts]
            with ThreadPoolExecutor(num_threads) as pool:
                return list(pool.map(one, texts))
        # Texts in groups of about equal size, each group one compiled call, a few groups a thread.
        groups, group, group_size = [], [], 0
        share = max(COMPILED_MIN_CHARS, size // (4 * max(1, num_threads)))
        for text in texts:
            group.append(text)
            group_size += len(text)
            if group_size >= share:
                groups.append(group)
                group, group_size = [], 0
        groups += [group] if group else []
        encode_group = partial(self._encode_compiled_texts, pretokenizer=pretokenizer)
        if num_threads <= 1 or len(groups) <= 1:
            return [ids for g in groups for ids in encode_group(g)]
        with ThreadPoolExecutor(min(num_threads, len(groups))) as pool:
            return [ids for encoded in pool.map(encode_group, groups) for ids in encoded]

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
        encoded = [_utf8(text) for text in documents]
        ends = np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)))
        return self.encode_utf8_documents(b"".join(encoded), ends, separator, dtype)

    def encode_utf8_documents(
        self, data: bytes, ends: np.ndarray, separator: str | None = None, dtype: npt.DTypeLike = np.uint32
    ) -> np.ndarray:
        """``encode_documents`` of UTF-8 documents back to back in ``data``, the ``k``-th ending at
        ``ends[k]``.

        >>> tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> tokenizer.encode_utf8_documents(b"hi!", np.array([2, 3]), "<|endoftext|>").tolist()
        [104, 105, 256, 33, 256]
        """
        end = [] if separator is None else [self.token_id(separator)]
        if not self.uses_compiled(len(data)):
            ids: list[int] = []
            for a, b in pairwise([0, *np.asarray(ends).tolist()]):
                ids += self._encode_python(data[a:b].decode("utf-8"), self.pretokenizer)
                ids += end
            return np.array(ids, dtype)
        ids = self._encode_compiled_documents(data, ends, end[0] if end else -1, self.pretokenizer)
        return np.concatenate([ids, end]).astype(dtype) if end and len(ends) else ids.astype(dtype)

    def _encode_compiled_documents(self, data: bytes, ends: np.ndarray, between_documents: int,
                                   pretokenizer: Pretokenizer) -> np.ndarray:  # fmt: skip
        """The ids of UTF-8 documents in one compiled call, ``between_documents`` (unless negative: the
        compiled encoder writes no id for -1) after each but the last."""
        bounds, is_boundary = pretokenizer.document_bounds(data, ends)
        gaps = zip(bounds[1:-1:2].tolist(), bounds[2:-1:2].tolist(), is_boundary.tolist(), strict=True)
        special_id = self.special_ids
        specials = [between_documents if edge else special_id[data[a:b].decode()] for a, b, edge in gaps]
        return self._compiled_encoder().encode(data, bounds, np.array(specials, np.int64))

    def _encode_compiled_texts(self, texts: list[str], pretokenizer: Pretokenizer) -> list[list[int]]:
        """The ids of each text, all in one compiled call, cut apart where a mark between them falls."""
        encoded = [_utf8(text) for text in texts]
        ends = np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)))
        ids = self._encode_compiled_documents(b"".join(encoded), ends, _BETWEEN, pretokenizer)
        marks = np.flatnonzero(ids == _BETWEEN)
        return [ids[a + 1 : b].tolist() for a, b in pairwise([-1, *marks.tolist(), len(ids)])]

    def uses_compiled(self, length: int) -> bool:
        """Whether text of ``length`` characters is encoded with the compiled encoder: always with
        ``engine="numba"``, and with ``"auto"`` when it is long enough to repay loading it (the
        pure-Python path stays the reference the tests hold it to).

        >>> tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [])
        >>> tokenizer.uses_compiled(100), tokenizer.uses_compiled(1 << 20)
        (False, True)
        """
        builtin = self.pretokenizer.pattern.builtin
        return use_compiled(self.engine, length, COMPILED_MIN_CHARS, builtin_pattern=builtin)

    def _compiled_encoder(self) -> Encoder:
        """Built once, by whichever thread asks first (the others wait for it), then shared."""
        if self._compiled is None:
            with self._compiling:
                if self._compiled is None:
                    from bpe_dask.compiled import Encoder

                    self._compiled = Encoder(self._byte_ids, self._merges, self.pretokenizer.pattern.name)
        return self._compiled

    def _encode_compiled(self, text: str, pretokenizer: Pretokenizer | None = None) -> np.ndarray:
        data = _utf8(text)
        bounds = (pretokenizer or self.pretokenizer).piece_bounds(data)
        between = [data[bounds[k] : bounds[k + 1]].decode("utf-8") for k in range(1, len(bounds) - 1, 2)]
        specials = np.array([self.special_ids[token] for token in between], np.int64)
        return self._compiled_encoder().encode(data, bounds, specials)

    def _encode_python(self, text: str, pretokenizer: Pretokenizer) -> list[int]:
        ids: list[int] = []
        cache = self._cache
        findall = finder(pretokenizer.pattern).findall
        for piece, is_special in pretokenizer.split(text):
            if is_special:
                ids.append(self.special_ids[piece])
                continue
            for pretoken in findall(piece):
                encoded = cache.get(pretoken)
                if encoded is None:
                    encoded = self._encode_new(pretoken)
                ids.extend(encoded)
        return ids

    def pretoken_histogram(self, data: bytes, offsets: npt.ArrayLike, counts: npt.ArrayLike) -> np.ndarray:
        """How often each id occurs in the encoding of counted pre-tokens (int64, indexed by id): their
        UTF-8 back to back in ``data``, the ``k``-th from ``offsets[k]`` to ``offsets[k + 1]``, occurring
        ``counts[k]`` times. ``encode`` merges every pre-token on its own, so a text whose pre-tokens
        these are encodes to these ids, plus one per special token.

        >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi"}
        >>> histogram = Tokenizer(vocab, [(b"h", b"i")]).pretoken_histogram(b"hi hi", [0, 2, 5], [2, 1])
        >>> histogram[[32, 256]].tolist(), int(histogram.sum())  # " " once, "hi" three times
        ([1, 3], 4)
        """
        offsets, counts = np.asarray(offsets, np.int64), np.asarray(counts, np.int64)
        ids = max(self.vocab) + 1
        if self.uses_compiled(len(data)):
            return self._compiled_encoder().histogram(data, offsets, counts, ids)
        histogram, words = np.zeros(ids, np.int64), memoryview(data)
        for (a, b), count in zip(pairwise(offsets.tolist()), counts.tolist(), strict=True):
            for token in self.merged(bytes(words[a:b])):
                histogram[token] += count
        return histogram

    def encode_iterable(self, iterable: Iterable[str], *, allowed_special: Allowed = "all",
                        disallowed_special: Allowed = ()) -> Iterator[int]:  # fmt: skip
        """The token ids of the concatenation of ``iterable`` (a file's lines, say), lazily.

        Text is held back only until the next safe cut (``recut``; never inside an allowed or
        disallowed special token), so memory stays bounded by the longest stretch without one; pieces
        between cuts are encoded in batches of about ``COMPILED_MIN_CHARS``, worth the compiled engine
        (why that is exact: docs/exactness.md#long-texts-and-documents).

        >>> tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> list(tokenizer.encode_iterable(["h", "i<|endof", "text|>!"]))
        [104, 105, 256, 33]
        """
        options = {"allowed_special": allowed_special, "disallowed_special": disallowed_special}
        batch: list[str] = []
        size = 0
        for text in self._special_rules.cutter(allowed_special, disallowed_special).recut(iterable):
            batch.append(text)
            size += len(text)
            if size >= COMPILED_MIN_CHARS:
                yield from self.encode("".join(batch), **options)
                batch, size = [], 0
        if batch:
            yield from self.encode("".join(batch), **options)

    def _encode_new(self, pretoken: str) -> tuple[int, ...]:
        """The ids of a pre-token not in the cache, which keeps them. A long one (a run of one letter)
        goes to the compiled merge, which is O(n log n) where ``merged`` is O(n²), unless the engine
        is ``"python"``."""
        if len(self._cache) >= CACHE_LIMIT:
            self._cache.clear()
        if len(pretoken) > LONG_PRETOKEN and self.uses_compiled(COMPILED_MIN_CHARS):
            data = pretoken.encode("utf-8")  # one piece: no special token inside, whatever its text
            bounds, no_specials = np.array([0, len(data)], np.int64), np.empty(0, np.int64)
            return tuple(self._compiled_encoder().encode(data, bounds, no_specials).tolist())
        ids = self._cache[pretoken] = self.merged(pretoken.encode("utf-8"))
        return ids


def _utf8(text: str) -> bytes:
    """``text`` in UTF-8, lone surrogates made U+FFFD first as tiktoken does (``valid_text``)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return valid_text(text).encode("utf-8")
