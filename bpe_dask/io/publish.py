"""Publishing: every output is a transaction, written under a temporary name and committed whole.

Takes an output URL, what to write and whether it may replace what is there (``overwrite``); gives
a file or directory that appears whole or not at all, by one exclusive commit step, checked again
at that moment, so of two jobs aimed at one output without ``overwrite`` one succeeds and the other
fails with one line, and neither leaves anything that blocks a later run:

- a local file: written beside its name, then hard-linked into place (``link`` fails if the name
  exists) or, with ``overwrite``, renamed over it;
- a file in an object store: a multipart upload, invisible until completed, and completed with
  ``If-None-Match: *`` unless ``overwrite``; a failed write aborts the upload;
- a local directory: a hidden sibling renamed into place (``rename`` fails onto a directory that
  holds anything), the previous one moved aside first with ``overwrite`` and removed after;
- a directory in an object store (which has no rename): staged under a hidden sibling prefix, then,
  holding a lock object created with ``If-None-Match: *``, ``_SUCCESS`` removed, the old files
  removed, the staged ones copied in (server side) and ``_SUCCESS`` written last.

docs/outputs.md says why each step is safe, and what is not covered.
"""

from __future__ import annotations

import contextlib
import errno
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import IO

import fsspec

from bpe_dask import interrupts
from bpe_dask.errors import BpeDaskError
from bpe_dask.io import scratch
from bpe_dask.io.storage import LOCAL, Store, is_local

SUCCESS = "_SUCCESS"  # written last: its presence says the directory is complete
PROBE = ".bpe-dask-probe-"  # a file written and removed at once to learn that a place is writable
_TAKEN = (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR)
WRITE_WAIT = 5.0  # seconds a file being written is given to land after a signal, before the clean-up
COMMIT_ATTEMPTS = 10  # commits a job tries while other jobs keep publishing to the same directory


class OutputExists(BpeDaskError):
    """The output holds results (maybe another job's, committed meanwhile) and ``overwrite`` is off."""


def taken(url: str) -> OutputExists:
    return OutputExists(f"output {url} already holds results; pass overwrite=True to replace them")


# --- files ------------------------------------------------------------------------------------------


@contextmanager
def output_file(
    url: str,
    store: Store = LOCAL,
    overwrite: bool = False,
    before_commit: Callable[[], None] = lambda: None,
    work: bool = False,
) -> Iterator[IO[bytes]]:
    """A file to write that becomes ``url`` only if the block succeeds (exclusively unless
    ``overwrite``: ``OutputExists`` if something is there by then); streamed, so any size.

    Locally a hidden temporary file beside ``url``, committed by ``commit_local_file``; its name
    (``f.name``) lets other writers fill it too, at their own offsets. In an object store a
    multipart upload to ``url`` itself, which nobody sees until it completes, completed exclusively
    unless ``overwrite`` (``If-None-Match: *``) and aborted if the block fails (fsspec would
    otherwise complete it on ``close``, even while an exception goes by, leaving half a file).

    ``work``: a file of a job's work directory, ``WORK/FOLDER/NAME``, of which only ``FOLDER`` is
    made if missing, never ``WORK``, which the job made and removes as it ends: a task that
    finishes after that (on a cluster the job does not own) fails, rather than make it again to
    stay behind."""
    fs, path = store.fs(url)
    if is_local(url):
        parent, _, name = path.rpartition("/")
        if work:
            with contextlib.suppress(FileExistsError):
                os.mkdir(parent)
        else:
            fs.makedirs(parent, exist_ok=True)
        partial = f"{parent}/.partial-{uuid.uuid4().hex}-{name}"
        try:
            with open(partial, "wb") as f:  # closed before the commit
                yield f
            before_commit()
            commit_local_file(partial, path, overwrite, url)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)
            raise
        return
    f = fs.open(path, "wb" if overwrite else "xb")
    try:
        yield f
        before_commit()
    except BaseException:
        discard = getattr(f, "discard", None)
        if discard is not None:
            discard()
            f.closed = True  # discarded: nothing left for fsspec to flush when the object goes
        raise
    try:
        f.close()
    except (FileExistsError, OSError) as error:
        if isinstance(error, FileExistsError) or getattr(error, "errno", None) == errno.EINVAL:
            raise taken(url) from None
        raise


def commit_local_file(partial: str, path: str, overwrite: bool, url: str) -> None:
    """Move the finished ``partial`` to ``path`` in one step: a rename over it with ``overwrite``,
    else a hard link, which fails if ``path`` exists (a filesystem without hard links falls back to
    a rename after a look, which a job committing at the same instant can slip between)."""
    if overwrite:
        os.replace(partial, path)
        return
    try:
        os.link(partial, path)
    except FileExistsError:
        raise taken(url) from None
    except OSError as error:
        if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        if os.path.lexists(path):
            raise taken(url) from None
        os.rename(partial, path)
        return
    os.unlink(partial)


# --- directories ------------------------------------------------------------------------------------


def publish_directory(
    url: str, files: Mapping[str, str | bytes], store: Store = LOCAL, overwrite: bool = True
) -> None:
    """Make ``url`` a directory holding exactly ``files`` (text, written as UTF-8, or bytes) plus
    ``_SUCCESS``, never half of them."""
    with staged_directory(url, store, overwrite) as staging:
        fs, path = store.fs(staging)
        for filename, content in files.items():
            data = content.encode("utf-8") if isinstance(content, str) else content
            # a signal stops a slow write's wait, which gives it a moment to land before the clean-up
            interrupts.call(fs.pipe_file, f"{path}/{filename}", data, finish_within=WRITE_WAIT)


@contextmanager
def staged_directory(url: str, store: Store = LOCAL, overwrite: bool = True) -> Iterator[str]:
    """A hidden sibling directory to fill (by this process or by workers) that becomes ``url`` whole
    when the block ends without an error, holding what was written plus ``_SUCCESS``; whatever
    ``url`` held before is gone then, and only then (``OutputExists`` if it held results and
    ``overwrite`` is off). Nothing is left behind either way; a local staging directory is locked
    while it is this job's, so that if the job is killed (SIGKILL) the next to publish here removes
    it (``io.scratch``)."""
    fs, path = store.fs(url)
    path = path.rstrip("/")
    parent, _, name = path.rpartition("/")
    held = None
    if is_local(url):  # locked while it is this job's, so that the next job removes it if this one is killed
        fs.makedirs(parent, exist_ok=True)
        scratch.remove_abandoned(parent, f".{name}.partial-")
        staging, held = scratch.make_locked(parent, f".{name}.partial-")
        tag = staging.rpartition(".partial-")[2]
    else:
        tag = uuid.uuid4().hex[:12]
        staging = f"{parent}/.{name}.partial-{tag}"
    try:
        yield staging if is_local(url) else fs.unstrip_protocol(staging)
        with interrupts.deferred():  # not after a signal, nor cut in half by one (raised after it)
            fs.pipe_file(f"{staging}/{SUCCESS}", b"")
            if is_local(url):
                scratch.let_go(staging, held)  # its lock file is no part of the output
                held = None
                _rename_into_place(staging, path, f"{parent}/.{name}.old-{tag}", overwrite, url)
            else:
                _copy_into_place(fs, staging, path, f"{parent}/.{name}.publishing", overwrite, url)
    finally:
        if is_local(url) and os.path.isdir(staging):
            scratch.discard(staging, held)
        elif fs.exists(staging):
            fs.rm(staging, recursive=True)
        elif held is not None:
            scratch.let_go(staging, held, unlink=False)


def _rename_into_place(staging: str, path: str, retired: str, overwrite: bool, url: str) -> None:
    """``rename`` is the commit: it fails onto a directory that holds anything (and moves nothing
    inside it, as ``shutil.move`` would). With ``overwrite`` the previous directory is moved aside
    first, put back if the commit fails, and removed after it. Other jobs with ``overwrite`` may be
    committing to ``path`` at the same moment: the one before may be moved aside by another job
    first, or another job's result may land between the move and the commit; then this job moves
    that aside in turn, so that every such job succeeds and ``path`` is one job's result, whole."""
    for _ in range(COMMIT_ATTEMPTS):
        moved_aside = False
        if overwrite:  # what stands at ``path`` (another job may have moved it aside a moment before)
            with contextlib.suppress(FileNotFoundError):
                os.rename(path, retired)
                moved_aside = True
        try:
            os.rename(staging, path)
        except OSError as error:
            if moved_aside:
                try:
                    os.rename(retired, path)
                except OSError:  # another job committed meanwhile: its results stand, the old go
                    fsspec.filesystem("file").rm(retired, recursive=True)
            if error.errno in _TAKEN and overwrite:
                continue  # another job's result landed after our move: replace it in turn
            if error.errno in _TAKEN:
                raise taken(url) from None
            raise
        if moved_aside:
            fsspec.filesystem("file").rm(retired, recursive=True)
        return
    raise OutputExists(
        f"other jobs kept publishing {url} while this one tried to: run again when they are done"
    )


def _copy_into_place(
    fs: fsspec.AbstractFileSystem, staging: str, path: str, lock: str, overwrite: bool, url: str
) -> None:
    """The commit in an object store, under a lock object that only one job can create."""
    try:
        fs.pipe_file(lock, uuid.uuid4().hex.encode(), mode="create")
    except (FileExistsError, OSError) as error:
        if isinstance(error, FileExistsError) or getattr(error, "errno", None) == errno.EINVAL:
            raise OutputExists(
                f"another job is publishing {url} right now; run again when it is done (if none is, "
                f"delete {fs.unstrip_protocol(lock)})"
            ) from None
        raise
    try:
        fs.invalidate_cache(path)
        old = [p for p in (fs.find(path) if fs.exists(path) else []) if PROBE not in p]
        if old and not overwrite:
            raise taken(url)
        if f"{path}/{SUCCESS}" in old:
            fs.rm_file(f"{path}/{SUCCESS}")  # first: a reader waiting for it sees no mix
        for stale in old:
            if not stale.endswith(f"/{SUCCESS}"):
                fs.rm_file(stale)
        staged = sorted(p for p in fs.find(staging) if not p.endswith(f"/{SUCCESS}"))
        for source in staged:
            fs.copy(source, f"{path}/{source[len(staging) + 1 :]}")
        fs.pipe_file(f"{path}/{SUCCESS}", b"")
    finally:
        fs.rm_file(lock)
        fs.invalidate_cache(path)
