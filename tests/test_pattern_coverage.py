"""A split pattern of one's own that leaves text out of every pre-token is said, before any work.

``--pattern '\\w+'`` used to train without a word of warning, and the tokenizer then decoded
"Hello, world! 123" to "Helloworld123". The expected numbers here come from the stdlib's ``re``.
"""

from __future__ import annotations

import json
import logging
import re

import corpus
import pyarrow as pa
import pytest
from test_cli import EOT, assert_nothing_written, assert_user_error, run

from bpe_dask import count_words
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.sample import SAMPLE_BYTES
from bpe_dask.rules.pretokenize import Pretokenizer

TEXT = "Hello, world! 123\n" * 50 + EOT + "again: words, words.\n"


def dropped(text: str, pattern: str) -> int:
    """Characters outside every match, special tokens aside."""
    return sum(len(piece) - sum(map(len, re.findall(pattern, piece))) for piece in text.split(EOT))


@pytest.mark.parametrize("pattern", [r"\w+", r"[a-z]+| ?\d+"])
def test_a_pattern_that_drops_text_is_warned_of_with_how_much(tmp_path, caplog, pattern):
    path = tmp_path / "in.txt"
    path.write_text(TEXT)
    with caplog.at_level(logging.WARNING, logger="bpe_dask"):
        count_words(path, [EOT], pattern=pattern)
    [warning] = [r.getMessage() for r in caplog.records if "split pattern" in r.getMessage()]
    left_out = dropped(TEXT, pattern)
    assert f"leaves {left_out:,} of the {len(TEXT):,} characters of a sample of {path}" in warning
    assert "','" in warning and "strict_pattern=True makes this an error" in warning


@pytest.mark.parametrize("pattern", ["gpt2", "gpt4", "o200k"])
def test_the_built_in_patterns_cover_every_character(pattern):
    text = corpus.mixed_corpus(7, 300) + "".join(map(chr, range(0x20000)))
    text = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates out
    assert Pretokenizer([EOT], pattern).uncovered(text) == ""


def test_a_pattern_that_covers_the_text_says_nothing(tmp_path, caplog):
    path = tmp_path / "in.txt"
    path.write_text(TEXT + "ünïcödé 漢字 \t\r\n 😀 ...'s 1234567")
    with caplog.at_level(logging.WARNING, logger="bpe_dask"):
        count_words(path, [EOT], pattern=r"\S+|\s+", strict_pattern=True)
    assert not [r for r in caplog.records if "split pattern" in r.getMessage()]


def test_only_a_sample_is_read_and_records_are_sampled_as_documents(tmp_path, caplog):
    documents = [f"doc {i}: text, more!" for i in range(20_000)]  # far more than the sample
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents))
    with pytest.raises(BpeDaskError) as error:
        count_words(path, pattern=r"[a-z]+", strict_pattern=True)
    found = re.search(r"leaves ([\d,]+) of the ([\d,]+) characters", str(error.value))
    left_out, total = (int(n.replace(",", "")) for n in found.groups())
    assert total < 1.5 * SAMPLE_BYTES and total == sum(map(len, documents[: documents_in(total)]))
    assert left_out == sum(dropped(d, r"[a-z]+") for d in documents[: documents_in(total)])
    assert str(error.value).endswith("(strict_pattern=True)")


def documents_in(total: int) -> int:
    """How many of the documents make up ``total`` characters (they differ in length)."""
    size = n = 0
    while size < total:
        size += len(f"doc {n}: text, more!")
        n += 1
    return n


def test_strict_pattern_on_the_command_line_stops_before_any_work(tmp_path):
    (tmp_path / "in.txt").write_text(TEXT)
    before = {p.name for p in tmp_path.iterdir()}
    done = run("train", "in.txt", "--vocab-size", "300", "--pattern", r"\w+", "--strict-pattern",
               "--out", "tok", "--workers", "1", cwd=tmp_path, check=False)  # fmt: skip
    assert_user_error(done, "split pattern '\\w+' leaves", "(--strict-pattern)")
    assert_nothing_written(tmp_path, before)
    assert "LocalCluster" not in done.stderr  # before any work: no cluster was started


DOCUMENTS = ["Hello, world! 123\n"] * 50 + ["again: words, words.\n", "ünïcödé 漢字!"]


def expected_warning(pattern: str, what: str) -> str:
    left_out = sum(dropped(d, pattern) for d in DOCUMENTS)
    total = sum(map(len, DOCUMENTS))
    return f"leaves {left_out:,} of the {total:,} characters of {what}"


@pytest.mark.parametrize("kind", ["iterable", "arrow"])
def test_documents_held_in_memory_are_checked_on_their_first_documents(tmp_path, caplog, kind):
    """``train_from_iterator`` and ``train`` of an Arrow table used to take any pattern silently."""
    from bpe_dask import count_from_iterator, train, train_from_iterator

    def trained(**options):
        if kind == "iterable":
            return train_from_iterator(iter(DOCUMENTS), 300, tmp_path / "tok", pattern=r"\w+", **options)
        table = pa.table({"text": DOCUMENTS})
        return train(table, 300, tmp_path / "tok", pattern=r"\w+", **options)

    with pytest.raises(BpeDaskError) as error:
        trained(strict_pattern=True)
    assert expected_warning(r"\w+", "the first documents") in str(error.value)
    assert str(error.value).endswith("(strict_pattern=True)")
    assert not (tmp_path / "tok").exists()
    with caplog.at_level(logging.WARNING, logger="bpe_dask"):
        if kind == "iterable":
            count_from_iterator(DOCUMENTS, pattern=r"\w+")
        else:
            count_words(pa.table({"text": DOCUMENTS}), pattern=r"\w+")
    [warning] = [r.getMessage() for r in caplog.records if "split pattern" in r.getMessage()]
    assert expected_warning(r"\w+", "the first documents") in warning


BAG = "the first documents of the Dask Bag 'from_sequence-"  # the Bag's name follows


def test_a_dask_collection_is_checked_on_its_first_partition_before_counting(tmp_path, caplog):
    import dask.bag
    from distributed import Client

    from bpe_dask import encode, train

    # A bad element in the first partition is left out of the sample; counting then says it.
    bag = dask.bag.from_sequence([None, *DOCUMENTS, "more, text;" * 1000], partition_size=len(DOCUMENTS) + 1)
    with Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=":0") as client:
        with pytest.raises(BpeDaskError) as error:
            train(bag, 300, tmp_path / "tok", pattern=r"[a-z]+", strict_pattern=True, client=client,
                  work_dir=tmp_path / "work")  # fmt: skip
        assert not (tmp_path / "tok").exists()
        assert not list((tmp_path / "work").rglob("*.parquet"))  # no partition was counted
        assert expected_warning(r"[a-z]+", BAG) in str(error.value)
        good = dask.bag.from_sequence([*DOCUMENTS, "x, y"], partition_size=len(DOCUMENTS))
        with caplog.at_level(logging.WARNING, logger="bpe_dask"):
            train(good, 300, tmp_path / "tok", pattern=r"\w+", client=client)
            encode(good, tmp_path / "tok", tmp_path / "ids.bin", client=client, trust_pattern=True)
    warnings = [r.getMessage() for r in caplog.records if "split pattern" in r.getMessage()]
    assert len(warnings) == 2  # training, then encoding
    assert all(expected_warning(r"\w+", BAG) in w for w in warnings)
