"""Failures: lost workers, killed clients, flaky reads, changed inputs, crashed writes.

Real processes throughout: `dask scheduler` and `dask worker` subprocesses killed with
SIGKILL, the `bpe-dask` CLI killed and run again, and, where no process can fail on cue, a
filesystem that fails its first read. Every case compares the merges with an undisturbed run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import corpus
import dask.config
import flaky_fs
import pytest
import servers
import timing

from bpe_dask import BpeDaskError, count_words, train, train_bpe
from bpe_dask.io import tokenizer_formats
from bpe_dask.jobs import merging
from bpe_dask.jobs import train as train_job
from conftest import CS336_DIR, read_reference_merges

EOT = "<|endoftext|>"
REPO = Path(__file__).resolve().parent.parent
VOCAB_SIZE = 256 + 1 + 150
CHUNK = "16KiB"  # many small map tasks: a map phase long enough to kill something in it


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory) -> Path:
    """About 2.5 MB of Zipf-distributed words: some 150 partitions of 16 KiB."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_bytes(corpus.words_corpus(7, 400_000, vocab_words=3000).encode())
    return path


@pytest.fixture(scope="module")
def undisturbed(corpus_file) -> list[tuple[bytes, bytes]]:
    return train_bpe(corpus_file, VOCAB_SIZE, [EOT])[1]


def train_args(corpus_file: Path, *extra: str) -> list[str]:
    return [
        "train", str(corpus_file), "--vocab-size", str(VOCAB_SIZE), "--special-token", EOT,
        "--out", "out", "--work-dir", "work", "--chunk-size", CHUNK, "-q", *extra,
    ]  # fmt: skip


def start_cli(args: list[str], cwd: Path, env: dict | None = None) -> subprocess.Popen:
    """`bpe-dask` in its own session, so killing it kills the LocalCluster it started too."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "bpe_dask", *args], cwd=cwd, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip


def finish(process: subprocess.Popen, timeout: float = 300) -> tuple[int, str]:
    _, stderr = process.communicate(timeout=timing.seconds(timeout))
    return process.returncode, stderr


def shards_in(work: Path) -> list[Path]:
    return sorted((work / "shards").glob("[!.]*.parquet"))  # not the hidden half-written ones


def wait_for_shards(work: Path, at_least: int, process: subprocess.Popen, seconds: float = 120) -> None:
    def written() -> bool:
        if process.poll() is not None:
            pytest.fail(f"the job ended before {at_least} shards were written: {process.stderr.read()}")
        return len(shards_in(work)) >= at_least

    timing.wait_until(written, seconds, f"{at_least} shards", poll=0.02)


def group_gone(group: int) -> bool:
    """Whether every process of the process group ``group`` has exited (zombies count as gone)."""
    import psutil

    def alive(process: psutil.Process) -> bool:
        try:
            return os.getpgid(process.pid) == group and process.status() != psutil.STATUS_ZOMBIE
        except (ProcessLookupError, psutil.NoSuchProcess):
            return False

    return not any(alive(process) for process in psutil.process_iter())


def partitions_of(corpus_file: Path) -> int:
    return count_words(corpus_file, [EOT], chunk_size=16 * 1024, in_process=True).partitions


def report_of(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


def assert_one_line_error(code: int, stderr: str, *fragments: str) -> None:
    assert code == 1, stderr
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("bpe-dask: error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# --- lost workers and a lost scheduler ---------------------------------------------------------


def test_a_worker_killed_in_the_map_phase_costs_only_its_tasks(corpus_file, undisturbed, tmp_path):
    with servers.cluster_processes(2, cwd=str(tmp_path)) as cluster:
        job = start_cli(train_args(corpus_file, "--scheduler", cluster.address), tmp_path)
        wait_for_shards(tmp_path / "work", 10, job)
        servers.kill_process_tree(cluster.workers[0].pid)  # nanny and worker, SIGKILL
        written_when_killed = len(shards_in(tmp_path / "work"))
        code, stderr = finish(job)
    assert code == 0, stderr
    assert read_reference_merges(tmp_path / "out" / "merges.txt") == undisturbed
    report = report_of(tmp_path / "out")
    assert written_when_killed < report["partitions"] == partitions_of(corpus_file)


def test_workers_dying_again_and_again_is_one_line_with_the_dashboard(corpus_file, tmp_path):
    no_second_chances = {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}
    with servers.cluster_processes(2, cwd=str(tmp_path), scheduler_env=no_second_chances) as cluster:
        job = start_cli(train_args(corpus_file, "--scheduler", cluster.address), tmp_path)
        wait_for_shards(tmp_path / "work", 10, job)
        servers.kill_process_tree(cluster.workers[0].pid)
        code, stderr = finish(job)
    assert_one_line_error(code, stderr, "worker", "died", "dashboard")
    assert not (tmp_path / "out").exists()


def test_losing_the_scheduler_is_one_line_naming_it(corpus_file, tmp_path):
    with servers.cluster_processes(2, cwd=str(tmp_path)) as cluster:
        # Dask tries to reconnect for its connect timeout (30 s by default) before it gives up
        reconnect = {"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "5s"}
        job = start_cli(train_args(corpus_file, "--scheduler", cluster.address), tmp_path, reconnect)
        wait_for_shards(tmp_path / "work", 10, job)
        cluster.scheduler.kill()
        code, stderr = finish(job)
    assert_one_line_error(code, stderr, cluster.address)
    assert not (tmp_path / "out").exists()


# --- killed clients: resume from the finished shards -------------------------------------------


def test_a_killed_client_resumes_from_its_finished_shards(corpus_file, undisturbed, tmp_path):
    job = start_cli(train_args(corpus_file, "--workers", "2"), tmp_path)
    wait_for_shards(tmp_path / "work", 10, job)
    os.killpg(job.pid, signal.SIGKILL)  # the client and its LocalCluster, mid-map
    job.wait()
    timing.wait_until(lambda: group_gone(job.pid), 30, "the killed job's workers to go")  # no shard after
    finished = len(shards_in(tmp_path / "work"))
    assert not (tmp_path / "out").exists()

    code, stderr = finish(start_cli(train_args(corpus_file, "--workers", "2"), tmp_path))
    assert code == 0, stderr
    report = report_of(tmp_path / "out")
    assert report["partitions_reused"] == finished
    assert report["partitions_computed"] == report["partitions"] - finished > 0
    assert read_reference_merges(tmp_path / "out" / "merges.txt") == undisturbed


def test_an_interrupted_client_stops_with_one_line_and_resumes(corpus_file, undisturbed, tmp_path):
    job = start_cli(train_args(corpus_file, "--workers", "2"), tmp_path)
    wait_for_shards(tmp_path / "work", 10, job)
    job.send_signal(signal.SIGTERM)  # what a pre-empted machine or `kill` sends
    code, stderr = finish(job, timeout=60)
    assert code == 143 and stderr.strip() == "bpe-dask: terminated", stderr
    assert not (tmp_path / "out").exists()
    finished = len(shards_in(tmp_path / "work"))

    code, stderr = finish(start_cli(train_args(corpus_file, "--workers", "1"), tmp_path))
    assert code == 0, stderr
    assert report_of(tmp_path / "out")["partitions_reused"] >= finished
    assert read_reference_merges(tmp_path / "out" / "merges.txt") == undisturbed


# --- shard reuse: only for the same input and settings -----------------------------------------


def test_changed_inputs_and_settings_are_recomputed_and_jobs_share_a_work_dir(client, tmp_path):
    a, b, work = tmp_path / "a.txt", tmp_path / "b.txt", str(tmp_path / "work")
    a.write_bytes(corpus.words_corpus(1, 20_000).encode())
    b.write_bytes(corpus.words_corpus(2, 20_000).encode())

    def run(specials=(EOT,)):
        result = count_words([a, b], specials, client=client, work_dir=work, chunk_size=16 * 1024)
        want = count_words([a, b], specials, in_process=True, chunk_size=16 * 1024).table()
        assert result.table().sort_by("token").equals(want.sort_by("token"))
        return result

    first = run()
    assert first.partitions_reused == 0
    assert run().partitions_reused == first.partitions

    only_a = count_words([a], [EOT], in_process=True, chunk_size=16 * 1024).partitions
    b.write_bytes(b.read_bytes() + b" and some more words")  # a new size
    assert run().partitions_reused == only_a

    data = b.read_bytes()
    b.write_bytes(data.replace(b" ", b"\n", 5))  # same size, new content, new mtime
    os.utime(b, ns=(time.time_ns(), time.time_ns() + 5_000_000_000))
    changed = run()
    assert changed.partitions_reused == only_a

    other_settings = run(specials=())  # a second job's settings, the same work directory
    assert other_settings.partitions_reused == 0
    assert run(specials=()).partitions_reused == other_settings.partitions
    assert run().partitions_reused == changed.partitions  # the first job's shards are still there


def test_a_rerun_with_the_merge_on_a_worker_reuses_the_work_directory(client, tmp_path):
    """The counts the merge loop reads on a worker are a file in the work directory: a re-run (after
    an interrupted merge, or a finished job) writes it again rather than stopping at it."""
    path, work = tmp_path / "in.txt", str(tmp_path / "work")
    path.write_bytes(corpus.words_corpus(4, 5_000).encode())
    want = train_bpe(path, VOCAB_SIZE, [EOT], in_process=True)[1]
    for k, reused in (("a", False), ("b", True)):
        report = train_job.train(path, VOCAB_SIZE, str(tmp_path / k), [EOT], client=client, merge_on="worker",
                                 work_dir=work, chunk_size=8 * 1024)  # fmt: skip
        assert report["merge_ran_on"] == "worker" and bool(report["partitions_reused"]) == reused
        assert read_reference_merges(tmp_path / k / "merges.txt") == want


# --- failures that are worth a retry -----------------------------------------------------------


def test_a_read_that_fails_once_is_retried_in_place(client, tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(corpus.words_corpus(3, 30_000).encode())
    flaky_fs.register()
    client.run(flaky_fs.register)
    result = count_words([f"flaky://{path}"], [EOT], client=client, work_dir=str(tmp_path / "work"),
                         chunk_size=32 * 1024)  # fmt: skip
    want = count_words([path], [EOT], in_process=True, chunk_size=32 * 1024).table()
    assert result.partitions > 3
    assert result.table().sort_by("token").equals(want.sort_by("token"))
    assert (tmp_path / "in.txt.failed-once").exists()  # the failure did happen


def test_no_retries_set_on_the_client_fail_a_flaky_read_at_once(client, tmp_path):
    """``bpe-dask.retries`` set on the client holds in the tasks, though the workers started before
    it was set (their own config says 2): the job hands it to them in its ``Store``."""
    path = tmp_path / "in.txt"
    path.write_bytes(corpus.words_corpus(3, 30_000).encode())
    flaky_fs.register()
    client.run(flaky_fs.register)
    with dask.config.set({"bpe-dask.retries": 0}), pytest.raises(BpeDaskError, match="injected failure"):
        count_words([f"flaky://{path}"], [EOT], client=client, work_dir=str(tmp_path / "work"))
    assert client.run(lambda: dask.config.get("bpe-dask.retries")) == dict.fromkeys(
        client.scheduler_info()["workers"], 2
    )  # the workers' own config was not changed: the setting travelled with the tasks


def test_invalid_utf8_is_not_retried_and_names_the_offset(client, tmp_path):
    path = tmp_path / "bad.txt"
    good = corpus.words_corpus(4, 5_000).encode()
    path.write_bytes(good + b"\xff" + good)
    started = time.monotonic()
    with pytest.raises(BpeDaskError, match=f"invalid UTF-8 at byte offset {len(good)}"):
        count_words([path], [EOT], client=client, chunk_size=1 << 20)
    assert time.monotonic() - started < timing.seconds(10)


# --- outputs: all or nothing -------------------------------------------------------------------


@pytest.mark.parametrize("crash_in", ["merge loop", "tokenizer.json", "the final rename"])
def test_a_crash_after_counting_leaves_the_previous_outputs_intact(client, tmp_path, monkeypatch, crash_in):
    path = tmp_path / "in.txt"
    path.write_bytes(corpus.words_corpus(5, 20_000).encode())
    out = tmp_path / "out"
    train_job.train([path], 300, str(out), [EOT], client=client)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def crash(*args, **kwargs):
        raise OSError("injected: disk full")

    if crash_in == "merge loop":
        monkeypatch.setattr(merging, "train_merges", crash)
    elif crash_in == "tokenizer.json":
        monkeypatch.setattr(tokenizer_formats, "tokenizer_json", crash)
    else:
        real_rename = os.rename

        def rename(source, target):
            if ".partial-" in str(source):
                crash()
            return real_rename(source, target)

        monkeypatch.setattr(os, "rename", rename)  # publishing's commit step
    with pytest.raises(OSError, match="injected"):
        train_job.train([path], 400, str(out), [EOT], client=client, overwrite=True)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out"]  # no staging left behind


# --- what is retried: only what may be transient -------------------------------------------------


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (ConnectionResetError("reset by peer"), True),
        (TimeoutError("read timed out"), True),
        (OSError(5, "Input/output error"), True),
        (FileNotFoundError(2, "No such file"), False),
        (PermissionError(13, "Access denied"), False),
        (OSError(28, "No space left on device"), False),
        (KeyError("a bug"), False),
        (MemoryError(), False),
        (BpeDaskError("a user error"), False),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_only_what_may_be_transient_is_tried_again(error, transient, monkeypatch):
    """A bug (KeyError) or a MemoryError ran three times inside the same worker thread before."""
    from bpe_dask.io import retries

    monkeypatch.setitem(dask.config.config, "bpe-dask", {**dask.config.get("bpe-dask"), "retry-pause": 0.001})
    calls = []

    def task():
        calls.append(1)
        if len(calls) == 1:
            raise error
        return "done"

    if transient:
        assert retries.Retries.configured().run(task) == "done"
        assert len(calls) == 2
    else:
        with pytest.raises(type(error)):
            retries.Retries.configured().run(task)
        assert len(calls) == 1


# A loaded machine, as Dask's nannies see it: a worker process's exit is noticed 12 s after the
# nanny first waits for it (Dask waits 4 s, kills it, waits 5 s more, then raises TimeoutError), in
# the `bpe-dask` process, which runs the nannies.
SLOW_REAPING = """
import asyncio, sys, time
from distributed.process import AsyncProcess
join, on_exit, noticed = AsyncProcess.join, AsyncProcess._on_exit, {}
def late_on_exit(self, exitcode):
    self._loop.call_later(12, on_exit, self, exitcode)
async def slow_join(self, timeout=None):
    ready = noticed.setdefault(id(self), time.monotonic() + 12)
    if timeout is not None and time.monotonic() + timeout < ready:
        await asyncio.sleep(timeout)
        raise asyncio.TimeoutError()
    await asyncio.sleep(max(0.0, ready - time.monotonic()))
    return await join(self, timeout)
AsyncProcess.join, AsyncProcess._on_exit = slow_join, late_on_exit
from bpe_dask.__main__ import run
sys.argv = ["bpe-dask", *sys.argv[1:]]
run()
"""


def test_a_worker_slow_to_be_reaped_at_the_end_does_not_fail_the_job(tmp_path):
    """The embedded cluster's close gives each worker the time a loaded machine takes: a job whose
    work is done publishes, exits 0 and prints no traceback."""

    args = ["train", str(CS336_DIR / "corpus.en"), "--vocab-size", "300", "--out", "out", "--workers", "1"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", SLOW_REAPING, *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timing.seconds(300))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "ERROR" not in done.stderr, done.stderr
    want = train_bpe(CS336_DIR / "corpus.en", 300, [])[1]
    assert read_reference_merges(tmp_path / "out" / "merges.txt") == want


def test_the_merge_finds_its_worker_when_dasks_cached_identity_lists_none(client, tmp_path, monkeypatch):
    """``Client.scheduler_info()`` returns Dask's cached identity, which the client's periodic
    refresh (asking for no workers) can overwrite between the update and the return, as on a busy
    machine: here it always does. The job asks the scheduler itself."""
    from distributed import Client

    refresh = Client._update_scheduler_info

    async def raced(self, n_workers=0):
        await refresh(self, n_workers=0)  # the periodic refresh, listing no workers, lands last

    monkeypatch.setattr(Client, "_update_scheduler_info", raced)
    assert client.scheduler_info()["workers"] == {}  # as the job's client saw it
    want = train_bpe(CS336_DIR / "corpus.en", 300, [EOT])[1]
    on_cluster = {"client": client, "merge_on": "worker", "chunk_size": "16KiB"}
    report = train(CS336_DIR / "corpus.en", 300, tmp_path / "out", [EOT], **on_cluster)
    assert report["merge_ran_on"] not in ("client", None), report
    assert read_reference_merges(tmp_path / "out" / "merges.txt") == want
