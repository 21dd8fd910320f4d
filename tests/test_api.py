"""The Python API's contract beyond CS336's: option checks, and jobs sharing one cluster."""

from __future__ import annotations

import threading

import corpus
import pytest
from distributed import Client, LocalCluster

from bpe_dask import BpeDaskError, count_words, train_bpe
from bpe_dask.io import tokenizer_formats
from bpe_dask.rules import reference
from conftest import read_reference_merges

EOT = "<|endoftext|>"


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text(corpus.words_corpus(9, 3000), encoding="utf-8")
    return path


def test_a_bare_string_of_special_tokens_is_refused(text_file):
    with pytest.raises(BpeDaskError, match="list of strings"):
        train_bpe(text_file, 300, EOT)


def test_in_process_cannot_also_take_a_cluster(text_file):
    with pytest.raises(BpeDaskError, match="in_process=True"):
        count_words(text_file, [EOT], in_process=True, workers=2)


def test_train_in_process_counts_here_with_no_cluster(text_file, tmp_path, monkeypatch):
    """``in_process=True`` counts in this process for ``train`` as for ``count_words``: it started a
    LocalCluster all the same."""
    from bpe_dask import train

    def refused(*args, **kwargs):
        raise AssertionError("a LocalCluster was started")

    monkeypatch.setattr(LocalCluster, "__init__", refused)
    report = train(text_file, 300, tmp_path / "tok", [EOT], in_process=True)
    assert report["merge_ran_on"] == "client"
    assert read_reference_merges(tmp_path / "tok" / "merges.txt") == reference.train(
        [text_file.read_text(encoding="utf-8")], 300, [EOT]
    )[1]


def test_a_special_token_that_reads_as_a_learned_token_is_caught_before_writing():
    vocab = {i: bytes([i]) for i in range(256)} | {256: "Ġthe".encode(), 257: b" the"}
    with pytest.raises(BpeDaskError, match="rename the special token"):
        tokenizer_formats.vocab_json(vocab, {"Ġthe": 256})


def test_concurrent_jobs_on_one_cluster_keep_their_own_shards(text_file, tmp_path):
    results: dict[str, object] = {}

    def job(name: str, client: Client) -> None:
        work = tmp_path / name
        results[name] = count_words(text_file, [EOT], client=client, chunk_size=4096, work_dir=str(work))

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address="127.0.0.1:0") as cluster,
        Client(cluster) as c,
    ):
        threads = [threading.Thread(target=job, args=(name, c)) for name in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    a, b = results["a"], results["b"]
    assert a.table().sort_by("token").equals(b.table().sort_by("token"))
    for name in ("a", "b"):
        shards = sorted(p.name for p in (tmp_path / name / "shards").iterdir())
        assert len(shards) == a.partitions  # each work directory holds its own complete set


def test_memory_urls_train_in_process_and_are_refused_by_worker_processes():
    import fsspec

    from bpe_dask import train_bpe

    text = corpus.words_corpus(12, 2000)
    fsspec.filesystem("memory").pipe("/bpe-dask-test/a.txt", text.encode())
    local = fsspec.filesystem("memory")
    assert local.cat("/bpe-dask-test/a.txt") == text.encode()
    _, merges = train_bpe("memory://bpe-dask-test/a.txt", 300, [EOT])
    assert len(merges) == 300 - 257
    with pytest.raises(BpeDaskError, match="cannot see the input memory://"):
        train_bpe("memory://bpe-dask-test/*.txt", 300, [EOT], workers=1)


# --- every public entry point takes one path, a Path, or a list -------------------------------


def test_every_job_takes_a_single_path_a_path_object_or_a_list(client, tmp_path):
    import json
    from pathlib import Path

    import bpe_dask

    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(corpus.words_corpus(21, 3000), encoding="utf-8")
    b.write_text(corpus.words_corpus(22, 3000), encoding="utf-8")
    want_a = reference.train([a.read_text(encoding="utf-8")], 300, [EOT])[1]
    want_ab = reference.train([a.read_text(encoding="utf-8"), b.read_text(encoding="utf-8")], 300, [EOT])[1]

    assert bpe_dask.train_bpe(str(a), 300, [EOT])[1] == want_a
    for inputs, want in ((str(a), want_a), (Path(a), want_a), ([str(a), b], want_ab)):
        out = tmp_path / f"tok-{len(list(tmp_path.iterdir()))}"
        report = bpe_dask.train(inputs, 300, str(out), [EOT], client=client)
        assert report["inputs"] == [f"file://{p}" for p in (inputs if isinstance(inputs, list) else [inputs])]
        assert read_reference_merges(out / "merges.txt") == want

    counted = bpe_dask.count_words(str(a), [EOT], out=str(tmp_path / "counts.parquet"), client=client)
    assert counted.input_files == [f"file://{a}"]
    merged = bpe_dask.merge(str(tmp_path / "counts.parquet"), 300, str(tmp_path / "merged"), [EOT])
    assert merged["num_merges"] == len(want_a)
    assert read_reference_merges(tmp_path / "merged" / "merges.txt") == want_a

    encoded = bpe_dask.encode(str(a), str(tmp_path / "merged"), str(tmp_path / "ids"), client=client)
    index = json.loads((tmp_path / "ids" / "index.json").read_text())
    assert encoded["tokens"] == sum(entry["tokens"] for entry in index["shards"]) > 0


def test_every_output_and_work_directory_may_be_a_path_object(client, tmp_path):
    """``pathlib.Path`` outputs and ``work_dir`` as well as strings: ``train_from_iterator``, ``encode``
    and an Arrow table's ``train`` used to stop in a TypeError or an AttributeError on one."""
    import pyarrow as pa

    import bpe_dask

    a = tmp_path / "a.txt"
    text = corpus.words_corpus(23, 2000)
    a.write_text(text, encoding="utf-8")
    want = reference.train([text], 280, [EOT])[1]
    documents = text.split(EOT)
    table = pa.table({"text": documents})
    work = tmp_path / "work"

    bpe_dask.train(a, 280, tmp_path / "tok", [EOT], client=client, work_dir=work)
    bpe_dask.train(table, 280, tmp_path / "from-table", [EOT])
    bpe_dask.train_from_iterator(iter(documents), 280, tmp_path / "from-iterator", [EOT])
    for name in ("tok", "from-table", "from-iterator"):
        assert read_reference_merges(tmp_path / name / "merges.txt") == want, name
    bpe_dask.count_words(a, [EOT], out=tmp_path / "counts.parquet", client=client, work_dir=work)
    bpe_dask.count_from_iterator(documents, [EOT], out=tmp_path / "counts-iterator.parquet")
    for name in ("counts", "counts-iterator"):
        bpe_dask.merge(tmp_path / f"{name}.parquet", 280, tmp_path / f"merged-{name}", [EOT])
        assert read_reference_merges(tmp_path / f"merged-{name}" / "merges.txt") == want, name
    bin_report = bpe_dask.encode(a, tmp_path / "tok", tmp_path / "ids.bin", client=client, work_dir=work)
    npy_report = bpe_dask.encode(a, tmp_path / "tok", tmp_path / "ids", client=client)
    assert bin_report["tokens"] == npy_report["tokens"] > 0
    assert (tmp_path / "ids.bin").stat().st_size == bin_report["tokens"] * 2
    evaluated = bpe_dask.evaluate(a, [tmp_path / "tok"], out=tmp_path / "evaluation", client=client)
    assert evaluated and (tmp_path / "evaluation").exists()


def test_an_unknown_option_is_named():
    with pytest.raises(BpeDaskError, match="unknown option 'chunksize'"):
        train_bpe("anything.txt", 300, [EOT], chunksize=4096)


def test_inputs_that_are_neither_paths_nor_lists_are_refused():
    with pytest.raises(BpeDaskError, match="inputs must be a path"):
        count_words(42)


def test_storage_options_stay_out_of_reprs(text_file):
    from bpe_dask import JobOptions

    secret = "wJalrXUtnFEMI-not-a-real-secret"
    options = JobOptions.of(storage_options={"key": "AKIA-example", "secret": secret})
    result = count_words(text_file, [EOT], storage_options={"secret": secret})
    assert secret not in repr(options) and secret not in repr(result)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"storage_options": "x"}, "storage options must be a dict"),
        ({"storage_options": [1]}, "storage options must be a dict"),
        ({"pattern": ["gpt2"]}, "pattern must be a string"),
        ({"pattern": "gpt5"}, "unknown split pattern 'gpt5'"),
        ({"pattern": "(x"}, "is not a valid regex: missing \\)"),
        ({"pattern": r"\S+|\s+", "engine": "numba"}, "numba engine works with the built-in patterns only"),
        ({"workers": "two"}, "not a whole number"),
        ({"workers": 0}, "workers must be a positive number"),
        ({"in_process": "no"}, "in_process must be True or False"),
        ({"overwrite": 1}, "overwrite must be True or False"),
        ({"chunk_size": "lots"}, "not a size"),
        ({"client": "tcp://x:1"}, "client must be a distributed.Client"),
        ({"scheduler": "tcp://x:1", "workers": 2}, "one place to run"),
    ],
)
def test_bad_job_options_are_one_line_errors(text_file, options, message):
    with pytest.raises(BpeDaskError, match=message):
        train_bpe(text_file, 300, [EOT], **options)


def test_job_options_convert_what_they_can():
    from bpe_dask import JobOptions

    options = JobOptions.of(workers="2", chunk_size="1MiB", special_tokens=None)
    assert (options.workers, options.chunk_size, options.special_tokens) == (2, 2**20, ())


def test_a_vocabulary_size_must_be_a_whole_number(text_file):
    with pytest.raises(BpeDaskError, match=r"vocab size must be a whole number, got 300\.0"):
        train_bpe(text_file, 300.0, [EOT])


def test_an_empty_list_of_inputs_is_refused():
    with pytest.raises(BpeDaskError, match="inputs must be a path or URL"):
        count_words([])


def test_merge_keeps_the_pattern_the_counts_were_made_with_and_refuses_another(tmp_path):
    import json

    import bpe_dask
    from bpe_dask.io.counts_table import counts_table, write_counts
    from bpe_dask.rules.patterns import O200K
    from bpe_dask.stages.count import CountSettings

    text = corpus.mixed_corpus(31, 20)
    settings = CountSettings((EOT,), pattern="o200k_base")
    counts = str(tmp_path / "counts.parquet")
    write_counts(counts_table(settings.pretokenizer().count(text)), counts, settings=settings.recorded())
    report = bpe_dask.merge(counts, 300, str(tmp_path / "tok"))
    assert report["pattern"] == report["counted_with"]["pattern"] == "o200k"
    assert json.loads((tmp_path / "tok" / "report.json").read_text())["pattern"] == "o200k"
    assert bpe_dask.Tokenizer.load(tmp_path / "tok").pretokenizer.pattern is O200K
    want = reference.train([text], 300, [EOT], O200K.regex)[1]
    assert read_reference_merges(tmp_path / "tok" / "merges.txt") == want
    assert bpe_dask.merge(counts, 300, str(tmp_path / "tok2"), pattern=O200K.regex)["pattern"] == "o200k"
    with pytest.raises(BpeDaskError, match="was counted with split pattern 'o200k', not 'gpt4'"):
        bpe_dask.merge(counts, 300, str(tmp_path / "tok3"), pattern="gpt4")
    assert not (tmp_path / "tok3").exists()


def test_the_smallest_vocabulary_is_named_in_words_that_agree():
    with pytest.raises(BpeDaskError, match=r"^vocab size 256 is below 257 \(256 bytes \+ 1 special token\)$"):
        train_bpe("anything.txt", 256, [EOT])
    with pytest.raises(BpeDaskError, match=r"\(256 bytes \+ 2 special tokens\)$"):
        train_bpe("anything.txt", 256, [EOT, "<|pad|>"])


@pytest.mark.parametrize(("options", "processes"), [({"engine": "numba"}, 0), ({"pattern": r"\S+|\s+"}, 1)])
def test_the_report_gives_the_peak_memory_of_worker_processes_alone(text_file, tmp_path, options, processes):
    """The cluster a job starts runs compiled tasks in threads of the job's own process, whose peak
    the report already gives (``peak_rss_bytes``): only workers of their own are listed beside it."""
    from bpe_dask import train

    report = train(text_file, 300, str(tmp_path / "tok"), [EOT], workers=1, **options)
    peaks = report["workers_peak_rss_bytes"]
    assert len(peaks) == processes, peaks
    assert all(peak > 10 * 2**20 for peak in peaks.values()) and report["peak_rss_bytes"] > 10 * 2**20


# --- messages name options as the caller gives them: keywords here, flags on the command line --------


@pytest.fixture
def mistakes(tmp_path, monkeypatch):
    """Inputs for user errors whose messages name the option that fixes them: (how the Python API
    makes the mistake, the same command line, what the API's message says, what the CLI's says)."""
    import json
    import re

    import bpe_dask
    from bpe_dask import Tokenizer

    monkeypatch.chdir(tmp_path)
    text = corpus.words_corpus(9, 2000)
    (tmp_path / "in.txt").write_text(text, encoding="utf-8")
    (tmp_path / "bad.txt").write_bytes(b"fine text \xff more text")
    (tmp_path / "bad.jsonl").write_text(json.dumps({"body": "the text"}) + "\n")
    bpe_dask.train("in.txt", 300, "tok", [EOT])
    bpe_dask.count_words("in.txt", [EOT], out="counts.parquet", in_process=True)
    vocab = {i: bytes([i]) for i in range(256)}
    Tokenizer(vocab, [], [], r"\S+|\s+").save("untrusted")
    absolute = str(tmp_path / "in.txt")
    cases = [
        (lambda: bpe_dask.train("bad.jsonl", 300, "t"),
         ["train", "bad.jsonl", "--vocab-size", "300", "--out", "t"],
         ['text_column= names the field', 'on_bad_record="skip" leaves'],
         ["--text-column names the field", "--on-bad-record skip leaves"]),
        (lambda: bpe_dask.train("bad.txt", 300, "t"),
         ["train", "bad.txt", "--vocab-size", "300", "--out", "t"],
         ['(utf8_errors="replace" substitutes U+FFFD)'], ["(--utf8-errors replace substitutes U+FFFD)"]),
        (lambda: bpe_dask.train("in.txt", 300, "tok", [EOT]),
         ["train", "in.txt", "--vocab-size", "300", "--out", "tok", "--special-token", EOT],
         ["pass overwrite=True"], ["pass --overwrite"]),
        (lambda: bpe_dask.train("in.txt", 300, "t", pattern=r"\w+", strict_pattern=True),
         ["train", "in.txt", "--vocab-size", "300", "--out", "t", "--pattern", r"\w+", "--strict-pattern"],
         ["(strict_pattern=True)"], ["(--strict-pattern)"]),
        (lambda: bpe_dask.train("in.txt", 300, "t", ["<\ufffd>"], utf8_errors="replace"),
         ["train", "in.txt", "--vocab-size", "300", "--out", "t", "--special-token", "<\ufffd>",
          "--utf8-errors", "replace"],
         ['(utf8_errors="replace")'], ["(--utf8-errors replace)"]),
        (lambda: bpe_dask.train("in.txt", 300, "t", work_dir="in.txt"),
         ["train", "in.txt", "--vocab-size", "300", "--out", "t", "--work-dir", "in.txt"],
         [f"cannot use work_dir='{absolute}'"], [f"cannot use --work-dir {absolute}"]),
        (lambda: bpe_dask.encode("in.txt", "tok", "ids.bin", format="npy"),
         ["encode", "in.txt", "--tokenizer", "tok", "--out", "ids.bin", "--format", "npy"],
         ['format="npy" writes a directory', "out='", 'give format="bin"'],
         ["--format npy writes a directory", "--out /", "give --format bin"]),
        (lambda: bpe_dask.encode("in.txt", "tok", "x.ids"),
         ["encode", "in.txt", "--tokenizer", "tok", "--out", "x.ids"],
         ['give format="bin"'], ["give --format bin"]),
        (lambda: bpe_dask.encode("in.txt", "tok", "ids.bin", document_separator=EOT),
         ["encode", "in.txt", "--tokenizer", "tok", "--out", "ids.bin", "--document-separator", EOT],
         ["document_separator= applies"], ["--document-separator applies"]),
        (lambda: bpe_dask.encode("in.txt", "untrusted", "ids.bin"),
         ["encode", "in.txt", "--tokenizer", "untrusted", "--out", "ids.bin"],
         ["load it with trust_pattern=True if"], ["load it with --trust-pattern if"]),
        (lambda: bpe_dask.merge("counts.parquet", 300, "m", ["<|pad|>"]),
         ["merge", "counts.parquet", "--vocab-size", "300", "--out", "m", "--special-token", "<|pad|>"],
         ["leave special_tokens= out"], ["leave --special-token out"]),
        (lambda: bpe_dask.merge("counts.parquet", 300, "m", pattern="gpt4"),
         ["merge", "counts.parquet", "--vocab-size", "300", "--out", "m", "--pattern", "gpt4"],
         ["leave pattern= out"], ["leave --pattern out"]),
    ]  # fmt: skip
    flag = re.compile(r"(?<![\w-])--[a-z]")
    keyword = re.compile(r"(?<![\w.])(?:%s)=" % "|".join(  # noqa: UP031
        ["overwrite", "utf8_errors", "on_bad_record", "text_column", "strict_pattern", "work_dir", "out",
         "format", "document_separator", "trust_pattern", "special_tokens", "pattern"]))  # fmt: skip
    return cases, flag, keyword


def test_the_python_api_names_keywords_and_the_command_line_flags(mistakes, capsys, monkeypatch):
    """The same mistakes made in Python and on the command line: each message names the option that
    fixes it as the caller gives it (``on_bad_record="skip"``, ``--on-bad-record skip``). The API's
    named the command line's flags (a JSON Lines record with no text, ``overwrite``, ...)."""
    import sys

    from bpe_dask.cli.main import main

    cases, flag, keyword = mistakes
    # The logging of this process is the tests' own.
    monkeypatch.setattr(sys.modules["bpe_dask.cli.main"], "_configure_logging", lambda quiet, verbose: None)
    for make, argv, says, cli_says in cases:
        with pytest.raises(BpeDaskError) as error:
            make()
        message = str(error.value)
        assert not flag.search(message), message
        for fragment in says:
            assert fragment in message, (fragment, message)
        assert main(argv) != 0, argv
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("bpe-dask: error: "), (argv, lines)
        assert not keyword.search(lines[0]), lines[0]
        for fragment in cli_says:
            assert fragment in lines[0], (fragment, lines[0])


def test_show_progress_prints_where_no_logging_is_set_up(text_file, tmp_path):
    """``show_progress=True`` in a program that set up no logging, its stderr a file: the lines were
    logged at INFO, which Python's default shows not, so nothing showed (the CLI sets up logging)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys, bpe_dask\n"
        "bpe_dask.train(sys.argv[1], 300, sys.argv[2], ['<|endoftext|>'], workers=1, show_progress=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run([sys.executable, "-c", code, str(text_file), str(tmp_path / "tok")], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert any(line.startswith("count: 100%, ") and "1/1 partitions" in line for line in lines), done.stderr
    assert lines[-1].startswith("merge: 100%, 43/43 merges ["), done.stderr
