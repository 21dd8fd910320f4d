"""What every job shares: options and inputs in; planned byte ranges, a cluster and finished tasks out.

Every job opens the same way: ``Job.start`` folds the environment's credentials into the storage
options, the job checks its output, and ``Job.plan`` expands the inputs and cuts them into byte
ranges. Its tasks then run on ``Job.cluster`` (the given client, a scheduler, or a LocalCluster)
once ``Job.preflight`` has checked the workers, through ``run_tasks``, which turns a failure
into one line. ``count_job``, ``train_job`` and ``encode_job`` are built from these.
"""

from __future__ import annotations

import logging
import resource
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from dask.delayed import Delayed
from distributed import Client, LocalCluster

from . import progress
from .cluster import dask_client, failures_explained
from .errors import BpeDaskError
from .options import JobOptions
from .plan import ByteRange, InputFile, expand_inputs, plan_ranges
from .preflight import check_workers
from .pretokenize import Pretokenizer
from .storage import describe, filesystem, job_storage_options, required_packages

log = logging.getLogger(__name__)


@dataclass
class Job:
    """One run of a job: its options, the storage options it ships to workers, and its plan."""

    options: JobOptions
    storage_options: dict = field(repr=False)  # may hold credentials
    files: list[InputFile] = field(default_factory=list)
    ranges: list[ByteRange] = field(default_factory=list)

    @classmethod
    def start(cls, options: JobOptions, urls: Sequence[str | None]) -> Job:
        """A job that reads and writes ``urls``: an ``s3://`` job takes the AWS environment along."""
        return cls(options, job_storage_options(options.storage_options, [u for u in urls if u]))

    def plan(
        self, inputs: Sequence[str], pretokenizer: Pretokenizer, exclude: Sequence[str | None] = ()
    ) -> None:
        """Inputs to byte ranges; the job's own outputs (``exclude``) are never read back as inputs."""
        self.files = expand_inputs(inputs, self.storage_options, exclude=[e for e in exclude if e])
        self.ranges = plan_ranges(self.files, self.options.chunk_size, pretokenizer, self.storage_options)
        log.info(
            "%d input files, %d bytes, %d partitions", len(self.files), self.input_bytes, len(self.ranges)
        )

    @property
    def input_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def input_urls(self) -> list[str]:
        return [f.url for f in self.files]

    @contextmanager
    def cluster(self) -> Iterator[Client]:
        with dask_client(self.options.scheduler, self.options.workers, self.options.client) as client:
            yield client

    def preflight(self, client: Client, work_dir: str, outputs: Sequence[str | None] = ()) -> None:
        """Check before any task that every worker can read the inputs and write the outputs."""
        urls = [*self.input_urls, work_dir, *[o for o in outputs if o]]
        packages = required_packages(urls, [f.compression for f in self.files])
        check_workers(
            client,
            packages,
            work_dir=None if is_embedded(client) else work_dir,  # LocalCluster workers share our disk
            inputs=self.input_urls[:1],
            storage_options=self.storage_options,
            ship_package=self.options.ship_package,
        )

    @contextmanager
    def work_directory(self) -> Iterator[str]:
        """The user's work directory (kept, so a re-run reuses its shards), or a temporary one."""
        work_dir = self.options.work_dir
        if work_dir:
            fs, path = filesystem(work_dir, self.storage_options)
            try:
                fs.makedirs(path, exist_ok=True)
            except Exception as error:
                raise BpeDaskError(f"cannot use --work-dir {work_dir}: {describe(error)}") from None
            yield work_dir
            return
        temporary = tempfile.mkdtemp(prefix="bpe-dask-")
        try:
            yield temporary
        finally:
            shutil.rmtree(temporary, ignore_errors=True)


def run_tasks(client: Client, tasks: list[Delayed], show_progress: bool) -> list:
    """Compute ``tasks`` and gather their results; a failure cancels them all and is one line."""
    futures = client.compute(tasks)
    try:
        if show_progress:
            progress.show_task_progress(futures)
        with failures_explained(client):
            return client.gather(futures)
    except BaseException:
        client.cancel(futures)  # a failed job stops at once, before its work directory goes
        raise


def is_embedded(client: Client) -> bool:
    """Whether the cluster is a LocalCluster on this machine (its workers share our disk)."""
    return isinstance(getattr(client, "cluster", None), LocalCluster)


def peak_rss_bytes() -> int:
    """The peak resident memory of this process so far."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024
