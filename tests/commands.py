"""`bpe-dask` commands as the tests run them: each in a process of its own, its exit code, stdout and
stderr returned as ``subprocess.run`` returns them.

The process is forked from one that has imported the command line already (multiprocessing's
forkserver, one per test process), then takes the command's directory and environment, so that the
suite's hundreds of commands do not each pay for Python's start and the imports: 0.6 s of processor
a command on this project's machine, a tenth of the suite. What is read from the environment once,
at import, is read again (Dask's config, the temporary directory); a command whose environment
changes what numba imported with (``NUMBA_*``), and a test about the start of the process itself
(a signal in its first second, the imports), run ``python -m bpe_dask``.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import timing

REPO = Path(__file__).resolve().parent.parent
PRELOADED = ["bpe_dask.cli.main", "bpe_dask.jobs.train", "bpe_dask.jobs.encode", "bpe_dask.jobs.evaluate"]
_context = None


def _numba(environment: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in environment.items() if k.startswith("NUMBA_")}


NUMBA = _numba(os.environ)  # what the forking process imports numba with (the conftest sets it first)


def bpe_dask(
    *args: str, cwd: Path | str, env: dict | None = None, environment: dict | None = None,
    check: bool = False, timeout: float = 300,
) -> subprocess.CompletedProcess:  # fmt: skip
    """Run ``bpe-dask ARGS`` in ``cwd`` with this environment and ``env`` over it (or ``environment``
    alone); ``check`` fails the test on a non-zero exit; ``timeout`` seconds as ``timing`` scales them."""
    base = os.environ if environment is None else environment
    environment = {**base, "PYTHONPATH": str(REPO), **(env or {})}
    if _numba(environment) != NUMBA:
        done = subprocess.run([sys.executable, "-m", "bpe_dask", *args], cwd=cwd, env=environment,
                              capture_output=True, text=True, timeout=timing.seconds(timeout))  # fmt: skip
    else:
        done = _forked(list(args), str(cwd), environment, timing.seconds(timeout))
    if check:
        assert done.returncode == 0, done.stderr
    return done


def _forked(args: list[str], cwd: str, env: dict, timeout: float) -> subprocess.CompletedProcess:
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOADED)
    with tempfile.TemporaryDirectory() as folder:  # the forked process's output: its own files
        out, err = Path(folder, "stdout"), Path(folder, "stderr")
        process = _context.Process(target=_command, args=(args, cwd, env, str(out), str(err)))
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(["bpe-dask", *args], timeout)
        stdout, stderr = (p.read_bytes().decode("utf-8", "replace") if p.exists() else "" for p in (out, err))
    return subprocess.CompletedProcess(["bpe-dask", *args], process.exitcode, stdout, stderr)


def _command(args: list[str], cwd: str, env: dict, out: str, err: str) -> None:
    """In the forked process: this directory, environment and output, then the command, which ends
    the process with its exit code."""
    import dask.config

    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    if "DASK_CONFIG" in env:  # a folder of YAML files, which Dask takes at import
        dask.config.paths.append(env["DASK_CONFIG"])
    dask.config.refresh()  # DASK_* as a new process reads them
    tempfile.tempdir = None  # TMPDIR
    sys.stdout.flush(), sys.stderr.flush()
    for fd, path in ((1, out), (2, err)):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    null = os.open(os.devnull, os.O_RDONLY)  # no stdin, as subprocess.run(capture_output=True) gives none
    os.dup2(null, 0)
    os.close(null)
    sys.argv = ["bpe-dask", *args]
    from bpe_dask.__main__ import run

    run()
