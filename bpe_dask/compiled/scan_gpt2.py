"""GPT-2's split pattern compiled with numba: where the pre-token at a byte of UTF-8 ends.

Takes the UTF-8 bytes of a piece of text (between special tokens), a byte where a pre-token starts,
and ``class_table``; gives exactly where ``regex.findall`` with GPT-2's pattern ends that pre-token,
which the tests hold it to on every class of code point and on random text. The scanner walks the
pattern's alternatives in order, as the regex engine does:

    '(?:[sdmt]|ll|ve|re) | ?\\p{L}+ | ?\\p{N}+ | ?[^\\s\\p{L}\\p{N}]+ | \\s+(?!\\S) | \\s+
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bpe_dask.compiled.code_points import CLASS, SPACE, decode, run_end, spaces

_IN_CLASS = np.uint8(CLASS)  # a typed constant: numba compiles a version of a callee per literal argument


@njit(cache=True, nogil=True, inline="always")
def next_token_gpt2(data, i, hi, table):
    """The end of the GPT-2 pre-token that starts at byte ``i`` of a piece ending at ``hi``."""
    cp, _ = decode(data, i)
    if cp == 0x27 and i + 1 < hi:  # '(?:[sdmt]|ll|ve|re)
        c1 = data[i + 1]
        if c1 == 0x73 or c1 == 0x64 or c1 == 0x6D or c1 == 0x74:
            return i + 2
        if i + 2 < hi:
            c2 = data[i + 2]
            if (c1 == 0x6C and c2 == 0x6C) or (c1 == 0x76 and c2 == 0x65) or (c1 == 0x72 and c2 == 0x65):
                return i + 3
    kind = table[cp]
    if cp == 0x20 and i + 1 < hi:  # " ?" before a letter, number or other run
        following, _ = decode(data, i + 1)
        if table[following] != SPACE:
            return run_end(data, i + 1, hi, table, _IN_CLASS, table[following])
    if kind != SPACE:  # \p{L}+, \p{N}+ or [^\s\p{L}\p{N}]+
        return run_end(data, i, hi, table, _IN_CLASS, kind)
    return spaces(data, i, hi, table)[1]  # \s+(?!\S) | \s+
