"""Documents held in memory: ``train_from_iterator`` / ``count_from_iterator`` over Python iterables, and
``train`` / ``count_words`` of Arrow tables and Hugging Face datasets. Every result is held to the reference
trainer (``rules.reference``) on the same documents: joined by ``<|endoftext|>`` with that special token, or,
with no special token, each document a text of its own (no pre-token crosses a document's end either way)."""

from __future__ import annotations

import logging
import random
import threading
import weakref

import dask
import pyarrow as pa
import pytest

import bpe_dask
from bpe_dask import BpeDaskError, Tokenizer, count_from_iterator, count_words, train, train_from_iterator
from bpe_dask.rules import reference

EOT = "<|endoftext|>"
WORDS = ["the", "cat", "sat", "on", "mat", "café", "naïve", "東京", "🙂", "don't", "12345", "x=1;", "\n",
         "  ", "<|endoftext|>", "über", "низко", "hello", "world", "!"]  # fmt: skip


def corpus(n: int, seed: int = 0) -> list[str]:
    """``n`` small documents of words, some non-ASCII, some holding the special token, some empty."""
    rng = random.Random(seed)
    documents = []
    for k in range(n):
        length = 0 if k % 7 == 3 else rng.randint(1, 40)
        documents.append("".join(rng.choice(WORDS) + rng.choice([" ", "", ",", "\n"]) for _ in range(length)))
    return documents


def reference_counts(texts: list[str], special_tokens: list[str]) -> dict[bytes, int]:
    return reference.pretokenize(texts, special_tokens)


def reference_merges(texts: list[str], vocab_size: int, special_tokens: list[str]):
    joined = [EOT.join(texts)] if special_tokens else texts  # one text, or each its own
    return reference.train(joined, vocab_size, special_tokens)[1]


def as_dict(table: pa.Table) -> dict[bytes, int]:
    counts = dict(zip(table["token"].to_pylist(), table["count"].to_pylist(), strict=True))
    assert len(counts) == table.num_rows  # each token once
    return counts


def mixed(texts: list[str]) -> list[str | bytes]:
    """Every other document as UTF-8 bytes."""
    return [text.encode() if k % 2 else text for k, text in enumerate(texts)]


@pytest.mark.parametrize("special_tokens", [[EOT], []])
def test_merges_of_str_and_bytes_mixed_equal_the_reference_on_the_joined_documents(tmp_path, special_tokens):
    """An iterable of str alone, and of bytes alone: test_sources.py."""
    texts = corpus(60)
    report = train_from_iterator((d for d in mixed(texts)), 330, str(tmp_path / "tok"), special_tokens)
    tokenizer = Tokenizer.load(tmp_path / "tok")
    assert tokenizer.merges == reference_merges(texts, 330, special_tokens)
    assert report["documents"] == len(texts) and report["num_merges"] == 330 - 256 - len(special_tokens)
    assert report["text_bytes"] == sum(len(t.encode()) for t in texts)
    seen = sum(t.count(EOT) for t in texts) if special_tokens else 0
    assert report["compression"]["special_tokens_seen"] == seen


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_batch_sizes_and_threads_give_the_same_counts(workers):
    texts = corpus(80, seed=1)
    expected = reference_counts(texts, [EOT])
    for batch_size in (1, 3, 1000):
        result = count_from_iterator(mixed(texts), [EOT], batch_size=batch_size, workers=workers,
                                     engine="numba")  # fmt: skip
        assert as_dict(result.table()) == expected, (batch_size, workers)
        assert result.specials.count == sum(t.count(EOT) for t in texts)
    assert as_dict(count_from_iterator(texts, [EOT], engine="python").table()) == expected


def test_a_document_longer_than_a_block_is_counted_in_pieces_as_a_whole():
    texts = [" ".join(corpus(200, seed=2)), "short one", "and " * 3000]
    with dask.config.set({"bpe-dask.block-size": "4KiB"}):
        result = count_from_iterator(texts, [EOT], batch_size=2, workers=2, engine="numba")
    assert as_dict(result.table()) == reference_counts(texts, [EOT])


@pytest.mark.parametrize("workers", [1, 2])
def test_an_iterable_that_raises_is_named_by_its_element_and_nothing_is_written(tmp_path, workers):
    def documents():
        for k, text in enumerate(corpus(40, seed=3)):
            if k == 23:
                raise ValueError("the source went away")
            yield text

    out = tmp_path / "tok"
    with pytest.raises(BpeDaskError) as raised:
        train_from_iterator(documents(), 300, str(out), [EOT], batch_size=4, workers=workers, engine="numba")
    message = str(raised.value)
    assert "element 23" in message and "ValueError" in message and "the source went away" in message
    assert "\n" not in message
    with pytest.raises(BpeDaskError, match="element 23"):
        count_from_iterator(documents(), out=str(tmp_path / "counts.parquet"), batch_size=4, workers=workers)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing, not even a temporary name


def test_an_interrupt_while_iterating_stops_the_counting_threads():
    def documents():
        yield from corpus(20, seed=8)
        raise KeyboardInterrupt

    before = threading.active_count()
    with pytest.raises(KeyboardInterrupt):
        count_from_iterator(documents(), batch_size=2, workers=3, engine="numba")
    assert threading.active_count() == before  # every counting thread has ended


def test_counts_written_by_count_from_iterator_merge_to_the_reference(tmp_path):
    texts = corpus(50, seed=9)
    counts = tmp_path / "counts.parquet"
    result = count_from_iterator(mixed(texts), [EOT], out=str(counts), workers=2, engine="numba")
    assert result.path == str(counts) and as_dict(result.table()) == reference_counts(texts, [EOT])
    bpe_dask.merge(str(counts), 300, str(tmp_path / "tok"))  # the special token as the counts record it
    assert Tokenizer.load(tmp_path / "tok").merges == reference_merges(texts, 300, [EOT])
    with pytest.raises(BpeDaskError, match="already exists"):
        count_from_iterator(texts, [EOT], out=str(counts))


def test_the_counts_are_let_go_before_the_merge_loop_runs(tmp_path, monkeypatch):
    """As ``train``'s: the counts table is handed to the merge, which lets it go once its words are
    laid out, rather than kept for the whole loop."""
    from bpe_dask.jobs import counting as counting_stage
    from bpe_dask.jobs import merging

    counted: list[weakref.ref] = []
    count_here, merge_table = counting_stage.count_here, merging.merge_table

    def counting(*args, **kwargs):
        result = count_here(*args, **kwargs)
        counted.append(weakref.ref(result.table()))
        return result

    alive: list[bool] = []

    def merging_with_a_watch(counts, goal, report):
        watch = lambda _: alive.append(counted[0]() is not None)  # noqa: E731
        return merge_table(counts, goal, watch)

    monkeypatch.setattr(counting_stage, "count_here", counting)
    monkeypatch.setattr(merging, "merge_table", merging_with_a_watch)
    train_from_iterator(corpus(40), 300, str(tmp_path / "tok"), [EOT], workers=2, engine="numba")
    assert counted and alive and not any(alive)


def test_an_element_that_is_not_text_is_named_with_its_type(tmp_path):
    with pytest.raises(BpeDaskError, match=r"^element 2 of the iterable: a dict, not a string \(on_bad_rec"):
        train_from_iterator(["a", b"b", {"text": "c"}], 300, str(tmp_path / "tok"))
    assert not (tmp_path / "tok").exists()
    with pytest.raises(BpeDaskError, match=r"^element 1 of the iterable is a list, .*itertools\.chain"):
        count_from_iterator(["a", ["b", "c"]])
    with pytest.raises(BpeDaskError, match="expected an iterable of str or bytes, got int"):
        count_from_iterator(5)


def test_invalid_utf8_is_an_error_naming_the_element_or_replaced():
    # The joined bytes of the last two are valid UTF-8 ("é"), each alone is not: each is checked alone.
    documents = ["fine", b"caf\xc3\xa9", b"ab\xc3", b"\xa9cd", b"\xff\xfe x"]
    with pytest.raises(BpeDaskError, match=r"element 2 of the iterable: invalid UTF-8 at byte 2"):
        count_from_iterator(documents, engine="numba", workers=2)
    with pytest.raises(BpeDaskError, match=r"element 1 .* lone surrogate"):
        count_from_iterator(["ok", "bad \ud800 text"])
    mended = [d if isinstance(d, str) else d.decode("utf-8", "replace") for d in documents]
    for engine in ("python", "numba"):
        result = count_from_iterator(documents, utf8_errors="replace", engine=engine, batch_size=2)
        assert as_dict(result.table()) == reference_counts(mended, [])
    # A lone surrogate (as a JSON Lines record's "\ud800" escape) is one U+FFFD, and a pair of them the
    # character they encode, as the tokenizer encodes such text (tiktoken's rule): counted as three
    # U+FFFD, one per byte of its UTF-8, training saw other text than encoding would.
    replaced = count_from_iterator(["a \ud800 b \ud83d\udc4d"], utf8_errors="replace").table()
    assert as_dict(replaced) == reference_counts(["a \ufffd b \U0001f44d"], [])


def test_progress_counts_documents_of_the_length_given(caplog):
    texts = corpus(30, seed=4)
    with caplog.at_level(logging.INFO, logger="bpe_dask.cluster.progress"):
        count_from_iterator(iter(texts), [EOT], length=len(texts), show_progress=True)
    assert f"count: 100%, {len(texts)}/{len(texts)} documents [" in caplog.text


def test_options_of_a_cluster_are_refused():
    with pytest.raises(BpeDaskError, match=r"counted in this process.*scheduler does not apply"):
        count_from_iterator(["a"], scheduler="tcp://127.0.0.1:1")
    with pytest.raises(BpeDaskError, match="unknown option 'worker'"):
        count_from_iterator(["a"], worker=2)


# --- Arrow tables and Hugging Face datasets --------------------------------------------------------


def table_with_nulls(texts: list[str], kind: pa.DataType | None = None) -> tuple[pa.Table, list[str]]:
    """The texts in a column of three chunks, with nulls among them; and the texts without the nulls."""
    values = [None if k % 5 == 1 else text for k, text in enumerate(texts)]
    third = len(values) // 3
    chunks = [values[:third], values[third : 2 * third], values[2 * third :]]
    column = pa.chunked_array([pa.array(chunk, pa.string()).cast(kind or pa.string()) for chunk in chunks])
    table = pa.table({"id": list(range(len(values))), "text": column})
    return table, [v for v in values if v is not None]


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string(), pa.string_view(), pa.binary()])
def test_an_arrow_table_with_nulls_and_chunks_counts_as_its_texts(kind):
    table, texts = table_with_nulls(corpus(50, seed=5), kind)
    expected = reference_counts(texts, [EOT])
    for engine, workers in (("python", 1), ("numba", 2)):
        result = count_words(table, [EOT], on_bad_record="skip", engine=engine, workers=workers)
        assert as_dict(result.table()) == expected
        assert result.bad_records_skipped == 10
    as_list = count_from_iterator(texts, [EOT]).table()
    assert as_dict(as_list) == expected
    assert as_dict(count_words(table["text"], [EOT], on_bad_record="skip").table()) == expected
    assert as_dict(count_words(table.to_batches()[0].slice(0, 1), [EOT]).table()) == reference_counts(
        texts[:1], [EOT]
    )


def test_a_table_trains_the_reference_merges_and_its_problems_are_one_line(tmp_path):
    table, texts = table_with_nulls(corpus(60, seed=6))
    report = train(table, 320, str(tmp_path / "tok"), [EOT], on_bad_record="skip")
    assert Tokenizer.load(tmp_path / "tok").merges == reference_merges(texts, 320, [EOT])
    assert report["bad_records_skipped"] == 12 and report["inputs"] == ["pyarrow.lib.Table"]
    with pytest.raises(BpeDaskError, match=r"^row 1 \('text' column\): null \(on_bad_record=\"skip\""):
        train(table, 320, str(tmp_path / "other"), [EOT])
    with pytest.raises(BpeDaskError, match=r"^no column 'body' \(columns: id, text\)"):
        count_words(table, text_column="body")
    with pytest.raises(BpeDaskError, match="column 'id' holds int64, not text"):
        count_words(table, text_column="id")
    assert not (tmp_path / "other").exists()


def test_hugging_face_datasets_count_from_their_arrow_tables():
    datasets = pytest.importorskip("datasets")
    texts = corpus(40, seed=7)
    dataset = datasets.Dataset.from_dict({"text": texts, "n": list(range(len(texts)))})
    kept = dataset.select(range(len(texts) - 1, -1, -2))  # an indices mapping over the same table
    expected = [texts[k] for k in range(len(texts) - 1, -1, -2)]
    assert as_dict(count_words(kept, [EOT]).table()) == reference_counts(expected, [EOT])

    def rows():
        yield from ({"text": text} for text in texts)

    streamed = datasets.IterableDataset.from_generator(rows)
    assert as_dict(count_words(streamed, [EOT]).table()) == reference_counts(texts, [EOT])
    with pytest.raises(BpeDaskError, match=r"holds splits \('train'\): pass one"):
        count_words(datasets.DatasetDict({"train": dataset}))

    def failing():
        yield {"text": "a"}
        raise ValueError("the stream broke")

    with pytest.raises(BpeDaskError, match=r"^the dataset raised ValueError after giving 0 rows: the stream"):
        count_words(datasets.IterableDataset.from_generator(failing))
    frame = dataset.to_pandas()  # anything giving an Arrow stream: a pandas DataFrame
    assert as_dict(count_words(frame, [EOT]).table()) == reference_counts(texts, [EOT])


def test_the_package_exports_the_iterator_functions():
    assert {"train_from_iterator", "count_from_iterator"} <= set(bpe_dask.__all__)


@pytest.mark.parametrize("later", ["invalid UTF-8", "not text"])
def test_the_lowest_failing_element_is_named_whichever_thread_fails_first(tmp_path, later):
    """Batch 0 fails slowly (its 40 MB are checked first), a later element at once: in a counting
    thread (invalid UTF-8) or in the iterating one (not text). The error names element 0, as counting
    the elements in order would; it used to name the one that failed first."""
    big = "word " * 8_000_000
    bad_later = b"\xfe" if later == "invalid UTF-8" else {"text": "x"}
    documents = [b"\xff", big, "fine", bad_later, "more"]
    for _ in range(3):
        with pytest.raises(BpeDaskError, match=r"^element 0 of the iterable: invalid UTF-8"):
            train_from_iterator(documents, 300, tmp_path / "tok", batch_size=2, workers=2, engine="numba")
        assert not (tmp_path / "tok").exists()


@pytest.mark.parametrize("workers", [1, 2])
def test_an_iterables_error_after_a_bad_element_names_the_bad_element(tmp_path, workers):
    """Under 4 MiB the batches are all read ahead before any is counted: the iterable's error (a dict at
    element 3) came out first, though element 0 was already bad, as counting in order finds."""
    documents = [b"\xff", "fine", "x", {"text": "x"}]
    with pytest.raises(BpeDaskError, match=r"^element 0 of the iterable: invalid UTF-8"):
        train_from_iterator(documents, 300, tmp_path / "tok", batch_size=2, workers=workers)
    assert not (tmp_path / "tok").exists()
    with pytest.raises(BpeDaskError, match=r"^element 3 of the iterable: a dict"):
        count_from_iterator(["a", "b", "c", {"text": "x"}], batch_size=2, workers=workers)


def test_a_string_is_not_taken_for_an_iterable_of_documents(tmp_path):
    """``count_from_iterator("corpus.txt")`` counted each character as a document, silently."""
    for given in ("corpus.txt", b"corpus", tmp_path / "corpus.txt"):
        with pytest.raises(BpeDaskError, match=r"^expected an iterable of documents, got a \w+: pass a list"):
            count_from_iterator(given)
        with pytest.raises(BpeDaskError, match=r"^expected an iterable of documents"):
            train_from_iterator(given, 300, tmp_path / "tok")
    assert not (tmp_path / "tok").exists()


def test_a_pandas_series_that_is_empty_null_or_holds_a_number_reads_as_any_source(tmp_path, caplog):
    """Arrow could not type such a Series (a null type, a number among the strings), and the job failed
    with Arrow's words: now an empty one is an empty input, a null or a number a bad record named by its
    row, and a Series of numbers a column that is not text, as in a table."""
    pd = pytest.importorskip("pandas")
    with caplog.at_level(logging.WARNING, logger="bpe_dask"):
        report = train(pd.Series([], dtype=object), 300, str(tmp_path / "empty"), [EOT])
    assert report["num_merges"] == 0 and Tokenizer.load(tmp_path / "empty").merges == []
    assert "the input holds no words" in caplog.text
    for values, row, what in (
        ([None, None], 0, "null"),
        (["the cat", 5, "the hat"], 1, "an int, not a string"),
    ):
        with pytest.raises(BpeDaskError, match=rf"^row {row} of the array: {what} \(on_bad_record=\"skip\""):
            count_words(pd.Series(values), [EOT])
        counted = count_words(pd.Series(values), [EOT], on_bad_record="skip")
        texts = [value for value in values if isinstance(value, str)]
        assert as_dict(counted.table()) == reference_counts(texts, [EOT])
        assert counted.bad_records_skipped == len(values) - len(texts)
    with pytest.raises(BpeDaskError, match=r"^the array holds int64, not text"):
        count_words(pd.Series([1, 2, 3]), [EOT])


def test_a_streamed_dataset_of_python_rows_with_a_null_or_a_number_reads_as_any_source():
    """``IterableDataset.from_generator`` makes each row into Arrow on its own, and ``datasets`` cannot
    join a null or a number to strings, even given the features: the job failed inside ``datasets``.
    Its rows are read as values instead: a bad record each, named by its row."""
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({"text": datasets.Value("string")})
    # (Given the features, ``datasets`` itself refuses a number for a string.)
    for rows, given in ((["the cat", None, "the hat", 7], None), (["the cat", None, "the hat"], features)):
        stream = datasets.IterableDataset.from_generator(
            lambda rows=rows: ({"text": value} for value in rows), features=given
        )
        with pytest.raises(BpeDaskError, match=r"^row 1 \('text' column\): null \(on_bad_record=\"skip\""):
            count_words(stream, [EOT])
        counted = count_words(stream, [EOT], on_bad_record="skip")
        assert as_dict(counted.table()) == reference_counts(["the cat", "the hat"], [EOT])
        assert counted.bad_records_skipped == len(rows) - 2
