"""The five built-in split patterns as the compiled loops know them: a number each, and its table.

Takes a pattern's name (``pattern_number``) and gives the number the compiled loops branch on and
the class table its scanner reads (``table_of``). Each loop is compiled once per pattern, closing over
its number, and branches on it right where it scans (``count.count_loop``), so that numba drops the
other scanners before it inlines any: a function that took the number when it runs would have all
all five inlined first and dropped after, four times the compile time.
"""

from __future__ import annotations

import numpy as np

from bpe_dask.compiled.code_points import class_table, scan_table

GPT2, GPT4, O200K, SUPERBPE, SUPERBPE_LINES = 0, 1, 2, 3, 4
NUMBERS = {"gpt2": GPT2, "gpt4": GPT4, "o200k": O200K, "superbpe": SUPERBPE, "superbpe-lines": SUPERBPE_LINES}


def pattern_number(name: str) -> int:
    """The number of the built-in pattern named ``name`` (``gpt2``, ``gpt4``, ``o200k``, ``superbpe`` or
    ``superbpe-lines``)."""
    return NUMBERS[name]


def table_of(pattern: int) -> np.ndarray:
    """The table of code points the scanner of pattern number ``pattern`` reads."""
    return class_table() if pattern in (GPT2, SUPERBPE, SUPERBPE_LINES) else scan_table()


def own_cache_file(function, pattern: int):
    """``function`` named for its pattern, so that numba caches each pattern's loop in files of its
    own. numba names a function's cache files after its qualified name, and its index of compiled
    versions is one file that a process reads, adds to and writes back whole: two processes that
    compiled two patterns' loops at once into one index (two jobs on one machine, say) could leave
    one's machine code filed under the other's key, which then fails when it runs."""
    function.__qualname__ = f"{function.__qualname__}_{pattern}"
    return function
