"""Finding byte strings again (compiled): the hash both tables of pre-tokens use, and the check that
confirms a match.

Takes a byte array and a range of it; gives a 64-bit hash and the range's first eight bytes as one
integer (``word_hash``), and the order of two ranges as Arrow sorts binary (``compare_bytes``: the
reduce's sorted runs, the merge loop's ties), 0 where they hold the same bytes: a table confirms a
match byte by byte, so a hash collision never merges two pre-tokens.
"""

from __future__ import annotations

import numpy as np
from numba import njit

LOW = np.int64(0xFFFFFFFF)  # the low 32 bits of an int64


@njit(cache=True, nogil=True, inline="always")
def compare_bytes(a, start_a, end_a, b, start_b, end_b):
    """-1, 0 or 1 as bytes ``a[start_a:end_a]`` sort before, equal or after ``b[start_b:end_b]``."""
    n_a, n_b = end_a - start_a, end_b - start_b
    for k in range(min(n_a, n_b)):
        x, y = a[start_a + k], b[start_b + k]
        if x != y:
            return -1 if x < y else 1
    if n_a == n_b:
        return 0
    return -1 if n_a < n_b else 1


K_LENGTH, K_WORD = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xFF51AFD7ED558CCD)


@njit(cache=True, nogil=True, inline="always")
def word_hash(data, start, end):
    """A 64-bit hash of ``data[start:end]`` taken eight bytes at a time, and its first eight bytes as
    one little-endian integer (zeros after a shorter word): one multiply per eight bytes rather than
    one per byte, and the key a table of words compares before any byte."""
    h = np.uint64(end - start) * K_LENGTH
    first = np.uint64(0)
    k = start
    while k < end:
        word = np.uint64(0)
        for j in range(min(8, end - k)):
            word |= np.uint64(data[k + j]) << np.uint64(8 * j)
        if k == start:
            first = word
        h = (h ^ word) * K_WORD
        h ^= h >> np.uint64(29)
        k += 8
    # MurmurHash3's finaliser: every bit of the result depends on every bit of ``h``.
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> np.uint64(33)), first
