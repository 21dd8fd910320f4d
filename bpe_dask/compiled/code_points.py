"""Code points for the compiled scanners: UTF-8 decoding, and every code point's class under ``regex``.

Takes nothing but the installed ``regex`` module; gives ``class_table`` (GPT-2's four classes) and
``scan_table`` (those, o200k's two case classes and the contraction letters, for GPT-4 and o200k),
each one byte per code point read off the ``regex`` module itself once per process, so the scanners
and the patterns cannot disagree whatever Unicode version it follows; ``decode``, the code point at
a byte of valid UTF-8; and the runs every scanner reads to its pre-token's end: of one class
(``run_end``) and of whitespace (``spaces``).
"""

from __future__ import annotations

import functools

import numpy as np
import regex
from numba import njit

OTHER, LETTER, NUMBER, SPACE = 0, 1, 2, 3  # a ``class_table`` entry
CLASS, UPPER, LOWER = 3, 4, 8  # bits of a ``scan_table`` entry (``CLASS``: the mask of its class)
UPPER_CLASS = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"  # o200k's classes, as its regex has them
LOWER_CLASS = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
CONTRACTION_LETTERS = "sdmtlver"  # a scan entry's upper four bits: 1 + the letter's index, 0 for none


@functools.cache
def class_table() -> np.ndarray:
    """Every code point's class under the ``regex`` module: ``\\p{L}``, ``\\p{N}``, ``\\s`` or other."""
    everything = "".join(map(chr, range(0x110000)))  # lone surrogates included: they are "other"
    table = np.zeros(0x110000, np.uint8)
    for kind, pattern in ((LETTER, r"\p{L}+"), (NUMBER, r"\p{N}+"), (SPACE, r"\s+")):
        for match in regex.finditer(pattern, everything):
            table[match.start() : match.end()] = kind
    return table


@functools.cache
def scan_table() -> np.ndarray:
    """Every code point's entry for GPT-4's and o200k's scanners: ``class_table``'s class in the low two
    bits, o200k's U and W classes as ``UPPER`` and ``LOWER``, and which contraction letter it is under
    ``(?i:...)`` in the upper four (U+017F, the long s, is an s)."""
    everything = "".join(map(chr, range(0x110000)))
    table = class_table().copy()
    for bit, chars in ((UPPER, UPPER_CLASS), (LOWER, LOWER_CLASS)):
        for match in regex.finditer(chars + "+", everything):
            table[match.start() : match.end()] |= bit
    for code, letter in enumerate(CONTRACTION_LETTERS, 1):
        for match in regex.finditer(f"(?i:{letter})", everything):
            table[match.start()] |= code << 4
    return table


# Inlined where called (numba types it again at each call site): a call LLVM leaves in o200k's scanner,
# which calls it at many sites, slows the count.
@njit(cache=True, nogil=True, inline="always")
def decode(data, i):
    """The code point starting at byte ``i`` of valid UTF-8, and its length in bytes."""
    b = np.int64(data[i])
    if b < 0x80:
        return b, 1
    if b < 0xE0:
        return ((b & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F), 2
    if b < 0xF0:
        return ((b & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6) | (np.int64(data[i + 2]) & 0x3F), 3
    return (
        ((b & 0x07) << 18)
        | ((np.int64(data[i + 1]) & 0x3F) << 12)
        | ((np.int64(data[i + 2]) & 0x3F) << 6)
        | (np.int64(data[i + 3]) & 0x3F)
    ), 4


# Called, not inlined by numba: compiled once rather than typed again at each call site, and inlined by
# LLVM all the same.
@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def run_end(data, i, hi, table, mask, kind):
    """Where the run of code points whose entry is ``kind`` under ``mask``, from byte ``i``, ends."""
    while i < hi:
        b = data[i]
        if b < 0x80:  # ASCII: a byte is a character
            if table[b] & mask != kind:
                break
            i += 1
            continue
        cp, width = decode(data, i)
        if table[cp] & mask != kind:
            break
        i += width
    return i


@njit(cache=False, nogil=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def spaces(data, i, hi, table):
    """The whitespace run at byte ``i``: where it ends; where ``\\s+(?!\\S)|\\s+`` ends, which leaves
    the run's last character to start the next pre-token unless the run reaches the end of the piece
    or is that one character; and where its last ``\\r`` or ``\\n`` ends (-1: it has none)."""
    start, last, newline = i, i, -1
    while i < hi:
        cp, width = decode(data, i)
        if table[cp] & CLASS != SPACE:
            break
        if cp == 0x0D or cp == 0x0A:  # \r or \n
            newline = i + 1
        last = i
        i += width
    spaced = i if i == hi or last == start else last
    return i, spaced, newline
