"""Every output is a transaction: two jobs racing for one output, failed streams, the .bin's sidecar.

The races are real: two `bpe-dask` processes held at their commit step by a barrier of files, then
let go together, locally and on an S3 server (moto) on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import ClassVar

import corpus
import numpy as np
import pytest
import servers
import timing

from bpe_dask import Tokenizer, train_bpe
from bpe_dask.io.publish import OutputExists, output_file, publish_directory
from bpe_dask.io.storage import Store
from bpe_dask.stages.encode import EncodedShard, stream_shards

EOT = "<|endoftext|>"
REPO = Path(__file__).resolve().parent.parent

# Holds publishing's commit step (``BPE_RACE_HOLD``) in every process of a racer, its cluster's
# workers included (they inherit the environment), until every racer has reached it.
HOOK = """
import os
if os.environ.get("BPE_RACE_HOLD"):
    import time
    import bpe_dask.io.publish as publish
    me, everyone = os.environ["BPE_RACE_ME"], os.environ["BPE_RACE_ALL"].split(",")
    real = getattr(publish, os.environ["BPE_RACE_HOLD"])
    def held(*args, **kwargs):
        open(me, "w").close()
        deadline = time.monotonic() + float(os.environ["BPE_RACE_SECONDS"])
        while not all(os.path.exists(name) for name in everyone) and time.monotonic() < deadline:
            time.sleep(0.005)
        return real(*args, **kwargs)
    setattr(publish, os.environ["BPE_RACE_HOLD"], held)
"""


def race(hold: str, commands: list[list[str]], cwd: Path, env: dict | None = None) -> list:
    hook = cwd.parent / f"{cwd.name}-hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    ready = [str(hook / f"ready-{i}") for i in range(len(commands))]
    env = {**(env or os.environ), "PYTHONPATH": f"{hook}:{REPO}", "BPE_RACE_HOLD": hold,
           "BPE_RACE_ALL": ",".join(ready), "BPE_RACE_SECONDS": str(timing.seconds(60))}  # fmt: skip
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "bpe_dask", *command],
            cwd=cwd,
            env={**env, "BPE_RACE_ME": me},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for me, command in zip(ready, commands, strict=True)
    ]
    done = [(p.wait(timeout=timing.seconds(300)), p.stderr.read()) for p in procs]
    assert all(os.path.exists(name) for name in ready), f"a racer never reached the commit step: {done}"
    return done


def one_won(done: list) -> int:
    """Exactly one racer exited 0; the others exited 1 with one line. The winner's index."""
    codes = [code for code, _ in done]
    assert sorted(codes) == [0] + [1] * (len(done) - 1), done
    for code, stderr in done:
        if code == 1:
            lines = stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("bpe-dask: error: "), stderr
            assert "--overwrite" in lines[0] or "publishing" in lines[0], stderr
            assert "Traceback" not in stderr
    return codes.index(0)


@pytest.fixture(scope="module")
def counts(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("counts")
    (folder / "in.txt").write_text(corpus.words_corpus(21, 20_000), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "bpe_dask", "count", "in.txt", "--out", "counts.parquet",
         "--special-token", EOT, "--workers", "1", "-q"],
        cwd=folder, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=timing.seconds(300),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return folder / "counts.parquet"


def merges_in(folder: Path) -> int:
    return len((folder / "merges.txt").read_text(encoding="utf-8").splitlines())


def test_two_jobs_publishing_one_local_directory_at_once(counts, tmp_path):
    """Both pass the check at the start; at the commit one wins, the other says so in one line, and
    nothing nests inside the output or is left beside it."""
    sizes = ["300", "320"]
    done = race("_rename_into_place", [
        ["merge", str(counts), "--vocab-size", size, "--out", "tok", "-q"] for size in sizes
    ], tmp_path)  # fmt: skip
    winner = one_won(done)
    out = tmp_path / "tok"
    assert merges_in(out) == int(sizes[winner]) - 257  # the winner's files, whole
    assert sorted(p.name for p in out.iterdir()) == [
        "_SUCCESS", "compression.csv", "compression.png", "merges.txt", "report.json",
        "special_tokens_map.json", "tokenizer.json", "tokenizer.tiktoken", "tokenizer_config.json",
        "vocab.json",
    ]  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tok"]
    # ... and nothing blocks a later run
    again = subprocess.run(
        [sys.executable, "-m", "bpe_dask", "merge", str(counts), "--vocab-size", "340", "--out", "tok",
         "--overwrite", "-q"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=timing.seconds(300),
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert merges_in(out) == 340 - 257
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tok"]


def test_two_jobs_with_overwrite_both_succeed_and_the_output_is_one_of_them(counts, tmp_path):
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "merges.txt").write_text("")  # an earlier result, replaced
    done = race("_rename_into_place", [
        ["merge", str(counts), "--vocab-size", size, "--out", "tok", "--overwrite", "-q"]
        for size in ("300", "320")
    ], tmp_path)  # fmt: skip
    assert [code for code, _ in done] == [0, 0], done
    assert merges_in(tmp_path / "tok") in (300 - 257, 320 - 257)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tok"]


def another_job_at(moment: str, monkeypatch, tmp_path: Path) -> Path:
    """Let another ``--overwrite`` job act at ``moment`` of this one's commit (a first ``os.rename``
    of ``what`` its arguments start with): "move aside", it moves the old result aside just before
    we do; "commit", its result lands just after our move aside (the staged directory's rename, not
    its lock file's). Gives where the old result went."""
    real_rename, elsewhere, acted = os.rename, tmp_path / "theirs-retired", []

    def rename(src, dst):
        if not acted and moment == "move aside" and str(src).endswith("/tok"):
            acted.append(real_rename(src, elsewhere))
        if not acted and moment == "commit" and Path(src).parent == tmp_path and ".partial-" in str(src):
            (tmp_path / "theirs").mkdir()
            (tmp_path / "theirs" / "merges.txt").write_text("theirs\n")
            acted.append(real_rename(tmp_path / "theirs", tmp_path / "tok"))
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    return elsewhere


@pytest.mark.parametrize("moment", ["move aside", "commit"])
def test_an_overwrite_commit_another_job_overtakes_still_publishes_whole(monkeypatch, tmp_path, moment):
    """Seen under load: two ``--overwrite`` jobs committing one directory at once, one moved the old
    result aside before the other could (``FileNotFoundError`` and a traceback); or one's result
    landed between the other's move and its commit (``already holds results``, despite --overwrite)."""
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "merges.txt").write_text("old\n")
    another_job_at(moment, monkeypatch, tmp_path)
    publish_directory(str(tmp_path / "tok"), {"merges.txt": "ours\n"}, overwrite=True)
    assert (tmp_path / "tok" / "merges.txt").read_text() == "ours\n"
    assert (tmp_path / "tok" / "_SUCCESS").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # nothing of ours left


def test_two_count_jobs_writing_one_file(tmp_path):
    (tmp_path / "in.txt").write_text(corpus.words_corpus(22, 5_000), encoding="utf-8")
    done = race("commit_local_file", [
        ["count", "in.txt", "--out", "counts.parquet", "--workers", "1", "--special-token", EOT, "-q"],
        ["count", "in.txt", "--out", "counts.parquet", "--workers", "1", "-q"],
    ], tmp_path)  # fmt: skip
    one_won(done)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.parquet", "in.txt"]


def test_an_exclusive_local_file_is_refused_at_commit_and_leaves_no_partial(tmp_path):
    target = tmp_path / "ids.bin"
    target.write_bytes(b"earlier")
    with pytest.raises(OutputExists, match="already holds results"), output_file(str(target)) as f:
        f.write(b"later")
    assert target.read_bytes() == b"earlier"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ids.bin"]
    with output_file(str(target), overwrite=True) as f:
        f.write(b"later")
    assert target.read_bytes() == b"later"


def test_a_local_directory_is_never_nested(tmp_path):
    """``shutil.move`` onto an existing directory moves the source inside it: the commit must not."""
    out = tmp_path / "tok"
    publish_directory(str(out), {"a.txt": "first"}, overwrite=False)
    with pytest.raises(OutputExists):
        publish_directory(str(out), {"a.txt": "second"}, overwrite=False)
    assert sorted(p.name for p in out.iterdir()) == ["_SUCCESS", "a.txt"]
    assert (out / "a.txt").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tok"]


# --- object storage ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3(s3):
    """conftest's S3 filesystem (a moto server's), with this module's bucket."""
    s3.mkdir("txn")
    return s3


def s3_env(endpoint: str) -> dict:
    return {**servers.env_without_aws(), **servers.S3_ENV, "AWS_ENDPOINT_URL": endpoint}


def test_two_jobs_publishing_one_s3_directory_at_once(counts, s3, endpoint, tmp_path):
    done = race("_copy_into_place", [
        ["merge", str(counts), "--vocab-size", size, "--out", "s3://txn/tok", "-q"] for size in ("300", "320")
    ], tmp_path, s3_env(endpoint))  # fmt: skip
    winner = one_won(done)
    s3.invalidate_cache()
    assert len(s3.cat_file("txn/tok/merges.txt").decode().splitlines()) == [300, 320][winner] - 257
    assert sorted(p.rsplit("/", 1)[-1] for p in s3.ls("txn/tok")) == [
        "_SUCCESS", "compression.csv", "compression.png", "merges.txt", "report.json",
        "special_tokens_map.json", "tokenizer.json", "tokenizer.tiktoken", "tokenizer_config.json",
        "vocab.json",
    ]  # fmt: skip
    assert sorted(p.rsplit("/", 1)[-1] for p in s3.ls("txn")) == ["tok"]  # no lock, no staging left


def options(endpoint: str) -> Store:
    return Store({"key": "testing", "secret": "testing", "endpoint_url": endpoint})


def test_a_failed_stream_to_s3_leaves_no_object_and_no_upload(s3, endpoint, tmp_path):
    """fsspec completes a multipart upload on ``close()`` even while an exception goes by: the
    stream must abort it instead."""
    good = tmp_path / "good.npy"
    np.save(good, np.arange(3_000_000, dtype=np.uint16))  # several 5 MiB parts
    shards = [
        EncodedShard(str(good), "in", 0, 1, 3_000_000, False),
        EncodedShard(str(tmp_path / "gone.npy"), "in", 1, 2, 10, False),
    ]
    with pytest.raises(FileNotFoundError):
        stream_shards(shards, "s3://txn/failed.bin", options(endpoint))
    s3.invalidate_cache()
    assert not s3.exists("txn/failed.bin")
    assert s3.call_s3("list_multipart_uploads", Bucket="txn").get("Uploads", []) == []
    # and an exclusive stream onto an existing object is refused when it would commit
    s3.pipe_file("txn/kept.bin", b"earlier")
    with pytest.raises(OutputExists):
        stream_shards(shards[:1], "s3://txn/kept.bin", options(endpoint))
    assert s3.cat_file("txn/kept.bin") == b"earlier"


def test_encode_to_a_bin_twice_without_overwrite_then_with(tmp_path):
    (tmp_path / "in.txt").write_text(corpus.words_corpus(23, 20_000), encoding="utf-8")
    vocab, merges = train_bpe(tmp_path / "in.txt", 300, [EOT], in_process=True)
    Tokenizer(vocab, merges, [EOT]).save(tmp_path / "tok")
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def encode(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "bpe_dask", "encode", "in.txt", "--tokenizer", "tok", "--out",
             "ids.bin", "--workers", "1", "-q", *extra],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timing.seconds(300),
        )  # fmt: skip

    first = encode()
    assert first.returncode == 0, first.stderr
    ids = np.fromfile(tmp_path / "ids.bin", np.uint16)
    sidecar = json.loads((tmp_path / "ids.bin.json").read_text())
    assert sidecar["tokens"] == len(ids) and ids.tolist() == Tokenizer(vocab, merges, [EOT]).encode(
        (tmp_path / "in.txt").read_bytes().decode()
    )
    time.sleep(0.01)
    refused = encode()
    assert refused.returncode == 1 and "already" in refused.stderr and "--overwrite" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert encode("--overwrite").returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ids.bin", "ids.bin.json", "in.txt", "tok"]


def test_a_bin_job_that_loses_the_race_leaves_the_winners_sidecar(tmp_path, monkeypatch):
    """Job B looked at the output before job A committed it (the look is only a courtesy), and reaches
    its own commit after A is done: it removed A's ``ids.bin.json``, then failed, and left A's
    ``.bin`` undescribed. Without ``--overwrite`` nothing of A's may go."""
    from distributed import Client

    import bpe_dask.jobs.ids_output as encode_job
    from bpe_dask import encode

    texts = {name: corpus.words_corpus(seed, 5_000) for name, seed in (("a.txt", 31), ("b.txt", 32))}
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    vocab, merges = train_bpe(tmp_path / "a.txt", 300, [EOT], in_process=True)
    tokenizer = Tokenizer(vocab, merges, [EOT])
    out = str(tmp_path / "ids.bin")
    with Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=":0") as client:
        won = encode(str(tmp_path / "a.txt"), tokenizer, out, client=client)
        monkeypatch.setattr(encode_job, "check_output_file", lambda *args, **kwargs: None)  # B looked before
        with pytest.raises(OutputExists):
            encode(str(tmp_path / "b.txt"), tokenizer, out, client=client)
    sidecar = json.loads((tmp_path / "ids.bin.json").read_text())
    assert sidecar["tokens"] == won["tokens"] and sidecar["inputs"] == won["inputs"]
    assert np.fromfile(out, np.uint16).tolist() == tokenizer.encode(texts["a.txt"])


class Streaming:
    """The .bin's streaming task, watched from the test (the worker is a thread of this process)."""

    started = threading.Event()
    ended = threading.Event()
    real: ClassVar[dict] = {}

    @staticmethod
    def slow_shard_ids(shard, store):
        Streaming.started.set()
        time.sleep(0.5)
        return Streaming.real["ids"](shard, store)

    @staticmethod
    def stream(*args, **kwargs):
        try:
            return Streaming.real["stream"](*args, **kwargs)
        finally:
            Streaming.ended.set()


def test_a_bin_streamed_on_a_users_cluster_is_not_committed_after_ctrl_c(tmp_path, monkeypatch):
    """On a cluster the job does not own, cancelling does not stop the task that streams the shards
    into the .bin: it went on, and committed the .bin seconds after the job had stopped (with
    ``--overwrite``, replacing the previous one). It now hears that the job stopped, and commits
    nothing."""
    import signal

    from distributed import Client, LocalCluster

    import bpe_dask.jobs.ids_output as encode_job
    import bpe_dask.stages.encode as encode_stage
    from bpe_dask import encode

    text = corpus.words_corpus(33, 20_000)
    (tmp_path / "in.txt").write_text(text, encoding="utf-8")
    vocab, merges = train_bpe(tmp_path / "in.txt", 300, [EOT], in_process=True)
    tokenizer = Tokenizer(vocab, merges, [EOT])
    (tmp_path / "out").mkdir()
    Streaming.real.update(ids=encode_stage._shard_ids, stream=encode_job.stream_shards)
    monkeypatch.setattr(encode_stage, "_shard_ids", Streaming.slow_shard_ids)
    monkeypatch.setattr(encode_job, "stream_shards", Streaming.stream)

    def press_ctrl_c() -> None:
        if Streaming.started.wait(timing.seconds(60)):
            os.kill(os.getpid(), signal.SIGINT)  # as a terminal's Ctrl-C reaches the client

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever the runner had
    shape = {"processes": False, "n_workers": 1, "threads_per_worker": 2, "dashboard_address": ":0"}
    try:
        with LocalCluster(**shape) as cluster, Client(cluster.scheduler_address) as client:  # not the job's
            threading.Thread(target=press_ctrl_c, daemon=True).start()
            with pytest.raises(KeyboardInterrupt):
                encode(
                    str(tmp_path / "in.txt"),
                    tokenizer,
                    str(tmp_path / "out" / "ids.bin"),
                    client=client,
                    chunk_size="16KiB",
                    work_dir=str(tmp_path / "work"),
                )  # the shards stay: read on
            # the streaming task went on to its end, the job stopped
            assert Streaming.ended.wait(timing.seconds(60))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert sorted(os.listdir(tmp_path / "out")) == []
