"""Planning: byte ranges tile each file and counting them one by one equals counting the whole."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from pathlib import Path

import pytest
import regex

from bpe_dask.io.inputs import expand_inputs
from bpe_dask.io.plan import ByteRange, plan_ranges
from bpe_dask.rules.pretokenize import Pretokenizer
from bpe_dask.sources.files import FilePart
from bpe_dask.stages.count import CountSettings, count_part

# Written out again here, not imported, so the test does not trust the code under test.
PATTERN = regex.compile(r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
EOT = "<|endoftext|>"
ALPHABET = [
    "a", "b", "Z", "é", "ß", "я", "日本", "👍", "👩‍👩‍👧", "e\u0301", "7", "42", "'s", "'T", "'ll", "'",
    " ", " ", "  ", "\n", "\r\n", "\r", "\t", "\u00a0", "\u3000", "\u2028", "\x0b", "\x1c", "\x85",
    ".", ",!", "--", "\x00", "<", "|", ">", "<|", "endoftext", "|>",
]  # fmt: skip


def whole_counts(text: str, specials: list[str]) -> Counter[bytes]:
    pieces = [text]
    if specials:
        alternation = "|".join(regex.escape(s) for s in sorted(specials, key=len, reverse=True))
        pieces = regex.split(alternation, text)
    return Counter(m.group().encode() for piece in pieces for m in PATTERN.finditer(piece))


def counts_of(counter) -> dict[bytes, int]:
    """A counter's counts as ``{UTF-8 bytes: count}``, whichever engine made them."""
    table = counter.table()
    return dict(zip(table.column("token").to_pylist(), table.column("count").to_pylist(), strict=True))


def range_counts(ranges: list[ByteRange], specials: list[str], engine: str = "auto") -> Counter[bytes]:
    total: Counter[bytes] = Counter()
    for byte_range in ranges:
        settings = CountSettings(tuple(specials), engine=engine)
        total.update(counts_of(count_part(FilePart(byte_range), settings)))
    return total


def random_text(rng: random.Random, n: int, specials: list[str]) -> str:
    parts = rng.choices(ALPHABET + specials * 3, k=n)
    return "".join(parts)


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


def plan(path: Path, chunk_size: int, specials: list[str], lookahead: int = 1 << 20) -> list[ByteRange]:
    return plan_ranges(expand_inputs([str(path)]), chunk_size, Pretokenizer(specials), lookahead=lookahead)


def assert_tiles(ranges: list[ByteRange], size: int) -> None:
    assert ranges[0].start == 0 and ranges[-1].end == size
    assert all(a.end == b.start and a.start < a.end for a, b in itertools.pairwise(ranges))


SPECIAL_SETS = [
    [],
    [EOT],
    [EOT, EOT + EOT],  # overlapping: the longer one wins where both match
    ["<|a|>", "x<|a|>", "<|a|>y"],  # occurrences that straddle each other's starts
    ["<|end of text|>", "<|fin|é>"],  # whitespace and non-ASCII inside a special token
]


ENGINES = ["python", "numba"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("specials", SPECIAL_SETS, ids=lambda s: "+".join(s) or "none")
@pytest.mark.parametrize("seed", range(6))
def test_counting_each_range_equals_counting_the_whole_file(tmp_path, specials, seed, engine):
    rng = random.Random(seed)
    text = random_text(rng, rng.randint(50, 600), specials)
    path = write(tmp_path / "in.txt", text)
    size = path.stat().st_size
    want = whole_counts(text, specials)
    for chunk_size in (1, 3, 16, 61, size):
        for lookahead in (1, 64, 1 << 20):
            ranges = plan(path, chunk_size, specials, lookahead)
            assert_tiles(ranges, size)
            assert range_counts(ranges, specials, engine) == want, (chunk_size, lookahead)


def test_cuts_move_to_the_start_of_a_special_token(tmp_path):
    docs = [f"story {i} " + "word " * (i % 7 + 3) for i in range(200)]
    text = EOT.join(docs)
    data = text.encode()
    path = write(tmp_path / "in.txt", text)
    ranges = plan(path, 100, [EOT])
    assert len(ranges) > 10
    last_special = data.rfind(EOT.encode())
    for r in ranges[1:]:
        if r.start <= last_special:  # past the last one, only the whitespace fallback is left
            assert data[r.start :].startswith(EOT.encode())


def test_overlapping_special_tokens_are_cut_where_the_longest_first_scan_matches(tmp_path):
    text = "one" + EOT * 2 + "two" + EOT + "three" + EOT * 3 + "four"
    path = write(tmp_path / "in.txt", text)
    longest_first = regex.compile(regex.escape(EOT * 2) + "|" + regex.escape(EOT))
    match_starts = {len(text[: m.start()].encode()) for m in longest_first.finditer(text)}
    for chunk_size in range(1, len(text.encode())):
        ranges = plan(path, chunk_size, [EOT, EOT + EOT])
        data, eot = text.encode(), EOT.encode()
        occurrences = [i for i in range(len(data)) if data.startswith(eot, i)]
        for r in ranges[1:]:
            assert not any(o < r.start < o + len(eot) for o in occurrences)  # never inside one
            if data.startswith(eot, r.start):
                assert r.start in match_starts  # "...|><|endoftext|>..." inside a longer match is no cut


def test_without_special_tokens_cuts_fall_between_text_and_whitespace(tmp_path):
    rng = random.Random(7)
    text = " ".join(rng.choice(["alpha", "béta", "gamma\n", "δ\t", "  x", "1999"]) for _ in range(500))
    data = text.encode()
    path = write(tmp_path / "in.txt", text)
    ranges = plan(path, 50, [])
    assert len(ranges) > 20
    for r in ranges[1:]:
        before = data[: r.start].decode()[-1]
        assert data[r.start] in b" \t\n" and not regex.match(r"\s", before)


def test_text_without_any_safe_cut_stays_one_range(tmp_path):
    text = "é" * 5000  # no whitespace, no special token: nowhere is safe
    path = write(tmp_path / "in.txt", text)
    assert len(plan(path, 100, [EOT], lookahead=1000)) == 1


def test_inputs_expand_globs_and_directories_in_order(tmp_path):
    for name in ("b.txt", "a.txt", "sub/c.txt", ".hidden", "_SUCCESS"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    names = lambda files: [f.url.rsplit("/", 1)[-1] for f in files]  # noqa: E731
    assert names(expand_inputs([str(tmp_path)])) == ["a.txt", "b.txt", "c.txt"]
    assert names(expand_inputs([str(tmp_path / "*.txt")])) == ["a.txt", "b.txt"]
    assert names(expand_inputs([str(tmp_path / "b.txt"), str(tmp_path / "*.txt")])) == ["b.txt", "a.txt"]



def test_an_earlier_bpe_dask_output_inside_a_directory_input_is_skipped_with_a_line(tmp_path, caplog):
    import bpe_dask

    corpus = tmp_path / "corpus"
    (corpus / "spark").mkdir(parents=True)
    (corpus / "a.txt").write_text("the cat the hat " * 50)
    (corpus / "spark" / "part-0.txt").write_text("a dog")  # Spark leaves _SUCCESS too: still read
    (corpus / "spark" / "_SUCCESS").write_text("")
    # a real output (written here as on a cluster: one publish step), without starting a cluster
    bpe_dask.train(str(corpus / "a.txt"), 260, str(corpus / "tok"), in_process=True)
    assert {p.name for p in (corpus / "tok").iterdir()} >= {"_SUCCESS", "report.json", "vocab.json"}
    with caplog.at_level("INFO", logger="bpe_dask"):
        files = expand_inputs([str(corpus)])
    relative = [f.url.removeprefix("file://").removeprefix(str(corpus)) for f in files]
    assert relative == ["/a.txt", "/spark/part-0.txt"]
    assert f"{corpus}: skipping earlier bpe-dask outputs: tok/ (a tokenizer)" in caplog.text
    assert "spark" not in caplog.text
    assert [f.url.rsplit("/", 1)[-1] for f in expand_inputs([str(corpus / "tok")])] == [
        "compression.csv", "compression.png", "merges.txt", "report.json", "special_tokens_map.json",
        "tokenizer.json", "tokenizer.tiktoken", "tokenizer_config.json", "vocab.json",
    ]  # named itself, it is read: only folders found inside an input are skipped  # fmt: skip


NO_WHITESPACE = [
    "a", "Z", "é", "日本", "7", "42", "٣", "²", "'s", "'T", "'ll", "'", "ve", "re", ".", ",!", "--", "\x00",
    "{", '"', ":", "[", "]", "\x1c", "<", "|", ">", "<|", "endoftext", "|>", "<|endoftext|>", "\ufffd",
]  # fmt: skip


@pytest.mark.parametrize("seed", range(8))
def test_text_without_whitespace_is_cut_where_letters_digits_and_punctuation_meet(tmp_path, seed):
    rng = random.Random(seed)
    specials = [[], [EOT], [EOT, EOT + EOT], ["s1"]][seed % 4]  # "s1" is itself a class change
    text = "".join(rng.choices(NO_WHITESPACE, k=3000))
    path = write(tmp_path / "in.txt", text)
    want = whole_counts(text, specials)
    for chunk_size in (1, 7, 64, 500):
        ranges = plan(path, chunk_size, specials, lookahead=64)
        assert_tiles(ranges, len(text.encode()))
        assert range_counts(ranges, specials) == want, chunk_size
    assert len(plan(path, 64, specials, lookahead=64)) > 20


def test_minified_json_is_cut_into_many_ranges(tmp_path):
    record = '{"id":%d,"name":"user%d","tags":["a","b"],"score":%d.5},'
    text = "[" + "".join(record % (i, i, i * 7) for i in range(3000)) + "]"
    path = write(tmp_path / "in.json", text)
    ranges = plan(path, 4096, [EOT])
    assert len(ranges) > 20
    assert range_counts(ranges, [EOT]) == whole_counts(text, [EOT])


def test_a_letter_followed_by_an_apostrophe_is_a_cut_but_not_the_other_way(tmp_path):
    text = "don't" * 50  # "don", "'t", "don", ...: the only class changes are n|' and t|d (no cut)
    path = write(tmp_path / "in.txt", text)
    ranges = plan(path, 3, [], lookahead=16)
    assert {text.encode()[r.start - 1 : r.start + 1] for r in ranges[1:]} == {b"n'"}
    assert range_counts(ranges, []) == whole_counts(text, [])
