"""Scratch space: a job's work directory goes when the job goes, however it goes.

- Stopped by a signal on a cluster it does not own (`--scheduler`, a real `dask scheduler` and
  `dask worker`), at any phase: its `.OUT.work-*` is removed, its tasks stop, and the scheduler logs
  no traceback; a task that ends only after the directory was removed does not make it again.
- Killed (SIGKILL): what it left (`$TMPDIR/bpe-dask-*`, `.OUT.work-*`, `.NAME.partial-*`) is removed
  by the next job, and never a directory of a job that is alive.

Real processes throughout: the CLI in a session of its own, run by a small wrapper that slows or
holds one phase where a test needs to, and says on stderr when it is there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import corpus
import pytest
import servers

REPO = Path(__file__).resolve().parent.parent
DEADLINE = 300  # seconds to wait for a condition on a busy shared machine
SECONDS = 40  # from a signal to the exit: a task that does not stop is waited for 10 s (STOP_WAIT)
SCHEDULER_ERROR = "Exception while handling op"

# The CLI, with one phase held or slowed where a test needs it (argv[1]; argv[2]: a file for the
# test to look at, or to make).
WRAPPER = r"""
import os, sys, time
from pathlib import Path
from bpe_dask import cli
from bpe_dask.jobs import train
from bpe_dask.stages import reduce

phase, flag = sys.argv[1], sys.argv[2]

def say(what):
    print("test: " + what, file=sys.stderr, flush=True)

if phase == "holding":  # counted, its shards in its work directory: holds until the test says go
    merge_counts = train.merge_counts
    def held(*args, **kwargs):
        say("holding")
        deadline = time.monotonic() + 600
        while not Path(flag).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return merge_counts(*args, **kwargs)
    train.merge_counts = held
elif phase == "reducing":  # the last sum, on a worker: writes its file long after the job stopped
    combine = reduce.combine  # by reference: the worker's own
    def slow_combine(*args, **kwargs):
        import time
        from pathlib import Path
        import bpe_dask.stages.reduce as on_worker
        write_counts = on_worker.write_counts
        def slow_write(*args, **kwargs):
            Path(flag).touch()
            time.sleep(25)  # past the client's wait for its tasks (STOP_WAIT): it is gone by now
            return write_counts(*args, **kwargs)
        on_worker.write_counts = slow_write
        try:
            return combine(*args, **kwargs)
        finally:
            on_worker.write_counts = write_counts
    reduce.combine = slow_combine
sys.exit(cli.main(sys.argv[3:]))
"""


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory) -> Path:
    """4 MB of random lowercase words, some 300,000 of them unique: seconds to count and to merge."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_bytes(corpus.random_lowercase_words())
    return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A `dask scheduler` and a `dask worker` of two threads, which see this machine's disk, each
    logging to a file of its own."""
    with servers.separate_machines((), n_workers=1, nthreads=2, private=False) as running:
        yield running


class Job:
    """`bpe-dask` in a session of its own, through the wrapper; its stderr read as it comes."""

    def __init__(
        self, cwd: Path, args: list[str], phase: str = "", flag: Path | None = None, env: dict | None = None
    ) -> None:
        (cwd / "tmp").mkdir(exist_ok=True)
        env = {**servers.env_without_aws(), **(env or {}), "PYTHONPATH": str(REPO)}
        env["TMPDIR"] = str(cwd / "tmp")
        command = [sys.executable, "-c", WRAPPER, phase, str(flag or cwd / "unused"), *args]
        self.process = subprocess.Popen(
            command, cwd=cwd, env=env, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:  # to its end: every process that holds the pipe is gone
            self.lines.append(line)

    def stderr(self) -> str:
        return "".join(self.lines)

    def wait_for(self, condition, what: str) -> None:
        deadline = time.monotonic() + DEADLINE
        while not condition():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"never saw {what}:\n{self.stderr()}")
            time.sleep(0.02)

    def finish(self, seconds: float = DEADLINE) -> int:
        try:
            code = self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"still running after {seconds} s:\n{self.stderr()}")
        self.reader.join(timeout=DEADLINE)
        return code

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def until(condition, what: str, seconds: float = DEADLINE) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def shards_in(folder: Path, pattern: str) -> list[Path]:
    return sorted(folder.glob(f"{pattern}/shards/*.parquet"))


def scratch_beside(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".work-" in p.name or ".partial-" in p.name)


def running_tasks(cluster: servers.SeparateCluster) -> int:
    answers = cluster.client.run(lambda dask_worker: len(dask_worker.state.all_running_tasks))
    return sum(answers.values())


SIGNALS = {
    "SIGINT": (signal.SIGINT, "bpe-dask: interrupted", 130),
    "SIGTERM": (signal.SIGTERM, "bpe-dask: terminated", 143),
}
# Each phase's engine and vocabulary: counting long enough to be stopped in the middle, and a merge
# loop of minutes (pure Python), which must stop long before its end.
PHASES = {"counting": ("python", "300"), "reducing": ("numba", "300"), "merging": ("python", "20000")}
STOPS_WITHIN = 60  # seconds from the job's exit until the merge loop it left on a worker stops


@pytest.mark.parametrize(
    ("phase", "how"), [("counting", "SIGINT"), ("reducing", "SIGTERM"), ("merging", "SIGINT")]
)
def test_a_signal_on_a_shared_cluster_removes_the_scratch_and_trips_no_scheduler(
    corpus_file, cluster, tmp_path, phase, how
):
    """Each interrupted job left `.OUT.work-*/shards/` beside --out, and the scheduler logged an
    AssertionError (`assert ts.who_wants`, cancelling a map task whose dependent, an inner sum of the
    reduce, no client wants); a task still running wrote its file after the job removed the
    directory, and so made it again."""
    log = cluster.scheduler.log
    logged = len(log.read_bytes())
    engine, vocab = PHASES[phase]
    args = ["train", str(corpus_file), "--vocab-size", vocab, "--out", "out", "--scheduler", cluster.address,
            "--engine", engine, "--chunk-size", "128KiB"]  # fmt: skip (31 parts: two levels of sums)
    flag = tmp_path / "reducing"
    blocks = {"DASK_BPE_DASK__BLOCK_SIZE": "16KiB"}  # a running map task stops within 16 KiB once told
    job = Job(tmp_path, args, phase, flag, blocks)
    if phase == "counting":  # some shards written, more tasks running
        job.wait_for(lambda: shards_in(tmp_path, ".out.work-*"), "a shard")
    elif phase == "reducing":  # the last sum is about to write its file
        job.wait_for(flag.exists, "the last sum writing")
    else:
        job.wait_for(lambda: "merge: " in job.stderr(), "the merge loop's progress")
    signum, line, code = SIGNALS[how]
    os.kill(job.process.pid, signum)
    assert job.finish(SECONDS) == code, job.stderr()
    assert job.stderr().strip().splitlines()[-1] == line, job.stderr()
    assert "Traceback" not in job.stderr(), job.stderr()
    assert scratch_beside(tmp_path) == [], "the job's work directory stayed"
    if phase == "counting":  # they stop at their next block, and the job waits for them before it goes
        assert running_tasks(cluster) == 0, "the job left its map tasks running"
    seconds = STOPS_WITHIN if phase == "merging" else DEADLINE
    until(lambda: running_tasks(cluster) == 0, "the job's tasks stopped", seconds)
    assert scratch_beside(tmp_path) == [], "a task that ended late made the work directory again"
    assert not (tmp_path / "out").exists()
    scheduler_log = log.read_bytes()[logged:].decode(errors="replace")
    assert SCHEDULER_ERROR not in scheduler_log and "Traceback" not in scheduler_log, scheduler_log


def test_a_stopped_jobs_running_map_task_stops_at_its_next_block(corpus_file, cluster, tmp_path):
    """A stopped job's tasks were cancelled, but one running on a cluster the job does not own read
    its part to the end and wrote its shard, while the job removed its work directory. Now it stops
    at its next block: with 16 KiB blocks, long before the end of its 4 MB (pure Python: half a
    minute or more), within the job's wait for it, and writes nothing."""
    from distributed import Client

    from bpe_dask import settings
    from bpe_dask.cluster.tasks import let_go
    from bpe_dask.io.inputs import InputFile
    from bpe_dask.io.plan import ByteRange
    from bpe_dask.io.storage import Store
    from bpe_dask.sources.files import FilePart
    from bpe_dask.stages.count import CountSettings, count_part_to_shard

    size = corpus_file.stat().st_size
    part = FilePart(ByteRange(InputFile(corpus_file.as_uri(), size, "v1"), 0, size))
    store = Store(settings={**settings.snapshot(), "block-size": "16KiB"})
    (tmp_path / "work").mkdir()
    shard = tmp_path / "work" / "shards" / "part.parquet"
    with Client(cluster.address, timeout="60s") as client:
        python = CountSettings(engine="python")
        task = client.submit(count_part_to_shard, part, python, str(shard), store, pure=False)
        until(lambda: running_tasks(cluster) == 1, "the task running")
        let_go(client, [task])
        assert running_tasks(cluster) == 0, "the task ran on after its job let go of it"
    assert not shard.exists()


def test_a_stopped_job_waits_for_its_running_tasks(cluster):
    """On a cluster it does not own, a stopped job went on (to remove its work directory) while its
    tasks still ran; it now waits until none runs (``STOP_WAIT`` at most), here a task of 3 s that
    cannot stop sooner, asking each worker once."""
    from distributed import Client

    from bpe_dask.cluster.tasks import let_go

    def asked() -> int:  # each Client.run is an INFO line in every worker's log
        return sum(m.log.read_text(errors="replace").count("'tasks_stopped'") for m in cluster.workers)

    before = asked()
    with Client(cluster.address, timeout="60s") as client:
        task = client.submit(time.sleep, 3, pure=False)
        until(lambda: running_tasks(cluster) == 1, "the task running")
        let_go(client, [task])
        assert running_tasks(cluster) == 0, "the job went on while its task ran"
    # asked once each, not every 0.1 s (17 lines a worker during an interrupt, each saying so)
    until(lambda: asked() - before == len(cluster.workers), "each worker's one line")
    assert asked() - before == len(cluster.workers)


@pytest.mark.parametrize("where", ["embedded", "scheduler"])
def test_the_next_job_removes_what_a_killed_job_left(corpus_file, cluster, tmp_path, where):
    """A SIGKILLed job's `$TMPDIR/bpe-dask-*` (its embedded cluster's) or `.OUT.work-*` (a shared
    cluster's) stayed for good: nothing ever removed it, and every kill added one."""
    tmp, beside = tmp_path / "tmp", where == "scheduler"
    on = ["--scheduler", cluster.address] if beside else ["--workers", "2"]
    args = ["train", str(corpus_file), "--vocab-size", "300", "--out", "out", *on, "--overwrite"]
    pattern, folder = (".out.work-*", tmp_path) if beside else ("bpe-dask-*", tmp)
    killed = Job(tmp_path, [*args, "--engine", "python", "--chunk-size", "256KiB"])
    killed.wait_for(lambda: shards_in(folder, pattern), "a shard")
    [left] = [p.parent.parent for p in shards_in(folder, pattern)][:1]
    os.kill(killed.process.pid, signal.SIGKILL)  # the job's process only, as the OOM killer would
    killed.finish()
    assert left.exists()
    if beside:  # its tasks stop (the scheduler let go of them): none writes into what goes next
        until(lambda: running_tasks(cluster) == 0, "the killed job's tasks stopped")
    next_job = Job(tmp_path, [*args, "-v"])
    assert next_job.finish() == 0, next_job.stderr()
    assert not left.exists()
    assert "removed the work directories of 1 job that were killed" in next_job.stderr()
    assert sorted(folder.glob(pattern)) == []
    assert (tmp_path / "out" / "merges.txt").exists()


def test_a_live_jobs_scratch_is_never_removed_by_another(corpus_file, tmp_path):
    """Two jobs at once with one TMPDIR: the second, which removes what killed jobs left, leaves the
    first's work directory alone while the first still needs it."""
    tmp, go = tmp_path / "tmp", tmp_path / "go"
    args = ["train", str(corpus_file), "--vocab-size", "300", "--workers", "2", "--overwrite"]
    first = Job(tmp_path, [*args, "--out", "first"], "holding", go)
    first.wait_for(lambda: "test: holding" in first.stderr(), "the first job holding")
    [held] = sorted(tmp.glob("bpe-dask-*"))
    shards = sorted(held.glob("shards/*.parquet"))
    assert shards
    second = Job(tmp_path, [*args, "--out", "second"])
    assert second.finish() == 0, second.stderr()
    assert sorted(held.glob("shards/*.parquet")) == shards, "the live job's shards were removed"
    go.touch()
    assert first.finish() == 0, first.stderr()
    assert (tmp_path / "first" / "merges.txt").read_text() == (tmp_path / "second" / "merges.txt").read_text()
    assert sorted(tmp.glob("bpe-dask-*")) == []


STAGING = """
import sys, time
from bpe_dask.io.publish import staged_directory
with staged_directory(sys.argv[1]) as staging:
    print(staging, flush=True)
    time.sleep(600)
"""


def test_a_staged_output_a_killed_job_left_is_removed_by_the_next_publish(tmp_path):
    """`.NAME.partial-*`, the output a job was writing when it was killed, stayed beside the output;
    the next job to publish there removes it, and not the one a live job is writing."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = tmp_path / "out"

    def staging() -> tuple[subprocess.Popen, Path]:
        command = [sys.executable, "-c", STAGING, str(out)]
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
        return process, Path(process.stdout.readline().strip())

    (killed, left), (live, writing) = staging(), staging()
    try:
        killed.kill()
        killed.wait()
        assert left.is_dir() and writing.is_dir()
        from bpe_dask.io.publish import publish_directory

        publish_directory(str(out), {"a.txt": "a"})
        assert not left.exists() and writing.is_dir()
        assert sorted(p.name for p in out.iterdir()) == ["_SUCCESS", "a.txt"]  # no lock file published
    finally:
        live.kill()
        live.wait()


def test_a_killed_job_with_worker_processes_leaves_no_warnings(corpus_file, tmp_path):
    """SIGKILLed, a job whose embedded cluster has worker processes left Python's resource tracker
    warning, on the job's stderr, of the semaphores it then cleaned up (Dask's queues to its worker
    processes): `There appear to be 4 leaked semaphore objects to clean up at shutdown`."""
    args = ["train", str(corpus_file), "--vocab-size", "300", "--out", "out", "--workers", "2",
            "--engine", "python", "--chunk-size", "256KiB"]  # fmt: skip
    job = Job(tmp_path, args)
    job.wait_for(lambda: shards_in(tmp_path / "tmp", "bpe-dask-*"), "a shard")
    os.kill(job.process.pid, signal.SIGKILL)
    job.finish()  # and its stderr read to the end: the workers and the tracker, which hold it, are gone
    assert "leaked" not in job.stderr(), job.stderr()
    assert "Traceback" not in job.stderr(), job.stderr()
