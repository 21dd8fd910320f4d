"""What a new user and a careful reviewer hit: each case of the hardening issue, as a user meets it."""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import commands
import corpus
import pytest
import timing

import bpe_dask
from bpe_dask import BpeDaskError, Tokenizer, count_words, train_bpe
from bpe_dask.stages import count as count_stage
from conftest import read_reference_merges

EOT = "<|endoftext|>"
REPO = Path(__file__).resolve().parent.parent


def run(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return commands.bpe_dask(*args, cwd=cwd, env=env)


def one_line_error(done: subprocess.CompletedProcess, *fragments: str, code: int = 1) -> str:
    assert done.returncode == code, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpe-dask: error: "), done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def text_file(tmp_path) -> Path:
    path = tmp_path / "in.txt"
    path.write_text(corpus.words_corpus(3, 4000), encoding="utf-8")
    return path


# --- 1. an output that cannot be written is found before any work ------------------------------


@pytest.mark.parametrize("command", ["train", "count", "merge", "encode"])
@pytest.mark.parametrize("out", ["in.txt/out", "/proc/bpe-dask-test/out"])
def test_an_unwritable_out_is_one_line_before_any_work(text_file, tmp_path, command, out):
    counts, tok = tmp_path / "counts.parquet", tmp_path / "tok"
    if command in ("merge", "encode"):  # their inputs, made here: no cluster is what they test
        count_words(text_file, [EOT], out=str(counts), in_process=True)
        Tokenizer(*train_bpe(text_file, 300, [EOT], in_process=True), [EOT]).save(tok)
    before = sorted(p.name for p in tmp_path.iterdir())
    args = {
        "train": ["train", "in.txt", "--vocab-size", "300"],
        "count": ["count", "in.txt"],
        "merge": ["merge", str(counts), "--vocab-size", "300"],
        "encode": ["encode", "in.txt", "--tokenizer", str(tok)],
    }[command]
    started = time.monotonic()
    done = (
        run(*args, "--out", out, "--workers", "1", cwd=tmp_path)
        if command != "merge"
        else run(*args, "--out", out, cwd=tmp_path)
    )
    one_line_error(done, "cannot write the output", out)
    assert time.monotonic() - started < timing.seconds(15)  # no cluster was started, nothing was counted
    assert "LocalCluster" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_the_probe_leaves_no_folders_behind(text_file, tmp_path):
    done = run("count", "in.txt", "--out", "new/folders/counts.parquet", "--workers", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "new" / "folders" / "counts.parquet").exists()
    assert not [p for p in (tmp_path / "new" / "folders").iterdir() if p.name.startswith(".")]


# --- 2. the pre-token cache is bounded by the characters it holds ------------------------------


def test_the_pretoken_cache_holds_no_long_chunks_and_stays_within_its_budget(monkeypatch):
    from bpe_dask.rules import pretokenize

    monkeypatch.setattr(pretokenize, "CACHE_CHARS", 10_000)
    rules = pretokenize.Pretokenizer([EOT])
    minified = "".join(f'{{"id":{i},"name":"user{i}","tags":["a","b"]}},' for i in range(20_000))
    words = " ".join(f"w{i}" for i in range(50_000))
    for text in (minified + "\n" + words, words, minified):
        rules.count(text)
        held = sum(len(chunk) for chunk in rules._pretokens_of)
        assert held <= pretokenize.CACHE_CHARS + pretokenize.CACHED_CHUNK_MAX
        assert max(len(chunk) for chunk in rules._pretokens_of) <= pretokenize.CACHED_CHUNK_MAX


# --- 3. no secret in a repr, a log line, an error message or report.json -----------------------

SECRET = "wJalrXUtnFEMI-K7MDENG-not-a-real-secret"


def test_storage_options_never_show(text_file, tmp_path):
    options = json.dumps({"key": "AKIA-not-a-key", "secret": SECRET})
    done = run("train", "in.txt", "--vocab-size", "300", "--out", "tok", "--workers", "1",
               "--storage-options", options, "-v", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stderr and SECRET not in done.stdout
    assert SECRET not in (tmp_path / "tok" / "report.json").read_text()
    result = count_words(text_file, [EOT], storage_options={"secret": SECRET})
    assert SECRET not in repr(result) and SECRET not in repr(
        bpe_dask.JobOptions.of(storage_options={"x": SECRET})
    )


# --- 4. shards made by another version of the counting code are not reused ---------------------


def test_a_new_counting_version_counts_again(client, text_file, tmp_path, monkeypatch):

    work = str(tmp_path / "work")
    first = count_words(text_file, [EOT], client=client, work_dir=work, chunk_size=4096)
    assert (
        count_words(text_file, [EOT], client=client, work_dir=work, chunk_size=4096).partitions_reused
        == first.partitions
    )

    def set_version(version: int) -> None:  # the workers name the shards they write
        count_stage.COUNTING_VERSION = version

    old = count_stage.COUNTING_VERSION
    client.run(set_version, old + 1)
    monkeypatch.setattr(count_stage, "COUNTING_VERSION", old + 1)
    try:
        again = count_words(text_file, [EOT], client=client, work_dir=work, chunk_size=4096)
    finally:
        client.run(set_version, old)
    assert again.partitions_reused == 0
    assert again.table().sort_by("token").equals(first.table().sort_by("token"))


# --- 5. partitions sized for the cluster; a tiny chunk size is named ---------------------------


def test_without_a_chunk_size_every_worker_thread_gets_partitions(client, tmp_path):
    path = tmp_path / "big.txt"
    path.write_text(corpus.words_corpus(5, 1_200_000, vocab_words=3000), encoding="utf-8")  # ~6 MB
    threads = sum(w["nthreads"] for w in client.scheduler_info()["workers"].values())
    result = count_words(path, [EOT], client=client)
    assert result.partitions >= 2 * threads
    want = count_words(path, [EOT], in_process=True).table()
    assert result.table().sort_by("token").equals(want.sort_by("token"))


def test_a_tiny_chunk_size_is_named_in_a_warning(tmp_path):
    # 1 KB, not the 20 KB of text_file: each partition is a task the job runs to its end
    (tmp_path / "in.txt").write_text(corpus.words_corpus(3, 200), encoding="utf-8")
    done = run("count", "in.txt", "--out", "c.parquet", "--chunk-size", "64", "--workers", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert re.search(r"--chunk-size 64 is 64 bytes, so [\d,]+ partitions.*64MiB", done.stderr), done.stderr


# --- 6. a vocabulary the data cannot fill is reported --------------------------------------------


def test_a_vocabulary_the_data_cannot_fill_is_a_warning_with_both_sizes(tmp_path):
    (tmp_path / "small.txt").write_text("the cat sat on the mat" + EOT + "a dog", encoding="utf-8")
    done = run("train", "small.txt", "--vocab-size", "10000", "--special-token", EOT, "--out", "tok",
               cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    vocab = len(json.loads((tmp_path / "tok" / "vocab.json").read_text()))
    assert f"the vocabulary has {vocab:,} tokens, not the 10,000 asked for" in done.stderr


# --- 7. merge takes the special tokens the counts were made with --------------------------------


def test_merge_uses_the_recorded_special_tokens_and_refuses_others(text_file, tmp_path):
    assert run("count", "in.txt", "--special-token", EOT, "--out", "counts.parquet", "--workers", "1",
               cwd=tmp_path).returncode == 0  # fmt: skip
    done = run("merge", "counts.parquet", "--vocab-size", "300", "--out", "tok", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    vocab = json.loads((tmp_path / "tok" / "vocab.json").read_text())
    assert vocab[EOT] == 256
    want = train_bpe(text_file, 300, [EOT], in_process=True)[1]
    assert read_reference_merges(tmp_path / "tok" / "merges.txt") == want
    other = run("merge", "counts.parquet", "--vocab-size", "300", "--out", "tok2", "--special-token", "<s>",
                cwd=tmp_path)  # fmt: skip
    one_line_error(other, "was counted with special tokens ['<|endoftext|>']", "<s>")
    assert not (tmp_path / "tok2").exists()
    other = run("merge", "counts.parquet", "--vocab-size", "300", "--out", "tok2", "--pattern", "gpt4",
                cwd=tmp_path)  # fmt: skip
    one_line_error(other, "was counted with split pattern 'gpt2', not 'gpt4'")
    assert not (tmp_path / "tok2").exists()


# --- 8. one validation, every entry point --------------------------------------------------------


def test_an_empty_special_token_is_refused_everywhere(tmp_path, text_file):
    vocab = {i: bytes([i]) for i in range(256)}
    with pytest.raises(BpeDaskError, match="non-empty"):
        Tokenizer(vocab, [], [""])
    Tokenizer(vocab, [], [EOT]).save(tmp_path / "tok")
    done = run("encode", "in.txt", "--tokenizer", "tok", "--special-token", "", "--out", "ids", cwd=tmp_path)
    one_line_error(done, "non-empty")
    with pytest.raises(BpeDaskError, match="merge_on must be auto, client or worker"):
        bpe_dask.train(text_file, 300, str(tmp_path / "x"), merge_on="moon")


def test_count_words_refuses_an_existing_out_like_the_cli(tmp_path, text_file):
    (tmp_path / "counts.parquet").write_bytes(b"precious")
    with pytest.raises(BpeDaskError, match="already exists; pass overwrite=True"):
        count_words(text_file, out=str(tmp_path / "counts.parquet"), workers=1)
    assert (tmp_path / "counts.parquet").read_bytes() == b"precious"


def test_a_special_token_holding_u_fffd_is_refused_with_replacement(tmp_path, text_file):
    with pytest.raises(BpeDaskError, match="U\\+FFFD"):
        train_bpe(text_file, 300, ["<\ufffd>"], utf8_errors="replace")
    Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<\ufffd>"]).save(tmp_path / "tok")
    done = run(
        "encode", "in.txt", "--tokenizer", "tok", "--utf8-errors", "replace", "--out", "ids", cwd=tmp_path
    )
    one_line_error(done, "U+FFFD")


# --- 9. where to run: one place; an unreachable scheduler fails fast -----------------------------


def test_scheduler_and_workers_together_are_refused(tmp_path, text_file):
    done = run("train", "in.txt", "--vocab-size", "300", "--out", "tok", "--workers", "2",
               "--scheduler", "tcp://127.0.0.1:8786", cwd=tmp_path)  # fmt: skip
    one_line_error(done, "--scheduler and --workers both say where to run", code=2)  # a malformed command


def test_a_refused_connection_to_the_scheduler_fails_at_once(tmp_path, text_file):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    # -q: without it, "connecting to ..." comes first
    address = f"tcp://127.0.0.1:{port}"
    # Dask alone would retry for its connect timeout: one well beyond the bound (which grows with the
    # machine's load, as Python's start does), so that only failing at once passes.
    bound = timing.seconds(8)
    retry = {"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": f"{2 * bound:g}s"}
    done = run(
        "train", "in.txt", "--vocab-size", "300", "--out", "tok", "--scheduler", address, "-q", cwd=tmp_path,
        env=retry,
    )  # fmt: skip
    one_line_error(done, "cannot reach the Dask scheduler", str(port))
    assert time.monotonic() - started < bound


# --- 10. 11. progress in logs, and a time left worth reading--------------------------------------


def test_counting_progress_reaches_a_log_that_is_not_a_terminal(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text(corpus.words_corpus(9, 200_000), encoding="utf-8")
    done = run(
        "count", "in.txt", "--out", "c.parquet", "--workers", "2", "--chunk-size", "100KiB", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    ended = r"count: 100%, ([\d.]+\w?)/([\d.]+\w?)B \[[^\]]*B/s, (\d+)/(\d+) partitions\]"
    report = re.search(ended, done.stderr)
    assert report and report[3] == report[4] and int(report[3]) > 5, done.stderr
    assert report[1] == report[2]


def test_the_merge_eta_follows_the_recent_rate(monkeypatch):
    """Merges get cheaper as they go (merge i takes 1/sqrt(i+1) of the first one's time): the time left
    halfway is that of the recent pace (tqdm's moving average), not of the pace since the start."""
    import tqdm.std

    from bpe_dask.cluster.progress import MergeProgress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    clock = [0.0]
    monkeypatch.setattr(tqdm.std, "time", lambda: clock[0])
    total = 10_000
    progress = MergeProgress(total, stream=Terminal())
    cost = [0.5 / (i + 1) ** 0.5 for i in range(total)]
    for done in range(1, total // 2 + 1):
        clock[0] += cost[done - 1]
        if done % 50 == 0:  # as ``every`` calls it
            progress(done)
    minutes, seconds = re.search(r"<(\d+):(\d+)", str(progress.bar)).groups()
    eta, actual = 60 * int(minutes) + int(seconds), sum(cost[total // 2 :])
    assert actual / 1.5 <= eta <= actual * 1.5, (eta, actual, str(progress.bar))


# --- 12. 13. the dashboard link works or is not shown; Dask's memory warnings get through ------


def test_no_dashboard_link_without_bokeh(tmp_path, text_file):
    from bpe_dask.cluster.client import has_bokeh

    done = run("train", "in.txt", "--vocab-size", "300", "--out", "tok", "--workers", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert ("dashboard" in done.stderr) == has_bokeh(), done.stderr


def test_dask_memory_warnings_reach_the_user_and_its_errors_do_not(tmp_path):
    script = """
import logging
from bpe_dask.cli.main import _configure_logging
from bpe_dask.cluster.client import dask_client
from bpe_dask.cluster.preflight import check_workers
_configure_logging(quiet=False, verbose=False)
with dask_client(workers=1) as client:
    check_workers(client, embedded=True)
    def worker_logs():
        logging.getLogger("distributed.worker.memory").warning("Worker is at 85% memory usage (worker)")
        logging.getLogger("distributed.worker").error("a long traceback (worker)")
    client.run(worker_logs)
logging.getLogger("distributed.nanny.memory").warning("Worker exceeded 95% memory budget (client)")
logging.getLogger("distributed.core").error("a long traceback (client)")
logging.getLogger("distributed.worker.state_machine").warning("shutdown noise (client)")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=timing.seconds(120),
                          env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Worker is at 85% memory usage (worker)" in done.stderr
    assert "Worker exceeded 95% memory budget (client)" in done.stderr
    assert "traceback" not in done.stderr and "noise" not in done.stderr


# --- 14. help and wording ------------------------------------------------------------------------


def test_bare_bpe_dask_lists_the_commands(tmp_path):
    done = run(cwd=tmp_path)
    assert done.returncode == 2
    for command in ("train", "count", "merge", "encode"):
        assert re.search(rf"^\s+{command}\s+\w", done.stderr, re.MULTILINE), done.stderr


def test_help_explains_every_option_and_what_is_required(tmp_path):
    import argparse

    from bpe_dask.cli.main import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in commands.choices.items():
        for action in parser._actions:
            assert action.help, (name, action.dest)  # every option and argument says what it is
        text = run(name, "--help", cwd=tmp_path).stdout
        if name == "warm-up":  # fills numba's cache here: it requires nothing
            assert "required (" not in text, text
            continue
        required = text.split("required (on the command line or in --config):")[1].split("\n\n")[0]
        assert "INPUT" in required or "COUNTS" in required, text
        assert "--out" in required or name == "evaluate", text  # evaluate prints its table without --out
        assert text.index("required (") < text.index("\n  --overwrite"), text  # what is required comes first
    assert "--format" in run("encode", "--help", cwd=tmp_path).stdout


def test_messages_say_each_thing_once_and_count_in_words(tmp_path, text_file):
    zero = run("train", "in.txt", "--vocab-size", "300", "--out", "t", "--workers", "0", cwd=tmp_path)
    one_line_error(zero, "--workers: must be a positive number, got 0", code=2)  # a usage error
    done = run("train", "in.txt", "--vocab-size", "300", "--out", "tok", "--workers", "1", "--chunk-size",
               "1GiB", cwd=tmp_path)  # fmt: skip
    assert "1 input file, " in done.stderr and "1 partition of" in done.stderr
    summary = json.loads(done.stderr.split("done: ", 1)[1])
    assert all(len(str(v).split(".")[-1]) <= 2 for v in summary["timings"].values())


# --- 15. the README and the quick start ------------------------------------------------------------


@pytest.mark.parametrize("page", ["README.md", "docs/guide/quickstart.md"])
def test_the_environment_is_active_before_its_commands_are_used_bare(page):
    """Before `. .venv/bin/activate`, commands are `.venv/bin/...`; the guide's other pages assume
    the environment the quick start activated (and say so)."""
    text = (REPO / page).read_text(encoding="utf-8")
    activated = text.index(". .venv/bin/activate")
    for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL):
        at = text.index(block)
        bare = re.search(r"(^|[;&|(]\s*)(bpe-dask|python) ", block, re.MULTILINE)
        if bare and not block.startswith(". .venv/bin/activate"):
            assert at > activated, block
    assert re.search(r"take about \d+\s+minutes|took \d+\s+min", text)  # the suite's time, measured


def test_the_quick_start_says_where_the_corpora_are():
    quickstart = (REPO / "docs" / "guide" / "quickstart.md").read_text(encoding="utf-8")
    assert "huggingface.co/datasets/roneneldan/TinyStories" in quickstart
    assert "owt_train.txt" in quickstart
    assert "assume the virtual environment is active" in quickstart
