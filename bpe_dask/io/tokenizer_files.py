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
import pathlib  # noqa: F401 (the examples)
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
        would merge differently (``tiktoken_ranks``); one that training made never is.

        >>> from bpe_dask import Tokenizer
        >>> files = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"]).files()
        >>> sorted(files), files["tokenizer.tiktoken"].splitlines()[32]
        (['merges.txt', 'tokenizer.json', 'tokenizer.tiktoken', 'vocab.json'], 'IA== 32')
        """
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

    def tiktoken_ranks(self) -> dict[bytes, int]:
        """The ``mergeable_ranks`` of a ``tiktoken.Encoding`` that encodes as this tokenizer does
        (its special tokens go apart: ``special_ids``), or a ``BpeDaskError`` saying why none does.
        The ids are the ranks when four conditions hold, checked here; why tiktoken then encodes as
        ``merged`` does: docs/exactness.md#tiktokens-ranks.

        >>> from bpe_dask import Tokenizer
        >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi"}
        >>> Tokenizer(vocab, [(b"h", b"i")]).tiktoken_ranks()[b"hi"]
        256
        >>> Tokenizer({**vocab, 257: b"hi"}, [(b"h", b"i")]).tiktoken_ranks()
        Traceback (most recent call last):
        bpe_dask.errors.BpeDaskError: ids 256 and 257 hold the same bytes b'hi'
        """
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
            if self.merged(token) != (rank,):
                raise BpeDaskError(f"its merges do not make {token!r} from its own bytes")
        return ranks

    def save(self, directory: str | os.PathLike, storage_options: dict | None = None) -> None:
        """Make ``directory`` (a path or URL) hold the tokenizer's files, published whole: a
        tokenizer saved there before is replaced; a directory holding other files is refused.

        >>> from bpe_dask import Tokenizer
        >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi"}
        >>> Tokenizer(vocab, [(b"h", b"i")], ["<|endoftext|>"], "gpt4").save("tokenizer")
        >>> sorted(path.name for path in pathlib.Path("tokenizer").iterdir())
        ['_SUCCESS', 'merges.txt', 'tokenizer.json', 'tokenizer.tiktoken', 'vocab.json']
        """
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
        still runs with a time limit per call (``pattern_limit.pattern_timeout``).

        >>> from bpe_dask import Tokenizer
        >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi"}
        >>> Tokenizer(vocab, [(b"h", b"i")], ["<|endoftext|>"], "gpt4").save("saved")
        >>> loaded = Tokenizer.load("saved")
        >>> loaded.special_tokens, loaded.pretokenizer.pattern.name, loaded.encode("hi!<|endoftext|>")
        (['<|endoftext|>'], 'gpt4', [256, 33, 257])
        """
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

        >>> from bpe_dask import Tokenizer
        >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi"}
        >>> Tokenizer(vocab, [(b"h", b"i")], ["<|endoftext|>"], "gpt4").save("saved-hf")
        >>> Tokenizer.from_tokenizer_json("saved-hf/tokenizer.json")
        Tokenizer(vocab_size=258, merges=1, special_tokens=['<|endoftext|>'], pattern='gpt4', engine='auto')
        """
        path = os.fspath(path)
        try:
            text = _read_text(path, Store(storage_options or {}))
            vocab, merges, special_tokens, pattern = tokenizer_formats.parse_tokenizer_json(text)
        except FileNotFoundError:
            raise BpeDaskError(f"tokenizer {path}: no such file") from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            reason = describe(error)
            raise BpeDaskError(f"tokenizer {path}: not a byte-level BPE tokenizer.json ({reason})") from None
        if not (pattern.builtin or trust_pattern):
            raise UntrustedPatternError(
                f"tokenizer {path}: its split pattern {pattern.regex!r} is not a built-in one; load it with "
                "trust_pattern=True (--trust-pattern) if you trust the file"
            )
        try:
            return cls(vocab, merges, special_tokens, pattern, engine)
        except KeyError as error:  # a byte that no token holds
            raise BpeDaskError(f"tokenizer {path}: not a byte-level BPE tokenizer.json ({error})") from None

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
        local paths or any URL fsspec reads.

        >>> from bpe_dask import Tokenizer
        >>> Tokenizer({**{i: bytes([i]) for i in range(256)}, 256: b"hi"}, [(b"h", b"i")]).save("gpt2-style")
        >>> Tokenizer.from_files("gpt2-style/vocab.json", "gpt2-style/merges.txt").merges
        [(b'h', b'i')]
        """
        special_tokens = check_special_tokens(special_tokens or ())
        pattern = split_pattern(pattern)
        store = Store(storage_options or {})
        vocab = tokenizer_formats.parse_vocab_json(_read_text(vocab_filepath, store), special_tokens)
        merges = tokenizer_formats.parse_merges_txt(_read_text(merges_filepath, store))
        return cls(vocab, merges, special_tokens, pattern, engine)


def _read_text(path: str | os.PathLike, store: Store) -> str:
    fs, stripped = store.fs(os.fspath(path))
    return fs.cat_file(stripped).decode("utf-8")
