"""One contract over every kind of input the public API takes: a text file, a JSON Lines file, a
Parquet file, a Dask Bag, a Dask DataFrame's column, a Dask DataFrame with ``text_column``, Python
iterables of ``str`` and of ``bytes``, a ``pyarrow.Table``, a Hugging Face ``Dataset`` and
``IterableDataset``, and a pandas Series (an Arrow stream), each made from the same list of documents.

For every kind, the same behaviour: the merges and vocabulary of ``rules.reference`` trained on the
documents joined by ``<|endoftext|>`` (the CS336 reference files on its corpus), the reference's
pre-token counts, a bad record named in one line or skipped and counted, special tokens split out of
a document, CRLF text, empty documents and an empty input. A text file is one text: its documents
are the pieces between special tokens, and it holds no records to skip. Expected results come from
``rules.reference`` and the CS336 fixtures, never from the jobs themselves.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import corpus
import dask
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bpe_dask import BpeDaskError, count_from_iterator, count_words, train, train_from_iterator
from bpe_dask.rules import reference
from conftest import CS336_DIR, read_reference_merges, read_reference_vocab

pd = pytest.importorskip("pandas")
dd = pytest.importorskip("dask.dataframe")  # the `dataframe` extra
db = pytest.importorskip("dask.bag")
datasets = pytest.importorskip("datasets")

EOT = "<|endoftext|>"
NULL, NOT_TEXT, INVALID = "null", "not text", "invalid UTF-8"
INVALID_BYTE = b"\xff"
# a bad record of each kind, as an element of a list of documents
BAD = {NULL: None, NOT_TEXT: 12, INVALID: b"caf" + INVALID_BYTE}
SAYS = {NULL: r"null|NoneType", NOT_TEXT: r"\bint\b|number", INVALID: r"invalid UTF-8|lone surrogate"}


def small_documents() -> list[str]:
    """Multilingual documents with control characters and CRLF; empty ones; special tokens inside
    some; and the halves of a special token at the ends of two neighbours: counted alone, or joined
    by the separator, they make none, run together they would."""
    docs = corpus.mixed_corpus(11, 60, special=EOT).split(EOT)
    return [*docs, "", "ab<|endof", "text|>cd", EOT, "x" + EOT + "y", "  trailing  ", "\r\n\r\n"]


DOCS = small_documents()


def test_the_documents_stand_alone_only_if_each_is_counted_alone():
    """The small corpus tells the kinds that join documents from those that count each alone."""
    assert reference.pretokenize(DOCS, []) != reference.pretokenize(["".join(DOCS)], [])
    assert reference.pretokenize(DOCS, [EOT]) != reference.pretokenize(DOCS, [])


# --- each kind, made from a list of documents (str, or a bad record: None, an int, invalid UTF-8) ----


def utf8(doc):
    return doc.encode() if isinstance(doc, str) else doc


def jsonl_lines(docs: list) -> list[bytes]:
    """A record per document; invalid UTF-8 goes into the line as it is."""
    return [
        b'{"id": %d, "text": "%s"}\n' % (i, doc) if isinstance(doc, bytes) else
        (json.dumps({"id": i, "text": doc}) + "\n").encode()
        for i, doc in enumerate(docs)
    ]  # fmt: skip


def arrow_table(docs: list) -> pa.Table:
    """A ``text`` column: string, or binary where a document is bytes of invalid UTF-8."""
    column = pa.array([utf8(d) for d in docs], pa.binary()) if any(isinstance(d, bytes) for d in docs) else (
        pa.array(docs, pa.string()))  # fmt: skip
    return pa.table({"id": pa.array(range(len(docs)), pa.int64()), "text": column})


def pandas_frame(docs: list, column: str) -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(docs, dtype=object), "n": range(len(docs))})


def partition_of(collection, i: int) -> str:
    """Where element ``i`` is: its partition and its place there, as Dask cut the collection."""
    lengths = [len(part) for part in dask.compute(*collection.to_delayed(), scheduler="sync")]
    for p, length in enumerate(lengths):
        if i < length:
            return f"partition {p}, element {i}:"
        i -= length
    raise IndexError(i)


@dataclass(frozen=True)
class Kind:
    name: str
    make: Callable[[list, Path], object]  # the documents -> the input (files are written at the path)
    names: Callable[[object, list, int], list[str]]  # what a message names document i of the input by
    bad: tuple[str, ...] = (NULL, INVALID)  # the bad records it can hold
    records: bool = True  # each element a document (False: one text, documents joined by EOT)
    skips: bool = True  # on_bad_record="skip" leaves bad records out (else they stop the job)
    file: bool = False  # trained on the shared cluster; counted in this process (a small input)
    collection: bool = False  # a Dask collection: trained and counted on the shared cluster
    iterable: bool = False  # train_from_iterator / count_from_iterator
    options: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return self.name


def _text_file(docs: list, path: Path) -> Path:
    path = path.with_suffix(".txt")
    path.write_bytes(EOT.encode().join(utf8(d) for d in docs))
    return path


def _jsonl_file(docs: list, path: Path) -> Path:
    path = path.with_suffix(".jsonl")
    path.write_bytes(b"".join(jsonl_lines(docs)))
    return path


def _parquet_file(docs: list, path: Path) -> Path:
    path = path.with_suffix(".parquet")
    pq.write_table(arrow_table(docs), path, row_group_size=4)
    return path


def _iterable_of_str(docs: list):
    # invalid UTF-8 in a str: the lone surrogates Python decodes it to with errors="surrogateescape"
    return (d.decode("utf-8", "surrogateescape") if isinstance(d, bytes) else d for d in docs)


def _hf_iterable_dataset(docs: list):
    """A streaming dataset of Arrow rows, as ``load_dataset(..., streaming=True)`` gives from Parquet."""
    dataset = datasets.Dataset(arrow_table(docs))
    if not docs:  # no shard of nothing: a stream that ends at once, with the same features
        return datasets.IterableDataset.from_generator(_no_rows, features=dataset.features)
    return dataset.to_iterable_dataset(num_shards=1)


def _no_rows():
    yield from ()


def _pandas_series(docs: list) -> pd.Series:
    """Text, nulls among it, as pandas stores it; invalid UTF-8 as bytes objects."""
    return pd.Series(docs, dtype=object if any(isinstance(d, bytes) for d in docs) else "str")


def _line_of(path: Path, docs: list, i: int) -> list[str]:
    return [path.name, f"line at byte offset {sum(map(len, jsonl_lines(docs[:i])))}:"]


def _bad_byte_of(path: Path, docs: list, i: int) -> list[str]:
    return [path.name, f"byte offset {path.read_bytes().index(INVALID_BYTE)}"]


def _row_of(made, docs: list, i: int) -> list[str]:
    return [*([made.name] if isinstance(made, Path) else []), f"row {i} ('text' column)"]


def _element_of(made, docs: list, i: int) -> list[str]:
    return [f"element {i} of the iterable"]


def _element_of_partition(made, docs: list, i: int) -> list[str]:
    what = "Dask Bag" if isinstance(made, db.Bag) else "Dask Series 'body'" if made.ndim == 2 else (
        "Dask Series 'text'")  # fmt: skip
    return [what, partition_of(made, i)]


ALL_BAD = (NULL, NOT_TEXT, INVALID)
KINDS = [
    Kind("text-file", _text_file, _bad_byte_of, bad=(INVALID,), records=False, skips=False, file=True),
    Kind("jsonl-file", _jsonl_file, _line_of, bad=ALL_BAD, file=True),
    Kind("parquet-file", _parquet_file, _row_of, file=True),
    Kind("dask-bag", lambda docs, path: db.from_sequence(docs, npartitions=3), _element_of_partition,
         bad=ALL_BAD, collection=True),
    Kind("dask-series", lambda docs, path: dd.from_pandas(pandas_frame(docs, "text"), npartitions=3)["text"],
         _element_of_partition, bad=ALL_BAD, collection=True),
    Kind("dask-dataframe", lambda docs, path: dd.from_pandas(pandas_frame(docs, "body"), npartitions=3),
         _element_of_partition, bad=ALL_BAD, collection=True, options=(("text_column", "body"),)),
    Kind("iterable-of-str", lambda docs, path: _iterable_of_str(docs), _element_of, bad=ALL_BAD,
         iterable=True),
    Kind("iterable-of-bytes", lambda docs, path: (utf8(d) for d in docs), _element_of, bad=ALL_BAD,
         iterable=True),
    Kind("arrow-table", lambda docs, path: arrow_table(docs), _row_of),
    Kind("hf-dataset", lambda docs, path: datasets.Dataset(arrow_table(docs)), _row_of),
    Kind("hf-iterable-dataset", lambda docs, path: _hf_iterable_dataset(docs), _row_of),
    Kind("pandas-series", lambda docs, path: _pandas_series(docs),
         lambda series, docs, i: [f"row {i} of the array"]),
]  # fmt: skip


class Source:
    """A kind of input, made afresh from documents for each job, and run through the public API."""

    def __init__(self, kind: Kind, folder: Path, request: pytest.FixtureRequest) -> None:
        self.kind, self.folder, self.request, self.made, self.last = kind, folder, request, 0, None

    def make(self, docs: list):
        """The input, made afresh (an iterable is used up by a job); ``last`` keeps it."""
        self.made += 1
        self.last = self.kind.make(docs, self.folder / f"input-{self.made}")
        return self.last

    def names(self, docs: list, i: int) -> list[str]:
        """What a message names document ``i`` of the input made last by."""
        return self.kind.names(self.last, docs, i)

    def options(self, options: dict, training: bool) -> dict:
        options = {**dict(self.kind.options), **options}
        if self.kind.collection or (self.kind.file and training):  # else counted in this process
            options["client"] = self.request.getfixturevalue("client")  # module-scoped: started once
        return options

    def train(self, docs: list, vocab_size: int, special_tokens: list[str], out: Path | None = None,
              **options) -> tuple[dict, Path]:  # fmt: skip
        out = out or self.folder / f"tok-{self.made + 1}"
        made, options = self.make(docs), self.options(options, training=True)
        trainer = train_from_iterator if self.kind.iterable else train
        return trainer(made, vocab_size, out, special_tokens, **options), out

    def count(self, docs: list, special_tokens: list[str], **options):
        made, options = self.make(docs), self.options(options, training=False)
        counter = count_from_iterator if self.kind.iterable else count_words
        return counter(made, special_tokens, **options)

    def texts(self, docs: list[str], special_tokens: list[str]) -> list[str]:
        """What the reference trains on: the documents joined by the special token, or each a text of
        its own where there is none (a text file is one text either way)."""
        return [EOT.join(docs)] if special_tokens or not self.kind.records else docs

    def text_bytes(self, docs: list[str]) -> int:
        return len(EOT.join(docs).encode()) if not self.kind.records else sum(len(d.encode()) for d in docs)


@pytest.fixture(params=KINDS, ids=str)
def source(request, tmp_path) -> Source:
    return Source(request.param, tmp_path, request)


def counts_of(result) -> dict[bytes, int]:
    table = result.table()
    counts = dict(zip(table["token"].to_pylist(), table["count"].to_pylist(), strict=True))
    assert len(counts) == table.num_rows  # each token once
    return counts


@cache
def reference_training(texts: tuple[str, ...], vocab_size: int, special_tokens: tuple[str, ...]):
    return reference.train(list(texts), vocab_size, list(special_tokens))


def assert_trained_as_the_reference(out: Path, texts: list[str], vocab_size: int, special_tokens: list[str]):
    """The files written hold the reference's merges, in order, and its vocabulary, id for id."""
    vocab, merges = reference_training(tuple(texts), vocab_size, tuple(special_tokens))
    assert read_reference_merges(out / "merges.txt") == merges
    assert read_reference_vocab(out / "vocab.json") == vocab


# --- the merges, the vocabulary and the counts --------------------------------------------------------


@pytest.mark.parametrize("special_tokens", [[EOT], []], ids=["eot", "no-special-token"])
def test_trains_the_reference_merges_and_vocab(source, special_tokens):
    vocab_size = 256 + len(special_tokens) + 100
    report, out = source.train(DOCS, vocab_size, special_tokens)
    texts = source.texts(DOCS, special_tokens)
    assert_trained_as_the_reference(out, texts, vocab_size, special_tokens)
    assert report["num_merges"] == 100 and report["bad_records_skipped"] == 0
    assert report["text_bytes"] == source.text_bytes(DOCS)
    if "documents" in report:  # the kinds counted in this process count them
        assert report["documents"] == len(DOCS)


def test_trains_the_cs336_reference_on_its_corpus(source, cs336_reference_merges, cs336_reference_vocab):
    """CS336's corpus and reference files (vocabulary 500): the documents are its text split on the
    special token."""
    documents = (CS336_DIR / "corpus.en").read_text(encoding="utf-8").split(EOT)
    _, out = source.train(documents, 500, [EOT])
    assert read_reference_merges(out / "merges.txt") == cs336_reference_merges
    vocab = read_reference_vocab(out / "vocab.json")
    assert set(vocab.values()) == set(cs336_reference_vocab.values()) and set(vocab) == set(range(500))


@pytest.mark.parametrize("engine", ["python", "numba"])
@pytest.mark.parametrize("special_tokens", [[EOT], []], ids=["eot", "no-special-token"])
def test_counts_the_reference_pre_tokens(source, special_tokens, engine):
    result = source.count(DOCS, special_tokens, engine=engine)
    assert counts_of(result) == reference.pretokenize(source.texts(DOCS, special_tokens), special_tokens)
    report = result.report()
    assert report["text_bytes"] == source.text_bytes(DOCS) and report["bad_records_skipped"] == 0


# --- bad records ----------------------------------------------------------------------------------------

BAD_CASES = [pytest.param(kind, problem, id=f"{kind}-{problem.replace(' ', '-')}") for kind in KINDS
             for problem in kind.bad]  # fmt: skip


@pytest.fixture
def convert_nothing():
    """Dask DataFrames convert object columns to strings as they are made (``dataframe.convert-string``):
    an int becomes "12", invalid UTF-8 a UnicodeDecodeError of Dask's own. Without that, the element
    reaches the job as it was."""
    with dask.config.set({"dataframe.convert-string": False}):
        yield


@pytest.mark.parametrize(("source", "problem"), BAD_CASES, indirect=["source"])
def test_a_bad_record_is_named_in_one_line(source, problem, convert_nothing, tmp_path):
    docs = ["fine one", "two words", "also fine", BAD[problem], "the last", "one"]
    out = tmp_path / "tok"
    with pytest.raises(BpeDaskError) as raised:
        source.train(docs, 300, [EOT], out)
    message, names = str(raised.value), source.names(docs, 3)
    assert "\n" not in message and all(name in message for name in names), (names, message)
    assert re.search(SAYS[problem], message), message
    if source.kind.skips:  # and says how to leave such records out
        assert re.search(r"on[-_]bad[-_]record", message), message
    assert not out.exists()


@pytest.mark.parametrize(("source", "problem"), BAD_CASES, indirect=["source"])
def test_bad_records_are_skipped_and_counted(source, problem, convert_nothing):
    bad = BAD[problem]
    docs = ["fine one", bad, "two words", "also fine", bad, "the last"]
    good = [d for d in docs if isinstance(d, str)]
    if not source.kind.skips:  # a text file's invalid UTF-8 is no record: it stops the job
        with pytest.raises(BpeDaskError) as raised:
            source.count(docs, [EOT], on_bad_record="skip")
        assert all(name in str(raised.value) for name in source.names(docs, 1)), str(raised.value)
        return
    report, out = source.train(docs, 270, [EOT], on_bad_record="skip")
    assert report["bad_records_skipped"] == 2
    assert_trained_as_the_reference(out, [EOT.join(good)], 270, [EOT])
    counted = source.count(docs, [EOT], on_bad_record="skip")
    assert counted.bad_records_skipped == counted.report()["bad_records_skipped"] == 2
    assert counts_of(counted) == reference.pretokenize([EOT.join(good)], [EOT])


# --- special tokens, CRLF, empty documents, an empty input ----------------------------------------------


def test_special_tokens_inside_a_document_are_split_out(source):
    specials = [EOT, "<|pad|>"]
    docs = ["a<|endoftext|>b", EOT, EOT + EOT, "x <|pad|> y<|pad|>", "ab<|endof", "text|>cd", "<|pad", "|>z",
            "the cat<|endoftext|> the hat"]  # fmt: skip
    joined = EOT.join(docs)
    counted = source.count(docs, specials)
    assert counts_of(counted) == reference.pretokenize([joined], specials)
    assert not any(b"<|endoftext|>" in token or b"<|pad|>" in token for token in counts_of(counted))
    occurrences = lambda text: len(re.findall(r"<\|endoftext\|>|<\|pad\|>", text))  # noqa: E731
    seen = occurrences(joined) if not source.kind.records else sum(map(occurrences, docs))  # separators?
    assert counted.report()["special_tokens_seen"] == seen
    report, out = source.train(docs, 270, specials)
    assert_trained_as_the_reference(out, [joined], 270, specials)
    assert report["compression"]["special_tokens_seen"] == seen


def test_crlf_text_is_counted_as_it_is(source):
    docs = ["line one\r\nline two\r\n", "\r\n\r\n", "a\rb\r\n c\n", "windows\r\n\r\nfile\r\n", "end\r"]
    counts = reference.pretokenize([EOT.join(docs)], [EOT])
    assert any(b"\r" in token for token in counts)
    assert counts_of(source.count(docs, [EOT])) == counts
    _, out = source.train(docs, 270, [EOT])
    assert_trained_as_the_reference(out, [EOT.join(docs)], 270, [EOT])


@pytest.mark.parametrize("docs", [["", "", ""], []], ids=["empty-documents", "no-documents"])
def test_no_words_train_the_bytes_and_special_tokens(source, docs, caplog):
    counted = source.count(docs, [EOT])
    assert counted.table().num_rows == 0 and counted.report()["text_bytes"] == source.text_bytes(docs)
    with caplog.at_level(logging.WARNING, logger="bpe_dask"):
        report, out = source.train(docs, 300, [EOT])
    assert report["num_merges"] == 0 and "holds no words" in caplog.text
    assert read_reference_merges(out / "merges.txt") == []
    assert read_reference_vocab(out / "vocab.json") == reference_training((), 300, (EOT,))[0]  # bytes, EOT
