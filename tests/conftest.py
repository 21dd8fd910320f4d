"""Shared test helpers: make `tests/` importable and read the CS336 reference fixtures."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import dask.config
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from bpe_dask.io.counts_table import BINARY_LIMIT, COUNTS_SCHEMA, LARGE_COUNTS_SCHEMA

TESTS_DIR = Path(__file__).resolve().parent
CS336_DIR = TESTS_DIR / "fixtures" / "cs336"

# Let test modules `import corpus` / `import servers` under any pytest import mode.
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

import timing  # noqa: E402 (found through the path above)

# Dask's own timeouts (30 s to connect, and to call a silent connection dead) scaled as the suite's
# are, in this process and in every scheduler, worker and command it starts: on a busy machine a
# worker that holds its GIL for a while is slow, not lost. A test that means a timeout sets its own.
for _name in ("connect", "tcp"):
    _variable = f"DASK_DISTRIBUTED__COMM__TIMEOUTS__{_name.upper()}"
    os.environ.setdefault(_variable, timing.dask_seconds(30))
    dask.config.set({f"distributed.comm.timeouts.{_name}": os.environ[_variable]})

# Hypothesis (tests/test_properties.py): "ci", the default, keeps the properties to about a minute of
# the suite; HYPOTHESIS_PROFILE=long runs thousands of examples each. Failing examples are kept under
# .pytest_cache (ignored by git) and replayed first next time.
settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
    database=DirectoryBasedExampleDatabase(str(TESTS_DIR.parent / ".pytest_cache" / "hypothesis")),
)
settings.register_profile("long", settings.get_profile("ci"), max_examples=5000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def gpt2_bytes_to_unicode() -> dict[int, str]:
    """The GPT-2 byte -> printable character table used by the reference files."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table = {b: chr(b) for b in printable}
    n = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + n)
            n += 1
    return table


def gpt2_decode(s: str) -> bytes:
    """Map a GPT-2 byte-to-unicode string back to raw bytes."""
    inverse = {c: b for b, c in gpt2_bytes_to_unicode().items()}
    return bytes(inverse[c] for c in s)


def read_reference_merges(path: Path) -> list[tuple[bytes, bytes]]:
    """Read a merges.txt of "A B" lines (GPT-2 byte encoding)."""
    merges = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            a, b = line.rstrip().split(" ")
            merges.append((gpt2_decode(a), gpt2_decode(b)))
    return merges


def read_reference_vocab(path: Path) -> dict[int, bytes]:
    """Read a vocab.json of {gpt2_string: id}."""
    raw: dict[str, int] = json.loads(path.read_text(encoding="utf-8"))
    return {i: gpt2_decode(s) for s, i in raw.items()}


@pytest.fixture(scope="session")
def cs336_corpus_path() -> Path:
    """Path of the CS336 conformance corpus (vocab 500, specials ["<|endoftext|>"])."""
    return CS336_DIR / "corpus.en"


@pytest.fixture(scope="session")
def cs336_reference_merges() -> list[tuple[bytes, bytes]]:
    """Reference merges for corpus.en."""
    return read_reference_merges(CS336_DIR / "train-bpe-reference-merges.txt")


@pytest.fixture(scope="session")
def cs336_reference_vocab() -> dict[int, bytes]:
    """Reference vocab for corpus.en (ids differ from ours: compare values as sets)."""
    return read_reference_vocab(CS336_DIR / "train-bpe-reference-vocab.json")


@pytest.fixture(scope="session")
def client():
    """A real LocalCluster of 2 single-threaded worker processes, shared by the tests of a test process
    (its workers' start and imports are a second and a half of processor each)."""
    import timing
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address="127.0.0.1:0") as cluster,
        Client(cluster, timeout=timing.dask_seconds(30), set_as_default=False) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def endpoint():
    """A moto S3 server on 127.0.0.1 (``servers.s3_server``), shared by a module's tests: its URL."""
    pytest.importorskip("moto")
    import servers

    with servers.s3_server() as url:
        yield url


@pytest.fixture(scope="module")
def s3(endpoint):
    """An s3fs filesystem on ``endpoint`` with the server's test keys. It holds no bucket: a module makes
    its own (overriding this fixture with one that takes it and makes the bucket, or in a fixture of its
    own)."""
    s3fs = pytest.importorskip("s3fs")
    import servers

    key, secret = servers.S3_ENV["AWS_ACCESS_KEY_ID"], servers.S3_ENV["AWS_SECRET_ACCESS_KEY"]
    return s3fs.S3FileSystem(key=key, secret=secret, endpoint_url=endpoint)


def sum_counts(tables: list[pa.Table]) -> pa.Table:
    """One table in which each token appears once, with the sum of its counts: the plain way (Arrow's
    group-by), that ``compiled.sum_sorted`` and the reduce are held to."""
    tables = [table.cast(LARGE_COUNTS_SCHEMA) for table in tables]  # binary, large, or both
    table = pa.concat_tables(tables) if tables else LARGE_COUNTS_SCHEMA.empty_table()
    summed = table.group_by("token").aggregate([("count", "sum")])
    size = pc.sum(pc.binary_length(summed["token"])).as_py() or 0
    schema = LARGE_COUNTS_SCHEMA if size > BINARY_LIMIT else COUNTS_SCHEMA
    return pa.table({"token": summed["token"], "count": summed["count_sum"]}).cast(schema)
