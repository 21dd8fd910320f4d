"""GPT-4's and GPT-4o's split patterns (``gpt4``, tiktoken's cl100k; ``o200k``) compiled with numba.

The counterpart of ``pretokenize_numba``'s GPT-2 scanner for the other two built-in patterns: each
``_next_token_*`` gives the end of the pre-token at a byte of UTF-8, exactly where ``regex.findall``
with the pattern (``patterns``) ends it; the counting loops are ``_count_pieces``'s, and the
encoder (``encode_numba_gpt4``) calls the same scanners. The tests hold both to the ``regex`` module
on every class of code point, on pairs and on random text. Each scanner walks its pattern's
alternatives in order, with the outcome of the regex engine's backtracking worked out:

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

The classes come from the ``regex`` module for every code point (``scan_table``): ``class_table``'s
class in the low two bits, U and W as two more bits, and which contraction letter a code point is
under ``(?i:...)`` in the upper four (U+017F, the long s, is an s).
"""

from __future__ import annotations

import functools

import numpy as np
import regex
from numba import njit

from bpe_dask.compiled.scan_gpt2 import (
    _LOW,
    LETTER,
    NUMBER,
    OTHER,
    SPACE,
    CompiledCounts,
    _decode,
    _hash,
    class_table,
)

CLASS, UPPER, LOWER = 3, 4, 8  # bits of a ``scan_table`` entry (``CLASS``: the mask of its class)
UPPER_CLASS = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"  # o200k's classes, as its regex has them
LOWER_CLASS = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
CONTRACTION_LETTERS = "sdmtlver"  # an entry's upper four bits: 1 + the letter's index, 0 for none
_S, _D, _M, _T, _L, _V, _E, _R = range(1, 9)
_CR, _LF, _SPACE, _APOSTROPHE, _SLASH = 0x0D, 0x0A, 0x20, 0x27, 0x2F


@functools.cache
def scan_table() -> np.ndarray:
    """Every code point's entry under the ``regex`` module (see the module's docstring)."""
    everything = "".join(map(chr, range(0x110000)))
    table = class_table().copy()
    for bit, chars in ((UPPER, UPPER_CLASS), (LOWER, LOWER_CLASS)):
        for match in regex.finditer(chars + "+", everything):
            table[match.start() : match.end()] |= bit
    for code, letter in enumerate(CONTRACTION_LETTERS, 1):
        for match in regex.finditer(f"(?i:{letter})", everything):
            table[match.start()] |= code << 4
    return table


@njit(cache=True, nogil=True, inline="always")
def _run(data, i, hi, table, mask, kind):
    """Where the run of code points whose entry is ``kind`` under ``mask``, from byte ``i``, ends."""
    while i < hi:
        b = data[i]
        if b < 0x80:  # ASCII: a byte is a character
            if table[b] & mask != kind:
                break
            i += 1
            continue
        cp, width = _decode(data, i)
        if table[cp] & mask != kind:
            break
        i += width
    return i


@njit(cache=True, nogil=True, inline="always")
def _digits(data, j, hi, table):
    """``\\p{N}{1,3}`` with its first digit before byte ``j``: at most two more."""
    for _ in range(2):
        if j == hi:
            break
        cp, width = _decode(data, j)
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
    cp, width = _decode(data, j)
    first = table[cp] >> 4
    if first in (_S, _D, _M, _T):
        return j + width
    j += width
    if j < hi and first in (_L, _V, _R):
        cp, width = _decode(data, j)
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
def _spaces(data, i, hi, table):
    """The whitespace run at byte ``i``: where it ends, where its last character starts, and where
    its last ``\\r`` or ``\\n`` ends (-1: it has none)."""
    last, newline = i, -1
    while i < hi:
        cp, width = _decode(data, i)
        if table[cp] & CLASS != SPACE:
            break
        if cp in (_CR, _LF):
            newline = i + 1
        last = i
        i += width
    return i, last, newline


@njit(cache=True, nogil=True, inline="always")
def _next_token_gpt4(data, i, hi, table):
    """The end of the GPT-4 (cl100k) pre-token that starts at byte ``i`` of a piece ending at ``hi``."""
    cp, width = _decode(data, i)
    kind = table[cp] & CLASS
    j = i + width
    if kind == LETTER:  # [^\r\n\p{L}\p{N}]?+\p{L}++, no prefix
        return _run(data, j, hi, table, CLASS, LETTER)
    if kind == NUMBER:  # \p{N}{1,3}+
        return _digits(data, j, hi, table)
    if cp == _APOSTROPHE:  # '(?i:[sdmt]|ll|ve|re)
        end = _contraction(data, j, hi, table)
        if end >= 0:
            return end
    after = -1  # the class of the next character (-1: none)
    if j < hi:
        following, following_width = _decode(data, j)
        after = table[following] & CLASS
        if after == LETTER and cp != _CR and cp != _LF:  # [^\r\n\p{L}\p{N}]?+\p{L}++ with the prefix
            return _run(data, j + following_width, hi, table, CLASS, LETTER)
    if kind == OTHER or (cp == _SPACE and after == OTHER):  #  ?[^\s\p{L}\p{N}]++[\r\n]*+
        return _newlines(data, _run(data, j, hi, table, CLASS, OTHER), hi, False)
    end, last, newline = _spaces(data, i, hi, table)
    if end == hi:  # \s++$
        return end
    if newline >= 0:  # \s*[\r\n]
        return newline
    if last > i:  # \s+(?!\S): the last whitespace character starts the next pre-token
        return last
    return end  # \s


@njit(cache=True, nogil=True, inline="always")
def _cased(data, s, hi, table):
    """``U*W+`` at byte ``s``: where its match ends (-1: none), and where the run of U ends."""
    u, last = s, -1
    while u < hi:
        cp, width = _decode(data, u)
        entry = table[cp]
        if not entry & UPPER:
            if entry & LOWER:  # W+ after the whole run
                return _run(data, u + width, hi, table, LOWER, LOWER), u
            break
        u += width
        if entry & LOWER:
            last = u  # W+ takes this one when the run is given back to it
    return last, u


@njit(cache=True, nogil=True, inline="always")
def _next_token_o200k(data, i, hi, table):
    """The end of the o200k pre-token that starts at byte ``i`` of a piece ending at ``hi``."""
    cp, width = _decode(data, i)
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
    if kind == OTHER or (cp == _SPACE and j < hi and table[_decode(data, j)[0]] & CLASS == OTHER):
        return _newlines(data, _run(data, j, hi, table, CLASS, OTHER), hi, True)  #  ?[^\s\p{L}\p{N}]+[\r\n/]*
    end, last, newline = _spaces(data, i, hi, table)
    if newline >= 0:  # \s*[\r\n]+
        return newline
    if end == hi or last == i:  # \s+(?!\S) to the end of the piece, or \s+ of one character
        return end
    return last  # \s+(?!\S): the last whitespace character starts the next pre-token


# --- counting: pretokenize_numba._count_pieces's loop around each scanner --------------------------


@njit(cache=True, nogil=True, inline="always")
def _find(data, i, end, arena, starts, lengths, slots):
    """The slot of the counts table that holds the word ``data[i:end]``, or the empty slot where it
    goes; and the tag a slot holds for it."""
    h = _hash(data, i, end)
    tag = np.int64(h >> np.uint64(32)) << 32
    mask = len(slots) - 1
    slot = np.int64(h) & mask
    while slots[slot] != 0:
        if slots[slot] & ~_LOW == tag:
            t = (slots[slot] & _LOW) - 1
            if lengths[t] == end - i:
                start = starts[t]
                same = True
                for k in range(end - i):
                    if arena[start + k] != data[i + k]:
                        same = False
                        break
                if same:
                    return slot, tag
        slot = (slot + 1) & mask
    return slot, tag


# One loop per pattern, alike but for the scanner it calls (here, in ``encode_numba_gpt4`` and in the
# tests' ``*_ends``): numba 0.68 caches no compiled function that takes another as an argument or
# closes over one (each process would compile it again, seconds per job), and a branch on the
# pattern inside one loop would compile both scanners for either.
@njit(cache=True, nogil=True)
def _count_gpt4(data, bounds, piece, position, table, arena, used, starts, lengths, counts, n, slots):
    """``_count_pieces`` with GPT-4's scanner."""
    while piece < len(bounds) // 2:
        hi = bounds[2 * piece + 1]
        i = max(position, bounds[2 * piece])
        while i < hi:
            end = _next_token_gpt4(data, i, hi, table)
            slot, tag = _find(data, i, end, arena, starts, lengths, slots)
            if slots[slot] != 0:
                counts[(slots[slot] & _LOW) - 1] += 1
            elif n == len(starts) or used + end - i > len(arena) or 2 * (n + 1) > len(slots):
                return piece, i, used, n  # full: grow and come back
            else:
                arena[used : used + end - i] = data[i:end]
                starts[n], lengths[n], counts[n] = used, end - i, 1
                slots[slot] = tag | (n + 1)
                used += end - i
                n += 1
            i = end
        piece += 1
        position = 0
    return piece, 0, used, n


@njit(cache=True, nogil=True)
def _count_o200k(data, bounds, piece, position, table, arena, used, starts, lengths, counts, n, slots):
    """``_count_pieces`` with o200k's scanner."""
    while piece < len(bounds) // 2:
        hi = bounds[2 * piece + 1]
        i = max(position, bounds[2 * piece])
        while i < hi:
            end = _next_token_o200k(data, i, hi, table)
            slot, tag = _find(data, i, end, arena, starts, lengths, slots)
            if slots[slot] != 0:
                counts[(slots[slot] & _LOW) - 1] += 1
            elif n == len(starts) or used + end - i > len(arena) or 2 * (n + 1) > len(slots):
                return piece, i, used, n  # full: grow and come back
            else:
                arena[used : used + end - i] = data[i:end]
                starts[n], lengths[n], counts[n] = used, end - i, 1
                slots[slot] = tag | (n + 1)
                used += end - i
                n += 1
            i = end
        piece += 1
        position = 0
    return piece, 0, used, n


def compiled_counts(pattern: str, capacity: int = 1 << 16) -> CompiledCounts:
    """Counts in flat arrays with the scanner of the built-in pattern named ``pattern``."""
    if pattern == "gpt2":
        return CompiledCounts(capacity)
    count_pieces = {"gpt4": _count_gpt4, "o200k": _count_o200k}[pattern]
    return CompiledCounts(capacity, count_pieces, scan_table())


# --- for the tests: the scanners' boundaries ------------------------------------------------------


@njit(cache=True, nogil=True)
def gpt4_ends(data, lo, hi, table):
    """Where each GPT-4 pre-token of ``data[lo:hi]`` ends."""
    ends = np.empty(hi - lo, np.int64)
    count, i = 0, lo
    while i < hi:
        i = _next_token_gpt4(data, i, hi, table)
        ends[count] = i
        count += 1
    return ends[:count]


@njit(cache=True, nogil=True)
def o200k_ends(data, lo, hi, table):
    """Where each o200k pre-token of ``data[lo:hi]`` ends."""
    ends = np.empty(hi - lo, np.int64)
    count, i = 0, lo
    while i < hi:
        i = _next_token_o200k(data, i, hi, table)
        ends[count] = i
        count += 1
    return ends[:count]
