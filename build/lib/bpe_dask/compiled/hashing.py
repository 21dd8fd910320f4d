"""Finding byte strings again (compiled): the hash both tables of pre-tokens use, and the check that
confirms a match.

Takes a byte array and a range of it; gives a 64-bit hash (``fnv_hash``), and whether two ranges
hold the same bytes (``same_bytes``): a table confirms a match byte by byte, so a hash collision
never merges two pre-tokens.
"""

from __future__ import annotations

import numpy as np
from numba import njit

FNV_OFFSET, FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)
LOW = np.int64(0xFFFFFFFF)  # the low 32 bits of an int64


@njit(cache=True, nogil=True, inline="always")
def fnv_hash(data, start, end):
    """FNV-1a over the bytes, then MurmurHash3's finaliser: FNV's low bits depend only on the bytes'
    low bits, and the table is indexed by the low bits, so they must be mixed with the high ones."""
    h = FNV_OFFSET
    for k in range(start, end):
        h = (h ^ np.uint64(data[k])) * FNV_PRIME
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> np.uint64(33))


@njit(cache=True, nogil=True, inline="always")
def same_bytes(a, start_a, b, start_b, length):
    """Whether ``a[start_a:start_a + length]`` and ``b[start_b:start_b + length]`` hold the same bytes."""
    for k in range(length):  # noqa: SIM110 (numba: a plain loop, not a generator)
        if a[start_a + k] != b[start_b + k]:
            return False
    return True
