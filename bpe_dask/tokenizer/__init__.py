"""The tokenizer: a trained vocabulary and merges in, text to token ids and back out.

Takes ``vocab`` (id -> bytes), ``merges`` (in the order learned) and special tokens, as
``train_bpe`` returns them; ``Tokenizer`` gives ``encode``, ``encode_iterable`` and ``decode`` with
the reference encoder's semantics (``rules.reference.encode``, GPT-2's), on a Python or a compiled
engine, the one ``engines.use_compiled`` chooses for the length at hand. The interface is CS336's,
with tiktoken's ``encode_batch`` (and ``encode_batch_to_numpy``, flat arrays), ``allowed_special``
and ``disallowed_special`` (CS336's defaults: every special token is split out as its id, none is
refused; docs/exactness.md#special-tokens). Lone surrogates become U+FFFD first, as in tiktoken. Its
files: ``save``, ``load`` (the formats: ``io.tokenizer_files``, ``io.tokenizer_formats``). The
stages' own calls take a tokenizer: ``uses_compiled``, ``encode_utf8_documents`` (UTF-8 documents
back to back) and ``histogram`` (of counted pre-tokens).

Both engines give the reference encoder's ids, which the tests hold them to:

- the Python path merges each distinct pre-token once (``Vocabulary.merged``) and keeps its ids in a
  cache (emptied when it holds ``CACHE_LIMIT``), a dict read and written one whole entry at a time
  under the GIL; a pre-token longer than ``LONG_PRETOKEN`` characters goes to the compiled merge,
  which is O(n log n) where ``merged`` is O(n²), unless the engine is ``python``;
- the compiled encoder (``compiled.Encoder``) is built once, by whichever thread asks first (the
  others wait for it), then shared; it lends each call a cache of its own.

So threads may share a ``Tokenizer``. A pickled one leaves its caches and compiled encoder behind:
they are rebuilt where it lands.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import chain, pairwise
from typing import TYPE_CHECKING, Self, TypeVar

import numpy as np

from bpe_dask.engines import check_engine, check_engine_supports, use_compiled
from bpe_dask.errors import BpeDaskError
from bpe_dask.io import tokenizer_files, tokenizer_formats
from bpe_dask.io.tokenizer_files import FILES
from bpe_dask.rules.pattern_limit import finder
from bpe_dask.rules.pretokenize import GPT2, Pretokenizer, SplitPattern, split_pattern
from bpe_dask.rules.special_tokens import Allowed, cutter, refuse_disallowed, special_split, utf8, valid_text
from bpe_dask.rules.vocabulary import Vocabulary

if TYPE_CHECKING:
    import numpy.typing as npt

    from bpe_dask.compiled import Encoder

__all__ = ["COMPILED_MIN_CHARS", "FILES", "Tokenizer", "encode_utf8_documents", "histogram", "uses_compiled"]

T = TypeVar("T")
CACHE_LIMIT = 1 << 20  # pre-tokens the Python path's cache holds before it is emptied
COMPILED_MIN_CHARS = 1 << 16  # below this, loading compiled code costs more than it saves
LOADED_MIN_CHARS = 256  # below this, a loaded compiled encoder's call (about 20 us) costs more than it saves
LONG_PRETOKEN = 256  # characters: past this, the pure-Python merge's O(n²) starts to show


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
        self._cache: dict[str, tuple[int, ...]] = {}
        self._compiled: Encoder | None = None
        self._compiling = threading.Lock()

    def __getstate__(self) -> dict:
        state = {**self.__dict__, "_cache": {}, "_compiled": None}
        del state["_compiling"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _compiling=threading.Lock())

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
        first = self.vocabulary.first_size
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

    def files(self, roles: Mapping[str, str | None] | None = None) -> dict[str, str]:
        """The files ``save`` writes, by name: ``vocab.json``, ``merges.txt``, ``tokenizer.json``,
        ``tokenizer.tiktoken`` (left out, with a warning, where tiktoken would merge otherwise), and
        for ``transformers``' ``AutoTokenizer`` ``tokenizer_config.json`` and ``special_tokens_map.json``,
        which say the special tokens' ``roles`` (``bos_token``, ``eos_token``, ``pad_token``; by default
        ``<|endoftext|>``, where it is one, as bos and eos, as GPT-2's).

        >>> tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>", "<|pad|>"])
        >>> sorted(tokenizer.files())[:3]
        ['merges.txt', 'special_tokens_map.json', 'tokenizer.json']
        >>> print(tokenizer.files({"pad_token": "<|pad|>"})["special_tokens_map.json"])
        {
          "bos_token": "<|endoftext|>",
          "eos_token": "<|endoftext|>",
          "pad_token": "<|pad|>"
        }
        <BLANKLINE>
        """
        return tokenizer_files.files_of(self.vocabulary, self.pretokenizer.pattern, roles)

    def tiktoken_ranks(self) -> dict[bytes, int]:
        """The ``mergeable_ranks`` of a ``tiktoken.Encoding`` that encodes as this tokenizer does (its
        special tokens apart), or a ``BpeDaskError`` saying why none does.

        >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi"}
        >>> Tokenizer(vocab, [(b"h", b"i")]).tiktoken_ranks()[b"hi"]
        256
        """
        return tokenizer_formats.tiktoken_ranks(self.vocabulary)

    def save(
        self,
        directory: str | os.PathLike,
        storage_options: dict | None = None,
        roles: Mapping[str, str | None] | None = None,
    ) -> None:
        """Make ``directory`` (a path or URL) hold the tokenizer's ``files`` (with the special tokens'
        ``roles``), published whole: a tokenizer saved there before is replaced; a directory holding
        other files is refused.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).save("saved")
        >>> sorted(os.listdir("saved"))  # doctest: +NORMALIZE_WHITESPACE
        ['_SUCCESS', 'merges.txt', 'special_tokens_map.json', 'tokenizer.json', 'tokenizer.tiktoken',
         'tokenizer_config.json', 'vocab.json']
        """
        tokenizer_files.save_files(directory, self.files(roles), storage_options)

    @classmethod
    def load(
        cls,
        directory: str | os.PathLike,
        special_tokens: Iterable[str] | None = None,
        storage_options: dict | None = None,
        engine: str = "auto",
        *,
        trust_pattern: bool = False,
    ) -> Self:
        """The tokenizer ``save`` (or `bpe-dask train`) wrote into ``directory``, with the special
        tokens its ``tokenizer.json`` registers unless ``special_tokens`` are given.

        A split pattern that is not built in (``rules.patterns.PATTERNS``) is refused unless
        ``trust_pattern`` is true: a regex from a file may take time exponential in its text's length.
        A trusted one still runs with a time limit per call (``pattern_limit.pattern_timeout``).

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|x|>"], "gpt4").save("saved")
        >>> Tokenizer.load("saved").encode("hi<|x|>")
        [104, 105, 256]
        """
        vocabulary, pattern = tokenizer_files.load_files(
            directory, special_tokens, storage_options, trust_pattern=trust_pattern
        )
        return cls._of(vocabulary, pattern, engine)

    @classmethod
    def from_tokenizer_json(
        cls,
        path: str | os.PathLike,
        storage_options: dict | None = None,
        engine: str = "auto",
        *,
        trust_pattern: bool = False,
    ) -> Self:
        """The tokenizer of a Hugging Face ``tokenizer.json`` file of the byte-level BPE kind (GPT-2's,
        or one `bpe-dask train` wrote), with the special tokens it registers; a split pattern that
        is not built in is refused unless ``trust_pattern``, as in ``load``.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|x|>"]).save("saved")
        >>> Tokenizer.from_tokenizer_json("saved/tokenizer.json").encode("hi<|x|>")
        [104, 105, 256]
        """
        vocabulary, pattern = tokenizer_files.read_tokenizer_json(
            path, storage_options, trust_pattern=trust_pattern
        )
        return cls._of(vocabulary, pattern, engine)

    @classmethod
    def from_files(
        cls,
        vocab_filepath: str | os.PathLike,
        merges_filepath: str | os.PathLike,
        special_tokens: Iterable[str] | None = None,
        storage_options: dict | None = None,
        engine: str = "auto",
        pattern: str | SplitPattern = GPT2,
    ) -> Self:
        """A tokenizer from GPT-2-style ``vocab.json`` and ``merges.txt`` (CS336's interface), local
        paths or any URL fsspec reads; with no ``special_tokens`` given (``None``), the entries of
        ``vocab.json`` that are neither a byte nor a merge's result are its special tokens, said in a
        warning (GPT-2's ``<|endoftext|>``); ``[]`` for none.

        >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi"}
        >>> Tokenizer(vocab, [(b"h", b"i")]).save("saved")
        >>> Tokenizer.from_files("saved/vocab.json", "saved/merges.txt", ["<|x|>"]).encode("hi<|x|>")
        [256, 257]
        """
        vocabulary = tokenizer_files.read_gpt2_files(
            vocab_filepath, merges_filepath, special_tokens, storage_options
        )
        return cls._of(vocabulary, split_pattern(pattern), engine)

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
        (ids,) = self._ids([text], self._splitting([text], allowed_special, disallowed_special))
        return ids

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
        pretokenizer, data = self._splitting([text], allowed_special, disallowed_special), utf8(text)
        return encode_utf8_documents(self, data, [len(data)], [], dtype, pretokenizer)

    def encode_batch(
        self,
        texts: Sequence[str],
        *,
        num_threads: int = 8,
        allowed_special: Allowed = "all",
        disallowed_special: Allowed = (),
    ) -> list[list[int]]:
        """The ids of each text, in order, as ``encode`` gives them, encoded by ``num_threads`` threads
        (the compiled encoder runs without the GIL), as tiktoken's ``Encoding.encode_batch``: texts in
        groups of about equal size (``COMPILED_MIN_CHARS`` characters at least, so no threads for
        fewer in all), each group one call.

        >>> tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> tokenizer.encode_batch(["hi", "a<|endoftext|>"])
        [[104, 105], [97, 256]]
        """
        texts = list(texts)
        pretokenizer = self._splitting(texts, allowed_special, disallowed_special)
        return [
            ids for group in self._in_groups(self._ids, texts, pretokenizer, num_threads) for ids in group
        ]

    def encode_batch_to_numpy(
        self,
        texts: Sequence[str],
        *,
        num_threads: int = 8,
        allowed_special: Allowed = "all",
        disallowed_special: Allowed = (),
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ids of each text, as ``encode_batch`` gives them, in two arrays: ``ids`` (uint32) back to
        back, and ``offsets`` (int64, one more than the texts), the ids of text ``i`` being
        ``ids[offsets[i]:offsets[i + 1]]``. No Python int is made per token, so threads share the work
        better than ``encode_batch``'s lists can.

        >>> tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> ids, offsets = tokenizer.encode_batch_to_numpy(["hi", "", "a<|endoftext|>"])
        >>> ids, offsets
        (array([104, 105,  97, 256], dtype=uint32), array([0, 2, 2, 4]))
        """
        texts = list(texts)
        pretokenizer = self._splitting(texts, allowed_special, disallowed_special)
        groups = self._in_groups(self._flat, texts, pretokenizer, num_threads)
        starts = np.cumsum([0, *(len(ids) for ids, _ in groups)])[:-1]
        offsets = [ends[1:] + start for (_, ends), start in zip(groups, starts, strict=True)]
        ids = np.concatenate([np.zeros(0, np.uint32), *(ids for ids, _ in groups)])
        return ids, np.concatenate([np.zeros(1, np.int64), *offsets])

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
        return encode_utf8_documents(self, b"".join(encoded), ends, end, dtype)

    def encode_iterable(
        self, iterable: Iterable[str], *, allowed_special: Allowed = "all", disallowed_special: Allowed = ()
    ) -> Iterator[int]:
        """The token ids of the concatenation of ``iterable`` (a file's lines, say), lazily.

        Text is held back until ``COMPILED_MIN_CHARS`` of it (worth the compiled engine) reach a
        safe cut (``recut``; never inside an allowed or disallowed special token), so memory stays
        bounded by that and the longest stretch without one; each piece between cuts is refused if it
        holds a disallowed special token, and encoded alone (why that is exact:
        docs/exactness.md#long-texts-and-documents).

        >>> tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> list(tokenizer.encode_iterable(["h", "i<|endof", "text|>!"]))
        [104, 105, 256, 33]
        """
        cuts = cutter(self.pretokenizer, allowed_special, disallowed_special)
        for text in cuts.recut(iterable, least=COMPILED_MIN_CHARS):
            yield from self._ids([text], self._splitting([text], allowed_special, disallowed_special))[0]

    def _splitting(
        self, texts: list[str], allowed_special: Allowed, disallowed_special: Allowed
    ) -> Pretokenizer:
        """The pre-tokenizer of an encode call: splitting out the special tokens it allows, after
        refusing any of ``texts`` that holds one it disallows (``special_split``, made once)."""
        pretokenizer, disallowed = special_split(self.pretokenizer, allowed_special, disallowed_special)
        for text in texts:
            refuse_disallowed(text, disallowed)
        return pretokenizer

    def _ids(self, texts: list[str], pretokenizer: Pretokenizer) -> list[list[int]]:
        """The ids of each of ``texts``, its special tokens those ``pretokenizer`` splits out: the one
        way text becomes lists of ids, for ``encode``, ``encode_batch`` and ``encode_iterable``; on
        the compiled encoder, all in one call (``Encoder.encode_texts``)."""
        if uses_compiled(self, sum(map(len, texts))):
            return self._compiled_encoder().encode_texts(texts, pretokenizer)
        return [self._encode_python(text, pretokenizer) for text in texts]

    def _flat(self, texts: list[str], pretokenizer: Pretokenizer) -> tuple[np.ndarray, np.ndarray]:
        """The ids of ``texts`` back to back (uint32), and where each text's start and the last end."""
        if uses_compiled(self, sum(map(len, texts))):
            return self._compiled_encoder().encode_flat(texts, pretokenizer)
        lists = [self._encode_python(text, pretokenizer) for text in texts]
        return np.fromiter(chain.from_iterable(lists), np.uint32), np.cumsum([0, *map(len, lists)])

    @staticmethod
    def _in_groups(
        encode: Callable[[list[str], Pretokenizer], T],
        texts: list[str],
        pretokenizer: Pretokenizer,
        threads: int,
    ) -> list[T]:
        """``encode`` of each group of ``texts``, in order, on ``threads`` threads: groups of about
        equal size, ``COMPILED_MIN_CHARS`` characters at least, so no threads for fewer in all."""
        share = max(COMPILED_MIN_CHARS, sum(map(len, texts)) // (4 * max(1, threads)))
        groups = list(_groups(texts, share))
        if threads <= 1 or len(groups) <= 1:
            return [encode(group, pretokenizer) for group in groups]
        with ThreadPoolExecutor(min(threads, len(groups))) as pool:
            return list(pool.map(encode, groups, [pretokenizer] * len(groups)))

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
        cache, special_ids = self._cache, self.special_ids
        findall = finder(pretokenizer.pattern).findall
        try:
            for piece, is_special in pretokenizer.split(text):
                if is_special:
                    ids.append(special_ids[piece])
                    continue
                for pretoken in findall(piece):
                    encoded = cache.get(pretoken)
                    if encoded is None:
                        encoded = self._encode_new(pretoken)
                    ids.extend(encoded)
        except UnicodeEncodeError:  # a lone surrogate: U+FFFD for it, as tiktoken does
            return self._encode_python(valid_text(text), pretokenizer)
        return ids

    def _encode_new(self, pretoken: str) -> tuple[int, ...]:
        """The ids of a pre-token not in the cache, which keeps them; a long one (a run of one
        letter) merged by the compiled merge unless the engine is ``"python"``."""
        if len(self._cache) >= CACHE_LIMIT:
            self._cache.clear()
        if len(pretoken) > LONG_PRETOKEN and uses_compiled(self, COMPILED_MIN_CHARS):
            data = pretoken.encode("utf-8")  # one pre-token: merged whole, whatever its text
            return tuple(self._compiled_encoder().pretoken_ids(data, np.array([0, len(data)]))[0].tolist())
        ids = self._cache[pretoken] = self.vocabulary.merged(pretoken.encode("utf-8"))
        return ids


def uses_compiled(tokenizer: Tokenizer, length: int) -> bool:
    """Whether ``tokenizer`` encodes text of ``length`` characters with the compiled encoder: always
    with ``engine="numba"``, and with ``"auto"`` when the text is long enough to repay loading it,
    or, once it is loaded, to repay a call (``LOADED_MIN_CHARS``: shorter text is faster on the
    Python loop's cache of pre-tokens).

    >>> uses_compiled(Tokenizer({i: bytes([i]) for i in range(256)}, []), 1 << 20)
    True
    """
    builtin = tokenizer.pretokenizer.pattern.builtin
    least = COMPILED_MIN_CHARS if tokenizer._compiled is None else LOADED_MIN_CHARS
    return use_compiled(tokenizer.engine, length, least, builtin_pattern=builtin)


def encode_utf8_documents(
    tokenizer: Tokenizer,
    data: bytes,
    ends: npt.ArrayLike,
    end: list[int],
    dtype: npt.DTypeLike,
    pretokenizer: Pretokenizer | None = None,
) -> np.ndarray:
    """The ids of UTF-8 documents back to back in ``data``, the ``k``-th ending at ``ends[k]``, each
    followed by the ids ``end`` (none, or a separator's), as a NumPy array of ``dtype``, the special
    tokens those ``pretokenizer`` (by default the tokenizer's) splits out. Documents stand alone: no
    pre-token crosses from one into the next.

    >>> tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [], engine="python")
    >>> encode_utf8_documents(tokenizer, b"hi!", [2, 3], [10], np.uint8)
    array([104, 105,  10,  33,  10], dtype=uint8)
    """
    pretokenizer = pretokenizer or tokenizer.pretokenizer
    if not uses_compiled(tokenizer, len(data)):
        ids: list[int] = []
        for a, b in pairwise([0, *np.asarray(ends).tolist()]):
            ids += tokenizer._encode_python(data[a:b].decode("utf-8"), pretokenizer)
            ids += end
        return np.array(ids, dtype)
    ends = np.asarray(ends, np.int64)
    ids = tokenizer._compiled_encoder().encode_documents(data, ends, end[0] if end else -1, pretokenizer)
    return np.concatenate([ids, end]).astype(dtype) if end and len(ends) else ids.astype(dtype)


def pretoken_ids(tokenizer: Tokenizer, data: bytes, offsets: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The ids of pre-tokens, the ``k``-th ``data[offsets[k]:offsets[k + 1]]`` (UTF-8), each alone:
    the ids back to back (int32), and where each pre-token's start and the last ends (int64).

    >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi"}
    >>> ids, ends = pretoken_ids(Tokenizer(vocab, [(b"h", b"i")], engine="python"), b"hi hi!", [0, 2, 6])
    >>> ids.tolist(), ends.tolist()
    ([256, 32, 256, 33], [0, 1, 4])
    """
    offsets = np.asarray(offsets, np.int64)
    if uses_compiled(tokenizer, len(data)):
        return tokenizer._compiled_encoder().pretoken_ids(data, offsets)
    words = memoryview(data)
    merged = [tokenizer.vocabulary.merged(bytes(words[a:b])) for a, b in pairwise(offsets.tolist())]
    ends = np.zeros(len(offsets), np.int64)
    np.cumsum([len(m) for m in merged], out=ends[1:])
    return np.fromiter((i for m in merged for i in m), np.int32, int(ends[-1])), ends


def histogram(tokenizer: Tokenizer, data: bytes, offsets: npt.ArrayLike, counts: npt.ArrayLike) -> np.ndarray:
    """How often each id occurs (int64, indexed by id) in the ids of pre-tokens, the ``k``-th
    ``data[offsets[k]:offsets[k + 1]]`` (UTF-8), occurring ``counts[k]`` times.

    >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi"}
    >>> tally = histogram(Tokenizer(vocab, [(b"h", b"i")]), b"hi hi", [0, 2, 5], [2, 1])
    >>> tally[[32, 256]].tolist(), int(tally.sum())  # " " once, "hi" three times
    ([1, 3], 4)
    """
    ids, ends = pretoken_ids(tokenizer, data, offsets)
    weights = np.repeat(np.asarray(counts, np.int64), np.diff(ends))
    # Sums of float64 weights: exact below 2**53 occurrences of an id.
    return np.bincount(ids, weights, max(tokenizer.vocab) + 1).astype(np.int64)


def _groups(texts: Iterable[str], size: int) -> Iterator[list[str]]:
    """``texts`` in order, in groups of ``size`` characters or more (the last maybe fewer)."""
    group: list[str] = []
    held = 0
    for text in texts:
        group.append(text)
        held += len(text)
        if held >= size:
            yield group
            group, held = [], 0
    if group:
        yield group
