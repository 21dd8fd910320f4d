"""Compiling ahead what a training job runs after counting: in a process of its own, while it counts.

Takes the job's engine, input size and vocabulary size; gives a background thread
(``compile_merge_loop_in_background``) that makes sure numba's cache holds the reduce's sum and the
merge loop for the job's records, then loads them into this process, so that the first merges of a
fresh install do not wait for a compile. It only ever saves time: whatever fails, the merge stage
compiles what it needs when it needs it, as it would have.

Why a process: numba compiles one function at a time in a process (a lock of its own), and the
count stage's loops compile in the job's process when the embedded cluster's workers are its
threads. The merge loop compiled there would take turns with them, and the counting would wait. A
second process compiles on another core and saves into numba's cache, under
``compiled.compile_once``'s locks, what this one then loads in a fraction of a second. Where the
cache holds the loop already, no process is started.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading

from bpe_dask.stages.merge import COMPILE_AHEAD_BYTES, NUMBA_MIN_WORDS, merge_engine

log = logging.getLogger(__name__)


def compile_merge_loop_in_background(
    engine: str = "auto", input_bytes: int | None = None, vocab_size: int | None = None
) -> threading.Thread | None:
    """Start compiling the merge loop (or loading it from numba's cache) in the background, and give
    the thread that does it. ``None``, and no thread, where the loop will not run compiled: with
    ``engine="auto"``, for ``input_bytes`` under ``COMPILE_AHEAD_BYTES`` (``None``: any size), whose
    words the Python loop merges. With ``vocab_size``, only the loop for that size's records
    (``compiled.word_records``); else every width."""
    likely = input_bytes is None or input_bytes >= COMPILE_AHEAD_BYTES
    if merge_engine(engine, NUMBA_MIN_WORDS if likely else 0) != "numba":
        return None
    from bpe_dask.compiled.word_records import WIDE_VOCAB

    sizes = (300, WIDE_VOCAB + 1) if vocab_size is None else (max(vocab_size, 257),)
    thread = threading.Thread(target=_compile_ahead, args=(sizes,), name="bpe-dask-compile", daemon=True)
    thread.start()
    return thread


def _compile_ahead(sizes: tuple[int, ...]) -> None:
    try:
        from bpe_dask.compiled import compile_merge_loop
        from bpe_dask.compiled.merge_loop import merge_loop_cached

        if not merge_loop_cached(sizes):
            _in_a_process(sizes)
        # Loaded from the cache (compiled here if the process saved nothing).
        compile_merge_loop(sizes, sort=False)
    except BaseException:  # a signal meanwhile is the job's to report, and a failure the merge stage's
        log.debug("compiling the merge loop ahead stopped", exc_info=True)


# The second process's Python: this process's module path (so it imports the very bpe_dask this one
# runs, which is what numba keys its cache on; ``-m`` would put its folder first), then ``compile_here``.
_CHILD = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); from {0} import compile_here; compile_here()"
)


def _in_a_process(sizes: tuple[int, ...]) -> None:
    """Compile into numba's cache in a new Python process (``compile_here``), and wait for it."""
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD.format(__name__), json.dumps(sys.path), *map(str, sizes)],
        stdin=subprocess.PIPE,  # held open, never written: the child ends when this process does
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    with child:
        said = child.stderr.read().decode(errors="replace").strip().splitlines()
    if child.returncode:
        log.debug("compiling ahead in a process of its own failed (exit %s): %s", child.returncode, said)


def compile_here() -> None:
    """The second process: the reduce's sum, which the job needs first, then the merge loop for the
    vocabulary sizes its arguments name; ending as soon as the job's process does."""
    threading.Thread(target=_end_with_the_job, daemon=True).start()
    from bpe_dask.compiled import compile_merge_loop
    from bpe_dask.stages.warm_up import compile_stages

    compile_stages(stages=("reduce",))
    compile_merge_loop(tuple(int(size) for size in sys.argv[2:]), sort=False)  # a job's words come in order


def _end_with_the_job() -> None:
    """End this process when the job's ends, however it ends (done first, stopped, killed): its end
    closes the pipe this process reads from. A lock file held meanwhile goes with the process, and
    numba writes each cache file whole or not at all."""
    while os.read(0, 4096):  # not through sys.stdin, whose lock would stop this process's own exit
        pass
    os._exit(1)
