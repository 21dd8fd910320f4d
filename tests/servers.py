"""Real servers for the tests, as subprocesses on 127.0.0.1: an S3 endpoint and a Dask cluster."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DASK = str(Path(sys.executable).parent / "dask")
# Credentials for the test S3 server; nothing here ever leaves 127.0.0.1.
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {seconds} s")


def env_without_aws() -> dict[str, str]:
    """This environment minus every AWS variable: workers must get what they need from the job."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_EC2_METADATA_DISABLED"] = "true"  # never ask a metadata service off this machine
    return env


@contextmanager
def processes(*commands: list[str], env: dict | None = None, cwd: str | None = None) -> Iterator[list]:
    procs = [
        subprocess.Popen(c, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for c in commands
    ]
    try:
        yield procs
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


@contextmanager
def s3_server() -> Iterator[str]:
    """A moto S3 server; yields its endpoint URL."""
    port = free_port()
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with processes(command, env={**os.environ, **S3_ENV}):
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}"


def worker_command(address: str, *, without_bpe_dask: bool = False, without: str | None = None) -> list[str]:
    """A `dask worker`; optionally one that cannot import bpe_dask, or some other module."""
    options = [address, "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1"]
    if without_bpe_dask:
        # -S skips the .pth files, among them the one that makes the editable bpe_dask importable;
        # PYTHONPATH (see worker_env) still finds every other installed package.
        return [sys.executable, "-S", "-m", "distributed.cli.dask_worker", *options]
    if without:
        code = (
            f"import sys; sys.modules[{without!r}] = None; sys.argv = ['dask-worker', *sys.argv[1:]]; "
            "from distributed.cli.dask_worker import main; main()"
        )
        return [sys.executable, "-c", code, *options, "--no-nanny"]  # the worker must be this process
    return [DASK, "worker", *options]


def worker_env(without_bpe_dask: bool = False) -> dict[str, str]:
    env = env_without_aws()
    if without_bpe_dask:
        env["PYTHONPATH"] = sysconfig.get_paths()["purelib"]
    return env


@contextmanager
def dask_cluster(n_workers: int = 2, cwd: str | None = None, **worker_kind) -> Iterator[str]:
    """`dask scheduler` and `n_workers` `dask worker` processes; yields the scheduler address."""
    from distributed import Client

    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    scheduler = [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"]
    with processes(scheduler, env=env_without_aws(), cwd=cwd):
        wait_for_port(port)
        workers = [worker_command(address, **worker_kind) for _ in range(n_workers)]
        with processes(*workers, env=worker_env(worker_kind.get("without_bpe_dask", False)), cwd=cwd):
            with Client(address, timeout="30s") as client:
                client.wait_for_workers(n_workers, timeout=60)
            yield address
