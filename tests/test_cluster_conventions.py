"""A cluster as HPC and cloud users run one: a `dask scheduler --scheduler-file` that speaks TLS, with
certificates the test makes and Dask's own config (its DASK_* variables) on every side, and workers
whose numba cache `bpe-dask warm-up` filled before they started.

The warm-up runs in a fresh process on an empty NUMBA_CACHE_DIR, where numba's own account
(each function's cache misses and hits) shows it compiled everything; the workers, fresh
`dask worker` processes on that cache, then run real jobs, and numba's account in them must show
machine code loaded and nothing compiled.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import servers
import timing

from bpe_dask import Tokenizer, train_bpe
from bpe_dask.cli.main import main
from bpe_dask.errors import BpeDaskError
from bpe_dask.jobs.options import JobOptions
from conftest import CS336_DIR, read_reference_merges

REPO = Path(__file__).resolve().parent.parent
EOT = "<|endoftext|>"

# numba's account of the package's compiled functions in this process: for each function Python
# called, how many times numba loaded it from the cache (hits) and compiled it (misses).
STATS = r"""
from bpe_dask.compiled.cache import functions

found = functions()
stats = {name: [sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values())]
         for name, f in found.items() if f.stats.cache_hits or f.stats.cache_misses}
versions = {name: len(f.overloads) for name, f in found.items() if f.overloads}
"""
# `bpe-dask warm-up` as the console script runs it, then numba's account of what it did, and the
# qualified name of every function numba compiled meanwhile (its own helpers too).
WARM_UP = (
    "import json, sys\nfrom numba.core import event\ncompiled = []\n"
    "class Compiles(event.Listener):\n"
    "    def on_start(self, e): compiled.append(e.data['dispatcher'].py_func.__qualname__)\n"
    "    def on_end(self, e): pass\n"
    "event.register('numba:compile', Compiles())\n"
    "from bpe_dask.cli.main import main\ncode = main(['warm-up'])\n"
    + STATS
    + "print(json.dumps({'code': code, 'stats': stats, 'versions': versions, 'compiled': compiled}))\n"
)
# What a train job runs (the counting loop, the reduce's sum of sorted runs, the merge loop) and what
# an encode job runs, on the workers.
TRAINING = {"count[0]", "bpe_dask.compiled.sum_sorted._merge_two",
            "bpe_dask.compiled.merge_loop._merge_batch"}
ENCODING = {"encode[0]", "bpe_dask.compiled.merge_pretoken.fill_pairs"}


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate and its key, for 127.0.0.1: the cluster's own certificate authority."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bpe-dask-test")])
    now = datetime.datetime.now(datetime.UTC)
    here = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(here, critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    pem, pkcs8 = serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8
    (folder / "cert.pem").write_bytes(cert.public_bytes(pem))
    (folder / "key.pem").write_bytes(key.private_bytes(pem, pkcs8, serialization.NoEncryption()))
    return folder / "cert.pem", folder / "key.pem"


def tls_env(cert: Path, key: Path, *roles: str) -> dict[str, str]:
    """Dask's TLS settings for ``roles`` as Dask reads them from the environment (README.md's way)."""
    env = {"DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(cert),
           "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True"}  # fmt: skip
    for role in roles:
        env[f"DASK_DISTRIBUTED__COMM__TLS__{role.upper()}__CERT"] = str(cert)
        env[f"DASK_DISTRIBUTED__COMM__TLS__{role.upper()}__KEY"] = str(key)
    return env


@pytest.fixture(scope="module")
def warmed_cache(tmp_path_factory) -> tuple[Path, dict]:
    """``bpe-dask warm-up`` in a fresh process on an empty cache, and numba's account of it."""
    pytest.importorskip("numba")
    cache = tmp_path_factory.mktemp("numba-cache")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-c", WARM_UP]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timing.seconds(600))
    assert done.returncode == 0, done.stderr
    return cache, {"stderr": done.stderr, **json.loads(done.stdout.splitlines()[-1])}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, warmed_cache):
    """A TLS `dask scheduler` that writes a scheduler file, and two `dask worker` processes on the
    warmed cache; yields the scheduler file, the environment a client needs (Dask's TLS settings)
    and the test's own client, to look at the workers."""
    pytest.importorskip("cryptography")
    from distributed import Client, Security

    folder = tmp_path_factory.mktemp("cluster")
    cert, key = self_signed(folder)
    scheduler_file = folder / "scheduler.json"
    command = [servers.DASK, "scheduler", "--protocol", "tls", "--host", "127.0.0.1", "--port", "0",
               "--no-dashboard", "--scheduler-file", str(scheduler_file)]  # fmt: skip
    with servers.processes(command, env={**servers.env_without_aws(), **tls_env(cert, key, "scheduler")}):
        timing.wait_until(scheduler_file.exists, 60, "the scheduler file", poll=0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        assert address.startswith("tls://"), address
        worker_env = {**servers.worker_env(), **tls_env(cert, key, "worker"),
                      "NUMBA_CACHE_DIR": str(warmed_cache[0])}  # fmt: skip
        with servers.processes(*[servers.worker_command(address)] * 2, env=worker_env):
            security = Security(tls_ca_file=str(cert), tls_client_cert=str(cert), tls_client_key=str(key),
                                require_encryption=True)  # fmt: skip
            with Client(address, security=security, timeout=timing.dask_seconds(30)) as client:
                client.wait_for_workers(2, timeout=timing.seconds(60))
                yield scheduler_file, tls_env(cert, key, "client"), client


def run(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`bpe-dask ARGS` in a fresh process, with ``env`` added to this one's (but no numba cache of
    the workers': the client's compiling, if any, is not theirs)."""
    connect = timing.dask_seconds(10)
    env = {**os.environ, "PYTHONPATH": str(REPO), "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": connect, **env}
    command = [sys.executable, "-m", "bpe_dask", *args]
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timing.seconds(300)
    )


def worker_stats(client) -> dict[str, dict[str, list[int]]]:
    """numba's account in each worker, by worker address."""

    def stats() -> dict:  # defined here, so that it travels by value (workers cannot import this module)
        namespace: dict = {}
        exec(STATS, namespace)
        return namespace["stats"]

    return client.run(stats)


def assert_nothing_compiled(client, ran: set[str]) -> None:
    """Every worker loaded what it ran from the cache and compiled nothing; between them they ran ``ran``."""
    by_worker = worker_stats(client)
    compiled = {w: [name for name, (_, misses) in s.items() if misses] for w, s in by_worker.items()}
    assert not any(compiled.values()), compiled
    loaded = {name for s in by_worker.values() for name, (hits, _) in s.items() if hits}
    assert ran <= loaded, (ran, by_worker)


def test_the_warm_up_compiles_on_an_empty_cache_and_says_where_it_is(warmed_cache):
    """The opposite of the workers' case below: a fresh process on an empty cache compiles (numba
    counts misses and no hits), which is what makes a worker that compiles nothing mean something."""
    cache, done = warmed_cache
    assert done["code"] == 0
    assert set(done["stats"]) >= TRAINING | ENCODING, done["stats"]
    assert all(misses > 0 and hits == 0 for hits, misses in done["stats"].values()), done["stats"]
    assert f"the cache is {cache} (NUMBA_CACHE_DIR)" in done["stderr"], done["stderr"]
    assert any(cache.rglob("*.nbc")), "numba wrote no machine code to NUMBA_CACHE_DIR"


def test_the_warm_up_compiles_one_version_of_each_function(warmed_cache):
    """numba compiles a version of a function for each combination of argument types it is called
    with, read-only and writable arrays apart: each function Python calls, and those the loops call
    with the bytes they were given, has one (``compiled.compile_once.readonly``), so a job on a
    warmed cache meets no type the warm-up did not compile."""
    _, done = warmed_cache
    called = ["count[0]", "encode[0]"] + [f"bpe_dask.compiled.{name}" for name in (
        "word_table._rehash", "sum_sorted._merge_two", "encode.pretoken_ids",
        "merge_pretoken.fill_pairs", "merge_pretoken.merge_short", "merge_pretoken.merge_long",
        "utf8.check_utf8", "encode.keep_found",
    )]  # fmt: skip
    assert {name: done["versions"].get(name) for name in called} == dict.fromkeys(called, 1), done["versions"]
    # Nor does a function get a version for a constant argument (numba types 0 as a literal apart from
    # an int64). The merge loop's words are records of uint16 ids up to 65,536 tokens and of int32
    # beyond (compiled.word_records): the functions that read them have a version for each, by design.
    twice = {name: n for name, n in done["versions"].items() if n > 1}
    records = [f"bpe_dask.compiled.{name}" for name in (
        "merge_loop._merge_batch", "merge_holders.merge_holders", "word_records._lay_out",
        "word_records._prefixes", "word_records._gather", "merge_state._count_pairs",
        "merge_state._list_pairs", "word_records.count_width", "word_records.end_mark",
        "word_records.count_of",
    )]  # fmt: skip
    assert twice == dict.fromkeys(records, 2), twice


def test_no_compiled_function_assigns_an_array_to_a_slice(warmed_cache):
    """For an array assigned to a slice, numba 0.68 compiles an error message naming both shapes:
    string code that takes 1.5-2 s to compile in each process that compiles any such function (half
    of the counting loop's compile, a third of the merge loop's). The compiled code copies in loops."""
    _, done = warmed_cache
    assert any("merge_batch" in name for name in done["compiled"]), done["compiled"]  # it recorded
    assert not [name for name in done["compiled"] if "shape_context" in name], done["compiled"]


def test_a_scheduler_file_names_a_tls_cluster_whose_warmed_workers_train_exactly(cluster, tmp_path):
    scheduler_file, client_env, client = cluster
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "scheduler.json").write_text(scheduler_file.read_text())  # a relative path: here's
    # DASK_SCHEDULER_ADDRESS gives way to the scheduler file (it names no scheduler at all).
    env = {**client_env, "DASK_SCHEDULER_ADDRESS": "tcp://127.0.0.1:9"}
    done = run("train", str(CS336_DIR / "corpus.en"), "--vocab-size", "500", "--special-token", EOT,
               "--out", "tok", "--scheduler-file", "scheduler.json", "--engine", "numba",
               "--chunk-size", "32KiB", cwd=tmp_path / "here", env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    address = json.loads(scheduler_file.read_text())["address"]
    named = f"bpe-dask: connecting to {address} (named by {tmp_path / 'here' / 'scheduler.json'})"
    ignored = "bpe-dask: DASK_SCHEDULER_ADDRESS (tcp://127.0.0.1:9) is not used: --scheduler-file says where"
    ignored += " to run"
    assert done.stderr.splitlines()[:2] == [ignored, named], done.stderr
    out = tmp_path / "here" / "tok"
    assert read_reference_merges(out / "merges.txt") == read_reference_merges(
        CS336_DIR / "train-bpe-reference-merges.txt"
    )
    report = json.loads((out / "report.json").read_text())
    assert report["partitions"] > 1 and report["merge_ran_on"] != "client", report  # all three on the workers
    assert_nothing_compiled(client, TRAINING)


def test_warmed_workers_encode_text_and_records_compiling_nothing(cluster, tmp_path):
    _, client_env, client = cluster
    vocab, merges = train_bpe(CS336_DIR / "corpus.en", 400, [EOT])  # in-process: small
    Tokenizer(vocab, merges, [EOT]).save(tmp_path / "tok")
    text = (CS336_DIR / "tinystories_sample.txt").read_text(encoding="utf-8")
    documents = [d for d in text.split(EOT) if d.strip()][:40]
    (tmp_path / "a.txt").write_text(text, encoding="utf-8", newline="")
    (tmp_path / "b.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in documents))
    done = run("encode", "a.txt", "b.jsonl", "--tokenizer", "tok", "--out", "ids.bin", "--engine", "numba",
               "--scheduler-file", str(cluster[0]), "-q", cwd=tmp_path, env=client_env)  # fmt: skip
    assert done.returncode == 0 and not done.stderr, done.stderr
    readable = Tokenizer(vocab, merges, [EOT], engine="python")
    expected = readable.encode(text) + [i for d in documents for i in readable.encode(d)]
    assert np.fromfile(tmp_path / "ids.bin", np.uint16).tolist() == expected
    assert_nothing_compiled(client, ENCODING)


def test_a_tls_scheduler_without_dask_s_tls_settings_here_is_one_line(cluster, tmp_path):
    scheduler_file = cluster[0]
    done = run("count", str(CS336_DIR / "corpus.en"), "--out", "counts.parquet", "--scheduler-file",
               str(scheduler_file), cwd=tmp_path, env={})  # fmt: skip
    assert done.returncode == 1, done.stderr
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("bpe-dask: error: cannot reach the Dask scheduler at tls://"), done.stderr
    assert "needs Dask's TLS settings" in error and "Traceback" not in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_python_api_takes_a_scheduler_file(cluster, tmp_path):
    import dask

    scheduler_file, client_env, _ = cluster
    settings = {k.removeprefix("DASK_").lower().replace("__", "."): v for k, v in client_env.items()}
    transitions = cluster[2].run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter)
    with dask.config.set(settings):  # Dask's TLS settings, as its config files would give them
        _, merges = train_bpe(CS336_DIR / "corpus.en", 500, [EOT], scheduler_file=scheduler_file)
    assert merges == read_reference_merges(CS336_DIR / "train-bpe-reference-merges.txt")
    assert cluster[2].run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter) > transitions


# --- mistakes: one line each, before any work --------------------------------------------------------


def test_scheduler_file_mistakes_are_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # The logging of this process is the tests' own.
    monkeypatch.setattr(sys.modules["bpe_dask.cli.main"], "_configure_logging", lambda quiet, verbose: None)
    (tmp_path / "in.txt").write_text("some text\n")
    (tmp_path / "other.json").write_text('{"type": "Worker", "id": "not a scheduler"}')
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "job.toml").write_text('scheduler_file = "scheduler.json"\n')
    (tmp_path / "workers.toml").write_text("workers = 2\n")
    (tmp_path / "two.toml").write_text('scheduler_file = "other.json"\nscheduler = "tcp://127.0.0.1:9"\n')
    cases = [
        (["--scheduler-file", "missing.json"],
         f"cannot read the scheduler file {tmp_path / 'missing.json'}: No such file or directory", 1),
        (["--scheduler-file", "."], f"cannot read the scheduler file {tmp_path}: Is a directory", 1),
        (["--scheduler-file", "other.json"], f"{tmp_path / 'other.json'} is not a Dask scheduler file", 1),
        (["--scheduler-file", "in.txt"], f"{tmp_path / 'in.txt'} is not a Dask scheduler file", 1),
        (["--scheduler-file", "other.json", "--workers", "2"], "--scheduler-file and --workers both say", 2),
        (["--scheduler-file", "other.json", "--scheduler", "tcp://h:1"], "and --scheduler both say", 2),
        (["--config", "two.toml"], "--scheduler-file and --scheduler both say where to run", 2),
        # A config file's path is taken from its folder; a config file's `workers` gives way to a flag.
        (["--config", "jobs/job.toml"], f"scheduler file {tmp_path / 'jobs' / 'scheduler.json'}: No such", 1),
        (["--config", "workers.toml", "--scheduler-file", "x.json"], f"{tmp_path / 'x.json'}: No such", 1),
    ]  # fmt: skip
    for args, fragment, code in cases:
        assert main(["count", "in.txt", "--out", "counts.parquet", *args]) == code, args
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("bpe-dask: error: "), (args, lines)
        assert fragment in lines[0], (args, lines)
    assert {p.name for p in tmp_path.iterdir()} == {"in.txt", "jobs", "other.json", "two.toml",
                                                    "workers.toml"}  # nothing written


def test_job_options_take_a_scheduler_file_as_this_machine_s_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scheduler.json").write_text('{"address": "tcp://10.0.0.5:8786"}')
    assert JobOptions.of(scheduler_file="scheduler.json").scheduler_file == str(tmp_path / "scheduler.json")
    assert JobOptions.of(scheduler_file=tmp_path / "scheduler.json").wants_cluster
    with pytest.raises(BpeDaskError, match="give one place to run: scheduler_file= or workers=, not both"):
        JobOptions.of(scheduler_file="scheduler.json", workers=2)
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(BpeDaskError, match=r"empty\.json is not a Dask scheduler file"):
        JobOptions.of(scheduler_file="empty.json")
