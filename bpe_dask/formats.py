"""File formats: word-count Parquet tables, and the tokenizer files the job writes.

Takes tables, vocabularies and merges; gives Parquet files, GPT-2 style ``vocab.json`` and
``merges.txt`` (byte-to-unicode mapped, exactly as the CS336 fixtures), a Hugging Face
``tokenizer.json``, and ``report.json``. Output directories are published whole: written
under a temporary name and renamed into place, so nobody sees half of one.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .errors import BpeDaskError
from .storage import describe, filesystem, is_local

COUNTS_SCHEMA = pa.schema([("token", pa.binary()), ("count", pa.int64())])
ARTIFACTS = ("vocab.json", "merges.txt", "tokenizer.json", "report.json")
SUCCESS = "_SUCCESS"  # written last: its presence says the directory is complete


@functools.cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters (space becomes ``Ġ``)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    mapping = {b: chr(b) for b in printable}
    shifted = (b for b in range(256) if b not in mapping)
    mapping.update({b: chr(256 + n) for n, b in enumerate(shifted)})
    return dict(sorted(mapping.items()))


def token_to_str(token: bytes) -> str:
    table = bytes_to_unicode()
    return "".join(table[b] for b in token)


def vocab_json(vocab: Mapping[int, bytes], special_tokens: Sequence[str]) -> str:
    """``{token: id}`` in id order; special tokens are written as their own text, as GPT-2 does."""
    first_merge_id = 256 + len(special_tokens)
    entries: dict[str, int] = {}
    for token_id, token in sorted(vocab.items()):
        is_special = 256 <= token_id < first_merge_id
        key = special_tokens[token_id - 256] if is_special else token_to_str(token)
        if key in entries:
            raise BpeDaskError(
                f"special token {key!r} reads the same as a learned token in vocab.json's GPT-2 form; "
                "rename the special token"
            )
        entries[key] = token_id
    return json.dumps(entries, indent=4, ensure_ascii=False)


def merges_txt(merges: Sequence[tuple[bytes, bytes]]) -> str:
    return "".join(f"{token_to_str(a)} {token_to_str(b)}\n" for a, b in merges)


def str_to_token(text: str) -> bytes:
    """The bytes a ``vocab.json`` / ``merges.txt`` string stands for (``token_to_str`` undone);
    a special token, written as its own text, as its UTF-8."""
    table = _unicode_to_bytes()
    if all(char in table for char in text):
        return bytes(table[char] for char in text)
    return text.encode("utf-8")


@functools.cache
def _unicode_to_bytes() -> dict[str, int]:
    return {char: byte for byte, char in bytes_to_unicode().items()}


def parse_vocab_json(text: str, special_tokens: Iterable[str] = ()) -> dict[int, bytes]:
    """The vocabulary of a GPT-2-style ``vocab.json``: id -> token bytes. Special tokens are
    written as their own text, so a key that is one stands for its UTF-8 ("<|fin|é>" would
    otherwise read as byte-mapped characters)."""
    specials = set(special_tokens)
    return {
        int(i): token.encode("utf-8") if token in specials else str_to_token(token)
        for token, i in json.loads(text).items()
    }


def parse_merges_txt(text: str) -> list[tuple[bytes, bytes]]:
    """The merges of a GPT-2-style ``merges.txt``, in order (a ``#version`` line is skipped)."""
    merges = []
    for line in text.splitlines():
        if line and not line.startswith("#version"):
            left, right = line.split(" ")
            merges.append((str_to_token(left), str_to_token(right)))
    return merges


def tokenizer_json(
    vocab: Mapping[int, bytes], merges: Sequence[tuple[bytes, bytes]], special_tokens: Sequence[str]
) -> str:
    """A Hugging Face ``tokenizers`` file that encodes with exactly these merges."""
    added = [
        {
            "id": 256 + i,
            "content": token,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, token in enumerate(special_tokens)
    ]
    byte_level = {"add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    document = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", **byte_level},
        "post_processor": {"type": "ByteLevel", **byte_level},
        "decoder": {"type": "ByteLevel", **byte_level},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": json.loads(vocab_json(vocab, special_tokens)),
            "merges": [f"{token_to_str(a)} {token_to_str(b)}" for a, b in merges],
        },
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


def read_counts(url: str, storage_options: dict | None = None) -> pa.Table:
    """A word-count table (a Parquet file or a directory of them), checked against the schema."""
    fs, path = filesystem(url, storage_options)
    if not fs.exists(path):
        raise BpeDaskError(f"counts not found: {url}")
    try:
        table = pq.read_table(path, filesystem=fs)
    except (pa.ArrowException, OSError) as error:
        raise BpeDaskError(f"{url}: not a readable Parquet counts table ({error})") from None
    try:
        table = table.select(COUNTS_SCHEMA.names).cast(COUNTS_SCHEMA)
    except (KeyError, pa.ArrowException):
        raise BpeDaskError(
            f"{url}: counts need columns token (binary) and count (int64); found "
            + ", ".join(f"{field.name} ({field.type})" for field in table.schema)
        ) from None
    if table.column("token").null_count or table.column("count").null_count:
        raise BpeDaskError(f"{url}: counts hold empty (null) values")
    if table.num_rows and pc.min(table.column("count")).as_py() < 1:
        raise BpeDaskError(f"{url}: counts must be positive")
    return table


def write_parquet_atomically(table: pa.Table, url: str, storage_options: dict | None = None) -> None:
    """Write a Parquet file under a temporary name and move it into place when complete."""
    with _written_atomically(url, storage_options) as (fs, partial), fs.open(partial, "wb") as f:
        pq.write_table(table, f)


def is_tokenizer_file(name: str) -> bool:
    return name in ARTIFACTS or name == SUCCESS


def is_encoded_file(name: str) -> bool:
    """The files ``bpe-dask encode`` writes: numbered ``.npy`` shards, ``index.json``, ``report.json``."""
    return name in ("index.json", "report.json", SUCCESS) or (
        name.endswith(".npy") and name.removesuffix(".npy").isdigit()
    )


def check_output_dir(
    url: str,
    overwrite: bool,
    storage_options: dict | None = None,
    ours: Callable[[str], bool] = is_tokenizer_file,
) -> None:
    """Refuse an output directory that already holds results (unless ``overwrite``) or other files."""
    fs, path = filesystem(url, storage_options)
    try:
        exists = fs.exists(path)
        names = {e.rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(path, detail=False)} if exists else set()
    except (OSError, ValueError) as error:
        raise BpeDaskError(f"cannot use output {url}: {describe(error)}") from None
    if exists and not fs.isdir(path):
        raise BpeDaskError(f"output {url} exists and is not a directory")
    foreign = sorted(name for name in names if not ours(name))
    if foreign:
        raise BpeDaskError(
            f"output directory {url} holds other files ({foreign[0]}, ...); choose another --out"
        )
    if names and not overwrite:
        raise BpeDaskError(f"output directory {url} already holds results; pass --overwrite to replace them")


def check_output_file(url: str, overwrite: bool, storage_options: dict | None = None) -> None:
    fs, path = filesystem(url, storage_options)
    try:
        exists = fs.exists(path)
    except (OSError, ValueError) as error:
        raise BpeDaskError(f"cannot use output {url}: {describe(error)}") from None
    if exists and fs.isdir(path):
        raise BpeDaskError(f"output {url} is a directory; name a file for the counts")
    if exists and not overwrite:
        raise BpeDaskError(f"output {url} already exists; pass --overwrite to replace it")


def publish_directory(url: str, files: Mapping[str, str], storage_options: dict | None = None) -> None:
    """Make ``url`` a directory holding exactly ``files`` plus ``_SUCCESS``, never half of them."""
    with staged_directory(url, storage_options) as staging:
        fs, path = filesystem(staging, storage_options)
        for filename, text in files.items():
            fs.pipe_file(f"{path}/{filename}", text.encode("utf-8"))


@contextmanager
def staged_directory(url: str, storage_options: dict | None = None) -> Iterator[str]:
    """A directory to fill (by this process or by workers) that becomes ``url`` whole.

    When the block ends without an error, ``url`` holds what was written plus ``_SUCCESS``,
    and whatever it held before is gone. Locally the directory is a hidden sibling, renamed
    into place, so ``url`` is never seen half-written and survives a failure. Object stores
    have no rename: the old contents are removed first, files go straight to ``url``, and
    ``_SUCCESS`` comes last, so readers that wait for it never see a mix.
    """
    fs, path = filesystem(url, storage_options)
    path = path.rstrip("/")
    if is_local(url):
        parent, _, name = path.rpartition("/")
        tag = uuid.uuid4().hex[:12]
        staging, retired = f"{parent}/.{name}.partial-{tag}", f"{parent}/.{name}.old-{tag}"
        fs.makedirs(staging)
        try:
            yield staging
            fs.pipe_file(f"{staging}/{SUCCESS}", b"")
            _swap_into_place(fs, staging, path, retired)
        finally:
            if fs.exists(staging):
                fs.rm(staging, recursive=True)
    else:
        if fs.exists(path):
            fs.rm(path, recursive=True)
        yield url.rstrip("/")
        fs.pipe_file(f"{path}/{SUCCESS}", b"")
        fs.invalidate_cache(path)


def _swap_into_place(fs: fsspec.AbstractFileSystem, staging: str, path: str, retired: str) -> None:
    had_previous = fs.exists(path)
    if had_previous:
        fs.mv(path, retired, recursive=True)
    try:
        fs.mv(staging, path, recursive=True)
    except BaseException:
        if had_previous:
            fs.mv(retired, path, recursive=True)  # put the previous results back
        raise
    if had_previous:
        fs.rm(retired, recursive=True)


def write_bytes_atomically(data: bytes, url: str, storage_options: dict | None = None) -> None:
    """Write a file under a temporary name and move it into place when complete."""
    with _written_atomically(url, storage_options) as (fs, partial):
        fs.pipe_file(partial, data)


@contextmanager
def _written_atomically(
    url: str, storage_options: dict | None
) -> Iterator[tuple[fsspec.AbstractFileSystem, str]]:
    """A hidden temporary path beside ``url`` to write, moved to ``url`` if the block succeeds."""
    fs, path = filesystem(url, storage_options)
    parent, _, name = path.rpartition("/")
    fs.makedirs(parent, exist_ok=True)
    partial = f"{parent}/.partial-{uuid.uuid4().hex}-{name}"
    try:
        yield fs, partial
        fs.mv(partial, path)
    except BaseException:
        if fs.exists(partial):
            fs.rm_file(partial)
        raise


def parquet_num_rows(url: str, storage_options: dict | None = None) -> int:
    fs, path = filesystem(url, storage_options)
    with fs.open(path, "rb") as f:
        return pq.ParquetFile(f).metadata.num_rows


def special_tokens_in(tokenizer_json_text: str) -> list[str]:
    """The special tokens a Hugging Face ``tokenizer.json`` registers, in id order."""
    added = json.loads(tokenizer_json_text).get("added_tokens", [])
    return [t["content"] for t in sorted(added, key=lambda t: t["id"]) if t.get("special")]
