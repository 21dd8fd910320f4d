"""The tokenizer: a trained vocabulary and merges in, text to token ids and back out.

Takes ``vocab`` (id -> bytes), ``merges`` (in the order learned) and special tokens, as
``train_bpe`` returns them; gives ``encode``, ``encode_iterable`` and ``decode`` with GPT-2's
semantics: special tokens are split out first (longest first where several match at one place),
the rest is pre-tokenized with the split pattern, and each pre-token's bytes are merged by rank,
lowest first. The interface is CS336's. ``save`` and ``load`` own the directory a training job
writes: ``vocab.json``, ``merges.txt``, ``tokenizer.json`` (which records the split pattern) and
``tokenizer.tiktoken`` (tiktoken's ranks), the writer beside the reader.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Iterable, Iterator
from itertools import pairwise
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

import numpy as np

from . import gpt2_files
from .errors import BpeDaskError
from .outputs import check_output_dir
from .pretokenize import GPT2, Pretokenizer, SplitPattern, check_special_tokens, split_pattern
from .publish import publish_directory
from .storage import describe, filesystem

if TYPE_CHECKING:
    import numpy.typing as npt

    from .encode_numba import CompiledEncoder

log = logging.getLogger(__name__)

CACHE_LIMIT = 1 << 20
ENGINES = ("auto", "python", "numba")
COMPILED_MIN_CHARS = 1 << 16  # below this, loading compiled code costs more than it saves
LONG_PRETOKEN = 256  # characters: past this, the pure-Python merge's O(n²) starts to show
_UNMERGEABLE = (float("inf"), -1)  # (rank, merged id) of a pair no merge joins
FILES = ("vocab.json", "merges.txt", "tokenizer.json", "tokenizer.tiktoken")


class Tokenizer:
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
        self._cache: dict[str, tuple[int, ...]] = {}
        self._compiled: CompiledEncoder | None = None

    def __getstate__(self) -> dict:  # caches and compiled state are rebuilt where the tokenizer lands
        return {**self.__dict__, "_cache": {}, "_compiled": None}

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

    # --- the directory contract ----------------------------------------------------------------

    def files(self) -> dict[str, str]:
        """The files ``save`` writes, by name: what a directory `bpe-dask train` wrote holds.

        ``tokenizer.tiktoken`` is left out, with a warning, for a vocabulary whose ranks tiktoken
        would merge differently (``tiktoken_ranks``); one that training made never is."""
        pattern = self.pretokenizer.pattern
        files = {
            "vocab.json": gpt2_files.vocab_json(self.vocab, self.special_ids),
            "merges.txt": gpt2_files.merges_txt(self.merges),
            "tokenizer.json": gpt2_files.tokenizer_json(self.vocab, self.merges, self.special_ids, pattern),
        }
        try:
            files["tokenizer.tiktoken"] = gpt2_files.tiktoken_bpe(self.tiktoken_ranks())
        except BpeDaskError as error:
            log.warning("no tokenizer.tiktoken: %s", error)
        return files

    # Why tiktoken, given these ranks, encodes as ``_merge`` does. tiktoken merges a pre-token's bytes
    # by rank: it joins the two neighbouring parts whose concatenation is the token of lowest rank (the
    # leftmost on a tie), again and again, and it takes a pre-token that is a whole token at once.
    # ``_merge`` joins the two neighbouring parts that are a merge, lowest merge rank first, leftmost
    # first. The ranks are the ids, and they are written only if: (1) no two tokens but special ones
    # hold the same bytes; (2) the tokens of two or more bytes, in id order, are exactly what the merges
    # make, in merge order, so each is made by one merge and ranks as it; (3) each merge's parts come
    # before what it makes; (4) ``_merge`` makes each token's bytes into that one token.
    #
    # Training makes (2) and (3) so. [L]: a stretch of a pre-token whose two ends have stayed boundaries
    # between parts so far has been merged by ``_merge`` exactly as it would be alone: no pair across an
    # end was joined, so inside the stretch the leftmost-first choices of pairs to join are those made
    # alone. Training splits each word as ``_merge`` does with the merges so far, and learns a merge
    # from a word in which its token's bytes were two neighbouring parts, so by [L] those bytes alone
    # are the same two parts then, and (4) follows; so does (1): bytes that a merge made into one token
    # can never again be two parts for a later merge to join.
    #
    # Given (1)-(4), the two agree at every step. By (3) a merge only makes pairs of higher rank, so
    # ``_merge`` goes through the ranks in order. Take any state of ``_merge`` on any pre-token, while
    # it is at rank r, and two neighbouring parts x, y whose bytes x + y are a token t. The ends of
    # their stretch have been boundaries from the start, so by [L] the stretch is in a state that t's
    # bytes alone reach at rank r. By (4) those are split at least as finely as [a, b], t's own merge,
    # up to t's rank, and are [t] after it, so a state of two parts is [a, b]: x, y is t's merge, and
    # t's rank is r or later (parts are joined, never split). The pairs tiktoken may join are
    # then exactly those ``_merge`` may join, ranked alike by (2), and both join the lowest and
    # leftmost. A pre-token that is one token is that token in both, by (4). Special tokens are not
    # ranks: tiktoken splits them out first, as ``Pretokenizer.split`` does, though where two overlap it
    # does not take the longer first. The split pattern is the same regex for both (its ``regex``).
    def tiktoken_ranks(self) -> dict[bytes, int]:
        """The ``mergeable_ranks`` of a ``tiktoken.Encoding`` that encodes as this tokenizer does
        (its special tokens go apart: ``special_ids``), or a ``BpeDaskError`` saying why none does."""
        specials = set(self.special_ids.values())
        ranks: dict[bytes, int] = {}
        for i, token in sorted(self.vocab.items()):
            if i in specials:
                continue
            if token in ranks:
                raise BpeDaskError(f"ids {ranks[token]} and {i} hold the same bytes {token!r}")
            ranks[token] = i
        missing = [b for b in range(256) if bytes([b]) not in ranks]
        if missing:
            raise BpeDaskError(f"byte {missing[0]} is not a token")
        longer = [token for token in ranks if len(token) > 1]  # in id order
        made = [a + b for a, b in self.merges]
        if longer != made:
            raise BpeDaskError("its tokens of several bytes are not, in id order, what its merges make")
        for (a, b), token in zip(self.merges, made, strict=True):
            rank = ranks[token]
            if not (ranks.get(a, rank) < rank and ranks.get(b, rank) < rank):
                raise BpeDaskError(f"merge {a!r} {b!r} joins what is no token before {token!r}")
            if self._merge(token) != (rank,):
                raise BpeDaskError(f"its merges do not make {token!r} from its own bytes")
        return ranks

    def save(self, directory: str | os.PathLike, storage_options: dict | None = None) -> None:
        """Make ``directory`` (a path or URL) hold the tokenizer's files, published whole: a
        tokenizer saved there before is replaced; a directory holding other files is refused."""
        directory = os.fspath(directory)
        check_output_dir(directory, True, lambda name: name in (*FILES, "report.json"), storage_options)
        publish_directory(directory, self.files(), storage_options)

    @classmethod
    def load(
        cls,
        directory: str | os.PathLike,
        special_tokens: Iterable[str] | None = None,
        storage_options: dict | None = None,
        engine: str = "auto",
    ) -> Tokenizer:
        """The tokenizer ``save`` (or `bpe-dask train`) wrote into ``directory``, with the special
        tokens its ``tokenizer.json`` registers unless ``special_tokens`` are given."""
        folder = os.fspath(directory).rstrip("/")
        try:
            fs, path = filesystem(f"{folder}/tokenizer.json", storage_options)
            described = fs.cat_file(path).decode() if fs.exists(path) else None
            if special_tokens is None:
                special_tokens = gpt2_files.special_tokens_in(described) if described else []
            pattern = gpt2_files.pattern_in(described) if described else GPT2
            vocab, merges = f"{folder}/vocab.json", f"{folder}/merges.txt"
            return cls.from_files(vocab, merges, special_tokens, storage_options, engine, pattern)
        except FileNotFoundError as error:
            missing = PurePosixPath(error.filename or "").name or "vocab.json"
            raise BpeDaskError(
                f"tokenizer {folder}: no {missing} there (a directory `bpe-dask train` wrote)"
            ) from None
        except (OSError, ValueError, KeyError) as error:
            raise BpeDaskError(f"tokenizer {folder}: cannot read it ({describe(error)})") from None

    @classmethod
    def from_files(
        cls,
        vocab_filepath: str | os.PathLike,
        merges_filepath: str | os.PathLike,
        special_tokens: Iterable[str] | None = None,
        storage_options: dict | None = None,
        engine: str = "auto",
        pattern: str | SplitPattern = GPT2,
    ) -> Tokenizer:
        """A tokenizer from GPT-2-style ``vocab.json`` and ``merges.txt`` (CS336's interface),
        local paths or any URL fsspec reads."""
        special_tokens = check_special_tokens(special_tokens or ())
        pattern = split_pattern(pattern)
        vocab = gpt2_files.parse_vocab_json(_read_text(vocab_filepath, storage_options), special_tokens)
        merges = gpt2_files.parse_merges_txt(_read_text(merges_filepath, storage_options))
        return cls(vocab, merges, special_tokens, pattern, engine)

    # --- encoding and decoding -----------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text``."""
        if self._use_compiled(len(text)):
            return self._encode_compiled(text).tolist()
        return self._encode_python(text)

    def encode_array(self, text: str, dtype: npt.DTypeLike = np.uint32) -> np.ndarray:
        """``encode`` as a NumPy array (of ``dtype``, which must hold every id): no Python int per
        token."""
        if self._use_compiled(len(text)):
            return self._encode_compiled(text).astype(dtype)
        return np.array(self._encode_python(text), dtype)

    def encode_documents(
        self, documents: list[str], separator: str | None = None, dtype: npt.DTypeLike = np.uint32
    ) -> np.ndarray:
        """The ids of each document in turn, each followed by the id of the special token
        ``separator`` when one is given (as nanoGPT ends every document with ``<|endoftext|>``).
        Documents stand alone: no pre-token crosses from one into the next."""
        encoded = [text.encode("utf-8") for text in documents]
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
                ids += self._encode_python(data[a:b].decode("utf-8"))
                ids += end
            return np.array(ids, dtype)
        bounds, is_boundary = self.pretokenizer.document_bounds(data, ends)
        between_documents = end[0] if end else -1  # the compiled encoder writes no id for -1
        gaps = zip(bounds[1:-1:2].tolist(), bounds[2:-1:2].tolist(), is_boundary.tolist(), strict=True)
        specials = np.array(
            [
                between_documents if boundary else self.special_ids[data[a:b].decode()]
                for a, b, boundary in gaps
            ],
            np.int64,
        )
        ids = self._compiled_encoder().encode(data, bounds, specials)
        return np.concatenate([ids, end]).astype(dtype) if end and len(ends) else ids.astype(dtype)

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

    def _compiled_encoder(self) -> CompiledEncoder:
        if self._compiled is None:
            from .encode_numba_gpt4 import compiled_encoder

            self._compiled = compiled_encoder(self._byte_ids, self._merges, self.pretokenizer.pattern.name)
        return self._compiled

    def _encode_compiled(self, text: str) -> np.ndarray:
        data = text.encode("utf-8")
        bounds = self.pretokenizer.piece_bounds(data)
        between = [data[bounds[k] : bounds[k + 1]].decode("utf-8") for k in range(1, len(bounds) - 1, 2)]
        specials = np.array([self.special_ids[token] for token in between], np.int64)
        return self._compiled_encoder().encode(data, bounds, specials)

    def _encode_python(self, text: str) -> list[int]:
        ids: list[int] = []
        cache = self._cache
        findall = self.pretokenizer.pattern.compiled.findall
        for piece, is_special in self.pretokenizer.split(text):
            if is_special:
                ids.append(self.special_ids[piece])
                continue
            for pretoken in findall(piece):
                encoded = cache.get(pretoken)
                if encoded is None:
                    encoded = self._encode_new(pretoken)
                ids.extend(encoded)
        return ids

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """The token ids of the concatenation of ``iterable`` (a file's lines, say), lazily.

        Text is held back only until the next safe cut (``Pretokenizer.recut``), so memory stays
        bounded by the longest stretch without one and the time is linear in the text. Pieces
        between cuts are encoded in batches of about ``COMPILED_MIN_CHARS``: the text of two
        neighbouring pieces encodes as the two pieces do, and a batch is worth the compiled engine.
        """
        batch: list[str] = []
        size = 0
        for text in self.pretokenizer.recut(iterable):
            batch.append(text)
            size += len(text)
            if size >= COMPILED_MIN_CHARS:
                yield from self.encode("".join(batch))
                batch, size = [], 0
        if batch:
            yield from self.encode("".join(batch))

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
            return tuple(self._encode_compiled(pretoken).tolist())
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


def _read_text(path: str | os.PathLike, storage_options: dict | None) -> str:
    fs, stripped = filesystem(os.fspath(path), storage_options)
    return fs.cat_file(stripped).decode("utf-8")
