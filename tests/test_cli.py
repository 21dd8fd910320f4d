"""`bpe-dask` end to end as a user runs it: a subprocess, a real LocalCluster, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import commands
import corpus
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import timing

from bpe_dask.rules.reference import train as reference_train
from conftest import read_reference_merges, read_reference_vocab

EOT = "<|endoftext|>"
REPO = Path(__file__).resolve().parent.parent


def run(*args: str, cwd: Path, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    return commands.bpe_dask(*args, cwd=cwd, env=env, check=check)


def write_text(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.fixture(scope="module")
def big_corpus(tmp_path_factory) -> tuple[Path, str]:
    """~300 KB of Zipf-distributed words between special tokens: several 64 KiB partitions."""
    text = corpus.words_corpus(101, 60_000, vocab_words=2000) + corpus.mixed_corpus(102, 20)
    path = tmp_path_factory.mktemp("big") / "corpus.txt"
    return write_text(path, text), text


def test_train_on_two_workers_gives_the_oracle_merges(big_corpus, tmp_path):
    path, text = big_corpus
    assert path.stat().st_size > 4 * 65536
    vocab_size = 256 + 1 + 200
    done = run("train", str(path), "--vocab-size", str(vocab_size), "--special-token", EOT,
        "--out", "out", "--workers", "2", "--chunk-size", "65536", cwd=tmp_path)  # fmt: skip
    want_vocab, want_merges = reference_train([text], vocab_size, [EOT])
    assert read_reference_merges(tmp_path / "out" / "merges.txt") == want_merges
    vocab = read_reference_vocab(tmp_path / "out" / "vocab.json")
    assert vocab == want_vocab
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert "merge: 100%, 200/200 merges [" in done.stderr and "merges/s" in done.stderr  # progress, on stderr
    parts = report["partitions"]
    assert f", {parts}/{parts} partitions]" in done.stderr and "count: 100%, " in done.stderr
    assert report["input_bytes"] == path.stat().st_size
    assert report["partitions"] >= 4
    assert report["num_merges"] == 200
    assert report["unique_words"] > 1000
    assert report["peak_rss_bytes"] > 0
    assert set(report["timings"]) >= {"count", "merge", "total"}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "_SUCCESS", "compression.csv", "compression.png", "merges.txt", "report.json",
        "special_tokens_map.json", "tokenizer.json", "tokenizer.tiktoken", "tokenizer_config.json",
        "vocab.json"
    ]  # fmt: skip


def test_count_once_then_merge_at_several_sizes(big_corpus, tmp_path):
    path, text = big_corpus
    run("count", str(path), "--special-token", EOT, "--out", "counts.parquet",
        "--workers", "2", "--chunk-size", "100KiB", cwd=tmp_path)  # fmt: skip
    table = pq.read_table(tmp_path / "counts.parquet")
    assert table.schema.field("token").type == pa.binary()
    assert table.schema.field("count").type == pa.int64()
    assert table.column("count").to_pylist() and min(table.column("count").to_pylist()) >= 1
    assert len(set(table.column("token").to_pylist())) == table.num_rows
    _, want = reference_train([text], 256 + 1 + 150, [EOT])
    for extra in (30, 150):
        out = tmp_path / f"v{extra}"
        run("merge", "counts.parquet", "--vocab-size", str(256 + 1 + extra), "--special-token", EOT,
            "--out", str(out), cwd=tmp_path)  # fmt: skip
        assert read_reference_merges(out / "merges.txt") == want[:extra]


def test_config_file_supplies_options_and_flags_override_it(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_text(data / "a.txt", corpus.words_corpus(5, 3000))
    (tmp_path / "job.toml").write_text(
        'inputs = ["data/a.txt"]\nvocab_size = 300\nspecial_tokens = ["<|endoftext|>"]\n'
        'out = "result"\nchunk_size = "8KiB"\nworkers = 1\n'
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run("train", "--config", str(tmp_path / "job.toml"), "--vocab-size", "280", cwd=elsewhere)
    report = json.loads((tmp_path / "result" / "report.json").read_text())
    assert report["vocab_size"] == 280  # the flag beat the file
    assert report["partitions"] > 1  # chunk_size came from the file
    assert report["special_tokens"] == [EOT]


def test_empty_input_warns_and_writes_bytes_and_specials_only(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    done = run("train", "empty.txt", "--vocab-size", "1000", "--special-token", EOT,
               "--out", "out", "--workers", "1", cwd=tmp_path)  # fmt: skip
    assert "no words" in done.stderr
    assert "LocalCluster" not in done.stderr  # nothing to count: no cluster started
    vocab = json.loads((tmp_path / "out" / "vocab.json").read_text())
    assert len(vocab) == 257 and vocab[EOT] == 256
    assert (tmp_path / "out" / "merges.txt").read_text() == ""
    curve = (tmp_path / "out" / "compression.csv").read_text()
    assert curve == "vocab_size,tokens,bytes_per_token\n257,0,0\n"
    counted = run("count", "empty.txt", "--special-token", EOT, "--out", "counts.parquet", "--workers", "1",
                  cwd=tmp_path)  # fmt: skip
    assert "LocalCluster" not in counted.stderr
    assert pq.read_table(tmp_path / "counts.parquet").num_rows == 0
    merged = run("merge", "counts.parquet", "--vocab-size", "300", "--out", "tok", cwd=tmp_path)
    assert json.loads((tmp_path / "tok" / "report.json").read_text())["special_tokens"] == [EOT]
    assert "bpe-dask: the counts hold no words: the vocabulary is only the bytes" in merged.stderr


def test_verbose_shows_dasks_logging_and_the_default_does_not(tmp_path):
    write_text(tmp_path / "in.txt", "hello world " * 20)
    args = ("train", "in.txt", "--vocab-size", "260", "--out", "tok", "--workers", "1", "--overwrite")
    verbose = run(*args, "-v", cwd=tmp_path).stderr
    assert "distributed.scheduler - INFO" in verbose and "distributed.worker - INFO" in verbose
    assert "- DEBUG -" not in verbose  # Dask's debug lines dump raw messages, credentials and all
    assert "findfont" not in verbose  # drawing compression.png: matplotlib's font search stays out
    plain = run(*args, cwd=tmp_path).stderr
    assert "distributed." not in plain and "- DEBUG -" not in plain and "findfont" not in plain
    assert "bpe-dask: started a LocalCluster of 1 worker process (dashboard: http://127.0.0.1:" in plain


def test_more_workers_than_cores_are_capped_with_one_line_and_the_same_merges(big_corpus, tmp_path):
    """More worker processes than cores would only take turns (and share out the memory: 500 were each
    given 48 MiB, and Dask paused them all): as many start as run at once, and one line says so."""
    path, text = big_corpus
    cores = len(os.sched_getaffinity(0))
    args = ("train", str(path), "--vocab-size", "300", "--special-token", EOT, "--out", "tok", "--overwrite",
            "--chunk-size", "65536")  # fmt: skip
    done = run(*args, "--workers", str(3 * cores), cwd=tmp_path)
    started = f"{cores} worker process{'' if cores == 1 else 'es'}"
    assert [line for line in done.stderr.splitlines() if "asked for" in line] == [
        f"bpe-dask: {3 * cores} workers asked for on {cores} core{'' if cores == 1 else 's'}: starting "
        f"{started}, the most that run at once (the result is the same; bpe-dask.max-workers allows more)"
    ]
    assert f"bpe-dask: started a LocalCluster of {started} (dashboard: " in done.stderr
    assert read_reference_merges(tmp_path / "tok" / "merges.txt") == reference_train([text], 300, [EOT])[1]
    assert "asked for" not in run(*args, "--workers", str(cores), cwd=tmp_path).stderr


def test_the_bundled_sample_job_runs_and_compiles_nothing(tmp_path):
    """The sample is too small for compiled code anywhere (its tasks count with the regex module, its
    reduce sums with Arrow, its merge loop is Python's), so on a fresh install's empty numba cache it
    compiles nothing: no worker warms up what no task runs, and the client no merge loop."""
    command = [
        sys.executable,
        str(REPO / "jobs" / "train_sample.py"),
        "--out",
        str(tmp_path / "sample"),
        "-q",
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO), "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timing.seconds(300)
    )
    assert done.returncode == 0, done.stderr
    merges = (tmp_path / "sample" / "merges.txt").read_text(encoding="utf-8").splitlines()
    assert len(merges) == 1000 - 257
    assert merges[0] in {"Ġ t", "h e", "Ġ a"}
    assert not list((tmp_path / "numba").rglob("*.nb[ic]")), "the sample job compiled numba code"


# --- user errors: one line, non-zero exit, no traceback, nothing written -----------------------


def assert_user_error(done: subprocess.CompletedProcess, *fragments: str, code: int = 1) -> None:
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("bpe-dask: error: ")
    for fragment in fragments:
        assert fragment in lines[0]


def assert_nothing_written(tmp_path: Path, before: set[str]) -> None:
    assert {p.name for p in tmp_path.iterdir()} == before


@pytest.fixture
def sample(tmp_path) -> Path:
    return write_text(tmp_path / "in.txt", "hello world" + EOT + "hello there\n")


@pytest.mark.parametrize(
    ("args", "fragments", "code"),  # 2: options missing, unknown or not of their kind, as argparse exits
    [
        (["missing.txt", "--vocab-size", "300"], ["input not found", "missing.txt"], 1),
        (["nothing-*.txt", "--vocab-size", "300"], ["no input files match"], 1),
        (["in.txt", "--vocab-size", "256", "--special-token", EOT], ["vocab size 256", "257"], 1),
        (["in.txt", "--vocab-size", "0"], ["vocab-size"], 2),
        (["in.txt", "--vocab-size", "-5"], ["vocab-size"], 2),
        (["in.txt", "--vocab-size", "300", "--special-token", ""], ["special tokens must be non-empty"], 1),
        (
            ["in.txt", "--vocab-size", "300", "--special-token", EOT, "--special-token", EOT],
            ["given twice"],
            1,
        ),
        (["in.txt", "--vocab-size", "300", "--chunk-size", "lots"], ["not a size"], 2),
        (["in.txt", "--vocab-size", "300", "--chunk-size", "1.5"], ["not a whole number of bytes"], 2),
        (["in.txt", "--vocab-size", "300", "--config", "nope.toml"], ["config file not found"], 2),
        (["in.txt"], ["--vocab-size is required"], 2),
        (["in.txt", "--vocab-size", "300", "--special-token", "\udcff"], ["not valid Unicode"], 1),
        (["in.txt", "--vocab-size", "300", "--special-token", "a"], ["single byte"], 1),
        (["in.txt", "--vocab-size", "300", "--config", "."], ["cannot read config file"], 2),
        (["in.txt", "--vocab-size", "300", "--scheduler", "nowhere"], ["cannot reach the Dask scheduler"], 1),
        (["in.txt", "--vocab-size", "300", "--work-dir", "in.txt"], ["cannot use --work-dir"], 1),
        (["in.txt", "--vocab-size", "300", "--storage-options", "{oops"], ["not JSON"], 2),
        (["in.txt", "--vocab-size", "300", "--pattern", "gpt5"], ["unknown split pattern 'gpt5'"], 1),
        (
            ["in.txt", "--vocab-size", "300", "--special-token", EOT, "--eos-token", "<|eos|>"],
            ["--eos-token '<|eos|>' is not one of the special tokens (['<|endoftext|>'])"],
            1,
        ),
        (
            ["in.txt", "--vocab-size", "300", "--pattern", r"\S+|\s+", "--engine", "numba"],
            ["built-in patterns only"],
            1,
        ),
    ],
)
def test_bad_options_fail_in_one_line(sample, tmp_path, args, fragments, code):
    before = {p.name for p in tmp_path.iterdir()}
    done = run("train", *args, "--out", "out", "-q", cwd=tmp_path, check=False)
    assert_user_error(done, *fragments, code=code)
    assert_nothing_written(tmp_path, before)


def test_invalid_utf8_names_the_file_and_byte_offset(tmp_path):
    good = ("fine text " * 5000).encode()
    (tmp_path / "bad.txt").write_bytes(good + b"caf\xc3(" + good)
    done = run("train", "bad.txt", "--vocab-size", "300", "--out", "out", "--workers", "1",
               "--chunk-size", "16KiB", "-q", cwd=tmp_path, check=False)  # fmt: skip
    assert_user_error(done, "bad.txt", "invalid UTF-8", f"byte offset {len(good) + 3}")
    assert_nothing_written(tmp_path, {"bad.txt"})


def test_utf8_errors_replace_trains_on_the_text_with_u_fffd(tmp_path):
    good = corpus.words_corpus(11, 3000).encode()
    data = good + b"caf\xc3(" + good + b"\xff\xfe" + good
    (tmp_path / "bad.txt").write_bytes(data)
    vocab_size = 256 + 1 + 60
    run("train", "bad.txt", "--vocab-size", str(vocab_size), "--special-token", EOT, "--out", "out",
        "--workers", "1", "--chunk-size", "16KiB", "--utf8-errors", "replace", "-q",
        cwd=tmp_path)  # fmt: skip
    _, want_merges = reference_train([data.decode("utf-8", "replace")], vocab_size, [EOT])
    assert read_reference_merges(tmp_path / "out" / "merges.txt") == want_merges
    assert json.loads((tmp_path / "out" / "report.json").read_text())["utf8_errors"] == "replace"


SMALL_BLOCKS = {"DASK_BPE_DASK__UNCUT_LIMIT": "4MiB", "DASK_BPE_DASK__BLOCK_SIZE": "1MiB"}


def test_a_giant_pre_token_stops_in_one_line_with_the_file_and_offset(tmp_path):
    """5 MB of one letter, no whitespace, read in 1 MiB blocks: more than the 4 MiB a task may hold
    without a cut here (the limits set as a user sets them, in the environment; at the defaults, 64 MiB
    in 8 MiB blocks, the test took 40 s)."""
    with open(tmp_path / "giant.txt", "wb") as f:
        f.write(b"a few words, then ")
        for _ in range(5):
            f.write(b"x" * 2**20)
    done = run("count", "giant.txt", "--out", "counts.parquet", "--workers", "1", "-q",
               cwd=tmp_path, check=False, env=SMALL_BLOCKS)  # fmt: skip
    assert_user_error(done, "giant.txt", "no place to split the text in the 4 Mi characters after byte")
    assert_nothing_written(tmp_path, {"giant.txt"})


def test_existing_results_need_overwrite(sample, tmp_path):
    run("train", "in.txt", "--vocab-size", "260", "--out", "out", cwd=tmp_path)
    first = (tmp_path / "out" / "merges.txt").read_text()
    done = run("train", "in.txt", "--vocab-size", "265", "--out", "out", "-q",
               cwd=tmp_path, check=False)  # fmt: skip
    assert_user_error(done, "already holds results", "--overwrite")
    assert (tmp_path / "out" / "merges.txt").read_text() == first
    run(
        "train",
        "in.txt",
        "--vocab-size",
        "265",
        "--out",
        "out",
        "--overwrite",
        cwd=tmp_path,
    )
    assert len((tmp_path / "out" / "merges.txt").read_text().splitlines()) == 265 - 256
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out"]  # no staging left behind


def test_a_corrupt_archive_is_named(tmp_path):
    (tmp_path / "fake.txt.gz").write_bytes(b"this is not gzip data")
    done = run("train", "fake.txt.gz", "--vocab-size", "300", "--out", "out", "--workers", "1", "-q",
               cwd=tmp_path, check=False)  # fmt: skip
    assert_user_error(done, "cannot read", "fake.txt.gz")
    assert_nothing_written(tmp_path, {"fake.txt.gz"})


def test_count_refuses_a_directory_as_its_output(sample, tmp_path):
    (tmp_path / "somedir").mkdir()
    done = run("count", "in.txt", "--out", "somedir", "--overwrite", "-q", cwd=tmp_path, check=False)
    assert_user_error(done, "is a directory")
    assert list((tmp_path / "somedir").iterdir()) == []


def test_outputs_inside_an_input_directory_are_not_read_back(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_text(data / "a.txt", corpus.words_corpus(8, 2000))
    args = [
        "train",
        "data",
        "--vocab-size",
        "300",
        "--out",
        "data/tok",
        "--workers",
        "1",
        "--work-dir",
        "data/wd",
    ]
    run(*args, cwd=tmp_path)
    first = json.loads((data / "tok" / "report.json").read_text())
    run(*args, "--overwrite", cwd=tmp_path)
    second = json.loads((data / "tok" / "report.json").read_text())
    assert first["inputs"] == second["inputs"] and len(second["inputs"]) == 1
    assert second["partitions_reused"] == second["partitions"]  # the same shards, found again


def test_a_file_name_with_glob_characters_is_read_literally(tmp_path):
    write_text(tmp_path / "f[1].txt", "hello hello world")
    run("train", "f[1].txt", "--vocab-size", "260", "--out", "out", cwd=tmp_path)
    assert json.loads((tmp_path / "out" / "report.json").read_text())["input_bytes"] == 17


@pytest.mark.parametrize(
    ("table", "fragment"),
    [
        (pa.table({"token": pa.array([b"ab", None]), "count": pa.array([1, 2], pa.int64())}), "null"),
        (pa.table({"token": pa.array([b"ab", b"cd"]), "count": pa.array([1, 0], pa.int64())}), "positive"),
    ],
)
def test_merge_rejects_bad_counts(tmp_path, table, fragment):
    pq.write_table(table, tmp_path / "bad.parquet")
    done = run("merge", "bad.parquet", "--vocab-size", "300", "--out", "out", "-q", cwd=tmp_path, check=False)
    assert_user_error(done, fragment)
    assert not (tmp_path / "out").exists()


def test_merge_rejects_a_table_with_the_wrong_schema(tmp_path):
    pq.write_table(pa.table({"word": ["a"], "n": [1]}), tmp_path / "bad.parquet")
    done = run("merge", "bad.parquet", "--vocab-size", "300", "--out", "out", "-q", cwd=tmp_path, check=False)
    assert_user_error(done, "token (binary or large_binary)", "count (int64)")
    assert not (tmp_path / "out").exists()


def test_an_output_that_is_an_input_is_refused_or_left_out(tmp_path):
    """``encode in.txt --out in.txt --overwrite`` replaced the input with its own ids; and an earlier
    ``--out data/ids.bin`` in a folder of inputs was read back as text."""
    text = "hello world" + EOT + "hello there\n"
    write_text(tmp_path / "in.txt", text)
    run("train", "in.txt", "--vocab-size", "270", "--special-token", EOT, "--out", "tok",
        "-q", cwd=tmp_path)  # fmt: skip
    before = {p.name for p in tmp_path.iterdir()}
    for command in (["encode", "in.txt", "--tokenizer", "tok", "--out", "in.txt", "--format", "bin"],
                    ["count", "in.txt", "--out", "in.txt"]):  # fmt: skip
        done = run(*command, "--overwrite", cwd=tmp_path, check=False)
        assert_user_error(done, "in.txt is the job's own output (--out)")
        assert (tmp_path / "in.txt").read_text() == text
        assert_nothing_written(tmp_path, before)
    data = tmp_path / "data"
    data.mkdir()
    write_text(data / "a.txt", text)
    for _ in range(2):  # the second run's folder holds the first one's ids.bin
        run("encode", "data", "--tokenizer", "tok", "--out", "data/ids.bin", "--overwrite",
            "-q", cwd=tmp_path)  # fmt: skip
        report = json.loads((data / "ids.bin.json").read_text())
        assert report["inputs"] == [(data / "a.txt").as_uri()], report["inputs"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["train", "in.txt", "--vocab-size", "300", "--engine", "rust"],
            "train: argument --engine: invalid choice",
        ),
        (["merge", "--vocab-size", "300", "--out", "o"], "merge: the following arguments are required"),
        (
            ["encode", "in.txt", "--tokenizer", "t", "--out", "o", "--format", "zip"],
            "encode: argument --format",
        ),
    ],
    ids=["choice", "missing", "format"],
)
def test_a_commands_argument_errors_have_the_one_prefix(sample, args, said):
    """argparse's errors of a command began "bpe-dask train: error:", every other line "bpe-dask: error:"."""
    done = run(*args, cwd=sample.parent, check=False)
    assert_user_error(done, said, code=2)


# --- where a setting came from: DASK_SCHEDULER_ADDRESS, Dask's config ------------------------------


def free_address() -> str:
    """A tcp:// address on this machine where nothing listens."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def test_dask_scheduler_address_is_named_and_gives_way_to_a_flag(sample, tmp_path):
    """With DASK_SCHEDULER_ADDRESS exported, ``--workers 1`` was refused as two places to run, and the
    address, unreachable, was reported without naming the variable: where the job runs came from
    somewhere the user could not see."""
    address = free_address()
    env = {"DASK_SCHEDULER_ADDRESS": address}
    args = ["train", "in.txt", "--vocab-size", "270", "--special-token", EOT, "--out", "tok"]
    done = run(*args, cwd=tmp_path, check=False, env=env)
    lines = done.stderr.strip().splitlines()
    assert lines[0] == f"bpe-dask: connecting to {address} (from DASK_SCHEDULER_ADDRESS)", done.stderr
    assert lines[-1].startswith(f"bpe-dask: error: cannot reach the Dask scheduler at {address} (from "
                                "DASK_SCHEDULER_ADDRESS): "), done.stderr  # fmt: skip
    assert done.returncode == 1 and len(lines) == 2 and "Traceback" not in done.stderr
    done = run(*args, "--workers", "1", cwd=tmp_path, env=env)
    said = f"bpe-dask: DASK_SCHEDULER_ADDRESS ({address}) is not used: --workers says where to run"
    assert said in done.stderr.splitlines() and "LocalCluster of 1" in done.stderr, done.stderr
    want = reference_train([sample.read_text(encoding="utf-8")], 270, [EOT])[1]
    assert read_reference_merges(tmp_path / "tok" / "merges.txt") == want


def test_two_places_to_run_are_a_usage_error_and_a_flag_beats_the_config_file(sample, tmp_path):
    """``--scheduler`` with ``--workers`` exited 1, ``--scheduler-file`` with ``--scheduler`` 2: one
    malformed command line, one status. A config file's place gives way to a flag's."""
    address = free_address()
    (tmp_path / "job.toml").write_text("workers = 2\n")
    before = {p.name for p in tmp_path.iterdir()}
    base = ["train", "in.txt", "--vocab-size", "300", "--out", "tok", "-q"]
    done = run(*base, "--scheduler", address, "--workers", "2", cwd=tmp_path, check=False)
    assert_user_error(done, "--scheduler and --workers both say where to run: give one", code=2)
    done = run(*base, "--config", "job.toml", "--scheduler", address, cwd=tmp_path, check=False)
    assert_user_error(done, f"cannot reach the Dask scheduler at {address}: ", code=1)
    assert_nothing_written(tmp_path, before)


def test_a_bad_dask_setting_names_where_it_was_set(sample, tmp_path):
    """A setting of Dask's config is one line naming the setting and where it came from: the
    environment variable or the YAML file (the connect timeout was a traceback)."""
    (tmp_path / "dask").mkdir()
    (tmp_path / "dask" / "bpe.yaml").write_text("bpe-dask:\n  retries: -1\n")
    cases = [
        ({"DASK_BPE_DASK__BLOCK_SIZE": "lots"}, [],
         "bpe-dask.block-size (from DASK_BPE_DASK__BLOCK_SIZE) must be a positive size"),
        ({"DASK_CONFIG": str(tmp_path / "dask")}, [],
         f"bpe-dask.retries (from {tmp_path / 'dask' / 'bpe.yaml'}) must be a whole number, 0 or more"),
        ({"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "lots"}, ["--scheduler", free_address()],
         "distributed.comm.timeouts.connect (from DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT) must be a"),
    ]  # fmt: skip
    for env, args, said in cases:
        done = run("count", "in.txt", "--out", "c.parquet", "-q", *args, cwd=tmp_path, check=False, env=env)
        assert_user_error(done, said)
    assert not (tmp_path / "c.parquet").exists()


def test_the_python_merge_loop_says_once_that_it_starts(sample, tmp_path):
    from bpe_dask import count_words

    count_words(str(sample), [EOT], out=str(tmp_path / "counts.parquet"), in_process=True)
    done = run("merge", "counts.parquet", "--vocab-size", "270", "--out", "tok", "--engine", "python",
               cwd=tmp_path)  # fmt: skip
    said = [line for line in done.stderr.splitlines() if "merging" in line]
    assert said == ["bpe-dask: merging 4 words with the Python loop"], done.stderr


def test_vocabulary_sizes_in_thousands_and_the_tokenizers_place_said(sample, tmp_path):
    """`--vocab-size 32k` was refused; `train` ended with `done: {...}`, never saying where it wrote."""
    from conftest import CS336_DIR

    sample = CS336_DIR / "corpus.en"
    done = run("train", str(sample), "--vocab-size", "0.3k", "--special-token", EOT, "--out", "k",
               cwd=tmp_path)  # fmt: skip
    report = json.loads((tmp_path / "k" / "report.json").read_text())
    assert report["requested_vocab_size"] == 300
    import regex  # whose Unicode tables split the text, and their version (issue 41, item 11)

    assert report["unicode_tables"]["regex"] == regex.__version__
    assert report["unicode_tables"]["unicode"].count(".") == 2, report["unicode_tables"]
    assert f"wrote the tokenizer to {tmp_path / 'k'}: vocab.json, merges.txt" in done.stderr
    evaluated = run("evaluate", str(sample), "--tokenizer", "k", "--vocab-sizes", "257,0.28k", cwd=tmp_path)
    sizes = [line.split()[1] for line in evaluated.stdout.splitlines()[1:]]
    assert sizes == ["257", "280", "300"], evaluated.stdout
    with_ki = run("merge", "nothing.parquet", "--vocab-size", "1Ki", "--out", "m", check=False, cwd=tmp_path)
    assert "vocab-size" not in with_ki.stderr and "nothing.parquet" in with_ki.stderr  # 1Ki was taken
    bad = run("train", str(sample), "--vocab-size", "32kb", "--out", "x", check=False, cwd=tmp_path)
    assert bad.returncode == 2 and "'32kb'" in bad.stderr and "32Ki" in bad.stderr, bad.stderr


def test_special_tokens_joined_by_a_comma_are_one_token_with_a_warning(sample, tmp_path):
    """`--vocab-sizes` takes commas, `--special-token` does not: two tokens joined by one were taken
    as one without a word."""
    done = run("train", str(sample), "--vocab-size", "300", "--special-token", "<|endoftext|>,<|pad|>",
               "--out", "out", cwd=tmp_path)  # fmt: skip
    assert (
        "bpe-dask: special token '<|endoftext|>,<|pad|>' is one token, commas and all; for 2, repeat the "
        "flag: --special-token '<|endoftext|>' --special-token '<|pad|>'"
    ) in done.stderr.splitlines()
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["special_tokens"] == ["<|endoftext|>,<|pad|>"]


def test_a_small_input_is_counted_here_by_every_command_as_by_the_python_api(tmp_path):
    """`bpe-dask train` started a LocalCluster of two processes for a 130 KB corpus (3.0 s, where
    train_bpe counted it in-process in 1.1 s): where to count is now one rule for the command line
    and the API, small files with no cluster asked for counted here."""
    from bpe_dask import train_bpe
    from conftest import CS336_DIR

    sample = str(CS336_DIR / "corpus.en")
    done = run("train", sample, "--vocab-size", "400", "--special-token", EOT, "--out", "tok", cwd=tmp_path)
    assert "LocalCluster" not in done.stderr and "on 1 thread" in done.stderr, done.stderr
    assert read_reference_merges(tmp_path / "tok" / "merges.txt") == train_bpe(sample, 400, [EOT])[1]
    counted = run("count", sample, "--special-token", EOT, "--out", "counts.parquet", cwd=tmp_path)
    assert "LocalCluster" not in counted.stderr, counted.stderr
    merged = run("merge", "counts.parquet", "--vocab-size", "400", "--out", "tok2", cwd=tmp_path)
    assert "LocalCluster" not in merged.stderr
    assert (tmp_path / "tok2" / "merges.txt").read_text() == (tmp_path / "tok" / "merges.txt").read_text()


@pytest.mark.parametrize("kind", ["not UTF-8", "JSON Lines without the field", "Parquet without the column"])
def test_bad_input_is_refused_before_any_cluster_starts(tmp_path, kind):
    """A 22-byte file that is not UTF-8, JSON Lines with the wrong field, Parquet without the column:
    each was refused only once the cluster had started (3.1 s, 19.4 s on a busy machine)."""
    if kind == "not UTF-8":
        path, said = write_text(tmp_path / "in.txt", "x" * 200_000), "in.txt: invalid UTF-8 at byte offset 6"
        path.write_bytes(b"hello \xff world" + path.read_bytes())
    elif kind == "JSON Lines without the field":
        path = write_text(tmp_path / "in.jsonl", '{"body": "hello"}\n' * 20_000)
        said = "in.jsonl: the line at byte offset 0: no field 'text'"
    else:
        path = tmp_path / "in.parquet"
        pq.write_table(pa.table({"body": ["hello world"] * 20_000}), path)
        said = "in.parquet: no column 'text' (columns: body; --text-column names it)"
    done = run("train", str(path), "--vocab-size", "300", "--out", "out", "--workers", "2", check=False,
               cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert said in lines[-1] and lines[-1].startswith("bpe-dask: error: "), done.stderr
    assert "LocalCluster" not in done.stderr and not (tmp_path / "out").exists()
