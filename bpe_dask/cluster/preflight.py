"""Preflight: before any work, check that every worker can run the job.

Takes a client and what the job needs (packages, a work directory the workers must share);
gives nothing, or a one-line ``BpeDaskError`` naming the workers that lack something and
how to fix it. ``ship_package`` uploads this client's ``bpe_dask`` to the workers instead.

The probes are pickled by value, so they run even on a worker that cannot import bpe_dask.
"""

from __future__ import annotations

import logging
import sys
import tempfile
import uuid
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import cloudpickle
from distributed import Client, WorkerPlugin

from bpe_dask.cluster.tasks import workers_of
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.outputs import missing_folders as _missing_folders
from bpe_dask.io.storage import LOCAL, Store, describe, is_local
from bpe_dask.version import __version__

log = logging.getLogger(__name__)

BASE_PACKAGES = ("bpe_dask", "regex", "pyarrow", "fsspec", "dask", "distributed")
WORKER_WAIT = 60.0  # seconds for a first worker to join a scheduler that has none


def probe_modules(names: list[str]) -> dict[str, str | None]:
    """On a worker: the version of each module that imports, None for those that don't."""
    import importlib

    found: dict[str, str | None] = {}
    for name in names:
        try:
            module = importlib.import_module(name)
        except Exception:
            found[name] = None
        else:
            found[name] = str(getattr(module, "__version__", "installed"))
    return found


def probe_path(url: str, options: dict, write: bool = False) -> str | None:
    """On a worker: None if it sees the file ``url`` (and, with ``write``, can write beside it),
    else why not, in a few words. ``options`` are the job's storage options, as a plain dict: this
    runs where bpe_dask may not import, so it takes no ``Store``."""
    import uuid

    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(url, **({} if "://" not in url else options))
        if not fs.exists(path):
            return "not there"
        if write:
            probe = f"{path.rpartition('/')[0]}/.bpe-dask-probe-{uuid.uuid4().hex}"
            fs.pipe_file(probe, b"")
            fs.rm_file(probe)
        return None
    except Exception as error:
        text = " ".join(str(error).split())[:200]
        return f"{type(error).__name__}: {text}" if text else type(error).__name__


class QuietUserErrors(WorkerPlugin):
    """Keeps workers from logging a traceback for a task that stopped on a user error.

    The error still reaches the client, which reports it in one line. Each job's is its own (a
    name of its own): two jobs on one cluster each take theirs off as they end, not the other's.
    On the workers of the embedded LocalCluster (``embedded``), whose stderr is the job's, Dask's
    warnings pass too, its errors do not (they reach the user as the job's one line), unless ``-v``.
    """

    PREFIX = "bpe-dask-quiet-user-errors"

    def __init__(self, embedded: bool = False) -> None:
        import uuid

        self.name, self.embedded = f"{self.PREFIX}-{uuid.uuid4().hex[:12]}", embedded

    def setup(self, worker) -> None:
        import logging

        from bpe_dask.cluster.failures import quiet_dask_errors
        from bpe_dask.errors import BpeDaskError  # present: the package check has passed

        user_errors = tuple(f"{kind.__name__}(" for kind in (BpeDaskError, *BpeDaskError.__subclasses__()))
        self._filter = lambda record: not any(name in record.getMessage() for name in user_errors)
        logging.getLogger("distributed.worker").addFilter(self._filter)
        if self.embedded and logging.getLogger("distributed").getEffectiveLevel() > logging.DEBUG:
            quiet_dask_errors()

    def teardown(self, worker) -> None:  # the job is over: a shared cluster's workers log as before
        import logging

        logging.getLogger("distributed.worker").removeFilter(getattr(self, "_filter", None))


cloudpickle.register_pickle_by_value(sys.modules[__name__])


@dataclass(frozen=True)
class Place:
    """A path the job's tasks read or write: ``url`` (absolute), what it is for the user (``role``:
    "input", "work_dir=", "out=", or a temporary work directory's description), whether the tasks
    write into its folder, and what a user can give instead (``instead``: the option to name)."""

    url: str
    role: str
    writes: bool = False
    instead: str = ""  # e.g. "work_dir=": the place was not the user's, but that option sets it


def check_workers(
    client: Client,
    packages: Iterable[str] = (),
    *,
    places: Iterable[Place] = (),
    store: Store = LOCAL,
    ship_package: bool = False,
    embedded: bool = False,
) -> list[str]:
    """Fail at once, in one line, if any worker lacks a package or cannot reach one of ``places``;
    then register the job's worker plugins, whose names are returned (to unregister after the job
    on a cluster that outlives it: ``unregister_plugins``).

    An input is looked for as it is (one is enough to catch a ``memory://`` or client-local input
    that the workers cannot reach); a place the tasks write is checked by a marker this client
    writes into its folder, which every worker must see, and which it must be able to write beside.
    """
    needs = [*BASE_PACKAGES, *sorted(set(packages) - set(BASE_PACKAGES))]
    if not workers_of(client):
        address = client.scheduler.address
        log.info("waiting up to %.0f s for a worker to join %s", WORKER_WAIT, address)
        try:
            client.wait_for_workers(1, timeout=WORKER_WAIT)
        except TimeoutError:
            raise BpeDaskError(
                f"no worker joined the scheduler at {address} in {WORKER_WAIT:.0f} s"
            ) from None
    lacking = _lacking(client, needs)
    if ship_package and any(w.startswith("bpe_dask") for what in lacking.values() for w in what):
        upload_package(client)
        lacking = _lacking(client, needs)
    if lacking:
        worker, what = sorted(lacking.items())[0]
        fix = "install them in the worker environment"
        if any(w.startswith("bpe_dask") for w in what):
            fix += f" (pip install bpe-dask=={__version__}), or pass ship_package=True to upload bpe_dask"
        raise BpeDaskError(
            f"{len(lacking)} of {len(workers_of(client))} workers cannot run this job: "
            f"{worker} lacks {', '.join(what)}{' (and others)' if len(lacking) > 1 else ''}; {fix}"
        )
    for place in places:
        _check_place(client, place, store)
    plugin = QuietUserErrors(embedded)
    client.register_plugin(plugin)
    return [plugin.name]


def unregister_plugins(client: Client, names: Iterable[str]) -> None:
    """Take the job's plugins off a cluster that outlives the job (best effort: a cluster that is
    going away takes them along)."""
    for name in names:
        try:
            client.unregister_worker_plugin(name)
        except Exception:
            log.debug("could not unregister the worker plugin %s", name, exc_info=True)


def _lacking(client: Client, needs: list[str]) -> dict[str, list[str]]:
    results = client.run(probe_modules, needs, on_error="return")
    lacking = {}
    for worker, found in results.items():
        if isinstance(found, BaseException):
            lacking[worker] = [f"a working Python environment ({describe(found)})"]
            continue
        what = [name for name in needs if found.get(name) is None]
        if found.get("bpe_dask") not in (None, __version__):
            what.append(f"bpe_dask {__version__} (it has {found['bpe_dask']})")
        if what:
            lacking[worker] = [f"bpe_dask {__version__}" if w == "bpe_dask" else w for w in what]
    return lacking


def upload_package(client: Client) -> None:
    """Send this client's bpe_dask to every worker (and to workers that join later)."""
    package = Path(__file__).resolve().parents[1]  # bpe_dask/, this being bpe_dask/cluster/preflight.py
    with tempfile.TemporaryDirectory() as folder:
        archive = Path(folder) / f"bpe_dask-{__version__}.zip"
        with zipfile.ZipFile(archive, "w") as zf:
            for source in sorted(package.rglob("*.py")):
                zf.write(source, f"bpe_dask/{source.relative_to(package).as_posix()}")
        client.upload_file(str(archive))  # workers put it on sys.path and import bpe_dask from it
    log.info("uploaded bpe_dask %s to the workers", __version__)


def _check_place(client: Client, place: Place, store: Store) -> None:
    """Ask every worker whether it reaches ``place``; for a place the tasks write, through a marker
    written here into its folder (the work directory itself; an output's parent, where it is
    staged), in folders made for the check and removed after it."""
    if not place.writes:
        return _ask_workers(client, place, place.url, store)
    folder = place.url.rstrip("/") if place.role == "work_dir=" else place.url.rstrip("/").rpartition("/")[0]
    fs, path = store.fs(f"{folder}/.bpe-dask-probe-{uuid.uuid4().hex}")
    made = _missing_folders(fs, fs._parent(path)) if is_local(folder) else []
    for new_folder in made:
        fs.mkdir(new_folder)
    try:
        fs.pipe_file(path, b"")
        _ask_workers(client, place, fs.unstrip_protocol(path) if not is_local(folder) else path, store)
    finally:
        if fs.exists(path):
            fs.rm_file(path)
        for new_folder in reversed(made):
            fs.rmdir(new_folder)


def _ask_workers(client: Client, place: Place, url: str, store: Store) -> None:
    answers = client.run(probe_path, url, store.options, place.writes, on_error="return")
    failed = {w: answer for w, answer in answers.items() if answer is not None}
    if not failed:
        return
    worker, why = sorted(failed.items())[0]
    why = describe(why) if isinstance(why, BaseException) else why
    what = "the input" if place.role == "input" else place.role
    shown = place.url.removeprefix("file://")
    named = f"{what}{shown!r}" if what.endswith("=") else f"{what} {shown}"  # an option: as it is given
    few = f"{len(failed)} of {len(answers)} workers (first {worker}) cannot"
    if is_local(place.url) and why == "not there":
        where = f"{named}, a path on this machine"
        if place.instead:  # a place of the job's own: named by the option that sets it
            where = f"{shown}, {what} on this machine"
        give = f"give {place.instead}" if place.instead else "give it"
        raise BpeDaskError(
            f"{few} see {where}: the tasks {'write' if place.writes else 'read'} it, so {give} on "
            "storage every worker reaches at the same path (a shared filesystem, or e.g. s3://bucket/prefix)"
        )
    credentials = "; workers use their own credentials (ship_credentials=True sends this machine's)"
    credentials = "" if is_local(place.url) else credentials
    raise BpeDaskError(f"{few} {'write beside' if place.writes else 'see'} {named} ({why}){credentials}")
