"""HTTP(S) inputs: text, compressed text, JSON Lines and Parquet read from a real web server on
127.0.0.1 (``servers.http_server``): one that serves byte ranges, one that does not, one that gives no
size, a redirect, a 404, a refused connection, a server that stops mid-file, and HTTPS with a
certificate of a private authority, trusted and not; on the embedded
LocalCluster and on `dask scheduler` / `dask worker` processes in folders of their own. Every result
is held to the reference trainer (or ``Tokenizer.encode``) on the same documents."""

from __future__ import annotations

import gzip
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import commands
import corpus
import dask
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import servers
import timing

from bpe_dask import BpeDaskError, Tokenizer, count_words, encode, evaluate, train
from bpe_dask.io.inputs import expand_inputs
from bpe_dask.io.plan import plan_ranges
from bpe_dask.io.storage import Store
from bpe_dask.rules import reference
from bpe_dask.rules.pretokenize import Pretokenizer
from conftest import read_reference_merges

pytest.importorskip("aiohttp")

EOT = "<|endoftext|>"
VOCAB_SIZE = 256 + 1 + 150
REPO = Path(__file__).resolve().parent.parent
BPE_DASK = str(Path(sys.executable).parent / "bpe-dask")


@pytest.fixture(scope="module")
def documents() -> list[str]:
    """Documents of Zipf words and of mixed scripts, emoji and control characters (~140 KB)."""
    return (corpus.words_corpus(41, 20000) + EOT + corpus.mixed_corpus(42, 30)).split(EOT)


@pytest.fixture(scope="module")
def text(documents) -> str:
    return EOT.join(documents)


@pytest.fixture(scope="module")
def folder(documents, text, tmp_path_factory) -> Path:
    """The same documents as text, gzipped text, JSON Lines and Parquet (several row groups)."""
    folder = tmp_path_factory.mktemp("served")
    (folder / "corpus.txt").write_bytes(text.encode())
    (folder / "corpus.txt.gz").write_bytes(gzip.compress(text.encode()))
    lines = "".join(json.dumps({"text": d}) + "\n" for d in documents)
    (folder / "docs.jsonl").write_text(lines, encoding="utf-8")
    pq.write_table(pa.table({"text": documents}), folder / "docs.parquet", row_group_size=len(documents) // 8)
    return folder


@pytest.fixture(scope="module")
def server(folder):
    with servers.http_server(folder) as running:
        yield running


@pytest.fixture(scope="module")
def client():
    """A cluster of threads in this process, shared by the module's Python-API jobs (cheap to start)."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0"
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def expected(text) -> list[tuple[bytes, bytes]]:
    """The reference trainer's merges of the documents joined by the special token."""
    return reference.train([text], VOCAB_SIZE, [EOT])[1]


def merges_of(out: Path) -> list[tuple[bytes, bytes]]:
    return read_reference_merges(out / "merges.txt")


def ranged_gets(server: servers.HttpServer, prefix: str) -> list[str]:
    """The Range headers of the GETs of URLs under ``prefix``, but for the planner's one-byte probe."""
    gets = [(path, r) for method, path, r in server.requests if method == "GET" and path.startswith(prefix)]
    return [r for _, r in gets if r not in (None, "bytes=0-0")]


def gets_of(server: servers.HttpServer, path: str) -> list[str | None]:
    """The Range header of each GET of ``path``, in order (``None``: the whole file)."""
    return [r for method, p, r in server.requests if method == "GET" and p == path]


# --- planning: ranges cut where the local file is cut ------------------------------------------------


@pytest.mark.parametrize("chunk_size", [5000, 40000])
def test_a_ranged_url_is_cut_where_the_same_local_file_is(server, folder, chunk_size):
    pretokenizer = Pretokenizer([EOT])
    for name in ("corpus.txt", "docs.jsonl", "docs.parquet"):
        local = plan_ranges(expand_inputs([str(folder / name)]), chunk_size, pretokenizer)
        files = expand_inputs([f"{server.url}/ranged/{name}"], Store())
        remote = plan_ranges(files, chunk_size, pretokenizer)
        assert [(p.start, p.end) for p in remote] == [(p.start, p.end) for p in local], name
        assert len(remote) > 1
        assert all(p.file.url.startswith("http://") for p in remote)


# --- jobs over HTTP, on the Python API ---------------------------------------------------------------


def test_train_on_byte_ranges_of_a_url(server, client, expected, tmp_path):
    server.requests.clear()
    report = train(f"{server.url}/ranged/corpus.txt", VOCAB_SIZE, str(tmp_path / "tok"), [EOT],
                   client=client, chunk_size="16KiB")  # fmt: skip
    assert merges_of(tmp_path / "tok") == expected
    assert report["partitions"] > 5
    assert len(ranged_gets(server, "/ranged/")) >= report["partitions"] - 1  # the ranges, read as ranges


def test_compressed_text_json_lines_and_parquet_over_http(server, client, text, tmp_path):
    """Each file's format and compression by its name, not by a query after it (``?download=true``)."""
    names = ("corpus.txt.gz?download=true", "docs.jsonl", "docs.parquet?x=1.txt")
    inputs = [f"{server.url}/ranged/{name}" for name in names]
    report = train(inputs, VOCAB_SIZE, str(tmp_path / "tok"), [EOT], client=client, chunk_size="16KiB")
    assert merges_of(tmp_path / "tok") == reference.train([text] * 3, VOCAB_SIZE, [EOT])[1]
    assert report["partitions"] > 6  # the .gz whole, the others in parts


def test_a_server_without_ranges_is_read_whole_as_a_stream(server, client, text, tmp_path, caplog):
    """The planner asks once (a one-byte range), hears the whole file, and cuts nothing: each file is one
    task that reads the file in one GET, with a warning saying what to do. ``cat_file`` of a window would
    have handed back the whole file as the window."""
    server.requests.clear()
    inputs = [f"{server.url}/whole/corpus.txt", f"{server.url}/whole/docs.jsonl"]
    with caplog.at_level(logging.WARNING, logger="bpe_dask.io.plan"):
        report = train(inputs, VOCAB_SIZE, str(tmp_path / "tok"), [EOT], client=client, chunk_size="16KiB")
    assert merges_of(tmp_path / "tok") == reference.train([text] * 2, VOCAB_SIZE, [EOT])[1]
    assert report["partitions"] == 2
    assert ranged_gets(server, "/whole/") == []
    warnings = [r.getMessage() for r in caplog.records if "does not serve byte ranges" in r.getMessage()]
    assert len(warnings) == 2 and "serve it from a server that does, or download it first" in warnings[0]


def test_a_server_that_gives_no_size_and_a_redirect(server, client, folder, text, tmp_path):
    """No Content-Length: the file is one task read to its end (not an empty input), and the report
    counts the bytes it held once read (it counted 0); a 302 is followed, ranges and all."""
    server.requests.clear()
    inputs = [f"{server.url}/unsized/corpus.txt", f"{server.url}/redirect/ranged/docs.jsonl"]
    report = train(inputs, VOCAB_SIZE, str(tmp_path / "tok"), [EOT], client=client, chunk_size="16KiB")
    assert merges_of(tmp_path / "tok") == reference.train([text] * 2, VOCAB_SIZE, [EOT])[1]
    assert report["partitions"] > 3
    assert ranged_gets(server, "/redirect/ranged/") and ranged_gets(server, "/ranged/docs.jsonl")
    sizes = {name: (folder / name).stat().st_size for name in ("corpus.txt", "docs.jsonl")}
    assert report["input_bytes"] == sum(sizes.values())
    for where in ({"client": client}, {"in_process": True}):
        counted = count_words(f"{server.url}/unsized/corpus.txt", [EOT], **where)
        assert counted.input_bytes == counted.report()["input_bytes"] == sizes["corpus.txt"], where
    tokenizer = Tokenizer.load(tmp_path / "tok")
    encoded = encode(inputs[0], tokenizer, str(tmp_path / "ids.bin"), client=client)
    assert encoded["input_bytes"] == sizes["corpus.txt"]
    assert np.fromfile(tmp_path / "ids.bin", encoded["dtype"]).tolist() == tokenizer.encode(text)
    for where in ({"client": client}, {"in_process": True}):
        evaluated = evaluate(inputs[0], {"tok": tokenizer}, **where)
        assert evaluated["input_bytes"] == sizes["corpus.txt"], where


def test_a_busy_server_is_asked_again(server, client, text, tmp_path):
    """A 503 (as a dropped connection) may pass: planning and tasks ask again (``bpe-dask.retries``);
    each range is refused once."""
    server.requests.clear()
    inputs = [f"{server.url}/busy/{name}" for name in ("corpus.txt", "docs.jsonl", "docs.parquet")]
    with dask.config.set({"bpe-dask.retry-pause": 0.01}):
        report = train(inputs, VOCAB_SIZE, str(tmp_path / "tok"), [EOT], client=client, chunk_size="32KiB")
    assert merges_of(tmp_path / "tok") == reference.train([text] * 3, VOCAB_SIZE, [EOT])[1]
    assert report["partitions"] > 6
    ranges = [r for m, p, r in server.requests if m == "GET" and p.startswith("/busy/") and r]
    assert len(ranges) > len(set(ranges)) > 6  # refused, then served


def test_count_and_encode_over_http(server, client, text, tmp_path):
    counts = count_words(f"{server.url}/ranged/corpus.txt", [EOT], client=client, chunk_size="16KiB").table()
    got = dict(zip(counts["token"].to_pylist(), counts["count"].to_pylist(), strict=True))
    assert got == reference.pretokenize([text], [EOT])
    vocab, merges = reference.train([text], VOCAB_SIZE, [EOT])
    tokenizer = Tokenizer(vocab, merges, [EOT])
    report = encode(f"{server.url}/ranged/corpus.txt", tokenizer, str(tmp_path / "ids.bin"), client=client,
                    chunk_size="16KiB")  # fmt: skip
    assert report["shards"] > 5
    ids = np.fromfile(tmp_path / "ids.bin", report["dtype"]).tolist()
    assert ids == reference.encode(text, vocab, merges, [EOT])


def test_storage_options_reach_every_request(server, text):
    """Headers in the storage options go with every request: the listing's, the planner's probe and
    windows, the reads. Without them the server's 401 is the error."""
    url = f"{server.url}/private/corpus.txt"
    options = {"headers": {"Authorization": f"Bearer {servers.HTTP_TOKEN}"}}
    counted = count_words(url, [EOT], in_process=True, chunk_size="16KiB", storage_options=options)
    counts = counted.table()
    assert dict(zip(counts["token"].to_pylist(), counts["count"].to_pylist(), strict=True)) == (
        reference.pretokenize([text], [EOT])
    )
    assert counted.partitions > 5
    with pytest.raises(BpeDaskError, match=r"read http://.*/private/corpus\.txt: HTTP 401 Unauthorized$"):
        count_words(url, [EOT], in_process=True)


def test_a_glob_over_an_index_page(server, text):
    """fsspec lists the files an index page links to, with no sizes: each is asked for its own."""
    counted = count_words(f"{server.url}/ranged/*.jsonl", [EOT], in_process=True, chunk_size="16KiB")
    assert counted.input_files == [f"{server.url}/ranged/docs.jsonl"] and counted.partitions > 5
    counts = counted.table()
    assert dict(zip(counts["token"].to_pylist(), counts["count"].to_pylist(), strict=True)) == (
        reference.pretokenize([text], [EOT])
    )


def test_parquet_from_a_server_without_ranges_is_downloaded_whole(server, client, folder, documents, text,
                                                                  expected, tmp_path):  # fmt: skip
    """A server that answers a range request with the whole file (``python -m http.server``'s kind), or
    says no size: the Parquet file is read whole, as pandas reads it, all its row groups one task (a
    task per part would each download the whole file), so it is downloaded twice: by the planner for
    its footer, and by its task. The merges, counts and ids are those of the same file from a server
    with ranges, which cuts it into parts."""
    size = (folder / "docs.parquet").stat().st_size
    ranged = train(f"{server.url}/ranged/docs.parquet", VOCAB_SIZE, str(tmp_path / "ranged"), [EOT],
                   client=client, chunk_size="16KiB")  # fmt: skip
    assert ranged["partitions"] > 3 and merges_of(tmp_path / "ranged") == expected
    tokenizer = Tokenizer.load(tmp_path / "ranged")
    for mode in ("whole", "unsized"):
        url = f"{server.url}/{mode}/docs.parquet"
        report = train(url, VOCAB_SIZE, str(tmp_path / mode), [EOT], client=client, chunk_size="16KiB")
        assert merges_of(tmp_path / mode) == expected, mode
        assert report["partitions"] == 1 and report["input_bytes"] == size, (mode, report)
        server.requests.clear()  # in this process, no worker asks whether it sees the file: only reads
        counted = count_words(url, [EOT], in_process=True, chunk_size="16KiB")
        if mode == "whole":  # (fsspec asks a server that says no size with a GET whose body it drops)
            assert gets_of(server, "/whole/docs.parquet") == ["bytes=0-0", None, None]  # probe, plan, task
        counts = counted.table()
        assert dict(zip(counts["token"].to_pylist(), counts["count"].to_pylist(), strict=True)) == (
            reference.pretokenize([text], [EOT])
        )
        assert counted.input_bytes == size
        done = encode(url, tokenizer, str(tmp_path / f"{mode}.bin"), client=client, chunk_size="16KiB")
        ids = np.fromfile(tmp_path / f"{mode}.bin", done["dtype"]).tolist()
        assert ids == [i for d in documents for i in tokenizer.encode(d)], mode


@pytest.mark.parametrize("mode", ["whole", "unsized"])
def test_parquet_from_a_server_without_ranges_past_the_bound_is_one_line(server, folder, tmp_path, mode):
    """Past ``bpe-dask.whole-file-limit`` the file is refused in one line naming the bound and the
    setting: before a byte of it is downloaded when the server says its size, as soon as the bound is
    passed when it does not. Nothing is written."""
    size = (folder / "docs.parquet").stat().st_size
    server.requests.clear()
    limit = {"DASK_BPE_DASK__WHOLE_FILE_LIMIT": "64KiB"}
    assert size > 64 * 1024
    done = run_cli("train", f"{server.url}/{mode}/docs.parquet", "--vocab-size", "300", "--out", "tok",
                   cwd=tmp_path, env=limit)  # fmt: skip
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("bpe-dask: error: ")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    held = f"its {size / 1024:.2f} kiB are" if mode == "whole" else "it holds"
    assert errors[0].endswith(
        f"/{mode}/docs.parquet: the server does not serve byte ranges, so reading this Parquet file (its "
        f"footer is at its end) means downloading it whole into memory, and {held} more than "
        "bpe-dask.whole-file-limit (64.00 kiB): download the file first, serve it from a server that does, "
        "or raise the setting"
    ), errors
    assert os.listdir(tmp_path) == []
    server.requests.clear()
    with dask.config.set({"bpe-dask.whole-file-limit": "64KiB"}), pytest.raises(BpeDaskError, match=held):
        count_words(f"{server.url}/{mode}/docs.parquet", [EOT], in_process=True)  # no worker asks: only reads
    if mode == "whole":  # the probe only: the file is never downloaded
        assert gets_of(server, "/whole/docs.parquet") == ["bytes=0-0"]


# --- a cluster of `dask scheduler` and `dask worker` processes ---------------------------------------


def test_on_workers_in_folders_of_their_own(server, text, tmp_path, tmp_path_factory):
    """The worker fetches every byte itself, in two threads: its folder, TMPDIR and HOME are its own."""
    names = ("corpus.txt", "corpus.txt.gz", "docs.jsonl", "docs.parquet")
    inputs = [*(f"{server.url}/ranged/{name}" for name in names), f"{server.url}/whole/docs.jsonl"]
    with servers.separate_machines([tmp_path_factory.getbasetemp()], 1, nthreads=2, private=False) as cluster:
        report = train(inputs, VOCAB_SIZE, str(tmp_path / "tok"), [EOT], scheduler=cluster.address,
                       chunk_size="48KiB")  # fmt: skip
        assert merges_of(tmp_path / "tok") == reference.train([text] * 5, VOCAB_SIZE, [EOT])[1]
        assert report["merge_ran_on"] == "worker" and report["partitions"] > 6
        tokenizer = Tokenizer.load(str(tmp_path / "tok"))
        done = encode(inputs[0], tokenizer, str(tmp_path / "ids.bin"), scheduler=cluster.address,
                      chunk_size="48KiB")  # fmt: skip
    assert done["shards"] > 2
    assert np.fromfile(tmp_path / "ids.bin", done["dtype"]).tolist() == tokenizer.encode(text)


# --- the command line: errors in one line, nothing written --------------------------------------------


def run_cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return commands.bpe_dask(*args, cwd=cwd, env=env, timeout=120)


@pytest.mark.parametrize(
    ("path", "fragments"),
    [
        ("/ranged/missing.txt", ["input not found: http://", "/ranged/missing.txt (HTTP 404 Not Found)"]),
        (
            "/drop/corpus.txt",
            ["cannot read http://", "/drop/corpus.txt: the server stopped sending before the end (received "],
        ),
        (
            None,
            [
                "cannot read http://127.0.0.1:",
                "/corpus.txt: cannot connect to 127.0.0.1:",
                "(connection refused)",
            ],
        ),
    ],
    ids=["404", "drops-mid-read", "connection-refused"],
)
def test_a_failing_url_is_one_line(server, tmp_path, path, fragments):
    url = f"{server.url}{path}" if path else f"http://127.0.0.1:{servers.free_port()}/corpus.txt"
    # The dropped connection is tried again (bpe-dask.retries), briefly, then the job stops.
    quick = {"DASK_BPE_DASK__RETRIES": "1", "DASK_BPE_DASK__RETRY_PAUSE": "0.01"}
    done = run_cli("train", url, "--vocab-size", "300", "--out", "tok", "--workers", "1",
                   cwd=tmp_path, env=quick)  # fmt: skip
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("bpe-dask: error: ")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    assert sorted(os.listdir(tmp_path)) == []  # no tokenizer, no temporary output left behind


def test_https_behind_a_private_certificate_authority(folder, expected, tmp_path, tmp_path_factory):
    """HTTPS from a server whose certificate a private authority signed: trusted as a user trusts one
    (``SSL_CERT_FILE``, which the TLS context aiohttp makes by default reads), cut into ranges and
    trained to the same merges as over HTTP; not trusted, one line saying why and nothing written."""
    authority, *certificate = servers.tls_files(tmp_path_factory.mktemp("tls"))
    with servers.http_server(folder, tuple(certificate)) as secure:
        url = f"{secure.url}/ranged/corpus.txt"
        assert url.startswith("https://127.0.0.1:")
        args = ("train", url, "--vocab-size", str(VOCAB_SIZE), "--special-token", EOT,
                "--chunk-size", "16KiB", "--workers", "2", "-q")  # fmt: skip
        done = run_cli(*args, "--out", "tok", cwd=tmp_path, env={"SSL_CERT_FILE": str(authority)})
        assert done.returncode == 0, done.stderr
        assert merges_of(tmp_path / "tok") == expected
        assert len(ranged_gets(secure, "/ranged/")) > 5  # cut into ranges, each read as one
        untrusted = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
        refused = subprocess.run([BPE_DASK, *args, "--out", "tok2"], cwd=tmp_path, env=untrusted,
                                 capture_output=True, text=True, timeout=timing.seconds(120))  # fmt: skip
    assert refused.returncode == 1, refused.stderr
    errors = [line for line in refused.stderr.splitlines() if line.startswith("bpe-dask: error: ")]
    assert len(errors) == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert url in errors[0] and "certificate verify failed" in errors[0], errors[0]
    assert not (tmp_path / "tok2").exists()


SECRET = "s3cr3t-signature"


def test_a_signed_urls_query_and_a_password_stay_out_of_reports(server, client, expected, tmp_path):
    """A signed URL's query (``X-Amz-Signature=...``) and a user's password before the host are
    credentials: the job reads with them, and the report names the file without them."""
    signed = f"{server.url}/ranged/corpus.txt?X-Amz-Credential=AKIA&X-Amz-Signature={SECRET}"
    report = train(signed, VOCAB_SIZE, str(tmp_path / "tok"), [EOT], client=client, chunk_size="16KiB")
    assert merges_of(tmp_path / "tok") == expected
    assert report["inputs"] == [f"{server.url}/ranged/corpus.txt?<hidden>"]
    assert SECRET not in (tmp_path / "tok" / "report.json").read_text()
    with_password = server.url.replace("http://", f"http://user:{SECRET}@") + "/ranged/corpus.txt"
    counted = count_words(with_password, [EOT], client=client)
    hidden = server.url.replace("http://", "http://<hidden>@") + "/ranged/corpus.txt"
    assert counted.report()["inputs"] == [hidden]
    assert SECRET not in repr(counted)
    tokenizer = Tokenizer.load(tmp_path / "tok")
    encode(signed, tokenizer, str(tmp_path / "ids"), client=client, chunk_size="16KiB")
    written = {p.name: p.read_text() for p in (tmp_path / "ids").iterdir() if p.suffix == ".json"}
    assert sorted(written) == ["index.json", "report.json"]
    assert not [name for name, text in written.items() if SECRET in text], written
    assert json.loads(written["index.json"])["shards"][0]["input"] == report["inputs"][0]


@pytest.mark.parametrize("path", ["/ranged/missing.txt", "/drop/corpus.txt"], ids=["404", "drops-mid-read"])
def test_a_signed_url_failing_is_one_line_without_its_query(server, tmp_path, path):
    url = f"{server.url}{path}?X-Amz-Signature={SECRET}"
    quick = {"DASK_BPE_DASK__RETRIES": "1", "DASK_BPE_DASK__RETRY_PAUSE": "0.01"}
    done = run_cli("train", url, "--vocab-size", "300", "--out", "tok", "--workers", "1",
                   cwd=tmp_path, env=quick)  # fmt: skip
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("bpe-dask: error: ")]
    assert len(errors) == 1 and f"{path}?<hidden>" in errors[0], done.stderr
    assert SECRET not in done.stderr + done.stdout


@pytest.mark.parametrize(
    "url",
    [
        "http://user:p/{SECRET}@127.0.0.1:{port}/corpus.txt",  # a password with a "/", unescaped
        "http://user:p#{SECRET}@127.0.0.1:{port}/corpus.txt",  # ... with a "#"
        "http://user:{SECRET}@127.0.0.1:{port}/folder/",  # a folder, listed
        "http://127.0.0.1:{port}/folder/*.txt?token={SECRET}",  # a glob with a token
    ],
    ids=["slash", "hash", "folder", "glob"],
)
def test_credentials_stay_out_of_the_apis_errors(url):
    """The Python API's error, not only the command line's line: the message of every BpeDaskError
    hides them, whoever wrote it (a password with an unescaped "/" used to show whole, and the
    lister's "cannot read" named the URL as given)."""
    url = url.format(SECRET=SECRET, port=servers.free_port())
    with pytest.raises(BpeDaskError) as error:
        count_words(url, [EOT], in_process=True)
    assert SECRET not in str(error.value) and "<hidden>" in str(error.value), str(error.value)


def test_a_malformed_url_and_an_unknown_scheme_are_one_line(tmp_path):
    """A host fsspec cannot parse, and a scheme no filesystem reads: one line each, exit 1, no
    traceback (hiding the query used to raise again, inside the error handler)."""
    for url, said in ((f"https://[::1/corpus.txt?sig={SECRET}", "Invalid IPv6 URL"),
                      ("foo://bucket/corpus.txt", "no filesystem reads foo://")):  # fmt: skip
        done = run_cli("count", url, "--out", "counts.parquet", cwd=tmp_path)
        assert done.returncode == 1, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        assert said in done.stderr and SECRET not in done.stderr, done.stderr
    assert os.listdir(tmp_path) == []


def test_a_schemes_case_is_no_matter(server, text):
    """``HTTPS://`` and ``HTTP://`` are the same schemes (RFC 3986): fsspec knows them in lower case."""
    url = server.url.replace("http://", "HTTP://") + "/ranged/corpus.txt"
    counted = count_words(url, [EOT], in_process=True, chunk_size="16KiB")
    counts = counted.table()
    assert dict(zip(counts["token"].to_pylist(), counts["count"].to_pylist(), strict=True)) == (
        reference.pretokenize([text], [EOT])
    )
