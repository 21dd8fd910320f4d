"""Retries: which failures are worth a second try, and trying again.

``Retries.run`` runs a task again after a failure that may be transient (``is_transient``: a dropped
connection, a timeout, a throttled or unavailable store), in place, ``bpe-dask.retries`` times at
most, pausing ``bpe-dask.retry-pause`` and twice as long each next time; anything else (a user
error, a missing file, a bug such as a ``KeyError``, a ``MemoryError``) fails at once with its own
message, since running it again would only repeat it, and hide it for as long. A task takes the
settings the job's client had (``io.storage.Store.retries``).

>>> is_transient(ConnectionResetError()), is_transient(FileNotFoundError()), is_transient(KeyError())
(True, False, False)
>>> Retries(retries=0).run(len, "abc")
3
"""

from __future__ import annotations

import errno
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from bpe_dask import settings as config
from bpe_dask.errors import BpeDaskError, TransientError

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

# OSErrors that say something about the request, not the moment: trying again gives the same answer.
_LASTING = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError)
_LASTING_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EINVAL, errno.ENAMETOOLONG}
# Network errors of the libraries under fsspec that reach a task untranslated (aiohttp, botocore).
_TRANSIENT_NAMES = {
    "ClientOSError",
    "ServerDisconnectedError",
    "ClientPayloadError",
    "ClientConnectionError",
    "ReadTimeoutError",
    "ConnectTimeoutError",
    "EndpointConnectionError",
    "ConnectionClosedError",
    "ResponseStreamingError",
    "IncompleteReadError",
    "SlowDown",
    "ServiceUnavailable",
    "Throttling",
}
# HTTP statuses that say "not now" (a timeout, too many requests, a server or gateway in trouble).
_TRANSIENT_STATUSES = {408, 425, 429, 500, 502, 503, 504}


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
    names = {kind.__name__ for kind in type(error).__mro__}
    if "ClientResponseError" in names:  # aiohttp's, an HTTP(S) input's: only some statuses pass
        return getattr(error, "status", None) in _TRANSIENT_STATUSES
    return bool(names & _TRANSIENT_NAMES)


@dataclass(frozen=True)
class Retries:
    """How often a failure that may be transient is tried again, and the first pause (seconds)."""

    retries: int = 2
    pause: float = 0.5

    @classmethod
    def configured(cls, settings: dict | None = None) -> Retries:
        """The ``bpe-dask.retries`` and ``bpe-dask.retry-pause`` settings (of ``settings``, a
        ``settings.snapshot()``, when given; else this process's)."""
        return cls(config.count("retries", settings), config.seconds("retry-pause", settings))

    def run(self, task: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``task(*args, **kwargs)``, tried again up to ``retries`` times while it fails in a way
        that may be transient (``is_transient``); any other failure is raised at once."""
        pause = self.pause
        for _ in range(self.retries):
            try:
                return task(*args, **kwargs)
            except Exception as error:
                if not is_transient(error):
                    raise
                log.info("%s failed (%s); trying again in %.1f s", task.__name__, error, pause)
                time.sleep(pause)
                pause *= 2
        return task(*args, **kwargs)  # the last try: its failure, whatever it is, is raised
