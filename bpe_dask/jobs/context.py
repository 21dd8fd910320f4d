"""What every job shares: options and inputs in; planned byte ranges, a cluster and finished tasks out.

Every job opens the same way: ``Job.start`` makes the job's ``Store`` (the storage options with
what the environment adds, and the ``bpe-dask`` settings) once, on the client; the job checks its
output, and ``Job.plan`` expands the inputs and cuts them into byte ranges. Its tasks then run on
``Job.cluster`` (the given client, a scheduler, or a LocalCluster) once ``Job.preflight`` has
checked the workers, through ``run_tasks``, which turns a failure into one line. The jobs
(``jobs.count``, ``jobs.train``, ``jobs.encode``) are built from these.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from dask.base import tokenize
from dask.delayed import Delayed
from distributed import Client, Event, LocalCluster, as_completed

from bpe_dask import settings as config
from bpe_dask.credentials import shown
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.inputs import InputFile, expand_inputs
from bpe_dask.io.plan import Partition, plan_ranges
from bpe_dask.io.records import BadRecords
from bpe_dask.io.sample import sample_documents
from bpe_dask.io.storage import Store, describe, is_local, required_packages
from bpe_dask.jobs.cluster import NO_WARM_UP, WarmUp, dask_client, default_workers, failures_explained
from bpe_dask.jobs.options import JobOptions
from bpe_dask.jobs.preflight import Place, check_workers, unregister_plugins
from bpe_dask.jobs.progress import PartitionProgress, TaskProgress
from bpe_dask.jobs.wording import format_bytes, plural
from bpe_dask.rules.pretokenize import Pretokenizer
from bpe_dask.stages.count import CountSettings

log = logging.getLogger(__name__)

TINY_CHUNK = 4096  # an explicit chunk size below this is likely a unit left out ("64" for 64MiB)


@dataclass
class Job:
    """One run of a job: its options, the ``Store`` its tasks take, and its plan."""

    options: JobOptions
    store: Store
    files: list[InputFile] = field(default_factory=list)
    ranges: list[Partition] = field(default_factory=list)
    plugins: list[str] = field(default_factory=list)  # registered on the workers by ``preflight``
    unsized_read: int = 0  # the bytes read of the inputs whose size was not known, once counted
    _scratch_beside: str = ""  # where ``work_directory`` made the temporary one, for messages

    @classmethod
    def start(cls, options: JobOptions, urls: Sequence[str | None]) -> Job:
        """A job that reads and writes ``urls``: an ``s3://`` job takes the AWS environment along."""
        return cls(options, Store.for_job(options.storage_options, urls, options.ship_credentials))

    def find_inputs(
        self, inputs: Sequence[str], exclude: Sequence[str | None] = (), outputs: Sequence[str | None] = ()
    ) -> None:
        """The files the inputs name; what the job writes is never read back as an input: anything
        under ``exclude`` (its output and work directories) or one of ``outputs`` (files it writes),
        which named as an input is an error."""
        self.files = expand_inputs(
            inputs, self.store, exclude=[e for e in exclude if e], reading=self.options.reading(),
            outputs=[o for o in outputs if o],
        )

    def check_pattern(self, pretokenizer: Pretokenizer) -> None:
        """A split pattern of one's own may leave characters out of every pre-token, and such text is
        never counted (``'\\w+'`` drops spaces and punctuation): say how many characters of a sample of
        the first input it drops, in a warning, or, with ``strict_pattern``, an error before any work."""
        if pretokenizer.pattern.builtin or not self.files:
            return
        sample = sample_documents(self.files[0], self.store)
        check_sample(pretokenizer, sample, f"a sample of {self.files[0].name}", self.options.strict_pattern)

    def plan(self, pretokenizer: Pretokenizer, threads: int | None = None) -> None:
        """The files cut into byte ranges: ``--chunk-size`` bytes each, or sized for ``threads`` worker
        threads (``None``: as large as a task may be, for counting in this process)."""
        chunk_size = self.options.chunk_size or partition_size(self.input_bytes, threads, self.store.settings)
        self.ranges = plan_ranges(self.files, chunk_size, pretokenizer, self.store)
        compressed = sum(1 for f in self.files if f.compression)
        if compressed == len(self.files):  # the chunk size cuts nothing: the sizes are not the text's
            sizes = f"{format_bytes(self.input_bytes)} compressed, {plural(len(self.ranges), 'partition')} " \
                "(a compressed file is read whole, as one task)"
        else:
            whole = f" ({compressed} compressed, each read whole as one task)" if compressed else ""
            sizes = f"{format_bytes(self.input_bytes)}{whole}, {plural(len(self.ranges), 'partition')} of " \
                f"about {format_bytes(chunk_size)}"
        log.info("%s, %s", plural(len(self.files), "input file"), sizes)
        if pretokenizer.pattern.cut_rule is None and any(
            f.size > chunk_size and not f.has_records for f in self.files
        ):
            log.warning(
                "the split pattern is a regex of your own, with no rule for where its text may be cut: "
                "text files are cut only where a special token starts, so a long document without one "
                "is one task"
            )
        if self.options.chunk_size and chunk_size < TINY_CHUNK and len(self.ranges) > 1:
            log.warning(
                "--chunk-size %d is %d bytes, so %s, each a Dask task; sizes take units (e.g. %dMiB)",
                chunk_size, chunk_size, plural(len(self.ranges), "partition"), chunk_size,
            )  # fmt: skip

    @property
    def input_bytes(self) -> int:
        """The inputs' bytes: their sizes, and, once read, what a file whose server gave no size held."""
        return sum(f.size for f in self.files) + self.unsized_read

    @property
    def empty(self) -> bool:
        """Whether the inputs hold nothing to read: no bytes (and no file whose size its server kept)."""
        return all(f.sized and not f.size for f in self.files)

    def key(self, settings: CountSettings) -> str:
        """A digest of the planned ranges and the settings: a name for what this job counts."""
        return tokenize([r.key() for r in self.ranges], settings.key())

    @property
    def largest_range(self) -> int:
        return max((r.text_bytes for r in self.ranges), default=0)

    def expected_largest_range(self) -> int:
        """About the largest partition ``plan`` will make on the embedded cluster, from the files' sizes
        before it plans: what decides which compiled loops its workers warm up as they start (a
        compressed file is one partition, of more text than its size)."""
        threads = self.options.workers or default_workers()  # the embedded cluster's: one per worker
        chunk = self.options.chunk_size or partition_size(self.input_bytes, threads, self.store.settings)
        return max((f.size if f.compression else min(f.size, chunk) for f in self.files), default=0)

    @property
    def input_urls(self) -> list[str]:
        return [f.url for f in self.files]

    @property
    def inputs_shown(self) -> list[str]:
        """The input URLs as reports name them: a web URL's credentials hidden (``web.shown``)."""
        return [shown(f.url) for f in self.files]

    @property
    def embedded(self) -> bool:
        """Whether the job's cluster is a LocalCluster on this machine (``is_embedded``), before it starts."""
        client = self.options.client
        return is_embedded(client) if client is not None else not self.options.on_scheduler

    @property
    def starts_cluster(self) -> bool:
        """Whether the job starts a LocalCluster of its own (no client given, no scheduler named)."""
        return not (self.options.client or self.options.on_scheduler)

    @contextmanager
    def cluster(self, in_threads: bool = False, warm_up: WarmUp = NO_WARM_UP) -> Iterator[Client]:
        """The job's client. A LocalCluster it starts runs the tasks in threads of this process with
        ``in_threads`` (for tasks that run compiled code, which releases the GIL), and ``warm_up``s as
        it starts."""
        opts = self.options
        where = (opts.scheduler, opts.workers, opts.client, opts.scheduler_file)
        with dask_client(*where, in_threads, warm_up) as client:
            try:
                yield client
            finally:
                if self.plugins and (opts.client or opts.on_scheduler):  # it outlives the job
                    unregister_plugins(client, self.plugins)

    def preflight(self, client: Client, work_dir: str | None, outputs: Sequence[str | None] = ()) -> None:
        """Check before any task that every worker can read the inputs and write the work directory
        (if the tasks write one) and the ``outputs`` the tasks write (all absolute by now:
        ``storage.absolute``)."""
        urls = [*self.input_urls, *[u for u in (work_dir, *outputs) if u]]
        packages = required_packages(urls, [f.compression for f in self.files])
        places = [Place(url, "input") for url in self.input_urls[:1]]
        if work_dir and self.options.work_dir:
            places.append(Place(work_dir, "--work-dir", True))
        elif work_dir:  # the job's own scratch space: the user can only name another
            made = f"the temporary work directory this job made{self._scratch_beside}"
            places.append(Place(work_dir, made, True, instead="--work-dir"))
        places += [Place(o, "--out", True) for o in outputs if o]
        if is_embedded(client):  # the LocalCluster's workers share this machine's disk
            places = [p for p in places if not (p.writes and is_local(p.url))]
        self.plugins = check_workers(
            client,
            packages,
            places=places,
            embedded=not (self.options.client or self.options.on_scheduler),  # the LocalCluster we started
            store=self.store,
            ship_package=self.options.ship_package,
        )

    @contextmanager
    def work_directory(self, beside: str | None = None) -> Iterator[str]:
        """The user's work directory (kept, so a re-run reuses its shards), or a temporary one: on
        this machine, or, ``beside`` an output on storage the workers reach, a hidden folder next to
        it. A temporary one is removed afterwards."""
        work_dir = self.options.work_dir
        if work_dir:
            fs, path = self.store.fs(work_dir)
            try:
                fs.makedirs(path, exist_ok=True)
            except Exception as error:
                raise BpeDaskError(f"cannot use --work-dir {work_dir}: {describe(error)}") from None
            yield work_dir
            return
        if beside:
            self._scratch_beside = f" beside --out {beside}"
            parent, _, name = beside.rstrip("/").rpartition("/")
            scratch = f"{parent}/.{name}.work-{uuid.uuid4().hex[:12]}"
            fs, path = self.store.fs(scratch)
            try:
                yield scratch
            finally:
                if fs.exists(path):
                    fs.rm(path, recursive=True)
            return
        temporary = tempfile.mkdtemp(prefix="bpe-dask-")
        try:
            yield temporary
        finally:
            shutil.rmtree(temporary, ignore_errors=True)


def partition_size(input_bytes: int, threads: int | None, settings: dict | None = None) -> int:
    """Bytes per map task when none is given: about ``bpe-dask.partitions-per-thread`` tasks per
    worker thread, so that every thread has work and one that finishes early takes another, within
    ``bpe-dask.partition-min`` (each partition costs a dict of its own words, a shard and a share of
    the reduce) and ``bpe-dask.partition-max`` (a task's memory, and the work lost with a worker).
    ``threads=None``: as large as a task may be."""
    largest = config.size("partition-max", settings)
    if threads is None:
        return largest
    per_thread = config.count("partitions-per-thread", settings, least=1)
    wanted = -(-input_bytes // max(1, per_thread * threads))
    return max(min(config.size("partition-min", settings), largest), min(largest, wanted))


def cluster_threads(client: Client) -> int:
    return sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values()) or 1


def check_sample(pretokenizer: Pretokenizer, documents: Sequence[str], what: str, strict: bool) -> None:
    """``Job.check_pattern`` on ``documents``, a sample of the input that ``what`` names: a warning,
    or with ``strict`` an error, if the split pattern leaves any of their characters out of every
    pre-token (special tokens aside). Documents held in memory and Dask collections are checked on
    their first documents (``jobs.from_memory``, ``jobs.dask_collections``).

    >>> from bpe_dask.rules.pretokenize import Pretokenizer
    >>> check_sample(Pretokenizer([], r"\\w+"), ["a b!"], "the first document", strict=True)
    Traceback (most recent call last):
    bpe_dask.errors.BpeDaskError: the split pattern '\\w+' leaves 2 of the 4 characters ...(--strict-pattern)
    """
    if pretokenizer.pattern.builtin:
        return
    dropped = "".join(pretokenizer.uncovered(document) for document in documents)
    if not dropped:
        return
    total = sum(map(len, documents))
    examples = ", ".join(repr(c) for c in list(dict.fromkeys(dropped))[:5])
    message = (
        f"the split pattern '{pretokenizer.pattern.spec}' leaves {len(dropped):,} of the {total:,} "
        f"characters of {what} out of every pre-token ({100 * len(dropped) / total:.1f} %; {examples}): "
        "such text is never counted, and the tokenizer cannot encode it"
    )
    if strict:
        raise BpeDaskError(f"{message} (--strict-pattern)")
    log.warning("%s; --strict-pattern makes this an error", message)


def report_bad_records(bad: BadRecords) -> None:
    """Say what ``--on-bad-record skip`` left out."""
    if bad.count:
        log.warning("skipped %s; the first: %s", plural(bad.count, "bad record"), bad.first)


def run_tasks(client: Client, tasks: list[Delayed], progress: TaskProgress | PartitionProgress | None = None,
              sizes: Sequence[int] = (), extra: Callable[[Any], int] | None = None,
              stop: str | None = None) -> list:  # fmt: skip
    """Compute ``tasks`` and gather their results; a failure cancels them all and is one line.

    Cancelling does not stop a task already running on a cluster the job does not own: one that
    commits an output at its end (``stages.encode.stream_shards``) is told through the Dask event
    ``stop``, set here first, which it looks at just before committing (``stages.read_events.stopped``).

    The first ``len(sizes)`` tasks are map tasks over that many input bytes each: ``progress``
    hears how far each has read as it runs, and of each as it finishes (with ``extra`` of its
    result, such as its tokens).
    """
    size_of = {task.key: size for task, size in zip(tasks, sizes, strict=False)}
    listening = progress.listening(client, size_of) if progress is not None else nullcontext()
    futures = client.compute(tasks)
    try:
        with failures_explained(client), listening:
            if progress is not None:
                for future in as_completed(futures[: len(sizes)]):
                    if future.status != "finished":
                        break  # gathering raises its error
                    result = extra(future.result()) if extra else 0
                    progress.task_done(size_of[future.key], result, future.key)
            return client.gather(futures)
    except BaseException:
        if stop is not None:
            with contextlib.suppress(Exception):  # the scheduler is gone: so are the tasks
                Event(stop, client=client).set()
        client.cancel(futures)  # a failed job stops at once, before its work directory goes
        raise


def is_embedded(client: Client) -> bool:
    """Whether the cluster is a LocalCluster on this machine (its workers share our disk)."""
    return isinstance(getattr(client, "cluster", None), LocalCluster)


def other_processes_peak_rss_bytes(client: Client) -> dict[str, int]:
    """The peak resident memory of each worker that is a process of its own, by address: a worker
    in this process (a LocalCluster of threads) is this process, whose peak the report gives."""
    here = os.getpid()
    peaks = client.run(_process_and_peak)
    return {address: peak for address, (pid, peak) in peaks.items() if pid != here}


def _process_and_peak() -> tuple[int, int]:
    return os.getpid(), peak_rss_bytes()


def peak_rss_bytes() -> int:
    """The peak resident memory of this process so far."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024
