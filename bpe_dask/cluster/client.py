"""Cluster set-up: options in, a connected ``distributed.Client`` out.

Takes a scheduler address (or the scheduler file that ``dask scheduler --scheduler-file``, dask-jobqueue
and dask-mpi write), a worker count or an existing client; gives a client for the duration of a ``with``
block. With no scheduler it starts a LocalCluster sized to the machine (``local.cluster_size``: one
thread per core by default, never more than run at once), its workers started so that a signal stops
them (``local.start_workers``): threads in this process when the job's tasks run compiled code, which
releases the GIL (no worker processes to start, and the compiled code loaded once); else one
single-threaded worker process each, since the ``regex`` module's pre-tokenizing holds the GIL. Either
way it warms up (``WarmUp``: the compiled loops the job's tasks will run, compiled or loaded from
numba's cache as it starts, not in the first task).
Also: the cluster failing under a job as one line (``failures_explained``), and Dask's logging kept to
warnings (``quiet_dask_errors``).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import socket
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import click
import dask
from distributed import Client, LocalCluster, Security
from distributed.comm import parse_address, parse_host_port
from distributed.system import MEMORY_LIMIT

from bpe_dask import interrupts
from bpe_dask.cluster.dashboard import attach_on_first_visit
from bpe_dask.cluster.local import close_cluster, cluster_size, how_many, start_workers
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.storage import describe
from bpe_dask.settings import dask_seconds, given_by

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WarmUp:
    """What the workers of an embedded cluster run compiled, to warm up as they start: ``stages`` of
    ``stages.warm_up`` (``count``, ``reduce``, ``encode``, ``evaluate``) with built-in ``patterns``."""

    patterns: tuple[str, ...] = ("gpt2",)
    stages: tuple[str, ...] = ()


NO_WARM_UP = WarmUp()


@contextmanager
def dask_client(
    scheduler: str | None = None,
    workers: int | None = None,
    client: Client | None = None,
    scheduler_file: str | None = None,
    in_threads: bool = False,
    warm_up: WarmUp = NO_WARM_UP,
) -> Iterator[Client]:
    """The given client, a client of ``scheduler`` (or of the scheduler ``scheduler_file`` names), or
    a client of a new LocalCluster: of ``workers`` threads in this process with ``in_threads``, else
    of as many worker processes; it ``warm_up``s as it starts."""
    if client is not None:
        yield client
    elif scheduler or scheduler_file:
        source = given_by(scheduler) if scheduler else None  # DASK_SCHEDULER_ADDRESS, for the CLI
        named_by = f" (from {source})" if source else "" if scheduler else f" (named by {scheduler_file})"
        yield from _remote_client(scheduler or scheduler_address(scheduler_file), named_by)
    else:
        yield from _local_client(workers, in_threads, warm_up)


SCHEDULER_FILE_LIMIT = 16 * 2**20  # characters; Dask's are a few hundred


def scheduler_address(path: str) -> str:
    """The address in a Dask scheduler file: the JSON that ``dask scheduler --scheduler-file`` (and
    dask-jobqueue, dask-mpi) write, which ``distributed.Client(scheduler_file=...)`` reads. Read once,
    at once: Dask's own client would wait for a missing file forever.

    >>> _ = open("scheduler.json", "w").write('{"type": "Scheduler", "address": "tls://10.0.0.5:8786"}')
    >>> scheduler_address("scheduler.json")
    'tls://10.0.0.5:8786'
    >>> scheduler_address("nowhere.json")
    Traceback (most recent call last):
    bpe_dask.errors.BpeDaskError: cannot read the scheduler file nowhere.json: No such file or directory
    """
    try:
        with open(path, encoding="utf-8") as f:
            address = json.loads(f.read(SCHEDULER_FILE_LIMIT)).get("address")  # not a whole corpus
    except OSError as error:
        reason = error.strerror or describe(error)
        raise BpeDaskError(f"cannot read the scheduler file {path}: {reason}") from None
    except (ValueError, AttributeError, RecursionError):  # not UTF-8 (a ValueError), not a JSON object
        address = None
    if not isinstance(address, str) or "://" not in address:
        raise BpeDaskError(
            f"{path} is not a Dask scheduler file: the JSON file `dask scheduler --scheduler-file` writes, "
            'with the scheduler\'s "address"'
        )
    return address


def _remote_client(address: str, named_by: str = "") -> Iterator[Client]:
    seconds = dask_seconds("distributed.comm.timeouts.connect")  # for a scheduler to answer
    log.info("connecting to %s%s", address, named_by)
    try:
        _answers_as_a_scheduler(address, seconds)
        _has_tls_settings(address)
        client = Client(address, timeout=f"{seconds}s")
    except (OSError, TimeoutError, ValueError) as error:
        reason = describe(error)
        raise BpeDaskError(f"cannot reach the Dask scheduler at {address}{named_by}: {reason}") from None
    with client:
        link = f" (dashboard: {client.dashboard_link})" if dashboard_works(client) else ""
        log.info("connected to %s%s", address, link)
        yield client


def _has_tls_settings(address: str) -> None:
    """Raise if a ``tls://`` address meets a client without Dask's TLS settings: Dask's client takes
    its certificates from Dask's config (``distributed.comm.tls``, read by ``Security()``), and
    without them fails with a TypeError. A configured security loader gives its own."""
    if parse_address(address)[0] != "tls" or dask.config.get("distributed.client.security-loader", None):
        return
    if Security().get_connection_args("client").get("ssl_context") is None:  # reads the key files too
        raise ValueError(
            "a tls:// scheduler needs Dask's TLS settings on this machine: distributed.comm.tls.ca-file, "
            "distributed.comm.tls.client.cert and .key, in Dask's config (~/.config/dask/*.yaml) or as "
            "DASK_DISTRIBUTED__COMM__TLS__CA_FILE, ..."
        )


def _answers_as_a_scheduler(address: str, seconds: float) -> None:
    """Raise at once if nothing listens at a ``tcp://`` address (Dask would retry for its timeout),
    and within ``seconds`` if what listens is not a Dask server: Dask's own client would wait
    forever for a handshake from, say, the dashboard's HTTP port. A Dask server speaks first (its
    handshake), so a server that says nothing, or something else, is not one."""
    protocol, location = parse_address(address)
    if protocol != "tcp":
        return  # TLS and others: Dask's own connect, with its timeout
    host, port = parse_host_port(location)
    with socket.create_connection((host, port), timeout=min(5.0, seconds)) as probe:
        probe.settimeout(seconds)
        try:
            first = probe.recv(256)
        except TimeoutError:
            first = b""
    if b"compression" not in first:  # the first key of Dask's handshake
        heard = "said nothing" if not first else "answered in another protocol"
        raise TimeoutError(
            f"it {heard} in {seconds:g} s, so it is not a Dask scheduler (the dashboard's HTTP port, "
            "8787 by default?); a scheduler listens on 8786 unless told otherwise"
        )


def has_bokeh() -> bool:
    """Dask's dashboard needs bokeh; without it, its link leads to a page asking for bokeh."""
    return importlib.util.find_spec("bokeh") is not None


def dashboard_works(client: Client) -> bool:
    if not client.scheduler_info().get("services", {}).get("dashboard"):
        return False
    try:
        return bool(client.run_on_scheduler(has_bokeh))
    except Exception:
        return False


def _local_client(
    asked: int | None, in_threads: bool = False, warm_up: WarmUp = NO_WARM_UP
) -> Iterator[Client]:
    if asked is not None and asked < 1:
        raise BpeDaskError(f"workers= must be at least 1, got {asked}")
    workers, capped = cluster_size(asked, processes=not in_threads)
    if capped:  # never more than the machine runs: the rest would only take turns, or share out its memory
        log.warning("%s", capped)
    if in_threads:  # the job's tasks run here: warming up here too, from now on
        threading.Thread(target=_warm_up, args=(warm_up.patterns, warm_up.stages), daemon=True).start()
        # One worker in this process, on loopback TCP: its dashboard link then names 127.0.0.1, where
        # the dashboard listens (an in-process ``inproc://`` cluster would name the machine's address).
        shape = {"threads_per_worker": workers, "processes": False, "protocol": "tcp://", "host": "127.0.0.1"}
    else:
        # This module as the workers' preload (``dask_setup``, below), with its options, if there is
        # anything to warm.
        argv = [*[f"--pattern={p}" for p in warm_up.patterns], *[f"--stage={s}" for s in warm_up.stages]]
        preload = {"preload": [__name__], "preload_argv": argv} if warm_up.stages else {}
        shape = {"threads_per_worker": 1, "processes": True, **preload}
    # Distributed's statistical profiler samples the worker's stack every 10 ms; on pure-Python
    # tasks that costs several percent, for a dashboard view the embedded cluster rarely needs.
    verbose = log.getEffectiveLevel() <= logging.DEBUG  # -v: the workers say what Dask says at INFO
    with dask.config.set({"distributed.worker.profile.enabled": False}), ExitStack() as stack:
        # The scheduler first, with no workers (a moment), started with SIGINT blocked in the threads it
        # starts, and so in the worker processes they start later: those never get a terminal's Ctrl-C
        # (each would print a traceback). A signal meanwhile is raised once it is up, and closes it.
        with interrupts.deferred(shield_children=True):
            cluster = LocalCluster(
                n_workers=0,
                **shape,
                # Each worker process's share of the memory, as Dask's own LocalCluster of that many gives it.
                memory_limit=MEMORY_LIMIT // (1 if in_threads else workers),
                # Its HTTP server on a free port (8787 may be another cluster's); the dashboard is
                # attached to it at the first visit (``dashboard.attach_on_first_visit``).
                dashboard_address="127.0.0.1:0",
                scheduler_kwargs={"dashboard": False},
                silence_logs=logging.INFO if verbose else logging.WARNING,  # the workers' own level
            )
            stack.callback(close_cluster, cluster)
            client = stack.enter_context(Client(cluster))
        # Then the workers, which take seconds (many, minutes): a signal stops them at once.
        start_workers(cluster, 1 if in_threads else workers)
        link = ""
        if has_bokeh():  # without it, the link would lead to a page asking for bokeh
            attach_on_first_visit(cluster)
            link = f" (dashboard: {client.dashboard_link})"
        where = " in this process (compiled tasks)" if in_threads else ""
        log.info("started a LocalCluster of %s%s%s", how_many(workers, not in_threads), where, link)
        try:
            yield client
        except BaseException:
            if in_threads:
                _abandon_running_tasks(cluster)
            raise


def _abandon_running_tasks(cluster: LocalCluster) -> None:
    """Close the workers of a cluster of threads without waiting for the tasks they run: the job
    stopped (Ctrl-C, an error), and nothing stops a thread from outside, so closing as usual would
    wait for a long task to end. The task threads are daemons, gone with the process; a map task
    stops at its next block (``stages.read_events``), and what any of them writes goes to the
    job's temporary files."""
    for worker in list(cluster.workers.values()):
        try:
            cluster.sync(worker.close, executor_wait=False, reason="bpe-dask: the job stopped")
        except Exception:  # closing as usual follows
            log.debug("closing a worker at once failed", exc_info=True)


@click.command()
@click.option("--pattern", "patterns", multiple=True)
@click.option("--stage", "stages", multiple=True)
def dask_setup(worker: object, patterns: tuple[str, ...], stages: tuple[str, ...]) -> None:
    """Dask's preload hook (``_local_client``'s), run in each worker of the embedded cluster as it
    starts: compile the loops ``stages`` run with ``patterns`` (or load them from numba's cache, with
    the table of character classes) in the background, while the cluster finishes starting and the
    job plans, not in the first task. One worker compiles while the others wait to load what it
    saved (``compiled.compile_once``)."""
    threading.Thread(target=_warm_up, args=(patterns, stages), name="bpe-dask-warm-up", daemon=True).start()


def _warm_up(patterns: tuple[str, ...], stages: tuple[str, ...]) -> None:
    if not stages:
        return
    try:
        from bpe_dask.stages.warm_up import compile_stages

        compile_stages(patterns, stages)
    except Exception:  # only ever an optimisation: the first task will say what is wrong
        log.debug("warming up %s for %s failed", ", ".join(stages), ", ".join(patterns), exc_info=True)
