"""Real servers for the tests, as subprocesses on 127.0.0.1: an S3 endpoint and a Dask cluster."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
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
def s3_server(enforce_auth: bool = False) -> Iterator[str]:
    """A moto S3 server; yields its endpoint URL. With ``enforce_auth`` it knows no access key at all."""
    port = free_port()
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    auth = {"INITIAL_NO_AUTH_ACTION_COUNT": "0"} if enforce_auth else {}
    with processes(command, env={**os.environ, **S3_ENV, **auth}):
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


@dataclass
class Cluster:
    """A running `dask scheduler` and its `dask worker` processes (each a nanny and its worker)."""

    address: str
    scheduler: subprocess.Popen
    workers: list[subprocess.Popen]


@contextmanager
def cluster_processes(
    n_workers: int = 2, cwd: str | None = None, scheduler_env: dict | None = None, **worker_kind
) -> Iterator[Cluster]:
    """`dask scheduler` and `n_workers` `dask worker` processes, ready to take work."""
    from distributed import Client

    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    scheduler = [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"]
    with processes(scheduler, env={**env_without_aws(), **(scheduler_env or {})}, cwd=cwd) as (sched,):
        wait_for_port(port)
        workers = [worker_command(address, **worker_kind) for _ in range(n_workers)]
        env = worker_env(worker_kind.get("without_bpe_dask", False))
        with processes(*workers, env=env, cwd=cwd) as procs:
            with Client(address, timeout="30s") as client:
                client.wait_for_workers(n_workers, timeout=60)
            yield Cluster(address, sched, procs)


@contextmanager
def dask_cluster(n_workers: int = 2, cwd: str | None = None, **worker_kind) -> Iterator[str]:
    """`dask scheduler` and `n_workers` `dask worker` processes; yields the scheduler address."""
    with cluster_processes(n_workers, cwd, **worker_kind) as cluster:
        yield cluster.address


def kill_process_tree(pid: int) -> None:
    """SIGKILL a process and everything it started: a `dask worker` nanny and its worker."""
    import psutil

    try:
        parent = psutil.Process(pid)
        family = [*parent.children(recursive=True), parent]
    except psutil.NoSuchProcess:
        return
    for process in family:
        with suppress(psutil.NoSuchProcess):
            process.kill()
