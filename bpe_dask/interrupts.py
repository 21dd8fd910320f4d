"""Interrupts: SIGINT and SIGTERM turned into an exception where the job can unwind cleanly.

Takes the two signals for the duration of a command (``handled``); gives ``KeyboardInterrupt``
(SIGINT) or ``Terminated`` (SIGTERM), raised in the main thread at once where that is safe, else
at the next safe point:

- not in code that Python or a library runs on its own, where an exception is printed and dropped
  (a ``gc`` callback, such as Dask's, a weakref finalizer, a ``__del__``) or garbled (numba's calls
  back into Python from compiled code, a ``SystemError``): the signal is sent to the main thread
  again a moment later;
- not in a ``deferred`` block (starting the cluster's scheduler, committing an output): raised as it ends;
- once: the job is unwinding by then and its clean-up (closing the cluster, removing temporary
  files) must finish; later signals are dropped.

``check`` raises a signal that came, if any: the merge loops call it between merges and the jobs
call it right before committing an output, so nothing is published after an interrupt, even if
some library caught and dropped the exception. ``received`` says which signal came (the exit code).
``deferred(shield_children=True)`` also blocks SIGINT in the threads started in the block, and so in
the processes they start: a terminal's Ctrl-C reaches this process only, not the LocalCluster's
workers, which would each print a traceback; the client closes them as it unwinds.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing import resource_tracker
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)
AGAIN_AFTER = 0.05  # seconds before a signal that came at an unsafe point is sent again
# Code whose Python frames are called from C or by the interpreter itself, where an exception is lost:
# Dask's gc callback, numba's calls back from compiled code, weakref finalizers (Dask has many) and
# the callbacks of weak sets, which the collector calls as objects go.
_UNSAFE_FILES = tuple(
    path.replace("/", os.sep) for path in ("/distributed/gc.py", "/numba/", "/weakref.py", "/_weakrefset.py")
)


class Terminated(BaseException):
    """SIGTERM arrived: unwind like Ctrl-C does, closing the cluster and removing temporary files."""


_received: int | None = None  # the first signal that came
_raised = False  # whether it has been raised (it is then not raised again by the handler)
_deferring = 0
_again: threading.Timer | None = None
_resend_pending = False
_session = 0  # which ``handled`` block is running (0: none); a late resend from another is dropped


def received() -> int | None:
    """SIGINT or SIGTERM if one came since ``handled`` began, else None."""
    return _received


def exception(signum: int) -> BaseException:
    """What a signal is raised as: ``Terminated`` for SIGTERM, ``KeyboardInterrupt`` for SIGINT."""
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def check() -> None:
    """Raise ``KeyboardInterrupt`` or ``Terminated`` if a signal came; cheap: call it in loops.

    Only in the main thread, where ``handled`` unwinds the job: a background thread (the merge
    loop compiling ahead of time) goes on, and must not take the raise that is the main thread's."""
    if _received is not None and threading.current_thread() is threading.main_thread():
        _raise()


def _raise() -> None:
    global _raised
    _raised = True
    raise exception(_received)


@contextmanager
def handled() -> Iterator[None]:
    """SIGINT and SIGTERM handled as above for the block (in the main thread; elsewhere, as before)."""
    global _received, _raised, _session, _resend_pending
    if threading.current_thread() is not threading.main_thread():  # signals go to the main thread only
        yield
        return
    _received, _raised = None, False
    session = _session = _session + 1
    previous = {signum: signal.signal(signum, _handler) for signum in SIGNALS}
    try:
        yield
    finally:
        # Over: nothing of this block's signal may reach code that runs after it (a later job in the
        # same process, whose ``check`` would raise it; a resend landing on the previous handler).
        _session = -session
        if _again is not None:
            _again.cancel()
        _resend_pending = False
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _received, _raised = None, False


def _handler(signum: int, frame: FrameType | None) -> None:
    global _received
    if _received is None:
        _received = signum
    if _raised or _deferring:
        return
    if _unsafe(frame):
        _send_again(_received)
        return
    _raise()


def _unsafe(frame: FrameType | None) -> bool:
    while frame is not None:
        code = frame.f_code
        if code.co_name == "__del__" or any(part in code.co_filename for part in _UNSAFE_FILES):
            return True
        frame = frame.f_back
    return False


def _send_again(signum: int) -> None:
    global _again, _resend_pending
    if _resend_pending:  # one is on its way (a timer that has sent already may still look alive)
        return
    _resend_pending = True
    _again = threading.Timer(AGAIN_AFTER, _resend, (threading.main_thread().ident, signum, _session))
    _again.daemon = True
    _again.start()


def _resend(thread: int, signum: int, session: int) -> None:
    global _resend_pending
    _resend_pending = False  # first: the signal may land in an unsafe place again, and be sent again
    if not _raised and session == _session:
        signal.pthread_kill(thread, signum)


@contextmanager
def deferred(shield_children: bool = False) -> Iterator[None]:
    """A block that no signal interrupts, nor starts after one: one that comes meanwhile is raised
    as the block ends.

    ``shield_children``: SIGINT is blocked in this thread for the block, so threads started in it
    (and the processes those start) never receive it; this process still does, in its other threads.
    """
    global _deferring
    main = threading.current_thread() is threading.main_thread()
    if main:
        check()
    shielded = shield_children and main
    if shielded:
        # Started first: multiprocessing starts its resource tracker with SIGINT blocked, then unblocks
        # SIGINT in the thread that did, and would so unshield the workers' starting thread.
        resource_tracker.ensure_running()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    _deferring += main
    try:
        yield
    finally:
        if shielded:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        _deferring -= main
    if main and not _raised:
        check()
