"""The tokenizer's directory contract: ``save`` and ``load``, the writer beside the reader.

Takes a ``Tokenizer`` (its vocabulary, merges, special tokens and split pattern); gives the files
a training job writes into a directory, ``vocab.json``, ``merges.txt``, ``tokenizer.json`` (which
records the split pattern) and ``tokenizer.tiktoken`` (tiktoken's ranks), and the tokenizer back
from them. ``TokenizerFiles`` is a part of ``Tokenizer``; ``gpt2_files`` holds the formats.

A split pattern read from a file is run only if it is a built-in one (gpt2, gpt4, o200k) or the
caller says it trusts it (``trust_pattern``): a regex can take time exponential in its text's length.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Self

from bpe_dask.errors import BpeDaskError
from bpe_dask.io import tokenizer_formats
from bpe_dask.io.outputs import check_output_dir
from bpe_dask.io.publish import publish_directory
from bpe_dask.io.storage import Store, describe
from bpe_dask.rules.pretokenize import GPT2, SplitPattern, check_special_tokens, split_pattern

log = logging.getLogger(__name__)

FILES = ("vocab.json", "merges.txt", "tokenizer.json", "tokenizer.tiktoken")


class UntrustedPatternError(BpeDaskError):
    """A tokenizer's file holds a split pattern that is not built in, and the caller did not trust it."""


class TokenizerFiles:
    """``Tokenizer``'s files: ``files``, ``save``, ``load``, ``from_files`` and ``tiktoken_ranks``."""

    def files(self) -> dict[str, str]:
        """The files ``save`` writes, by name: what a directory `bpe-dask train` wrote holds.

        ``tokenizer.tiktoken`` is left out, with a warning, for a vocabulary whose ranks tiktoken
        would merge differently (``tiktoken_ranks``); one that training made never is."""
        pattern = self.pretokenizer.pattern
        files = {
            "vocab.json": tokenizer_formats.vocab_json(self.vocab, self.special_ids),
            "merges.txt": tokenizer_formats.merges_txt(self.merges),
            "tokenizer.json": tokenizer_formats.tokenizer_json(
                self.vocab, self.merges, self.special_ids, pattern
            ),
        }
        try:
            files["tokenizer.tiktoken"] = tokenizer_formats.tiktoken_bpe(self.tiktoken_ranks())
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
        directory, store = os.fspath(directory), Store(storage_options or {})
        check_output_dir(directory, True, lambda name: name in (*FILES, "report.json"), store)
        publish_directory(directory, self.files(), store)

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

        A split pattern that is not built in (gpt2, gpt4, o200k) is refused unless ``trust_pattern``
        is true: a regex from a file may take time exponential in its text's length. A trusted one
        still runs with a time limit per call (``patterns.PATTERN_TIMEOUT``)."""
        folder = os.fspath(directory).rstrip("/")
        try:
            fs, path = Store(storage_options or {}).fs(f"{folder}/tokenizer.json")
            described = fs.cat_file(path).decode() if fs.exists(path) else None
            if special_tokens is None:
                special_tokens = tokenizer_formats.special_tokens_in(described) if described else []
            pattern = tokenizer_formats.pattern_in(described) if described else GPT2
            if not (pattern.builtin or trust_pattern):
                raise UntrustedPatternError(
                    f"tokenizer {folder}: its split pattern {pattern.regex!r} is not a built-in one; "
                    "load it with trust_pattern=True (bpe-dask encode --trust-pattern) if you trust the file"
                )
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
    ) -> Self:
        """A tokenizer from GPT-2-style ``vocab.json`` and ``merges.txt`` (CS336's interface),
        local paths or any URL fsspec reads."""
        special_tokens = check_special_tokens(special_tokens or ())
        pattern = split_pattern(pattern)
        store = Store(storage_options or {})
        vocab = tokenizer_formats.parse_vocab_json(_read_text(vocab_filepath, store), special_tokens)
        merges = tokenizer_formats.parse_merges_txt(_read_text(merges_filepath, store))
        return cls(vocab, merges, special_tokens, pattern, engine)


def _read_text(path: str | os.PathLike, store: Store) -> str:
    fs, stripped = store.fs(os.fspath(path))
    return fs.cat_file(stripped).decode("utf-8")
