"""Encoding (the map stage of ``bpe-dask encode``): one byte range and a tokenizer in, one ``.npy``
shard of token ids out.

Takes a ``ByteRange``, a ``Tokenizer`` and the output directory; reads the range as text blocks
cut at safe places (``blocks``: the cuts that leave the pre-tokens unchanged leave the encoding
unchanged too), encodes each block, and writes the ids as a NumPy ``.npy`` array: ``uint16``
while every id fits, ``uint32`` beyond. Shard names are the range's position in the plan,
zero-padded, so sorted names follow the input order.
"""

from __future__ import annotations

import io
from array import array
from dataclasses import dataclass

import numpy as np

from .blocks import iter_texts
from .errors import retrying
from .plan import ByteRange
from .publish import write_bytes_atomically
from .tokenizer import Tokenizer


@dataclass(frozen=True)
class EncodedShard:
    """A finished encode task: its file, the range it covers, and how many tokens it holds."""

    name: str
    input: str
    start: int
    end: int
    tokens: int

    def index_entry(self) -> dict:
        return {"shard": self.name, "input": self.input, "start": self.start, "end": self.end,
                "tokens": self.tokens}  # fmt: skip


def dtype_for(tokenizer: Tokenizer) -> str:
    return "uint16" if max(tokenizer.vocab) < 2**16 else "uint32"


def shard_name(position: int, total: int) -> str:
    return f"{position:0{max(6, len(str(total - 1)))}d}.npy"


def is_encoded_file(name: str) -> bool:
    """The files ``bpe-dask encode`` writes: numbered ``.npy`` shards, ``index.json``, ``report.json``."""
    return name in ("index.json", "report.json") or (
        name.endswith(".npy") and name.removesuffix(".npy").isdigit()
    )


def encode_range_to_shard(
    byte_range: ByteRange,
    tokenizer: Tokenizer,
    out_dir: str,
    name: str,
    storage_options: dict | None = None,
    utf8_errors: str = "strict",
) -> EncodedShard:
    """Encode one range and write its shard; a failure that may be transient is retried in place."""
    return retrying(
        _encode_range_to_shard, byte_range, tokenizer, out_dir, name, storage_options, utf8_errors
    )


def _encode_range_to_shard(
    byte_range: ByteRange,
    tokenizer: Tokenizer,
    out_dir: str,
    name: str,
    storage_options: dict | None,
    utf8_errors: str,
) -> EncodedShard:
    ids = array("I")
    for text in iter_texts(byte_range, tokenizer.pretokenizer, storage_options, utf8_errors=utf8_errors):
        ids.extend(tokenizer.encode(text))
    tokens = np.frombuffer(ids, dtype=np.uint32).astype(dtype_for(tokenizer))
    buffer = io.BytesIO()
    np.save(buffer, tokens, allow_pickle=False)
    write_bytes_atomically(buffer.getvalue(), f"{out_dir.rstrip('/')}/{name}", storage_options)
    return EncodedShard(name, byte_range.file.url, byte_range.start, byte_range.end, len(tokens))
