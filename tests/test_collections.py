"""Dask collections as input (issue 22, part 1): a Dask DataFrame column or a Bag of documents trains,
counts and encodes as the same documents joined by ``<|endoftext|>`` would, on every partitioning,
a partition per map task on the collection's own cluster: a module-scoped LocalCluster of worker
processes, the LocalCluster ``train`` starts, and a `dask scheduler` with workers each in a
directory of its own, found as the current client. Expected results come from
``bpe_dask.rules.reference`` and ``Tokenizer.encode``, never from the job itself.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import numpy as np
import pytest
import servers
import timing

from bpe_dask import BpeDaskError, Tokenizer, count_words, encode, train
from bpe_dask.rules import reference

dd = pytest.importorskip("dask.dataframe")  # the `dataframe` extra (pandas)
db = pytest.importorskip("dask.bag")

EOT = "<|endoftext|>"
VOCAB_SIZE = 256 + 1 + 120
REPO = Path(__file__).resolve().parent.parent


def documents() -> list[str]:
    """Documents holding the special token, an empty one, and halves of it at their ends (joining
    them would make an occurrence cross from one into the next)."""
    import corpus

    docs = corpus.mixed_corpus(11, 60, special=EOT).split(EOT)
    return [*docs, "", "ab<|endof", "text|>cd", EOT, "x" + EOT + "y", "  trailing  ", "\r\n\r\n"]


DOCS = documents()
JOINED = EOT.join(DOCS)


@pytest.fixture(scope="module")
def reference_merges() -> list[tuple[bytes, bytes]]:
    return reference.train([JOINED], VOCAB_SIZE, [EOT])[1]


@pytest.fixture(scope="module")
def processes():
    """Two single-threaded worker processes, passed as ``client=`` (never the current client)."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        yield client


def series(docs: list[str], npartitions: int):
    return dd.from_dict({"text": docs, "n": list(range(len(docs)))}, npartitions=npartitions)["text"]


def counts_of(table) -> dict[bytes, int]:
    return dict(zip(table["token"].to_pylist(), table["count"].to_pylist(), strict=True))


def merges(folder: Path) -> list[tuple[bytes, bytes]]:
    return Tokenizer.load(folder).merges


def test_the_embedded_cluster_trains_a_bag(tmp_path, reference_merges):
    """No client anywhere: ``train`` starts its LocalCluster (threads, compiled counting). (The docs'
    Dask DataFrame example, with no client either, runs in tests/test_examples.py.)"""
    from distributed import get_client

    with pytest.raises(ValueError):
        get_client()  # no current client: the job must start its own cluster
    bag = db.from_sequence(DOCS, npartitions=3)
    report = train(bag, VOCAB_SIZE, str(tmp_path / "tok"), [EOT])
    assert merges(tmp_path / "tok") == reference_merges
    assert report["partitions"] == bag.npartitions and report["text_bytes"] == len(JOINED.encode()) - (
        len(DOCS) - 1
    ) * len(EOT)


def test_series_and_bags_train_the_reference_merges_whatever_the_partitions(
    processes, tmp_path, reference_merges
):
    for i, collection in enumerate([series(DOCS, 1), series(DOCS, 4), db.from_sequence(DOCS, npartitions=7)]):
        out = tmp_path / f"tok-{i}"
        report = train(collection, VOCAB_SIZE, str(out), [EOT], client=processes)
        assert merges(out) == reference_merges, collection
        assert report["partitions"] == collection.npartitions and report["partitions_reused"] == 0
        assert report["merge_ran_on"] == "client"
    # bytes in a Bag are UTF-8 text; a DataFrame without the text column, a column not of text
    frame = dd.from_dict({"body": DOCS, "n": list(range(len(DOCS)))}, npartitions=3)
    expected = reference.pretokenize([JOINED], [EOT])
    encoded = db.from_sequence([d.encode() if i % 2 else d for i, d in enumerate(DOCS)], npartitions=2)
    result = count_words(encoded, [EOT], client=processes, out=str(tmp_path / "counts.parquet"))
    assert counts_of(result.table()) == expected and result.partitions == 2
    assert result.report()["special_tokens_seen"] == JOINED.count(EOT) - (len(DOCS) - 1)
    with pytest.raises(BpeDaskError, match=r"no column 'text' \(its columns: 'body', 'n'\)"):
        count_words(frame, [EOT], client=processes)
    with pytest.raises(BpeDaskError, match="'n' holds int64, not text"):
        count_words(frame["n"], [EOT], client=processes)


def test_encode_writes_each_document_then_the_separator_in_partition_order(processes, tmp_path):
    tokenizer_dir = tmp_path / "tok"
    train(series(DOCS, 2), VOCAB_SIZE, str(tokenizer_dir), [EOT], client=processes)
    tokenizer = Tokenizer.load(tokenizer_dir, engine="python")
    separated = [i for doc in DOCS for i in [*tokenizer.encode(doc), tokenizer.special_ids[EOT]]]
    column = series(DOCS, 5)
    report = encode(
        column, tokenizer_dir, str(tmp_path / "ids.bin"), document_separator=EOT, client=processes
    )
    assert np.fromfile(tmp_path / "ids.bin", report["dtype"]).tolist() == separated
    assert report["tokens"] == len(separated) and report["text_bytes"] == sum(len(d.encode()) for d in DOCS)
    assert report["shards"] == 5 and report["inputs"] == ["the Dask Series 'text'"]
    bag = db.from_sequence(DOCS, npartitions=3)
    encode(bag, tokenizer, str(tmp_path / "ids"), client=processes)  # a directory of .npy shards
    index = json.loads((tmp_path / "ids" / "index.json").read_text())
    shards = [np.load(tmp_path / "ids" / s["shard"]).tolist() for s in index["shards"]]
    assert [i for shard in shards for i in shard] == [i for doc in DOCS for i in tokenizer.encode(doc)]
    assert [(s["start"], s["end"], s["unit"]) for s in index["shards"]] == [
        (k, k + 1, "partitions") for k in range(3)
    ]


def touched(text: str, folder: str) -> str:
    """The element, after leaving a file behind: a partition computed leaves one per element."""
    Path(folder, uuid.uuid4().hex).touch()  # a name of its own: partitions run in threads at once
    return text


def failing_once(text: str, folder: str, shard_dir: str, others: int, seconds: float) -> str:
    """``touched``, but the last document fails the first time it is computed (a worker lost, say),
    once the ``others`` partitions' shards are written (a failure cancels the job's other tasks), or
    ``seconds`` have passed."""
    if text == DOCS[-1] and not Path(folder, "failed").exists():
        import time

        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and len(list(Path(shard_dir).glob("[!.]*.parquet"))) < others:
            time.sleep(0.05)
        Path(folder, "failed").touch()
        raise ValueError("the first time")
    return touched(text, folder)


def shards_left(work: str) -> list[str]:
    return sorted(p.name for p in Path(work).rglob("*") if p.suffix in (".parquet", ".npy", ".json"))


@pytest.fixture
def four_threads():
    """A worker of four threads: the four partitions at once, so the one that fails can wait for the
    others' shards."""
    from distributed import Client

    with Client(processes=False, n_workers=1, threads_per_worker=4, dashboard_address=":0") as client:
        yield client


def test_a_rerun_after_an_unfinished_job_reuses_its_shards_and_a_finished_jobs_are_gone(
    four_threads, tmp_path, reference_merges
):
    """A job that stopped (a partition failed) left the other partitions' shards: run again with the
    same ``work_dir``, it computes only the partition that failed. A job that finished leaves none,
    so the next run computes every partition: a collection's Dask keys need not change with its data."""
    calls = tmp_path / "calls"
    calls.mkdir()
    work = str(tmp_path / "work")
    failing = (str(calls), f"{work}/shards", 3, timing.seconds(20))
    bag = db.from_sequence(DOCS, npartitions=4).map(failing_once, *failing)
    with pytest.raises(ValueError, match="the first time"):  # the collection's own error, as Dask raises it
        train(bag, VOCAB_SIZE, str(tmp_path / "a"), [EOT], client=four_threads, work_dir=work)
    assert not (tmp_path / "a").exists()
    last = bag.to_delayed()[-1].compute(scheduler="sync")  # the last partition's documents (no failure now)
    computed_before = len(os.listdir(calls)) - len(last)  # the first partitions', and "failed"
    again = train(bag, VOCAB_SIZE, str(tmp_path / "a"), [EOT], client=four_threads, work_dir=work)
    assert again["partitions_reused"] == bag.npartitions - 1
    assert merges(tmp_path / "a") == reference_merges
    assert len(os.listdir(calls)) == computed_before + 2 * len(last)  # only the last partition again
    assert shards_left(work) == []  # finished: nothing left to reuse
    calls_now = len(os.listdir(calls))
    third = train(bag, VOCAB_SIZE, str(tmp_path / "b"), [EOT], client=four_threads, work_dir=work)
    assert third["partitions_reused"] == 0 and len(os.listdir(calls)) == calls_now + len(DOCS)
    assert merges(tmp_path / "b") == reference_merges
    tokenizer = Tokenizer.load(tmp_path / "b")
    for k in "12":
        report = encode(bag, tokenizer, str(tmp_path / f"ids-{k}.bin"), client=four_threads, work_dir=work)
        assert report["shards_reused"] == 0
        assert shards_left(work) == []
    assert (tmp_path / "ids-1.bin").read_bytes() == (tmp_path / "ids-2.bin").read_bytes()


def test_a_collection_whose_data_changed_under_the_same_keys_is_counted_anew(processes, tmp_path):
    """``dask.bag.read_text`` of a file written anew has the same Dask keys: a second run with the same
    ``work_dir`` reused the first one's shard, and counted the old text."""
    path = tmp_path / "docs.txt"
    work = str(tmp_path / "work")
    for text in ("the cat\nthe hat\n", "a completely different corpus\n"):
        path.write_text(text)
        counted = count_words(db.read_text(str(path)), [EOT], client=processes, work_dir=work)
        assert counts_of(counted.table()) == reference.pretokenize([text], [EOT])
        assert counted.partitions_reused == 0


def test_on_workers_in_their_own_directories_through_the_current_client(tmp_path, reference_merges):
    """The "Done when" cluster: a scheduler and workers each in a folder of its own (their own working
    directory, TMPDIR and HOME), found as the current client, with nothing left in their folders."""
    from distributed import Client

    work = str(tmp_path / "work")
    with (
        servers.separate_machines([], n_workers=2, private=False) as cluster,
        Client(cluster.address) as client,
    ):
        before = cluster.files()
        # a Series, a Bag, and the Series again (its graph anew): each finished job leaves no shard to
        # reuse, and the merge on a worker reads the counts file from the work directory
        collections = [series(DOCS, 3), db.from_sequence(DOCS, npartitions=4), series(DOCS, 3)]
        for i, collection in enumerate(collections):
            report = train(collection, VOCAB_SIZE, str(tmp_path / f"tok-{i}"), [EOT], work_dir=work)
            assert merges(tmp_path / f"tok-{i}") == reference_merges
            assert report["merge_ran_on"] == "worker"  # a remote cluster: the merge runs on a worker
            assert report["partitions_reused"] == 0
        tokenizer = Tokenizer.load(tmp_path / "tok-0")
        report = encode(series(DOCS, 3), tokenizer, str(tmp_path / "ids.bin"), document_separator=EOT)
        expected = [i for doc in DOCS for i in [*tokenizer.encode(doc), tokenizer.special_ids[EOT]]]
        assert np.fromfile(tmp_path / "ids.bin", report["dtype"]).tolist() == expected
        assert cluster.files() == before, cluster.logs()
        # closed through the scheduler, the workers are gone in a moment (a SIGTERM'd `dask worker`
        # takes about 8 s here)
        client.retire_workers(close_workers=True)


def test_pandas_and_dask_dataframe_load_only_for_a_collection(tmp_path):
    """Importing bpe-dask loads neither pandas nor ``dask.dataframe``, and taking a Bag's documents
    does not load ``dask.dataframe``: a collection is told by its type's module."""
    import subprocess
    import sys

    code = (
        "import sys, bpe_dask, dask.bag\n"
        "print('pandas' in sys.modules, 'dask.dataframe' in sys.modules)\n"
        "from bpe_dask.io.documents import RecordPolicy\n"
        "from bpe_dask.sources.collection import CollectionSource\n"
        "bag = dask.bag.from_sequence(['a b', 'c'], npartitions=2)\n"
        "print(len(CollectionSource.of(bag, 'text', RecordPolicy()).partitions))\n"
        "print('dask.dataframe' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=timing.seconds(60)
    )
    assert done.stdout.split() == ["False", "False", "2", "False"], done.stderr


def test_what_a_partition_holds_becomes_documents_or_a_bad_element():
    """In-process, one partition's data as a task receives it: Arrow-backed, object and binary
    Series, lists of str and bytes; nulls of every kind, invalid UTF-8 and lone surrogates."""
    import pandas as pd
    import pyarrow as pa

    from bpe_dask.io.documents import BadRecords, RecordPolicy
    from bpe_dask.sources.collection import CollectionPart
    from bpe_dask.sources.part import PartReading

    def texts(data, utf8_errors="strict", batch_bytes=8 * 2**20, on_bad_record="skip"):
        bad = BadRecords()
        part = CollectionPart("the Dask Series 'text'", 4, "k", RecordPolicy(on_bad_record))
        reading = PartReading(None, utf8_errors=utf8_errors, block=batch_bytes)
        batches = list(part.documents(reading, bad, data=data))
        return [t for batch in batches for t in batch.texts()], bad.count, len(batches)

    docs = ["a b", "", "é<|endoftext|>ü", "x" * 50]
    for dtype in ("str", "string[pyarrow]", "string[python]", object, pd.ArrowDtype(pa.large_string())):
        assert texts(pd.Series(docs, dtype=dtype)) == (docs, 0, 1), dtype
    assert texts(pd.Series(docs), batch_bytes=20) == (docs, 0, 4)  # rows of about 20 bytes a batch
    binary = pd.Series([d.encode() for d in docs], dtype=pd.ArrowDtype(pa.binary()))
    assert texts(binary) == (docs, 0, 1)
    nulls = pd.Series(["a", None, "b", float("nan"), pd.NA], dtype=object)
    assert texts(nulls)[:2] == (["a", "b"], 3)
    assert texts(pd.Series(["a", None], dtype="string[pyarrow]"))[:2] == (["a"], 1)
    assert texts([b"ok", b"\xff bad", "lone \ud800"])[:2] == (["ok"], 2)
    # invalid UTF-8 read as U+FFFD, as bytes.decode(errors="replace") and a JSON Lines record's text do
    assert texts([b"\xffx", "y\ud800"], utf8_errors="replace")[:2] == (["\ufffdx", "y\ufffd"], 0)
    with pytest.raises(BpeDaskError, match=r"partition 4, element 1: invalid UTF-8 at byte 0"):
        texts(pd.Series([b"ok", b"\xff"], dtype=object), on_bad_record="error")
    with pytest.raises(BpeDaskError, match=r"partition 4, element 0: a dict, not a string"):
        texts([{"text": "a"}], on_bad_record="error")


def test_a_partition_is_told_while_another_thread_imports_pandas(monkeypatch):
    """A worker's first shard makes pyarrow import pandas in one thread while the next partition starts
    in another: that thread saw ``sys.modules["pandas"]`` half made, with no ``Series`` yet, and the task
    failed with an AttributeError and a traceback (5 runs in 8 of a fresh 2-thread worker). The same for
    ``datasets``, half made, when an input is told apart."""
    import sys
    import types

    import pyarrow as pa

    from bpe_dask.io.documents import BadRecords
    from bpe_dask.io.in_memory import holds_arrow_text
    from bpe_dask.sources.collection import CollectionPart
    from bpe_dask.sources.part import PartReading

    monkeypatch.setitem(sys.modules, "pandas", types.ModuleType("pandas"))  # being imported: no Series yet
    monkeypatch.setitem(sys.modules, "datasets", types.ModuleType("datasets"))
    part = CollectionPart("the Dask Bag 'docs'", 0, "k")
    batches = part.documents(PartReading(None), BadRecords(), data=["a b", b"c"])
    assert [d.texts() for d in batches] == [["a b", "c"]]
    assert holds_arrow_text(pa.table({"text": ["a"]})) and not holds_arrow_text(iter(["a"]))


def test_a_series_of_categories_is_text(processes):
    """Strings as pandas categories (each stored once) were refused as "holds category, not text"."""
    import pandas as pd

    frame = pd.Series([*DOCS[:30], None, *DOCS[:30]], dtype="category")
    counted = count_words(dd.from_pandas(frame, npartitions=3), [EOT], client=processes, on_bad_record="skip")
    assert counts_of(counted.table()) == reference.pretokenize([EOT.join(DOCS[:30] * 2)], [EOT])
    assert counted.bad_records_skipped == 1


@pytest.mark.parametrize("convert_string", [True, False])
def test_a_pandas_column_of_numbers_is_never_counted_as_text(processes, convert_string):
    """Dask's ``dataframe.convert-string`` (on by default) makes every value of a pandas column of
    objects a string as ``from_pandas`` makes the partitions: numbers were counted as the text "1", "2"
    (and as bad elements with it off). Whatever the setting, such a column is not text: refused in one
    line before any work, or, the setting off, each number a bad element, as in any source; a column
    of text counts as its texts."""
    import dask
    import pandas as pd

    with dask.config.set({"dataframe.convert-string": convert_string}):
        numbers = dd.from_pandas(pd.DataFrame({"text": pd.Series([1, 2, 3], dtype=object)}), npartitions=2)
        mixed = dd.from_pandas(pd.Series(["the cat", 7, None, "the hat"], name="text"), npartitions=2)
        texts = dd.from_pandas(pd.DataFrame({"text": pd.Series(DOCS, dtype=object)}), npartitions=3)
    for collection, held in ((numbers, "integer"), (mixed, "mixed-integer")):
        said = rf"^the Dask Series 'text' holds values that are not text \(pandas says {held}\), which Dask's"
        if not convert_string:
            said = r"partition \d, element \d: (an int, not a string|null) "  # whichever task fails first
        with pytest.raises(BpeDaskError, match=said):
            count_words(collection, [EOT], client=processes)
    if not convert_string:
        skipped = count_words(mixed, [EOT], client=processes, on_bad_record="skip")
        assert counts_of(skipped.table()) == reference.pretokenize(["the cat", "the hat"], [EOT])
    counted = count_words(texts, [EOT], client=processes)
    assert counts_of(counted.table()) == reference.pretokenize([JOINED], [EOT])
