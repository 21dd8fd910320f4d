"""Interrupts: SIGINT and SIGTERM turned into an exception where the job can unwind cleanly.

Takes the two signals for the duration of a command (``handled``); gives ``KeyboardInterrupt``
(SIGINT) or ``Terminated`` (SIGTERM), raised in the main thread only where the job looks for it:
``check``, which the job's waits call between two short waits (``wait``), the merge loops between
merges, and the jobs right before committing an output. The handler itself only notes the signal:
it runs wherever the main thread happens to be (inside an import's module lock, a weakref
callback, a ``gc`` callback, numba's call back from compiled code), and an exception raised there
can be dropped or leave the interpreter's state half-changed; a note changes nothing. So the job
stops at its next look, within ``POLL`` seconds while it waits on its cluster. A step that may
block for long on I/O in this process (listing a bucket, reading footers, writing a file) runs in
a thread of its own that the main thread waits on the same way (``call``).

``check`` raises the signal each time it is called, so an exception some library caught and dropped
does not let the job go on to publish; the job's clean-up (closing the cluster, removing temporary
files) calls no ``check``. ``received`` says which signal came (the exit code).
``deferred`` is a block that does not start after a signal and raises one that came meanwhile as
it ends; with ``shield_children=True`` it also blocks SIGINT in the threads started in it, and so
in the processes they start: a terminal's Ctrl-C reaches this process only, not the
LocalCluster's workers, which would each print a traceback; the client closes them as it unwinds.
"""

from __future__ import annotations

import contextvars
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from multiprocessing import resource_tracker
from types import FrameType
from typing import TypeVar

T = TypeVar("T")
SIGNALS = (signal.SIGINT, signal.SIGTERM)
POLL = 0.1  # seconds between two looks for a signal while the job waits


class Terminated(BaseException):
    """SIGTERM arrived: unwind like Ctrl-C does, closing the cluster and removing temporary files."""


_received: int | None = None  # the first signal that came
_handling = False  # whether a ``handled`` block runs


def received() -> int | None:
    """SIGINT or SIGTERM if one came since ``handled`` began, else None."""
    return _received


def check() -> None:
    """Raise ``KeyboardInterrupt`` (SIGINT) or ``Terminated`` (SIGTERM) if a signal came; cheap: call
    it in loops.

    Only in the main thread, where ``handled`` unwinds the job: a background thread (the merge
    loop compiling ahead of time) goes on, and must not take the raise that is the main thread's."""
    if _received is not None and threading.current_thread() is threading.main_thread():
        raise Terminated() if _received == signal.SIGTERM else KeyboardInterrupt()


def wait(result: Callable[[float], T]) -> T:
    """``result(timeout)`` (a future's ``result``, say) called in waits of ``POLL`` seconds until it
    gives, looking for a signal before each: a wait that a signal stops.

    >>> from concurrent.futures import ThreadPoolExecutor
    >>> with ThreadPoolExecutor(1) as pool:
    ...     wait(pool.submit(sum, [1, 2, 3]).result)
    6
    """
    while True:
        check()
        try:
            return result(POLL)
        except TimeoutError:
            continue


def call(function: Callable[..., T], *args: object, finish_within: float = 0.0, **kwargs: object) -> T:
    """``function(*args, **kwargs)``, or what it raises; while signals are ``handled``, in a thread of
    its own, waited for as ``wait`` does. Nothing stops a thread from outside: after a signal the step
    goes on alone, its result dropped (the thread is a daemon, gone with the process), once the wait
    has given it ``finish_within`` seconds to end (a write that must not land after the clean-up).

    >>> call(sum, [1, 2, 3])
    6
    """
    if not _handling or threading.current_thread() is not threading.main_thread():
        return function(*args, **kwargs)
    done: Future[T] = Future()
    context = contextvars.copy_context()  # Dask's current client, say

    def run() -> None:
        try:
            done.set_result(context.run(function, *args, **kwargs))
        except BaseException as error:
            done.set_exception(error)

    name = f"bpe-dask-{getattr(function, '__name__', 'step')}"
    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        return wait(done.result)
    except (KeyboardInterrupt, Terminated):
        thread.join(finish_within)
        raise


@contextmanager
def handled() -> Iterator[None]:
    """SIGINT and SIGTERM handled as above for the block (in the main thread; elsewhere, as before)."""
    global _received, _handling
    if threading.current_thread() is not threading.main_thread():  # signals go to the main thread only
        yield
        return
    _received, _handling = None, True
    previous = {signum: signal.signal(signum, _note) for signum in SIGNALS}
    try:
        yield
    finally:
        # Over: nothing of this block's signal may reach code that runs after it (a later job in the
        # same process, whose ``check`` would raise it).
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _received, _handling = None, False


def _note(signum: int, frame: FrameType | None) -> None:
    global _received
    if _received is None:
        _received = signum


@contextmanager
def deferred(shield_children: bool = False) -> Iterator[None]:
    """A block that does not start after a signal; one that comes meanwhile is raised as it ends.

    ``shield_children``: SIGINT is blocked in this thread for the block, so threads started in it
    (and the processes those start) never receive it; this process still does, in its other threads.
    """
    main = threading.current_thread() is threading.main_thread()
    check()
    shielded = shield_children and main
    if shielded:
        # Started first: multiprocessing starts its resource tracker with SIGINT blocked, then unblocks
        # SIGINT in the thread that did, and would so unshield the workers' starting thread.
        resource_tracker.ensure_running()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        if shielded:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    check()
