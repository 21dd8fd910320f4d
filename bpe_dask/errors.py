"""User-facing errors, and which failures are worth a second try.

``BpeDaskError`` is what the CLI turns into one line and a non-zero exit. ``InputError`` is the
kind no retry can fix: the input's bytes themselves are unusable. ``retrying`` runs a task
again after anything else, since a dropped connection or a throttled store usually works on
the next try.
"""

from __future__ import annotations

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


class InputError(BpeDaskError):
    """The input's content cannot be counted (invalid UTF-8, a giant pre-token): retrying cannot help."""


def retrying(task: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``task(*args, **kwargs)``, tried up to ``ATTEMPTS`` times unless it fails with an ``InputError``."""
    pause = FIRST_PAUSE
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return task(*args, **kwargs)
        except InputError:
            raise
        except Exception as error:
            if attempt == ATTEMPTS:
                raise
            log.warning("%s failed (%s); trying again in %.1f s", task.__name__, error, pause)
            time.sleep(pause)
            pause *= 2
    raise AssertionError("unreachable")
