"""Inputs of records: Parquet and JSON Lines documents count, train and encode as if joined by a
special token, on every partitioning; bad records are one line, or skipped and counted."""

from __future__ import annotations

import gzip
import json
import logging
import subprocess
from pathlib import Path

import commands
import corpus
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bpe_dask import BpeDaskError, Tokenizer, count_words, encode, train
from bpe_dask.io.inputs import Reading, expand_inputs
from bpe_dask.io.plan import ByteRange, RowGroups, plan_ranges
from bpe_dask.rules import reference
from bpe_dask.rules.pretokenize import Pretokenizer, split_pattern
from bpe_dask.wording import format_bytes

EOT = "<|endoftext|>"
REPO = Path(__file__).resolve().parent.parent
VOCAB_SIZE = 256 + 1 + 150


def documents(seed: int, n: int) -> list[str]:
    """Multilingual documents, some empty, some holding the special token or part of it at an end,
    so that joining them would make an occurrence cross from one into the next."""
    docs = corpus.mixed_corpus(seed, n, special=EOT).split(EOT)
    docs += ["", "ab<|endof", "text|>cd", EOT, "x" + EOT + "y", "  trailing spaces  ", "\r\n\r\n"]
    return docs


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return documents(7, 120)


def write_parquet(path: Path, docs: list[str], row_group_size: int = 16, column: str = "text") -> Path:
    table = pa.table({"id": pa.array(range(len(docs)), pa.int64()), column: docs,
                      "meta": [{"n": i} for i in range(len(docs))]})  # fmt: skip
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def jsonl_bytes(docs: list[str], field: str = "text") -> bytes:
    return "".join(json.dumps({"id": i, field: d}) + "\n" for i, d in enumerate(docs)).encode()


def counts_of(table: pa.Table) -> dict[bytes, int]:
    return dict(zip(table.column("token").to_pylist(), table.column("count").to_pylist(), strict=True))


def test_documents_count_as_if_joined_by_the_special_token(docs, tmp_path):
    """Parquet, JSON Lines (plain and compressed) and the text of the documents joined by EOT give
    the reference's counts, on every partitioning and with both engines."""
    joined = tmp_path / "joined.txt"
    joined.write_bytes(EOT.join(docs).encode())
    expected = reference.pretokenize([EOT.join(docs)], [EOT])
    files = [
        write_parquet(tmp_path / "docs.parquet", docs),
        tmp_path / "docs.jsonl",
        tmp_path / "docs.jsonl.gz",
    ]
    files[1].write_bytes(jsonl_bytes(docs))
    files[2].write_bytes(gzip.compress(jsonl_bytes(docs)))
    for path in files:
        for engine in ("python", "numba"):
            for chunk_size in (None, 2000, 1):
                result = count_words(path, [EOT], in_process=True, engine=engine, chunk_size=chunk_size)
                assert counts_of(result.table()) == expected, (path.name, engine, chunk_size)
                # the documents' text, not the file's size: JSON's quotes and escapes, compression
                assert result.report()["text_bytes"] == sum(len(d.encode()) for d in docs)
                assert result.report()["input_bytes"] == path.stat().st_size
    assert count_words(joined, [EOT], in_process=True).partitions == 1


@pytest.mark.parametrize("chunk_size", [1500, 1])  # a task per file: test_sources.py
def test_training_on_parquet_and_jsonl_on_a_cluster_equals_the_joined_text(
    client, docs, tmp_path, chunk_size
):
    expected = reference.train([EOT.join(docs)], VOCAB_SIZE, [EOT])[1]
    folder = tmp_path / "in"
    folder.mkdir()
    write_parquet(folder / "a.parquet", docs[:60], row_group_size=7)
    (folder / "b.jsonl").write_bytes(jsonl_bytes(docs[60:]))
    out = tmp_path / "out"
    report = train(folder, VOCAB_SIZE, str(out), [EOT], client=client, chunk_size=chunk_size)
    assert Tokenizer.load(out).merges == expected
    assert report["text_bytes"] == sum(len(d.encode()) for d in docs) < report["input_bytes"]
    if chunk_size == 1:
        assert report["partitions"] == 9 + len(docs[60:])  # a task per row group, and per line
    assert report["bad_records_skipped"] == 0


def test_partitions_follow_row_groups_and_lines(docs, tmp_path):
    parquet = write_parquet(tmp_path / "docs.parquet", docs, row_group_size=10)
    jsonl = tmp_path / "docs.ndjson"
    jsonl.write_bytes(jsonl_bytes(docs))
    files = expand_inputs([str(parquet), str(jsonl)])
    assert [f.format for f in files] == ["parquet", "jsonl"]
    parts = plan_ranges(files, 3000, Pretokenizer([EOT]))
    groups = [p for p in parts if isinstance(p, RowGroups)]
    ranges = [p for p in parts if isinstance(p, ByteRange)]
    assert groups[0].start == 0 and groups[-1].end == -(-len(docs) // 10)
    assert [g.start for g in groups][1:] == [g.end for g in groups][:-1]
    assert [g.first_row for g in groups] == [10 * g.start for g in groups]
    data = jsonl.read_bytes()
    assert len(ranges) > 3 and ranges[0].start == 0 and ranges[-1].end == len(data)
    assert all(data[r.start - 1 : r.start] == b"\n" for r in ranges[1:])  # every range holds whole lines


def test_the_format_follows_the_name_unless_given(tmp_path):
    names = ["a.parquet", "b.jsonl", "c.ndjson.zst", "d.jsonl.gz", "e.txt", "f.json", "g"]
    for name in names:
        (tmp_path / name).write_bytes(b"")
    formats = {Path(f.url).name: f.format for f in expand_inputs([str(tmp_path)])}
    assert formats == {"a.parquet": "parquet", "b.jsonl": "jsonl", "c.ndjson.zst": "jsonl",
                       "d.jsonl.gz": "jsonl", "e.txt": "text", "f.json": "text", "g": "text"}  # fmt: skip
    forced = expand_inputs([str(tmp_path / "e.txt")], reading=Reading(input_format="jsonl"))
    assert forced[0].format == "jsonl"


def test_a_text_column_of_another_name_and_a_txt_file_of_records(docs, tmp_path):
    path = tmp_path / "records.txt"
    path.write_bytes(jsonl_bytes(docs, field="content"))
    expected = reference.pretokenize(docs, [EOT])
    result = count_words(path, [EOT], in_process=True, input_format="jsonl", text_column="content")
    assert counts_of(result.table()) == expected
    parquet = write_parquet(tmp_path / "p.parquet", docs, column="content")
    assert counts_of(count_words(parquet, [EOT], in_process=True, text_column="content").table()) == expected


BAD_LINES = [
    (b'{"text": "fine"}\n{"text": "cut off\n', "byte offset 17", "not valid JSON"),
    (b'{"text": "fine"}\n{"body": "x"}\n', "byte offset 17", "no field 'text'"),
    (b'{"text": "fine"}\n{"text": 12}\n', "byte offset 17", "holds a number, not a string"),
    (b'{"text": "fine"}\n["text"]\n', "byte offset 17", "not a JSON object but an array"),
    (b'{"text": "fine"}\n{"text": "\\ud800"}\n', "byte offset 17", "lone surrogate"),
    (b'{"text": "fine"}\n{"text": "\xff"}\n', "byte offset 17", "invalid UTF-8"),
]


@pytest.mark.parametrize(("data", "where", "what"), BAD_LINES)
def test_a_bad_json_line_names_the_file_and_offset_or_is_skipped(tmp_path, data, where, what):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(data + b'{"text": "also fine"}\n')
    with pytest.raises(BpeDaskError) as error:
        count_words(path, in_process=True)
    message = str(error.value)
    assert "\n" not in message and "bad.jsonl" in message and where in message and what in message
    # A missing field is first the way to name the right one (text_column=), then to skip it; the
    # Python API names its keywords, not the command line's flags.
    assert message.endswith('on_bad_record="skip" leaves such records out)')
    assert ("(text_column= names the field that holds the text; " in message) == (what == "no field 'text'")
    skipped = count_words(path, in_process=True, on_bad_record="skip")
    assert skipped.bad_records_skipped == 1
    assert counts_of(skipped.table()) == reference.pretokenize(["fine", "also fine"], [])


def test_bad_parquet_records_and_columns(tmp_path):
    path = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"text": ["a b", None, "c d", None]}), path, row_group_size=1)
    with pytest.raises(BpeDaskError, match=r"nulls.parquet: row 1 \('text' column\): null"):
        count_words(path, in_process=True, chunk_size=1)
    skipped = count_words(path, in_process=True, on_bad_record="skip", chunk_size=1)
    assert skipped.bad_records_skipped == 2 and counts_of(skipped.table()) == reference.pretokenize(
        ["a b", "c d"], []
    )
    with pytest.raises(BpeDaskError, match=r"no column 'body' \(columns: text;"):
        count_words(path, in_process=True, text_column="body")
    numbers = tmp_path / "numbers.parquet"
    pq.write_table(pa.table({"text": [1, 2]}), numbers)
    with pytest.raises(BpeDaskError, match="column 'text' holds int64, not text"):
        count_words(numbers, in_process=True)
    with pytest.raises(BpeDaskError, match="input format must be text, jsonl or parquet"):
        count_words(numbers, in_process=True, input_format="csv")


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return commands.bpe_dask(*args, cwd=cwd, environment={"PATH": "/usr/bin:/bin"})


def test_the_command_line_skips_bad_records_and_reports_them(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_bytes(b'{"text": "one two"}\nnot json\n{"text": null}\n{"text": "three"}\n')
    failed = run_cli(
        "train", str(path), "--vocab-size", "260", "--out", "tok", "--workers", "1", "-q", cwd=tmp_path
    )
    lines = failed.stderr.strip().splitlines()
    assert failed.returncode == 1 and len(lines) == 1 and "Traceback" not in failed.stderr, failed.stderr
    assert lines[0].startswith("bpe-dask: error: ") and "data.jsonl: the line at byte offset 20" in lines[0]
    assert not (tmp_path / "tok").exists()
    done = run_cli("train", str(path), "--vocab-size", "260", "--out", "tok", "--workers", "1", "-q",
                   "--on-bad-record", "skip", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "skipped 2 bad records; the first: " in done.stderr
    assert json.loads((tmp_path / "tok" / "report.json").read_text())["bad_records_skipped"] == 2


def test_encode_records_to_bin_with_a_separator_after_each_document(client, docs, tmp_path):
    tokenizer_dir = tmp_path / "tok"
    train(write_parquet(tmp_path / "train.parquet", docs), 400, str(tokenizer_dir), [EOT], client=client)
    tokenizer = Tokenizer.load(tokenizer_dir, engine="python")
    (tmp_path / "in").mkdir()
    parquet = write_parquet(tmp_path / "in" / "a.parquet", docs[:50], row_group_size=5)
    (tmp_path / "in" / "b.jsonl.gz").write_bytes(gzip.compress(jsonl_bytes(docs[50:])))
    expected = []
    for doc in docs:
        expected += [*tokenizer.encode(doc), tokenizer.special_ids[EOT]]
    for chunk_size in (None, 1):
        out = tmp_path / f"ids-{chunk_size}.bin"
        report = encode(tmp_path / "in", tokenizer_dir, str(out), document_separator=EOT, client=client,
                        chunk_size=chunk_size)  # fmt: skip
        ids = np.memmap(out, dtype=report["dtype"], mode="r")
        assert ids.tolist() == expected and report["tokens"] == len(expected)
        # the documents' text, not the files' size (Parquet's compression, gzip, JSON's syntax)
        assert report["text_bytes"] == sum(len(d.encode()) for d in docs)
        assert report["bytes_per_token"] == report["text_bytes"] / report["tokens"]
    plain = encode(parquet, tokenizer_dir, str(tmp_path / "plain.bin"), client=client)
    without = np.fromfile(tmp_path / "plain.bin", dtype=plain["dtype"]).tolist()
    assert without == [i for doc in docs[:50] for i in tokenizer.encode(doc)]
    with pytest.raises(BpeDaskError, match="is not a special token of the tokenizer"):
        encode(parquet, tokenizer_dir, str(tmp_path / "x.bin"), document_separator="<|eos|>", client=client)
    (tmp_path / "t.txt").write_text("text")
    with pytest.raises(BpeDaskError, match="applies to inputs of records"):
        encode(
            tmp_path / "t.txt", tokenizer_dir, str(tmp_path / "y.bin"), document_separator=EOT, client=client
        )


def test_the_compiled_encoder_gives_the_readable_one_s_ids_for_documents(docs):
    fixtures = REPO / "tests" / "fixtures" / "cs336"
    python, compiled = (
        Tokenizer.from_files(fixtures / "gpt2_vocab.json", fixtures / "gpt2_merges.txt", [EOT], engine=engine)
        for engine in ("python", "numba")
    )
    for separator in (None, EOT):
        expected = [i for doc in docs for i in python.encode(doc) + ([50256] if separator else [])]
        assert compiled.encode_documents(docs, separator).tolist() == expected
        assert python.encode_documents(docs, separator).tolist() == expected
    assert compiled.encode_documents(["ab<|endof", "text|>cd"]).tolist() == (
        python.encode("ab<|endof") + python.encode("text|>cd")
    )


def test_dictionary_encoded_text_and_an_empty_parquet_file(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    docs = ["the cat", "a dog", "the cat"]
    pq.write_table(pa.table({"text": pa.array(docs).dictionary_encode()}), folder / "a.parquet")
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), folder / "b.parquet")
    result = count_words(folder, in_process=True)
    assert counts_of(result.table()) == reference.pretokenize(docs, [])


def test_json_that_python_refuses_to_read_is_a_bad_record(tmp_path):
    path = tmp_path / "odd.jsonl"
    path.write_bytes(
        b'{"text": "one", "n": ' + b"9" * 5000 + b"}\n" + b"[" * 100_000 + b"]" * 100_000 + b"\n"
    )
    with pytest.raises(BpeDaskError, match="byte offset 5023: not JSON that can be read"):
        count_words(path, in_process=True)
    skipped = count_words(path, in_process=True, on_bad_record="skip")
    assert skipped.bad_records_skipped == 1 and counts_of(skipped.table()) == reference.pretokenize(
        ["one"], []
    )


def test_long_lines_are_read_in_linear_time_and_batches_stay_bounded(tmp_path):
    from bpe_dask.io.records import iter_documents

    docs = ["x" * 300_000, "a b " * 100_000, "short"]
    path = tmp_path / "long.jsonl"
    path.write_bytes(jsonl_bytes(docs))
    (part,) = plan_ranges(expand_inputs([str(path)]), 1 << 30, Pretokenizer())
    read = [text for batch in iter_documents(part, batch_bytes=64) for text in batch.texts()]
    assert read == docs
    parquet = write_parquet(
        tmp_path / "many.parquet", [f"doc {i} " * 50 for i in range(2000)], row_group_size=1000
    )
    (group,) = plan_ranges(expand_inputs([str(parquet)]), 1 << 30, Pretokenizer())
    batches = list(iter_documents(group, batch_bytes=20_000))
    assert len(batches) > 10 and max(len(b.data) for b in batches) < 40_000
    assert [t for b in batches for t in b.texts()] == [f"doc {i} " * 50 for i in range(2000)]


def test_encode_skips_bad_records_and_a_new_utf8_setting_encodes_again(client, tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_bytes(b'{"text": "one two"}\nnot json\n{"text": "caf\xe9"}\n{"text": "three"}\n')
    fixtures = REPO / "tests" / "fixtures" / "cs336"
    tokenizer = Tokenizer.from_files(fixtures / "gpt2_vocab.json", fixtures / "gpt2_merges.txt", [EOT])
    work, out = tmp_path / "work", str(tmp_path / "ids.bin")
    options = {"client": client, "work_dir": str(work), "document_separator": EOT, "on_bad_record": "skip"}
    strict = encode(path, tokenizer, out, **options)
    assert strict["bad_records_skipped"] == 2
    assert np.fromfile(out, strict["dtype"]).tolist() == [*tokenizer.encode("one two"), 50256,
                                                          *tokenizer.encode("three"), 50256]  # fmt: skip
    again = encode(path, tokenizer, out, overwrite=True, **options)
    assert again["shards_reused"] == 1 and again["bad_records_skipped"] == 2  # the reused shard remembers
    assert strict["text_bytes"] == again["text_bytes"] == len("one twothree")  # so does it its text
    replaced = encode(path, tokenizer, out, overwrite=True, utf8_errors="replace", **options)
    assert replaced["shards_reused"] == 0 and replaced["bad_records_skipped"] == 1
    assert tokenizer.decode(np.fromfile(out, replaced["dtype"])) == f"one two{EOT}caf\ufffd{EOT}three{EOT}"
    assert replaced["text_bytes"] == len("one twocaf\ufffdthree".encode())


def test_a_binary_column_of_utf8_text_is_read(tmp_path):
    path = tmp_path / "bytes.parquet"
    pq.write_table(pa.table({"text": pa.array([b"caf\xc3\xa9 ok", b"x\xffy"], pa.binary())}), path)
    with pytest.raises(BpeDaskError, match=r"row 1 \('text' column\): invalid UTF-8"):
        count_words(path, in_process=True)
    replaced = count_words(path, in_process=True, utf8_errors="replace")
    assert counts_of(replaced.table()) == reference.pretokenize(["café ok", "x\ufffdy"], [])


def test_a_line_past_the_limit_is_one_line(tmp_path, monkeypatch):
    from bpe_dask.io import records

    monkeypatch.setattr(records, "MAX_LINE", 1000)
    path = tmp_path / "array.jsonl"
    path.write_bytes(b'{"text": "ok"}\n[' + b'{"text": "x"},' * 200 + b"{}]")
    (part,) = plan_ranges(expand_inputs([str(path)]), 1 << 30, Pretokenizer())
    with pytest.raises(BpeDaskError, match=r"array.jsonl: the line at byte offset 15 is longer than 1,000"):
        list(records.iter_documents(part, batch_bytes=64))


class _PieceSizes:
    """A counter that notes the longest document it is given."""

    def __init__(self, inner) -> None:
        self.inner, self.longest = inner, 0

    def add_documents(self, documents) -> None:
        starts = np.concatenate(([0], documents.ends[:-1]))
        self.longest = max(self.longest, int((documents.ends - starts).max(initial=0)))
        self.inner.add_documents(documents)

    def table(self) -> pa.Table:
        return self.inner.table()


@pytest.mark.parametrize("engine", ["python", "numba"])
@pytest.mark.parametrize("pattern", ["gpt2", "gpt4", "o200k"])
def test_a_long_record_is_counted_in_safe_pieces_no_longer_than_a_block(tmp_path, engine, pattern):
    """A record longer than a block is counted in pieces cut at safe places (bounded memory, as for
    a text file), and the counts are the whole documents' (special tokens inside them included)."""
    from bpe_dask.sources.files import FilePart
    from bpe_dask.stages.count import CountSettings, count_part, new_counter

    long = [corpus.words_corpus(seed, 3000) for seed in (1, 2)]  # words, specials, punctuation
    docs = ["short one", long[0], "", "x" * 10, long[1], "tail"]
    expected = reference.pretokenize(docs, [EOT], pattern=split_pattern(pattern).regex)
    (tmp_path / "docs.jsonl").write_bytes(jsonl_bytes(docs))
    files = [tmp_path / "docs.jsonl", write_parquet(tmp_path / "docs.parquet", docs, row_group_size=6)]
    settings = CountSettings((EOT,), pattern=pattern, engine=engine)
    for path in files:
        (part,) = plan_ranges(expand_inputs([str(path)]), 1 << 30, Pretokenizer([EOT]))
        spy = _PieceSizes(new_counter(settings, 1 << 30))
        count_part(FilePart(part), settings, block_size=500, counter=spy)
        assert counts_of(spy.table()) == expected, path.name
        assert max(len(d.encode()) for d in docs) > 10_000 and 0 < spy.longest <= 500, path.name


@pytest.mark.parametrize("pattern", ["gpt2", "gpt4", "o200k"])
def test_a_document_s_safe_pieces_join_to_it_and_count_as_it_does(pattern):
    """Multilingual text (characters of up to four bytes, special tokens) in pieces for limits down
    to one byte: the pieces are the document's bytes, each a whole number of characters, no longer
    than the limit where a cut allows, and counted apart they give the document's counts."""
    from bpe_dask.stages.count import _safe_pieces

    rules, regex_of = Pretokenizer([EOT], pattern), split_pattern(pattern).regex
    for seed in range(12):
        text = corpus.mixed_corpus(seed, 3)
        expected = reference.pretokenize([text], [EOT], regex_of)
        for limit in (1, 3, 17, 300):
            pieces = list(_safe_pieces(text.encode(), rules, limit))
            assert b"".join(pieces) == text.encode() and all(pieces)
            texts = [piece.decode() for piece in pieces]  # whole characters
            assert reference.pretokenize(texts, [EOT], regex_of) == expected, (seed, limit)
            over = [t for t in texts[:-1] if len(t.encode()) > limit]
            assert all(rules.last_cut(t + "x" * 20, 1, len(t.encode()[:limit].decode("utf-8", "ignore")) + 1)
                       is None for t in over), (seed, limit)  # fmt: skip


def test_a_compressed_input_is_logged_by_its_text_not_by_a_chunk_size(tmp_path, caplog):
    """A 5.41 MiB .jsonl.gz used to be logged as "1 partition of about 1.35 MiB", and its report gave
    only the size on disk."""
    text = corpus.mixed_corpus(3, 200)
    path = tmp_path / "in.txt.gz"
    path.write_bytes(gzip.compress(text.encode()))
    with caplog.at_level(logging.INFO, logger="bpe_dask"):
        report = count_words(path, [EOT], in_process=True).report()
    size = format_bytes(path.stat().st_size)
    assert f"1 input file, {size} compressed, 1 partition (a compressed file is read whole, as one task)" in (
        caplog.text
    )
    assert f"{format_bytes(len(text.encode()))} of text in {size} of input" in caplog.text
    assert report["text_bytes"] == len(text.encode()) > report["input_bytes"] == path.stat().st_size


def test_a_lone_surrogate_replaced_is_the_text_the_tokenizer_encodes(tmp_path):
    """JSON's ``\\ud800`` escape gives a lone surrogate. With ``utf8_errors="replace"`` it counted as three
    U+FFFD (one per byte of its UTF-8), while the tokenizer encodes such text as tiktoken does: one
    U+FFFD for each lone surrogate."""
    path = tmp_path / "docs.jsonl"
    path.write_text('{"text": "a \\ud800 b"}\n{"text": "ok \\udc4d\\ud83d"}\n', encoding="utf-8")
    texts = [json.loads(line)["text"] for line in path.read_text().splitlines()]
    assert texts == ["a \ud800 b", "ok \udc4d\ud83d"]  # as json.loads gives them: not valid Unicode
    counted = count_words(path, [EOT], utf8_errors="replace", in_process=True).table()
    got = dict(zip(counted["token"].to_pylist(), counted["count"].to_pylist(), strict=True))
    assert got == reference.pretokenize(["a \ufffd b" + EOT + "ok \ufffd\ufffd"], [EOT])
    tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [], [EOT])
    assert tokenizer.encode(texts[0]) == list("a \ufffd b".encode())


def test_a_json_lines_file_that_starts_with_a_byte_order_mark(tmp_path):
    """Windows tools start a UTF-8 file with a byte order mark: the first record was refused as bad
    ("Unexpected UTF-8 BOM"), and the job stopped."""
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"text": "first record"}\n{"text": "second one"}\n')
    counted = count_words(path, [EOT], in_process=True)
    got = dict(zip(counted.table()["token"].to_pylist(), counted.table()["count"].to_pylist(), strict=True))
    assert got == reference.pretokenize(["first record" + EOT + "second one"], [EOT])
    assert counted.bad_records_skipped == 0
