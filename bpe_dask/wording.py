"""Wording: numbers, sizes and durations as people read them, for log lines and reports; and options
as the caller names them (``as_flags``: keywords in the Python API, flags on the command line)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

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


# A keyword option as messages name it: ``overwrite=True``, ``utf8_errors="replace"``, ``out=``;
# not inside a word, a path or a query string, nor quoted text.
_KEYWORD = re.compile(r"""(?<![\w.\-/?&='"])([a-z][a-z0-9_]*)=(True\b|"[^"]*"|'[^']*'|\d[\w.]*)?""")


def as_flags(message: str, flags: Mapping[str, str]) -> str:
    """``message`` with each keyword option it names written as the command-line flag that ``flags``
    maps it to. Every message names an option as the Python API takes it (``overwrite=True``,
    ``utf8_errors="replace"``, ``text_column=``), wherever it was raised, a worker included; the
    command line says them its way, at the one place its lines are printed.

    >>> flags = {"overwrite": "--overwrite", "utf8_errors": "--utf8-errors", "work_dir": "--work-dir"}
    >>> as_flags('a.txt: invalid UTF-8 (utf8_errors="replace" substitutes U+FFFD)', flags)
    'a.txt: invalid UTF-8 (--utf8-errors replace substitutes U+FFFD)'
    >>> as_flags("pass overwrite=True; cannot use work_dir='/tmp/a b': full; see work_dir=", flags)
    "pass --overwrite; cannot use --work-dir '/tmp/a b': full; see --work-dir"
    >>> as_flags("in_process=True, s3://b/k?overwrite=True", flags)  # no such flag; a URL's query
    'in_process=True, s3://b/k?overwrite=True'
    """

    def flag(match: re.Match) -> str:
        name, value = match.groups()
        if name not in flags:
            return match.group(0)
        if value is None or value == "True":
            return flags[name]
        if value[0] in "'\"":
            value = shlex.quote(value[1:-1])
        return f"{flags[name]} {value}"

    return _KEYWORD.sub(flag, message)
