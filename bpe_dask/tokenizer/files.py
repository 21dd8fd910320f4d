"""A tokenizer's files: a ``Tokenizer`` in, its directory out (``save``: ``vocab.json``, ``merges.txt``,
``tokenizer.json``, ``tokenizer.tiktoken``), and back (``load``, and GPT-2's files or a Hugging Face
``tokenizer.json``). The ``Tokenizer`` methods of the same names are these; the formats themselves
are ``io.tokenizer_files`` and ``io.tokenizer_formats``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from bpe_dask.io.tokenizer_files import files_of, load_files, read_gpt2_files, read_tokenizer_json, save_files
from bpe_dask.io.tokenizer_formats import tiktoken_ranks as ranks_of
from bpe_dask.rules.pretokenize import GPT2, SplitPattern, split_pattern


def files(tokenizer: Any, roles: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The files ``save`` writes, by name: ``vocab.json``, ``merges.txt``, ``tokenizer.json``,
    ``tokenizer.tiktoken`` (left out, with a warning, where tiktoken would merge otherwise), and
    for ``transformers``' ``AutoTokenizer`` ``tokenizer_config.json`` and ``special_tokens_map.json``,
    which say the special tokens' ``roles`` (``bos_token``, ``eos_token``, ``pad_token``; by default
    ``<|endoftext|>``, where it is one, as bos and eos, as GPT-2's).

    >>> from bpe_dask import Tokenizer
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
    return files_of(tokenizer.vocabulary, tokenizer.pretokenizer.pattern, roles)


def tiktoken_ranks(tokenizer: Any) -> dict[bytes, int]:
    """The ``mergeable_ranks`` of a ``tiktoken.Encoding`` that encodes as ``tokenizer`` does (its
    special tokens apart), or a ``BpeDaskError`` saying why none does.

    >>> from bpe_dask import Tokenizer
    >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi"}
    >>> Tokenizer(vocab, [(b"h", b"i")]).tiktoken_ranks()[b"hi"]
    256
    """
    return ranks_of(tokenizer.vocabulary)


def save(
    tokenizer: Any,
    directory: str | os.PathLike,
    storage_options: dict | None = None,
    roles: Mapping[str, str | None] | None = None,
) -> None:
    """Make ``directory`` (a path or URL) hold the tokenizer's ``files`` (with the special tokens'
    ``roles``), published whole: a tokenizer saved there before is replaced; a directory holding
    other files is refused.

    >>> from bpe_dask import Tokenizer
    >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).save("saved")
    >>> sorted(os.listdir("saved"))  # doctest: +NORMALIZE_WHITESPACE
    ['_SUCCESS', 'merges.txt', 'special_tokens_map.json', 'tokenizer.json', 'tokenizer.tiktoken',
     'tokenizer_config.json', 'vocab.json']
    """
    save_files(directory, tokenizer.files(roles), storage_options)


def load(
    cls: Any,
    directory: str | os.PathLike,
    special_tokens: Iterable[str] | None = None,
    storage_options: dict | None = None,
    engine: str = "auto",
    *,
    trust_pattern: bool = False,
) -> Any:
    """The tokenizer ``save`` (or `bpe-dask train`) wrote into ``directory``, with the special
    tokens its ``tokenizer.json`` registers unless ``special_tokens`` are given.

    A split pattern that is not built in (gpt2, gpt4, o200k) is refused unless ``trust_pattern``
    is true: a regex from a file may take time exponential in its text's length. A trusted one
    still runs with a time limit per call (``pattern_limit.pattern_timeout``).

    >>> from bpe_dask import Tokenizer
    >>> Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|x|>"], "gpt4").save("saved")
    >>> Tokenizer.load("saved").encode("hi<|x|>")
    [104, 105, 256]
    """
    vocabulary, pattern = load_files(directory, special_tokens, storage_options, trust_pattern=trust_pattern)
    return cls._of(vocabulary, pattern, engine)


def from_tokenizer_json(
    cls: Any,
    path: str | os.PathLike,
    storage_options: dict | None = None,
    engine: str = "auto",
    *,
    trust_pattern: bool = False,
) -> Any:
    """The tokenizer of a Hugging Face ``tokenizer.json`` file of the byte-level BPE kind (GPT-2's,
    or one `bpe-dask train` wrote), with the special tokens it registers; a split pattern that
    is not built in is refused unless ``trust_pattern``, as in ``load``.

    >>> from bpe_dask import Tokenizer
    >>> Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|x|>"]).save("saved")
    >>> Tokenizer.from_tokenizer_json("saved/tokenizer.json").encode("hi<|x|>")
    [104, 105, 256]
    """
    vocabulary, pattern = read_tokenizer_json(path, storage_options, trust_pattern=trust_pattern)
    return cls._of(vocabulary, pattern, engine)


def from_files(
    cls: Any,
    vocab_filepath: str | os.PathLike,
    merges_filepath: str | os.PathLike,
    special_tokens: Iterable[str] | None = None,
    storage_options: dict | None = None,
    engine: str = "auto",
    pattern: str | SplitPattern = GPT2,
) -> Any:
    """A tokenizer from GPT-2-style ``vocab.json`` and ``merges.txt`` (CS336's interface), local
    paths or any URL fsspec reads; with no ``special_tokens`` given (``None``), the entries of
    ``vocab.json`` that are neither a byte nor a merge's result are its special tokens, said in a
    warning (GPT-2's ``<|endoftext|>``); ``[]`` for none.

    >>> from bpe_dask import Tokenizer
    >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi"}
    >>> Tokenizer(vocab, [(b"h", b"i")]).save("saved")
    >>> Tokenizer.from_files("saved/vocab.json", "saved/merges.txt", ["<|x|>"]).encode("hi<|x|>")
    [256, 257]
    """
    vocabulary = read_gpt2_files(vocab_filepath, merges_filepath, special_tokens, storage_options)
    return cls._of(vocabulary, split_pattern(pattern), engine)
