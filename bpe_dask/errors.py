"""User-facing errors, and which failures are worth a second try.

``BpeDaskError`` is what the CLI turns into one line and a non-zero exit. ``InputError`` is the
kind no retry can fix: the input's bytes themselves are unusable. ``retrying`` runs a task again
after a failure that may be transient (``is_transient``: a dropped connection, a timeout, a
throttled or unavailable store), in place, a few times; anything else (a user error, a missing file,
a bug such as a ``KeyError``, a ``MemoryError``) fails at once with its own message, since running
it again would only repeat it, and hide it for as long.
"""

from __future__ import annotations

import errno
import logging
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

log = logging.getLogger(__name__)

ATTEMPTS = 3
FIRST_PAUSE = 0.5  # seconds; doubled after each failure

P = ParamSpec("P")
T = TypeVar("T")


class BpeDaskError(Exception):
    """A problem with the user's input or options, explained in one line."""


class TransientError(BpeDaskError):
    """A failure explained in one line that may go away if tried again (a read of the input that a
    dropped connection cut short)."""


class InputError(BpeDaskError):
    """The input's content cannot be counted (invalid UTF-8, a giant pre-token): retrying cannot help."""


# OSErrors that say something about the request, not the moment: trying again gives the same answer.
_LASTING = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError)
_LASTING_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EINVAL, errno.ENAMETOOLONG}
# Network errors of the libraries under fsspec that reach a task untranslated (aiohttp, botocore).
_TRANSIENT_NAMES = {
    "ClientOSError", "ServerDisconnectedError", "ClientPayloadError", "ClientConnectionError",
    "ReadTimeoutError", "ConnectTimeoutError", "EndpointConnectionError", "ConnectionClosedError",
    "ResponseStreamingError", "IncompleteReadError", "SlowDown", "ServiceUnavailable", "Throttling",
}  # fmt: skip


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` may go away if the same thing is tried again."""
    if isinstance(error, TransientError):
        return True
    if isinstance(error, (BpeDaskError, *_LASTING)) or not isinstance(error, Exception):
        return False
    if isinstance(error, ConnectionError | TimeoutError):
        return True
    if isinstance(error, OSError):  # EIO, a reset, s3fs's translation of throttling, ...
        return error.errno not in _LASTING_ERRNOS
    return any(kind.__name__ in _TRANSIENT_NAMES for kind in type(error).__mro__)


def retrying(task: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``task(*args, **kwargs)``, tried up to ``ATTEMPTS`` times while it fails in a way that may be
    transient (``is_transient``); any other failure is raised at once."""
    pause = FIRST_PAUSE
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return task(*args, **kwargs)
        except Exception as error:
            if attempt == ATTEMPTS or not is_transient(error):
                raise
            log.info("%s failed (%s); trying again in %.1f s", task.__name__, error, pause)
            time.sleep(pause)
            pause *= 2
    raise AssertionError("unreachable")
