"""Summing sorted count tables (compiled): runs sorted by token in, one sorted run out.

Takes count tables each sorted by token (bytewise, as Arrow sorts binary), as the map tasks write
their shards, each as flat arrays (``io.counts_table.as_arrays``); gives one run sorted the same
way in which each token appears once with the sum of its counts. Each pass merges the runs two by
two, like the merge step of a merge sort, so the reduce does no hashing and no sorting: linear
work, where a group-by and a sort of the concatenation cost several times as much.
Arrow's group-by is the general path, and the tests hold this one to it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bpe_dask.compiled.compile_once import readonly
from bpe_dask.compiled.hashing import compare_bytes


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _merge_two(data_a, offsets_a, counts_a, data_b, offsets_b, counts_b):
    """Two sorted runs merged into one, equal tokens summed."""
    n_a, n_b = len(counts_a), len(counts_b)
    data = np.empty(len(data_a) + len(data_b), np.uint8)
    offsets = np.empty(n_a + n_b + 1, np.int64)
    counts = np.empty(n_a + n_b, np.int64)
    i = j = n = used = 0
    offsets[0] = 0
    while i < n_a or j < n_b:
        if j == n_b:
            order = -1
        elif i == n_a:
            order = 1
        else:
            order = compare_bytes(
                data_a, offsets_a[i], offsets_a[i + 1], data_b, offsets_b[j], offsets_b[j + 1]
            )
        if order <= 0:
            token, count = data_a[offsets_a[i] : offsets_a[i + 1]], counts_a[i]
            i += 1
            if order == 0:
                count += counts_b[j]
                j += 1
        else:
            token, count = data_b[offsets_b[j] : offsets_b[j + 1]], counts_b[j]
            j += 1
        for k in range(len(token)):  # not a slice assignment: compile_once.py says why
            data[used + k] = token[k]
        used += len(token)
        counts[n] = count
        n += 1
        offsets[n] = used
    return data[:used], offsets[: n + 1], counts[:n]


SortedRun = tuple[np.ndarray, np.ndarray, np.ndarray]  # tokens back to back, where each starts, counts


def sum_sorted(runs: list[SortedRun]) -> SortedRun:
    """One run, sorted by token, each token once with the sum of its counts in ``runs``.

    A run is a count table sorted by token as three arrays: the tokens back to back (uint8), where
    each starts and the last ends (int64, from 0), and the counts (int64). No runs give an empty one.

    >>> run = (np.frombuffer(b"ab", np.uint8), np.array([0, 1, 2]), np.array([1, 2]))
    >>> data, offsets, counts = sum_sorted([run, run])
    >>> bytes(data), offsets.tolist(), counts.tolist()
    (b'ab', [0, 1, 2], [2, 4])
    """
    runs = [run for run in runs if len(run[2])]
    while len(runs) > 1:
        runs = [(readonly(data), offsets, counts) for data, offsets, counts in runs]  # one version compiled
        runs = [
            _merge_two(*runs[k], *runs[k + 1]) if k + 1 < len(runs) else runs[k]
            for k in range(0, len(runs), 2)
        ]
    if not runs:
        return np.zeros(0, np.uint8), np.zeros(1, np.int64), np.zeros(0, np.int64)
    return runs[0]
