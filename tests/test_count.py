"""The map task: blocks within a range, compressed inputs, and decoding errors."""

from __future__ import annotations

import bz2
import contextlib
import gzip
import lzma
import random

import pytest
from test_plan import ALPHABET, ENGINES, SPECIAL_SETS, counts_of, whole_counts

from bpe_dask.errors import BpeDaskError
from bpe_dask.io.inputs import expand_inputs
from bpe_dask.io.plan import plan_ranges
from bpe_dask.io.text import iter_texts, iter_utf8
from bpe_dask.rules.pretokenize import Pretokenizer
from bpe_dask.sources.files import FilePart
from bpe_dask.stages.count import CountSettings, count_part

EOT = "<|endoftext|>"


def counts_of_file(path, specials, block_size, chunk_size=1 << 30, engine="auto"):
    files = expand_inputs([str(path)])
    total = {}
    for byte_range in plan_ranges(files, chunk_size, Pretokenizer(specials)):
        settings = CountSettings(tuple(specials), engine=engine)
        counter = count_part(FilePart(byte_range), settings, block_size=block_size)
        for word, count in counts_of(counter).items():
            total[word] = total.get(word, 0) + count
    return total


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("specials", SPECIAL_SETS, ids=lambda s: "+".join(s) or "none")
@pytest.mark.parametrize("seed", range(4))
def test_blocks_inside_a_range_count_like_the_whole(tmp_path, specials, seed, engine):
    rng = random.Random(seed)
    text = "".join(rng.choices(ALPHABET + specials * 3, k=rng.randint(100, 800)))
    path = tmp_path / "in.txt"
    path.write_bytes(text.encode())
    want = dict(whole_counts(text, specials))
    for block_size in (1, 2, 5, 17, 64, 1000):
        assert counts_of_file(path, specials, block_size, engine=engine) == want, block_size
        assert counts_of_file(path, specials, block_size, chunk_size=97, engine=engine) == want, block_size


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
    assert len(plan_ranges(files, 64, Pretokenizer([EOT]))) == 1  # a compressed file cannot be range-read
    want = dict(whole_counts(text, [EOT]))
    for block_size in (7, 256, 1 << 20):
        assert counts_of_file(path, [EOT], block_size, chunk_size=64) == want


def test_invalid_utf8_in_a_compressed_file_names_the_decompressed_offset(tmp_path):
    path = tmp_path / "bad.txt.gz"
    path.write_bytes(gzip.compress(b"good words " * 100 + b"\xff" + b" more"))
    (byte_range,) = plan_ranges(expand_inputs([str(path)]), 1 << 20, Pretokenizer())
    with pytest.raises(
        BpeDaskError, match=r"bad.txt.gz: invalid UTF-8 at byte offset 1100 of the decompressed"
    ):
        count_part(FilePart(byte_range), CountSettings(), block_size=64)


def test_invalid_utf8_offset_is_exact_in_any_block(tmp_path):
    path = tmp_path / "bad.txt"
    data = ("ok é " * 300).encode()
    path.write_bytes(data + b"\xe9t\xc3" + data)
    for chunk_size, block_size in ((1 << 20, 1 << 20), (100, 7), (1000, 64)):
        messages = set()
        for byte_range in plan_ranges(expand_inputs([str(path)]), chunk_size, Pretokenizer()):
            try:
                count_part(FilePart(byte_range), CountSettings(), block_size=block_size)
            except BpeDaskError as error:
                messages.add(str(error))
        assert len(messages) == 1
        assert messages.pop().startswith(f"{path}: invalid UTF-8 at byte offset {len(data)} ")


@pytest.mark.parametrize("seed", range(30))
def test_counting_distinct_chunks_equals_pre_tokenizing_everything(seed):
    """The fast path (chunks first, each distinct chunk pre-tokenized once) against the plain loop."""
    rng = random.Random(seed)
    text = "".join(rng.choices([*ALPHABET, EOT], k=rng.randint(0, 3000)))
    for specials in ([], [EOT]):
        got = {w.encode(): c for w, c in Pretokenizer(specials).count(text).items()}
        assert got == dict(whole_counts(text, specials))


def outcome(read) -> tuple[str, object]:
    """What ``read()`` gives, or the one-line error it raises."""
    try:
        return "blocks", read()
    except BpeDaskError as error:
        return "error", str(error)


def blocks_of(path, specials=(), block_size=1 << 16, max_uncut=1 << 20, pattern="gpt2", **options):
    """The blocks ``iter_texts`` reads the file in; with strict UTF-8, ``iter_utf8`` (the compiled
    engines' reader) must read the same blocks as bytes, or fail with the same line."""
    pretokenizer = Pretokenizer(specials, pattern)
    (byte_range,) = plan_ranges(expand_inputs([str(path)]), 1 << 40, pretokenizer)
    sizes = {"block_size": block_size, "max_uncut": max_uncut}
    texts = outcome(lambda: list(iter_texts(byte_range, pretokenizer, **sizes, **options)))
    if options.get("utf8_errors", "strict") == "strict":
        as_bytes = outcome(lambda: [b.decode() for b in iter_utf8(byte_range, pretokenizer, **sizes)])
        assert as_bytes == texts
    kind, found = texts
    if kind == "error":
        raise BpeDaskError(found)
    return found


@pytest.mark.parametrize("seed", range(40))
def test_the_compiled_engines_reader_gives_the_blocks_of_the_text_reader(tmp_path, seed):
    """``iter_utf8`` checks and cuts the bytes where they are; ``iter_texts`` decodes them first. Same
    blocks, or the same error at the same offset: multi-byte characters split by reads, special
    tokens across reads, runs with no cut, invalid UTF-8 (and a character cut off at the end)."""
    rng = random.Random(seed)
    pieces = [*ALPHABET, EOT, " ", "\n\n", "é", "東京", "🙂", "aaaaaaaaaaaa", "  \t", "!!!"]
    data = "".join(rng.choices(pieces, k=rng.randint(0, 400))).encode()
    if seed % 4 == 3:  # invalid somewhere, or cut off at the end
        at = rng.randint(0, len(data))
        data = data[:at] + rng.choice([b"\xff", b"\xed\xa0\x80", b"\xc3", b"\xf0\x9f\x98"]) + data[at:]
    path = tmp_path / "text.txt"
    path.write_bytes(data)
    for block_size in (1, 3, 7, 64, 1 << 16):
        with contextlib.suppress(BpeDaskError):
            specials, limit = [EOT] if seed % 2 else [], rng.choice([40, 1 << 20])
            blocks_of(path, specials, block_size, limit, pattern=rng.choice(["gpt2", "gpt4", "o200k"]))


def test_one_huge_document_streams_in_bounded_blocks(tmp_path):
    rng = random.Random(5)
    text = " ".join(rng.choice(["alpha", "béta", "42", "x,", "\n"]) for _ in range(400_000))  # ~1.7 MB
    path = tmp_path / "doc.txt"
    path.write_bytes(text.encode())
    blocks = blocks_of(path, [EOT], block_size=1 << 16)
    assert "".join(blocks) == text
    assert len(blocks) > 20 and max(len(b.encode()) for b in blocks) < 2 * (1 << 16)
    assert counts_of_file(path, [EOT], 1 << 16) == dict(whole_counts(text, [EOT]))


def test_a_long_line_without_whitespace_streams_in_bounded_blocks(tmp_path):
    text = "".join(f'{{"k{i}":[{i},"v{i}x"]}},' for i in range(100_000))  # minified JSON, one line
    path = tmp_path / "one-line.json"
    path.write_bytes(text.encode())
    blocks = blocks_of(path, block_size=1 << 16, max_uncut=1 << 17)
    assert "".join(blocks) == text
    assert max(len(b) for b in blocks) < 2 * (1 << 16)
    assert counts_of_file(path, [], 1 << 16) == dict(whole_counts(text, []))


@pytest.mark.parametrize(
    ("content", "what"),
    [(b"a" * (3 << 20), "letters"), (b" \n" * (3 << 19), "whitespace"), (b"-" * (3 << 20), "dashes")],
)
def test_a_giant_pre_token_stops_with_the_file_and_offset(tmp_path, content, what):
    path = tmp_path / "giant.txt"
    path.write_bytes(b"some words first " + content + b" and after")
    with pytest.raises(BpeDaskError) as error:
        blocks_of(path, [EOT], block_size=1 << 16, max_uncut=1 << 20)
    message = str(error.value)
    assert message.startswith(f"{path}: no place to split the text in the 1 Mi characters after byte offset ")
    assert int(message.split("byte offset ")[1].split()[0]) < (1 << 16)
    assert "\n" not in message
    assert "nowhere the gpt2 pattern may be cut: a run of letters, of digits, of punctuation" in message


def test_whitespace_only_file_below_the_limit_is_one_pre_token(tmp_path):
    path = tmp_path / "blank.txt"
    path.write_bytes(b" \n\t " * 1000)
    assert counts_of_file(path, [EOT], 64) == {b" \n\t " * 1000: 1}


@pytest.mark.parametrize("seed", range(6))
def test_utf8_errors_replace_counts_like_decoding_the_whole_file_with_replacement(tmp_path, seed):
    rng = random.Random(seed)
    bad = [b"\xff", b"\xe2\x82", b"\xc3", b"\xed\xa0\x80", b"\xf0\x9f\x98", b"\x80\x80"]
    good = [t.encode() for t in [*ALPHABET, EOT]]
    parts = [rng.choice(good) if rng.random() < 0.9 else rng.choice(bad) for _ in range(800)]
    data = b"".join(parts)
    path = tmp_path / "bad.txt"
    path.write_bytes(data)
    want = dict(whole_counts(data.decode("utf-8", "replace"), [EOT]))
    settings = CountSettings((EOT,), utf8_errors="replace")
    for chunk_size, block_size in ((1 << 20, 1 << 20), (50, 7), (7, 3), (300, 64)):
        got = {}
        for byte_range in plan_ranges(expand_inputs([str(path)]), chunk_size, Pretokenizer([EOT])):
            counter = count_part(FilePart(byte_range), settings, block_size=block_size)
            for word, count in counts_of(counter).items():
                got[word] = got.get(word, 0) + count
        assert got == want, (chunk_size, block_size)


def test_utf8_error_handling_is_part_of_the_shard_identity():
    strict, replace = CountSettings((EOT,)), CountSettings((EOT,), utf8_errors="replace")
    assert strict.key() != replace.key()
    with pytest.raises(BpeDaskError, match="strict or replace"):
        CountSettings((), utf8_errors="ignore")


def test_the_offset_of_text_without_a_cut_is_exact_after_replaced_bytes(tmp_path):
    path = tmp_path / "bad.txt"
    data = b"ab\xff\xff\xff\xff cd " + b"x" * 100
    path.write_bytes(data)
    with pytest.raises(BpeDaskError, match=f"after byte offset {data.index(b' ' + b'x' * 100)} "):
        blocks_of(path, block_size=4, max_uncut=20, utf8_errors="replace")


@pytest.mark.parametrize("seed", range(4))
def test_summing_sorted_runs_equals_a_group_by(seed):
    """The reduce merges shards sorted by token; the result must be pyarrow's group-by, sorted, by
    either engine (the compiled merge of sorted runs, or Arrow's own group-by in the reduce)."""
    import pyarrow as pa

    from bpe_dask.stages.reduce import sum_sorted
    from conftest import sum_counts

    rng = random.Random(seed)
    for _ in range(100):
        tables = []
        for _ in range(rng.randint(0, 6)):
            words = {
                bytes(rng.choices(b"ab\x00\xff", k=rng.randint(1, 6))): rng.randint(1, 2**40)
                for _ in range(30)
            }
            table = pa.table(
                {"token": pa.array(list(words), pa.binary()), "count": pa.array(list(words.values()))}
            )
            tables.append(table.sort_by("token"))
        want = sum_counts(tables).sort_by("token")
        for engine in ("numba", "python"):
            assert sum_sorted(tables, engine).equals(want), engine


def test_a_pattern_of_ones_own_cuts_blocks_at_special_tokens_only_and_says_so(tmp_path):
    own = Pretokenizer([EOT], r"\S+|\s+")
    path = tmp_path / "in.txt"
    path.write_text(f"one two{EOT}three four{EOT}" * 200, encoding="utf-8")
    (byte_range,) = plan_ranges(expand_inputs([str(path)]), 1 << 40, own)
    blocks = list(iter_texts(byte_range, own, block_size=64, max_uncut=1 << 12))
    assert len(blocks) > 50 and "".join(blocks) == path.read_text(encoding="utf-8")
    assert all(block.startswith(EOT) for block in blocks[1:])
    path.write_text("word " * 4000, encoding="utf-8")
    (byte_range,) = plan_ranges(expand_inputs([str(path)]), 1 << 40, own)
    with pytest.raises(BpeDaskError, match="no special token; a split pattern of your own is cut only there"):
        list(iter_texts(byte_range, own, block_size=64, max_uncut=1 << 12))


@pytest.mark.parametrize("pattern", ["gpt4", "o200k"])
@pytest.mark.parametrize("engine", ENGINES)
def test_lines_of_only_punctuation_are_cut_after_their_line_ends(tmp_path, pattern, engine):
    """A Markdown table's lines are punctuation and line ends, which GPT-4's and o200k's patterns
    keep together; the cut after a line end keeps a range of them in bounded blocks, and the counts
    exact (the text's own, split by ``regex``), however the file is cut into ranges."""
    from bpe_dask.rules.patterns import split_pattern

    text = "| a | b |\n" + "|---|---|\r\n" * 20_000 + "|/|\n/x\n" * 3000 + "|\n\n\n" * 10 + "end"
    path = tmp_path / "table.md"
    path.write_bytes(text.encode())
    (byte_range,) = plan_ranges(expand_inputs([str(path)]), 1 << 40, Pretokenizer(pattern=pattern))
    blocks = list(iter_texts(byte_range, Pretokenizer(pattern=pattern), block_size=4096, max_uncut=1 << 14))
    assert "".join(blocks) == text and max(map(len, blocks)) < 2 * 4096
    whole = {}
    for token in split_pattern(pattern).compiled.findall(text):
        whole[token.encode()] = whole.get(token.encode(), 0) + 1
    settings = CountSettings(pattern=pattern, engine=engine)
    for chunk_size in (1 << 30, 5000):
        total = {}
        for part in plan_ranges(expand_inputs([str(path)]), chunk_size, Pretokenizer(pattern=pattern)):
            for word, count in counts_of(count_part(FilePart(part), settings, block_size=4096)).items():
                total[word] = total.get(word, 0) + count
        assert total == whole, chunk_size


def test_settings_that_read_alike_never_share_shards(tmp_path):
    """The settings' key joined them with NUL: the special token "errors=replace" read as the setting
    utf8_errors="replace", and a second job with the same work directory reused the first one's shard,
    counting the special token as if split out."""
    from distributed import Client

    from bpe_dask import count_words
    from bpe_dask.rules import reference

    path = tmp_path / "k.txt"
    path.write_text("x errors=replace y a\0b", encoding="utf-8")
    work = str(tmp_path / "work")
    jobs = [(["errors=replace"], "strict"), ([], "replace"), (["a\0b"], "strict"), (["a", "b"], "strict")]
    with Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=":0") as client:
        for special_tokens, utf8_errors in jobs:
            counted = count_words(path, special_tokens, utf8_errors=utf8_errors, client=client, work_dir=work)
            assert counts_of(counted) == reference.pretokenize([path.read_text()], special_tokens)
            assert counted.partitions_reused == 0, (special_tokens, utf8_errors)
