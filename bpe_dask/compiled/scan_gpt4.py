"""GPT-4's and GPT-4o's split patterns (``gpt4``, tiktoken's cl100k; ``o200k``) compiled with numba.

Takes the UTF-8 bytes of a piece of text, a byte where a pre-token starts and ``scan_table``; each
``next_token_*`` gives where ``regex.findall`` with the pattern (``rules.patterns``) ends that
pre-token, which the tests hold it to on every class of code point, on pairs and on random text.
Each scanner walks its pattern's alternatives in order, with the outcome of the regex engine's
backtracking worked out:

- gpt4 ``'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+
  |\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s``. A possessive quantifier gives nothing back: a character
  before a letter run must be taken with it, and ``\\s++$`` is a whitespace run that reaches the
  end of the piece (it takes any final newline, so Python's ``$`` before one never comes into
  it). ``\\s*[\\r\\n]`` gives back to the run's last ``\\r`` or ``\\n``; ``\\s+(?!\\S)`` gives back
  the last whitespace character, unless it is the only one (then ``\\s`` takes it).
- o200k ``[^\\r\\n\\p{L}\\p{N}]?U*W+C?|[^\\r\\n\\p{L}\\p{N}]?U+W*C?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+
  [\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+``, with U = ``[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]``, W =
  ``[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]`` and C the optional case-insensitive contraction. Nothing is
  possessive: ``U*W+`` takes the U run and, when no W follows it, gives back to the run's last
  character in W (Lm, Lo and marks are in both); the prefix is given back before the second
  alternative is tried, which matters only for a mark (not a letter, so a prefix, but in U and W).
  Marks count with letters there and as others in ``[^\\s\\p{L}\\p{N}]``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bpe_dask.compiled.code_points import CLASS, LETTER, LOWER, NUMBER, OTHER, UPPER, decode, run_end, spaces

_S, _D, _M, _T, _L, _V, _E, _R = range(1, 9)  # a scan entry's contraction letter (``CONTRACTION_LETTERS``)
_CR, _LF, _SPACE, _APOSTROPHE, _SLASH = 0x0D, 0x0A, 0x20, 0x27, 0x2F
# Arguments of the functions called here as typed constants, not literals: numba compiles a version of
# a function for each literal it is passed (compile_once.py says more).
_IN_CLASS, _IN_LOWER = np.uint8(CLASS), np.uint8(LOWER)
_A_LETTER, _AN_OTHER = np.uint8(LETTER), np.uint8(OTHER)


@njit(cache=True, nogil=True, inline="always")
def _digits(data, j, hi, table):
    """``\\p{N}{1,3}`` with its first digit before byte ``j``: at most two more."""
    for _ in range(2):
        if j == hi:
            break
        cp, width = decode(data, j)
        if table[cp] & CLASS != NUMBER:
            break
        j += width
    return j


@njit(cache=True, nogil=True, inline="always")
def _contraction(data, j, hi, table):
    """Where s, d, m, t, ll, ve or re, in any case, at byte ``j`` (after an apostrophe) ends; -1 if
    none is there."""
    if j == hi:
        return -1
    cp, width = decode(data, j)
    first = table[cp] >> 4
    if first in (_S, _D, _M, _T):
        return j + width
    j += width
    if j < hi and first in (_L, _V, _R):
        cp, width = decode(data, j)
        if table[cp] >> 4 == (_L if first == _L else _E):
            return j + width
    return -1


@njit(cache=True, nogil=True, inline="always")
def _newlines(data, j, hi, slash):
    """``[\\r\\n]*`` (``[\\r\\n/]*`` with ``slash``) from byte ``j``."""
    while j < hi and (data[j] == _CR or data[j] == _LF or (slash and data[j] == _SLASH)):
        j += 1
    return j


@njit(cache=True, nogil=True, inline="always")
def next_token_gpt4(data, i, hi, table):
    """The end of the GPT-4 (cl100k) pre-token that starts at byte ``i`` of a piece ending at ``hi``."""
    cp, width = decode(data, i)
    kind = table[cp] & CLASS
    j = i + width
    if kind == LETTER:  # [^\r\n\p{L}\p{N}]?+\p{L}++, no prefix
        return run_end(data, j, hi, table, _IN_CLASS, _A_LETTER)
    if kind == NUMBER:  # \p{N}{1,3}+
        return _digits(data, j, hi, table)
    if cp == _APOSTROPHE:  # '(?i:[sdmt]|ll|ve|re)
        end = _contraction(data, j, hi, table)
        if end >= 0:
            return end
    after = -1  # the class of the next character (-1: none)
    if j < hi:
        following, following_width = decode(data, j)
        after = table[following] & CLASS
        if after == LETTER and cp != _CR and cp != _LF:  # [^\r\n\p{L}\p{N}]?+\p{L}++ with the prefix
            return run_end(data, j + following_width, hi, table, _IN_CLASS, _A_LETTER)
    if kind == OTHER or (cp == _SPACE and after == OTHER):  #  ?[^\s\p{L}\p{N}]++[\r\n]*+
        return _newlines(data, run_end(data, j, hi, table, _IN_CLASS, _AN_OTHER), hi, False)
    end, spaced, newline = spaces(data, i, hi, table)
    if end == hi:  # \s++$
        return end
    return newline if newline >= 0 else spaced  # \s*[\r\n], else \s+(?!\S) or \s


@njit(cache=True, nogil=True, inline="always")
def _cased(data, s, hi, table):
    """``U*W+`` at byte ``s``: where its match ends (-1: none), and where the run of U ends."""
    u, last = s, -1
    while u < hi:
        cp, width = decode(data, u)
        entry = table[cp]
        if not entry & UPPER:
            if entry & LOWER:  # W+ after the whole run
                return run_end(data, u + width, hi, table, _IN_LOWER, _IN_LOWER), u
            break
        u += width
        if entry & LOWER:
            last = u  # W+ takes this one when the run is given back to it
    return last, u


@njit(cache=True, nogil=True, inline="always")
def next_token_o200k(data, i, hi, table):
    """The end of the o200k pre-token that starts at byte ``i`` of a piece ending at ``hi``."""
    cp, width = decode(data, i)
    entry = table[cp]
    kind = entry & CLASS
    j = i + width
    if kind == NUMBER:  # \p{N}{1,3}
        return _digits(data, j, hi, table)
    end = -1
    if kind == LETTER or (cp != _CR and cp != _LF):  # the letter alternatives; [^\r\n\p{L}\p{N}]?
        start = i if kind == LETTER else j  # ... takes the first character unless it is a letter
        end, upper = _cased(data, start, hi, table)
        if end < 0 and kind != LETTER and entry & UPPER:
            end = j  # a mark (in U and W): U*W+ once the prefix is given back, the mark alone as W+
        elif end < 0 and upper > start:
            end = upper  # U+W*, W* empty (else U*W+ had matched); a letter is in U or W
    if end >= 0:
        if end < hi and data[end] == _APOSTROPHE:  # (?i:'s|'t|'re|'ve|'m|'ll|'d)?
            contraction = _contraction(data, end + 1, hi, table)
            if contraction >= 0:
                return contraction
        return end
    if kind == OTHER or (cp == _SPACE and j < hi and table[decode(data, j)[0]] & CLASS == OTHER):
        return _newlines(
            data, run_end(data, j, hi, table, _IN_CLASS, _AN_OTHER), hi, True
        )  #  ?[^\s\p{L}\p{N}]+[\r\n/]*
    _, spaced, newline = spaces(data, i, hi, table)
    return newline if newline >= 0 else spaced  # \s*[\r\n]+, else \s+(?!\S) or \s+
