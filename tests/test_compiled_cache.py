"""numba's cache: a new process loads the compiled loops from the cache an earlier one wrote.

Each loop branches on the pattern's number rather than taking its scanner as an argument, which
numba could not cache: here two fresh processes share an empty ``NUMBA_CACHE_DIR``; the first
compiles, the second must load every loop a gpt2 and a gpt4 count and encode use, compiling none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("numba")

JOB = r"""
import importlib, json, pkgutil
import numpy as np
from numba.core.registry import CPUDispatcher
from bpe_dask import compiled

text = ("Hello world, it's 2024; don't STOP. " * 50 + "=" * 300 + " \n\n ").encode()
bounds = np.array([0, len(text)], np.int64)
for pattern in ("gpt2", "gpt4"):
    counter = compiled.Counter(pattern, capacity=4)  # tiny: the arrays grow, the table is rehashed
    counter.add(text, bounds)
    merges = {(104, 101): (0, 256), (256, 108): (1, 257), (61, 61): (2, 258)}
    compiled.Encoder(list(range(256)), merges, pattern).encode(text, bounds, np.zeros(0, np.int64))
stats = {}
for module in pkgutil.iter_modules(compiled.__path__, "bpe_dask.compiled."):
    for name, value in vars(importlib.import_module(module.name)).items():
        if isinstance(value, CPUDispatcher) and (value.stats.cache_hits or value.stats.cache_misses):
            where = f"{value.py_func.__module__}.{value.py_func.__name__}"  # once, wherever imported
            stats[where] = [sum(value.stats.cache_hits.values()), sum(value.stats.cache_misses.values())]
print(json.dumps(stats))
"""


def run_job(cache_dir) -> dict[str, list[int]]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir)}
    done = subprocess.run([sys.executable, "-c", JOB], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_a_new_process_loads_every_loop_of_count_and_encode_from_the_cache(tmp_path):
    called = {  # what Python calls; the functions these call are compiled into them
        "bpe_dask.compiled.count.count_pieces", "bpe_dask.compiled.count._rehash",
        "bpe_dask.compiled.encode.encode_pieces", "bpe_dask.compiled.merge_pretoken.fill_pairs",
    }  # fmt: skip
    first = run_job(tmp_path)
    assert called <= set(first), first
    assert all(misses > 0 and hits == 0 for hits, misses in first.values()), first  # compiled, then saved
    second = run_job(tmp_path)
    assert set(second) == called, second
    assert all(hits > 0 and misses == 0 for hits, misses in second.values()), second  # loaded, not compiled
