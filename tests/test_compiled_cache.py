"""numba's cache, and what a job compiles: each loop holds its own pattern's scanner only, and a new
process loads every loop from the cache an earlier one wrote.

The counting and encoding loops are compiled once per pattern (closures over the pattern's number,
``compiled.count.count_loop``) so that a job compiles the scanner it uses and no other: here a fresh
process with an empty ``NUMBA_CACHE_DIR`` compiles the gpt2 and gpt4 loops and records which scanners
numba inlines for each (a scanner it inlines it compiles, even where it drops the branch after); a
second process must load every loop, compiling none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("numba")

JOB = r"""
import json
import numpy as np
from numba.core.inline_closurecall import InlineWorker
from bpe_dask import compiled
from bpe_dask.compiled import cache

inlined, phase = {}, None  # which functions numba inlines while it compiles each pattern's loops
inline_function = InlineWorker.inline_function
def recording(self, caller_ir, block, i, function, *args, **kwargs):
    inlined.setdefault(phase, set()).add(function.__name__)
    return inline_function(self, caller_ir, block, i, function, *args, **kwargs)
InlineWorker.inline_function = recording

text = ("Hello world, it's 2024; don't STOP. " * 50 + "=" * 300 + " \n\n ").encode()
bounds = np.array([0, len(text)], np.int64)
for phase in ("gpt2", "gpt4"):
    counter = compiled.Counter(phase, capacity=4)  # tiny: the arrays grow, the table is rehashed
    counter.add(text, bounds)
    merges = {(104, 101): (0, 256), (256, 108): (1, 257), (61, 61): (2, 258)}
    compiled.Encoder(list(range(256)), merges, phase).encode(text, bounds, np.zeros(0, np.int64))

dispatchers = cache.functions()  # every compiled function Python calls, each pattern's loops apart
stats = {where: [sum(value.stats.cache_hits.values()), sum(value.stats.cache_misses.values())]
         for where, value in dispatchers.items() if value.stats.cache_hits or value.stats.cache_misses}
scanners = {"next_token_gpt2", "next_token_gpt4", "next_token_o200k"}
print(json.dumps({"stats": stats, "inlined": {k: sorted(v & scanners) for k, v in inlined.items()}}))
"""


def run_job(cache_dir) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir)}
    done = subprocess.run([sys.executable, "-c", JOB], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_each_loop_compiles_its_own_scanner_and_a_new_process_loads_them_all_from_the_cache(tmp_path):
    called = {  # what Python calls; the functions these call are compiled into them
        "count[0]", "count[1]", "encode[0]", "encode[1]",  # gpt2's and gpt4's loops; o200k's is not used
        "bpe_dask.compiled.count._rehash", "bpe_dask.compiled.merge_pretoken.fill_pairs",
    }  # fmt: skip
    first = run_job(tmp_path)
    assert called <= set(first["stats"]), first  # and what these call but do not inline
    assert all(misses > 0 and hits == 0 for hits, misses in first["stats"].values()), first  # compiled
    # Compiling a pattern's loops reads (to inline) that pattern's scanner and no other.
    assert first["inlined"] == {"gpt2": ["next_token_gpt2"], "gpt4": ["next_token_gpt4"]}, first
    # Each pattern's loop has cache files of its own: numba's index of a function's compiled versions
    # is one file a process rewrites whole, so processes compiling two patterns' loops at once into
    # one index could file one's machine code under the other's key.
    indexes = sorted(p.name.split("-")[0] for p in tmp_path.rglob("*_pieces_*.nbi"))
    assert indexes == ["count.count_loop.locals.count_pieces_0", "count.count_loop.locals.count_pieces_1",
                       "encode.encode_loop.locals.encode_pieces_0",
                       "encode.encode_loop.locals.encode_pieces_1"], indexes  # fmt: skip
    assert not [p.name for p in tmp_path.rglob("*_pieces_*.nbc") if not p.name.endswith(".1.nbc")]
    second = run_job(tmp_path)
    assert set(second["stats"]) == called, second
    assert all(hits > 0 and misses == 0 for hits, misses in second["stats"].values()), second  # loaded
    assert second["inlined"] == {}, second  # nothing compiled, so nothing inlined
