"""The tokenizer: a trained vocabulary and merges in, text to token ids and back out.

Takes ``vocab`` (id -> bytes), ``merges`` (in the order learned) and special tokens, as
``train_bpe`` returns them; gives ``encode``, ``encode_iterable`` and ``decode`` with GPT-2's
semantics: special tokens are split out first (longest first where several match at one place),
the rest is pre-tokenized with the split pattern, and each pre-token's bytes are merged by rank,
lowest first. The interface is CS336's, with tiktoken's ``encode_batch``, ``allowed_special`` and
``disallowed_special`` (``encode_options``; CS336's defaults). ``save`` and ``load`` own the
directory a training job writes (``tokenizer_files``).

Threads may share a tokenizer: its merge tables are read-only once built (the compiled ones
under a lock, once), the Python path's cache is a dict read and written one whole entry at a time
under the GIL, and the compiled encoder lends each call a cache of its own.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np

from bpe_dask.errors import BpeDaskError
from bpe_dask.io.tokenizer_files import FILES, TokenizerFiles
from bpe_dask.rules.pattern_limit import finder
from bpe_dask.rules.pretokenize import GPT2, Pretokenizer, SplitPattern, check_special_tokens
from bpe_dask.rules.special_tokens import Allowed, SpecialTokenRules, refuse_disallowed, valid_text

if TYPE_CHECKING:
    import numpy.typing as npt

    from bpe_dask.compiled import Encoder

__all__ = ["FILES", "Tokenizer"]

CACHE_LIMIT = 1 << 20
ENGINES = ("auto", "python", "numba")
COMPILED_MIN_CHARS = 1 << 16  # below this, loading compiled code costs more than it saves
LONG_PRETOKEN = 256  # characters: past this, the pure-Python merge's O(n²) starts to show
_UNMERGEABLE = (float("inf"), -1)  # (rank, merged id) of a pair no merge joins
_BETWEEN = np.int64(1) << 62  # marks a document's end in one compiled call over many: no token's id


class Tokenizer(TokenizerFiles):
    """Byte-level BPE encoding and decoding with a trained vocabulary."""

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]],
        special_tokens: Iterable[str] | None = None,
        pattern: str | SplitPattern = GPT2,
        engine: str = "auto",
    ) -> None:
        if engine not in ENGINES:
            raise BpeDaskError(f"engine must be auto, python or numba, got {engine!r}")
        self.engine = engine
        self.vocab = dict(vocab)
        self.merges = list(merges)
        self.special_tokens = list(check_special_tokens(special_tokens or ()))
        self.pretokenizer = Pretokenizer(self.special_tokens, pattern)
        if engine == "numba" and not self.pretokenizer.pattern.builtin:
            raise BpeDaskError(f"the numba engine encodes with the built-in patterns only (gpt2, gpt4, "
                               f"o200k), not {self.pretokenizer.pattern.spec}: use engine auto or "
                               "python")  # fmt: skip
        ids: dict[bytes, int] = {}
        for i, token in sorted(self.vocab.items()):
            ids.setdefault(token, i)  # where two ids hold the same bytes, the first is the token's
        self._ids = ids
        self.special_ids = {token: self._special_id(token) for token in self.special_tokens}
        self._byte_ids = [ids[bytes([b])] for b in range(256)]
        # (left id, right id) -> (rank, merged id): merging by ids, never by bytes
        self._merges = {
            (ids[a], ids[b]): (rank, ids[a + b]) for rank, (a, b) in enumerate(self.merges) if a + b in ids
        }
        self._special_rules = SpecialTokenRules(self.pretokenizer)
        self._cache: dict[str, tuple[int, ...]] = {}
        self._compiled: Encoder | None = None
        self._compiling = threading.Lock()

    def __getstate__(self) -> dict:  # caches and compiled state are rebuilt where the tokenizer lands
        state = {**self.__dict__, "_cache": {}, "_compiled": None}
        del state["_compiling"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _compiling=threading.Lock())

    def _special_id(self, token: str) -> int:
        """The first id past the 256 bytes that holds the token (a special token "\n" is not byte 10),
        or, for a token the vocabulary lacks, the next free id."""
        data = token.encode("utf-8")
        found = [i for i, t in self.vocab.items() if t == data and i >= 256]
        if found:
            return min(found)
        new_id = max(self.vocab, default=-1) + 1
        self.vocab[new_id] = data
        self._ids.setdefault(data, new_id)
        return new_id

    # --- encoding and decoding -----------------------------------------------------------------
    #
    # ``allowed_special`` and ``disallowed_special`` are tiktoken's, with CS336's defaults: every
    # special token in the text is split out as its id, none is refused. A special token neither
    # allowed nor disallowed is ordinary text; text holding a disallowed one (``"all"``: every one not
    # allowed) raises ``DisallowedSpecialTokenError``, a ``BpeDaskError`` and a ``ValueError``. Lone
    # surrogates become U+FFFD first, as in tiktoken.

    def encode(
        self, text: str, *, allowed_special: Allowed = "all", disallowed_special: Allowed = ()
    ) -> list[int]:
        """The token ids of ``text`` (special tokens: see above)."""
        pretokenizer, disallowed = self._special_rules.of(allowed_special, disallowed_special)
        refuse_disallowed(text, disallowed)
        if self._use_compiled(len(text)):
            return self._encode_compiled(text, pretokenizer).tolist()
        try:
            return self._encode_python(text, pretokenizer)
        except UnicodeEncodeError:
            return self._encode_python(valid_text(text), pretokenizer)

    def encode_array(self, text: str, dtype: npt.DTypeLike = np.uint32, *, allowed_special: Allowed = "all",
                     disallowed_special: Allowed = ()) -> np.ndarray:  # fmt: skip
        """``encode`` as a NumPy array (of ``dtype``, which must hold every id): no Python int per
        token."""
        pretokenizer, disallowed = self._special_rules.of(allowed_special, disallowed_special)
        refuse_disallowed(text, disallowed)
        if self._use_compiled(len(text)):
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
        if not self._use_compiled(size):
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
        Documents stand alone: no pre-token crosses from one into the next."""
        encoded = [_utf8(text) for text in documents]
        ends = np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)))
        return self.encode_utf8_documents(b"".join(encoded), ends, separator, dtype)

    def encode_utf8_documents(
        self, data: bytes, ends: np.ndarray, separator: str | None = None, dtype: npt.DTypeLike = np.uint32
    ) -> np.ndarray:
        """``encode_documents`` of UTF-8 documents back to back in ``data``, the ``k``-th ending at
        ``ends[k]``."""
        end = [] if separator is None else [self.token_id(separator)]
        if not self._use_compiled(len(data)):
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

    def _use_compiled(self, length: int) -> bool:
        """The compiled encoder for ``engine="numba"``, and for ``"auto"`` on text long enough to repay
        loading it (the pure-Python path below stays the reference the tests hold it to)."""
        if self.engine == "python" or (self.engine == "auto" and length < COMPILED_MIN_CHARS):
            return False
        if not self.pretokenizer.pattern.builtin or importlib.util.find_spec("numba") is None:
            if self.engine == "numba":
                raise BpeDaskError("the numba engine needs numba and a built-in pattern")
            return False
        return True

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

    def encode_iterable(self, iterable: Iterable[str], *, allowed_special: Allowed = "all",
                        disallowed_special: Allowed = ()) -> Iterator[int]:  # fmt: skip
        """The token ids of the concatenation of ``iterable`` (a file's lines, say), lazily.

        Text is held back only until the next safe cut (``Pretokenizer.recut``; never inside an
        allowed or disallowed special token), so memory stays bounded by the longest stretch without
        one and the time is linear in the text. Pieces between cuts are encoded in batches of about
        ``COMPILED_MIN_CHARS``: the text of two neighbouring pieces encodes as the two pieces do, and a
        batch is worth the compiled engine.
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

    def token_id(self, token: str | bytes) -> int:
        """The id of one whole token (a special token's text, or a token's bytes)."""
        if isinstance(token, str) and token in self.special_ids:
            return self.special_ids[token]
        token = token.encode("utf-8") if isinstance(token, str) else token
        try:
            return self._ids[token]
        except KeyError:
            raise KeyError(f"{token!r} is not a token of this vocabulary") from None

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``; bytes that are not valid UTF-8 become U+FFFD."""
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")

    def _encode_new(self, pretoken: str) -> tuple[int, ...]:
        """The ids of a pre-token not in the cache, which keeps them. A long one (a run of one letter)
        goes to the compiled merge, which is O(n log n) where ``_merge`` is O(n²), unless the engine
        is ``"python"``."""
        if len(self._cache) >= CACHE_LIMIT:
            self._cache.clear()
        if len(pretoken) > LONG_PRETOKEN and self._use_compiled(COMPILED_MIN_CHARS):
            data = pretoken.encode("utf-8")  # one piece: no special token inside, whatever its text
            bounds, no_specials = np.array([0, len(data)], np.int64), np.empty(0, np.int64)
            return tuple(self._compiled_encoder().encode(data, bounds, no_specials).tolist())
        ids = self._cache[pretoken] = self._merge(pretoken.encode("utf-8"))
        return ids

    def _merge(self, word: bytes) -> tuple[int, ...]:
        """Apply the merges to one pre-token: the lowest-ranked adjacent pair first, leftmost first.

        A pair a merge creates always ranks after that merge, so this is GPT-2's "merge every
        occurrence of the best pair, then look again", one occurrence at a time.
        """
        parts = [self._byte_ids[b] for b in word]
        rank_of = self._merges.get
        ranks = [rank_of(pair, _UNMERGEABLE) for pair in pairwise(parts)]  # ranks[i]: parts i, i+1
        while ranks:
            best = min(ranks)
            if best is _UNMERGEABLE:
                break
            i = ranks.index(best)
            parts[i : i + 2] = [best[1]]
            del ranks[i]
            if i > 0:
                ranks[i - 1] = rank_of((parts[i - 1], parts[i]), _UNMERGEABLE)
            if i < len(ranks):
                ranks[i] = rank_of((parts[i], parts[i + 1]), _UNMERGEABLE)
        return tuple(parts)


def _utf8(text: str) -> bytes:
    """``text`` in UTF-8, lone surrogates made U+FFFD first as tiktoken does (``valid_text``)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return valid_text(text).encode("utf-8")
