"""Every example of the documentation runs, as a reader runs it: each ```bash and ```python block of
README.md and of the site's pages (docs/, in the nav's order), page by page, block after block.

The pages run in one folder, in order, as one reader who follows them all in one clone: it holds what
the top of a clone holds (configs/, jobs/, the bundled sample in tests/fixtures/), with the virtual
environment active (`.venv/bin/` on PATH), and what the pages before wrote (the quick start's
out/sample, ...). A block that repeats one already run (README.md's are the guide's) runs once, so
no two pages may write one output. What the examples name and a test can supply, it supplies:

- a reader's own text (`corpus.txt`, `data/*.txt`, ...): small stand-ins (``STAND_INS``);
- `tcp://scheduler:8786` and `~/scheduler.json`: a `dask scheduler` and a `dask worker` started here;
- `s3://my-bucket/`: a moto S3 server (`AWS_ENDPOINT_URL`) and that bucket, with a few files in it;
- port 8765 of 127.0.0.1 (not mkdocs serve's 8000): a free port;
- `python3 -m venv .venv` and `pip install -e ...`: this environment, already installed (the install
  checks that each extra it names exists and is installed, and downloads nothing).

A bash block runs in `bash -e -o pipefail`; after a line that starts a server in the background
(`... &`), the block waits until its port answers, as a reader does before the next line. A ```text
block right after an example is what it prints. A block after `<!-- not run: why -->` is not run, and
``NOT_RUN`` lists every one, so no block is skipped without the test saying so.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import servers
from pages import REPO, Block, examples, pages

from bpe_dask import Tokenizer
from bpe_dask.rules import reference
from conftest import CS336_DIR, read_reference_merges

EOT = "<|endoftext|>"
BIN = Path(sys.executable).parent
# Every block marked `<!-- not run: ... -->`, by page and how its first line starts: none other is
# skipped, and the page must say why.
TEST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/ruff check ."
NOT_RUN = {
    ("README.md", TEST_COMMAND),  # it is what runs these examples
    ("guide/quickstart.md", TEST_COMMAND),
    ("guide/quickstart.md", "HYPOTHESIS_PROFILE=long"),  # 17 minutes
    ("guide/quickstart.md", "mkdir -p data"),  # downloads from the internet
    ("guide/clusters.md", "dask scheduler --scheduler-file ~/scheduler.json &"),  # the test starts one
    ("guide/clusters.md", "export DASK_DISTRIBUTED__COMM__TLS__CA_FILE=/etc/dask/ca.pem"),  # a sketch
    ("guide/vocabulary.md", "python benchmarks/make_corpus.py text --kind openwebtext"),  # minutes of work
}
STORIES = (CS336_DIR / "tinystories_sample.txt").read_text(encoding="utf-8")
STAND_INS = {  # a reader's own files
    "corpus.txt": CS336_DIR / "corpus.en",
    "a.txt": CS336_DIR / "tinystories_sample.txt",
    "b.txt": CS336_DIR / "address.txt",
    "held-out.txt": CS336_DIR / "address.txt",
    "data/TinyStoriesV2-GPT4-train.txt": CS336_DIR / "corpus.en",
    "data/TinyStoriesV2-GPT4-valid.txt": CS336_DIR / "tinystories_sample.txt",
}


def in_bucket() -> dict[str, bytes]:
    """What s3://my-bucket/ holds: OpenWebText-like .txt.gz files, a FineWeb-like Parquet file of
    documents."""
    parquet = io.BytesIO()
    pq.write_table(pa.table({"text": STORIES.split(EOT), "id": range(STORIES.count(EOT) + 1)}), parquet)
    return {
        "owt/0.txt.gz": gzip.compress((CS336_DIR / "corpus.en").read_bytes()),
        "owt/1.txt.gz": gzip.compress(STORIES.encode()),
        "fineweb/sample/000.parquet": parquet.getvalue(),
    }


# --- what the examples' results must be, beyond running (by page and a phrase of the block) ---------


def stories_trained_and_encoded(folder: Path, _: dict) -> None:
    """The Dask DataFrame example: the merges of the stories joined by <|endoftext|>, and each story's
    ids followed by the separator's."""
    want = reference.train([STORIES], 1000, [EOT])[1]
    assert Tokenizer.load(folder / "out" / "stories").merges == want
    tokenizer = Tokenizer.load(folder / "out" / "stories")
    ids = np.fromfile(folder / "out" / "stories.bin", np.uint16).tolist()
    separated = [[*tokenizer.encode(doc), tokenizer.special_ids[EOT]] for doc in STORIES.split(EOT)]
    assert ids == [i for doc in separated for i in doc]


def http_trained_the_reference_merges(folder: Path, _: dict) -> None:
    merges = read_reference_merges(folder / "out" / "http" / "merges.txt")
    assert merges == read_reference_merges(CS336_DIR / "train-bpe-reference-merges.txt")


def train_bin_decodes_to_the_text(folder: Path, namespace: dict) -> None:
    text = (folder / "data" / "TinyStoriesV2-GPT4-train.txt").read_text(encoding="utf-8")
    assert Tokenizer.load(folder / "out" / "tinystories-10k").decode(namespace["train"].tolist()) == text


def cs336s_merges(folder: Path, namespace: dict) -> None:
    """``train_bpe`` on CS336's corpus at 500: CS336's reference merges."""
    assert namespace["merges"] == read_reference_merges(CS336_DIR / "train-bpe-reference-merges.txt")


CHECKS: dict[tuple[str, str], Callable[[Path, dict], None]] = {
    ("README.md", 'train_bpe("tests/fixtures/cs336/corpus.en", 500'): cs336s_merges,
    ("guide/inputs.md", "dd.from_dict"): stories_trained_and_encoded,
    ("guide/inputs.md", "http.server"): http_trained_the_reference_merges,
    ("guide/encoding.md", "np.memmap"): train_bin_decodes_to_the_text,
}


# --- the setting --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bucket() -> Iterator[str]:
    pytest.importorskip("moto")
    import boto3

    with servers.s3_server() as endpoint:
        keys = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **keys)
        s3.create_bucket(Bucket="my-bucket")
        for key, data in in_bucket().items():
            s3.put_object(Bucket="my-bucket", Key=key, Body=data)
        yield endpoint


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[str, dict]]:
    """A scheduler and a worker of two threads, with S3 credentials of its own; and the scheduler's
    file (what `dask scheduler --scheduler-file` writes)."""
    from distributed import Client

    with servers.cluster_processes(1, nthreads=2) as running:
        with Client(running.address, timeout="30s") as client:
            identity = {k: v for k, v in client.scheduler_info().items() if k != "workers"}
        yield running.address, identity


@pytest.fixture(scope="module")
def folder(tmp_path_factory, cluster) -> Path:
    """The reader's clone, the same for every page."""
    folder = tmp_path_factory.mktemp("clone")
    reader_folder(folder, cluster[1])
    return folder


# The page whose blocks are not run: docs/performance.md's are benchmarks of minutes to hours and the
# install of the peers from the internet; test_performance_page checks each against its script's parser.
PAGES_NOT_RUN = {"performance.md"}


@pytest.mark.parametrize("page", [page for page in pages() if page not in PAGES_NOT_RUN])
def test_every_example_of_the_page_runs(page, cluster, bucket, folder, monkeypatch):
    if page != "README.md":
        assert (folder / "out" / "sample" / "_SUCCESS").exists(), "README.md's quick start runs first"
    port = servers.free_port()
    provided = [("tcp://scheduler:8786", cluster[0]), ("127.0.0.1:8765", f"127.0.0.1:{port}"),
                ("http.server 8765", f"http.server {port}")]  # fmt: skip
    blocks = examples(page)
    marked = [b.code for b in blocks if b.not_run]
    listed = [start for where, start in NOT_RUN if where == page]
    marked_as_listed = sorted(next((s for s in listed if c.startswith(s)), c) for c in marked)
    assert marked_as_listed == sorted(listed), "the blocks marked not run, against NOT_RUN"
    ran = folder / ".ran"
    done = set(ran.read_text(encoding="utf-8").split("\0")) if ran.exists() else set()
    for block in blocks:
        if block.not_run or block.code in done:
            continue
        code = block.code
        for name, value in provided:
            code = code.replace(name, value)
        if block.language == "bash":
            printed = run_bash(block, code, folder, bucket)
            if block.output is not None:
                assert printed.rstrip().splitlines() == block.output.rstrip().splitlines(), block.name
            namespace: dict = {}
        else:
            monkeypatch.chdir(folder)
            namespace = {"__name__": "__main__"}
            exec(compile(code, block.name, "exec"), namespace)
        for (where, phrase), check in CHECKS.items():
            if where == page and phrase in block.code:
                check(folder, namespace)
        done.add(block.code)
    ran.write_text("\0".join(done), encoding="utf-8")


def reader_folder(folder: Path, scheduler_file: dict) -> None:
    """What a reader has at the top of a clone with the environment active, and their own files."""
    for name in ("configs", "jobs"):  # copied: their paths are taken from where they are
        shutil.copytree(REPO / name, folder / name)
    (folder / "tests").mkdir()
    (folder / "tests" / "fixtures").symlink_to(REPO / "tests" / "fixtures")
    for name, source in STAND_INS.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, folder / name)
    (folder / "scheduler.json").write_text(json.dumps(scheduler_file), encoding="utf-8")  # ~ is here
    venv = folder / ".venv" / "bin"
    venv.mkdir(parents=True)
    for name in ("bpe-dask", "dask", "ruff", "python"):
        script(venv / name, f'exec {BIN / name} "$@"')
    # `python3 -m venv .venv` makes the environment: this one, already made.
    script(venv / "python3", f'[ "$1 $2" = "-m venv" ] && exit 0; exec {sys.executable} "$@"')
    (venv / "pip").write_text(f"#!{sys.executable}\n{PIP}", encoding="utf-8")
    (venv / "pip").chmod(0o755)
    (venv / "activate").write_text(f'export PATH="{venv}:$PATH"\n', encoding="utf-8")


def script(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(0o755)


WAIT_FOR_PORTS = """
__wait_for_ports() {{ {python} -c '
import socket, sys, time
deadline = time.monotonic() + 120
for port in map(int, sys.argv[1:]):
    while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
        assert time.monotonic() < deadline, f"nothing listens on port {{port}}"
        time.sleep(0.05)
' "$@"; }}
"""


def run_bash(block: Block, code: str, folder: Path, endpoint: str) -> str:
    """Run a bash block in ``folder``; its stdout. A line that starts a server in the background is
    followed by a wait for the ports it names."""
    lines = []
    for line in code.splitlines():
        lines.append(line)
        if line.rstrip().endswith("&") and not line.rstrip().endswith("&&"):
            ports = re.findall(r"(?:127\.0\.0\.1:|http\.server )(\d+)", line)
            lines += [f"__wait_for_ports {' '.join(ports)}"] if ports else []
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DASK_"))}
    env.update(servers.S3_ENV, AWS_ENDPOINT_URL=endpoint, HOME=str(folder))
    env.setdefault("MPLCONFIGDIR", str(Path.home() / ".config" / "matplotlib"))  # its font cache, once
    env["PATH"] = f"{folder / '.venv' / 'bin'}:{env['PATH']}"
    out, err = folder / ".stdout", folder / ".stderr"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        script_text = WAIT_FOR_PORTS.format(python=sys.executable) + "\n".join(lines)
        process = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", script_text], cwd=folder, env=env,
                                   stdout=stdout, stderr=stderr, start_new_session=True)  # fmt: skip
        try:
            returncode = process.wait(timeout=600)
        finally:
            with suppress(ProcessLookupError):  # what the block left running in the background
                os.killpg(process.pid, signal.SIGTERM)
    printed = out.read_text(encoding="utf-8")
    assert returncode == 0, f"{block.name} exited with {returncode}:\n{err.read_text(encoding='utf-8')}"
    return printed


# `pip install -e SPEC` in an example: SPEC must be this repository, and each extra it names one of the
# package's, installed here. Nothing is downloaded.
PIP = """
import importlib.metadata, re, sys

args = sys.argv[1:]
assert args[:2] == ["install", "-e"] and len(args) == 3, args
spec = re.fullmatch(r"\\.(?:\\[([\\w,-]+)\\])?", args[2])
assert spec, f"the examples install this repository only, not {args[2]}"
for extra in spec.group(1).split(",") if spec.group(1) else []:
    assert extra in importlib.metadata.metadata("bpe-dask").get_all("Provides-Extra"), f"no extra {extra!r}"
    for requirement in importlib.metadata.requires("bpe-dask"):
        if f'extra == "{extra}"' in requirement:
            importlib.metadata.version(re.split(r"[<>=\\[; ]", requirement)[0])  # installed
"""
