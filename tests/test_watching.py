"""Watching a job run: progress from inside the map tasks (Dask events), and Dask's dashboard.

The clusters are real: the LocalCluster a job starts (``jobs.cluster.dask_client``), and a `dask
scheduler` with its dashboard and a `dask worker` of two threads, as subprocesses on 127.0.0.1.
"""

from __future__ import annotations

import gzip
import io
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
from dataclasses import dataclass
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
# A map phase's log line where the input's bytes are known (``cluster.progress``):
# "count: 56%, 36.6M/62.0MB [00:03<00:02, 11.8MB/s, 9/16 partitions, 1,234 documents]"
LINE = re.compile(
    r"(\w+): (\d+)%, ([\d.]+[kMGT]?)/([\d.]+[kMGT]?)B "
    r"\[([^<]*)<([^,]*), ([^,\]]*), (\d+)/(\d+) partitions(.*)\]"
)
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


@dataclass
class Line:
    done: int  # partitions done
    tasks: int  # of partitions
    percent: int
    read: int  # bytes
    total: int
    rate: str  # as shown: "11.8MB/s", "?B/s" before any
    remaining: str  # as shown: "00:02", "?" before any rate
    rest: str  # what follows the partitions: ", 1,234 documents"


@pytest.fixture
def lines(monkeypatch, caplog):
    """The progress lines a job logs: every one (not one per 5 s), as it logs them."""
    monkeypatch.setattr(progress_module, "LOG_EVERY", 0.0)
    caplog.set_level(logging.INFO, logger="bpe_dask.cluster.progress")

    def read() -> list[Line]:
        found = []
        for record in caplog.records:
            ours = record.name == "bpe_dask.cluster.progress"
            match = LINE.fullmatch(record.getMessage()) if ours else None
            if match:
                _, percent, read, total, _, remaining, rate, done, tasks, rest = match.groups()
                sizes = parse_bytes(read), parse_bytes(total)
                found.append(Line(int(done), int(tasks), int(percent), *sizes, rate, remaining, rest))
        return found

    return read


class About:
    """A size as a progress line shows it: to 3 significant digits (tqdm's "36.6M")."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __eq__(self, shown: object) -> bool:
        return isinstance(shown, int) and abs(shown - self.size) <= self.size / 100

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
    last = seen[-1]
    assert (last.done, last.tasks, last.percent) == (1, 1, 100), last
    assert last.read == last.total == About(path.stat().st_size), last
    running = [line.read for line in seen if line.done == 0 and line.read > 0]
    assert len(set(running)) >= 3, seen  # bytes grew, line after line, before the task ended
    assert running == sorted(running) and max(running) < last.total
    assert all(line.read <= line.total for line in seen)
    # A rate and a time left while the one task runs.
    assert any(line.done == 0 and "?" not in line.rate + line.remaining for line in seen), seen
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
    assert all(line.read <= line.total for line in seen)
    assert (seen[-1].percent, seen[-1].read, seen[-1].total) == (100, About(size), About(size))
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
    final = [line for line in lines() if line.done == line.tasks]
    assert len(final) == 2, final
    assert all((line.percent, line.read, line.total) == (100, About(total), About(total)) for line in final)
    assert all(line.read <= line.total for line in lines())


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
    assert any(line.done == 0 and line.read > max(sizes) * 1.01 for line in seen), seen
    assert all(line.read <= line.total for line in seen)
    last = seen[-1]
    assert (last.done, last.tasks, last.percent, last.read, last.total) == (
        2, 2, 100, About(sum(sizes)), About(sum(sizes))
    )
    assert table_counts(result) == whole_counts(texts[0], [EOT]) + whole_counts(texts[1], [EOT])

    records = [{"text": f"document {i}: " + " ".join(["words"] * (i % 50))} for i in range(20_000)]
    jsonl = tmp_path / "docs.jsonl.gz"
    jsonl.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode()))
    with dask.config.set(OFTEN):
        count_words(jsonl, [EOT], scheduler=address, work_dir=str(tmp_path / "work"), engine="python",
                    show_progress=True)  # fmt: skip
    documents = [int(m[1].replace(",", "")) for line in lines()[len(seen):]
                 if (m := re.match(r", ([\d,]+) documents", line.rest))]  # fmt: skip
    assert len(documents) >= 2 and documents[-1] == len(records), documents
    assert documents == sorted(documents)


# --- the bar itself, on a clock of its own ------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    """tqdm's clock (each bar takes ``tqdm.std.time`` as it is made)."""
    import tqdm.std

    fake = FakeClock()
    monkeypatch.setattr(tqdm.std, "time", fake)
    return fake


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_reports_of_running_tasks_move_the_bar_and_never_count_twice(clock):
    mib = 2**20
    bar = MapProgress("count", 2, 200 * mib, stream=io.StringIO())
    bar.sizes = {"a": 100 * mib, "b": 100 * mib}
    bar.task_read("a", 10 * mib)
    bar.task_read("a", 30 * mib)  # the latest report replaces the earlier one
    assert bar.bar.n == 30 * mib
    bar.task_read("a", 5 * mib)  # tried again: from the start, and the bar stays where it was
    bar.task_read("b", 150 * mib)  # past its size: held to it
    bar.task_read("elsewhere", 50 * mib)  # another job's task
    assert bar.read_bytes() == 105 * mib and bar.bar.n == 105 * mib
    bar.task_done(100 * mib, key="a")
    bar.task_read("a", 60 * mib)  # late: its exact size is counted
    assert bar.read_bytes() == 200 * mib and "1/2 partitions" in str(bar.bar)
    bar.task_done(100 * mib, key="b")
    assert bar.bar.n == 200 * mib and bar.bar.disable  # done: closed
    assert "2/2 partitions" in str(bar.bar)


def test_without_a_terminal_the_bar_is_a_log_line_every_few_seconds_and_one_at_the_end(clock, caplog):
    progress = MapProgress("count", 100, 100 * 2**20, stream=io.StringIO())
    with caplog.at_level(logging.INFO, logger="bpe_dask.cluster.progress"):
        for _ in range(100):
            clock.now += 0.5  # 2 MiB/s
            progress.task_done(2**20)
    lines = [r.getMessage() for r in caplog.records]
    # One every LOG_EVERY seconds from the first LOG_EVERY on (50 s: 9 of them), and the last at the end.
    assert len(lines) == int(50 / progress_module.LOG_EVERY), lines
    assert all("\r" not in line and "|" not in line for line in lines), lines  # lines, not a bar
    assert lines[0].startswith("count: 10%, 10.5M/105MB [00:05<00:45, 2.10MB/s, 10/100 partitions"), lines[0]
    assert lines[-1].startswith("count: 100%, 105M/105MB [00:50<00:00, "), lines[-1]


def test_a_short_phase_without_a_terminal_logs_its_last_line_only(clock, caplog):
    with caplog.at_level(logging.INFO, logger="bpe_dask.cluster.progress"):
        bar = MergeProgress(300, stream=io.StringIO())
        for done in (100, 200, 300):
            clock.now += 0.1
            bar(done)
    assert [r.getMessage() for r in caplog.records] == [
        "merge: 100%, 300/300 merges [00:00<00:00, 1000.00 merges/s]"
    ]


def test_where_no_logging_is_set_up_the_lines_go_to_the_stream(clock, monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(progress_module.log, "propagate", False)  # no handler: logging would show nothing
    bar = MergeProgress(10, stream=stream)
    clock.now = 1.0
    bar(10)
    assert stream.getvalue() == "merge: 100%, 10/10 merges [00:01<00:00, 10.00 merges/s]\n"


def test_on_a_terminal_the_bar_is_redrawn_in_place_and_its_line_ended(clock):
    stream = Terminal()
    bar = MergeProgress(1_000, stream=stream)
    for done in range(100, 1_001, 100):
        clock.now += 1.0
        bar(done)
    shown = stream.getvalue()
    assert shown.count("\r") >= 10 and shown.endswith("\n") and shown.count("\n") == 1, shown
    last = shown.rstrip("\n").rsplit("\r", 1)[-1]
    assert last.startswith("merge: 100%|██████████| 1000/1000 [00:10<00:00"), shown


def test_on_a_terminal_a_running_phases_bar_is_redrawn_while_no_task_reports(monkeypatch):
    """Its clock and time left move on between reports (the ticker of ``listening``): it checked the
    bar's stream for ours, which tqdm wraps, and never redrew."""
    import threading

    monkeypatch.setattr(progress_module, "TICK", 0.01)
    stream = Terminal()
    bar = MapProgress("count", 2, 100, stream=stream)
    drawn = stream.getvalue().count("\r")
    stop = threading.Event()
    ticker = threading.Thread(target=bar._tick, args=(stop,), daemon=True)
    ticker.start()
    try:
        timing.wait_until(lambda: stream.getvalue().count("\r") > drawn + 2, 30, "the bar redrawn")
    finally:
        stop.set()
        ticker.join()


def test_in_a_notebook_the_bar_is_tqdms_widget(monkeypatch):
    """Jupyter: ``tqdm.autonotebook`` is the notebook's widget there (stderr is no terminal)."""
    import tqdm.autonotebook
    import tqdm.std

    made = []

    class Widget(tqdm.std.tqdm):
        def __init__(self, *args, **kwargs) -> None:
            made.append(kwargs["desc"])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(tqdm.autonotebook, "tqdm", Widget)
    MergeProgress(10)(10)
    MapProgress("encode", 2, None)
    assert made == ["merge", "encode"]


def test_a_job_on_a_terminal_prints_its_log_lines_above_the_bar_not_after_it(tmp_path):
    """``bpe-dask`` with its stderr a terminal: a log record (the merge loop's "merging N words")
    that came while the merge bar was drawn was written after the bar, on its line."""
    import pty

    (tmp_path / "in.txt").write_text(corpus.words_corpus(6, 30_000, vocab_words=500), encoding="utf-8")
    primary, secondary = pty.openpty()
    command = [sys.executable, "-m", "bpe_dask", "train", "in.txt", "--vocab-size", "400", "--out", "tok"]
    environment = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "100"}
    with subprocess.Popen(command, cwd=tmp_path, env=environment, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=secondary) as process:  # fmt: skip
        os.close(secondary)
        shown = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the terminal's other side is closed: the process is done
                break
            if not chunk:
                break
            shown += chunk
        assert process.wait(timeout=timing.seconds(300)) == 0, shown.decode(errors="replace")
    os.close(primary)
    text = shown.decode("utf-8", "replace")
    assert "merge: 100%|" in text and "count: 100%|" in text, text
    for line in text.replace("\r\n", "\n").split("\n"):
        drawn = line.split("\r")[-1]
        # Whatever was drawn on a line before, a log record starts the line that is left on the screen.
        assert "bpe-dask:" not in drawn or drawn.startswith("bpe-dask:"), repr(line)
    assert "bpe-dask: merging" in text, text


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


# "count: 40%, 2/5 partitions [00:01<00:02, 1.50 partitions/s, 12.00 MiB of text]"
PARTITION_LINE = re.compile(
    r"(count|encode): (\d+)%, (\d+)/(\d+) partitions \[([^,]*), [^,]*, ([\d.]+ \w+) of text(.*)\]"
)


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
        lines = [m.groups() for m in seen if m and m.group(1) == label and m.group(3) != "0"]
        shown = [g for i, g in enumerate(lines) if i == 0 or g[2] != lines[i - 1][2]]
        n = bag.npartitions
        assert [int(done) for _, _, done, *_ in shown] == list(range(1, n + 1)), shown
        assert all(int(total) == n for _, _, _, total, *_ in shown)
        assert [p for _, p, *_ in shown] == [f"{100 * k / n:.0f}" for k in range(1, n + 1)]
        assert shown[-1][5] == format_bytes(text_bytes), (shown[-1], text_bytes)
        assert any("<?" not in times for *_, times, _, _ in shown[1:-1]), shown  # a time left, once known
    before = len(caplog.records)
    train(bag, 300, tmp_path / "quiet", [EOT], client=client)  # show_progress is off by default
    assert not [r for r in caplog.records[before:] if r.name == "bpe_dask.cluster.progress"]
