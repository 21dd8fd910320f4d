"""Settings: the package's tunables as ``dask.config`` values under ``bpe-dask``, with their defaults.

Set one with ``dask.config.set({"bpe-dask.block-size": "1MiB"})``, in a YAML file in
``~/.config/dask/``, or as an environment variable (``DASK_BPE_DASK__BLOCK_SIZE=1MiB``); README.md,
"Settings (dask.config)", lists them. A job reads them on the client, once (``snapshot``), and its
tasks take them from the job's ``io.storage.Store``, so they hold on every worker, whichever
config the workers were started with.

>>> size("block-size")
8388608
>>> with dask.config.set({"bpe-dask.retries": 0}):
...     count("retries")
0
"""

from __future__ import annotations

from typing import Any

import dask.config
from dask.utils import parse_bytes, parse_timedelta

from bpe_dask.errors import BpeDaskError

DEFAULTS: dict[str, Any] = {
    "block-size": "8MiB",  # text a task reads, decodes and pre-tokenizes at a time
    "uncut-limit": 64 * 2**20,  # characters with no safe cut before a task stops (one giant pre-token)
    "partition-min": "1MiB",  # the smallest partition the planner makes when it sizes them itself
    "partition-max": "64MiB",  # the largest: bounds a task's memory and the work lost with a worker
    "partitions-per-thread": 2,  # map tasks per worker thread, when sized from the input
    "in-process-limit": "16MiB",  # below this much input, the Python API counts with no cluster
    "retries": 2,  # times a task's read or write that failed in a way that may pass is tried again
    "retry-pause": "500ms",  # before the first retry; doubled before each next one
    "pattern-timeout": 10.0,  # seconds a split pattern of one's own may take per million characters
    "progress-interval": "2s",  # at most one report of how far it has read per running map task per this
}
_COUNTS = {"partitions-per-thread": 1, "retries": 0}  # whole numbers, and the least each may be
_DURATIONS = ("retry-pause", "pattern-timeout", "progress-interval")  # the rest are sizes
dask.config.update_defaults({"bpe-dask": DEFAULTS})


def setting(name: str, settings: dict | None = None) -> Any:
    """The value of ``bpe-dask.<name>``: from ``settings`` (a ``snapshot``) when given, else from
    this process's ``dask.config``."""
    if name not in DEFAULTS:
        raise KeyError(f"bpe-dask.{name}")
    if settings is not None:
        return settings[name]
    return dask.config.get(f"bpe-dask.{name}", default=DEFAULTS[name])


def snapshot() -> dict[str, Any]:
    """Every setting as this process has it now, each checked (a bad one is a one-line
    ``BpeDaskError`` naming it): what a job hands its tasks."""
    settings = {name: setting(name) for name in DEFAULTS}
    for name in DEFAULTS:
        if name in _COUNTS:
            count(name, settings, least=_COUNTS[name])
        elif name in _DURATIONS:
            seconds(name, settings)
        else:
            size(name, settings)
    return settings


def size(name: str, settings: dict | None = None) -> int:
    """A setting in bytes (or characters): ``65536``, ``"64KiB"``, ``"8MB"``."""
    value = setting(name, settings)
    try:
        number = value if isinstance(value, int) and not isinstance(value, bool) else parse_bytes(str(value))
    except (ValueError, TypeError):
        number = 0
    if number < 1:
        raise BpeDaskError(f"bpe-dask.{name} must be a positive size (e.g. 8MiB), got {value!r}")
    return number


def count(name: str, settings: dict | None = None, least: int = 0) -> int:
    """A setting that is a whole number of at least ``least``."""
    value = setting(name, settings)
    try:
        number = int(str(value))
    except ValueError:
        number = least - 1
    if number < least:
        raise BpeDaskError(f"bpe-dask.{name} must be a whole number, {least} or more, got {value!r}")
    return number


def seconds(name: str, settings: dict | None = None) -> float:
    """A setting that is a duration: ``0.5``, ``"500ms"``, ``"2s"``."""
    value = setting(name, settings)
    try:
        number = float(parse_timedelta(value, default="seconds"))
    except (ValueError, TypeError, KeyError):
        number = -1.0
    if number < 0:
        raise BpeDaskError(f"bpe-dask.{name} must be a duration (e.g. 500ms), got {value!r}")
    return number
