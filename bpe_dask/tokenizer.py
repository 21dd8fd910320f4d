"""The tokenizer: a trained vocabulary and merges in, text to token ids and back out.

Takes ``vocab`` (id -> bytes), ``merges`` (in the order learned) and special tokens, as
``train_bpe`` returns them or as ``vocab.json`` / ``merges.txt`` hold them; gives ``encode``,
``encode_iterable`` and ``decode`` with GPT-2's semantics: special tokens are split out first
(longest first where several match at one place), the rest is pre-tokenized with the GPT-2
pattern, and each pre-token's bytes are merged by rank, lowest first. The interface is CS336's.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from itertools import pairwise

import regex

from . import formats
from .plan import straddled
from .pretokenize import GPT2_PATTERN, special_token_pattern
from .storage import filesystem

_PRETOKEN = regex.compile(GPT2_PATTERN)
# The last place in a buffer where text may be split without changing its encoding: before a
# whitespace character that follows a non-whitespace one (see plan._is_safe_whitespace_cut).
_LAST_SAFE_CUT = regex.compile(r"(?r)\S(?=\s)")
CACHE_LIMIT = 1 << 20
_UNMERGEABLE = (float("inf"), -1)  # (rank, merged id) of a pair no merge joins


class Tokenizer:
    """Byte-level BPE encoding and decoding with a trained vocabulary."""

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]],
        special_tokens: Iterable[str] | None = None,
    ) -> None:
        self.vocab = dict(vocab)
        self.special_tokens = sorted(set(special_tokens or ()), key=len, reverse=True)
        ids = {token: i for i, token in self.vocab.items()}
        for token in map(str.encode, self.special_tokens):
            if token not in ids:  # a special token the vocabulary lacks gets the next free id
                ids[token] = max(self.vocab, default=-1) + 1
                self.vocab[ids[token]] = token
        self._ids = ids
        self._special_ids = {token: ids[token.encode("utf-8")] for token in self.special_tokens}
        self._specials = special_token_pattern(self.special_tokens)
        self._byte_ids = [ids[bytes([b])] for b in range(256)]
        # (left id, right id) -> (rank, merged id): merging by ids, never by bytes
        self._merges = {
            (ids[a], ids[b]): (rank, ids[a + b]) for rank, (a, b) in enumerate(merges) if a + b in ids
        }
        self._cache: dict[str, tuple[int, ...]] = {}

    @classmethod
    def from_files(
        cls,
        vocab_filepath: str | os.PathLike,
        merges_filepath: str | os.PathLike,
        special_tokens: Iterable[str] | None = None,
        storage_options: dict | None = None,
    ) -> Tokenizer:
        """A tokenizer from GPT-2-style ``vocab.json`` and ``merges.txt`` (what ``bpe-dask train``
        writes), local paths or any URL fsspec reads."""
        special_tokens = list(special_tokens or ())
        vocab = formats.parse_vocab_json(_read_text(vocab_filepath, storage_options), special_tokens)
        merges = formats.parse_merges_txt(_read_text(merges_filepath, storage_options))
        return cls(vocab, merges, special_tokens)

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text``."""
        ids: list[int] = []
        cache = self._cache
        for piece, is_special in self._split_specials(text):
            if is_special:
                ids.append(self._special_ids[piece])
                continue
            for pretoken in _PRETOKEN.findall(piece):
                encoded = cache.get(pretoken)
                if encoded is None:
                    encoded = self._encode_new(pretoken)
                ids.extend(encoded)
        return ids

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """The token ids of the concatenation of ``iterable`` (a file's lines, say), lazily.

        Text is held back only up to the last place where splitting cannot change the encoding,
        so memory stays bounded by the longest stretch without one.
        """
        margin = max((len(t) for t in self.special_tokens), default=0)
        pending = ""
        for chunk in iterable:
            pending += chunk
            cut = self._last_safe_cut(pending, len(pending) - margin)
            if cut:
                yield from self.encode(pending[:cut])
                pending = pending[cut:]
        if pending:
            yield from self.encode(pending)

    def token_id(self, token: str | bytes) -> int:
        """The id of one whole token (a special token's text, or a token's bytes)."""
        token = token.encode("utf-8") if isinstance(token, str) else token
        try:
            return self._ids[token]
        except KeyError:
            raise KeyError(f"{token!r} is not a token of this vocabulary") from None

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``; bytes that are not valid UTF-8 become U+FFFD."""
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")

    def _split_specials(self, text: str) -> Iterator[tuple[str, bool]]:
        if self._specials is None:
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

    def _last_safe_cut(self, text: str, end: int) -> int | None:
        """The last position before ``end`` where ``text`` splits without changing its encoding."""
        while end > 0:
            match = _LAST_SAFE_CUT.search(text, 0, end)
            if match is None:
                return None
            cut = match.end()
            if not straddled(text, cut, self.special_tokens):
                return cut
            end = match.start() + 1
        return None

    def _encode_new(self, pretoken: str) -> tuple[int, ...]:
        """The ids of a pre-token not in the cache, which keeps them."""
        if len(self._cache) >= CACHE_LIMIT:
            self._cache.clear()
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
