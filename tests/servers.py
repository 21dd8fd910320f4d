"""Real servers for the tests, as subprocesses on 127.0.0.1: an S3 endpoint and a Dask cluster."""

from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import timing

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


def wait_for_port(port: int, seconds: float = 60) -> None:
    """Until something listens on ``port`` (``seconds`` as ``timing`` scales them)."""

    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    timing.wait_until(listening, seconds, f"something to listen on 127.0.0.1:{port}", poll=0.1)


def env_without_aws() -> dict[str, str]:
    """This environment minus every AWS variable: workers must get what they need from the job."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_EC2_METADATA_DISABLED"] = "true"  # never ask a metadata service off this machine
    return env


@contextmanager
def processes(*commands: list[str], env: dict | None = None, cwd: str | None = None) -> Iterator[list]:
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    die_with_parent = _die_with_parent if sys.platform.startswith("linux") else None
    procs = [subprocess.Popen(c, env=env, cwd=cwd, preexec_fn=die_with_parent, **quiet) for c in commands]
    try:
        yield procs
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=timing.seconds(20))
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


def worker_command(
    address: str, *, without_bpe_dask: bool = False, without: str | None = None, nthreads: int = 1
) -> list[str]:
    """A `dask worker` of ``nthreads`` threads; optionally one that cannot import bpe_dask, or some
    other module."""
    options = [address, "--nthreads", str(nthreads), "--no-dashboard", "--host", "127.0.0.1"]
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


# What a worker of a real cluster has of its own: credentials (an instance role, its environment), but
# not the endpoint of the store a job means, which the job names.
WORKER_CREDENTIALS = {k: v for k, v in S3_ENV.items() if k != "AWS_EC2_METADATA_DISABLED"}


def worker_env(without_bpe_dask: bool = False, credentials: bool = True) -> dict[str, str]:
    env = env_without_aws()
    if credentials:
        env.update(WORKER_CREDENTIALS)
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
    n_workers: int = 2,
    cwd: str | None = None,
    scheduler_env: dict | None = None,
    credentials: bool = True,
    **worker_kind,
) -> Iterator[Cluster]:
    """`dask scheduler` and `n_workers` `dask worker` processes, ready to take work; the workers
    with S3 credentials of their own unless ``credentials`` is false."""
    from distributed import Client

    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    scheduler = [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"]
    with processes(scheduler, env={**env_without_aws(), **(scheduler_env or {})}, cwd=cwd) as (sched,):
        wait_for_port(port)
        workers = [worker_command(address, **worker_kind) for _ in range(n_workers)]
        env = worker_env(worker_kind.get("without_bpe_dask", False), credentials)
        with processes(*workers, env=env, cwd=cwd) as procs:
            with Client(address, timeout=timing.dask_seconds(30)) as client:
                client.wait_for_workers(n_workers, timeout=timing.seconds(60))
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


# --- clusters that behave like other machines ------------------------------------------------------
#
# Every cluster above shares the client's working directory and its disk. A real cluster does not:
# its scheduler and workers run on other machines, each in its own directory with its own /tmp
# and $HOME, and a path on the client's disk does not exist there. `separate_machines` starts
# such a cluster on this machine: each process in a directory of its own (outside the test's
# tmp tree), with its own TMPDIR and HOME, without the AWS variables, and, on Linux where mount
# namespaces are allowed, each worker in a mount namespace of its own in which a private empty
# tmpfs lies over the client's scratch area (`hidden`, the test's tmp tree where the client's
# inputs and outputs live), so that the client's files are not there for it and anything it
# writes to such a path lands on its own tmpfs (`Machine.private_files` lists it).


@dataclass
class Machine:
    """One process of a cluster, as if on a machine of its own: its folder (its working directory,
    holding ``tmp/`` (its TMPDIR), ``home/`` (its HOME) and ``log.txt``, its stdout and stderr)."""

    name: str
    root: Path
    process: subprocess.Popen | None = None
    hidden: tuple[Path, ...] = ()  # client paths under a private tmpfs in this process's view

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def log(self) -> Path:
        return self.root / "log.txt"

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, "TMPDIR": str(self.tmp), "HOME": str(self.home)}

    def files(self) -> set[str]:
        """The files in this machine's own folder (relative paths), except its log, Dask's worker
        space (``dask-scratch-space``) and Python's caches: where a job's output must never be."""
        found = set()
        for folder, subfolders, names in os.walk(self.root):  # a folder that goes meanwhile is skipped
            subfolders[:] = [f for f in subfolders if f not in ("dask-scratch-space", "__pycache__")]
            found |= {os.path.relpath(os.path.join(folder, name), self.root) for name in names}
        return found - {"log.txt"}

    def private_files(self) -> list[str]:
        """What this process wrote under a hidden client path, on its private tmpfs: seen through
        ``/proc/PID/root``, which opens paths in the process's own mount namespace."""
        if self.process is None or self.process.poll() is not None:
            return []
        found = []
        for hidden in self.hidden:
            view = Path(f"/proc/{self.process.pid}/root") / hidden.relative_to("/")
            for folder, _, names in os.walk(view):
                found += [str(hidden / Path(folder, name).relative_to(view)) for name in names]
        return sorted(found)


@dataclass
class SeparateCluster:
    """A `dask scheduler` and `dask worker` processes, each as if on another machine (`separate_machines`)."""

    address: str
    scheduler: Machine
    workers: list[Machine]
    nthreads: int
    hidden: tuple[Path, ...]
    # "private": each worker sees an empty tmpfs over ``hidden`` (the client's files are not there);
    # "shared": the workers see the client's disk (only their directories differ).
    view: str
    client: Any = None  # the test's own Client of the scheduler, to look at it (never to run a job)

    @property
    def machines(self) -> list[Machine]:
        return [self.scheduler, *self.workers]

    def files(self) -> dict[str, set[str]]:
        """Every file in each machine's folder, by machine name."""
        return {m.name: m.files() for m in self.machines}

    def private_files(self) -> list[str]:
        return sorted({f for m in self.workers for f in m.private_files()})

    def transitions(self) -> int:
        """How many task transitions the scheduler has made: unchanged by a job that stopped before
        submitting any task (its checks run through ``Client.run``, which makes none)."""
        return self.client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter)

    def logs(self, lines: int = 20) -> str:
        """The last ``lines`` of each process's log, for a failure message."""
        parts = []
        for m in self.machines:
            text = m.log.read_text(errors="replace").splitlines() if m.log.exists() else []
            parts.append(f"--- {m.name} ---\n" + "\n".join(text[-lines:]))
        return "\n".join(parts)


UNSHARE_PREFIXES = (
    ["unshare", "--mount", "--propagation", "private"],  # root
    ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"],  # a user namespace
)
# Run as `sh -c MOUNT_AND_EXEC sh N DIR... COMMAND...`: an empty tmpfs over each DIR, then COMMAND
# in this same process (so its pid is the one Popen knows, and signals reach it).
MOUNT_AND_EXEC = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do '
    'mount -t tmpfs -o mode=0755,size=256m bpe-dask-private "$1" || exit 97; shift; n=$((n - 1)); done; '
    'exec "$@"'
)


@functools.cache
def private_view_prefix() -> tuple[str, ...] | None:
    """The command prefix that gives a process a mount namespace of its own, in which it may mount a
    tmpfs over a path; None where there is none (not Linux, no `unshare`, not permitted, or
    BPE_DASK_TESTS_NO_PRIVATE_VIEW set, to try the fallback)."""
    if os.environ.get("BPE_DASK_TESTS_NO_PRIVATE_VIEW"):
        return None
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return None
    candidates = UNSHARE_PREFIXES if os.geteuid() == 0 else UNSHARE_PREFIXES[1:]
    for prefix in candidates:
        with tempfile.TemporaryDirectory(prefix="bpe-dask-unshare-probe-") as folder:
            Path(folder, "client-file").write_text("the client's")
            check = 'test ! -e "$1/client-file" && touch "$1/private-file" && test -e "$1/private-file"'
            probe = [*prefix, "sh", "-c", MOUNT_AND_EXEC, "sh", "1", folder, "sh", "-c", check, "sh", folder]
            try:
                done = subprocess.run(probe, capture_output=True, timeout=timing.seconds(20))
            except (OSError, subprocess.TimeoutExpired):
                continue
            if done.returncode == 0 and sorted(os.listdir(folder)) == ["client-file"]:
                return tuple(prefix)
    return None


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


@contextmanager
def separate_machines(
    hidden: list[Path] | tuple[Path, ...],
    n_workers: int = 2,
    nthreads: int = 1,
    private: bool = True,
    worker_env_extra: dict[str, str] | None = None,
) -> Iterator[SeparateCluster]:
    """A `dask scheduler` and ``n_workers`` `dask worker` processes (``nthreads`` threads each), each
    in a folder of its own with its own TMPDIR and HOME and without the AWS variables (plus
    ``worker_env_extra`` for the workers: credentials of their own, say).

    With ``private`` (and where the system permits it, see ``private_view_prefix``) each worker runs
    in a mount namespace of its own with an empty tmpfs over each of the client's ``hidden`` paths,
    so that they do not exist for it: ``view`` is then "private", else "shared" (only the folders
    differ, as for workers started by hand on the client's machine or a shared filesystem).
    Every process is stopped afterwards, its children too, and the folders removed.
    """
    from distributed import Client

    hidden = tuple(Path(h).resolve() for h in hidden)
    prefix = private_view_prefix() if private else None
    base = Path(tempfile.mkdtemp(prefix="bpe-dask-machines-")).resolve()
    assert not any(_within(base, h) or _within(h, base) for h in hidden), (base, hidden)
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    scheduler = Machine("scheduler", base / "scheduler")
    workers = [
        Machine(f"worker-{i}", base / f"worker-{i}", hidden=hidden if prefix else ())
        for i in range(n_workers)
    ]
    started: list[subprocess.Popen] = []
    try:
        for machine in (scheduler, *workers):
            for folder in (machine.root, machine.tmp, machine.home):
                folder.mkdir(parents=True, exist_ok=True)
        command = [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"]
        scheduler.process = _start(command, scheduler, env_without_aws())
        started.append(scheduler.process)
        wait_for_port(port)
        for machine in workers:
            command = worker_command(address, nthreads=nthreads)
            if prefix:
                mounts = [str(len(hidden)), *map(str, hidden)]
                command = [*prefix, "sh", "-c", MOUNT_AND_EXEC, "sh", *mounts, *command]
            machine.process = _start(command, machine, {**env_without_aws(), **(worker_env_extra or {})})
            started.append(machine.process)
        with Client(address, timeout=timing.dask_seconds(30)) as client:
            try:
                client.wait_for_workers(n_workers, timeout=timing.seconds(60))
            except TimeoutError:
                logs = SeparateCluster(address, scheduler, workers, nthreads, hidden, "?").logs()
                raise TimeoutError(f"the workers did not join {address}:\n{logs}") from None
            view = "private" if prefix else "shared"
            try:
                yield SeparateCluster(address, scheduler, workers, nthreads, hidden, view, client)
            finally:
                # Closed through the scheduler, the workers are gone in a moment; a SIGTERM'd
                # `dask worker` takes about 8 s to exit here (``_stop`` is for what this leaves).
                with suppress(Exception):
                    client.retire_workers(close_workers=True)
    finally:
        _stop(started)
        shutil.rmtree(base, ignore_errors=True)


def _start(command: list[str], machine: Machine, env: dict[str, str]) -> subprocess.Popen:
    with open(machine.log, "ab") as log:
        die_with_parent = _die_with_parent if sys.platform.startswith("linux") else None
        return subprocess.Popen(
            command, cwd=machine.root, env=machine.env(env), stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, preexec_fn=die_with_parent,
        )  # fmt: skip


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM it when the test process dies, even by SIGKILL, so that
    no scheduler or worker outlives a killed test run (the setting survives `unshare` and `exec`)."""
    import ctypes
    import signal

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _stop(started: list[subprocess.Popen]) -> None:
    """Stop the processes (workers first, then the scheduler) and every child they started."""
    import psutil

    family = []
    for p in started:
        with suppress(psutil.NoSuchProcess):
            family += psutil.Process(p.pid).children(recursive=True)
    for p in reversed(started):
        with suppress(ProcessLookupError):
            p.terminate()
    for p in reversed(started):
        try:
            p.wait(timeout=timing.seconds(20))
        except subprocess.TimeoutExpired:
            kill_process_tree(p.pid)
            p.wait(timeout=timing.seconds(10))
    for child in family:  # a worker whose nanny is gone
        with suppress(psutil.NoSuchProcess):
            child.kill()


# --- an HTTP server ---------------------------------------------------------------------------------
#
# A plain file server on 127.0.0.1, in a thread of the test process, whose first path segment says
# how it answers: what the HTTP(S) inputs meet in the wild. Each way has its own URLs, so tests that
# share one server never change how it answers another.
#   /ranged/NAME    answers a `Range` request with 206 and the bytes asked for (Accept-Ranges: bytes)
#   /whole/NAME     ignores `Range`: 200 and the whole file, with its Content-Length
#   /unsized/NAME   ignores `Range` and gives no Content-Length: the body ends when the connection does
#   /redirect/REST  302 to /REST
#   /drop/NAME      as /ranged/, but sends half of what it promised and closes the connection
#   /busy/NAME      as /ranged/, but answers the first request for each byte range with 503
#   /private/NAME   as /ranged/ to a request with `Authorization: Bearer HTTP_TOKEN`, else 401
#   /ranged/        an HTML page linking to every file of the folder, as a server's index page does
#   anything else, or a missing NAME: 404
HTTP_MODES = ("ranged", "whole", "unsized", "drop", "busy", "private")
HTTP_TOKEN = "let-me-in"


@dataclass
class HttpServer:
    """A running file server (`http_server`): its base URL and the folder it serves."""

    url: str
    root: Path
    requests: list[tuple[str, str, str | None]]  # (method, path, Range header) of every request, in order


def tls_files(folder: Path) -> tuple[Path, Path, Path]:
    """A certificate authority of the test's own and a certificate it signed for 127.0.0.1, written
    to ``folder``: the authority's certificate (what a client is told to trust, as a user's
    ``SSL_CERT_FILE`` names a private CA), and the server's certificate and key."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    day = datetime.timedelta(days=1)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bpe-dask test CA")])
    server_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])

    def certificate(subject: x509.Name, public_key: object) -> x509.CertificateBuilder:
        return x509.CertificateBuilder(
            subject_name=subject, issuer_name=ca_name, public_key=public_key,
            serial_number=x509.random_serial_number(), not_valid_before=now - day, not_valid_after=now + day,
        )  # fmt: skip

    uses = dict.fromkeys(("content_commitment", "key_encipherment", "data_encipherment", "key_agreement",
                          "encipher_only", "decipher_only"), False)  # fmt: skip
    ca = (
        certificate(ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, **uses), True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    localhost = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    server = (
        certificate(server_name, key.public_key())
        .add_extension(localhost, critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = folder / "ca.pem", folder / "server.pem", folder / "server-key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    unencrypted = serialization.NoEncryption()
    pkcs8 = serialization.PrivateFormat.PKCS8
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, pkcs8, unencrypted))
    return paths


@contextmanager
def http_server(root: Path, tls: tuple[Path, Path] | None = None) -> Iterator[HttpServer]:
    """Serve the files under ``root`` on 127.0.0.1 (see the table above) until the block ends; over
    HTTPS with ``tls``, a certificate and its key (``tls_files``)."""
    import email.utils
    import mmap
    import re
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    root = Path(root).resolve()
    requests: list[tuple[str, str, str | None]] = []
    refused: set[tuple[str, str]] = set()  # the (path, Range) that /busy/ has answered with 503

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as aiohttp expects of a server

        def do_HEAD(self) -> None:
            self.answer(head=True)

        def do_GET(self) -> None:
            self.answer(head=False)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the requests are kept instead
            pass

        def answer(self, head: bool) -> None:
            requests.append((self.command, self.path, self.headers.get("Range")))
            mode, _, name = self.path.partition("?")[0].lstrip("/").partition("/")  # no query
            if mode == "redirect":
                return self.send(302, b"", {"Location": f"/{self.path.split('/', 2)[2]}"}, head)
            path = (root / name).resolve()
            if mode == "ranged" and not name:
                links = "".join(f'<a href="{p.name}">{p.name}</a>\n' for p in sorted(root.iterdir()))
                return self.send(200, f"<html><body>\n{links}</body></html>\n".encode(), {}, head, html=True)
            if mode not in HTTP_MODES or root not in path.parents or not path.is_file():
                return self.send(404, b"not found\n", {}, head)
            size = path.stat().st_size
            with open(path, "rb") as f:  # mapped: a ranged answer reads only its range of a large file
                data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
            try:
                self.answer_with(data, mode, head, path)
            finally:
                if size:
                    data.close()

        def answer_with(self, data: Any, mode: str, head: bool, path: Path) -> None:
            headers = {"Last-Modified": email.utils.formatdate(path.stat().st_mtime, usegmt=True)}
            wanted = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", "") or "")
            if mode == "private" and self.headers.get("Authorization") != f"Bearer {HTTP_TOKEN}":
                return self.send(401, b"who are you?\n", {"WWW-Authenticate": "Bearer"}, head)
            if mode == "busy" and wanted and (self.path, wanted.group()) not in refused:
                refused.add((self.path, wanted.group()))
                return self.send(503, b"busy\n", {"Retry-After": "0"}, head)
            if mode in ("ranged", "drop", "busy", "private"):
                headers["Accept-Ranges"] = "bytes"
            if mode in ("ranged", "drop", "busy", "private") and wanted and wanted.group(1) + wanted.group(2):
                first, last = wanted.groups()
                start = int(first) if first else max(0, len(data) - int(last))  # "bytes=-N": the last N
                end = min(len(data), int(last) + 1) if first and last else len(data)
                if start >= len(data):
                    return self.send(416, b"", {"Content-Range": f"bytes */{len(data)}"}, head)
                headers["Content-Range"] = f"bytes {start}-{end - 1}/{len(data)}"
                return self.send(206, data[start:end], headers, head, drop=mode == "drop")
            self.send(200, data, headers, head, sized=mode != "unsized", drop=mode == "drop")

        def send(self, status: int, body: bytes, headers: dict, head: bool, sized: bool = True,
                 drop: bool = False, html: bool = False) -> None:  # fmt: skip
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Type", "text/html" if html else "application/octet-stream")
            if sized:
                self.send_header("Content-Length", str(len(body)))
            else:  # the body ends when the connection does (HTTP/1.1 allows this without a length)
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if head:
                return
            if drop:
                self.wfile.write(body[: len(body) // 2])
                self.close_connection = True
                return
            self.wfile.write(body)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client that closed the connection early (as it may: the tests look at the answers)

    server = Server(("127.0.0.1", 0), Handler)
    if tls:
        import ssl

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, name="test-http-server", daemon=True)
    thread.start()
    try:
        scheme = "https" if tls else "http"
        yield HttpServer(f"{scheme}://127.0.0.1:{server.server_address[1]}", root, requests)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=timing.seconds(10))
