"""One scanner for the three built-in split patterns: each pattern's number, table and scanner.

Takes a pattern's name (``pattern_number``) and gives the number the compiled loops branch on and
the class table its scanner reads (``table_of``); ``next_token`` is the scanner of that number:
where the pre-token that starts at a byte of UTF-8 ends.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bpe_dask.compiled.code_points import class_table, scan_table
from bpe_dask.compiled.scan_gpt2 import next_token_gpt2
from bpe_dask.compiled.scan_gpt4 import next_token_gpt4, next_token_o200k

GPT2, GPT4, O200K = 0, 1, 2
NUMBERS = {"gpt2": GPT2, "gpt4": GPT4, "o200k": O200K}


def pattern_number(name: str) -> int:
    """The number of the built-in pattern named ``name`` (``gpt2``, ``gpt4`` or ``o200k``)."""
    return NUMBERS[name]


def table_of(pattern: int) -> np.ndarray:
    """The table of code points the scanner of pattern number ``pattern`` reads."""
    return class_table() if pattern == GPT2 else scan_table()


# The scanner of a number, for loops where the number is known only when they run (the tests' loops).
# The counting and encoding loops do not call this: each is compiled once per pattern, closing over
# its number, and branches on it right where it scans, so that numba drops the other scanners before
# it inlines any (``count.count_loop``). Through this function, they would be inlined first and
# dropped after: four times the compile time.
@njit(cache=True, nogil=True, inline="always")
def next_token(pattern, data, i, hi, table):
    """The end of the pre-token of pattern number ``pattern`` that starts at byte ``i`` of a piece
    ending at ``hi``."""
    if pattern == GPT2:
        return next_token_gpt2(data, i, hi, table)
    if pattern == GPT4:
        return next_token_gpt4(data, i, hi, table)
    return next_token_o200k(data, i, hi, table)


def own_cache_file(function, pattern: int):
    """``function`` named for its pattern, so that numba caches each pattern's loop in files of its
    own. numba names a function's cache files after its qualified name, and its index of compiled
    versions is one file that a process reads, adds to and writes back whole: two processes that
    compiled two patterns' loops at once into one index (two jobs on one machine, say) could leave
    one's machine code filed under the other's key, which then fails when it runs."""
    function.__qualname__ = f"{function.__qualname__}_{pattern}"
    return function
