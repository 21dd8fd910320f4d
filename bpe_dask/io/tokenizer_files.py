"""The tokenizer's directory contract: the files ``save_files`` writes beside what ``load_files`` reads.

Takes a tokenizer's ``Vocabulary`` (``rules.vocabulary``: its vocabulary, merges and special tokens)
and split pattern; gives the files a training job writes into a directory (``files_of``:
``vocab.json``, ``merges.txt``, ``tokenizer.json``, which records the special tokens and the split
pattern, and ``tokenizer.tiktoken``, tiktoken's ranks) and publishes them (``save_files``). Reads a
vocabulary and a split pattern back from such a directory (``load_files``), from GPT-2-style
``vocab.json`` and ``merges.txt`` (``read_gpt2_files``) or from a Hugging Face ``tokenizer.json``
(``read_tokenizer_json``), and a tokenizer to continue training from, of any of these kinds or a
tiktoken rank file (``read_base``). What each file holds, and how: ``tokenizer_formats``.

A split pattern read from a file is run only if it is a built-in one (``rules.patterns.PATTERNS``) or
the caller says it trusts it (``trust_pattern``): a regex can take time exponential in its text's length.
The readers of a directory and of a ``tokenizer.json`` say what is wrong with one in a one-line
``BpeDaskError`` naming it.
"""

from __future__ import annotations

import gzip
import itertools
import logging
import os
import pathlib  # noqa: F401 (the examples)
from collections.abc import Callable, Iterable, Mapping
from pathlib import PurePosixPath
from typing import TypeVar

from bpe_dask.errors import BpeDaskError
from bpe_dask.io import tokenizer_formats
from bpe_dask.io.outputs import check_output_dir
from bpe_dask.io.publish import publish_directory
from bpe_dask.io.storage import Store, describe
from bpe_dask.io.written import TOKENIZER, TOKENIZER_FILES
from bpe_dask.rules.pretokenize import GPT2, SplitPattern, check_special_tokens
from bpe_dask.rules.vocabulary import Vocabulary

log = logging.getLogger(__name__)
T = TypeVar("T")

FILES = TOKENIZER_FILES  # named where every output's names are (``io.written``)


class UntrustedPatternError(BpeDaskError):
    """A tokenizer's file holds a split pattern that is not built in, and the caller did not trust it."""


def files_of(
    vocabulary: Vocabulary, pattern: SplitPattern, roles: Mapping[str, str | None] | None = None
) -> dict[str, str]:
    """The files of a tokenizer directory, by name: what a directory `bpe-dask train` wrote holds,
    ``tokenizer_config.json`` and ``special_tokens_map.json`` saying which special token has each of
    the ``roles`` transformers knows (``tokenizer_formats.token_roles``: ``<|endoftext|>`` as bos
    and eos by default).

    ``tokenizer.tiktoken`` is left out, with a warning, for a vocabulary whose ranks tiktoken would
    merge differently (``tokenizer_formats.tiktoken_ranks``); one that training made never is.

    >>> vocabulary = Vocabulary({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
    >>> files = files_of(vocabulary, GPT2)
    >>> sorted(files)  # doctest: +NORMALIZE_WHITESPACE
    ['merges.txt', 'special_tokens_map.json', 'tokenizer.json', 'tokenizer.tiktoken',
     'tokenizer_config.json', 'vocab.json']
    >>> files["tokenizer.tiktoken"].splitlines()[32], files["special_tokens_map.json"].split()
    ('IA== 32', ['{', '"bos_token":', '"<|endoftext|>",', '"eos_token":', '"<|endoftext|>"', '}'])
    """
    vocab, merges, special_ids = vocabulary.vocab, vocabulary.merges, vocabulary.special_ids
    roles = tokenizer_formats.token_roles(special_ids, roles)
    files = {
        "vocab.json": tokenizer_formats.vocab_json(vocab, special_ids),
        "merges.txt": tokenizer_formats.merges_txt(merges),
        "tokenizer.json": tokenizer_formats.tokenizer_json(vocab, merges, special_ids, pattern),
        "tokenizer_config.json": tokenizer_formats.tokenizer_config_json(special_ids, roles),
        "special_tokens_map.json": tokenizer_formats.special_tokens_map_json(roles),
    }
    try:
        files["tokenizer.tiktoken"] = tokenizer_formats.tiktoken_bpe(
            tokenizer_formats.tiktoken_ranks(vocabulary)
        )
    except BpeDaskError as error:
        log.warning("no tokenizer.tiktoken: %s", error)
    return files


def save_files(
    directory: str | os.PathLike, files: Mapping[str, str], storage_options: dict | None = None
) -> None:
    """Make ``directory`` (a path or URL) hold ``files`` (by name), published whole: a tokenizer saved
    there before is replaced; a directory holding files of other names than a tokenizer's is refused.

    >>> save_files("tokenizer", {"vocab.json": "{}", "merges.txt": ""})
    >>> sorted(path.name for path in pathlib.Path("tokenizer").iterdir())
    ['_SUCCESS', 'merges.txt', 'vocab.json']
    """
    directory, store = os.fspath(directory), Store(storage_options or {})
    check_output_dir(directory, True, TOKENIZER.owns, store)
    publish_directory(directory, dict(files), store)


def load_files(
    directory: str | os.PathLike,
    special_tokens: Iterable[str] | None = None,
    storage_options: dict | None = None,
    *,
    trust_pattern: bool = False,
) -> tuple[Vocabulary, SplitPattern]:
    """The vocabulary and split pattern of the tokenizer directory ``directory`` (what ``save_files``
    or `bpe-dask train` wrote), with the special tokens its ``tokenizer.json`` registers unless
    ``special_tokens`` are given (where it has no ``tokenizer.json``: those ``read_gpt2_files`` finds
    in ``vocab.json``, and GPT-2's pattern).

    A split pattern that is not built in (``rules.patterns.PATTERNS``) is refused unless ``trust_pattern``
    is true: a regex from a file may take time exponential in its text's length. A file missing,
    unreadable or not of its kind is a one-line ``BpeDaskError`` naming the directory.

    >>> vocabulary = Vocabulary({**{i: bytes([i]) for i in range(256)}, 256: b"hi"}, [(b"h", b"i")])
    >>> save_files("saved", files_of(vocabulary, GPT2))
    >>> loaded, pattern = load_files("saved", ["<|endoftext|>"])
    >>> loaded.merges, loaded.special_ids, pattern.name
    ([(b'h', b'i')], {'<|endoftext|>': 257}, 'gpt2')
    >>> load_files("nowhere")
    Traceback (most recent call last):
    bpe_dask.errors.BpeDaskError: tokenizer nowhere: no such directory (a directory `bpe-dask train` wrote)
    """
    folder = os.fspath(directory).rstrip("/")
    store = Store(storage_options or {})
    fs, path = store.fs(f"{folder}/tokenizer.json")
    try:
        described = fs.cat_file(path).decode() if fs.exists(path) else None
        if special_tokens is None and described:
            special_tokens = tokenizer_formats.special_tokens_in(described)
        pattern = tokenizer_formats.pattern_in(described) if described else GPT2
        _check_trusted(folder, pattern, trust_pattern)
        vocab, merges = f"{folder}/vocab.json", f"{folder}/merges.txt"
        return read_gpt2_files(vocab, merges, special_tokens, storage_options), pattern
    except FileNotFoundError as error:
        missing = PurePosixPath(error.filename or "").name or "vocab.json"
        what = f"no {missing} there" if _is_directory(store, folder) else "no such directory"
        raise BpeDaskError(f"tokenizer {folder}: {what} (a directory `bpe-dask train` wrote)") from None
    except (OSError, ValueError, KeyError) as error:
        raise BpeDaskError(f"tokenizer {folder}: cannot read it ({describe(error)})") from None


def _check_trusted(where: str, pattern: SplitPattern, trust_pattern: bool) -> None:
    """Refuse the split pattern of the tokenizer at ``where`` unless it is built in or trusted."""
    if not (pattern.builtin or trust_pattern):
        raise UntrustedPatternError(
            f"tokenizer {where}: its split pattern {pattern.regex!r} is not a built-in one; load it with "
            "trust_pattern=True if you trust the file"
        )


def _is_directory(store: Store, path: str) -> bool:
    try:
        fs, stripped = store.fs(path)
        return fs.isdir(stripped)
    except Exception:  # the store's own error: the one the caller names is clearer
        return True


def read_gpt2_files(
    vocab_filepath: str | os.PathLike,
    merges_filepath: str | os.PathLike,
    special_tokens: Iterable[str] | None = (),
    storage_options: dict | None = None,
) -> Vocabulary:
    """The vocabulary of GPT-2-style ``vocab.json`` and ``merges.txt`` (local paths or any URL fsspec
    reads) with ``special_tokens``; ``None``: the entries of ``vocab.json`` that are neither a byte
    nor a merge's result (``tokenizer_formats.special_tokens_of``), said in a warning, as GPT-2's
    ``<|endoftext|>`` and CS336's. Raises ``FileNotFoundError`` (naming the file) for a file that is
    not there, and a one-line ``BpeDaskError`` naming the file for one not of its kind.

    >>> vocabulary = Vocabulary({**{i: bytes([i]) for i in range(256)}, 256: b"hi"}, [(b"h", b"i")])
    >>> save_files("gpt2-style", files_of(vocabulary, GPT2))
    >>> read_gpt2_files("gpt2-style/vocab.json", "gpt2-style/merges.txt").merges
    [(b'h', b'i')]
    >>> read_gpt2_files("gpt2-style/merges.txt", "gpt2-style/vocab.json")
    Traceback (most recent call last):
    bpe_dask.errors.BpeDaskError: gpt2-style/merges.txt is not a GPT-2-style vocab.json (Expecting value: ...)
    """
    store = Store(storage_options or {})
    vocab_text, merges_text = _read_text(vocab_filepath, store), _read_text(merges_filepath, store)
    given = check_special_tokens(special_tokens or ())
    vocab = _parsed(vocab_filepath, "vocab.json", tokenizer_formats.parse_vocab_json, vocab_text, given)
    merges = _parsed(merges_filepath, "merges.txt", tokenizer_formats.parse_merges_txt, merges_text)
    if special_tokens is None:
        given = check_special_tokens(tokenizer_formats.special_tokens_of(vocab_text, merges))
        if given:
            log.warning(
                "%s: %s neither a byte nor a merge's result, so taken as special: %s (name them with "
                "special_tokens to choose)",
                os.fspath(vocab_filepath),
                "an entry" if len(given) == 1 else f"{len(given)} entries",
                ", ".join(given),
            )
            vocab = tokenizer_formats.parse_vocab_json(vocab_text, given)
    try:
        return Vocabulary(vocab, merges, given)
    except KeyError as error:  # a byte no token holds, or a merge of tokens it lacks
        raise BpeDaskError(
            f"{os.fspath(vocab_filepath)} and {os.fspath(merges_filepath)} do not make a byte-level BPE "
            f"vocabulary ({error})"
        ) from None


def _parsed(path: str | os.PathLike, kind: str, parse: Callable[..., T], *args: object) -> T:
    """``parse(*args)`` of the file ``path``, its failure a one-line ``BpeDaskError`` naming the file."""
    try:
        return parse(*args)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise BpeDaskError(f"{os.fspath(path)} is not a GPT-2-style {kind} ({describe(error)})") from None


def read_tokenizer_json(
    path: str | os.PathLike, storage_options: dict | None = None, *, trust_pattern: bool = False
) -> tuple[Vocabulary, SplitPattern]:
    """The vocabulary and split pattern of a Hugging Face ``tokenizer.json`` file of the byte-level BPE
    kind (GPT-2's, or one `bpe-dask train` wrote), with the special tokens it registers. A split
    pattern that is not built in is refused unless ``trust_pattern``, as in ``load_files``; a file
    missing or of another kind is a one-line ``BpeDaskError`` naming it.

    >>> vocabulary = Vocabulary({**{i: bytes([i]) for i in range(256)}, 256: b"hi"}, [(b"h", b"i")])
    >>> save_files("saved-hf", files_of(Vocabulary(vocabulary.vocab, vocabulary.merges, ["<|x|>"]), GPT2))
    >>> loaded, pattern = read_tokenizer_json("saved-hf/tokenizer.json")
    >>> loaded.special_ids, len(loaded.vocab), pattern.name
    ({'<|x|>': 257}, 258, 'gpt2')
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
    _check_trusted(path, pattern, trust_pattern)
    try:
        return Vocabulary(vocab, merges, special_tokens), pattern
    except KeyError as error:  # a byte that no token holds
        raise BpeDaskError(f"tokenizer {path}: not a byte-level BPE tokenizer.json ({error})") from None


def read_base(
    location: str, special_tokens: Iterable[str] | None = None, storage_options: dict | None = None
) -> tuple[Vocabulary, SplitPattern | None]:
    """A tokenizer to continue training from (``init_from``), and its split pattern (None: a rank file
    holds none), from whichever ``location`` is: a tokenizer directory (``load_files``: bpe-dask's, or
    GPT-2-style ``vocab.json`` and ``merges.txt``) or a Hugging Face ``tokenizer.json``, with their own
    special tokens, or a tiktoken rank file (gzipped or not; its merges recovered from the ranks,
    ``special_tokens`` its special tokens, at the ids it leaves free first). A one-line
    ``BpeDaskError`` names it where it is none of them.

    >>> vocabulary = Vocabulary({**{i: bytes([i]) for i in range(256)}, 256: b"hi"}, [(b"h", b"i")])
    >>> save_files("base", files_of(vocabulary, GPT2))
    >>> [read_base(path)[0].merges for path in ("base", "base/tokenizer.json", "base/tokenizer.tiktoken")]
    [[(b'h', b'i')], [(b'h', b'i')], [(b'h', b'i')]]
    >>> read_base("nowhere")
    Traceback (most recent call last):
    bpe_dask.errors.BpeDaskError: init_from='nowhere': no such file or directory
    """
    store = Store(storage_options or {})
    fs, path = store.fs(location)
    if fs.isdir(path):  # with its own special tokens: each keeps its id
        return load_files(location, None, storage_options, trust_pattern=True)
    if not fs.exists(path):
        raise BpeDaskError(f"init_from={location!r}: no such file or directory")
    if PurePosixPath(path).name.endswith(".json"):
        return read_tokenizer_json(location, storage_options, trust_pattern=True)
    data = fs.cat_file(path)
    try:
        text = (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8")
        vocab, merges = tokenizer_formats.parse_tiktoken_bpe(text)
        # The file holds no special token: those given take the ids it leaves free first, as a
        # tokenizer's own rank file leaves theirs (bpe-dask's: 256 on, between the bytes and the merges).
        free = (i for i in itertools.count() if i not in vocab)
        given = check_special_tokens(special_tokens or ())
        for token in given:
            vocab[next(free)] = token.encode("utf-8")
        return Vocabulary(vocab, merges, given), None
    except (OSError, ValueError, KeyError, EOFError) as error:
        raise BpeDaskError(
            f"init_from={location!r} is not a tokenizer directory, a tokenizer.json or a tiktoken rank "
            f"file ({describe(error)})"
        ) from None


def _read_text(path: str | os.PathLike, store: Store) -> str:
    fs, stripped = store.fs(os.fspath(path))
    data = fs.cat_file(stripped)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BpeDaskError(f"{os.fspath(path)} is not UTF-8 text (byte {error.start:,})") from None
