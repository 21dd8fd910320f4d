"""Watching a job run: progress from inside the map tasks (Dask events), and Dask's dashboard.

The clusters are real: the LocalCluster a job starts (``jobs.cluster.dask_client``), and a `dask
scheduler` with its dashboard and a `dask worker` of two threads, as subprocesses on 127.0.0.1.
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import logging
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import corpus
import dask
import pytest
import servers
import timing
from dask.utils import parse_bytes
from flaky_fs import NamedLocalFileSystem
from test_plan import whole_counts

from bpe_dask import count_words
from bpe_dask.cluster import progress as progress_module
from bpe_dask.cluster.client import dask_client
from bpe_dask.cluster.progress import MapProgress, MergeProgress
from bpe_dask.wording import format_bytes

EOT = "<|endoftext|>"
REPO = Path(__file__).resolve().parent.parent
LINE = re.compile(r"(\w+): (\d+)/(\d+) partitions \((\d+)%\), ([\d.]+ \w+) of ([\d.]+ \w+)(.*)")
# Reports as often as the reader reads (64 KiB blocks), so a second of counting makes many of them.
OFTEN = {"bpe-dask.progress-interval": "10ms", "bpe-dask.block-size": "64KiB", "bpe-dask.retry-pause": "50ms"}


class Logged(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def logged_while(logger_name: str, start) -> tuple[object, list[str]]:
    """What ``start()`` returns, and what ``logger_name`` logged at INFO meanwhile."""
    handler, logger = Logged(), logging.getLogger(logger_name)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        return start(), handler.messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@pytest.fixture(scope="module")
def local():
    """The LocalCluster a job starts, one single-threaded worker process, and the link it logged."""
    context = dask_client(workers=1)
    client, messages = logged_while("bpe_dask.cluster.client", context.__enter__)
    try:
        yield client, messages
    finally:
        context.__exit__(None, None, None)


@pytest.fixture(scope="module")
def remote():
    """A `dask scheduler` serving its dashboard, and one `dask worker` of two threads."""
    port, dashboard = servers.free_port(), servers.free_port()
    address = f"tcp://127.0.0.1:{port}"
    scheduler = [servers.DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                 "--dashboard-address", f"127.0.0.1:{dashboard}"]  # fmt: skip
    with servers.processes(scheduler, env=servers.env_without_aws()):
        servers.wait_for_port(port)
        worker = servers.worker_command(address, nthreads=2)
        with servers.processes(worker, env=servers.worker_env()):
            from distributed import Client

            with Client(address, timeout=timing.dask_seconds(30)) as client:
                client.wait_for_workers(1, timeout=timing.seconds(60))
            yield address, dashboard


@pytest.fixture
def lines(monkeypatch, caplog):
    """The progress lines a job logs: every one (not one per 5 s), as it logs them."""
    monkeypatch.setattr(progress_module, "LOG_EVERY", 0.0)
    caplog.set_level(logging.INFO, logger="bpe_dask.cluster.progress")

    def read() -> list[tuple]:
        found = []
        for record in caplog.records:
            ours = record.name == "bpe_dask.cluster.progress"
            match = LINE.fullmatch(record.getMessage()) if ours else None
            if match:
                _, done, tasks, percent, read, total, rest = match.groups()
                numbers = int(done), int(tasks), int(percent), parse_bytes(read), parse_bytes(total)
                found.append((*numbers, rest))
        return found

    return read


class About:
    """A size as a progress line shows it: to 2 decimals of its unit."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __eq__(self, shown: object) -> bool:
        return isinstance(shown, int) and abs(shown - self.size) <= self.size / 200

    def __repr__(self) -> str:
        return f"About({self.size})"


def gz_file(path: Path, text: str) -> Path:
    path.write_bytes(gzip.compress(text.encode(), compresslevel=1))
    return path


def words(seed: int) -> str:
    return corpus.words_corpus(seed, 300_000, vocab_words=3000)  # about 2 MB


def table_counts(result) -> Counter:
    table = result.table()
    return Counter(dict(zip(table["token"].to_pylist(), table["count"].to_pylist(), strict=True)))


def get(link: str, seconds: float = 30) -> tuple[int, str]:
    """The page at ``link``, once it answers: the embedded cluster's dashboard comes up a moment after
    the cluster (``jobs.cluster._attach_dashboard``), 404 until then."""
    deadline = timing.Deadline(seconds)
    while True:
        try:
            with urllib.request.urlopen(link, timeout=timing.seconds(30)) as response:
                return response.status, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as error:
            if error.code != 404 or deadline.passed():
                raise
        time.sleep(0.1)


# --- the dashboard ------------------------------------------------------------------------------


def test_the_cluster_a_job_starts_logs_its_dashboard_and_it_answers(local):
    _, messages = local
    (started,) = [m for m in messages if m.startswith("started a LocalCluster")]
    link = re.search(r"\(dashboard: (http://127\.0\.0\.1:\d+/status)\)", started)
    assert link, started
    status, page = get(link[1])
    assert status == 200 and "<title>Dask" in page and "bokeh" in page.lower(), page[:500]


def test_a_cluster_of_threads_logs_its_dashboard_on_loopback_and_it_answers():
    """The cluster a job of compiled tasks starts runs them in threads of this process; its link names
    127.0.0.1, where the dashboard listens (not the machine's address, as an in-process cluster's would)."""
    context = dask_client(workers=2, in_threads=True)
    client, messages = logged_while("bpe_dask.cluster.client", context.__enter__)
    try:
        (started,) = [m for m in messages if m.startswith("started a LocalCluster")]
        assert started.startswith("started a LocalCluster of 2 threads in this process"), started
        assert client.submit(lambda: __import__("os").getpid(), pure=False).result() == os.getpid()
        link = re.search(r"\(dashboard: (http://127\.0\.0\.1:\d+/status)\)", started)
        assert link, started
        status, page = get(link[1])
        assert status == 200 and "<title>Dask" in page and "bokeh" in page.lower(), page[:500]
    finally:
        context.__exit__(None, None, None)


def test_a_job_nobody_watches_never_imports_the_dashboard_and_its_link_answers_all_the_same(tmp_path):
    """Importing bokeh takes a second or more under the GIL, which a cluster of threads shares with its
    tasks: the dashboard is attached at the first visit to its link (``cluster.dashboard``). A fresh
    process, so that nothing else has imported bokeh."""
    (tmp_path / "in.txt").write_text(words(3), encoding="utf-8")
    script = f"""
import http.client, json, re, sys, urllib.parse, urllib.request
from bpe_dask import count_words
from bpe_dask.cluster.client import dask_client
with dask_client(workers=2, in_threads=True) as client:
    counted = count_words({str(tmp_path / "in.txt")!r}, [{EOT!r}], client=client,
                          out={str(tmp_path / "c.parquet")!r})
    before = "bokeh" in sys.modules
    link = re.sub(r"//[^:/]+:", "//127.0.0.1:", client.dashboard_link)
    # The first visit: a HEAD of a path that names another host, sent back to this server's own.
    connection = http.client.HTTPConnection(urllib.parse.urlsplit(link).netloc, timeout=300)
    connection.request("HEAD", "//elsewhere.example/status")
    first = connection.getresponse()
    with urllib.request.urlopen(link, timeout=300) as response:
        page = response.read().decode("utf-8", "replace")
        print(json.dumps({{"words": counted.table().num_rows, "bokeh_before": before,
                          "first": [first.status, first.getheader("Location")],
                          "status": response.status, "url": response.url, "link": link, "page": page[:999]}}))
"""
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=timing.seconds(300), env=environment, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["words"] > 1000 and seen["bokeh_before"] is False, seen
    assert seen["first"] == [302, "/elsewhere.example/status"], seen
    assert seen["status"] == 200 and seen["url"] == seen["link"], seen
    assert "<title>Dask" in seen["page"] and "bokeh" in seen["page"].lower(), seen["page"][:500]


def test_a_remote_schedulers_dashboard_link_is_logged_and_answers(remote):
    address, dashboard = remote
    context = dask_client(scheduler=address)
    _, messages = logged_while("bpe_dask.cluster.client", context.__enter__)
    context.__exit__(None, None, None)
    link = f"http://127.0.0.1:{dashboard}/status"
    assert f"connected to {address} (dashboard: {link})" in messages, messages
    status, page = get(link)
    assert status == 200 and "<title>Dask" in page


def test_the_dashboard_comes_with_the_package():
    """README's first command installs it: bokeh is one of the package's own dependencies."""
    from importlib.metadata import requires

    assert any(re.match(r"bokeh\s*>=\s*3\.1", r) for r in requires("bpe-dask")), requires("bpe-dask")


# --- progress from inside the tasks -------------------------------------------------------------


def test_a_gz_input_shows_its_progress_while_its_one_task_runs(local, tmp_path, lines):
    client, _ = local
    text = words(1)
    path = gz_file(tmp_path / "in.txt.gz", text)
    with dask.config.set(OFTEN):
        result = count_words(path, [EOT], client=client, engine="python", show_progress=True)
    seen = lines()
    assert seen[-1][:3] == (1, 1, 100) and seen[-1][3] == seen[-1][4] == About(path.stat().st_size), seen[-1]
    running = [read for done, _, _, read, _, _ in seen if done == 0 and read > 0]
    assert len(set(running)) >= 3, seen  # bytes grew, line after line, before the task ended
    assert running == sorted(running) and max(running) < seen[-1][4]
    assert all(read <= total for *_, read, total, _ in seen)
    assert any(done == 0 and re.match(r", [\d.]+ \w+/s, ETA ", rest) for done, *_, rest in seen), seen
    assert table_counts(result) == whole_counts(text, [EOT])


def test_a_task_tried_again_reports_from_the_start_and_never_past_the_whole(local, tmp_path, lines):
    """A read that fails halfway (a dropped connection) is tried again in place: its bytes count again
    from 0, not on top of the first attempt's."""
    client, _ = local
    text = words(2)
    path = tmp_path / "in.txt"
    path.write_text(text, encoding="utf-8")
    client.run(register_halfway)
    register_halfway()
    with dask.config.set(OFTEN):
        result = count_words(f"halfway://{path}", [EOT], client=client, engine="python", show_progress=True,
                             chunk_size="64MiB")  # fmt: skip
    assert (tmp_path / "in.txt.failed-once").exists()  # it did fail, once
    seen = lines()
    size = path.stat().st_size
    running = [read for done, _, _, read, _, _ in seen if done == 0]
    assert any(b < a for a, b in itertools.pairwise(running)), running  # the retry, seen
    assert all(read <= total for *_, read, total, _ in seen)
    assert seen[-1][2:5] == (100, About(size), About(size))
    assert table_counts(result) == whole_counts(text, [EOT])


def test_reused_shards_count_once(local, tmp_path, lines):
    client, _ = local
    paths = [tmp_path / "a.txt", tmp_path / "b.txt"]
    for seed, path in enumerate(paths):
        path.write_text(corpus.words_corpus(seed, 20_000), encoding="utf-8")
    total = sum(p.stat().st_size for p in paths)
    work = str(tmp_path / "work")
    for _ in range(2):
        result = count_words(paths, [EOT], client=client, work_dir=work, show_progress=True,
                             chunk_size="32KiB")  # fmt: skip
    assert result.partitions_reused == result.partitions > 2
    final = [line for line in lines() if line[0] == line[1]]
    assert len(final) == 2 and all(line[2:5] == (100, About(total), About(total)) for line in final), final
    assert all(read <= line_total for *_, read, line_total, _ in lines())


def test_tasks_on_the_threads_of_a_remote_worker_report_side_by_side(remote, tmp_path, lines):
    """Two one-task ``.gz`` files on one worker of two threads, through a `dask scheduler`: each task's
    reports count for it, so the bytes shown pass one file's size before either task ends; records
    report their documents."""
    address, _ = remote
    texts = [words(3), words(4)]
    paths = [gz_file(tmp_path / f"{i}.txt.gz", text) for i, text in enumerate(texts)]
    sizes = [p.stat().st_size for p in paths]
    with dask.config.set(OFTEN):
        result = count_words(paths, [EOT], scheduler=address, work_dir=str(tmp_path / "work"),
                             engine="python", show_progress=True)  # fmt: skip
    seen = lines()
    assert any(done == 0 and read > max(sizes) * 1.01 for done, _, _, read, _, _ in seen), seen
    assert all(read <= total for *_, read, total, _ in seen)
    assert seen[-1][:5] == (2, 2, 100, About(sum(sizes)), About(sum(sizes)))
    assert table_counts(result) == whole_counts(texts[0], [EOT]) + whole_counts(texts[1], [EOT])

    records = [{"text": f"document {i}: " + " ".join(["words"] * (i % 50))} for i in range(20_000)]
    jsonl = tmp_path / "docs.jsonl.gz"
    jsonl.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode()))
    with dask.config.set(OFTEN):
        count_words(jsonl, [EOT], scheduler=address, work_dir=str(tmp_path / "work"), engine="python",
                    show_progress=True)  # fmt: skip
    documents = [int(m[1].replace(",", "")) for *_, rest in lines()[len(seen):]
                 if (m := re.match(r", ([\d,]+) documents", rest))]  # fmt: skip
    assert len(documents) >= 2 and documents[-1] == len(records), documents
    assert documents == sorted(documents)


# --- the line itself, on a clock of its own -----------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("label", "done"), [("count", "counted"), ("encode", "encoded"), ("evaluate", "measured")]
)
def test_before_the_first_byte_the_line_says_what_the_job_does(label, done):
    """``encode`` said "nothing counted yet" while encoding."""
    clock = FakeClock()
    bar = MapProgress(label, 2, 200 * 2**20, clock=clock, stream=io.StringIO())
    clock.now = 6.0
    assert bar.line().endswith(f", nothing {done} yet (a fresh worker compiles its code first)"), bar.line()


def test_an_empty_input_says_nothing_of_compiling():
    """An empty file's line said "a fresh worker compiles its code first", when nothing compiles."""
    clock = FakeClock()
    bar = MapProgress("count", 1, 0, clock=clock, stream=io.StringIO())
    clock.now = 1.0
    assert "compiles" not in bar.line(), bar.line()
    bar.task_done(0, key="count-0")
    assert "compiles" not in bar.line() and bar.line().startswith("count: 1/1 partitions (100%)"), bar.line()


def test_the_rate_starts_at_the_first_byte_and_reports_never_count_twice():
    clock, mib = FakeClock(), 2**20
    bar = MapProgress("count", 2, 200 * mib, clock=clock, stream=io.StringIO())
    bar.sizes = {"a": 100 * mib, "b": 100 * mib}
    clock.now = 6.0  # a fresh worker compiles: nothing read
    assert "nothing counted yet" in bar.line() and "ETA" not in bar.line()
    bar.task_read("a", 10 * mib)
    clock.now = 7.0
    bar.task_read("a", 30 * mib)  # 20 MiB in the second since the first were counted: 20 MiB/s, not 30 / 7
    assert "20.00 MiB/s, ETA 8.5 s" in bar.line(), bar.line()
    clock.now = 7.5
    assert "ETA 8.0 s" in bar.line()  # counting down between reports
    bar.task_read("a", 5 * mib)  # tried again: from the start
    bar.task_read("b", 150 * mib)  # past its size: held to it
    bar.task_read("elsewhere", 50 * mib)  # another job's task
    assert bar.read_bytes() == 105 * mib
    bar.task_done(100 * mib, key="a")
    bar.task_read("a", 60 * mib)  # late: its exact size is counted
    assert bar.read_bytes() == 200 * mib and bar.line().startswith("count: 1/2 partitions (100%)")
    bar.task_done(100 * mib, key="b")
    assert bar.line().startswith("count: 2/2 partitions (100%), 200.00 MiB of 200.00 MiB")


def test_the_merge_eta_leaves_out_the_wait_before_the_first_merge():
    clock = FakeClock()
    bar = MergeProgress(10_000, clock=clock, stream=io.StringIO())
    clock.now = 16.0  # the counts read, the state built, the loop compiled
    bar(256)
    for _ in range(10):
        clock.now += 0.25
        bar(bar.recent[-1][1] + 256)  # 1,024 merges/s from the first report on
    assert "1,024 merges/s, ETA 7.0 s" in bar.line(2816), bar.line(2816)  # (10,000 - 2,816) / 1,024


# --- a filesystem whose reads fail once, halfway through a file ---------------------------------


class HalfwayFileSystem(NamedLocalFileSystem):
    protocol = ("halfway",)

    def _open(self, path, mode="rb", **kwargs):
        f = super()._open(path, mode, **kwargs)
        if "r" in mode and not path.endswith(".failed-once") and not super().exists(path + ".failed-once"):
            return FailsHalfway(f, path + ".failed-once", super().size(path) // 2, self)
        return f


class FailsHalfway:
    def __init__(self, f, marker: str, half: int, fs) -> None:
        self.f, self.marker, self.half, self.fs = f, marker, half, fs

    def read(self, size: int = -1) -> bytes:
        if self.f.tell() >= self.half and not self.fs.exists(self.marker):
            self.fs.touch(self.marker)
            raise ConnectionResetError("injected: the connection dropped halfway")
        return self.f.read(size)

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.f.close()


def register_halfway() -> None:
    import fsspec

    fsspec.register_implementation("halfway", HalfwayFileSystem, clobber=True)


PARTITION_LINE = re.compile(r"(count|encode): (\d+)/(\d+) partitions \((\d+)%\), ([\d.]+ \w+) of text(.*)")


def test_a_dask_collections_partitions_show_their_progress(local, tmp_path, caplog, monkeypatch):
    """A collection's sizes are known only as its partitions are counted: the line goes by partitions,
    and its text's bytes add up to what the report says."""
    import dask.bag

    from bpe_dask import encode, train

    monkeypatch.setattr(progress_module, "LOG_EVERY", 0.0)
    caplog.set_level(logging.INFO, logger="bpe_dask.cluster.progress")
    client, _ = local
    documents = corpus.words_corpus(5, 60_000, vocab_words=800).split(EOT)
    bag = dask.bag.from_sequence(documents, npartitions=5)
    report = train(bag, 300, tmp_path / "tok", [EOT], client=client, show_progress=True)
    encoded = encode(bag, tmp_path / "tok", tmp_path / "ids.bin", client=client, show_progress=True)
    logged = [r.getMessage() for r in caplog.records if r.name == "bpe_dask.cluster.progress"]
    seen = [PARTITION_LINE.fullmatch(message) for message in logged]
    for label, text_bytes in (("count", report["text_bytes"]), ("encode", encoded["text_bytes"])):
        # A slow partition (a busy machine) gets lines of its own as it reads, before the first is done
        # and between counts: one line per count of finished partitions here.
        lines = [m.groups() for m in seen if m and m.group(1) == label and m.group(2) != "0"]
        shown = [g for i, g in enumerate(lines) if i == 0 or g[1] != lines[i - 1][1]]
        n = bag.npartitions
        assert [int(done) for _, done, *_ in shown] == list(range(1, n + 1)), shown
        assert all(int(total) == n for _, _, total, *_ in shown)
        assert [p for *_, p, _, _ in shown] == [f"{100 * k / n:.0f}" for k in range(1, n + 1)]
        assert shown[-1][4] == format_bytes(text_bytes), (shown[-1], text_bytes)
        assert any("ETA" in rest for *_, rest in shown[1:-1]), shown
    before = len(caplog.records)
    train(bag, 300, tmp_path / "quiet", [EOT], client=client)  # show_progress is off by default
    assert not [r for r in caplog.records[before:] if r.name == "bpe_dask.cluster.progress"]
