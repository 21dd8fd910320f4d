"""Compiling each function once: one version of it (``readonly``), by one process of the machine
(``share_compiles``).

numba compiles a version of a function for each combination of its arguments' types, and a read-only
array is a type apart from a writable one: ``readonly`` gives the compiled functions their bytes
read-only whatever they came in (text arrives as ``bytes``, read-only; an arena or a sum of runs is
writable), so that a job runs the very version a warm-up compiled, and compiles nothing more. Three
habits of the compiled code keep compiling cheap: it copies arrays in loops, not by slice assignment
(for an array assigned to a slice, numba compiles an error message naming both shapes: string code,
slow to compile, in every process that compiles any such function), it passes no constant to a
compiled function it calls (numba compiles a version of the callee for the literal ``0``, another
for an ``int64``: ``np.int64(0)`` is one), and it skips the wrappers numba would compile beside
each function that the package never calls (``no_cfunc_wrapper``; ``no_cpython_wrapper`` too where
only compiled code calls it): a wrapper costs about as much to compile as a small function. A function
only compiled code calls is not cached either: its callers' cache entries hold its machine code.

``share_compiles`` gives numba dispatchers a ``compile`` that, for a signature this process has
neither compiled nor loaded yet, first holds a lock file of that function's own in numba's cache
folder (``lock_path``; ``flock``, which the system lets go of when a process dies). numba looks in
its cache before it compiles, so a process that waited finds the entry the other saved and loads it:
the worker processes of a LocalCluster (and a ``bpe-dask`` process beside them) compile each function
once between them, not each on its own at once, competing for the same cores. It also makes numba's
index of a function's compiled versions safe to share: a process reads it, adds to it and writes it
back whole, one process at a time (``scan.own_cache_file`` says what goes wrong otherwise). A lock only
saves work: where none can be had (a cache folder that takes no lock file, a system without
``fcntl``), or after ``WAIT`` seconds (a process stopped in the middle of a compile), a process
compiles on its own, as numba does.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
from numba.core import sigutils
from numba.core.compiler_lock import global_compiler_lock

try:
    import fcntl
except ImportError:  # not on a POSIX system: every process compiles on its own
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

WAIT = 300.0  # seconds a process waits for another's compile (tens of seconds at most) before its own
_POLL = 0.05  # seconds between tries: a wait stays interruptible (Ctrl-C), and ends soon after the other's
_held: set[str] = set()  # the lock files this process holds, under numba's compiler lock


def readonly(array: np.ndarray) -> np.ndarray:
    """``array`` seen read-only, as every compiled function takes its bytes (a view: nothing is copied).

    >>> readonly(np.zeros(3, np.uint8)).flags.writeable
    False
    """
    if not array.flags.writeable:
        return array
    view = array.view()
    view.flags.writeable = False
    return view


def share_compiles(functions: Iterable[Any]) -> None:
    """Make each of ``functions`` (numba dispatchers) compile under its lock file, once."""
    if fcntl is None:
        return
    for function in functions:
        path = lock_path(function)
        if getattr(function, "_bpe_dask_compiles_locked", False) or path is None:
            continue
        # numba calls ``self.compile`` for each signature it meets, from Python or from compiled code
        function.compile = _locked(function, function.compile, path)
        function._bpe_dask_compiles_locked = True


def lock_path(function: Any) -> str | None:
    """The lock file of ``function`` (a numba dispatcher) in numba's cache folder, beside its cache
    files; ``None`` if numba caches nothing of it."""
    folder = getattr(getattr(function, "_cache", None), "cache_path", None)  # numba's NullCache: None
    if not folder:
        return None
    module = function.py_func.__module__.rsplit(".", 1)[-1]
    name = function.py_func.__qualname__.replace("<", "").replace(">", "")  # as numba names its files
    return os.path.join(folder, f"{module}.{name}.lock")


def _locked(function: Any, compile_here: Callable[[Any], Any], path: str) -> Callable[[Any], Any]:
    def compile(sig: Any) -> Any:
        args, _ = sigutils.normalize_signature(sig)
        if tuple(args) in function.overloads:  # compiled or loaded by this process already
            return compile_here(sig)
        # numba's own lock first, then the file's: the order every thread of this process takes them
        # in, so that two of its threads never each hold one and wait for the other.
        with global_compiler_lock, _machine_lock(path):
            return compile_here(sig)

    return compile


@contextlib.contextmanager
def _machine_lock(path: str) -> Iterator[None]:
    """Hold the lock file ``path`` (if it can be had) for the duration of the ``with`` block."""
    if path in _held:  # this process holds it already: compiling the function compiles it again
        yield
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:  # a cache folder that takes no lock file
        yield
        return
    try:
        _take(descriptor, path)
        _held.add(path)
        yield
    finally:
        _held.discard(path)
        os.close(descriptor)  # lets go of the lock


def _take(descriptor: int, path: str) -> None:
    """Take the lock on ``descriptor``, waiting up to ``WAIT`` seconds for another process to let go."""
    deadline = None
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        except OSError:  # a filesystem without locks
            return
        if deadline is None:
            deadline = time.monotonic() + WAIT
            log.debug("%s: waiting for another process compiling %s", threading.current_thread().name, path)
        elif time.monotonic() > deadline:
            log.debug("gave up waiting for %s after %.0f s: compiling here", path, WAIT)
            return
        time.sleep(_POLL)
