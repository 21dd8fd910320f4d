"""Settings: the package's tunables as ``dask.config`` values under ``bpe-dask``, with their defaults.

Set one with ``dask.config.set({"bpe-dask.block-size": "1MiB"})``, in a YAML file in
``~/.config/dask/``, or as an environment variable (``DASK_BPE_DASK__BLOCK_SIZE=1MiB``); the docs'
settings reference (docs/reference/settings.md) lists them, from ``DEFAULTS`` and its comments. A
job reads them on the client, once (``snapshot``), and its tasks take them from the job's
``io.storage.Store``, so they hold on every worker, whichever config the workers were started with.
A bad value is one line naming the setting and where it came from (``source_of``), Dask's own
settings too (``dask_seconds``); a value of the job's options that came from the environment is
said to (``given_from``: the command line's DASK_SCHEDULER_ADDRESS).

>>> size("block-size")
8388608
>>> with dask.config.set({"bpe-dask.retries": 0}):
...     count("retries")
0
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import dask.config
from dask.utils import parse_bytes, parse_timedelta

from bpe_dask.errors import BpeDaskError

DEFAULTS: dict[str, Any] = {
    # Each comment is the setting's row in the docs' settings reference (docs/hooks/reference.py).
    "block-size": "8MiB",  # text a task reads, decodes and pre-tokenizes at a time (a task's memory
    # is a few times this)
    "uncut-limit": 64 * 2**20,  # characters (64 Mi) with no safe cut: such text is one giant
    # pre-token, and the task stops with one line naming the file and offset
    "partition-min": "1MiB",  # the smallest partition when the planner sizes them (no --chunk-size)
    "partition-max": "64MiB",  # the largest: bounds a task's memory and the work lost with a worker
    "partitions-per-thread": 2,  # map tasks per worker thread when sized from the input, so a thread
    # that finishes early takes another
    "in-process-limit": "16MiB",  # below this much input, a job with nothing asked of a cluster
    # counts in this process
    "retries": 2,  # times a task tries again after a failure that may pass (a dropped connection, a
    # throttled store); 0: fail at once
    "retry-pause": "500ms",  # the pause before the first retry, doubled before each next one
    "pattern-timeout": 10.0,  # seconds a split pattern of your own may take per started million
    # characters; read where the pattern runs, so on a cluster of your own set it in the workers'
    # config too
    "progress-interval": "2s",  # how often a running map task reports how far it has read (one Dask
    # event per task at most this often, and one when its first block is counted)
    "max-workers": 0,  # the most workers an embedded LocalCluster starts; 0: one per core (what
    # runs at once)
    "min-worker-memory": "1GiB",  # the least memory each of its worker processes gets (an idle one
    # holds about 0.3 GiB); fewer workers start where the machine has less
    "whole-file-limit": "256MiB",  # the largest Parquet file read from a web server that serves no
    # byte ranges: it is downloaded whole into memory, by the planner and by its task
}
# Whole numbers, and the least each may be.
_COUNTS = {"partitions-per-thread": 1, "retries": 0, "max-workers": 0}
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
    return _checked(name, settings, _bytes, 1, "a positive size (e.g. 8MiB)")


def count(name: str, settings: dict | None = None, least: int = 0) -> int:
    """A setting that is a whole number of at least ``least``."""
    return _checked(name, settings, lambda value: int(str(value)), least, f"a whole number, {least} or more")


def seconds(name: str, settings: dict | None = None) -> float:
    """A setting that is a duration: ``0.5``, ``"500ms"``, ``"2s"``."""
    return _checked(name, settings, _seconds, 0, "a duration (e.g. 500ms)")


def _checked(name: str, settings: dict | None, read: Callable[[Any], Any], least: int, kind: str) -> Any:
    """The setting ``name`` as ``read`` gives it, if that is at least ``least``; else a one-line error
    saying it must be ``kind``."""
    value = setting(name, settings)
    try:
        number = read(value)
    except (ValueError, TypeError, KeyError):
        number = None
    if number is None or number < least:
        raise BpeDaskError(f"{_named(name, value)} must be {kind}, got {value!r}")
    return number


def _bytes(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else parse_bytes(str(value))


def _seconds(value: Any) -> float:
    return float(parse_timedelta(value, default="seconds"))


def dask_seconds(key: str) -> float:
    """A duration of Dask's own config (``distributed.comm.timeouts.connect``), in seconds."""
    value = dask.config.get(key)
    try:
        return _seconds(value)
    except (ValueError, TypeError, KeyError):
        said = f"{key}{source_of(key, value)}"
        raise BpeDaskError(f"{said} must be a duration (e.g. 30s), got {value!r}") from None


# Values of the job's options that came from somewhere the user may not see (the command line's
# DASK_SCHEDULER_ADDRESS), and that place: messages about them name it.
_GIVEN: ContextVar[tuple[tuple[str, str], ...]] = ContextVar("bpe_dask_given", default=())


@contextmanager
def given_from(value: str, source: str) -> Iterator[None]:
    """Within the block, ``given_by(value)`` is ``source``."""
    token = _GIVEN.set(((value, source), *_GIVEN.get()))
    try:
        yield
    finally:
        _GIVEN.reset(token)


def given_by(value: str) -> str | None:
    """Where ``value`` came from, if ``given_from`` says."""
    return next((source for given, source in _GIVEN.get() if given == value), None)


def _named(name: str, value: Any) -> str:
    return f"bpe-dask.{name}{source_of(f'bpe-dask.{name}', value)}"


def source_of(key: str, value: Any) -> str:
    """Where this process's Dask config took ``value`` of ``key`` (``"bpe-dask.block-size"``) from, as
    a message says it after the key: `` (from DASK_BPE_DASK__BLOCK_SIZE)``, `` (from
    /etc/dask/bpe.yaml)``, or `` (from dask.config.set)``, where neither holds that value.

    >>> source_of("bpe-dask.retries", 7)
    ' (from dask.config.set)'
    """
    wanted = _canonical(key)
    for name, text in os.environ.items():  # as Dask reads them: DASK_, then "__" between levels
        is_it = name.startswith("DASK_") and _canonical(name[5:].replace("__", ".")) == wanted
        if is_it and dask.config.interpret_value(text) == value:
            return f" (from {name})"
    for path, config in dask.config.collect_yaml(dask.config.paths, return_paths=True):
        if _found(config, wanted.split("."), value):
            return f" (from {path})"
    return " (from dask.config.set)"


def _canonical(key: str) -> str:
    return key.lower().replace("_", "-")  # Dask takes the two alike


def _found(config: Any, path: list[str], value: Any) -> bool:
    if not path:
        return config == value
    if not isinstance(config, Mapping):
        return False
    inner = [v for k, v in config.items() if isinstance(k, str) and _canonical(k) == path[0]]
    return any(_found(v, path[1:], value) for v in inner)
