"""numba's cache, and what a job compiles: each loop holds its own pattern's scanner only, and a new
process loads every loop from the cache an earlier one wrote.

The counting and encoding loops are compiled once per pattern (closures over the pattern's number,
``compiled.count.count_loop``) so that a job compiles the scanner it uses and no other: here a fresh
process with an empty ``NUMBA_CACHE_DIR`` compiles the gpt2 and gpt4 loops and records which scanners
numba inlines for each (a scanner it inlines it compiles, even where it drops the branch after); a
second process must load every loop, compiling none. Processes that share a cache take turns at
each function (``compiled.compile_once``): one compiles it, the others load it.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import timing

from conftest import CS336_DIR

REPO = Path(__file__).resolve().parent.parent

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
    done = subprocess.run([sys.executable, "-c", JOB], env=env, capture_output=True, text=True, check=True,
                          timeout=timing.seconds(600))  # fmt: skip
    return json.loads(done.stdout.splitlines()[-1])


def test_each_loop_compiles_its_own_scanner_and_a_new_process_loads_them_all_from_the_cache(tmp_path):
    called = {  # what Python calls; the functions these call are compiled into them
        "count[0]", "count[1]", "encode[0]", "encode[1]",  # gpt2's and gpt4's loops; o200k's is not used
        "bpe_dask.compiled.word_table._rehash", "bpe_dask.compiled.merge_pretoken.fill_pairs",
        "bpe_dask.compiled.encode.split_of",
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


# --- compiling once per machine ----------------------------------------------------------------------

# A process that compiles a small function of its own under ``share_compiles`` once the file ``go``
# exists, and says where its lock file is first; then numba's account: did it compile or load?
TAKING_TURNS = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import tiny
from bpe_dask.compiled.compile_once import lock_path, share_compiles
share_compiles([tiny.spread])
print(lock_path(tiny.spread), flush=True)
while not os.path.exists(os.path.join(sys.argv[1], "go")):
    time.sleep(0.01)
assert tiny.spread(10) == 45
stats = tiny.spread.stats
print(json.dumps([sum(stats.cache_hits.values()), sum(stats.cache_misses.values())]), flush=True)
"""
TINY = """
from numba import njit

@njit(cache=True)
def spread(n):
    total = 0
    for i in range(n):
        total += i
    return total
"""


def test_processes_sharing_a_cache_take_turns_so_one_compiles_and_the_other_loads(tmp_path):
    """Two processes about to compile one function at once: while another holds its lock file neither
    compiles (numba writes nothing to the cache); once it lets go, one compiles and the other loads
    what that one saved. Without the lock both would compile, and both write the function's index."""
    fcntl = pytest.importorskip("fcntl")
    (tmp_path / "tiny.py").write_text(TINY)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    command = [sys.executable, "-c", TAKING_TURNS, str(tmp_path)]
    processes = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        paths = {process.stdout.readline().strip() for process in processes}
        assert len(paths) == 1 and paths != {"None"}, paths  # one lock file, in numba's cache folder
        with open(paths.pop(), "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            (tmp_path / "go").touch()
            # Nothing to wait on: that nothing is compiled meanwhile is the point. Compiling the
            # function takes a fraction of this, on a machine as busy as this one (timing).
            time.sleep(timing.seconds(3))
            assert not list((tmp_path / "cache").rglob("*.nbc")), "a process compiled under another's lock"
        outcomes = sorted(tuple(json.loads(process.stdout.readline())) for process in processes)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
            process.stdout.close()
    assert outcomes == [(0, 1), (1, 0)], outcomes  # (hits, misses): one compiled, the other loaded


def test_a_local_cluster_job_on_an_empty_cache_compiles_each_function_once(tmp_path):
    """`bpe-dask count` on two worker processes and an empty numba cache (a fresh install's): the
    workers warm up the counting loop and the reduce's sum as they start, both at once, and each
    function is compiled, which numba says as it saves it, once between them; the other worker, and
    the tasks after, load it. (Before, each worker compiled everything itself.)"""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "NUMBA_DEBUG_CACHE": "1",
           "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)}  # fmt: skip
    command = [sys.executable, "-m", "bpe_dask", "count", str(CS336_DIR / "corpus.en"), "--out", "counts.pq",
               "--workers", "2", "--engine", "numba", "--chunk-size", "16KiB", "-q"]  # fmt: skip
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timing.seconds(300)
    )
    assert done.returncode == 0, done.stderr
    saved = [line.split("'")[1] for line in done.stdout.splitlines() if line.startswith("[cache] data saved")]
    compiled = collections.Counter(Path(path).name.split("-")[0] for path in saved)
    assert {"count.count_loop.locals.count_pieces_0", "sum_sorted._merge_two"} <= set(compiled), compiled
    assert set(compiled.values()) == {1}, compiled  # each once


STALE = r"""
import json, sys
import numpy as np
from bpe_dask import compiled
from bpe_dask.compiled import cache
text = b"Hello world, it's 2024; don't STOP. " * 20
counter = compiled.Counter("gpt2", capacity=64)
counter.add(text, np.array([0, len(text)], np.int64))
assert compiled.__file__.startswith(sys.argv[1])  # the copy, not the tree the tests run from
print(json.dumps(sorted(cache.cache_use().compiled)))
"""


def test_a_change_to_a_file_the_loops_inline_is_compiled_not_served_from_the_cache(tmp_path):
    """numba stamps a cached function with its own file only, though the counting loop inlines the
    scanners and helpers of other files (numba issue 1833): edited there, a package would run its
    old machine code, as a working copy after `git pull` did. Here a copy of the package runs the
    gpt2 counting loop, then again (loaded: nothing compiled), then once more after a comment is
    added to ``code_points.py``, which the loop inlines and whose own functions are not called from
    Python: the loop must be compiled again."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(REPO / "bpe_dask", copy / "bpe_dask", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(copy), "NUMBA_CACHE_DIR": str(tmp_path / "numba")}

    def compiled() -> list[str]:
        command = [sys.executable, "-c", STALE, str(copy)]  # from tmp_path: not the tree's bpe_dask
        done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tmp_path,
                              timeout=timing.seconds(600), check=True)  # fmt: skip
        return json.loads(done.stdout.strip().splitlines()[-1])

    assert "count[0]" in compiled()
    assert compiled() == []
    with open(copy / "bpe_dask" / "compiled" / "code_points.py", "a") as source:
        source.write("\n# edited\n")
    assert "count[0]" in compiled()
