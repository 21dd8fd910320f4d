"""Encoding on an engine: a vocabulary, a pre-tokenizer and text in, token ids out.

Takes a ``Vocabulary`` (``rules.vocabulary``), a ``Pretokenizer`` and an engine (``auto``, ``python``
or ``numba``); ``Encoding`` gives the ids of text, of documents that each stand alone, of batches of
texts, and how often each id occurs in the ids of counted pre-tokens, on the engine
``engines.use_compiled`` chooses for the length at hand. Both engines give the reference encoder's
ids (``rules.reference.encode``), which the tests hold them to:

- the Python path merges each distinct pre-token once (``Vocabulary.merged``) and keeps its ids in a
  cache (emptied when it holds ``CACHE_LIMIT``), a dict read and written one whole entry at a time
  under the GIL; a pre-token longer than ``LONG_PRETOKEN`` characters goes to the compiled merge,
  which is O(n log n) where ``merged`` is O(n²), unless the engine is ``python``;
- the compiled encoder (``compiled.Encoder``) is built once, by whichever thread asks first (the
  others wait for it), then shared; it lends each call a cache of its own.

So threads may share an ``Encoding``. A pickled one leaves its caches and compiled encoder behind:
they are rebuilt where it lands.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np

from bpe_dask.engines import use_compiled
from bpe_dask.rules.pattern_limit import finder
from bpe_dask.rules.pretokenize import Pretokenizer
from bpe_dask.rules.special_tokens import refuse_disallowed, valid_text
from bpe_dask.rules.vocabulary import Vocabulary

if TYPE_CHECKING:
    import numpy.typing as npt

    from bpe_dask.compiled import Encoder

CACHE_LIMIT = 1 << 20  # pre-tokens the Python path's cache holds before it is emptied
COMPILED_MIN_CHARS = 1 << 16  # below this, loading compiled code costs more than it saves
LONG_PRETOKEN = 256  # characters: past this, the pure-Python merge's O(n²) starts to show


class Encoding:
    """The ids of text under ``vocabulary`` and ``pretokenizer`` (each call may give a pre-tokenizer
    of its own: one splitting out fewer special tokens), on ``engine``.

    >>> vocabulary = Vocabulary({**{i: bytes([i]) for i in range(256)}, 256: b"hi"}, [(b"h", b"i")])
    >>> encoding = Encoding(vocabulary, Pretokenizer(), "auto")
    >>> encoding.ids("hi!", Pretokenizer()), encoding.uses_compiled(1 << 20)
    ([256, 33], True)
    """

    def __init__(self, vocabulary: Vocabulary, pretokenizer: Pretokenizer, engine: str) -> None:
        self.vocabulary, self.pretokenizer, self.engine = vocabulary, pretokenizer, engine
        self._cache: dict[str, tuple[int, ...]] = {}
        self._compiled: Encoder | None = None
        self._compiling = threading.Lock()

    def __getstate__(self) -> dict:
        state = {**self.__dict__, "_cache": {}, "_compiled": None}
        del state["_compiling"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _compiling=threading.Lock())

    def uses_compiled(self, length: int) -> bool:
        """Whether text of ``length`` characters is encoded with the compiled encoder: always with
        ``engine="numba"``, and with ``"auto"`` when it is long enough to repay loading it."""
        builtin = self.pretokenizer.pattern.builtin
        return use_compiled(self.engine, length, COMPILED_MIN_CHARS, builtin_pattern=builtin)

    def ids(self, text: str, pretokenizer: Pretokenizer) -> list[int]:
        """The ids of ``text``, its special tokens those ``pretokenizer`` splits out."""
        if self.uses_compiled(len(text)):
            encoder = self._compiled_encoder()
            return encoder.as_list(encoder.encode_text(text, pretokenizer))
        try:
            return self._encode_python(text, pretokenizer)
        except UnicodeEncodeError:
            return self._encode_python(valid_text(text), pretokenizer)

    def array(self, text: str, pretokenizer: Pretokenizer, dtype: npt.DTypeLike) -> np.ndarray:
        """``ids`` as a NumPy array of ``dtype``, with no Python int per token on the compiled path."""
        if self.uses_compiled(len(text)):
            return self._compiled_encoder().encode_text(text, pretokenizer).astype(dtype)
        return np.array(self.ids(text, pretokenizer), dtype)

    def batch(self, texts: list[str], pretokenizer: Pretokenizer, num_threads: int) -> list[list[int]]:
        """The ``ids`` of each text, in order, on up to ``num_threads`` threads: compiled, texts in
        groups of about equal size, each group one call (``Encoder.encode_texts``); in Python, a text
        a task, and no threads for less than ``COMPILED_MIN_CHARS`` characters in all."""
        size = sum(map(len, texts))
        if self.uses_compiled(size):
            return self._compiled_encoder().encode_texts(texts, pretokenizer, num_threads, COMPILED_MIN_CHARS)
        if num_threads <= 1 or size < COMPILED_MIN_CHARS:
            return [self.ids(text, pretokenizer) for text in texts]
        with ThreadPoolExecutor(num_threads) as pool:
            return list(pool.map(self.ids, texts, [pretokenizer] * len(texts)))

    def stream(
        self, pieces: Iterable[str], pretokenizer: Pretokenizer, disallowed: re.Pattern | None
    ) -> Iterator[int]:
        """The ids of the concatenation of ``pieces``, each ending at a safe cut, lazily: pieces joined
        into batches of about ``COMPILED_MIN_CHARS`` (worth the compiled engine), each refused if
        ``disallowed`` finds a special token in it (``refuse_disallowed``), and encoded alone."""
        for text in _batches(pieces, COMPILED_MIN_CHARS):
            refuse_disallowed(text, disallowed)
            yield from self.ids(text, pretokenizer)

    def documents(self, data: bytes, ends: np.ndarray, end: list[int], dtype: npt.DTypeLike) -> np.ndarray:
        """The ids of UTF-8 documents back to back in ``data``, the ``k``-th ending at ``ends[k]``, each
        followed by the ids ``end`` (none, or a separator's), as a NumPy array of ``dtype``. Documents
        stand alone: no pre-token crosses from one into the next."""
        if not self.uses_compiled(len(data)):
            ids: list[int] = []
            for a, b in pairwise([0, *np.asarray(ends).tolist()]):
                ids += self._encode_python(data[a:b].decode("utf-8"), self.pretokenizer)
                ids += end
            return np.array(ids, dtype)
        encoder = self._compiled_encoder()
        ids = encoder.encode_documents(data, ends, end[0] if end else -1, self.pretokenizer)
        return np.concatenate([ids, end]).astype(dtype) if end and len(ends) else ids.astype(dtype)

    def pretoken_ids(self, data: bytes, offsets: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """The ids of pre-tokens, the ``k``-th ``data[offsets[k]:offsets[k + 1]]`` (UTF-8), each alone:
        the ids back to back (int32), and where each pre-token's start and the last ends (int64).

        >>> vocabulary = Vocabulary({**{i: bytes([i]) for i in range(256)}, 256: b"hi"}, [(b"h", b"i")])
        >>> ids, ends = Encoding(vocabulary, Pretokenizer(), "python").pretoken_ids(b"hi hi!", [0, 2, 6])
        >>> ids.tolist(), ends.tolist()
        ([256, 32, 256, 33], [0, 1, 4])
        """
        offsets = np.asarray(offsets, np.int64)
        if self.uses_compiled(len(data)):
            return self._compiled_encoder().pretoken_ids(data, offsets)
        words = memoryview(data)
        merged = [self.vocabulary.merged(bytes(words[a:b])) for a, b in pairwise(offsets.tolist())]
        ends = np.zeros(len(offsets), np.int64)
        np.cumsum([len(m) for m in merged], out=ends[1:])
        return np.fromiter((i for m in merged for i in m), np.int32, int(ends[-1])), ends

    def histogram(self, data: bytes, offsets: npt.ArrayLike, counts: npt.ArrayLike) -> np.ndarray:
        """How often each id occurs (int64, indexed by id) in the ids of pre-tokens, the ``k``-th
        ``data[offsets[k]:offsets[k + 1]]`` (UTF-8), occurring ``counts[k]`` times."""
        ids, ends = self.pretoken_ids(data, offsets)
        weights = np.repeat(np.asarray(counts, np.int64), np.diff(ends))
        # Sums of float64 weights: exact below 2**53 occurrences of an id.
        return np.bincount(ids, weights, max(self.vocabulary.vocab) + 1).astype(np.int64)

    def _compiled_encoder(self) -> Encoder:
        """The compiled encoder: built once, by whichever thread asks first (the others wait for it)."""
        if self._compiled is None:
            with self._compiling:
                if self._compiled is None:
                    from bpe_dask.compiled import Encoder

                    vocabulary, name = self.vocabulary, self.pretokenizer.pattern.name
                    self._compiled = Encoder(
                        vocabulary.byte_ids, vocabulary.merge_ranks, name, special_ids=vocabulary.special_ids
                    )
        return self._compiled

    def _encode_python(self, text: str, pretokenizer: Pretokenizer) -> list[int]:
        ids: list[int] = []
        cache, special_ids = self._cache, self.vocabulary.special_ids
        findall = finder(pretokenizer.pattern).findall
        for piece, is_special in pretokenizer.split(text):
            if is_special:
                ids.append(special_ids[piece])
                continue
            for pretoken in findall(piece):
                encoded = cache.get(pretoken)
                if encoded is None:
                    encoded = self._encode_new(pretoken)
                ids.extend(encoded)
        return ids

    def _encode_new(self, pretoken: str) -> tuple[int, ...]:
        """The ids of a pre-token not in the cache, which keeps them; a long one (a run of one
        letter) merged by the compiled merge unless the engine is ``"python"``."""
        if len(self._cache) >= CACHE_LIMIT:
            self._cache.clear()
        if len(pretoken) > LONG_PRETOKEN and self.uses_compiled(COMPILED_MIN_CHARS):
            data = pretoken.encode("utf-8")  # one piece: no special token inside, whatever its text
            bounds, no_specials = np.array([0, len(data)], np.int64), np.empty(0, np.int64)
            return tuple(self._compiled_encoder().encode(data, bounds, no_specials).tolist())
        ids = self._cache[pretoken] = self.vocabulary.merged(pretoken.encode("utf-8"))
        return ids


def _batches(pieces: Iterable[str], size: int) -> Iterator[str]:
    """``pieces`` joined, in order, into texts of ``size`` characters or more (the last maybe fewer)."""
    batch: list[str] = []
    held = 0
    for piece in pieces:
        batch.append(piece)
        held += len(piece)
        if held >= size:
            yield "".join(batch)
            batch, held = [], 0
    if batch:
        yield "".join(batch)
