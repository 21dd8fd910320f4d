"""Checking UTF-8 (compiled): bytes in, where they stop being valid UTF-8 out, without decoding them.

Takes bytes; gives where the first invalid sequence starts, as Python's strict decoder reports it
(``UnicodeDecodeError.start``), and where a character cut off by the end of the bytes starts. The
compiled map tasks read text this way (``io.text.iter_utf8``): their scanners take UTF-8 bytes, so
decoding each block into a ``str`` only to encode it back, which holds the GIL, is left out. What
is valid is what Python's decoder accepts: no overlong forms, no surrogates, nothing past U+10FFFF.

>>> import numpy as np
>>> check_utf8(np.frombuffer("naïve 🙂".encode(), np.uint8))
(-1, 11)
>>> check_utf8(np.frombuffer(b"ok\\xed\\xa0\\x80", np.uint8))  # a surrogate: invalid where it starts
(2, 5)
>>> check_utf8(np.frombuffer("ab🙂".encode()[:4], np.uint8))  # the emoji cut off after two bytes
(-1, 2)
"""

from __future__ import annotations

from numba import njit


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def check_utf8(data):
    """``(first invalid, complete end)``: where the first invalid sequence of ``data`` starts (-1 if
    none), and where a last character that the end of ``data`` cuts off starts (``len(data)`` if
    none). A cut-off character counts as invalid only once a byte of it is wrong."""
    n = len(data)
    i = 0
    while i < n:
        b = data[i]
        if b < 0x80:
            i += 1
            continue
        if b < 0xC2 or b > 0xF4:  # a continuation byte first, an overlong two-byte form, past U+10FFFF
            return i, n
        if b < 0xE0:
            more, low, high = 1, 0x80, 0xBF
        elif b < 0xF0:
            more = 2
            low = 0xA0 if b == 0xE0 else 0x80  # no overlong three-byte form
            high = 0x9F if b == 0xED else 0xBF  # no surrogate
        else:
            more = 3
            low = 0x90 if b == 0xF0 else 0x80  # no overlong four-byte form
            high = 0x8F if b == 0xF4 else 0xBF  # nothing past U+10FFFF
        for k in range(1, more + 1):
            if i + k >= n:
                return -1, i  # cut off by the end, valid so far
            c = data[i + k]
            if (k == 1 and (c < low or c > high)) or (k > 1 and (c < 0x80 or c > 0xBF)):
                return i, n
        i += more + 1
    return -1, n
