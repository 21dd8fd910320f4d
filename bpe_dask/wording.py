"""Wording: numbers, sizes and durations as people read them, for log lines and reports."""

from __future__ import annotations

from dask.utils import format_bytes as _dask_format_bytes


def plural(count: int, noun: str) -> str:
    """``1 partition``, ``2 partitions``, ``1,024 input files``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def format_bytes(count: float) -> str:
    """``65.05 MB``-style sizes: Dask's own (binary units, 2 decimals); rates under 1 KiB too.

    >>> format_bytes(68_209_869), format_bytes(429.0251839935064)
    ('65.05 MiB', '429 B')
    """
    return _dask_format_bytes(round(count))


def format_seconds(seconds: float) -> str:
    """``4.2 s``, ``3 min 05 s``, ``1 h 02 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
