"""SuperBPE's stage-2 split patterns (``superbpe``, ``superbpe-lines``) compiled with numba: where the
pre-token at a byte ends.

Takes the UTF-8 bytes of a piece of text (between special tokens), where the piece starts, a byte
where a pre-token starts, and ``class_table``; gives exactly where ``regex.findall`` with the pattern
ends that pre-token, which the tests hold it to:

    \\p{N}{1,3}(?=(?:\\p{N}{3})*(?!\\p{N})) | \\P{N}+                 (superbpe)
    \\p{N}{1,3}(?=(?:\\p{N}{3})*(?!\\p{N})) | [^\\p{N}\\n]+\\n? | \\n     (superbpe-lines)

A run of numbers is cut in groups of three counted from its end; everything else runs whole to the
next number (by lines: to the end of its line, the line end included). Only a run's first group can
be shorter than three, so the run is measured only there: a pre-token that starts after a number of
the same piece is a later group, three numbers long. Each run is then read twice at most, where the
regex reads it again at every group.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bpe_dask.compiled.code_points import CLASS, NUMBER, decode

_NUMBER = np.uint8(NUMBER)


@njit(cache=True, nogil=True, inline="always")
def _is_number(data, i, table):
    cp, width = decode(data, i)
    return table[cp] & CLASS == _NUMBER, width


@njit(cache=True, nogil=True, inline="always")
def next_token_superbpe(data, i, lo, hi, table, lines):
    """The end of the ``superbpe`` pre-token (``superbpe-lines`` with ``lines``) that starts at byte
    ``i`` of a piece ``[lo, hi)``."""
    number, width = _is_number(data, i, table)
    if not number:  # \P{N}+, or [^\p{N}\n]+\n?|\n
        if lines and data[i] == 0x0A:
            return i + 1
        j = i + width
        while j < hi:
            if lines and data[j] == 0x0A:
                return j + 1
            number, width = _is_number(data, j, table)
            if number:
                break
            j += width
        return j
    group = 3
    previous = i - 1
    while previous > lo and data[previous] & 0xC0 == 0x80:  # back to the start of the character before
        previous -= 1
    if i == lo or not _is_number(data, previous, table)[0]:  # a run's first group: 1-3 by its length
        run, j = 0, i
        while j < hi:
            number, step = _is_number(data, j, table)
            if not number:
                break
            run, j = run + 1, j + step
        group = (run - 1) % 3 + 1
    j, taken = i + width, 1
    while taken < group and j < hi:  # a later group has three by the first's choice: bounded all the same
        number, width = _is_number(data, j, table)
        if not number:
            break
        j, taken = j + width, taken + 1
    return j
