"""Scratch directories: a local directory a job makes for its own time, locked while the job lives;
and those a job killed without time to clean up (SIGKILL, a machine that died) left, found and
removed by the next job.

Takes a local folder and a name prefix; gives a new directory ``FOLDER/PREFIX<random>``
(``make_locked``, then ``discard``) holding ``LOCK``, a file on which the job holds ``fcntl.flock`` for as
long as the directory is its own. The kernel lets go of a lock when its process ends, however it
ends, so a lock that can be taken means its owner is gone (a process id, which the system reuses,
would not say that). ``remove_abandoned`` removes the directories ``FOLDER/PREFIX*`` whose lock
nobody holds; a directory without ``LOCK`` is never touched (another program's, or one a job is
making: the lock file appears under its name already locked, made and locked under another name
first). A directory is removed contents first and its lock file last, so one whose removal was
cut short is still found. Promises: never a directory whose job is alive, on a filesystem with
locks; where ``flock`` is refused (some network filesystems) a directory gets no lock file, and
so is removed by its own job only.

Local paths only: an object store has no locks (there a job removes what it made as it ends, and
what a killed job left stays: README, "When things fail").
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import threading
import uuid

log = logging.getLogger(__name__)

LOCK = ".bpe-dask-lock"
# Directories this process holds: on a filesystem where flock is emulated by POSIX locks (NFS),
# which are the process's, the process could take its own lock again; never its own, then.
_held: set[str] = set()
_held_lock = threading.Lock()


def discard(path: str, held: int | None) -> None:
    """``remove`` the directory ``path`` a job is done with; a warning in one line if it cannot."""
    try:
        remove(path, held)
    except OSError as error:
        log.warning("could not remove %s: %s; remove it by hand", path, error.strerror or error)


def make_locked(folder: str, prefix: str, private: bool = False) -> tuple[str, int | None]:
    """A new directory ``folder/prefix<random>`` and the descriptor that holds its lock (None where
    the filesystem has no locks): ``discard`` it, or ``let_go`` of its lock. Its mode is the
    umask's (it may become an output, or be written by workers), or with ``private`` the owner's only."""
    for _ in range(100):
        path = os.path.join(folder, f"{prefix}{uuid.uuid4().hex[:12]}")
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700 if private else 0o777)
            break
    else:
        raise FileExistsError(f"no new name for a directory in {folder}")
    try:
        return path, lock(path)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise


def lock(directory: str) -> int | None:
    """Lock ``directory`` (one this process made) until the returned descriptor is closed: its
    ``LOCK`` file, made, locked, then put in place; None, and no lock file, where the filesystem
    refuses locks."""
    making = os.path.join(directory, f"{LOCK}.{uuid.uuid4().hex}")
    descriptor = os.open(making, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(descriptor)
        os.unlink(making)
        return None
    os.rename(making, os.path.join(directory, LOCK))
    with _held_lock:
        _held.add(os.path.realpath(directory))
    return descriptor


def let_go(directory: str, held: int | None, unlink: bool = True) -> None:
    """Give up the lock of ``directory``: its lock file removed (unless not ``unlink``), then the lock."""
    if unlink:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(directory, LOCK))
    if held is not None:
        with _held_lock:
            _held.discard(os.path.realpath(directory))
        os.close(held)


def remove(path: str, held: int | None) -> None:
    """Remove the directory ``path`` whose lock ``held`` this process holds: its contents, then its
    lock file, then the directory, with whatever a task that was still writing put there meanwhile."""
    try:
        for name in os.listdir(path):
            if name != LOCK:
                _remove_entry(os.path.join(path, name))
        let_go(path, None)
        for attempt in range(3):  # a late writer may add a file between the listing and the rmdir
            try:
                shutil.rmtree(path)
                break
            except FileNotFoundError:
                break
            except OSError:
                if attempt == 2:
                    raise
    finally:
        let_go(path, held, unlink=False)


def _remove_entry(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)


def remove_abandoned(folder: str, prefix: str) -> list[str]:
    """Remove the directories ``folder/prefix*`` whose job is gone (their lock file's lock can be
    taken); those it removed. One it cannot remove is left as it is, and named in a warning."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:  # not there, or not readable: nothing of ours
        return []
    removed = []
    for name in names:
        path = os.path.join(folder, name)
        if not name.startswith(prefix):
            continue
        held = _take_lock(path)
        if held is None:
            continue
        try:
            remove(path, held)
        except OSError as error:
            log.warning("could not remove %s, which a stopped job left: %s", path, error.strerror or error)
            continue
        removed.append(path)
    return removed


def _take_lock(directory: str) -> int | None:
    """The lock of ``directory``, if it has a lock file and nobody holds it; else None."""
    lock_file = os.path.join(directory, LOCK)
    with _held_lock:
        if os.path.realpath(directory) in _held:
            return None
    try:
        descriptor = os.open(lock_file, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # no lock file (not a job's, or one being made), not a directory, or gone
        return None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # Still the directory's lock file? Another job may have removed it while this one waited.
        mine, there = os.fstat(descriptor), os.stat(lock_file)
        if (mine.st_dev, mine.st_ino) != (there.st_dev, there.st_ino):
            raise FileNotFoundError(lock_file)
    except OSError:  # held: its job is alive (or locks are refused here); or it went meanwhile
        os.close(descriptor)
        return None
    return descriptor
