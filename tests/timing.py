"""How long the tests wait: every timeout and deadline of the suite, through one setting.

Takes seconds as an idle 2-core machine needs them; gives them scaled: by
``BPE_DASK_TEST_TIMEOUT_SCALE`` (a number, 1 by default), and again while the machine's load average
over the last minute is above its cores: doubled, or by load / cores where that is more, the share of
a core each process then gets (CI runners and laptops are often busy, and a red run that is only slow
teaches people to ignore red runs). Promises that a test which waits for something
waits on a condition, polled, never for a fixed time (``wait_until``), and gives up with a message
that names the setting.

A timeout that is the behaviour under test (a job stops within N seconds of a signal) is scaled too,
since the machine's slowness is not the job's; where such a bound must stay below one of the
product's own (Dask's connect timeout, say), the test scales that one with it (``dask_seconds``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

VARIABLE = "BPE_DASK_TEST_TIMEOUT_SCALE"
T = TypeVar("T")


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def load_factor() -> float:
    """How much slower than idle the machine is now: 1 while the last minute's load average is within
    its cores, else at least 2, and load / cores where that is more."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this system
        return 1.0
    return max(2.0, load / cores()) if load > cores() else 1.0


def scale() -> float:
    """The factor every timeout is multiplied by, now: the setting's, times ``load_factor``."""
    given = os.environ.get(VARIABLE, "").strip()
    try:
        factor = float(given) if given else 1.0
    except ValueError:
        factor = -1.0
    if not factor > 0:
        raise ValueError(f"{VARIABLE}={given!r}: give a positive number, such as 2")
    return factor * load_factor()


def seconds(base: float) -> float:
    """``base`` seconds (what an idle machine needs, with room), scaled."""
    return base * scale()


def dask_seconds(base: float) -> str:
    """``seconds(base)`` as Dask's settings take it: ``"60s"``."""
    return f"{seconds(base):g}s"


class Deadline:
    """A moment ``seconds(base)`` from now."""

    def __init__(self, base: float) -> None:
        self.seconds = seconds(base)
        self.end = time.monotonic() + self.seconds

    def passed(self) -> bool:
        return time.monotonic() > self.end

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def gave_up(self, what: str) -> str:
        """The message of a test that waited in vain."""
        return f"{what} after {self.seconds:g} s (more time: {VARIABLE}, now {scale():g} with the load)"


def wait_until(condition: Callable[[], T], base: float, what: str, poll: float = 0.05) -> T:
    """Poll ``condition`` until it gives a true value, and return it; ``TimeoutError`` (saying
    ``what`` was awaited) once ``seconds(base)`` have passed."""
    deadline = Deadline(base)
    while True:
        value = condition()
        if value:
            return value
        if deadline.passed():
            raise TimeoutError(deadline.gave_up(f"still waiting for {what}"))
        time.sleep(poll)
