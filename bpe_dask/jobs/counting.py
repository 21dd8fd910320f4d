"""The count stage of a job: a source in, its word counts out (``CountResult``), on threads here or on a
cluster, whatever the kind of source.

``placement`` decides, before any cluster starts, where the parts are counted and with what, the
same for every job and for the command line and the Python API alike: documents held in memory on
threads of this process (they cannot leave it); a Dask collection on its cluster; files on a
cluster, or here when they are small (``bpe-dask.in-process-limit``) and nothing was asked of a
cluster (starting one costs seconds). A LocalCluster the job starts runs its tasks in
threads of this process when the compiled scanner counts them (it releases the GIL), and its
workers warm up the compiled loops the tasks will run as they start. ``count_source`` then runs
the stage in the job's ``Run``: the parts planned for the threads there are, counted by
``on_threads`` or ``on_cluster``, with one progress line and one log line of what was counted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields, replace
from typing import Any

from bpe_dask import interrupts
from bpe_dask import settings as config
from bpe_dask.cluster.client import NO_WARM_UP, WarmUp
from bpe_dask.cluster.local import cores, planned_workers
from bpe_dask.cluster.progress import MapProgress
from bpe_dask.cluster.tasks import cluster_threads
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.counts_table import write_counts
from bpe_dask.io.storage import Store
from bpe_dask.jobs.context import Job, Run, report_bad_records
from bpe_dask.jobs.counted import CountResult
from bpe_dask.jobs.on_cluster import count_on_cluster
from bpe_dask.jobs.on_threads import count_here
from bpe_dask.jobs.options import JobOptions
from bpe_dask.jobs.report import input_bytes
from bpe_dask.sources.part import UNKNOWN_SIZE
from bpe_dask.sources.source import Source
from bpe_dask.stages.count import CountSettings, counting_engine, counts_compiled, new_counter
from bpe_dask.stages.counters import COMPILED_MIN_BYTES
from bpe_dask.wording import format_bytes, plural

log = logging.getLogger(__name__)

# Options of a job on a cluster, which counting here cannot honour: refused rather than ignored.
CLUSTER_ONLY = (
    "client",
    "scheduler",
    "scheduler_file",
    "work_dir",
    "chunk_size",
    "input_format",
    "in_process",
    "ship_package",
    "ship_credentials",
)


@dataclass(frozen=True)
class Placement:
    """Where a source's parts are counted: ``here`` on ``threads`` threads of this process, each
    counter made for ``size`` bytes of text; else on a cluster, a LocalCluster the job starts
    running them ``in_threads`` of this process and warming up ``warm_up``. ``settings`` are those
    the parts count with (the compiled engine, where the tasks share this process)."""

    settings: CountSettings
    here: bool
    threads: int = 1
    size: int | None = None  # None: the text of the parts, once planned
    in_threads: bool = False
    warm_up: WarmUp = NO_WARM_UP


def start_counting(
    inputs: Any,
    opts: JobOptions,
    out: str | None,
    check_out: Callable[[str, bool, Store], None],
    iterating: dict,
    writes_out: bool = False,
) -> tuple[Job, Source, Placement]:
    """The first steps of every job that counts: 1. its output ``out`` may be written
    (``check_out``), 2. what its input is (``Job.find_source``: what the job writes left out, ``out``
    among the files its tasks write where ``writes_out``), 3. where it is counted (``placement``)."""
    job = Job.start(opts, inputs, [out, opts.work_dir])
    if out:
        check_out(out, opts.overwrite, job.store)
    writes = [out] if writes_out else []
    source = job.find_source(inputs, exclude=[out, opts.work_dir], outputs=writes, **iterating)
    return job, source, placement(job, source, job.options.count_settings())


def counting_run(
    job: Job, source: Source, where: Placement, out: str | None, outputs: Sequence[str | None] = ()
) -> AbstractContextManager[Run]:
    """The ``Run`` a source is counted in (``Job.running``), as ``where`` says; on a cluster that is
    not an embedded LocalCluster, its temporary work directory is made beside ``out``, on storage the
    workers reach."""
    pretokenizer, beside = where.settings.pretokenizer(), None if job.embedded else out
    return job.running(source, where.here, pretokenizer, where.in_threads, where.warm_up, beside, outputs)


def placement(
    job: Job,
    source: Source,
    settings: CountSettings,
    stages: tuple[str, ...] = ("count", "reduce"),
) -> Placement:
    """Where ``source`` is counted (``module docstring``); ``stages``: the compiled loops the tasks
    run, to warm up."""
    opts = job.options
    if source.reads_on == "here":
        return _in_memory(source, settings, opts)
    if source.reads_on == "cluster":
        if opts.in_process:
            raise BpeDaskError("in_process=True counts here: a Dask collection is counted on its cluster")
        if opts.chunk_size:
            log.warning(
                "chunk_size does not apply to a Dask collection: each of its partitions is a task "
                "(repartition it for others)"
            )
    else:
        small = source.size <= config.size("in-process-limit", job.store.settings)
        # What only a cluster does (a work directory kept for a re-run, the package or credentials
        # sent to workers, the merge on a worker) asks for one, as a place to run does.
        asked = opts.wants_cluster or opts.work_dir or opts.ship_package or opts.ship_credentials
        auto = opts.in_process is None and small and not (asked or opts.merge_on == "worker")
        if opts.in_process or source.empty or auto:
            return Placement(settings, True)  # counters sized once the files are planned (count_source)
    largest = source.largest_part(planned_workers(opts.workers), opts.chunk_size)  # one thread a worker
    return _on_cluster(job, settings, source.size, largest, stages)


def _on_cluster(
    job: Job, settings: CountSettings, size: int, largest: int, stages: tuple[str, ...]
) -> Placement:
    in_threads = job.starts_cluster and counts_compiled(settings, size)
    if in_threads:  # loaded once in this process, it pays for itself on the job's bytes
        settings = replace(settings, engine="numba")
    patterns = (settings.pattern,) if counts_compiled(settings, largest) else ()
    return Placement(
        settings, False, in_threads=in_threads, warm_up=WarmUp(patterns, stages) if patterns else NO_WARM_UP
    )


def _in_memory(source: Source, settings: CountSettings, opts: JobOptions) -> Placement:
    """Documents held here, on ``workers`` threads (one per core by default); options of a job on a
    cluster, which counting here cannot honour, are refused rather than ignored. Read ahead first:
    an input too small for the compiled counter is counted in this thread."""
    defaults = {f.name: f.default for f in fields(JobOptions)}
    given = [name for name in CLUSTER_ONLY if getattr(opts, name) != defaults[name]]
    if given or opts.merge_on == "worker":
        name = given[0] if given else "merge_on='worker'"
        raise BpeDaskError(
            f"documents held in memory are counted in this process, on threads (workers=N): "
            f"{name} does not apply"
        )
    held = source.read_ahead(COMPILED_MIN_BYTES)
    if not source.more and not counts_compiled(settings, held):  # no threads, no compiled code to load
        return Placement(settings, True, 1, held)
    return Placement(settings, True, opts.workers or cores(), max(held, COMPILED_MIN_BYTES))


def count_source(
    job: Job, source: Source, where: Placement, run: Run, out: str | None = None, overwrite: bool = True
) -> CountResult:
    """Count ``source`` where ``where`` says, in ``run``; the counts are also written to ``out`` (a
    Parquet file, the settings recorded), which they may replace with ``overwrite``."""
    started = time.perf_counter()
    settings, opts = where.settings, job.options
    threads = None if where.here else cluster_threads(run.client)  # here: parts as large as a task may be
    parts = interrupts.call(source.plan, settings.pretokenizer(), opts.chunk_size, threads)
    progress = MapProgress("count", *source.totals(parts), unit=source.unit) if opts.show_progress else None
    if where.here:
        size = where.size if where.size is not None else sum(part.text_bytes for part in parts)
        log.info("counting with %s on %s", counting_engine(settings, size), plural(where.threads, "thread"))
        counters = [new_counter(settings, size) for _ in range(where.threads)]
        counted = count_here(parts, settings, job.store, counters, progress)
        if out:  # as the reduce records it: the settings, and the special tokens seen
            recorded = {**settings.recorded(), "special_tokens_seen": vars(counted.specials)}
            write_counts(counted.hand_over(), out, job.store, recorded, overwrite)
            counted.path = out
    else:
        largest = source.largest_part(threads, opts.chunk_size)
        log.info("counting with %s: %s", _engines(settings, largest), plural(len(parts), "partition"))
        counted = count_on_cluster(
            run.client, source, parts, settings, run.work, job.store, out, overwrite, progress
        )
    counted.input_files, counted.store = source.shown, job.store
    counted.input_bytes = input_bytes(source, counted.read_bytes)
    log.info(
        "%s of text in %s of input, %s (%d reused), counted in %.2f s",
        format_bytes(counted.text_bytes),
        format_bytes(counted.input_bytes),
        plural(counted.partitions, "partition"),
        counted.partitions_reused,
        time.perf_counter() - started,
    )
    report_bad_records(counted.bad)
    return counted


def _engines(settings: CountSettings, size: int) -> str:
    """The engine parts count with, for an input of ``size`` bytes; where its size is not known, each
    part picks by its own text."""
    engine = counting_engine(settings, size)
    if size == UNKNOWN_SIZE and counts_compiled(settings, size) and not counts_compiled(settings, 0):
        engine += (
            f" for partitions of {format_bytes(COMPILED_MIN_BYTES)} of text or more, else "
            f"{counting_engine(settings, 0)}"
        )
    return engine
