"""Connecting to a scheduler: a line saying where, and an address that is no Dask scheduler (a
dashboard's HTTP port, a server that says nothing) failing within the connect timeout in one line."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import commands
import servers
import timing

REPO = Path(__file__).resolve().parent.parent


def run(*args: str, cwd: Path, timeout: str = "3s") -> tuple[subprocess.CompletedProcess, float]:
    env = {"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": timeout}
    started = time.monotonic()
    done = commands.bpe_dask(*args, cwd=cwd, env=env, timeout=120)
    return done, time.monotonic() - started


def test_an_http_port_is_not_a_scheduler(tmp_path):
    """Dask's own client waits forever for a handshake from an HTTP server (seen: 590 s)."""
    (tmp_path / "in.txt").write_text("some text\n")
    (tmp_path / "served").mkdir()
    port = servers.free_port()
    http = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    with servers.processes(http, cwd=str(tmp_path / "served")):
        servers.wait_for_port(port)
        address = f"tcp://127.0.0.1:{port}"
        done, seconds = run("count", "in.txt", "--out", "c.parquet", "--scheduler", address, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert seconds < timing.seconds(30), seconds  # the 3 s connect timeout, plus starting Python
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"bpe-dask: connecting to {address}",
        f"bpe-dask: error: cannot reach the Dask scheduler at {address}: it said nothing in 3 s, so it is "
        "not a Dask scheduler (the dashboard's HTTP port, 8787 by default?); a scheduler listens on 8786 "
        "unless told otherwise",
    ], done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "served"]


def test_a_real_scheduler_started_elsewhere_writes_a_relative_out_here(tmp_path):
    """The scheduler and worker run in another directory: a relative --out is this machine's (it was
    written into the workers' directory, and the job then died with a traceback)."""
    (tmp_path / "in.txt").write_text("some text, and some more text\n")
    (tmp_path / "cluster").mkdir()
    with servers.dask_cluster(1, cwd=str(tmp_path / "cluster")) as address:
        # a real scheduler's handshake, on a busy machine, may take longer than the 3 s above
        timeout = timing.dask_seconds(30)
        done, _ = run("count", "in.txt", "--out", "counts.parquet", "--scheduler", address, cwd=tmp_path,
                      timeout=timeout)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == f"bpe-dask: connecting to {address}"
    assert (tmp_path / "counts.parquet").exists()
    assert not list((tmp_path / "cluster").iterdir())
