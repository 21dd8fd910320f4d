"""The map task: blocks within a range, compressed inputs, and decoding errors."""

from __future__ import annotations

import bz2
import gzip
import lzma
import random

import pytest
from test_plan import ALPHABET, SPECIAL_SETS, whole_counts

from bpe_dask.count import CountSettings, count_range
from bpe_dask.errors import BpeDaskError
from bpe_dask.plan import expand_inputs, plan_ranges

EOT = "<|endoftext|>"


def counts_of(path, specials, block_size, chunk_size=1 << 30):
    files = expand_inputs([str(path)])
    total = {}
    for byte_range in plan_ranges(files, chunk_size, specials):
        for word, count in count_range(
            byte_range, CountSettings(tuple(specials)), block_size=block_size
        ).items():
            total[word.encode()] = total.get(word.encode(), 0) + count
    return total


@pytest.mark.parametrize("specials", SPECIAL_SETS, ids=lambda s: "+".join(s) or "none")
@pytest.mark.parametrize("seed", range(4))
def test_blocks_inside_a_range_count_like_the_whole(tmp_path, specials, seed):
    rng = random.Random(seed)
    text = "".join(rng.choices(ALPHABET + specials * 3, k=rng.randint(100, 800)))
    path = tmp_path / "in.txt"
    path.write_bytes(text.encode())
    want = dict(whole_counts(text, specials))
    for block_size in (1, 2, 5, 17, 64, 1000):
        assert counts_of(path, specials, block_size) == want, block_size
        assert counts_of(path, specials, block_size, chunk_size=97) == want, block_size


COMPRESSORS = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}
try:
    import zstandard

    COMPRESSORS[".zst"] = zstandard.ZstdCompressor().compress
except ImportError:  # zstandard is optional
    pass


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_compressed_inputs_stream_in_blocks(tmp_path, suffix):
    rng = random.Random(3)
    text = "".join(rng.choices(ALPHABET + [EOT] * 3, k=5000))
    path = tmp_path / f"in.txt{suffix}"
    path.write_bytes(COMPRESSORS[suffix](text.encode()))
    files = expand_inputs([str(path)])
    assert files[0].compression is not None
    assert len(plan_ranges(files, 64, [EOT])) == 1  # a compressed file cannot be range-read
    want = dict(whole_counts(text, [EOT]))
    for block_size in (7, 256, 1 << 20):
        assert counts_of(path, [EOT], block_size, chunk_size=64) == want


def test_invalid_utf8_in_a_compressed_file_names_the_decompressed_offset(tmp_path):
    path = tmp_path / "bad.txt.gz"
    path.write_bytes(gzip.compress(b"good words " * 100 + b"\xff" + b" more"))
    (byte_range,) = plan_ranges(expand_inputs([str(path)]), 1 << 20, [])
    with pytest.raises(
        BpeDaskError, match=r"bad.txt.gz: invalid UTF-8 at byte offset 1100 of the decompressed"
    ):
        count_range(byte_range, CountSettings(), block_size=64)


def test_invalid_utf8_offset_is_exact_in_any_block(tmp_path):
    path = tmp_path / "bad.txt"
    data = ("ok é " * 300).encode()
    path.write_bytes(data + b"\xe9t\xc3" + data)
    for chunk_size, block_size in ((1 << 20, 1 << 20), (100, 7), (1000, 64)):
        messages = set()
        for byte_range in plan_ranges(expand_inputs([str(path)]), chunk_size, []):
            try:
                count_range(byte_range, CountSettings(), block_size=block_size)
            except BpeDaskError as error:
                messages.add(str(error))
        assert messages == {f"{path}: invalid UTF-8 at byte offset {len(data)}"}


@pytest.mark.parametrize("seed", range(30))
def test_counting_distinct_chunks_equals_pre_tokenizing_everything(seed):
    """The fast path (chunks first, each distinct chunk pre-tokenized once) against the plain loop."""
    from bpe_dask.pretokenize import count_pretokens, special_token_pattern

    rng = random.Random(seed)
    text = "".join(rng.choices([*ALPHABET, EOT], k=rng.randint(0, 3000)))
    for specials in ([], [EOT]):
        got = {w.encode(): c for w, c in count_pretokens(text, special_token_pattern(specials)).items()}
        assert got == dict(whole_counts(text, specials))
